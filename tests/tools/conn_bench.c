/*
 * conn_bench: what one HTTP(S) request costs on loopback, with the CA
 * options api/http.c uses, for the tls scenario and the loopback limit.
 *
 *   conn_bench MODE URL N [CA_FILE]
 *
 * Every request is a GET of URL on one curl multi handle, each with its own
 * easy handle, as api/http.c does: the multi handle is what holds the
 * connection cache and libcurl's cached CA store across requests.
 *
 * MODE:
 *   keepalive  the first request connects, the N after it reuse that connection
 *   fresh      N requests, each on a new connection (FRESH_CONNECT, FORBID_REUSE)
 *   runner     as fresh, with api/http.c's CA options: CURLOPT_CAPATH unset and
 *              CURLOPT_CAINFO a private bundle of the system CAs plus CA_FILE
 *   capath     as runner, but libcurl's built-in CAPATH (Debian: /etc/ssl/certs)
 *              left in place: then libcurl does not cache the CA store and
 *              parses the whole bundle again for every connection
 *   cacert     as fresh, with what `curl --cacert CA_FILE` sets: CAINFO is
 *              CA_FILE alone, the built-in CAPATH left in place
 *
 * Prints one line per measured request, "total_us=T connect_us=C tls_us=H",
 * where tls_us is CURLINFO_APPCONNECT_TIME_T minus CURLINFO_CONNECT_TIME_T
 * (0 on a reused or plain connection).  A failed request is an error (exit 1).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

enum mode { KEEPALIVE, FRESH, RUNNER, CAPATH, CACERT };

static size_t
discard(char *p, size_t size, size_t n, void *data)
{
	(void)p;
	(void)data;
	return size * n;
}

static int
copy_into(FILE *out, const char *path)
{
	char buf[65536];
	size_t n;
	FILE *in = fopen(path, "rb");

	if (in == NULL)
		return -1;
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		if (fwrite(buf, 1, n, out) != n) {
			fclose(in);
			return -1;
		}
	fclose(in);
	return 0;
}

/* The system bundle, then ca_file: what api/http.c's ca_bundle() writes. */
static char *
write_bundle(const char *ca_file)
{
	static char path[] = "/tmp/conn-bench-ca-XXXXXX";
	curl_version_info_data *vi = curl_version_info(CURLVERSION_NOW);
	const char *system = vi->cainfo != NULL ? vi->cainfo :
	    "/etc/ssl/certs/ca-certificates.crt";
	int fd = mkstemp(path);
	FILE *f;

	if (fd == -1 || (f = fdopen(fd, "wb")) == NULL)
		return NULL;
	if (access(system, R_OK) == 0)
		(void)copy_into(f, system);
	fputc('\n', f);
	if (copy_into(f, ca_file) != 0 || fclose(f) != 0) {
		unlink(path);
		return NULL;
	}
	return path;
}

static int
one(CURLM *multi, const char *url, enum mode mode, const char *cainfo, int print)
{
	CURL *e = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	CURLMsg *msg;
	CURLcode rc = CURLE_OK;
	curl_off_t total = 0, connect = 0, app = 0;
	long status = 0;
	int running = 1, left;

	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
	/* What the GitLab double asks of every request. */
	curl_easy_setopt(e, CURLOPT_USERAGENT, "runner conn_bench");
	hdrs = curl_slist_append(hdrs, "X-Request-Id: 0123456789abcdef0123456789abcdef");
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
	/* api/http.c's transport options. */
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	curl_easy_setopt(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
	if (mode == RUNNER)
		curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
	if (cainfo != NULL)
		curl_easy_setopt(e, CURLOPT_CAINFO, cainfo);
	if (mode != KEEPALIVE) {
		curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
		curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
	}
	curl_multi_add_handle(multi, e);
	while (running) {
		if (curl_multi_perform(multi, &running) != CURLM_OK)
			break;
		if (running)
			curl_multi_poll(multi, NULL, 0, 1000, NULL);
	}
	while ((msg = curl_multi_info_read(multi, &left)) != NULL)
		if (msg->msg == CURLMSG_DONE)
			rc = msg->data.result;
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(e, CURLINFO_TOTAL_TIME_T, &total);
	curl_easy_getinfo(e, CURLINFO_CONNECT_TIME_T, &connect);
	curl_easy_getinfo(e, CURLINFO_APPCONNECT_TIME_T, &app);
	curl_multi_remove_handle(multi, e);
	curl_easy_cleanup(e);
	curl_slist_free_all(hdrs);
	if (rc != CURLE_OK || status == 0) {
		fprintf(stderr, "conn_bench: %s: %s\n", url, curl_easy_strerror(rc));
		return -1;
	}
	if (print)
		printf("total_us=%lld connect_us=%lld tls_us=%lld\n", (long long)total,
		    (long long)connect, (long long)(app > connect ? app - connect : 0));
	return 0;
}

int
main(int argc, char **argv)
{
	enum mode mode;
	const char *cainfo = NULL;
	char *bundle = NULL;
	CURLM *multi;
	int n, i, rc = 0;

	if (argc < 4) {
		fprintf(stderr, "usage: conn_bench keepalive|fresh|runner|capath|cacert URL N [CA_FILE]\n");
		return 2;
	}
	if (strcmp(argv[1], "keepalive") == 0)
		mode = KEEPALIVE;
	else if (strcmp(argv[1], "fresh") == 0)
		mode = FRESH;
	else if (strcmp(argv[1], "runner") == 0)
		mode = RUNNER;
	else if (strcmp(argv[1], "capath") == 0)
		mode = CAPATH;
	else if (strcmp(argv[1], "cacert") == 0)
		mode = CACERT;
	else {
		fprintf(stderr, "conn_bench: unknown mode %s\n", argv[1]);
		return 2;
	}
	n = atoi(argv[3]);
	if (argc > 4) {
		if (mode == RUNNER || mode == CAPATH) {
			if ((cainfo = bundle = write_bundle(argv[4])) == NULL) {
				fprintf(stderr, "conn_bench: cannot write the CA bundle\n");
				return 1;
			}
		} else
			cainfo = argv[4];
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	multi = curl_multi_init();
	/* keepalive: the first request opens the connection and is not counted. */
	if (mode == KEEPALIVE && one(multi, argv[2], mode, cainfo, 0) != 0)
		rc = 1;
	for (i = 0; i < n && rc == 0; i++)
		if (one(multi, argv[2], mode, cainfo, 1) != 0)
			rc = 1;
	curl_multi_cleanup(multi);
	curl_global_cleanup();
	if (bundle != NULL)
		unlink(bundle);
	return rc;
}

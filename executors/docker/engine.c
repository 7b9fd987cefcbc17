/*
 * The Docker Engine API client: an address parsed once, one struct http
 * of its own (peer "the Docker engine", no retries), and calls that are
 * one http_req each, with the negotiated version in front of their path.
 *
 * A call's life: engine_call() links it into e->calls and starts its
 * request; on_req_done() unlinks it, tells the caller and frees it.  The
 * engine itself is freed by engine_close() only when no call is left and
 * no engine callback is on the stack (e->depth), so a caller may close the
 * engine from inside any callback.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "api/http.h"
#include "executors/docker/engine.h"
#include "lib/buf.h"
#include "lib/xmalloc.h"

#define DEFAULT_HOST		"unix:///var/run/docker.sock"
#define DEFAULT_RESPONSE_CAP	(4 * 1024 * 1024)
/* libcurl wants a number: ~100 years is "no deadline" (engine.h). */
#define NO_DEADLINE_MS		(100ULL * 365 * 24 * 3600 * 1000)
#define VERSION_SIZE		16

enum call_kind {
	CALL_PLAIN,
	CALL_PING,	/* engine_connect's GET /_ping */
	CALL_VERSION,	/* its GET /version, when the ping had no Api-Version */
};

struct engine_call {
	struct engine		*e;
	struct engine_call	*prev, *next;	/* e->calls */
	enum call_kind		 kind;
	struct http_req		*req;
	engine_done_cb		*done;
	engine_data_cb		*on_data;
	void			*arg;
	bool			 canceled;
};

struct engine {
	uv_loop_t		*loop;
	struct http		*http;
	char			*address;	/* as written or defaulted */
	struct engine_endpoint	 ep;		/* its strings owned here */
	char			*unix_path, *base_url, *ca_file, *cert_file, *key_file;
	char			 version[VERSION_SIZE];	/* "" until negotiated */
	struct engine_call	*calls;
	unsigned		 depth;		/* engine callbacks on the stack */
	bool			 closing;
};

/* ---- pure parts ---- */

/* "1.41" as 1 and 41; -1 if it is not major.minor. */
static int
version_parse(const char *s, int *major, int *minor)
{
	char *end;
	long ma, mi;

	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	ma = strtol(s, &end, 10);
	if (*end != '.' || end[1] < '0' || end[1] > '9')
		return -1;
	mi = strtol(end + 1, &end, 10);
	if (*end != '\0' || ma > 1000 || mi > 1000)
		return -1;
	*major = (int)ma;
	*minor = (int)mi;
	return 0;
}

static int
version_cmp(int ma1, int mi1, int ma2, int mi2)
{
	if (ma1 != ma2)
		return ma1 < ma2 ? -1 : 1;
	return mi1 < mi2 ? -1 : mi1 > mi2 ? 1 : 0;
}

/*
 * The version to speak with a server that speaks up to server (and, if it
 * said so, no older than server_min): the newest both know.  -1 with *why
 * (allocated, no address in it) if there is none.
 */
static int
version_pick(const char *server, const char *server_min, char *out, size_t size,
    char **why)
{
	int sma, smi, lma, lmi, hma, hmi, mma, mmi;

	*why = NULL;
	if (version_parse(ENGINE_API_MIN, &lma, &lmi) != 0 ||
	    version_parse(ENGINE_API_MAX, &hma, &hmi) != 0)
		abort();	/* the constants of engine.h */
	if (version_parse(server, &sma, &smi) != 0) {
		*why = xasprintf("it did not say which API version it speaks (\"%s\")",
		    server != NULL ? server : "");
		return -1;
	}
	if (version_cmp(sma, smi, lma, lmi) < 0) {
		*why = xasprintf("it speaks API version %d.%d, older than %s, the oldest "
		    "this runner speaks: upgrade Docker", sma, smi, ENGINE_API_MIN);
		return -1;
	}
	if (version_cmp(sma, smi, hma, hmi) > 0) {
		sma = hma;
		smi = hmi;
	}
	if (server_min != NULL && *server_min != '\0' &&
	    version_parse(server_min, &mma, &mmi) == 0 &&
	    version_cmp(mma, mmi, sma, smi) > 0) {
		*why = xasprintf("it needs API version %d.%d or newer, and this runner "
		    "speaks up to %s", mma, mmi, ENGINE_API_MAX);
		return -1;
	}
	snprintf(out, size, "%d.%d", sma, smi);
	return 0;
}

/* Where the engine is, worked out from the configuration and the environment. */
struct host_spec {
	char	*address;	/* as written or defaulted */
	char	*unix_path;	/* or NULL */
	char	*base_url;
	char	*ca_file, *cert_file, *key_file;
	bool	 tls_verify;
};

static void
host_spec_free(struct host_spec *h)
{
	free(h->address);
	free(h->unix_path);
	free(h->base_url);
	free(h->ca_file);
	free(h->cert_file);
	free(h->key_file);
	memset(h, 0, sizeof(*h));
}

/*
 * host as the docker CLI takes DOCKER_HOST: unix:///path, or tcp://host:port
 * (http, or https with cert_dir's ca.pem, cert.pem and key.pem when
 * verifying).  NULL host: the default socket.  -1 with *cause, one line
 * naming the host.
 */
static int
host_parse(const char *host, bool tls_verify, const char *cert_dir, struct host_spec *out,
    char **cause)
{
	const char *rest, *colon, *tail;

	memset(out, 0, sizeof(*out));
	*cause = NULL;
	if (host == NULL || *host == '\0')
		host = DEFAULT_HOST;
	if (strncmp(host, "unix://", 7) == 0) {
		rest = host + 7;
		if (*rest != '/') {
			*cause = xasprintf("docker host \"%s\": a unix socket needs an "
			    "absolute path (unix:///var/run/docker.sock)", host);
			return -1;
		}
		out->address = xstrdup(host);
		out->unix_path = xstrdup(rest);
		/* dockerd ignores the host part; it only has to be a valid URL. */
		out->base_url = xstrdup("http://docker");
		return 0;
	}
	if (strncmp(host, "tcp://", 6) == 0) {
		rest = host + 6;
		tail = strpbrk(rest, "/?#@");
		if (*rest == '\0' || *rest == ':' || *rest == '/' ||
		    (tail != NULL && strcmp(tail, "/") != 0)) {
			*cause = xasprintf("docker host \"%s\": expected tcp://host:port", host);
			return -1;
		}
		colon = strrchr(rest, ':');
		if (colon != NULL && strchr(colon, ']') != NULL)
			colon = NULL;	/* [v6] without a port */
		out->address = xstrdup(host);
		out->tls_verify = tls_verify;
		/* The CLI's default ports: 2376 with TLS, 2375 without. */
		out->base_url = xasprintf("%s://%.*s%s", tls_verify ? "https" : "http",
		    (int)strcspn(rest, "/"), rest,
		    colon != NULL ? "" : tls_verify ? ":2376" : ":2375");
		if (tls_verify) {
			if (cert_dir == NULL || *cert_dir == '\0') {
				host_spec_free(out);
				*cause = xasprintf("docker host \"%s\": TLS verification needs "
				    "a certificate directory (tls_cert_path or "
				    "DOCKER_CERT_PATH)", host);
				return -1;
			}
			out->ca_file = xasprintf("%s/ca.pem", cert_dir);
			out->cert_file = xasprintf("%s/cert.pem", cert_dir);
			out->key_file = xasprintf("%s/key.pem", cert_dir);
		}
		return 0;
	}
	if ((colon = strstr(host, "://")) != NULL)
		*cause = xasprintf("docker host \"%s\": %.*s:// is not supported, only "
		    "unix:///path and tcp://host:port", host, (int)(colon - host), host);
	else
		*cause = xasprintf("docker host \"%s\": not unix:///path nor tcp://host:port",
		    host);
	return -1;
}

/* The endpoint label of a call: its path, ids and names as {id}, no query. */
static void
endpoint_label(const char *path, char *out, size_t size)
{
	static const char *const keep[] = { "create", "json", "prune", "load", "search",
	    "get", "import", NULL };
	static const char *const objects[] = { "containers", "exec", "volumes", "networks",
	    "plugins", NULL };
	struct buf b;
	const char *p = path, *seg, *end;
	size_t n;
	int i, after_object = 0, images = 0;

	buf_init(&b, size > 0 ? size - 1 : 0);
	buf_puts(&b, "docker:");
	end = p + strcspn(p, "?");
	while (p < end) {
		while (p < end && *p == '/')
			p++;
		if (p == end)
			break;
		seg = p;
		n = strcspn(seg, "/?");
		if (seg + n > end)
			n = (size_t)(end - seg);
		p = seg + n;
		buf_putc(&b, '/');
		if (images) {
			/* An image's name has slashes: all of it up to its verb is {name}. */
			const char *last = end;

			while (last > seg && last[-1] != '/')
				last--;
			if (last == seg || (strncmp(last, "json", 4) != 0 &&
			    strncmp(last, "tag", 3) != 0 && strncmp(last, "push", 4) != 0 &&
			    strncmp(last, "history", 7) != 0)) {
				buf_puts(&b, "{name}");
				break;
			}
			buf_puts(&b, "{name}/");
			buf_append(&b, last, (size_t)(end - last));
			break;
		}
		if (after_object) {
			after_object = 0;
			for (i = 0; keep[i] != NULL; i++)
				if (strlen(keep[i]) == n && strncmp(seg, keep[i], n) == 0)
					break;
			if (keep[i] == NULL) {
				buf_puts(&b, "{id}");
				continue;
			}
		} else if (n == 6 && strncmp(seg, "images", 6) == 0 && b.len == 8) {
			buf_append(&b, seg, n);
			/* Only /images/{name}...: /images/create, /images/json are verbs. */
			if (p < end) {
				const char *next = p + 1;
				size_t m = strcspn(next, "/?");

				for (i = 0; keep[i] != NULL; i++)
					if (strlen(keep[i]) == m && strncmp(next, keep[i], m) == 0)
						break;
				images = keep[i] == NULL;
			}
			continue;
		} else if (b.len == 8) {
			for (i = 0; objects[i] != NULL; i++)
				if (strlen(objects[i]) == n && strncmp(seg, objects[i], n) == 0)
					after_object = 1;
		}
		buf_append(&b, seg, n);
	}
	snprintf(out, size, "%s", b.ptr);
	buf_release(&b);
}

/* The daemon's {"message": ...}, else the body's first line, else "HTTP n". */
static char *
error_message(long status, const char *body, size_t len)
{
	cJSON *j = cJSON_ParseWithLength(body, len), *m;
	char *s;
	size_t n;

	if (j != NULL && cJSON_IsString(m = cJSON_GetObjectItemCaseSensitive(j, "message")) &&
	    *m->valuestring != '\0') {
		s = xstrdup(m->valuestring);
		cJSON_Delete(j);
		return s;
	}
	cJSON_Delete(j);
	while (len > 0 && (*body == ' ' || *body == '\n' || *body == '\r')) {
		body++;
		len--;
	}
	n = strcspn(body, "\r\n");
	if (n > len)
		n = len;
	if (n > 512)
		n = 512;
	if (n == 0)
		return xasprintf("HTTP %ld", status);
	return xasprintf("HTTP %ld: %.*s", status, (int)n, body);
}

/* ---- the engine ---- */

struct engine *
engine_new(const struct engine_config *cfg, char **cause)
{
	struct http_config hc = { 0 };
	struct host_spec hs;
	const char *host = cfg->host, *cert_dir = cfg->tls_cert_path, *v;
	char *home_dir = NULL;
	bool verify = cfg->tls_verify;
	struct engine *e;

	/* As gitlab-runner: the environment speaks only when host is not set. */
	if (host == NULL || *host == '\0') {
		host = getenv("DOCKER_HOST");
		if ((v = getenv("DOCKER_TLS_VERIFY")) != NULL && *v != '\0')
			verify = true;
	}
	if (cert_dir == NULL || *cert_dir == '\0') {
		cert_dir = getenv("DOCKER_CERT_PATH");
		if ((cert_dir == NULL || *cert_dir == '\0') && (v = getenv("HOME")) != NULL)
			cert_dir = home_dir = xasprintf("%s/.docker", v);
	}
	if (host_parse(host, verify, cert_dir, &hs, cause) != 0) {
		free(home_dir);
		return NULL;
	}
	free(home_dir);
	e = xcalloc(1, sizeof(*e));
	e->loop = cfg->loop;
	e->address = hs.address;
	e->unix_path = hs.unix_path;
	e->base_url = hs.base_url;
	e->ca_file = hs.ca_file;
	e->cert_file = hs.cert_file;
	e->key_file = hs.key_file;
	e->ep = (struct engine_endpoint){
		.unix_path = e->unix_path,
		.base_url = e->base_url,
		.ca_file = e->ca_file,
		.cert_file = e->cert_file,
		.key_file = e->key_file,
		.tls_verify = hs.tls_verify,
	};
	hc.loop = cfg->loop;
	hc.user_agent = cfg->user_agent != NULL ? cfg->user_agent : "runner";
	hc.peer = "the Docker engine";
	e->http = http_new(&hc);
	return e;
}

static void
engine_maybe_free(struct engine *e)
{
	if (!e->closing || e->calls != NULL || e->depth > 0)
		return;
	free(e->address);
	free(e->unix_path);
	free(e->base_url);
	free(e->ca_file);
	free(e->cert_file);
	free(e->key_file);
	free(e);
}

void
engine_close(struct engine *e)
{
	struct engine_call *c;

	if (e->closing)
		return;
	e->closing = true;
	for (;;) {
		/* A cancel from a data callback ends later; skip what is canceled. */
		for (c = e->calls; c != NULL && c->canceled; c = c->next)
			;
		if (c == NULL)
			break;
		engine_call_cancel(c);
	}
	/* The http frees itself once libuv has closed its handles. */
	http_close(e->http);
	e->http = NULL;
	engine_maybe_free(e);
}

const char *
engine_address(const struct engine *e)
{
	return e->address;
}

const char *
engine_api_version(const struct engine *e)
{
	return e->version[0] != '\0' ? e->version : NULL;
}

bool
engine_api_at_least(const struct engine *e, const char *version)
{
	int ma, mi, wma, wmi;

	if (version_parse(e->version[0] != '\0' ? e->version : ENGINE_API_MIN, &ma, &mi) != 0 ||
	    version_parse(version, &wma, &wmi) != 0)
		return false;
	return version_cmp(ma, mi, wma, wmi) >= 0;
}

const struct engine_endpoint *
engine_endpoint(const struct engine *e)
{
	return &e->ep;
}

uv_loop_t *
engine_loop(const struct engine *e)
{
	return e->loop;
}

/* ---- calls ---- */

static void
call_unlink(struct engine_call *c)
{
	struct engine *e = c->e;

	if (c->prev != NULL)
		c->prev->next = c->next;
	else if (e->calls == c)
		e->calls = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
}

char *
engine_unreachable(const struct engine *e, const struct engine_result *res)
{
	if (res->error != 0 && *res->message)
		return xstrdup(res->message);
	return xasprintf("cannot reach the Docker engine at %s: %s", e->address,
	    *res->message ? res->message : "no answer");
}

/* What the transport said, in words naming the engine. */
static char *
transport_message(const struct engine *e, const struct http_result *res)
{
	struct stat st;

	if (res->error == -ECANCELED)
		return xstrdup("canceled");
	/* libcurl's words for a missing socket are "Couldn't connect": say why. */
	if (e->unix_path != NULL) {
		if (stat(e->unix_path, &st) == -1)
			return xasprintf("cannot connect to the Docker engine at %s: %s: %s",
			    e->address, e->unix_path, strerror(errno));
		if (!S_ISSOCK(st.st_mode))
			return xasprintf("cannot connect to the Docker engine at %s: %s: "
			    "not a socket", e->address, e->unix_path);
	}
	return xasprintf("cannot connect to the Docker engine at %s: %s", e->address,
	    res->error_text != NULL && *res->error_text != '\0' ? res->error_text :
	    strerror(-res->error));
}

static void	on_req_done(struct http_req *, const struct http_result *, void *);

static void
on_req_data(const char *data, size_t len, void *arg)
{
	struct engine_call *c = arg;
	struct engine *e = c->e;

	if (c->canceled)
		return;
	e->depth++;
	c->on_data(data, len, c->arg);
	e->depth--;
	/* The call is still linked (its end comes later): e stays. */
}

static struct http_req *
request_new(struct engine *e, const char *method, const char *path, bool versioned)
{
	struct http_req *r;
	char *url, label[96];

	if (versioned)
		url = xasprintf("%s/v%s%s", e->base_url,
		    e->version[0] != '\0' ? e->version : ENGINE_API_MIN, path);
	else
		url = xasprintf("%s%s", e->base_url, path);
	r = http_req_new(e->http, method, url);
	free(url);
	endpoint_label(path, label, sizeof(label));
	http_req_endpoint(r, label);
	http_req_flags(r, HTTP_NO_RETRY | HTTP_QUIET);
	http_req_unix_socket(r, e->unix_path);
	if (e->ca_file != NULL)
		http_req_tls(r, &(struct http_tls){ .ca_file = e->ca_file,
		    .cert_file = e->cert_file, .key_file = e->key_file });
	http_req_deadline(r, NO_DEADLINE_MS);
	http_req_attempt_timeout(r, NO_DEADLINE_MS);
	http_req_response_cap(r, DEFAULT_RESPONSE_CAP);
	return r;
}

static int
call_start(struct engine_call *c)
{
	if (http_req_start(c->req, on_req_done, c) != 0) {
		http_req_free(c->req);
		c->req = NULL;
		return -1;
	}
	return 0;
}

static struct engine_call *
call_new(struct engine *e, enum call_kind kind, engine_done_cb *done, void *arg)
{
	struct engine_call *c = xcalloc(1, sizeof(*c));

	c->e = e;
	c->kind = kind;
	c->done = done;
	c->arg = arg;
	return c;
}

static void
call_link(struct engine_call *c)
{
	struct engine *e = c->e;

	c->next = e->calls;
	if (e->calls != NULL)
		e->calls->prev = c;
	e->calls = c;
}

/* The ping (or /version) answered: the version, or why there is none. */
static bool
negotiate(struct engine_call *c, const struct http_result *res, char **message, int *error)
{
	struct engine *e = c->e;
	const char *server = NULL, *server_min = NULL;
	cJSON *j = NULL, *v;
	char version[VERSION_SIZE], *why;

	if (c->kind == CALL_PING) {
		server = http_req_response_header(c->req, "Api-Version");
		if (server == NULL || *server == '\0')
			return false;	/* ask /version */
	} else {
		j = cJSON_ParseWithLength(res->body, res->body_len);
		if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(j, "ApiVersion")))
			server = v->valuestring;
		if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(j, "MinAPIVersion")))
			server_min = v->valuestring;
	}
	if (version_pick(server, server_min, version, sizeof(version), &why) == 0)
		snprintf(e->version, sizeof(e->version), "%s", version);
	else {
		*message = xasprintf("the Docker engine at %s: %s", e->address, why);
		*error = -EPROTONOSUPPORT;
		free(why);
	}
	cJSON_Delete(j);
	return true;
}

static void
on_req_done(struct http_req *req, const struct http_result *res, void *arg)
{
	struct engine_call *c = arg;
	struct engine *e = c->e;
	struct engine_result er = { 0 };
	char *message = NULL;
	bool streamed = c->on_data != NULL && res->status >= 200 && res->status <= 299;

	er.status = res->status;
	er.error = res->error;
	if (c->canceled && er.error == 0) {
		/* Canceled from a data callback and ended anyway: still a cancel. */
		er.status = 0;
		er.error = -ECANCELED;
	}
	if (er.error != 0)
		message = er.error == -ECANCELED ? xstrdup("canceled") :
		    transport_message(e, res);
	else if (res->status < 200 || res->status > 299)
		message = error_message(res->status, res->body, res->body_len);
	else if (c->kind != CALL_PLAIN && !c->canceled && !e->closing &&
	    !negotiate(c, res, &message, &er.error)) {
		/* No Api-Version header: the same call goes on with GET /version. */
		c->kind = CALL_VERSION;
		c->req = request_new(e, "GET", "/version", false);
		http_req_free(req);
		if (call_start(c) == 0)
			return;
		er.status = 0;
		er.error = -EIO;
		message = xasprintf("the Docker engine at %s: cannot send GET /version",
		    e->address);
		req = NULL;
	}
	er.message = message != NULL ? message : "";
	er.body = streamed || res->body == NULL ? "" : res->body;
	er.body_len = streamed || res->body == NULL ? 0 : res->body_len;
	call_unlink(c);
	e->depth++;
	c->done(&er, c->arg);
	e->depth--;
	free(message);
	http_req_free(req);
	free(c);
	engine_maybe_free(e);
}

struct engine_call *
engine_connect(struct engine *e, engine_done_cb *ready, void *arg)
{
	struct engine_call *c;

	if (e->closing)
		return NULL;
	c = call_new(e, CALL_PING, ready, arg);
	c->req = request_new(e, "GET", "/_ping", false);
	if (call_start(c) != 0) {
		free(c);
		return NULL;
	}
	call_link(c);
	return c;
}

struct engine_call *
engine_call(struct engine *e, const char *method, const char *path,
    const struct engine_call_opts *opts, engine_done_cb *done, void *arg)
{
	static const struct engine_call_opts none = { .tar_fd = -1 };
	struct engine_call *c;

	if (e->closing || path == NULL || *path != '/')
		return NULL;
	if (opts == NULL)
		opts = &none;
	c = call_new(e, CALL_PLAIN, done, arg);
	c->req = request_new(e, method, path, true);
	if (opts->tar_len > 0)
		http_req_body_fd(c->req, "application/x-tar", opts->tar_fd, opts->tar_offset,
		    opts->tar_len);
	else if (opts->json != NULL)
		http_req_body(c->req, "application/json", opts->json, strlen(opts->json));
	if (opts->registry_auth != NULL && *opts->registry_auth != '\0')
		http_req_secret_header(c->req, "X-Registry-Auth", opts->registry_auth);
	if (opts->on_data != NULL) {
		c->on_data = opts->on_data;
		http_req_on_data(c->req, on_req_data, c);
	}
	if (opts->timeout_ms > 0) {
		http_req_deadline(c->req, opts->timeout_ms);
		http_req_attempt_timeout(c->req, opts->timeout_ms);
	}
	if (call_start(c) != 0) {
		free(c);
		return NULL;
	}
	call_link(c);
	return c;
}

void
engine_call_cancel(struct engine_call *c)
{
	if (c == NULL || c->canceled)
		return;
	c->canceled = true;
	/* The callback comes from inside, or (from a data callback) soon after. */
	http_req_cancel(c->req);
}

/* ---- helpers ---- */

char *
engine_query_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = xmalloc(3 * n + 1), *p = out;

	for (; *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' ||
		    ch == '~') {
			*p++ = (char)ch;
		} else {
			*p++ = '%';
			*p++ = hex[ch >> 4];
			*p++ = hex[ch & 15];
		}
	}
	*p = '\0';
	return out;
}

static void
lines_append(struct engine_lines *l, const char *data, size_t len)
{
	if (l->len + len + 1 > l->cap) {
		l->cap = l->cap == 0 ? 256 : l->cap;
		while (l->len + len + 1 > l->cap)
			l->cap *= 2;
		l->buf = xrealloc(l->buf, l->cap);
	}
	memcpy(l->buf + l->len, data, len);
	l->len += len;
	l->buf[l->len] = '\0';
}

/* One line without its end; a "\r\n" end and empty lines are no JSON. */
static void
lines_emit(const char *s, size_t n, void (*line)(const char *, size_t, void *), void *arg)
{
	if (n > 0 && s[n - 1] == '\r')
		n--;
	if (n > 0)
		line(s, n, arg);
}

void
engine_lines_feed(struct engine_lines *l, const char *data, size_t len,
    void (*line)(const char *s, size_t n, void *arg), void *arg)
{
	const char *nl;
	size_t n, total;

	/* The end of a line begun in an earlier piece. */
	if (l->len > 0) {
		if ((nl = memchr(data, '\n', len)) == NULL) {
			lines_append(l, data, len);
			return;
		}
		n = (size_t)(nl - data);
		lines_append(l, data, n);
		total = l->len;
		l->len = 0;
		lines_emit(l->buf, total, line, arg);
		data = nl + 1;
		len -= n + 1;
	}
	/* Whole lines straight from data: most pieces hold nothing else. */
	while ((nl = memchr(data, '\n', len)) != NULL) {
		n = (size_t)(nl - data);
		lines_emit(data, n, line, arg);
		data = nl + 1;
		len -= n + 1;
	}
	if (len > 0)
		lines_append(l, data, len);
}

void
engine_lines_end(struct engine_lines *l, void (*line)(const char *s, size_t n, void *arg),
    void *arg)
{
	if (l->len > 0)
		lines_emit(l->buf, l->len, line, arg);
	free(l->buf);
	memset(l, 0, sizeof(*l));
}

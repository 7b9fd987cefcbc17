/*
 * api_call: drive one call of api/ from the command line, for the
 * integration tests of the retry layer and of the job endpoints, which the
 * daemon will use (PUT /jobs/:id, PATCH /jobs/:id/trace, POST
 * /jobs/request).  Prints one JSON line with what the caller was told.
 *
 *   api_call [--ca F] [--cert F --key F] URL TOKEN update JOB_ID STATE [REASON]
 *   api_call ... URL TOKEN patch JOB_ID START TEXT
 *   api_call ... URL TOKEN request
 *   api_call ... URL TOKEN verify [N]      (N in a row on one client)
 *
 * Options: --ca/--cert/--key FILE (TLS), --config-dir DIR (certs/ lookup),
 * --max-age MS (connection_max_age), --pause MS (between repeated verifies).
 *   api_call ... URL TOKEN discovery N     (N calls in a row, one line each)
 *   api_call ... URL TOKEN_PREFIX poll RUNNERS SECONDS
 *
 * poll is a crowd: RUNNERS runners (tokens TOKEN_PREFIX0, 1, ...) each ask
 * for jobs one request after another for SECONDS, as the daemon's pollers
 * will; it reports open file descriptors every 250 ms and the results.
 */
#include <dirent.h>
#include <err.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "api/api.h"
#include "lib/clock.h"
#include "lib/xmalloc.h"

static struct api *api;
static int pending;

/* s as the inside of a JSON string. */
static void
print_escaped(const char *s)
{
	for (; s != NULL && *s != '\0'; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", (unsigned char)*s);
		else
			putchar(*s);
	}
}

static void
print_answer(const char *what, const char *result, const struct api_answer *a,
    const char *extra)
{
	printf("{\"call\": \"%s\", \"result\": \"%s\", \"status\": %ld, "
	    "\"request_id\": \"%s\", \"message\": \"", what, result, a->status,
	    a->request_id != NULL ? a->request_id : "");
	print_escaped(a->message);
	printf("\"%s}\n", extra != NULL ? extra : "");
	fflush(stdout);
}

static const char *
update_name(enum api_update_result r)
{
	static const char *const names[] = { "ok", "accepted", "trace_validation_failed",
	    "abort", "failed", "canceled" };

	return names[r];
}

static void
on_update(enum api_update_result r, const struct api_answer *a,
    const struct api_job_state *st, void *data)
{
	char extra[160];

	(void)data;
	snprintf(extra, sizeof(extra), ", \"job_status\": \"%s\", \"cancel\": %s, "
	    "\"interval\": %" PRId64, st->job_status, st->cancel_requested ? "true" : "false",
	    st->update_interval);
	print_answer("update", update_name(r), a, extra);
	pending--;
}

static void
on_patch(enum api_patch_result r, const struct api_answer *a,
    const struct api_job_state *st, uint64_t offset, void *data)
{
	static const char *const names[] = { "ok", "range_mismatch", "not_found",
	    "abort", "failed", "canceled" };
	char extra[160];

	(void)data;
	snprintf(extra, sizeof(extra), ", \"offset\": %" PRIu64 ", \"job_status\": \"%s\"",
	    offset, st->job_status);
	print_answer("patch", names[r], a, extra);
	pending--;
}

static const char *
request_name(enum api_request_result r)
{
	static const char *const names[] = { "received", "none", "forbidden",
	    "unavailable", "failed", "client_error", "canceled" };

	return names[r];
}

static void
on_request(enum api_request_result r, const struct api_answer *a, struct api_job *job,
    void *data)
{
	char extra[64] = "";

	(void)data;
	if (job != NULL)
		snprintf(extra, sizeof(extra), ", \"job\": %" PRId64, job->id);
	print_answer("request", request_name(r), a, extra);
	api_job_free(job);
	pending--;
}

static void	on_verify(enum api_result, const struct api_answer *,
		    struct api_runner_token *, void *);

static int verifies_left;
static struct api_creds *verify_creds;
static struct api_info *verify_info;
static uint64_t verify_pause_ms;
static uv_timer_t verify_timer;

static void
on_verify_pause(uv_timer_t *t)
{
	(void)t;
	api_verify(api, verify_creds, verify_info, "s_000000000000", on_verify, NULL);
}

static void
on_verify(enum api_result r, const struct api_answer *a, struct api_runner_token *t,
    void *data)
{
	char extra[64] = "";

	(void)data;
	if (t != NULL)
		snprintf(extra, sizeof(extra), ", \"id\": %" PRId64, t->id);
	print_answer("verify", api_result_name(r), a, extra);
	if (--verifies_left > 0)
		uv_timer_start(&verify_timer, on_verify_pause, verify_pause_ms, 0);
	else {
		uv_close((uv_handle_t *)&verify_timer, NULL);
		pending--;
	}
}

static int discoveries_left;
static struct api_creds *discovery_creds;

static void
on_discovery(enum api_result r, const struct api_answer *a, const char *url, void *data)
{
	char extra[512];

	(void)data;
	snprintf(extra, sizeof(extra), ", \"server_url\": \"%s\"", url != NULL ? url : "");
	print_answer("discovery", api_result_name(r), a, extra);
	if (--discoveries_left > 0)
		api_discovery(api, discovery_creds, on_discovery, NULL);
	else
		pending--;
}

/* ---- poll: a crowd of runners asking for jobs ---- */

struct poller {
	struct api_creds	 creds;
	char			*token;
	uint64_t		 until;
	unsigned		 counts[7];
	uv_timer_t		 pause;		/* between polls, as check_interval */
};

#define POLL_PAUSE_MS	250

static struct api_info poll_info = { .name = "runner", .version = "test" };

static void	poll_next(struct poller *);

static void
on_pause_over(uv_timer_t *t)
{
	poll_next(t->data);
}

static void
on_polled(enum api_request_result r, const struct api_answer *a, struct api_job *job,
    void *data)
{
	struct poller *p = data;

	(void)a;
	api_job_free(job);
	p->counts[r]++;
	if (clock_mono_ms() < p->until && r != API_JOB_CANCELED)
		uv_timer_start(&p->pause, on_pause_over, POLL_PAUSE_MS, 0);
	else {
		uv_close((uv_handle_t *)&p->pause, NULL);
		pending--;
	}
}

static void
poll_next(struct poller *p)
{
	api_request_job(api, &p->creds, &poll_info, "s_000000000000", on_polled, p);
}

static int
count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1;	/* the directory's own fd */
}

static int max_fds;

static void
on_sample(uv_timer_t *t)
{
	int n = count_fds();

	(void)t;
	if (n > max_fds)
		max_fds = n;
	printf("{\"sample\": true, \"fds\": %d, \"t\": %" PRIu64 "}\n", n, clock_mono_ms());
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	struct api_config ac = { 0 };
	struct api_creds creds = { 0 };
	struct api_info info = { .name = "runner", .version = "test" };
	struct api_job_ref ref;
	struct api_job_update u = { 0 };
	struct poller *pollers = NULL;
	uv_timer_t sample;
	uv_loop_t loop;
	const char *op;
	int i = 1, n, k, base_fds;

	uv_loop_init(&loop);
	ac.loop = &loop;
	while (i + 1 < argc && strncmp(argv[i], "--", 2) == 0) {
		if (strcmp(argv[i], "--ca") == 0)
			creds.tls_ca_file = argv[i + 1];
		else if (strcmp(argv[i], "--cert") == 0)
			creds.tls_cert_file = argv[i + 1];
		else if (strcmp(argv[i], "--key") == 0)
			creds.tls_key_file = argv[i + 1];
		else if (strcmp(argv[i], "--config-dir") == 0)
			ac.config_dir = argv[i + 1];
		else if (strcmp(argv[i], "--max-age") == 0)
			ac.connection_max_age_ms = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--pause") == 0)
			verify_pause_ms = strtoull(argv[i + 1], NULL, 10);
		i += 2;
	}
	if (argc - i < 3) {
		fprintf(stderr, "usage: api_call [--ca F] URL TOKEN OP ...\n");
		return 2;
	}
	creds.url = argv[i];
	creds.token = argv[i + 1];
	op = argv[i + 2];
	argv += i + 3;
	argc -= i + 3;
	api = api_new(&ac);
	ref.creds = &creds;

	pending = 1;
	if (strcmp(op, "update") == 0 && argc >= 2) {
		ref.id = strtoll(argv[0], NULL, 10);
		ref.token = creds.token;
		u.state = argv[1];
		u.failure_reason = argc > 2 ? argv[2] : NULL;
		u.has_output = strcmp(u.state, "running") != 0;
		u.checksum = 0x0d7cf601;
		u.bytesize = 51;
		api_update_job(api, &ref, &info, &u, on_update, NULL);
	} else if (strcmp(op, "patch") == 0 && argc >= 3) {
		ref.id = strtoll(argv[0], NULL, 10);
		ref.token = creds.token;
		uint64_t start = strtoull(argv[1], NULL, 10);
		/* The patch is read from a log file at its own offsets. */
		FILE *log = tmpfile();

		if (log == NULL || pwrite(fileno(log), argv[2], strlen(argv[2]),
		    (off_t)start) != (ssize_t)strlen(argv[2]))
			err(1, "cannot write the patch to a temporary file");
		api_patch_trace(api, &ref, fileno(log), start, strlen(argv[2]), false,
		    on_patch, NULL);
	} else if (strcmp(op, "request") == 0)
		api_request_job(api, &creds, &info, "s_000000000000", on_request, NULL);
	else if (strcmp(op, "verify") == 0) {
		verifies_left = argc >= 1 ? atoi(argv[0]) : 1;
		verify_creds = &creds;
		verify_info = &info;
		uv_timer_init(&loop, &verify_timer);
		api_verify(api, &creds, &info, "s_000000000000", on_verify, NULL);
	}
	else if (strcmp(op, "discovery") == 0 && argc >= 1) {
		discoveries_left = atoi(argv[0]);
		discovery_creds = &creds;
		api_discovery(api, &creds, on_discovery, NULL);
	}
	else if (strcmp(op, "poll") == 0 && argc >= 2) {
		n = atoi(argv[0]);
		pending = n;
		base_fds = count_fds();
		pollers = xcalloc((size_t)n, sizeof(*pollers));
		uv_timer_init(&loop, &sample);
		uv_timer_start(&sample, on_sample, 0, 250);
		for (k = 0; k < n; k++) {
			pollers[k].creds = creds;
			pollers[k].token = xasprintf("%s%d", creds.token, k);
			pollers[k].creds.token = pollers[k].token;
			pollers[k].until = clock_mono_ms() + (uint64_t)atoi(argv[1]) * 1000;
			uv_timer_init(&loop, &pollers[k].pause);
			pollers[k].pause.data = &pollers[k];
			poll_next(&pollers[k]);
		}
		while (pending > 0)
			uv_run(&loop, UV_RUN_ONCE);
		uv_close((uv_handle_t *)&sample, NULL);
		uv_run(&loop, UV_RUN_NOWAIT);
		for (k = 0; k < n; k++) {
			printf("{\"poller\": %d, \"received\": %u, \"none\": %u, \"forbidden\": %u, "
			    "\"unavailable\": %u, \"failed\": %u}\n", k, pollers[k].counts[0],
			    pollers[k].counts[1], pollers[k].counts[2], pollers[k].counts[3],
			    pollers[k].counts[4]);
			free(pollers[k].token);
		}
		printf("{\"base_fds\": %d, \"max_fds\": %d}\n", base_fds, max_fds);
		free(pollers);
	} else {
		fprintf(stderr, "api_call: unknown operation %s\n", op);
		return 2;
	}
	while (pending > 0)
		uv_run(&loop, UV_RUN_ONCE);
	api_close(api);
	uv_run(&loop, UV_RUN_DEFAULT);
	return uv_loop_close(&loop) == 0 ? 0 : 3;
}

/*
 * The metrics registry and its HTTP listener (lib/metrics.c, runner/metrics_server.c).
 *
 * Rendering is checked as exact text, because Prometheus parses it and a
 * stray space or a second TYPE line breaks a scrape.  The listener is
 * driven over real sockets by a client thread with blocking calls while
 * the test's own thread runs the loop: the client records what it saw and
 * the loop thread asserts after joining it (cmocka cannot fail from
 * another thread).  Every test ends with uv_loop_close() == 0, so a handle
 * left open is a failure, and ASan sees every byte freed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <uv.h>

#include "lib/buf.h"
#include "lib/clock.h"
#include "lib/metrics.h"
#include "lib/xmalloc.h"
#include "runner/metrics_server.h"

/* ------------------------------------------------------------- registry */

static int
reset_registry(void **state)
{
	(void)state;
	metrics_reset();
	return 0;
}

/* The rendered text without the process_* families, which vary. */
static char *
render_without_process(void)
{
	struct buf	 all, out;
	const char	*line, *nl;

	buf_init(&all, BUF_UNLIMITED);
	buf_init(&out, BUF_UNLIMITED);
	assert_int_equal(metrics_render(&all), 0);
	for (line = all.ptr; *line != '\0'; line = nl + 1) {
		nl = strchr(line, '\n');
		assert_non_null(nl);	/* every line ends in a newline */
		if (strncmp(line, "process_", 8) == 0 ||
		    strncmp(line, "# HELP process_", 15) == 0 ||
		    strncmp(line, "# TYPE process_", 15) == 0)
			continue;
		buf_append(&out, line, (size_t)(nl - line + 1));
	}
	buf_release(&all);
	return buf_detach(&out, NULL);
}

static void
assert_rendered(const char *want)
{
	char	*got = render_without_process();

	assert_string_equal(got, want);
	free(got);
}

static void
test_render_exact(void **state)
{
	(void)state;
	metrics_describe("runner_requests_total", "counter",
	    "Requests to GitLab.");
	metrics_counter_add("runner_requests_total",
	    "endpoint=\"jobs_request\",status=\"204\"", 2);
	metrics_counter_add("runner_requests_total",
	    "endpoint=\"jobs_request\",status=\"201\"", 1);
	metrics_counter_add("runner_requests_total",
	    "endpoint=\"jobs_request\",status=\"204\"", 1);
	metrics_gauge_set("runner_jobs", "", 3);
	metrics_gauge_add("runner_jobs", NULL, -1);
	metrics_describe("runner_jobs", "gauge", "Jobs running now.");
	metrics_describe("runner_job_duration_seconds", "histogram",
	    "How long jobs ran.");
	/* Exact binary fractions, so that the sum prints exactly. */
	metrics_histogram_observe("runner_job_duration_seconds",
	    "runner=\"a1\"", 0.00390625);
	metrics_histogram_observe("runner_job_duration_seconds",
	    "runner=\"a1\"", 0.375);
	metrics_histogram_observe("runner_job_duration_seconds",
	    "runner=\"a1\"", 100);

	assert_rendered(
	    "# HELP runner_job_duration_seconds How long jobs ran.\n"
	    "# TYPE runner_job_duration_seconds histogram\n"
	    "runner_job_duration_seconds_bucket{runner=\"a1\",le=\"0.005\"} 1\n"
	    "runner_job_duration_seconds_bucket{runner=\"a1\",le=\"0.01\"} 1\n"
	    "runner_job_duration_seconds_bucket{runner=\"a1\",le=\"0.025\"} 1\n"
	    "runner_job_duration_seconds_bucket{runner=\"a1\",le=\"0.05\"} 1\n"
	    "runner_job_duration_seconds_bucket{runner=\"a1\",le=\"0.1\"} 1\n"
	    "runner_job_duration_seconds_bucket{runner=\"a1\",le=\"0.25\"} 1\n"
	    "runner_job_duration_seconds_bucket{runner=\"a1\",le=\"0.5\"} 2\n"
	    "runner_job_duration_seconds_bucket{runner=\"a1\",le=\"1\"} 2\n"
	    "runner_job_duration_seconds_bucket{runner=\"a1\",le=\"2.5\"} 2\n"
	    "runner_job_duration_seconds_bucket{runner=\"a1\",le=\"5\"} 2\n"
	    "runner_job_duration_seconds_bucket{runner=\"a1\",le=\"10\"} 2\n"
	    "runner_job_duration_seconds_bucket{runner=\"a1\",le=\"30\"} 2\n"
	    "runner_job_duration_seconds_bucket{runner=\"a1\",le=\"60\"} 2\n"
	    "runner_job_duration_seconds_bucket{runner=\"a1\",le=\"+Inf\"} 3\n"
	    "runner_job_duration_seconds_sum{runner=\"a1\"} 100.37890625\n"
	    "runner_job_duration_seconds_count{runner=\"a1\"} 3\n"
	    "# HELP runner_jobs Jobs running now.\n"
	    "# TYPE runner_jobs gauge\n"
	    "runner_jobs 2\n"
	    "# HELP runner_requests_total Requests to GitLab.\n"
	    "# TYPE runner_requests_total counter\n"
	    "runner_requests_total{endpoint=\"jobs_request\",status=\"201\"} 1\n"
	    "runner_requests_total{endpoint=\"jobs_request\",status=\"204\"} 3\n");
}

/* gitlab-runner's job_duration_seconds buckets: whole numbers printed whole. */
static void
test_histogram_own_bounds(void **state)
{
	static const double bounds[] = { 30, 60, 300, 0.25 };

	(void)state;
	assert_int_equal(metrics_describe_histogram("h", "H.", bounds, 4), -EINVAL);
	assert_int_equal(metrics_describe_histogram("h", "H.", bounds, 0), -EINVAL);
	assert_int_equal(metrics_describe_histogram("h", "H.", bounds, 3), 0);
	/* The first bounds stay. */
	assert_int_equal(metrics_describe_histogram("h", "Other.", bounds + 1, 2), 0);
	metrics_histogram_observe("h", "a=\"1\"", 30);
	metrics_histogram_observe("h", "a=\"1\"", 301);
	assert_rendered(
	    "# HELP h H.\n"
	    "# TYPE h histogram\n"
	    "h_bucket{a=\"1\",le=\"30\"} 1\n"
	    "h_bucket{a=\"1\",le=\"60\"} 1\n"
	    "h_bucket{a=\"1\",le=\"300\"} 1\n"
	    "h_bucket{a=\"1\",le=\"+Inf\"} 2\n"
	    "h_sum{a=\"1\"} 331\n"
	    "h_count{a=\"1\"} 2\n");
}

static int	collected;

static void
collect_view(void *arg)
{
	collected++;
	metrics_clear("view");
	metrics_gauge_set("view", (const char *)arg, 1);
}

/* A collector sets the view at each scrape; a cleared series is gone. */
static void
test_collector_and_clear(void **state)
{
	(void)state;
	collected = 0;
	metrics_gauge_set("view", "s=\"old\"", 7);
	metrics_gauge_set("view", "s=\"older\"", 8);
	metrics_set_collector(collect_view, "s=\"now\"");
	assert_rendered(
	    "# TYPE view gauge\n"
	    "view{s=\"now\"} 1\n");
	assert_int_equal(collected, 1);
	metrics_set_collector(NULL, NULL);
	metrics_clear("view");
	metrics_clear("no_such_name");
	assert_rendered("");
	assert_int_equal(collected, 1);
	/* The name is still a gauge, and its series can come back. */
	metrics_counter_add("view", "", 1);
	metrics_gauge_set("view", "", 2);
	assert_rendered(
	    "# TYPE view gauge\n"
	    "view 2\n");
}

static void
test_histogram_edges(void **state)
{
	(void)state;
	/* Bounds are inclusive; past the last bound only +Inf counts. */
	metrics_histogram_observe("h_seconds", "", 0.005);
	metrics_histogram_observe("h_seconds", "", 61);
	assert_rendered(
	    "# TYPE h_seconds histogram\n"
	    "h_seconds_bucket{le=\"0.005\"} 1\n"
	    "h_seconds_bucket{le=\"0.01\"} 1\n"
	    "h_seconds_bucket{le=\"0.025\"} 1\n"
	    "h_seconds_bucket{le=\"0.05\"} 1\n"
	    "h_seconds_bucket{le=\"0.1\"} 1\n"
	    "h_seconds_bucket{le=\"0.25\"} 1\n"
	    "h_seconds_bucket{le=\"0.5\"} 1\n"
	    "h_seconds_bucket{le=\"1\"} 1\n"
	    "h_seconds_bucket{le=\"2.5\"} 1\n"
	    "h_seconds_bucket{le=\"5\"} 1\n"
	    "h_seconds_bucket{le=\"10\"} 1\n"
	    "h_seconds_bucket{le=\"30\"} 1\n"
	    "h_seconds_bucket{le=\"60\"} 1\n"
	    "h_seconds_bucket{le=\"+Inf\"} 2\n"
	    "h_seconds_sum 61.005\n"
	    "h_seconds_count 2\n");
}

static void
test_label_escape(void **state)
{
	struct buf	b, labels;

	(void)state;
	buf_init(&b, BUF_UNLIMITED);
	assert_int_equal(metrics_label_escape(&b, "a\\b\"c\nd"), 0);
	assert_string_equal(b.ptr, "a\\\\b\\\"c\\nd");
	buf_reset(&b);
	assert_int_equal(metrics_label_escape(&b, ""), 0);
	assert_string_equal(b.ptr, "");
	buf_release(&b);

	buf_init(&b, 4);
	assert_int_equal(metrics_label_escape(&b, "\"\"\""), -ENOSPC);
	buf_release(&b);

	/* As a caller builds a label set, and how it comes out. */
	buf_init(&labels, BUF_UNLIMITED);
	buf_puts(&labels, "name=\"");
	metrics_label_escape(&labels, "my \"fast\"\nrunner\\1");
	buf_puts(&labels, "\"");
	metrics_gauge_set("runner_up", labels.ptr, 1);
	buf_release(&labels);
	assert_rendered(
	    "# TYPE runner_up gauge\n"
	    "runner_up{name=\"my \\\"fast\\\"\\nrunner\\\\1\"} 1\n");
}

static void
test_sorted_and_described_once(void **state)
{
	(void)state;
	metrics_counter_add("zeta_total", "", 1);
	metrics_counter_add("alpha_total", "k=\"b\"", 1);
	metrics_counter_add("alpha_total", "k=\"a\"", 2);
	metrics_counter_add("alpha_total", "", 3);
	metrics_gauge_set("mid", "", 4);
	assert_int_equal(metrics_describe("alpha_total", "counter",
	    "First \\ help\nline."), 0);
	assert_int_equal(metrics_describe("alpha_total", "counter",
	    "Second help."), 0);
	/* Described, never updated: nothing to show. */
	assert_int_equal(metrics_describe("unused", "gauge", "Nothing."), 0);

	assert_rendered(
	    "# HELP alpha_total First \\\\ help\\nline.\n"
	    "# TYPE alpha_total counter\n"
	    "alpha_total 3\n"
	    "alpha_total{k=\"a\"} 2\n"
	    "alpha_total{k=\"b\"} 1\n"
	    "# TYPE mid gauge\n"
	    "mid 4\n"
	    "# TYPE zeta_total counter\n"
	    "zeta_total 1\n");
}

static void
test_misuse_is_dropped(void **state)
{
	(void)state;
	assert_int_equal(metrics_describe("x", "summary", "no"), -EINVAL);
	assert_int_equal(metrics_describe("9x", "gauge", "no"), -EINVAL);
	assert_int_equal(metrics_describe("x", NULL, "no"), -EINVAL);
	metrics_counter_add("bad name", "", 1);
	metrics_counter_add("bad name", "", 1);
	metrics_gauge_set("bad-name", "", 1);
	metrics_counter_add(NULL, "", 1);

	metrics_counter_add("c_total", "", 1);
	metrics_counter_add("c_total", "", -5);		/* counters only go up */
	metrics_counter_add("c_total", "", NAN);
	metrics_gauge_set("c_total", "", 100);		/* another kind */
	metrics_gauge_set("c_total", "x=\"1\"", 100);
	metrics_histogram_observe("c_total", "", 1);

	metrics_describe("g", "gauge", "A gauge.");
	metrics_counter_add("g", "", 1);
	metrics_gauge_add("g", "", 2);
	metrics_describe("g", "counter", "Not a counter.");

	assert_rendered(
	    "# TYPE c_total counter\n"
	    "c_total 1\n"
	    "# HELP g A gauge.\n"
	    "# TYPE g gauge\n"
	    "g 2\n");
}

static void
test_values(void **state)
{
	(void)state;
	metrics_gauge_set("v", "i=\"01\"", 0.1);
	metrics_gauge_set("v", "i=\"02\"", 1e21);
	metrics_gauge_set("v", "i=\"03\"", -2.5);
	metrics_gauge_set("v", "i=\"04\"", NAN);
	metrics_gauge_set("v", "i=\"05\"", INFINITY);
	metrics_gauge_set("v", "i=\"06\"", -INFINITY);
	metrics_gauge_set("v", "i=\"07\"", 100);
	metrics_gauge_set("v", "i=\"08\"", -0.0);
	metrics_gauge_set("v", "i=\"09\"", 123456789012);
	metrics_gauge_set("v", "i=\"10\"", 1.0 / 3);
	metrics_gauge_set("v", "i=\"11\"", 0.00001);
	assert_rendered(
	    "# TYPE v gauge\n"
	    "v{i=\"01\"} 0.1\n"
	    "v{i=\"02\"} 1e+21\n"
	    "v{i=\"03\"} -2.5\n"
	    "v{i=\"04\"} NaN\n"
	    "v{i=\"05\"} +Inf\n"
	    "v{i=\"06\"} -Inf\n"
	    "v{i=\"07\"} 100\n"
	    "v{i=\"08\"} 0\n"
	    "v{i=\"09\"} 123456789012\n"
	    "v{i=\"10\"} 0.3333333333333333\n"
	    "v{i=\"11\"} 1e-05\n");
}

/* The value of the sample line "name value", or -1. */
static double
sample_value(const char *text, const char *name)
{
	const char	*p = text;
	size_t		 n = strlen(name);

	while ((p = strstr(p, name)) != NULL) {
		if ((p == text || p[-1] == '\n') && p[n] == ' ')
			return strtod(p + n + 1, NULL);
		p += n;
	}
	return -1;
}

static void
test_process_metrics(void **state)
{
	struct buf	 b;
	double		 now = (double)time(NULL), v;
	const char	*p;

	(void)state;
	buf_init(&b, BUF_UNLIMITED);
	assert_int_equal(metrics_render(&b), 0);
	assert_non_null(strstr(b.ptr,
	    "# TYPE process_cpu_seconds_total counter\n"));
	assert_non_null(strstr(b.ptr, "# TYPE process_open_fds gauge\n"));
	assert_non_null(strstr(b.ptr, "# HELP process_resident_memory_bytes "));
	assert_true(sample_value(b.ptr, "process_open_fds") >= 3);
	v = sample_value(b.ptr, "process_resident_memory_bytes");
	assert_true(v > 100 * 1024 && v < 64.0 * 1024 * 1024 * 1024);
	assert_true(sample_value(b.ptr, "process_cpu_seconds_total") >= 0);
	v = sample_value(b.ptr, "process_start_time_seconds");
	assert_true(v > now - 3600 && v <= now + 2);

	/* A descriptor more is seen at the next scrape. */
	{
		double	before = sample_value(b.ptr, "process_open_fds");
		int	fd = dup(0);

		buf_reset(&b);
		metrics_render(&b);
		assert_true(sample_value(b.ptr, "process_open_fds") ==
		    before + 1);
		close(fd);
	}
	/* Rendered again: still one HELP and one TYPE. */
	buf_reset(&b);
	metrics_render(&b);
	p = strstr(b.ptr, "# TYPE process_open_fds gauge\nprocess_open_fds ");
	assert_non_null(p);
	assert_null(strstr(p + 1, "# TYPE process_open_fds"));
	p = strstr(b.ptr, "# HELP process_open_fds ");
	assert_non_null(p);
	assert_null(strstr(p + 1, "# HELP process_open_fds"));
	buf_release(&b);
}

static void
test_render_cap(void **state)
{
	struct buf	b;

	(void)state;
	metrics_counter_add("some_total", "", 1);
	buf_init(&b, 64);
	assert_int_equal(metrics_render(&b), -ENOSPC);
	assert_true(b.len <= 64);
	buf_release(&b);
}

static void
test_no_allocation_after_first_update(void **state)
{
	struct mallinfo2	before, after;
	int			i;

	(void)state;
	metrics_counter_add("hot_total", "endpoint=\"x\"", 1);
	metrics_gauge_set("hot_gauge", "", 1);
	metrics_histogram_observe("hot_seconds", "", 1);
	before = mallinfo2();
	for (i = 0; i < 10000; i++) {
		metrics_counter_add("hot_total", "endpoint=\"x\"", 1);
		metrics_gauge_add("hot_gauge", "", 1);
		metrics_histogram_observe("hot_seconds", "", 0.01 * i);
	}
	after = mallinfo2();
	assert_int_equal(before.uordblks, after.uordblks);
	assert_int_equal(before.hblkhd, after.hblkhd);
}

static void
test_many_series(void **state)
{
	char	name[32], labels[32];
	char	*text;
	int	i;

	(void)state;
	/* Enough to grow both tables several times. */
	for (i = 0; i < 5000; i++) {
		snprintf(name, sizeof name, "m%d_total", i % 300);
		snprintf(labels, sizeof labels, "i=\"%05d\"", i);
		metrics_counter_add(name, labels, i);
		metrics_counter_add(name, labels, 1);
	}
	text = render_without_process();
	assert_non_null(strstr(text, "m0_total{i=\"00000\"} 1\n"
	    "m0_total{i=\"00300\"} 301\n"));
	assert_non_null(strstr(text, "m299_total{i=\"04799\"} 4800\n"));
	assert_non_null(strstr(text, "# TYPE m1_total "));
	assert_true(strstr(text, "# TYPE m10_total") <
	    strstr(text, "# TYPE m1_total "));
	free(text);
	metrics_reset();
	text = render_without_process();
	assert_string_equal(text, "");
	free(text);
}

/* ------------------------------------------------------- listener harness */

#define MAX_OUT		80
#define CLIENT_WAIT_S	5

struct harness;
typedef void	script_fn(struct harness *);

struct harness {
	uv_loop_t		 loop;
	struct metrics_server	*s;
	int			 port;
	uv_async_t		 done;
	pthread_t		 thread;
	script_fn		*script;
	struct metrics_health	 health;
	atomic_bool		 ready;
	atomic_bool		 live;
	atomic_int		 probes;
	atomic_bool		 signalled;
	/* What the client saw, for the loop thread to check. */
	char			*out[MAX_OUT];
	int			 end[MAX_OUT];	/* how a read ended: 0 EOF, errno */
	long			 ms[MAX_OUT];
	int			 nout;
	char			 fail[256];
};

static bool
probe_ready(void *arg)
{
	struct harness	*h = arg;

	atomic_fetch_add(&h->probes, 1);
	return atomic_load(&h->ready);
}

static bool
probe_live(void *arg)
{
	struct harness	*h = arg;

	atomic_fetch_add(&h->probes, 1);
	return atomic_load(&h->live);
}

/* Only the first failure is kept; it names the step. */
static void
tfail(struct harness *h, const char *what)
{
	if (h->fail[0] == '\0')
		snprintf(h->fail, sizeof h->fail, "%s: %s", what,
		    strerror(errno));
}

static void
record(struct harness *h, char *text, int end, long ms)
{
	if (h->nout == MAX_OUT) {
		free(text);
		return;
	}
	h->out[h->nout] = text != NULL ? text : xstrdup("(none)");
	h->end[h->nout] = end;
	h->ms[h->nout] = ms;
	h->nout++;
}

/* One client connection with what it has read and not yet consumed. */
struct cli {
	int		fd;
	struct buf	in;
};

static bool
cli_open(struct harness *h, struct cli *c, int rcvbuf)
{
	struct sockaddr_in	sin;
	struct timeval		tv = { CLIENT_WAIT_S, 0 };

	buf_init(&c->in, BUF_UNLIMITED);
	if ((c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1) {
		tfail(h, "socket");
		return false;
	}
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (rcvbuf > 0)
		setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)h->port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(c->fd, (struct sockaddr *)&sin, sizeof sin) == -1) {
		tfail(h, "connect");
		close(c->fd);
		c->fd = -1;
		return false;
	}
	return true;
}

static void
cli_close(struct cli *c)
{
	if (c->fd != -1)
		close(c->fd);
	c->fd = -1;
	buf_release(&c->in);
}

static bool
cli_send(struct cli *c, const void *p, size_t len)
{
	const char	*q = p;
	ssize_t		 n;

	while (len > 0) {
		n = send(c->fd, q, len, MSG_NOSIGNAL);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		q += n;
		len -= (size_t)n;
	}
	return true;
}

static bool
cli_sends(struct cli *c, const char *s)
{
	return cli_send(c, s, strlen(s));
}

/* More bytes into c->in: 1, or 0 at EOF, or -errno. */
static int
cli_fill(struct cli *c)
{
	char	tmp[65536];
	ssize_t	n;

	do
		n = recv(c->fd, tmp, sizeof tmp, 0);
	while (n == -1 && errno == EINTR);
	if (n == -1)
		return -errno;
	if (n == 0)
		return 0;
	buf_append(&c->in, tmp, (size_t)n);
	return 1;
}

/*
 * One whole response (head and, unless for HEAD, Content-Length bytes of
 * body), or NULL if the connection ended first.
 */
static char *
cli_response(struct cli *c, bool head)
{
	const char	*end, *cl;
	size_t		 hlen, total;
	char		*r;

	for (;;) {
		if ((end = strstr(c->in.ptr, "\r\n\r\n")) != NULL) {
			hlen = (size_t)(end - c->in.ptr) + 4;
			total = hlen;
			cl = strcasestr(c->in.ptr, "\r\nContent-Length:");
			if (!head && cl != NULL && cl < end)
				total += strtoul(cl + 17, NULL, 10);
			if (c->in.len >= total) {
				r = xmemdup(c->in.ptr, total);
				buf_consume(&c->in, total);
				return r;
			}
		}
		if (cli_fill(c) <= 0)
			return NULL;
	}
}

/* Everything until the peer closes; *end: 0 for EOF, else the errno. */
static char *
cli_rest(struct cli *c, int *end)
{
	int	rc;

	while ((rc = cli_fill(c)) > 0)
		;
	*end = -rc;
	return buf_detach(&c->in, NULL);
}

/* Read to the end; record it, how it ended and when (ms since t0, if not 0). */
static void
record_rest(struct harness *h, struct cli *c, uint64_t t0)
{
	char	*r;
	int	 end;

	r = cli_rest(c, &end);
	record(h, r, end, t0 != 0 ? (long)(clock_mono_ms() - t0) : 0);
}

/* Send a request, record the response. */
static void
exchange(struct harness *h, struct cli *c, const char *req, bool head)
{
	if (!cli_sends(c, req)) {
		tfail(h, "send");
		record(h, NULL, -1, 0);
		return;
	}
	record(h, cli_response(c, head), 0, 0);
}

/* One request on a fresh connection; records the response and how it ended. */
static void
one_shot_len(struct harness *h, const char *req, size_t len)
{
	struct cli	c;

	if (!cli_open(h, &c, 0)) {
		record(h, NULL, -1, 0);
		return;
	}
	if (!cli_send(&c, req, len))
		tfail(h, "send");
	record_rest(h, &c, 0);
	cli_close(&c);
}

static void
one_shot(struct harness *h, const char *req)
{
	one_shot_len(h, req, strlen(req));
}

/* Tell the loop thread to close the server; once only, the handle closes. */
static void
signal_done(struct harness *h)
{
	if (!atomic_exchange(&h->signalled, true))
		uv_async_send(&h->done);
}

static void *
client_main(void *arg)
{
	struct harness	*h = arg;

	h->script(h);
	signal_done(h);
	return NULL;
}

static void
on_done(uv_async_t *a)
{
	struct harness	*h = a->data;

	metrics_server_close(h->s);
	h->s = NULL;
	uv_close((uv_handle_t *)a, NULL);
}

static void
harness_run(struct harness *h, script_fn *script, uint64_t timeout_ms)
{
	char	*cause = NULL;

	assert_int_equal(uv_loop_init(&h->loop), 0);
	atomic_init(&h->ready, true);
	atomic_init(&h->live, true);
	atomic_init(&h->probes, 0);
	atomic_init(&h->signalled, false);
	h->health.ready = probe_ready;
	h->health.live = probe_live;
	h->health.arg = h;
	h->s = metrics_server_start(&h->loop, "127.0.0.1:0", &h->health,
	    &cause);
	if (h->s == NULL)
		fail_msg("start: %s", cause);
	h->port = metrics_server_port(h->s);
	assert_true(h->port > 0);
	if (timeout_ms != 0)
		metrics_server_set_timeout(h->s, timeout_ms);
	h->script = script;
	h->done.data = h;
	assert_int_equal(uv_async_init(&h->loop, &h->done, on_done), 0);
	assert_int_equal(pthread_create(&h->thread, NULL, client_main, h), 0);
	assert_int_equal(uv_run(&h->loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(pthread_join(h->thread, NULL), 0);
	assert_int_equal(uv_loop_close(&h->loop), 0);
	if (h->fail[0] != '\0')
		fail_msg("client: %s", h->fail);
}

static int
harness_setup(void **state)
{
	metrics_reset();
	*state = xcalloc(1, sizeof(struct harness));
	return 0;
}

static int
harness_teardown(void **state)
{
	struct harness	*h = *state;
	int		 i;

	for (i = 0; i < h->nout; i++)
		free(h->out[i]);
	free(h);
	metrics_reset();
	return 0;
}

static void
assert_status(const char *resp, int status)
{
	char	want[32];

	snprintf(want, sizeof want, "HTTP/1.1 %d ", status);
	if (strncmp(resp, want, strlen(want)) != 0)
		fail_msg("want %d, got \"%.200s\"", status, resp);
}

static const char *
body_of(const char *resp)
{
	const char	*p = strstr(resp, "\r\n\r\n");

	assert_non_null(p);
	return p + 4;
}

static bool
has_header(const char *resp, const char *line)
{
	const char	*end = strstr(resp, "\r\n\r\n");
	const char	*p = strstr(resp, line);

	return p != NULL && end != NULL && p < end && p[-1] == '\n' &&
	    p[strlen(line)] == '\r';
}

static long
header_long(const char *resp, const char *name)
{
	const char	*p = strcasestr(resp, name);

	assert_non_null(p);
	return strtol(p + strlen(name) + 1, NULL, 10);
}

/* --------------------------------------------------------- listener tests */

static void
script_metrics(struct harness *h)
{
	struct cli	c;

	if (!cli_open(h, &c, 0))
		return;
	exchange(h, &c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", false);
	exchange(h, &c, "GET /metrics?name[]=x HTTP/1.1\r\n\r\n", false);
	exchange(h, &c, "GET http://localhost:9252/metrics HTTP/1.1\r\n\r\n",
	    false);
	cli_close(&c);
}

static void
test_server_metrics(void **state)
{
	struct harness	*h = *state;
	const char	*r, *body;
	int		 i;

	metrics_describe("runner_test_total", "counter", "A test counter.");
	metrics_counter_add("runner_test_total", "", 5);
	harness_run(h, script_metrics, 0);
	assert_int_equal(h->nout, 3);
	for (i = 0; i < 3; i++) {
		r = h->out[i];
		assert_status(r, 200);
		assert_true(has_header(r, "Content-Type: text/plain; "
		    "version=0.0.4; charset=utf-8"));
		assert_false(has_header(r, "Connection: close"));
		body = body_of(r);
		assert_int_equal(header_long(r, "Content-Length:"),
		    (long)strlen(body));
		assert_non_null(strstr(body, "# HELP runner_test_total A test "
		    "counter.\n# TYPE runner_test_total counter\n"
		    "runner_test_total 5\n"));
		assert_true(sample_value(body, "process_open_fds") > 0);
		assert_true(sample_value(body,
		    "process_resident_memory_bytes") > 0);
	}
}

static void
script_health(struct harness *h)
{
	struct cli	c;

	if (!cli_open(h, &c, 0))
		return;
	atomic_store(&h->ready, false);
	exchange(h, &c, "GET /health/live HTTP/1.1\r\n\r\n", false);
	exchange(h, &c, "GET /health/ready HTTP/1.1\r\n\r\n", false);
	atomic_store(&h->ready, true);
	exchange(h, &c, "GET /health/ready HTTP/1.1\r\n\r\n", false);
	atomic_store(&h->live, false);
	exchange(h, &c, "GET /health/live HTTP/1.1\r\n\r\n", false);
	exchange(h, &c, "GET /health HTTP/1.1\r\n\r\n", false);
	cli_close(&c);
}

static void
test_server_health(void **state)
{
	struct harness	*h = *state;

	harness_run(h, script_health, 0);
	assert_int_equal(h->nout, 5);
	assert_status(h->out[0], 200);
	assert_string_equal(body_of(h->out[0]), "ok\n");
	assert_true(has_header(h->out[0], "Content-Type: text/plain; "
	    "charset=utf-8"));
	assert_status(h->out[1], 503);
	assert_string_equal(body_of(h->out[1]), "not ready\n");
	assert_status(h->out[2], 200);
	assert_string_equal(body_of(h->out[2]), "ok\n");
	assert_status(h->out[3], 503);
	assert_status(h->out[4], 503);
	assert_int_equal(atomic_load(&h->probes), 5);
}

static bool
always_false(void *arg)
{
	(void)arg;
	return false;
}

static void
script_health_defaults(struct harness *h)
{
	struct cli	c;

	if (!cli_open(h, &c, 0))
		return;
	exchange(h, &c, "GET /health/live HTTP/1.1\r\n\r\n", false);
	exchange(h, &c, "GET /health/ready HTTP/1.1\r\n\r\n", false);
	cli_close(&c);
}

/* No callbacks means healthy; a NULL struct too. */
static void
test_server_health_defaults(void **state)
{
	struct metrics_health	 only_live = { NULL, always_false, NULL };
	struct harness		*h = *state;
	char			*cause;
	int			 round;

	for (round = 0; round < 2; round++) {
		memset(h, 0, sizeof *h);
		assert_int_equal(uv_loop_init(&h->loop), 0);
		h->s = metrics_server_start(&h->loop, "127.0.0.1:0",
		    round == 0 ? NULL : &only_live, &cause);
		assert_non_null(h->s);
		h->port = metrics_server_port(h->s);
		h->script = script_health_defaults;
		h->done.data = h;
		uv_async_init(&h->loop, &h->done, on_done);
		assert_int_equal(pthread_create(&h->thread, NULL, client_main,
		    h), 0);
		uv_run(&h->loop, UV_RUN_DEFAULT);
		pthread_join(h->thread, NULL);
		assert_int_equal(uv_loop_close(&h->loop), 0);
		assert_string_equal(h->fail, "");
		assert_int_equal(h->nout, 2);
		assert_status(h->out[0], round == 0 ? 200 : 503);
		assert_status(h->out[1], 200);
		free(h->out[0]);
		free(h->out[1]);
		h->nout = 0;
	}
}

static void
script_errors(struct harness *h)
{
	struct cli	c;

	if (!cli_open(h, &c, 0))
		return;
	exchange(h, &c, "GET /nope HTTP/1.1\r\n\r\n", false);
	exchange(h, &c, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
	    false);
	exchange(h, &c, "DELETE /health/ready HTTP/1.1\r\n\r\n", false);
	exchange(h, &c, "get /metrics HTTP/1.1\r\n\r\n", false);
	exchange(h, &c, "GET /Metrics HTTP/1.1\r\n\r\n", false);
	exchange(h, &c, "GET /metrics/ HTTP/1.1\r\n\r\n", false);
	exchange(h, &c, "GET /health/live HTTP/1.1\r\n\r\n", false);
	cli_close(&c);
}

static void
test_server_404_405(void **state)
{
	struct harness	*h = *state;

	harness_run(h, script_errors, 0);
	assert_int_equal(h->nout, 7);
	assert_status(h->out[0], 404);
	assert_string_equal(body_of(h->out[0]), "not found\n");
	assert_status(h->out[1], 405);
	assert_true(has_header(h->out[1], "Allow: GET, HEAD"));
	assert_status(h->out[2], 405);
	assert_status(h->out[3], 405);	/* methods are case-sensitive */
	assert_status(h->out[4], 404);
	assert_status(h->out[5], 404);
	/* None of them closed the connection. */
	assert_status(h->out[6], 200);
}

static void
script_head(struct harness *h)
{
	struct cli	c;

	if (!cli_open(h, &c, 0))
		return;
	exchange(h, &c, "HEAD /metrics HTTP/1.1\r\n\r\n", true);
	exchange(h, &c, "HEAD /health/ready HTTP/1.1\r\n\r\n", true);
	/* Had a body followed either head, it would be read as this answer. */
	exchange(h, &c, "GET /health/live HTTP/1.1\r\n\r\n", false);
	cli_close(&c);
}

static void
test_server_head(void **state)
{
	struct harness	*h = *state;

	harness_run(h, script_head, 0);
	assert_int_equal(h->nout, 3);
	assert_status(h->out[0], 200);
	assert_string_equal(body_of(h->out[0]), "");
	assert_true(header_long(h->out[0], "Content-Length:") > 100);
	assert_true(has_header(h->out[0], "Content-Type: text/plain; "
	    "version=0.0.4; charset=utf-8"));
	assert_status(h->out[1], 200);
	assert_int_equal(header_long(h->out[1], "Content-Length:"), 3);
	assert_status(h->out[2], 200);
	assert_string_equal(body_of(h->out[2]), "ok\n");
}

static void
script_keep_alive(struct harness *h)
{
	struct cli	c;

	if (!cli_open(h, &c, 0))
		return;
	exchange(h, &c, "GET /health/live HTTP/1.1\r\n\r\n", false);
	exchange(h, &c, "GET /health/ready HTTP/1.1\r\nConnection: "
	    "keep-alive\r\n\r\n", false);
	/* Three at once, one with bare LF line ends and a leading CRLF. */
	if (!cli_sends(&c, "GET /health/live HTTP/1.1\r\n\r\n"
	    "GET /nope HTTP/1.1\r\n\r\n"
	    "\r\nGET /health/ready HTTP/1.1\nHost: x\n\n"))
		tfail(h, "send");
	record(h, cli_response(&c, false), 0, 0);
	record(h, cli_response(&c, false), 0, 0);
	record(h, cli_response(&c, false), 0, 0);
	/* The last says close, and the server does. */
	exchange(h, &c, "GET /health/live HTTP/1.1\r\nConnection: "
	    "Keep-Alive, Close\r\n\r\n", false);
	record_rest(h, &c, 0);
	cli_close(&c);
}

static void
test_server_keep_alive(void **state)
{
	struct harness	*h = *state;

	harness_run(h, script_keep_alive, 0);
	assert_int_equal(h->nout, 7);
	assert_status(h->out[0], 200);
	assert_status(h->out[1], 200);
	assert_status(h->out[2], 200);
	assert_status(h->out[3], 404);
	assert_status(h->out[4], 200);
	assert_false(has_header(h->out[4], "Connection: close"));
	assert_status(h->out[5], 200);
	assert_true(has_header(h->out[5], "Connection: close"));
	assert_string_equal(h->out[6], "");
	assert_int_equal(h->end[6], 0);
}

static void
script_http10(struct harness *h)
{
	struct cli	c;

	one_shot(h, "GET /health/live HTTP/1.0\r\n\r\n");
	if (!cli_open(h, &c, 0))
		return;
	exchange(h, &c, "GET /health/live HTTP/1.0\r\nConnection: "
	    "keep-alive\r\n\r\n", false);
	exchange(h, &c, "HEAD /metrics HTTP/1.0\r\nConnection: "
	    "keep-alive\r\n\r\n", true);
	exchange(h, &c, "GET /health/ready HTTP/1.0\r\n\r\n", false);
	record_rest(h, &c, 0);
	cli_close(&c);
}

static void
test_server_http10(void **state)
{
	struct harness	*h = *state;

	harness_run(h, script_http10, 0);
	assert_int_equal(h->nout, 5);
	/* Answered, then closed (end 0: EOF, not a reset). */
	assert_status(h->out[0], 200);
	assert_true(has_header(h->out[0], "Connection: close"));
	assert_string_equal(body_of(h->out[0]), "ok\n");
	assert_int_equal(h->end[0], 0);
	assert_status(h->out[1], 200);
	assert_true(has_header(h->out[1], "Connection: keep-alive"));
	assert_status(h->out[2], 200);
	assert_true(has_header(h->out[2], "Connection: keep-alive"));
	assert_string_equal(body_of(h->out[2]), "");
	assert_status(h->out[3], 200);
	assert_true(has_header(h->out[3], "Connection: close"));
	assert_string_equal(h->out[4], "");
	assert_int_equal(h->end[4], 0);
}

static void
script_too_large(struct harness *h)
{
	struct buf	req;
	int		i;

	buf_init(&req, BUF_UNLIMITED);
	buf_puts(&req, "GET /");
	for (i = 0; i < 20 * 1024; i++)
		buf_putc(&req, 'a');
	buf_puts(&req, " HTTP/1.1\r\n\r\n");
	one_shot(h, req.ptr);

	/* Many small headers, none too long, 20 KiB in all. */
	buf_reset(&req);
	buf_puts(&req, "GET /metrics HTTP/1.1\r\n");
	for (i = 0; i < 1000; i++)
		buf_printf(&req, "X-Header-%04d: value\r\n", i);
	buf_puts(&req, "\r\n");
	one_shot(h, req.ptr);

	/* Just under the cap is still served. */
	buf_reset(&req);
	buf_puts(&req, "GET /health/live HTTP/1.1\r\nX-Pad: ");
	while (req.len < 16 * 1024 - 40)
		buf_putc(&req, 'p');
	buf_puts(&req, "\r\nConnection: close\r\n\r\n");
	one_shot(h, req.ptr);
	buf_release(&req);
}

static void
test_server_431(void **state)
{
	struct harness	*h = *state;

	harness_run(h, script_too_large, 0);
	assert_int_equal(h->nout, 3);
	assert_status(h->out[0], 431);
	assert_true(has_header(h->out[0], "Connection: close"));
	assert_int_equal(h->end[0], 0);
	assert_status(h->out[1], 431);
	assert_int_equal(h->end[1], 0);
	assert_status(h->out[2], 200);
	assert_int_equal(h->end[2], 0);
}

static const char *const bad_requests[] = {
	"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",	/* a TLS hello */
	"\x7f\x01\x02garbage",
	"HELLO\r\n\r\n",
	"GET\r\n\r\n",
	"GET /\r\n\r\n",				/* HTTP/0.9 */
	"GET / HTTP/1.1 extra\r\n\r\n",
	"GET  / HTTP/1.1\r\n\r\n",
	"GET / http/1.1\r\n\r\n",
	"GET / HTTP/1.1\r\nNo colon here\r\n\r\n",
	"GET / HTTP/1.1\r\nHost : x\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
	"GET / HTTP/1.1\r\nX: a\001b\r\n\r\n",
	"GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n",
	"GET /a\x01 HTTP/1.1\r\n\r\n",
	"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n",
	"AVERYLONGMETHODNAMEOFMORETHANTHIRTYTWOCHARACTERS / HTTP/1.1\r\n\r\n",
};

/* A NUL inside a header value. */
static const char	nul_header[] = "GET / HTTP/1.1\r\nX: a\0b\r\n\r\n";

static void
script_garbage(struct harness *h)
{
	size_t	i;

	for (i = 0; i < sizeof bad_requests / sizeof bad_requests[0]; i++)
		one_shot(h, bad_requests[i]);
	one_shot_len(h, nul_header, sizeof nul_header - 1);
	one_shot(h, "GET / HTTP/2.0\r\n\r\n");
	one_shot(h, "GET / HTTP/1.2\r\n\r\n");
	one_shot(h, "GET /health/live HTTP/1.1\r\nConnection: close\r\n\r\n");
}

static void
test_server_garbage(void **state)
{
	struct harness	*h = *state;
	size_t		 i, n = sizeof bad_requests / sizeof bad_requests[0];

	harness_run(h, script_garbage, 0);
	assert_int_equal(h->nout, (int)n + 4);
	for (i = 0; i < n + 1; i++) {
		assert_status(h->out[i], 400);
		assert_true(has_header(h->out[i], "Connection: close"));
		assert_string_equal(body_of(h->out[i]), "bad request\n");
		assert_int_equal(h->end[i], 0);
	}
	assert_status(h->out[n + 1], 505);
	assert_status(h->out[n + 2], 505);
	assert_status(h->out[n + 3], 200);
}

/* Random bytes, some after a valid request line; the server must live. */
static void
script_fuzz(struct harness *h)
{
	struct cli	 c;
	unsigned	 seed = 12345;
	char		 blob[512], *rest;
	size_t		 len, i, pre;
	int		 round, end, bad = 0;
	const char	*prefix = "GET /metrics HTTP/1.1\r\n";

	for (round = 0; round < 300; round++) {
		len = 0;
		if (round % 2 == 0) {
			pre = strlen(prefix);
			memcpy(blob, prefix, pre);
			len = pre;
		}
		seed = seed * 1103515245 + 12345;
		pre = len + 1 + (seed >> 16) % 300;
		for (i = len; i < pre; i++) {
			seed = seed * 1103515245 + 12345;
			/* Mostly printable, with line ends and colons. */
			switch ((seed >> 16) % 8) {
			case 0:	blob[i] = '\r'; break;
			case 1:	blob[i] = '\n'; break;
			case 2:	blob[i] = ':'; break;
			case 3:	blob[i] = (char)((seed >> 8) & 0xff); break;
			default: blob[i] = (char)(' ' + (seed >> 20) % 95);
			}
		}
		len = pre;
		if (!cli_open(h, &c, 0))
			return;
		cli_send(&c, blob, len);
		shutdown(c.fd, SHUT_WR);
		rest = cli_rest(&c, &end);
		if (rest[0] != '\0' && strncmp(rest, "HTTP/1.1 ", 9) != 0)
			bad++;
		free(rest);
		cli_close(&c);
	}
	record(h, xasprintf("%d", bad), 0, 0);
	one_shot(h, "GET /health/live HTTP/1.1\r\nConnection: close\r\n\r\n");
}

static void
test_server_fuzz(void **state)
{
	struct harness	*h = *state;

	harness_run(h, script_fuzz, 500);
	assert_int_equal(h->nout, 2);
	assert_string_equal(h->out[0], "0");
	assert_status(h->out[1], 200);
}

static void
script_disconnects(struct harness *h)
{
	struct cli	c;
	struct linger	lg = { 1, 0 };

	/* Half a request, then gone. */
	if (!cli_open(h, &c, 0))
		return;
	cli_sends(&c, "GET /metr");
	cli_close(&c);
	/* Half a request, then reset. */
	if (!cli_open(h, &c, 0))
		return;
	cli_sends(&c, "GET /metrics HTTP/1.1\r\nHost:");
	setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	cli_close(&c);
	/* A whole request, gone before the answer is read. */
	if (!cli_open(h, &c, 0))
		return;
	cli_sends(&c, "GET /metrics HTTP/1.1\r\n\r\n");
	setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	cli_close(&c);
	/* Connected, nothing sent, gone. */
	if (!cli_open(h, &c, 0))
		return;
	cli_close(&c);
	usleep(100 * 1000);
	one_shot(h, "GET /health/live HTTP/1.1\r\nConnection: close\r\n\r\n");
}

static void
test_server_client_disconnects(void **state)
{
	struct harness	*h = *state;

	harness_run(h, script_disconnects, 0);
	assert_int_equal(h->nout, 1);
	assert_status(h->out[0], 200);
}

static void
script_timeouts(struct harness *h)
{
	struct cli	c;
	uint64_t	t0;
	int		i;

	/* Idle: never sends a byte. */
	t0 = clock_mono_ms();
	if (!cli_open(h, &c, 0))
		return;
	record_rest(h, &c, t0);
	cli_close(&c);

	/* Slow: a header every 50 ms never finishes the head in time. */
	t0 = clock_mono_ms();
	if (!cli_open(h, &c, 0))
		return;
	cli_sends(&c, "GET /metrics HTTP/1.1\r\n");
	for (i = 0; i < 40; i++) {
		usleep(50 * 1000);
		if (!cli_sends(&c, "X-Slow: 1\r\n"))
			break;
	}
	record_rest(h, &c, t0);
	cli_close(&c);

	/* Idle after a keep-alive answer: the clock restarts per request. */
	if (!cli_open(h, &c, 0))
		return;
	usleep(100 * 1000);
	exchange(h, &c, "GET /health/live HTTP/1.1\r\n\r\n", false);
	t0 = clock_mono_ms();
	record_rest(h, &c, t0);
	cli_close(&c);
}

static void
test_server_timeouts(void **state)
{
	struct harness	*h = *state;

	harness_run(h, script_timeouts, 300);
	assert_int_equal(h->nout, 4);
	assert_string_equal(h->out[0], "");
	assert_true(h->ms[0] >= 250 && h->ms[0] < 3000);
	assert_int_equal(h->end[0], 0);
	/* Closed by the timer, not after its 2 s of headers. */
	assert_true(h->ms[1] >= 250 && h->ms[1] < 1500);
	assert_status(h->out[2], 200);
	assert_string_equal(h->out[3], "");
	assert_true(h->ms[3] >= 150 && h->ms[3] < 3000);
}

static void
script_slow_reader(struct harness *h)
{
	struct cli	 c;
	char		*rest;
	int		 end;

	/* A tiny receive window and no reading: the write cannot finish. */
	if (!cli_open(h, &c, 4096))
		return;
	cli_sends(&c, "GET /metrics HTTP/1.1\r\n\r\n");
	usleep(800 * 1000);
	rest = cli_rest(&c, &end);
	record(h, xasprintf("%zu", strlen(rest)), end, 0);
	free(rest);
	cli_close(&c);
	one_shot(h, "GET /health/live HTTP/1.1\r\nConnection: close\r\n\r\n");
}

/* Enough series that the answer cannot sit in the socket buffers. */
static void
add_many_series(void)
{
	char	labels[128];
	int	i;

	for (i = 0; i < 100000; i++) {
		snprintf(labels, sizeof labels, "runner=\"runner-%06d\","
		    "endpoint=\"jobs_request\",status=\"204\"", i);
		metrics_counter_add("runner_big_total", labels, i);
	}
}

static void
test_server_slow_reader(void **state)
{
	struct harness	*h = *state;

	add_many_series();
	harness_run(h, script_slow_reader, 300);
	assert_int_equal(h->nout, 2);
	/* Cut short: far less than the 8 MB the answer has. */
	assert_true(strtoul(h->out[0], NULL, 10) < 6 * 1024 * 1024);
	assert_status(h->out[1], 200);
}

static void
script_limit(struct harness *h)
{
	struct cli	 c[65], extra;
	char		*r;
	int		 i, tries;

	for (i = 0; i < 64; i++) {
		if (!cli_open(h, &c[i], 0))
			return;
		cli_sends(&c[i], "GET /health/live HTTP/1.1\r\n\r\n");
		r = cli_response(&c[i], false);
		if (r == NULL || strncmp(r, "HTTP/1.1 200 ", 13) != 0)
			tfail(h, "one of 64");
		free(r);
	}
	/* The 65th is closed as it is accepted, unanswered. */
	if (!cli_open(h, &c[64], 0))
		return;
	cli_sends(&c[64], "GET /health/live HTTP/1.1\r\n\r\n");
	record_rest(h, &c[64], 0);
	cli_close(&c[64]);

	/* One leaves; a newcomer gets in (once the server has seen it go). */
	cli_close(&c[0]);
	r = NULL;
	for (tries = 0; tries < 50 && r == NULL; tries++) {
		if (!cli_open(h, &extra, 0))
			return;
		cli_sends(&extra, "GET /health/live HTTP/1.1\r\n\r\n");
		r = cli_response(&extra, false);
		cli_close(&extra);
		if (r == NULL)
			usleep(20 * 1000);
	}
	record(h, r, 0, 0);
	for (i = 1; i < 64; i++)
		cli_close(&c[i]);
}

static void
test_server_connection_limit(void **state)
{
	struct harness	*h = *state;

	harness_run(h, script_limit, 0);
	assert_int_equal(h->nout, 2);
	assert_string_equal(h->out[0], "");
	assert_true(h->end[0] == 0 || h->end[0] == ECONNRESET);
	assert_status(h->out[1], 200);
}

static void
script_close_with_clients(struct harness *h)
{
	struct cli	 c[4];
	char		*r;
	int		 i, end;

	/* Answered and kept alive; mid-request; idle; being written to. */
	for (i = 0; i < 4; i++) {
		if (!cli_open(h, &c[i], i == 3 ? 4096 : 0))
			return;
	}
	exchange(h, &c[0], "GET /health/live HTTP/1.1\r\n\r\n", false);
	exchange(h, &c[1], "GET /health/live HTTP/1.1\r\n\r\n", false);
	cli_sends(&c[1], "GET /metr");
	cli_sends(&c[3], "GET /metrics HTTP/1.1\r\n\r\n");
	usleep(300 * 1000);

	signal_done(h);		/* the server closes now */
	for (i = 0; i < 4; i++) {
		r = cli_rest(&c[i], &end);
		/* Closed: EOF or reset, but not the timeout of our recv. */
		record(h, xasprintf("%d", end == 0 || end == ECONNRESET), 0, 0);
		free(r);
		cli_close(&c[i]);
	}
}

static void
test_server_close_with_clients(void **state)
{
	struct harness	*h = *state;
	int		 i;

	add_many_series();
	harness_run(h, script_close_with_clients, 0);
	assert_int_equal(h->nout, 6);
	assert_status(h->out[0], 200);
	assert_status(h->out[1], 200);
	for (i = 2; i < 6; i++)
		assert_string_equal(h->out[i], "1");
}

static void
test_bad_addresses(void **state)
{
	static const struct {
		const char	*addr;
		const char	*why;
	} bad[] = {
		{ "", "listen_address is empty" },
		{ "9252", "missing port" },
		{ "127.0.0.1", "missing port" },
		{ "127.0.0.1:", "invalid port" },
		{ "127.0.0.1:65536", "invalid port" },
		{ "127.0.0.1:http", "invalid port" },
		{ "127.0.0.1:-1", "invalid port" },
		{ "127.0.0.1:0000080", "invalid port" },
		{ "::1:9252", "in brackets" },
		{ "[::1", "missing ']'" },
		{ "[::1]9252", "missing port" },
		{ "[127.0.0.1]:80", "not an IPv6 address" },
		{ "gitlab.example.com:9252", "not an IP address" },
		{ "256.0.0.1:80", "not an IP address" },
		{ "1.2.3:80", "not an IP address" },
	};
	uv_loop_t		 loop;
	struct metrics_server	*s, *s2;
	char			*cause, addr[64];
	size_t			 i;

	(void)state;
	assert_int_equal(uv_loop_init(&loop), 0);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cause = NULL;
		s = metrics_server_start(&loop, bad[i].addr, NULL, &cause);
		assert_null(s);
		assert_non_null(cause);
		if (strstr(cause, bad[i].why) == NULL ||
		    (bad[i].addr[0] != '\0' && strstr(cause, bad[i].addr) == NULL))
			fail_msg("%s: %s", bad[i].addr, cause);
		free(cause);
	}
	/* Nothing was left on the loop by the failures. */
	assert_int_equal(uv_loop_close(&loop), 0);

	/* In use. */
	assert_int_equal(uv_loop_init(&loop), 0);
	s = metrics_server_start(&loop, "127.0.0.1:0", NULL, &cause);
	assert_non_null(s);
	snprintf(addr, sizeof addr, "127.0.0.1:%d", metrics_server_port(s));
	s2 = metrics_server_start(&loop, addr, NULL, &cause);
	assert_null(s2);
	assert_non_null(strstr(cause, addr));
	assert_non_null(strstr(cause, "in use"));
	free(cause);
	metrics_server_close(s);
	metrics_server_close(NULL);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void
test_good_addresses(void **state)
{
	static const char *const good[] = {
		"127.0.0.1:0", "localhost:0", ":0", "0.0.0.0:0",
	};
	uv_loop_t		 loop;
	struct metrics_server	*s;
	char			*cause;
	size_t			 i;

	(void)state;
	for (i = 0; i < sizeof good / sizeof good[0]; i++) {
		assert_int_equal(uv_loop_init(&loop), 0);
		s = metrics_server_start(&loop, good[i], NULL, &cause);
		if (s == NULL)
			fail_msg("%s: %s", good[i], cause);
		assert_true(metrics_server_port(s) > 0);
		metrics_server_close(s);
		assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
		assert_int_equal(uv_loop_close(&loop), 0);
	}
	/* IPv6 may be off on this machine; if so, the reason names it. */
	assert_int_equal(uv_loop_init(&loop), 0);
	s = metrics_server_start(&loop, "[::1]:0", NULL, &cause);
	if (s == NULL) {
		assert_non_null(strstr(cause, "[::1]:0"));
		free(cause);
	} else
		metrics_server_close(s);
	assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
	assert_int_equal(uv_loop_close(&loop), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_render_exact,
		    reset_registry, reset_registry),
		cmocka_unit_test_setup_teardown(test_histogram_own_bounds,
		    reset_registry, reset_registry),
		cmocka_unit_test_setup_teardown(test_collector_and_clear,
		    reset_registry, reset_registry),
		cmocka_unit_test_setup_teardown(test_histogram_edges,
		    reset_registry, reset_registry),
		cmocka_unit_test_setup_teardown(test_label_escape,
		    reset_registry, reset_registry),
		cmocka_unit_test_setup_teardown(test_sorted_and_described_once,
		    reset_registry, reset_registry),
		cmocka_unit_test_setup_teardown(test_misuse_is_dropped,
		    reset_registry, reset_registry),
		cmocka_unit_test_setup_teardown(test_values,
		    reset_registry, reset_registry),
		cmocka_unit_test_setup_teardown(test_process_metrics,
		    reset_registry, reset_registry),
		cmocka_unit_test_setup_teardown(test_render_cap,
		    reset_registry, reset_registry),
		cmocka_unit_test_setup_teardown(
		    test_no_allocation_after_first_update,
		    reset_registry, reset_registry),
		cmocka_unit_test_setup_teardown(test_many_series,
		    reset_registry, reset_registry),
		cmocka_unit_test_setup_teardown(test_server_metrics,
		    harness_setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_server_health,
		    harness_setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_server_health_defaults,
		    harness_setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_server_404_405,
		    harness_setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_server_head,
		    harness_setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_server_keep_alive,
		    harness_setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_server_http10,
		    harness_setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_server_431,
		    harness_setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_server_garbage,
		    harness_setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_server_fuzz,
		    harness_setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_server_client_disconnects,
		    harness_setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_server_timeouts,
		    harness_setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_server_slow_reader,
		    harness_setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_server_connection_limit,
		    harness_setup, harness_teardown),
		cmocka_unit_test_setup_teardown(test_server_close_with_clients,
		    harness_setup, harness_teardown),
		cmocka_unit_test(test_bad_addresses),
		cmocka_unit_test(test_good_addresses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

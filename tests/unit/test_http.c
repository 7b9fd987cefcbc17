/*
 * The transport and its retry layer (api/http.c) against a scripted HTTP
 * server that runs on the same libuv loop: what each attempt sends, when,
 * and that every loop closes clean.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <uv.h>

#include "api/http.h"
#include "lib/buf.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/xmalloc.h"

#define MAX_SCRIPT	16
#define MAX_SEEN	64

/* What the server answers, in order; the last entry repeats. */
struct reply {
	int		 status;		/* 0: close the connection without answering */
	const char	*headers;		/* extra header lines, each ending in \r\n */
	const char	*body;
	int		 delay_ms;
};

struct seen {
	char		 method[16];
	char		 path[256];
	char		 request_id[64];
	bool		 expect;
	char		*body;
	size_t		 body_len;
	uint64_t	 at;			/* monotonic ms */
};

struct server {
	uv_loop_t	*loop;
	union {					/* tcp, or a unix socket if path is set */
		uv_tcp_t	 listener;
		uv_pipe_t	 listener_pipe;
	};
	int		 port;
	char		 path[108];
	struct reply	 script[MAX_SCRIPT];
	int		 n_script;
	int		 next;
	struct seen	 seen[MAX_SEEN];
	int		 n_seen;
	int		 in_flight_retries;
	int		 max_in_flight_retries;
	int		 conns;
	struct conn	*all[MAX_SEEN];		/* every connection accepted */
	int		 n_all;
};

struct conn {
	union {
		uv_tcp_t	 tcp;
		uv_pipe_t	 pipe;
	};
	struct server	*srv;
	struct buf	 in;
	uv_timer_t	 delay;
	bool		 delaying;
	bool		 retry;
	char		*out;
	size_t		 out_len;
};

static void	serve_next(struct conn *);

/* Connections are freed at the end of a test, so the server's list stays valid. */
static void
on_conn_closed(uv_handle_t *h)
{
	struct conn *c = h->data;

	buf_release(&c->in);
	c->srv->conns--;
}

static void
conn_close(struct conn *c)
{
	if (uv_is_closing((uv_handle_t *)&c->tcp))
		return;
	uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
	if (c->delaying)
		uv_close((uv_handle_t *)&c->delay, NULL);
}

static void
on_written(uv_write_t *w, int status)
{
	(void)status;
	free(w);
}

static void
send_reply(struct conn *c)
{
	uv_write_t *w = xcalloc(1, sizeof(*w));
	uv_buf_t b = uv_buf_init(c->out, (unsigned)c->out_len);

	if (c->retry)
		c->srv->in_flight_retries--;
	uv_write(w, (uv_stream_t *)&c->tcp, &b, 1, on_written);
}

static void
on_delay(uv_timer_t *t)
{
	struct conn *c = t->data;

	send_reply(c);
}

static void
alloc_cb(uv_handle_t *h, size_t size, uv_buf_t *b)
{
	(void)h;
	b->base = xmalloc(size);
	b->len = size;
}

static const char *
header_value(const char *head, const char *name, char *out, size_t size)
{
	const char *p = head;
	size_t n = strlen(name);

	while ((p = strchr(p, '\n')) != NULL) {
		p++;
		if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
			const char *v = p + n + 1, *end;

			while (*v == ' ')
				v++;
			end = strpbrk(v, "\r\n");
			snprintf(out, size, "%.*s", (int)(end - v), v);
			return out;
		}
	}
	return NULL;
}

/* A whole request in c->in?  Record it and answer by the script. */
static void
serve_next(struct conn *c)
{
	struct server *s = c->srv;
	char *end = strstr(c->in.ptr, "\r\n\r\n"), value[128];
	size_t head_len, body_len = 0;
	struct seen *seen;
	struct reply *r;
	int i;

	if (end == NULL)
		return;
	head_len = (size_t)(end - c->in.ptr) + 4;
	if (header_value(c->in.ptr, "Content-Length", value, sizeof(value)) != NULL)
		body_len = strtoul(value, NULL, 10);
	if (c->in.len < head_len + body_len)
		return;
	assert_true(s->n_seen < MAX_SEEN);
	seen = &s->seen[s->n_seen++];
	sscanf(c->in.ptr, "%15s %255s", seen->method, seen->path);
	header_value(c->in.ptr, "X-Request-Id", seen->request_id, sizeof(seen->request_id));
	seen->expect = header_value(c->in.ptr, "Expect", value, sizeof(value)) != NULL;
	seen->body = xmemdup(c->in.ptr + head_len, body_len);
	seen->body_len = body_len;
	seen->at = clock_mono_ms();
	for (i = 0; i < s->n_seen - 1; i++)
		if (strcmp(s->seen[i].request_id, seen->request_id) == 0)
			c->retry = true;
	buf_consume(&c->in, head_len + body_len);

	r = &s->script[s->next < s->n_script ? s->next : s->n_script - 1];
	s->next++;
	if (r->status == 0) {
		conn_close(c);
		return;
	}
	free(c->out);
	c->out = xasprintf("HTTP/1.1 %d X\r\nContent-Length: %zu\r\n%s\r\n%s", r->status,
	    strlen(r->body ? r->body : ""), r->headers ? r->headers : "",
	    r->body ? r->body : "");
	c->out_len = strlen(c->out);
	if (c->retry && ++s->in_flight_retries > s->max_in_flight_retries)
		s->max_in_flight_retries = s->in_flight_retries;
	if (r->delay_ms > 0) {
		/* Once per connection: a keep-alive one may delay many replies. */
		if (!c->delaying) {
			uv_timer_init(s->loop, &c->delay);
			c->delay.data = c;
			c->delaying = true;
		}
		uv_timer_start(&c->delay, on_delay, (uint64_t)r->delay_ms, 0);
	} else
		send_reply(c);
}

static void
on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
	struct conn *c = st->data;

	if (n > 0) {
		buf_append(&c->in, b->base, (size_t)n);
		serve_next(c);
	} else if (n < 0)
		conn_close(c);
	free(b->base);
}

static void
on_connection(uv_stream_t *listener, int status)
{
	struct server *s = listener->data;
	struct conn *c = xcalloc(1, sizeof(*c));

	assert_int_equal(status, 0);
	c->srv = s;
	buf_init(&c->in, BUF_UNLIMITED);
	if (s->path[0] != '\0')
		uv_pipe_init(s->loop, &c->pipe, 0);
	else
		uv_tcp_init(s->loop, &c->tcp);
	c->tcp.data = c;
	assert_int_equal(uv_accept(listener, (uv_stream_t *)&c->tcp), 0);
	s->conns++;
	assert_true(s->n_all < MAX_SEEN);
	s->all[s->n_all++] = c;
	uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read);
}

static void
server_start(struct server *s, uv_loop_t *loop)
{
	struct sockaddr_in addr;
	struct sockaddr_storage bound;
	int len = sizeof(bound);

	s->loop = loop;
	uv_tcp_init(loop, &s->listener);
	s->listener.data = s;
	uv_ip4_addr("127.0.0.1", 0, &addr);
	assert_int_equal(uv_tcp_bind(&s->listener, (struct sockaddr *)&addr, 0), 0);
	assert_int_equal(uv_listen((uv_stream_t *)&s->listener, 64, on_connection), 0);
	uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &len);
	s->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
}

static void
server_start_unix(struct server *s, uv_loop_t *loop)
{
	s->loop = loop;
	snprintf(s->path, sizeof(s->path), "/tmp/test_http.%d.sock", (int)getpid());
	unlink(s->path);
	uv_pipe_init(loop, &s->listener_pipe, 0);
	s->listener_pipe.data = s;
	assert_int_equal(uv_pipe_bind(&s->listener_pipe, s->path), 0);
	assert_int_equal(uv_listen((uv_stream_t *)&s->listener_pipe, 64, on_connection), 0);
}

static void
count_leftover(uv_handle_t *h, void *arg)
{
	if (!uv_is_closing(h)) {
		(*(int *)arg)++;
		uv_close(h, NULL);
	}
}

/*
 * libuv's MAKE_VALGRIND_HAPPY: close what the test owns, run the loop, and
 * fail if anything else was left open (a handle http.c forgot).
 */
static void
close_all_and_check(uv_loop_t *loop, struct server *s)
{
	int i, leftover = 0;

	uv_close((uv_handle_t *)&s->listener, NULL);
	for (i = 0; i < s->n_all; i++)
		conn_close(s->all[i]);
	uv_run(loop, UV_RUN_DEFAULT);
	uv_walk(loop, count_leftover, &leftover);
	uv_run(loop, UV_RUN_DEFAULT);
	assert_int_equal(leftover, 0);
	assert_int_equal(uv_loop_close(loop), 0);
	if (s->path[0] != '\0')
		unlink(s->path);
	for (i = 0; i < s->n_seen; i++)
		free(s->seen[i].body);
	for (i = 0; i < s->n_all; i++) {
		free(s->all[i]->out);
		free(s->all[i]);
	}
}

struct result {
	bool	 done;
	int	 calls;
	long	 status;
	int	 error;
	unsigned attempts;
	char	 body[256];
	uint64_t at;
};

static void
on_done(struct http_req *req, const struct http_result *res, void *data)
{
	struct result *r = data;

	r->done = true;
	r->calls++;
	r->status = res->status;
	r->error = res->error;
	r->attempts = res->attempts;
	r->at = clock_mono_ms();
	snprintf(r->body, sizeof(r->body), "%.*s", (int)res->body_len, res->body);
	http_req_free(req);
}

struct env {
	uv_loop_t	 loop;
	struct server	 srv;
	struct http	*http;
	char		 url[128];
};

/* A GitLab client's failure gate, shortened: windows of 200 ms doubling to 400. */
static bool gated;

static void
env_open_at(struct env *e, const struct reply *script, int n, bool unix_socket)
{
	struct http_config hc = { 0 };

	memset(e, 0, sizeof(*e));
	uv_loop_init(&e->loop);
	if (unix_socket)
		server_start_unix(&e->srv, &e->loop);
	else
		server_start(&e->srv, &e->loop);
	memcpy(e->srv.script, script, (size_t)n * sizeof(*script));
	e->srv.n_script = n;
	hc.loop = &e->loop;
	hc.user_agent = "runner test";
	hc.backoff_min_ms = 20;
	hc.backoff_max_ms = 200;
	if (gated) {
		hc.hold_on_failure = true;
		hc.gate_min_ms = 200;
		hc.gate_max_ms = 400;
		hc.resume_spread_ms = 300;
	}
	e->http = http_new(&hc);
	snprintf(e->url, sizeof(e->url), "http://127.0.0.1:%d/api/v4/jobs/7", e->srv.port);
	log_set_level(LOG_LEVEL_ERROR);
}

static void
env_open(struct env *e, const struct reply *script, int n)
{
	env_open_at(e, script, n, false);
}

static void
env_close(struct env *e)
{
	http_close(e->http);
	close_all_and_check(&e->loop, &e->srv);
}

static void
wait_for(struct env *e, struct result *r)
{
	while (!r->done)
		uv_run(&e->loop, UV_RUN_ONCE);
}

static void
test_success_sends_id_and_no_expect(void **state)
{
	static const struct reply script[] = { { 200, NULL, "{\"ok\":1}", 0 } };
	struct env e;
	struct result r = { 0 };
	struct http_req *req;
	char *big = xmalloc(2 * 1024 * 1024);
	size_t i;

	(void)state;
	env_open(&e, script, 1);
	for (i = 0; i < 2 * 1024 * 1024; i++)
		big[i] = (char)('a' + i % 26);
	req = http_req_new(e.http, "PUT", e.url);
	http_req_body(req, "application/json", big, 2 * 1024 * 1024);
	assert_int_equal(http_req_start(req, on_done, &r), 0);
	wait_for(&e, &r);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "{\"ok\":1}");
	assert_int_equal(e.srv.n_seen, 1);
	assert_string_equal(e.srv.seen[0].method, "PUT");
	assert_int_equal(strlen(e.srv.seen[0].request_id), 32);
	assert_false(e.srv.seen[0].expect);
	assert_int_equal(e.srv.seen[0].body_len, 2 * 1024 * 1024);
	assert_memory_equal(e.srv.seen[0].body, big, 2 * 1024 * 1024);
	free(big);
	env_close(&e);
}

static void
test_retries_send_the_same_bytes(void **state)
{
	static const struct reply script[] = {
		{ 500, NULL, "oops", 0 }, { 0, NULL, NULL, 0 }, { 502, NULL, "", 0 },
		{ 429, NULL, "", 0 }, { 200, NULL, "done", 0 },
	};
	static const char body[] = "{\"token\":\"job-token\",\"state\":\"success\"}";
	struct env e;
	struct result r = { 0 };
	struct http_req *req;
	int i;

	(void)state;
	env_open(&e, script, 5);
	req = http_req_new(e.http, "PUT", e.url);
	http_req_body(req, "application/json", body, strlen(body));
	assert_int_equal(http_req_start(req, on_done, &r), 0);
	wait_for(&e, &r);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, 200);
	/*
	 * libcurl itself sends again, once, when a reused connection turns out
	 * dead; that send is not one of our attempts, but it must carry the
	 * same bytes too.
	 */
	assert_true(r.attempts >= 4 && r.attempts <= 5);
	assert_int_equal(e.srv.n_seen, 5);
	for (i = 0; i < 5; i++) {
		assert_string_equal(e.srv.seen[i].method, "PUT");
		assert_int_equal(e.srv.seen[i].body_len, strlen(body));
		assert_memory_equal(e.srv.seen[i].body, body, strlen(body));
		assert_string_equal(e.srv.seen[i].request_id, e.srv.seen[0].request_id);
	}
	env_close(&e);
}

/*
 * A body streamed from a file range, answered 503 then 2xx: both attempts
 * carry the same bytes (the request rewinds to the range's start).
 */
static void
check_streamed_body(const char *method, off_t offset, off_t len, const char *want)
{
	static const struct reply script[] = { { 503, NULL, "", 0 }, { 202, NULL, "", 0 } };
	char path[] = "/tmp/test_http.XXXXXX";
	struct env e;
	struct result r = { 0 };
	struct http_req *req;
	int fd, i;

	env_open(&e, script, 2);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0123456789abcdef", 16), 16);
	req = http_req_new(e.http, method, e.url);
	http_req_body_fd(req, "application/octet-stream", fd, offset, len);
	assert_int_equal(http_req_start(req, on_done, &r), 0);
	wait_for(&e, &r);
	assert_int_equal(r.status, 202);
	assert_int_equal(e.srv.n_seen, 2);
	for (i = 0; i < 2; i++) {
		assert_string_equal(e.srv.seen[i].method, method);
		assert_int_equal(e.srv.seen[i].body_len, (size_t)len);
		assert_memory_equal(e.srv.seen[i].body, want, (size_t)len);
	}
	close(fd);
	unlink(path);
	env_close(&e);
}

static void
test_streamed_body_rewinds(void **state)
{
	(void)state;
	check_streamed_body("POST", 0, 16, "0123456789abcdef");
}

/* A PATCH reads its range of the log file: the same range on every attempt. */
static void
test_streamed_body_range(void **state)
{
	(void)state;
	check_streamed_body("PATCH", 4, 8, "456789ab");
}

static void
test_retry_after_is_honoured(void **state)
{
	static const struct reply script[] = {
		{ 429, "Retry-After: 1\r\n", "", 0 }, { 204, NULL, "", 0 },
	};
	struct env e;
	struct result r = { 0 };
	struct http_req *req;

	(void)state;
	env_open(&e, script, 2);
	req = http_req_new(e.http, "POST", e.url);
	assert_int_equal(http_req_start(req, on_done, &r), 0);
	wait_for(&e, &r);
	assert_int_equal(r.status, 204);
	assert_int_equal(e.srv.n_seen, 2);
	assert_true(e.srv.seen[1].at - e.srv.seen[0].at >= 1000);
	env_close(&e);
}

static void	run_for(uv_loop_t *, uint64_t);

static struct http_req *
start_at(struct env *e, const char *method, const char *path, struct result *r)
{
	char url[192];
	struct http_req *req;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/api/v4/%s", e->srv.port, path);
	req = http_req_new(e->http, method, url);
	assert_int_equal(http_req_start(req, on_done, r), 0);
	return req;
}

/*
 * A 429 with Retry-After closes its endpoint class: nothing more of it is
 * sent in the window (other classes are), then one probe goes alone; when
 * it is answered, the rest follow.  Without the gate, the later PATCHes
 * would go at once and each wait its own window after its own 429.
 */
static void
test_pushback_holds_the_class_then_probes_once(void **state)
{
	static const struct reply script[] = {
		{ 429, "Retry-After: 1\r\n", "", 0 },	/* PATCH jobs/1 */
		{ 204, NULL, "", 0 },			/* PUT jobs/4: another class */
		{ 429, "Retry-After: 1\r\n", "", 0 },	/* the first probe */
		{ 202, NULL, "", 0 },			/* the second, then the rest */
	};
	struct env e;
	struct result r[4] = { { 0 } };
	uint64_t t0;
	int i, patches_in_second_window = 0;

	(void)state;
	env_open(&e, script, 4);
	start_at(&e, "PATCH", "jobs/1/trace", &r[0]);
	while (e.srv.n_seen < 1)
		uv_run(&e.loop, UV_RUN_ONCE);
	run_for(&e.loop, 100);		/* the 429 is read */
	t0 = e.srv.seen[0].at;
	start_at(&e, "PATCH", "jobs/2/trace", &r[1]);
	start_at(&e, "PATCH", "jobs/3/trace", &r[2]);
	start_at(&e, "PUT", "jobs/4", &r[3]);
	for (i = 0; i < 4; i++)
		wait_for(&e, &r[i]);

	assert_int_equal(r[3].status, 204);
	for (i = 0; i < 3; i++)
		assert_int_equal(r[i].status, 202);
	/* 429, PUT, probe (429), probe (202), the two others: nothing more. */
	assert_int_equal(e.srv.n_seen, 6);
	assert_string_equal(e.srv.seen[1].method, "PUT");
	assert_true(e.srv.seen[1].at - t0 < 1000);
	for (i = 2; i < 6; i++) {
		assert_string_equal(e.srv.seen[i].method, "PATCH");
		assert_true(e.srv.seen[i].at - t0 >= 1000);
		if (e.srv.seen[i].at - t0 < 2000)
			patches_in_second_window++;
	}
	assert_int_equal(patches_in_second_window, 1);
	assert_true(e.srv.seen[3].at - e.srv.seen[2].at >= 1000);
	env_close(&e);
}

/*
 * A server that is down answers 503 without a wait: the class is held all
 * the same, one probe per window, the windows double; when a probe is
 * answered the rest resume spread out, not in one burst.  The first
 * request's own retries wait for the windows too: with the gate off they
 * would go 20 .. 200 ms apart, each one more request to a server that is
 * down.
 */
static void
test_failures_hold_the_class_and_resume_spread(void **state)
{
	static const struct reply script[] = {
		{ 503, NULL, "down", 0 },		/* PATCH jobs/1 */
		{ 502, NULL, "still down", 0 },		/* the first probe */
		{ 504, NULL, "", 0 },			/* the second */
		{ 202, NULL, "", 0 },			/* the third, then the rest */
	};
	struct env e;
	struct result r[5] = { { 0 } };
	uint64_t t0;
	int i;

	(void)state;
	gated = true;
	env_open(&e, script, 4);
	gated = false;
	start_at(&e, "PATCH", "jobs/1/trace", &r[0]);
	while (e.srv.n_seen < 1)
		uv_run(&e.loop, UV_RUN_ONCE);
	run_for(&e.loop, 50);		/* the 503 is read */
	t0 = e.srv.seen[0].at;
	for (i = 1; i < 5; i++) {
		char path[32];

		snprintf(path, sizeof(path), "jobs/%d/trace", i + 1);
		start_at(&e, "PATCH", path, &r[i]);
	}
	for (i = 0; i < 5; i++)
		wait_for(&e, &r[i]);

	for (i = 0; i < 5; i++)
		assert_int_equal(r[i].status, 202);
	/* 503, three probes, then the four held: nothing more. */
	assert_int_equal(e.srv.n_seen, 8);
	/* Windows of 100 .. 200, 200 .. 400, then capped at 200 .. 400 ms. */
	assert_in_range(e.srv.seen[1].at - t0, 100, 400);	/* (a slow machine: late, never early) */
	assert_in_range(e.srv.seen[2].at - e.srv.seen[1].at, 200, 700);
	assert_in_range(e.srv.seen[3].at - e.srv.seen[2].at, 200, 700);
	/* The four held ones resume over the spread (300 ms), not at once. */
	assert_true(e.srv.seen[4].at >= e.srv.seen[3].at);
	assert_in_range(e.srv.seen[7].at - e.srv.seen[4].at, 150, 700);
	assert_in_range(e.srv.seen[5].at - e.srv.seen[4].at, 40, 400);
	env_close(&e);
}

/*
 * A long-poll probe that the server holds, instead of failing fast as a
 * server that is down fails, opens its class after 2 s: the held requests
 * do not wait out the hold (50 s on GitLab.com) to come back.
 */
static void
test_long_poll_probe_held_opens_the_class(void **state)
{
	static const struct reply script[] = {
		{ 502, NULL, "down", 0 },		/* the first long poll */
		{ 204, NULL, "", 3000 },		/* the probe, held 3 s */
		{ 204, NULL, "", 0 },			/* the rest */
	};
	struct env e;
	struct result r[3] = { { 0 } };
	struct http_req *req;
	char url[192];
	uint64_t probe_at;
	int i;

	(void)state;
	gated = true;
	env_open(&e, script, 3);
	gated = false;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/api/v4/jobs/request", e.srv.port);
	for (i = 0; i < 3; i++) {
		req = http_req_new(e.http, "POST", url);
		http_req_flags(req, HTTP_LONG_POLL);
		assert_int_equal(http_req_start(req, on_done, &r[i]), 0);
		if (i == 0) {
			while (e.srv.n_seen < 1)
				uv_run(&e.loop, UV_RUN_ONCE);
			run_for(&e.loop, 50);	/* the 502 is read: the class is held */
		}
	}
	for (i = 0; i < 3; i++)
		wait_for(&e, &r[i]);
	for (i = 0; i < 3; i++)
		assert_int_equal(r[i].status, 204);
	assert_int_equal(e.srv.n_seen, 4);
	probe_at = e.srv.seen[1].at;
	/* The two held ones went 2 s after the probe left, before its answer (3 s). */
	for (i = 2; i < 4; i++)
		assert_in_range(e.srv.seen[i].at - probe_at, 2000, 2900);
	env_close(&e);
}

static void
test_wait_past_deadline_returns_the_answer(void **state)
{
	static const struct reply script[] = { { 429, "Retry-After: 30\r\n", "slow down", 0 } };
	struct env e;
	struct result r = { 0 };
	struct http_req *req;
	uint64_t start;

	(void)state;
	env_open(&e, script, 1);
	req = http_req_new(e.http, "POST", e.url);
	http_req_deadline(req, 10000);
	start = clock_mono_ms();
	assert_int_equal(http_req_start(req, on_done, &r), 0);
	wait_for(&e, &r);
	assert_int_equal(r.status, 429);
	assert_string_equal(r.body, "slow down");
	assert_int_equal(e.srv.n_seen, 1);
	assert_true(r.at - start < 2000);
	env_close(&e);
}

static void
test_client_errors_are_not_retried(void **state)
{
	static const int codes[] = { 400, 401, 403, 404, 409, 412, 416 };
	struct reply script[1] = { { 0, NULL, "no", 0 } };
	struct env e;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		struct result r = { 0 };
		struct http_req *req;

		script[0].status = codes[i];
		env_open(&e, script, 1);
		req = http_req_new(e.http, "PATCH", e.url);
		http_req_body(req, "text/plain", "log", 3);
		assert_int_equal(http_req_start(req, on_done, &r), 0);
		wait_for(&e, &r);
		assert_int_equal(r.status, codes[i]);
		assert_int_equal(r.attempts, 1);
		assert_int_equal(e.srv.n_seen, 1);
		env_close(&e);
	}
}

static void
test_opting_out_of_retries(void **state)
{
	static const struct reply script[] = { { 429, "Retry-After: 1\r\n", "", 0 },
	    { 503, NULL, "", 0 }, { 200, NULL, "", 0 } };
	struct env e;
	struct result r1 = { 0 }, r2 = { 0 };
	struct http_req *req;

	(void)state;
	env_open(&e, script, 3);
	/* No retry of 429 (the answer is the caller's to act on)... */
	req = http_req_new(e.http, "POST", e.url);
	http_req_flags(req, HTTP_NO_RETRY_429);
	assert_int_equal(http_req_start(req, on_done, &r1), 0);
	wait_for(&e, &r1);
	assert_int_equal(r1.status, 429);
	assert_int_equal(r1.attempts, 1);
	/* ... and no retry at all. */
	req = http_req_new(e.http, "POST", e.url);
	http_req_flags(req, HTTP_NO_RETRY);
	assert_int_equal(http_req_start(req, on_done, &r2), 0);
	wait_for(&e, &r2);
	assert_int_equal(r2.status, 503);
	assert_int_equal(r2.attempts, 1);
	assert_int_equal(e.srv.n_seen, 2);
	env_close(&e);
}

static void
test_response_cap(void **state)
{
	static const struct reply script[] = { { 200, NULL,
	    "0123456789012345678901234567890123456789", 0 } };
	struct env e;
	struct result r = { 0 };
	struct http_req *req;

	(void)state;
	env_open(&e, script, 1);
	req = http_req_new(e.http, "GET", e.url);
	http_req_response_cap(req, 16);
	assert_int_equal(http_req_start(req, on_done, &r), 0);
	wait_for(&e, &r);
	assert_int_equal(r.error, -EMSGSIZE);
	assert_int_equal(r.attempts, 1);
	env_close(&e);
}

static void
on_stop(uv_timer_t *t)
{
	uv_stop(t->loop);
}

/* Run the loop for ms milliseconds. */
static void
run_for(uv_loop_t *loop, uint64_t ms)
{
	uv_timer_t t;

	uv_timer_init(loop, &t);
	uv_timer_start(&t, on_stop, ms, 0);
	uv_run(loop, UV_RUN_DEFAULT);
	uv_close((uv_handle_t *)&t, NULL);
	uv_run(loop, UV_RUN_NOWAIT);
}

static void
test_cancel_while_waiting(void **state)
{
	static const struct reply script[] = { { 503, "Retry-After: 20\r\n", "", 0 } };
	struct env e;
	struct result r = { 0 };
	struct http_req *req;

	(void)state;
	env_open(&e, script, 1);
	req = http_req_new(e.http, "POST", e.url);
	assert_int_equal(http_req_start(req, on_done, &r), 0);
	run_for(&e.loop, 300);
	/* Answered 503 and now waiting 20 s: still ours, not called back. */
	assert_int_equal(e.srv.n_seen, 1);
	assert_false(r.done);
	assert_int_equal(http_active(e.http), 1);
	http_req_cancel(req);
	assert_true(r.done);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.error, -ECANCELED);
	assert_int_equal(http_active(e.http), 0);
	env_close(&e);
	assert_int_equal(r.calls, 1);
}

static void
test_close_cancels_everything_once(void **state)
{
	static const struct reply script[] = { { 200, NULL, "", 5000 } };
	struct env e;
	struct result r[3] = { { 0 } };
	struct http_req *req;
	int i;

	(void)state;
	env_open(&e, script, 1);
	for (i = 0; i < 3; i++) {
		req = http_req_new(e.http, "GET", e.url);
		assert_int_equal(http_req_start(req, on_done, &r[i]), 0);
	}
	while (e.srv.n_seen < 3)
		uv_run(&e.loop, UV_RUN_ONCE);
	assert_int_equal(http_active(e.http), 3);
	http_close(e.http);
	for (i = 0; i < 3; i++) {
		assert_int_equal(r[i].calls, 1);
		assert_int_equal(r[i].error, -ECANCELED);
	}
	close_all_and_check(&e.loop, &e.srv);
	for (i = 0; i < 3; i++)
		assert_int_equal(r[i].calls, 1);
}

static void
test_retry_slots_bound_retries_in_flight(void **state)
{
	static const struct reply script[] = {
		{ 503, NULL, "", 0 }, { 503, NULL, "", 0 }, { 503, NULL, "", 0 },
		{ 503, NULL, "", 0 }, { 503, NULL, "", 0 }, { 503, NULL, "", 0 },
		{ 200, NULL, "", 150 },
	};
	struct http_config hc = { 0 };
	struct env e;
	struct result r[6] = { { 0 } };
	struct http_req *req;
	int i;

	(void)state;
	env_open(&e, script, 7);
	http_close(e.http);
	uv_run(&e.loop, UV_RUN_NOWAIT);
	hc.loop = &e.loop;
	hc.max_retries_in_flight = 2;
	hc.backoff_min_ms = 10;
	hc.backoff_max_ms = 20;
	e.http = http_new(&hc);
	for (i = 0; i < 6; i++) {
		req = http_req_new(e.http, "POST", e.url);
		assert_int_equal(http_req_start(req, on_done, &r[i]), 0);
	}
	for (i = 0; i < 6; i++)
		wait_for(&e, &r[i]);
	for (i = 0; i < 6; i++)
		assert_int_equal(r[i].status, 200);
	assert_true(e.srv.max_in_flight_retries <= 2);
	assert_true(e.srv.max_in_flight_retries >= 1);
	env_close(&e);
}

/* The caller names the root its endpoints are named below; ids and query go. */
/* What a streamed answer gave its data callback. */
struct streamed {
	struct buf	 data;
	int		 pieces;
	bool		 cancel;	/* cancel the request from the first piece */
	bool		 close;		/* close the http from the first piece */
	struct http	*http;
	struct http_req	*req;
	struct result	*result;
	bool		 done_inside_cancel;
};

static void
on_data(const char *data, size_t len, void *arg)
{
	struct streamed *st = arg;

	st->pieces++;
	buf_append(&st->data, data, len);
	if (st->cancel && st->pieces == 1) {
		http_req_cancel(st->req);
		/* From here the callback may not come: libcurl still holds the transfer. */
		st->done_inside_cancel = st->result->done;
	}
	if (st->close && st->pieces == 1) {
		http_close(st->http);
		st->done_inside_cancel = st->result->done;
	}
}

static char *
big_body(size_t n)
{
	char *b = xmalloc(n + 1);
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = (char)('a' + i % 26);
	b[n] = '\0';
	return b;
}

/* A 2xx over a unix socket, larger than the response cap, comes in pieces. */
static void
test_on_data_streams_over_unix_socket(void **state)
{
	const size_t n = 3 * 1024 * 1024;
	char *body = big_body(n), url[] = "http://docker/v1.41/containers/x/logs";
	struct reply script[] = { { 200, NULL, body, 0 } };
	struct streamed st = { 0 };
	struct env e;
	struct result r = { 0 };
	struct http_req *req;

	(void)state;
	env_open_at(&e, script, 1, true);
	buf_init(&st.data, BUF_UNLIMITED);
	req = http_req_new(e.http, "GET", url);
	http_req_unix_socket(req, e.srv.path);
	http_req_on_data(req, on_data, &st);
	assert_int_equal(http_req_start(req, on_done, &r), 0);
	wait_for(&e, &r);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.error, 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "");
	assert_int_equal(st.data.len, n);
	assert_memory_equal(st.data.ptr, body, n);
	assert_true(st.pieces > 1);
	assert_int_equal(e.srv.n_seen, 1);
	assert_string_equal(e.srv.seen[0].path, "/v1.41/containers/x/logs");
	buf_release(&st.data);
	free(body);
	env_close(&e);
}

/* An error answer is not streamed: its body is the caller's message. */
static void
test_on_data_error_body_is_buffered(void **state)
{
	static const struct reply script[] = { { 404, NULL,
	    "{\"message\":\"No such container: x\"}", 0 } };
	struct streamed st = { 0 };
	struct env e;
	struct result r = { 0 };
	struct http_req *req;

	(void)state;
	env_open(&e, script, 1);
	buf_init(&st.data, BUF_UNLIMITED);
	req = http_req_new(e.http, "GET", e.url);
	http_req_on_data(req, on_data, &st);
	http_req_flags(req, HTTP_NO_RETRY);
	assert_int_equal(http_req_start(req, on_done, &r), 0);
	wait_for(&e, &r);
	assert_int_equal(r.status, 404);
	assert_string_equal(r.body, "{\"message\":\"No such container: x\"}");
	assert_int_equal(st.pieces, 0);
	buf_release(&st.data);
	env_close(&e);
}

static void
check_stop_from_data_callback(bool close)
{
	char *body = big_body(1024 * 1024);
	struct reply script[] = { { 200, NULL, body, 0 } };
	struct streamed st = { 0 };
	struct env e;
	struct result r = { 0 };

	env_open(&e, script, 1);
	buf_init(&st.data, BUF_UNLIMITED);
	st.cancel = !close;
	st.close = close;
	st.http = e.http;
	st.result = &r;
	st.req = http_req_new(e.http, "GET", e.url);
	http_req_flags(st.req, HTTP_NO_RETRY);
	http_req_on_data(st.req, on_data, &st);
	assert_int_equal(http_req_start(st.req, on_done, &r), 0);
	wait_for(&e, &r);
	assert_false(st.done_inside_cancel);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.error, -ECANCELED);
	assert_int_equal(r.status, 0);
	/* Nothing after the cancel: the transfer stopped at the first piece. */
	assert_int_equal(st.pieces, 1);
	buf_release(&st.data);
	free(body);
	if (close) {
		/* The http is closing already: only the server is left to close. */
		close_all_and_check(&e.loop, &e.srv);
	} else
		env_close(&e);
}

static void
test_cancel_from_data_callback(void **state)
{
	(void)state;
	check_stop_from_data_callback(false);
}

static void
test_close_from_data_callback(void **state)
{
	(void)state;
	check_stop_from_data_callback(true);
}

static void
test_endpoint_label(void **state)
{
	char out[96];

	(void)state;
	http_endpoint_label("http://h:1/api/v4/jobs/7/trace?debug_trace=false", "/api/v4",
	    out, sizeof(out));
	assert_string_equal(out, "/jobs/{id}/trace");
	http_endpoint_label("http://h:1/api/v4/jobs/7/trace?debug_trace=false", NULL,
	    out, sizeof(out));
	assert_string_equal(out, "/api/v4/jobs/{id}/trace");
	http_endpoint_label("https://h/gitlab/api/v4/runners/12a/x", "/api/v4", out,
	    sizeof(out));
	assert_string_equal(out, "/gitlab/api/v4/runners/12a/x");
	http_endpoint_label("http://h", NULL, out, sizeof(out));
	assert_string_equal(out, "/");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_success_sends_id_and_no_expect),
		cmocka_unit_test(test_retries_send_the_same_bytes),
		cmocka_unit_test(test_streamed_body_rewinds),
		cmocka_unit_test(test_streamed_body_range),
		cmocka_unit_test(test_pushback_holds_the_class_then_probes_once),
		cmocka_unit_test(test_failures_hold_the_class_and_resume_spread),
		cmocka_unit_test(test_long_poll_probe_held_opens_the_class),
		cmocka_unit_test(test_retry_after_is_honoured),
		cmocka_unit_test(test_wait_past_deadline_returns_the_answer),
		cmocka_unit_test(test_client_errors_are_not_retried),
		cmocka_unit_test(test_opting_out_of_retries),
		cmocka_unit_test(test_response_cap),
		cmocka_unit_test(test_cancel_while_waiting),
		cmocka_unit_test(test_close_cancels_everything_once),
		cmocka_unit_test(test_retry_slots_bound_retries_in_flight),
		cmocka_unit_test(test_on_data_streams_over_unix_socket),
		cmocka_unit_test(test_on_data_error_body_is_buffered),
		cmocka_unit_test(test_cancel_from_data_callback),
		cmocka_unit_test(test_close_from_data_callback),
		cmocka_unit_test(test_endpoint_label),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

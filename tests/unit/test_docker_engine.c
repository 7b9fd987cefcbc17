/*
 * The pure parts of the Engine API client (executors/docker/engine.c): the
 * version pick, the host parsing, endpoint labels, error messages, query
 * escaping and the JSON-lines splitter.  The file is included, so its
 * static functions are tested as they are (the library's engine.o is then
 * not linked: every symbol it has is defined here).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <unistd.h>

#include "executors/docker/engine.c"

static void
count_leftover(uv_handle_t *h, void *arg)
{
	if (!uv_is_closing(h)) {
		(*(int *)arg)++;
		uv_close(h, NULL);
	}
}

static void
assert_pick(const char *server, const char *server_min, const char *want)
{
	char out[VERSION_SIZE], *why;

	assert_int_equal(version_pick(server, server_min, out, sizeof(out), &why), 0);
	assert_null(why);
	assert_string_equal(out, want);
}

static char *
assert_refused(const char *server, const char *server_min)
{
	char out[VERSION_SIZE], *why;

	assert_int_equal(version_pick(server, server_min, out, sizeof(out), &why), -1);
	assert_non_null(why);
	assert_null(strchr(why, '\n'));
	return why;
}

static void
test_version_pick(void **state)
{
	char *why;

	(void)state;
	/* Debian 12's 20.10: exactly our oldest. */
	assert_pick("1.41", NULL, "1.41");
	assert_pick("1.41", "1.12", "1.41");
	assert_pick("1.44", NULL, "1.44");
	/* Newer than we know: ours, the newest both speak. */
	assert_pick("1.52", "1.44", ENGINE_API_MAX);
	assert_pick("2.0", NULL, ENGINE_API_MAX);
	/* Minor versions compare as numbers, not strings. */
	assert_pick("1.100", NULL, ENGINE_API_MAX);

	why = assert_refused("1.40", NULL);
	assert_non_null(strstr(why, "1.40"));
	assert_non_null(strstr(why, "older than " ENGINE_API_MIN));
	free(why);
	why = assert_refused("1.9", NULL);	/* 1.9 < 1.41 */
	free(why);
	/* A server whose minimum is past our newest (a future Docker). */
	why = assert_refused("1.60", "1.50");
	assert_non_null(strstr(why, "needs API version 1.50"));
	assert_non_null(strstr(why, ENGINE_API_MAX));
	free(why);
	why = assert_refused(NULL, NULL);
	free(why);
	why = assert_refused("", NULL);
	free(why);
	why = assert_refused("1.41a", NULL);
	free(why);
	why = assert_refused("v1.41", NULL);
	free(why);
}

static void
test_host_unix(void **state)
{
	struct host_spec h;
	char *cause;

	(void)state;
	assert_int_equal(host_parse("unix:///run/x.sock", false, NULL, &h, &cause), 0);
	assert_string_equal(h.address, "unix:///run/x.sock");
	assert_string_equal(h.unix_path, "/run/x.sock");
	assert_string_equal(h.base_url, "http://docker");
	assert_null(h.ca_file);
	host_spec_free(&h);

	assert_int_equal(host_parse(NULL, false, NULL, &h, &cause), 0);
	assert_string_equal(h.unix_path, "/var/run/docker.sock");
	assert_string_equal(h.address, "unix:///var/run/docker.sock");
	host_spec_free(&h);

	assert_int_equal(host_parse("unix://relative.sock", false, NULL, &h, &cause), -1);
	assert_non_null(strstr(cause, "unix://relative.sock"));
	free(cause);
}

static void
test_host_tcp(void **state)
{
	struct host_spec h;
	char *cause;

	(void)state;
	assert_int_equal(host_parse("tcp://10.0.0.5:2375", false, NULL, &h, &cause), 0);
	assert_null(h.unix_path);
	assert_string_equal(h.base_url, "http://10.0.0.5:2375");
	assert_false(h.tls_verify);
	host_spec_free(&h);

	assert_int_equal(host_parse("tcp://docker.example:2376/", true, "/certs", &h, &cause),
	    0);
	assert_string_equal(h.base_url, "https://docker.example:2376");
	assert_true(h.tls_verify);
	assert_string_equal(h.ca_file, "/certs/ca.pem");
	assert_string_equal(h.cert_file, "/certs/cert.pem");
	assert_string_equal(h.key_file, "/certs/key.pem");
	host_spec_free(&h);

	/* The CLI's default ports. */
	assert_int_equal(host_parse("tcp://d", false, NULL, &h, &cause), 0);
	assert_string_equal(h.base_url, "http://d:2375");
	host_spec_free(&h);
	assert_int_equal(host_parse("tcp://d", true, "/c", &h, &cause), 0);
	assert_string_equal(h.base_url, "https://d:2376");
	host_spec_free(&h);

	assert_int_equal(host_parse("tcp://", false, NULL, &h, &cause), -1);
	free(cause);
	assert_int_equal(host_parse("tcp://u@h:1", false, NULL, &h, &cause), -1);
	free(cause);
	assert_int_equal(host_parse("tcp://h:1/base", false, NULL, &h, &cause), -1);
	free(cause);
	assert_int_equal(host_parse("tcp://h:1", true, "", &h, &cause), -1);
	assert_non_null(strstr(cause, "certificate"));
	free(cause);
}

static void
test_host_refused(void **state)
{
	static const char *const hosts[] = { "npipe:////./pipe/docker_engine",
	    "ssh://me@build-host", "http://h:2375", "/var/run/docker.sock", NULL };
	struct host_spec h;
	char *cause;
	int i;

	(void)state;
	for (i = 0; hosts[i] != NULL; i++) {
		assert_int_equal(host_parse(hosts[i], false, NULL, &h, &cause), -1);
		assert_non_null(strstr(cause, hosts[i]));
		assert_null(strchr(cause, '\n'));
		free(cause);
	}
}

static void
test_engine_new_env(void **state)
{
	struct engine_config cfg = { 0 };
	uv_loop_t loop;
	struct engine *e;
	char *cause = NULL;

	(void)state;
	uv_loop_init(&loop);
	cfg.loop = &loop;
	setenv("DOCKER_HOST", "tcp://envhost:1234", 1);
	setenv("DOCKER_TLS_VERIFY", "1", 1);
	setenv("DOCKER_CERT_PATH", "/env/certs", 1);
	e = engine_new(&cfg, &cause);
	assert_non_null(e);
	assert_string_equal(engine_address(e), "tcp://envhost:1234");
	assert_string_equal(engine_endpoint(e)->base_url, "https://envhost:1234");
	assert_string_equal(engine_endpoint(e)->ca_file, "/env/certs/ca.pem");
	assert_null(engine_api_version(e));
	assert_true(engine_api_at_least(e, "1.41"));
	assert_false(engine_api_at_least(e, "1.44"));
	assert_ptr_equal(engine_loop(e), &loop);
	engine_close(e);

	/* A configured host: the environment's TLS switch does not apply. */
	cfg.host = "tcp://conf:2375";
	e = engine_new(&cfg, &cause);
	assert_non_null(e);
	assert_string_equal(engine_endpoint(e)->base_url, "http://conf:2375");
	assert_false(engine_endpoint(e)->tls_verify);
	engine_close(e);

	cfg.host = "ssh://x";
	assert_null(engine_new(&cfg, &cause));
	assert_non_null(strstr(cause, "ssh://x"));
	free(cause);
	unsetenv("DOCKER_HOST");
	unsetenv("DOCKER_TLS_VERIFY");
	unsetenv("DOCKER_CERT_PATH");
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void
assert_label(const char *path, const char *want)
{
	char out[96];

	endpoint_label(path, out, sizeof(out));
	assert_string_equal(out, want);
}

static void
test_endpoint_label(void **state)
{
	(void)state;
	assert_label("/containers/create?name=runner-x", "docker:/containers/create");
	assert_label("/containers/8b5520734efb/start", "docker:/containers/{id}/start");
	assert_label("/containers/8b5520734efb?force=1&v=1", "docker:/containers/{id}");
	assert_label("/containers/json?all=1", "docker:/containers/json");
	assert_label("/exec/abc/start", "docker:/exec/{id}/start");
	assert_label("/images/create?fromImage=x", "docker:/images/create");
	assert_label("/images/registry.example/group/img:1/json", "docker:/images/{name}/json");
	assert_label("/images/alpine", "docker:/images/{name}");
	assert_label("/volumes/runner-cache-1", "docker:/volumes/{id}");
	assert_label("/_ping", "docker:/_ping");
}

static void
test_error_message(void **state)
{
	char *m;

	(void)state;
	m = error_message(404, "{\"message\":\"No such container: x\"}\n", 35);
	assert_string_equal(m, "No such container: x");
	free(m);
	m = error_message(502, "Bad Gateway\nmore", 16);
	assert_string_equal(m, "HTTP 502: Bad Gateway");
	free(m);
	m = error_message(500, "", 0);
	assert_string_equal(m, "HTTP 500");
	free(m);
}

static void
test_query_escape(void **state)
{
	char *s;

	(void)state;
	s = engine_query_escape("{\"label\":[\"com.gitlab.gitlab-runner.managed=true\"]}");
	assert_string_equal(s, "%7B%22label%22%3A%5B%22com.gitlab.gitlab-runner.managed"
	    "%3Dtrue%22%5D%7D");
	free(s);
	s = engine_query_escape("a b/c~_.-");
	assert_string_equal(s, "a%20b%2Fc~_.-");
	free(s);
	s = engine_query_escape("");
	assert_string_equal(s, "");
	free(s);
}

struct lines_seen {
	char	 all[512];
	int	 n;
};

static void
on_line(const char *s, size_t n, void *arg)
{
	struct lines_seen *seen = arg;
	size_t len = strlen(seen->all);

	snprintf(seen->all + len, sizeof(seen->all) - len, "[%.*s]", (int)n, s);
	seen->n++;
}

static void
test_lines_any_split(void **state)
{
	const char *in = "{\"status\":\"a\"}\n{\"status\":\"b\"}\r\n\n{\"error\":\"c\"}";
	size_t len = strlen(in), cut, cut2;

	(void)state;
	for (cut = 0; cut <= len; cut++)
		for (cut2 = cut; cut2 <= len; cut2++) {
			struct engine_lines l = { 0 };
			struct lines_seen seen = { 0 };

			engine_lines_feed(&l, in, cut, on_line, &seen);
			engine_lines_feed(&l, in + cut, cut2 - cut, on_line, &seen);
			engine_lines_feed(&l, in + cut2, len - cut2, on_line, &seen);
			engine_lines_end(&l, on_line, &seen);
			assert_string_equal(seen.all, "[{\"status\":\"a\"}][{\"status\":\"b\"}]"
			    "[{\"error\":\"c\"}]");
			assert_int_equal(seen.n, 3);
			assert_null(l.buf);
		}
}

/* ---- calls against a scripted engine on a unix socket ---- */

struct fake_conn {
	uv_pipe_t	 pipe;
	struct fake	*f;
	struct buf	 in;
};

struct fake {
	uv_loop_t	 loop;
	uv_pipe_t	 listener;
	char		 path[108];
	char		 host[128];
	bool		 ping_header;	/* /_ping answers with Api-Version */
	struct fake_conn *conns[16];
	int		 n_conns;
	char		 seen[16][128];	/* request lines */
	int		 n_seen;
	char		*big;		/* the body of /stream */
	size_t		 big_len;
};

static void
on_fake_written(uv_write_t *w, int status)
{
	(void)status;
	free(w->data);
	free(w);
}

static void
fake_send(struct fake_conn *c, const char *data, size_t len)
{
	uv_write_t *w = xcalloc(1, sizeof(*w));
	uv_buf_t b;

	w->data = xmemdup(data, len);
	b = uv_buf_init(w->data, (unsigned)len);
	uv_write(w, (uv_stream_t *)&c->pipe, &b, 1, on_fake_written);
}

static void
fake_answer(struct fake_conn *c, const char *line)
{
	struct fake *f = c->f;
	char path[96] = "", *head;

	sscanf(line, "%*s %95s", path);
	if (strcmp(path, "/_ping") == 0) {
		head = xasprintf("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n%s\r\nOK",
		    f->ping_header ? "Api-Version: 1.43\r\n" : "");
		fake_send(c, head, strlen(head));
		free(head);
	} else if (strcmp(path, "/version") == 0) {
		static const char body[] = "{\"ApiVersion\":\"1.45\",\"MinAPIVersion\":\"1.24\"}";

		head = xasprintf("HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s",
		    strlen(body), body);
		fake_send(c, head, strlen(head));
		free(head);
	} else if (strstr(path, "/stream") != NULL) {
		head = xasprintf("HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", f->big_len);
		fake_send(c, head, strlen(head));
		fake_send(c, f->big, f->big_len);
		free(head);
	} else if (strstr(path, "/err") != NULL) {
		static const char body[] = "{\"message\":\"boom: it broke\"}";

		head = xasprintf("HTTP/1.1 500 Internal Server Error\r\nContent-Length: %zu\r\n"
		    "\r\n%s", strlen(body), body);
		fake_send(c, head, strlen(head));
		free(head);
	}
	/* /hang: no answer, ever. */
}

static void
fake_alloc(uv_handle_t *h, size_t size, uv_buf_t *b)
{
	(void)h;
	b->base = xmalloc(size);
	b->len = size;
}

static void
on_fake_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
	struct fake_conn *c = st->data;
	struct fake *f = c->f;
	char *end;

	if (n > 0) {
		buf_append(&c->in, b->base, (size_t)n);
		while ((end = strstr(c->in.ptr, "\r\n\r\n")) != NULL) {
			*end = '\0';
			if (f->n_seen < 16)
				snprintf(f->seen[f->n_seen++], sizeof(f->seen[0]), "%.*s",
				    (int)strcspn(c->in.ptr, "\r"), c->in.ptr);
			fake_answer(c, c->in.ptr);
			buf_consume(&c->in, (size_t)(end - c->in.ptr) + 4);
		}
	} else if (n < 0 && !uv_is_closing((uv_handle_t *)&c->pipe))
		uv_close((uv_handle_t *)&c->pipe, NULL);
	free(b->base);
}

static void
on_fake_connection(uv_stream_t *listener, int status)
{
	struct fake *f = listener->data;
	struct fake_conn *c = xcalloc(1, sizeof(*c));

	assert_int_equal(status, 0);
	assert_true(f->n_conns < 16);
	c->f = f;
	buf_init(&c->in, BUF_UNLIMITED);
	uv_pipe_init(&f->loop, &c->pipe, 0);
	c->pipe.data = c;
	assert_int_equal(uv_accept(listener, (uv_stream_t *)&c->pipe), 0);
	f->conns[f->n_conns++] = c;
	uv_read_start((uv_stream_t *)&c->pipe, fake_alloc, on_fake_read);
}

static struct engine *
fake_open(struct fake *f, bool ping_header)
{
	struct engine_config cfg = { 0 };
	struct engine *e;
	char *cause = NULL;
	size_t i;

	memset(f, 0, sizeof(*f));
	f->ping_header = ping_header;
	f->big_len = 3 * 1024 * 1024 + 1;
	f->big = xmalloc(f->big_len);
	for (i = 0; i < f->big_len; i++)
		f->big[i] = (char)('a' + i % 26);
	uv_loop_init(&f->loop);
	snprintf(f->path, sizeof(f->path), "/tmp/test_docker_engine.%d.sock", (int)getpid());
	snprintf(f->host, sizeof(f->host), "unix://%s", f->path);
	unlink(f->path);
	uv_pipe_init(&f->loop, &f->listener, 0);
	f->listener.data = f;
	assert_int_equal(uv_pipe_bind(&f->listener, f->path), 0);
	assert_int_equal(uv_listen((uv_stream_t *)&f->listener, 16, on_fake_connection), 0);
	cfg.loop = &f->loop;
	cfg.host = f->host;
	e = engine_new(&cfg, &cause);
	assert_non_null(e);
	return e;
}

static void
fake_close(struct fake *f)
{
	int i, leftover = 0;

	uv_close((uv_handle_t *)&f->listener, NULL);
	for (i = 0; i < f->n_conns; i++)
		if (!uv_is_closing((uv_handle_t *)&f->conns[i]->pipe))
			uv_close((uv_handle_t *)&f->conns[i]->pipe, NULL);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	uv_walk(&f->loop, count_leftover, &leftover);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	assert_int_equal(leftover, 0);
	assert_int_equal(uv_loop_close(&f->loop), 0);
	for (i = 0; i < f->n_conns; i++) {
		buf_release(&f->conns[i]->in);
		free(f->conns[i]);
	}
	free(f->big);
	unlink(f->path);
}

/* What a call ended with. */
struct outcome {
	int		 calls;
	long		 status;
	int		 error;
	char		 message[256];
	size_t		 body_len;
	struct buf	 streamed;
	int		 pieces;
	struct engine	*close_engine;		/* engine_close() from the callback */
	struct engine_call *cancel_call;	/* engine_call_cancel() from on_data */
};

static void
on_outcome(const struct engine_result *res, void *arg)
{
	struct outcome *o = arg;

	o->calls++;
	o->status = res->status;
	o->error = res->error;
	snprintf(o->message, sizeof(o->message), "%s", res->message);
	o->body_len = res->body_len;
	assert_int_equal(strlen(res->body), res->body_len);
	if (o->close_engine != NULL)
		engine_close(o->close_engine);
}

static void
on_streamed(const char *data, size_t len, void *arg)
{
	struct outcome *o = arg;

	o->pieces++;
	buf_append(&o->streamed, data, len);
	if (o->cancel_call != NULL && o->pieces == 1)
		engine_call_cancel(o->cancel_call);
}

static void
run_until(struct fake *f, const int *calls)
{
	while (*calls == 0)
		uv_run(&f->loop, UV_RUN_ONCE);
}

static void
test_connect_and_calls(void **state)
{
	struct fake f;
	struct engine *e = fake_open(&f, true);
	struct outcome ready = { 0 }, streamed = { 0 }, err = { 0 };
	struct engine_call_opts opts = { .on_data = on_streamed };

	(void)state;
	assert_non_null(engine_connect(e, on_outcome, &ready));
	run_until(&f, &ready.calls);
	assert_int_equal(ready.status, 200);
	assert_int_equal(ready.error, 0);
	assert_string_equal(ready.message, "");
	assert_string_equal(engine_api_version(e), "1.43");
	assert_true(engine_api_at_least(e, "1.43"));
	assert_false(engine_api_at_least(e, "1.44"));

	/* The version prefix, and a streamed answer bigger than the cap of a JSON one. */
	buf_init(&streamed.streamed, BUF_UNLIMITED);
	assert_non_null(engine_call(e, "GET", "/stream?x=1", &opts, on_outcome, &streamed));
	run_until(&f, &streamed.calls);
	assert_int_equal(streamed.status, 200);
	assert_int_equal(streamed.body_len, 0);
	assert_int_equal(streamed.streamed.len, f.big_len);
	assert_memory_equal(streamed.streamed.ptr, f.big, f.big_len);
	buf_release(&streamed.streamed);

	assert_non_null(engine_call(e, "POST", "/err", NULL, on_outcome, &err));
	run_until(&f, &err.calls);
	assert_int_equal(err.status, 500);
	assert_int_equal(err.error, 0);
	assert_string_equal(err.message, "boom: it broke");

	assert_string_equal(f.seen[0], "GET /_ping HTTP/1.1");
	assert_string_equal(f.seen[1], "GET /v1.43/stream?x=1 HTTP/1.1");
	assert_string_equal(f.seen[2], "POST /v1.43/err HTTP/1.1");
	assert_null(engine_call(e, "GET", "no-slash", NULL, on_outcome, &err));
	engine_close(e);
	fake_close(&f);
	assert_int_equal(ready.calls + streamed.calls + err.calls, 3);
}

static void
test_connect_asks_version_without_the_header(void **state)
{
	struct fake f;
	struct engine *e = fake_open(&f, false);
	struct outcome ready = { 0 };

	(void)state;
	assert_non_null(engine_connect(e, on_outcome, &ready));
	run_until(&f, &ready.calls);
	assert_int_equal(ready.error, 0);
	assert_int_equal(ready.status, 200);
	assert_string_equal(engine_api_version(e), "1.45");
	assert_string_equal(f.seen[1], "GET /version HTTP/1.1");
	engine_close(e);
	fake_close(&f);
	assert_int_equal(ready.calls, 1);
}

/* Closing the engine from one call's callback ends the others, once each. */
static void
test_close_from_a_callback(void **state)
{
	struct fake f;
	struct engine *e = fake_open(&f, true);
	struct outcome hang1 = { 0 }, hang2 = { 0 }, err = { .close_engine = e };

	(void)state;
	assert_non_null(engine_call(e, "POST", "/containers/x/wait", NULL, on_outcome, &hang1));
	assert_non_null(engine_call(e, "GET", "/hang", NULL, on_outcome, &hang2));
	assert_non_null(engine_call(e, "GET", "/err", NULL, on_outcome, &err));
	run_until(&f, &err.calls);
	assert_int_equal(hang1.calls, 1);
	assert_int_equal(hang1.error, -ECANCELED);
	assert_string_equal(hang1.message, "canceled");
	assert_int_equal(hang2.calls, 1);
	assert_int_equal(hang2.error, -ECANCELED);
	fake_close(&f);
	assert_int_equal(err.calls + hang1.calls + hang2.calls, 3);
}

/* A cancel from inside a streamed answer: the callback comes once, after. */
static void
test_cancel_from_on_data(void **state)
{
	struct fake f;
	struct engine *e = fake_open(&f, true);
	struct outcome o = { 0 };
	struct engine_call_opts opts = { .on_data = on_streamed };

	(void)state;
	buf_init(&o.streamed, BUF_UNLIMITED);
	o.cancel_call = engine_call(e, "GET", "/stream", &opts, on_outcome, &o);
	assert_non_null(o.cancel_call);
	run_until(&f, &o.calls);
	assert_int_equal(o.error, -ECANCELED);
	assert_int_equal(o.status, 0);
	assert_int_equal(o.pieces, 1);
	buf_release(&o.streamed);
	engine_close(e);
	fake_close(&f);
	assert_int_equal(o.calls, 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version_pick),
		cmocka_unit_test(test_host_unix),
		cmocka_unit_test(test_host_tcp),
		cmocka_unit_test(test_host_refused),
		cmocka_unit_test(test_engine_new_env),
		cmocka_unit_test(test_endpoint_label),
		cmocka_unit_test(test_error_message),
		cmocka_unit_test(test_query_escape),
		cmocka_unit_test(test_lines_any_split),
		cmocka_unit_test(test_connect_and_calls),
		cmocka_unit_test(test_connect_asks_version_without_the_header),
		cmocka_unit_test(test_close_from_a_callback),
		cmocka_unit_test(test_cancel_from_on_data),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

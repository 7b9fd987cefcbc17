/*
 * The hijacked attach (executors/docker/attach.c) against a scripted
 * engine on a unix socket in the same loop: the request it writes, the
 * head it accepts or refuses, stdin written whole (several MiB, so the
 * socket pushes back) and half-closed, frames split anywhere, a cut
 * stream, and a close before the end.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "executors/docker/attach.h"
#include "executors/docker/engine.h"
#include "lib/buf.h"
#include "lib/xmalloc.h"

enum mode {
	MODE_ECHO,		/* 101, an early frame; after stdin's EOF, its length and "bye" */
	MODE_404,		/* an error answer with the daemon's message */
	MODE_CUT,		/* 101, then a frame cut short, then EOF */
	MODE_HANG,		/* 101, then nothing */
};

struct fake {
	uv_loop_t	 loop;
	uv_pipe_t	 listener;
	uv_pipe_t	 conn;
	bool		 accepted;
	char		 path[108];
	enum mode	 mode;
	struct buf	 in;		/* what the client sent */
	bool		 head_seen;
	size_t		 head_len;
	bool		 stdin_eof;
	struct engine	*engine;
	struct attach	*attach;

	/* What the client was told. */
	int		 attached_calls, attached_error;
	char		 attached_cause[256];
	int		 done_calls, done_error;
	char		 done_cause[256];
	struct buf	 out[3];
	int		 output_after_done;
	const char	*stdin_data;
	size_t		 stdin_len;
	bool		 close_on_attached;
};

static void
on_written(uv_write_t *w, int status)
{
	(void)status;
	free(w->data);
	free(w);
}

static void
fake_write(struct fake *f, const void *data, size_t len)
{
	uv_write_t *w = xcalloc(1, sizeof(*w));
	uv_buf_t b;

	w->data = xmemdup(data, len);
	b = uv_buf_init(w->data, (unsigned)len);
	assert_int_equal(uv_write(w, (uv_stream_t *)&f->conn, &b, 1, on_written), 0);
}

static void
fake_frame(struct fake *f, int stream, const char *data, uint32_t len)
{
	unsigned char h[8] = { (unsigned char)stream, 0, 0, 0, (unsigned char)(len >> 24),
	    (unsigned char)(len >> 16), (unsigned char)(len >> 8), (unsigned char)len };

	fake_write(f, h, sizeof(h));
	if (len > 0)
		fake_write(f, data, len);
}

static void
fake_hangup(struct fake *f)
{
	if (!uv_is_closing((uv_handle_t *)&f->conn))
		uv_close((uv_handle_t *)&f->conn, NULL);
}

static void
on_request_head(struct fake *f)
{
	static const char up[] = "HTTP/1.1 101 UPGRADED\r\nContent-Type: "
	    "application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n";
	static const char msg[] = "{\"message\":\"No such container: c1\"}\n";
	char *s;

	switch (f->mode) {
	case MODE_ECHO:
		/* The first frame in the same write as the head. */
		s = xasprintf("%s%c%c%c%c%c%c%c%c%s", up, 1, 0, 0, 0, 0, 0, 0, 6, "early\n");
		fake_write(f, s, strlen(up) + 8 + 6);
		free(s);
		break;
	case MODE_404:
		s = xasprintf("HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
		    "Content-Length: %zu\r\n\r\n", strlen(msg));
		fake_write(f, s, strlen(s));
		/* The body in a write of its own: the client must wait for it. */
		fake_write(f, msg, strlen(msg));
		free(s);
		break;
	case MODE_CUT:
		fake_write(f, up, strlen(up));
		fake_write(f, "\2\0\0\0\0\0\0\12abc", 11);
		break;	/* and hang up at stdin's EOF */
	case MODE_HANG:
		fake_write(f, up, strlen(up));
		break;
	}
}

static void
on_stdin_eof(struct fake *f)
{
	char line[64];

	snprintf(line, sizeof(line), "stdin %zu\n", f->in.len - f->head_len);
	fake_frame(f, 1, line, (uint32_t)strlen(line));
	/* "bye\n" on stderr, its header and payload split across writes. */
	fake_write(f, "\2\0\0", 3);
	fake_write(f, "\0\0\0\0\4b", 6);
	fake_write(f, "ye\n", 3);
	fake_frame(f, 1, "", 0);
	fake_hangup(f);
}

static void
alloc_cb(uv_handle_t *h, size_t size, uv_buf_t *b)
{
	(void)h;
	b->base = xmalloc(size);
	b->len = size;
}

static void
on_fake_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
	struct fake *f = st->data;
	char *end;

	if (n > 0) {
		buf_append(&f->in, b->base, (size_t)n);
		if (!f->head_seen && (end = strstr(f->in.ptr, "\r\n\r\n")) != NULL) {
			f->head_seen = true;
			f->head_len = (size_t)(end - f->in.ptr) + 4;
			on_request_head(f);
		}
	} else if (n == UV_EOF) {
		f->stdin_eof = true;
		uv_read_stop(st);
		if (f->mode == MODE_ECHO)
			on_stdin_eof(f);
		else if (f->mode == MODE_CUT)
			fake_hangup(f);
	} else if (n < 0)
		fake_hangup(f);
	free(b->base);
}

static void
on_fake_connection(uv_stream_t *listener, int status)
{
	struct fake *f = listener->data;

	assert_int_equal(status, 0);
	assert_false(f->accepted);
	uv_pipe_init(&f->loop, &f->conn, 0);
	f->conn.data = f;
	assert_int_equal(uv_accept(listener, (uv_stream_t *)&f->conn), 0);
	f->accepted = true;
	uv_read_start((uv_stream_t *)&f->conn, alloc_cb, on_fake_read);
}

/* ---- the client's callbacks ---- */

static void
on_attached(int error, const char *cause, void *arg)
{
	struct fake *f = arg;

	f->attached_calls++;
	f->attached_error = error;
	snprintf(f->attached_cause, sizeof(f->attached_cause), "%s", cause ? cause : "");
	if (error != 0)
		return;
	if (f->close_on_attached)
		attach_close(f->attach);
	else if (f->stdin_data != NULL)
		attach_send(f->attach, f->stdin_data, f->stdin_len);
}

static void
on_output(int stream, const char *data, size_t len, void *arg)
{
	struct fake *f = arg;

	assert_true(stream >= 0 && stream <= 2);
	assert_true(len > 0);
	if (f->done_calls > 0)
		f->output_after_done++;
	buf_append(&f->out[stream], data, len);
}

static void
on_done(int error, const char *cause, void *arg)
{
	struct fake *f = arg;

	f->done_calls++;
	f->done_error = error;
	snprintf(f->done_cause, sizeof(f->done_cause), "%s", cause ? cause : "");
	f->attach = NULL;
}

static void
fake_open(struct fake *f, enum mode mode)
{
	struct engine_config cfg = { 0 };
	char *host, *cause = NULL;
	int i;

	memset(f, 0, sizeof(*f));
	f->mode = mode;
	uv_loop_init(&f->loop);
	snprintf(f->path, sizeof(f->path), "/tmp/test_docker_attach.%d.sock", (int)getpid());
	unlink(f->path);
	uv_pipe_init(&f->loop, &f->listener, 0);
	f->listener.data = f;
	assert_int_equal(uv_pipe_bind(&f->listener, f->path), 0);
	assert_int_equal(uv_listen((uv_stream_t *)&f->listener, 8, on_fake_connection), 0);
	buf_init(&f->in, BUF_UNLIMITED);
	for (i = 0; i < 3; i++)
		buf_init(&f->out[i], BUF_UNLIMITED);
	host = xasprintf("unix://%s", f->path);
	cfg.loop = &f->loop;
	cfg.host = host;
	f->engine = engine_new(&cfg, &cause);
	assert_non_null(f->engine);
	free(host);
}

static void
fake_attach(struct fake *f)
{
	char *cause = NULL;

	f->attach = attach_open(f->engine, "c1", on_attached, on_output, on_done, f, &cause);
	assert_null(cause);
	assert_non_null(f->attach);
	/* Nothing is called back from inside attach_open(). */
	assert_int_equal(f->attached_calls + f->done_calls, 0);
}

static void
run_until_done(struct fake *f)
{
	while (f->done_calls == 0)
		uv_run(&f->loop, UV_RUN_ONCE);
}

static void
count_leftover(uv_handle_t *h, void *arg)
{
	if (!uv_is_closing(h)) {
		(*(int *)arg)++;
		uv_close(h, NULL);
	}
}

static void
fake_close(struct fake *f)
{
	int i, leftover = 0;

	engine_close(f->engine);
	uv_close((uv_handle_t *)&f->listener, NULL);
	if (f->accepted)
		fake_hangup(f);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	uv_walk(&f->loop, count_leftover, &leftover);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	assert_int_equal(leftover, 0);
	assert_int_equal(uv_loop_close(&f->loop), 0);
	unlink(f->path);
	buf_release(&f->in);
	for (i = 0; i < 3; i++)
		buf_release(&f->out[i]);
}

static void
assert_out(struct fake *f, int stream, const char *want)
{
	assert_int_equal(f->out[stream].len, strlen(want));
	assert_memory_equal(f->out[stream].ptr, want, strlen(want));
}

static void
check_echo(size_t stdin_len)
{
	static const char want_head[] = "POST /v1.41/containers/c1/attach?stream=1&stdin=1&"
	    "stdout=1&stderr=1 HTTP/1.1\r\nHost: docker\r\nContent-Length: 0\r\n"
	    "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n";
	char *data = xmalloc(stdin_len + 1), want[128];
	struct fake f;
	size_t i;

	for (i = 0; i < stdin_len; i++)
		data[i] = (char)('a' + i % 26);
	fake_open(&f, MODE_ECHO);
	f.stdin_data = data;
	f.stdin_len = stdin_len;
	fake_attach(&f);
	run_until_done(&f);
	assert_int_equal(f.attached_calls, 1);
	assert_int_equal(f.attached_error, 0);
	assert_int_equal(f.done_calls, 1);
	assert_int_equal(f.done_error, 0);
	assert_string_equal(f.done_cause, "");
	/* The request, byte for byte, then stdin whole, then the half-close. */
	assert_true(f.stdin_eof);
	assert_int_equal(f.head_len, strlen(want_head));
	assert_memory_equal(f.in.ptr, want_head, strlen(want_head));
	assert_int_equal(f.in.len - f.head_len, stdin_len);
	assert_memory_equal(f.in.ptr + f.head_len, data, stdin_len);
	snprintf(want, sizeof(want), "early\nstdin %zu\n", stdin_len);
	assert_out(&f, 1, want);
	assert_out(&f, 2, "bye\n");
	assert_int_equal(f.output_after_done, 0);
	fake_close(&f);
	free(data);
}

static void
test_echo_small(void **state)
{
	(void)state;
	check_echo(40);
}

/* More than a unix socket holds: the writes are partial, and resumed. */
static void
test_echo_large_stdin(void **state)
{
	(void)state;
	check_echo(6 * 1024 * 1024 + 7);
}

static void
test_empty_stdin(void **state)
{
	(void)state;
	check_echo(0);
}

static void
test_error_answer(void **state)
{
	struct fake f;

	(void)state;
	fake_open(&f, MODE_404);
	fake_attach(&f);
	run_until_done(&f);
	assert_int_equal(f.attached_calls, 1);
	assert_int_equal(f.attached_error, -EIO);
	assert_string_equal(f.attached_cause, "attach to c1: HTTP 404: No such container: c1");
	assert_int_equal(f.done_calls, 1);
	assert_int_equal(f.done_error, -EIO);
	assert_string_equal(f.done_cause, f.attached_cause);
	fake_close(&f);
}

static void
test_cut_stream(void **state)
{
	struct fake f;

	(void)state;
	fake_open(&f, MODE_CUT);
	f.stdin_data = "exit 0\n";
	f.stdin_len = 7;
	fake_attach(&f);
	run_until_done(&f);
	assert_int_equal(f.attached_error, 0);
	assert_string_equal(f.done_cause, "attach to c1: the output stream ended inside a frame");
	assert_int_equal(f.done_error, -EPROTO);
	assert_out(&f, 2, "abc");
	fake_close(&f);
}

static void
test_close_before_the_end(void **state)
{
	struct fake f;

	(void)state;
	fake_open(&f, MODE_HANG);
	f.close_on_attached = true;
	fake_attach(&f);
	run_until_done(&f);
	assert_int_equal(f.attached_calls, 1);
	assert_int_equal(f.done_calls, 1);
	assert_int_equal(f.done_error, -ECANCELED);
	fake_close(&f);
	assert_int_equal(f.done_calls, 1);
}

static void
test_no_socket(void **state)
{
	struct engine_config cfg = { 0 };
	struct engine *e;
	uv_loop_t loop;
	char *cause = NULL;

	(void)state;
	uv_loop_init(&loop);
	cfg.loop = &loop;
	cfg.host = "unix:///nonexistent/test_docker_attach.sock";
	e = engine_new(&cfg, &cause);
	assert_non_null(e);
	assert_null(attach_open(e, "c1", on_attached, on_output, on_done, NULL, &cause));
	assert_non_null(cause);
	assert_non_null(strstr(cause, "cannot connect to the Docker engine at "
	    "unix:///nonexistent/test_docker_attach.sock"));
	free(cause);
	engine_close(e);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_echo_small),
		cmocka_unit_test(test_echo_large_stdin),
		cmocka_unit_test(test_empty_stdin),
		cmocka_unit_test(test_error_answer),
		cmocka_unit_test(test_cut_stream),
		cmocka_unit_test(test_close_before_the_end),
		cmocka_unit_test(test_no_socket),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

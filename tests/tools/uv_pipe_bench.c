/*
 * uv_pipe_bench: how fast a libuv loop can take a child's output, the
 * ceiling under the trace scenario (whose daemon does the same and then
 * timestamps, masks, checksums and spools every byte).
 *
 *   uv_pipe_bench MIB
 *
 * The pipe is made as executors/proc.c makes a job's stdout (uv_pipe(),
 * our end non-blocking, the child's end inherited) and read with
 * uv_read_start into one 64 KiB buffer, as proc.c reads it.  The child is
 * this program again (`uv_pipe_bench --write MIB`), writing MIB MiB of
 * one 64 KiB block, so the writer costs as little as a writer can.
 * Prints "mib=N seconds=S mib_per_s=R"; the time runs from the spawn to
 * the end of the stream.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "lib/clock.h"

#define BLOCK (64 * 1024)

static char rbuf[BLOCK];
static uint64_t received;
static uint64_t ended_ns;

static int
write_mib(long mib)
{
	static char block[BLOCK];
	uint64_t left = (uint64_t)mib << 20;

	memset(block, 'x', sizeof(block));
	while (left > 0) {
		size_t want = left < sizeof(block) ? (size_t)left : sizeof(block);
		ssize_t n = write(1, block, want);

		if (n < 0)
			return 1;
		left -= (uint64_t)n;
	}
	return 0;
}

static void
on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)h;
	(void)suggested;
	buf->base = rbuf;
	buf->len = sizeof(rbuf);
}

static void
on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	(void)buf;
	if (n > 0) {
		received += (uint64_t)n;
		return;
	}
	if (n == 0)
		return;
	ended_ns = clock_mono_ns();
	uv_close((uv_handle_t *)s, NULL);
}

static void
on_child_exit(uv_process_t *p, int64_t status, int sig)
{
	if (status != 0 || sig != 0)
		fprintf(stderr, "uv_pipe_bench: the writer ended with %lld, signal %d\n",
		    (long long)status, sig);
	uv_close((uv_handle_t *)p, NULL);
}

int
main(int argc, char **argv)
{
	uv_loop_t loop;
	uv_pipe_t out;
	uv_process_t proc;
	uv_process_options_t opts;
	uv_stdio_container_t stdio[3];
	uv_file fds[2];
	char self[4096], mib_arg[32];
	char *args[4];
	uint64_t t0;
	long mib;
	ssize_t len;

	if (argc == 3 && strcmp(argv[1], "--write") == 0)
		return write_mib(atol(argv[2]));
	if (argc != 2 || (mib = atol(argv[1])) <= 0) {
		fprintf(stderr, "usage: uv_pipe_bench MIB\n");
		return 2;
	}
	if ((len = readlink("/proc/self/exe", self, sizeof(self) - 1)) < 0) {
		perror("uv_pipe_bench: /proc/self/exe");
		return 1;
	}
	self[len] = '\0';
	snprintf(mib_arg, sizeof(mib_arg), "%ld", mib);
	args[0] = self;
	args[1] = "--write";
	args[2] = mib_arg;
	args[3] = NULL;

	uv_loop_init(&loop);
	uv_pipe_init(&loop, &out, 0);
	if (uv_pipe(fds, UV_NONBLOCK_PIPE, 0) != 0 || uv_pipe_open(&out, fds[0]) != 0) {
		fprintf(stderr, "uv_pipe_bench: cannot make the pipe\n");
		return 1;
	}
	memset(&opts, 0, sizeof(opts));
	stdio[0].flags = UV_IGNORE;
	stdio[1].flags = UV_INHERIT_FD;
	stdio[1].data.fd = fds[1];
	stdio[2].flags = UV_INHERIT_FD;
	stdio[2].data.fd = 2;
	opts.file = self;
	opts.args = args;
	opts.stdio = stdio;
	opts.stdio_count = 3;
	opts.exit_cb = on_child_exit;
	t0 = clock_mono_ns();
	if (uv_spawn(&loop, &proc, &opts) != 0) {
		fprintf(stderr, "uv_pipe_bench: cannot spawn the writer\n");
		return 1;
	}
	close(fds[1]);
	uv_read_start((uv_stream_t *)&out, on_alloc, on_read);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	if (received != (uint64_t)mib << 20) {
		fprintf(stderr, "uv_pipe_bench: received %llu bytes, not %ld MiB\n",
		    (unsigned long long)received, mib);
		return 1;
	}
	printf("mib=%ld seconds=%.6f mib_per_s=%.1f\n", mib, (ended_ns - t0) / 1e9,
	    mib / ((ended_ns - t0) / 1e9));
	return 0;
}

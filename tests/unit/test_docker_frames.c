/*
 * The demuxer of the engine's multiplexed stream (executors/docker/frames.c):
 * whatever the split of the bytes, the same payload bytes come out on the
 * same streams, and a stream cut inside a frame says so.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "executors/docker/frames.h"
#include "lib/buf.h"
#include "lib/xmalloc.h"

/* What came out: each stream's bytes, and how the pieces went. */
struct sink {
	struct buf	 out[3];
	int		 calls;
	int		 zero_len_calls;
	int		 bad_stream;
};

static void
sink_init(struct sink *s)
{
	int i;

	memset(s, 0, sizeof(*s));
	for (i = 0; i < 3; i++)
		buf_init(&s->out[i], BUF_UNLIMITED);
}

static void
sink_release(struct sink *s)
{
	int i;

	for (i = 0; i < 3; i++)
		buf_release(&s->out[i]);
}

static void
on_out(int stream, const char *data, size_t len, void *arg)
{
	struct sink *s = arg;

	s->calls++;
	if (len == 0)
		s->zero_len_calls++;
	if (stream < 0 || stream > 2) {
		s->bad_stream++;
		return;
	}
	buf_append(&s->out[stream], data, len);
}

/* A frame's header and payload, appended to b. */
static void
put_frame(struct buf *b, int stream, const char *data, uint32_t len)
{
	unsigned char h[8] = { (unsigned char)stream, 0, 0, 0, (unsigned char)(len >> 24),
	    (unsigned char)(len >> 16), (unsigned char)(len >> 8), (unsigned char)len };

	buf_append(b, h, sizeof(h));
	buf_append(b, data, len);
}

static void
assert_out(struct sink *s, int stream, const char *want)
{
	assert_int_equal(s->out[stream].len, strlen(want));
	assert_memory_equal(s->out[stream].ptr, want, strlen(want));
}

static void
test_split_at_every_offset(void **state)
{
	struct buf b;
	size_t cut, cut2;

	(void)state;
	buf_init(&b, BUF_UNLIMITED);
	put_frame(&b, 2, "stage1 err\n", 11);
	put_frame(&b, 1, "stage1 out\n", 11);
	put_frame(&b, 1, "", 0);
	put_frame(&b, 0, "in", 2);
	put_frame(&b, 2, "x", 1);
	/* Every pair of cuts: three reads, each boundary anywhere. */
	for (cut = 0; cut <= b.len; cut++) {
		for (cut2 = cut; cut2 <= b.len; cut2++) {
			struct frames f;
			struct sink s;

			sink_init(&s);
			frames_init(&f);
			frames_feed(&f, b.ptr, cut, on_out, &s);
			frames_feed(&f, b.ptr + cut, cut2 - cut, on_out, &s);
			frames_feed(&f, b.ptr + cut2, b.len - cut2, on_out, &s);
			assert_false(frames_partial(&f));
			assert_out(&s, 1, "stage1 out\n");
			assert_out(&s, 2, "stage1 err\nx");
			assert_out(&s, 0, "in");
			assert_int_equal(s.zero_len_calls, 0);
			assert_int_equal(s.bad_stream, 0);
			sink_release(&s);
		}
	}
	buf_release(&b);
}

static void
test_byte_by_byte(void **state)
{
	struct buf b;
	struct frames f;
	struct sink s;
	size_t i;

	(void)state;
	buf_init(&b, BUF_UNLIMITED);
	put_frame(&b, 1, "hello ", 6);
	put_frame(&b, 2, "oops\n", 5);
	put_frame(&b, 1, "world\n", 6);
	sink_init(&s);
	frames_init(&f);
	for (i = 0; i < b.len; i++) {
		frames_feed(&f, b.ptr + i, 1, on_out, &s);
		/* Between frames the stream is whole; inside one it is not. */
		if (i + 1 == 14 || i + 1 == 27)
			assert_false(frames_partial(&f));
		else if (i + 1 < b.len)
			assert_true(frames_partial(&f));
	}
	assert_false(frames_partial(&f));
	assert_out(&s, 1, "hello world\n");
	assert_out(&s, 2, "oops\n");
	/* One call per payload byte: a payload is not held back to be joined. */
	assert_int_equal(s.calls, 17);
	sink_release(&s);
	buf_release(&b);
}

static void
test_zero_length_frames_only(void **state)
{
	struct buf b;
	struct frames f;
	struct sink s;

	(void)state;
	buf_init(&b, BUF_UNLIMITED);
	put_frame(&b, 1, "", 0);
	put_frame(&b, 2, "", 0);
	sink_init(&s);
	frames_init(&f);
	frames_feed(&f, b.ptr, b.len, on_out, &s);
	assert_false(frames_partial(&f));
	assert_int_equal(s.calls, 0);
	sink_release(&s);
	buf_release(&b);
}

static void
test_one_mib_frame(void **state)
{
	const uint32_t size = 1024 * 1024;
	char *payload = xmalloc(size);
	struct buf b;
	struct frames f;
	struct sink s;
	size_t off, step;
	uint32_t i;

	(void)state;
	for (i = 0; i < size; i++)
		payload[i] = (char)('a' + i % 26);
	buf_init(&b, BUF_UNLIMITED);
	put_frame(&b, 1, payload, size);
	put_frame(&b, 2, "tail", 4);
	sink_init(&s);
	frames_init(&f);
	/* Reads of an odd size, as a socket would give them. */
	for (off = 0; off < b.len; off += step) {
		step = b.len - off < 65519 ? b.len - off : 65519;
		frames_feed(&f, b.ptr + off, step, on_out, &s);
	}
	assert_false(frames_partial(&f));
	assert_int_equal(s.out[1].len, size);
	assert_memory_equal(s.out[1].ptr, payload, size);
	assert_out(&s, 2, "tail");
	sink_release(&s);
	buf_release(&b);
	free(payload);
}

static void
test_truncated(void **state)
{
	struct buf b;
	struct frames f;
	struct sink s;

	(void)state;
	buf_init(&b, BUF_UNLIMITED);
	put_frame(&b, 1, "abcdef", 6);

	/* Inside the header. */
	sink_init(&s);
	frames_init(&f);
	frames_feed(&f, b.ptr, 5, on_out, &s);
	assert_true(frames_partial(&f));
	assert_int_equal(s.calls, 0);
	sink_release(&s);

	/* Inside the payload: what came is passed on, and the cut is known. */
	sink_init(&s);
	frames_init(&f);
	frames_feed(&f, b.ptr, 11, on_out, &s);
	assert_true(frames_partial(&f));
	assert_out(&s, 1, "abc");
	sink_release(&s);

	/* Nothing at all is no cut. */
	frames_init(&f);
	assert_false(frames_partial(&f));
	buf_release(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_at_every_offset),
		cmocka_unit_test(test_byte_by_byte),
		cmocka_unit_test(test_zero_length_frames_only),
		cmocka_unit_test(test_one_mib_frame),
		cmocka_unit_test(test_truncated),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

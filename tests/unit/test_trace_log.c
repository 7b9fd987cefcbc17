/*
 * Unit tests for the job log buffer.  The expected bytes are spelled out
 * in full (headers, notices, replacement characters): the log is data
 * GitLab stores and shows, and "roughly right" is the bug these guard
 * against.  The clock is pinned so that timestamp headers are exact.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "lib/buf.h"
#include "runner/mask.h"
#include "runner/trace_log.h"

/* 2026-08-21T10:15:02.123456Z */
#define T0	INT64_C(1787307302123456)
#define H0	"2026-08-21T10:15:02.123456Z "
#define H1	"2026-08-21T10:15:03.123456Z "
#define FFFD	"\xef\xbf\xbd"
#define NOTICE(n) "\n\x1b[33;1mJob's log exceeded limit of " n " bytes.\n" \
	"Job execution will continue but no more output will be collected." \
	"\x1b[0;m\n"

static int64_t	 fake_now = T0;
static char	 log_path[64];

static int64_t
fake_clock(void)
{
	return fake_now;
}

static int
setup(void **state)
{
	int	fd;

	(void)state;
	fake_now = T0;
	snprintf(log_path, sizeof log_path, "/tmp/test_trace_log.XXXXXX");
	if ((fd = mkstemp(log_path)) == -1)
		return -1;
	close(fd);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	unlink(log_path);
	return 0;
}

/* A log with one masker per stream for these rules (none if no rules). */
static struct trace_log *
open_masked(uint64_t limit, bool timestamps, const char *const *phrases, size_t np,
    const char *const *prefixes, size_t nx, bool urls)
{
	struct trace_log_config	 cfg;
	struct trace_log	*t;
	int			 i;

	memset(&cfg, 0, sizeof cfg);
	cfg.path = log_path;
	cfg.limit = limit;
	cfg.timestamps = timestamps;
	if (np > 0 || nx > 0 || urls)
		for (i = 0; i < 3; i++)
			cfg.masker[i] = masker_new(phrases, np, prefixes, nx, urls);
	cfg.now_us = fake_clock;
	t = trace_log_open(&cfg);
	assert_non_null(t);
	return t;
}

static struct trace_log *
open_log(uint64_t limit, bool timestamps)
{
	return open_masked(limit, timestamps, NULL, 0, NULL, 0, false);
}

/* A log masking the given phrases (NULL-terminated list). */
static struct trace_log *
open_phrases(bool timestamps, const char *const *phrases)
{
	size_t	 n = 0;

	while (phrases[n] != NULL)
		n++;
	return open_masked(UINT64_MAX, timestamps, phrases, n, NULL, 0, false);
}

static void
put(struct trace_log *t, enum trace_stream s, const char *str)
{
	assert_int_equal(trace_log_write(t, s, str, strlen(str)), 0);
}

/* Everything the log holds, through trace_log_read; free() it. */
static char *
read_all(struct trace_log *t, size_t *len)
{
	size_t	 size = (size_t)trace_log_size(t);
	char	*p = malloc(size + 1);

	assert_non_null(p);
	assert_int_equal(trace_log_read(t, 0, p, size + 10), (ssize_t)size);
	p[size] = '\0';
	*len = size;
	return p;
}

/* The file as it is on disk; free() it. */
static char *
read_file(const char *path, size_t *len)
{
	char	*p = NULL;
	size_t	 cap = 0, got = 0;
	ssize_t	 n;
	int	 fd;

	fd = open(path, O_RDONLY);
	assert_true(fd != -1);
	for (;;) {
		if (got + 4096 + 1 > cap) {
			cap = (got + 4096 + 1) * 2;
			p = realloc(p, cap);
			assert_non_null(p);
		}
		n = read(fd, p + got, 4096);
		assert_true(n >= 0);
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	p[got] = '\0';
	*len = got;
	return p;
}

static uint32_t
crc_of(const char *p, size_t len)
{
	return (uint32_t)crc32(crc32(0L, Z_NULL, 0), (const Bytef *)p, (uInt)len);
}

/*
 * Finish the log and check that the file, trace_log_read, size and crc
 * all agree with the expected bytes.
 */
static void
expect_log_n(struct trace_log *t, const char *want, size_t wlen)
{
	char	*got, *file;
	size_t	 glen, flen;

	assert_int_equal(trace_log_finish(t), 0);
	got = read_all(t, &glen);
	assert_int_equal(glen, wlen);
	assert_memory_equal(got, want, wlen);
	file = read_file(trace_log_path(t), &flen);
	assert_int_equal(flen, wlen);
	assert_memory_equal(file, want, wlen);
	assert_int_equal(trace_log_size(t), wlen);
	assert_int_equal(trace_log_crc32(t), crc_of(want, wlen));
	free(got);
	free(file);
}

static void
expect_log(struct trace_log *t, const char *want)
{
	expect_log_n(t, want, strlen(want));
}

static void
test_conformance(void **state)
{
	struct trace_log	*t;
	char			 sum[16];

	(void)state;
	t = open_log(4 << 20, false);
	put(t, TRACE_STDOUT, "This is a basic log line");
	assert_int_equal(trace_log_finish(t), 0);
	snprintf(sum, sizeof sum, "%08x", trace_log_crc32(t));
	assert_string_equal(sum, "367dfeeb");
	assert_int_equal(trace_log_size(t), 24);
	trace_log_close(t, true);

	t = open_log(4 << 20, false);
	put(t, TRACE_STDOUT, "Build trace with secret and multi-byte ü character");
	assert_int_equal(trace_log_finish(t), 0);
	snprintf(sum, sizeof sum, "%08x", trace_log_crc32(t));
	assert_string_equal(sum, "0d7cf601");
	assert_int_equal(trace_log_size(t), 51);
	trace_log_close(t, true);
	assert_int_equal(access(log_path, F_OK), -1);
}

static void
test_crc_many_writes(void **state)
{
	static const char	*pieces[] = { "plain ", "ü", "€uro\n", "😀",
				    "\r\n", "x\xff", "line with more text\n" };
	struct trace_log	*t;
	char			*file, *got, chunk[3000];
	size_t			 flen, glen, i, n, k;
	unsigned		 seed = 1;
	int			 ts;

	(void)state;
	for (ts = 0; ts <= 1; ts++) {
		t = open_log(UINT64_MAX, ts);
		for (i = 0; i < 1500; i++) {
			n = 0;
			while (n < sizeof chunk - 32) {
				seed = seed * 1103515245 + 12345;
				k = (seed >> 16) % (sizeof pieces / sizeof *pieces);
				memcpy(chunk + n, pieces[k], strlen(pieces[k]));
				n += strlen(pieces[k]);
				if ((seed >> 8) % 50 == 0)
					break;
			}
			/* Cut anywhere, even inside a character. */
			seed = seed * 1103515245 + 12345;
			n -= (seed >> 16) % (n < 4 ? n : 4);
			assert_int_equal(trace_log_write(t,
			    (enum trace_stream)(i % 3), chunk, n), 0);
			/* Mid-stream the crc covers the file and the unwritten buffer. */
			if (i % 250 == 0) {
				got = read_all(t, &glen);
				assert_int_equal(glen, trace_log_size(t));
				assert_int_equal(trace_log_crc32(t), crc_of(got, glen));
				free(got);
			}
		}
		assert_int_equal(trace_log_finish(t), 0);
		file = read_file(log_path, &flen);
		assert_true(flen > 3 * 65536);
		assert_int_equal(trace_log_size(t), flen);
		assert_int_equal(trace_log_crc32(t), crc_of(file, flen));
		got = read_all(t, &glen);
		assert_int_equal(glen, flen);
		assert_memory_equal(got, file, flen);
		free(got);
		free(file);
		trace_log_close(t, false);
	}
}

static void
test_utf8_splits(void **state)
{
	const char		*s = "a\xc3\xbc b\xe2\x82\xac c\xf0\x9f\x98\x80 d\xc3\xa9";
	size_t			 n = strlen(s), i, j;
	struct trace_log	*t;

	(void)state;
	for (i = 0; i <= n; i++) {
		for (j = i; j <= n; j++) {
			t = open_log(UINT64_MAX, false);
			assert_int_equal(trace_log_write(t, TRACE_STDOUT, s, i), 0);
			assert_int_equal(trace_log_write(t, TRACE_STDOUT, s + i,
			    j - i), 0);
			assert_int_equal(trace_log_write(t, TRACE_STDOUT, s + j,
			    n - j), 0);
			expect_log(t, s);
			trace_log_close(t, false);
		}
	}

	/* Byte by byte. */
	t = open_log(UINT64_MAX, false);
	for (i = 0; i < n; i++)
		assert_int_equal(trace_log_write(t, TRACE_STDOUT, s + i, 1), 0);
	expect_log(t, s);
	trace_log_close(t, false);
}

/*
 * Valid writes go on without a copy (checked 8 ASCII bytes at a time),
 * the rest through the repairing loop: the same text in one write and
 * byte by byte must give the same log, whichever way each write went.
 */
static void
test_utf8_fast_path(void **state)
{
	static const char *const pieces[] = { "abcdefghijklmnop", "x", "\n",
	    "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9d\x84\x9e", "\xff", "\xc3",
	    "\xe2\x82", "\xed\xa0\x80", "\xc0\xaf", "\x80", "\xf4\x90" };
	struct trace_log	*a, *b;
	char			 text[512], *wa, *wb;
	size_t			 n, i, la, lb;
	uint32_t		 rng = 12345;
	int			 round, k;

	(void)state;
	for (round = 0; round < 300; round++) {
		n = 0;
		for (k = 0; k < 20; k++) {
			rng = rng * 1103515245u + 12345u;
			i = (rng >> 16) % (sizeof(pieces) / sizeof(pieces[0]));
			/* Mostly valid text, so that whole writes are valid. */
			if (round % 2 == 0 && i >= 6)
				i = 0;
			memcpy(text + n, pieces[i], strlen(pieces[i]));
			n += strlen(pieces[i]);
		}
		a = open_log(UINT64_MAX, false);
		b = open_log(UINT64_MAX, false);
		assert_int_equal(trace_log_write(a, TRACE_STDOUT, text, n), 0);
		for (i = 0; i < n; i++)
			assert_int_equal(trace_log_write(b, TRACE_STDOUT, text + i, 1), 0);
		assert_int_equal(trace_log_finish(a), 0);
		assert_int_equal(trace_log_finish(b), 0);
		wa = read_all(a, &la);
		wb = read_all(b, &lb);
		assert_int_equal(la, lb);
		assert_memory_equal(wa, wb, la);
		if (round % 2 == 0) {
			assert_int_equal(la, n);
			assert_memory_equal(wa, text, n);
		}
		free(wa);
		free(wb);
		trace_log_close(a, false);
		trace_log_close(b, false);
	}
}

static void
test_utf8_per_stream(void **state)
{
	struct trace_log	*t;

	(void)state;
	/* A 4-byte character 1|1|1|1 with the other stream in between. */
	t = open_log(UINT64_MAX, false);
	put(t, TRACE_STDOUT, "\xf0");
	put(t, TRACE_STDERR, "x");
	put(t, TRACE_STDOUT, "\x9f");
	put(t, TRACE_STDERR, "\xe2\x82");
	put(t, TRACE_STDOUT, "\x98");
	put(t, TRACE_STDOUT, "\x80");
	put(t, TRACE_STDERR, "\xac");
	expect_log(t, "x\xf0\x9f\x98\x80\xe2\x82\xac");
	trace_log_close(t, false);
}

static void
test_utf8_invalid(void **state)
{
	static const struct {
		const char	*in;
		const char	*out;
	} cases[] = {
		{ "\xff", FFFD },
		{ "a\x80" "b", "a" FFFD "b" },
		{ "\xc0\xaf", FFFD FFFD },			/* overlong '/' */
		{ "\xc1\xbf", FFFD FFFD },
		{ "\xe0\x80\xaf", FFFD FFFD FFFD },		/* overlong */
		{ "\xf0\x80\x80\xaf", FFFD FFFD FFFD FFFD },	/* overlong */
		{ "\xed\xa0\x80", FFFD FFFD FFFD },		/* surrogate */
		{ "\xed\xbf\xbf", FFFD FFFD FFFD },
		{ "\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD },	/* > U+10FFFF */
		{ "\xf8\x88\x80\x80\x80", FFFD FFFD FFFD FFFD FFFD },
		{ "\xe2\x82" "A", FFFD "A" },		/* truncated, then ASCII */
		{ "\xc3\xc3\xbc", FFFD "\xc3\xbc" },
		{ "\xf0\x9f\x98" "\xf0\x9f\x98\x80", FFFD "\xf0\x9f\x98\x80" },
		{ "\xed\x9f\xbf", "\xed\x9f\xbf" },		/* U+D7FF is fine */
		{ "\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf" },	/* U+10FFFF too */
		{ "\xe2\x82", FFFD },			/* cut by the end */
		{ "ok\xf0\x9f\x98", "ok" FFFD },
		{ "a\0b", "a\0b" },
	};
	struct trace_log	*t;
	size_t			 i, inlen, outlen;

	(void)state;
	for (i = 0; i < sizeof cases / sizeof *cases; i++) {
		inlen = strlen(cases[i].in);
		outlen = strlen(cases[i].out);
		if (i == sizeof cases / sizeof *cases - 1)
			inlen = outlen = 3;
		t = open_log(UINT64_MAX, false);
		assert_int_equal(trace_log_write(t, TRACE_STDOUT, cases[i].in,
		    inlen), 0);
		expect_log_n(t, cases[i].out, outlen);
		trace_log_close(t, false);
	}
}

static void
test_limit_notice(void **state)
{
	struct trace_log	*t;
	char			 kib[1024], want[2048];
	uint64_t		 size;
	uint32_t		 crc;
	int			 i;

	(void)state;
	memset(kib, 'a', sizeof kib);
	memcpy(want, kib, sizeof kib);
	memcpy(want + 1024, NOTICE("1024"), sizeof NOTICE("1024"));

	/* gitlab-runner's TestJobOutputLimit: 1 KiB limit, 5 KiB written. */
	t = open_log(1024, false);
	for (i = 0; i < 5; i++)
		assert_int_equal(trace_log_write(t, TRACE_STDOUT, kib, 1024), 0);
	assert_true(trace_log_truncated(t));
	expect_log(t, want);
	trace_log_close(t, false);

	/* The same in one write, and nothing after it counts. */
	t = open_log(1024, false);
	assert_int_equal(trace_log_write(t, TRACE_STDOUT, kib, 1000), 0);
	assert_false(trace_log_truncated(t));
	assert_int_equal(trace_log_write(t, TRACE_STDOUT, kib, 1024), 0);
	assert_true(trace_log_truncated(t));
	size = trace_log_size(t);
	crc = trace_log_crc32(t);
	assert_int_equal(trace_log_write(t, TRACE_STDERR, kib, 1024), 0);
	assert_int_equal(trace_log_printf(t, "more\n"), 0);
	assert_int_equal(trace_log_size(t), size);
	assert_int_equal(trace_log_crc32(t), crc);
	expect_log(t, want);
	trace_log_close(t, false);

	/* Exactly at the limit is not past it. */
	t = open_log(1024, false);
	assert_int_equal(trace_log_write(t, TRACE_STDOUT, kib, 1024), 0);
	assert_false(trace_log_truncated(t));
	assert_int_equal(trace_log_write(t, TRACE_STDOUT, "b", 1), 0);
	assert_true(trace_log_truncated(t));
	expect_log(t, want);
	trace_log_close(t, false);
}

static void
test_limit_utf8(void **state)
{
	struct trace_log	*t;

	(void)state;
	/* The euro sign would be bytes 10-12 of a 10-byte log. */
	t = open_log(10, false);
	put(t, TRACE_STDOUT, "abcdefghi\xe2\x82\xac");
	expect_log(t, "abcdefghi" NOTICE("10"));
	trace_log_close(t, false);

	/* Bytes 9-11: two of them would fit. */
	t = open_log(10, false);
	put(t, TRACE_STDOUT, "abcdefgh\xe2\x82\xac");
	expect_log(t, "abcdefgh" NOTICE("10"));
	trace_log_close(t, false);

	/* Over several writes, with a 4-byte character. */
	t = open_log(10, false);
	put(t, TRACE_STDOUT, "abcdefg");
	put(t, TRACE_STDOUT, "\xf0\x9f");
	put(t, TRACE_STDOUT, "\x98\x80");
	expect_log(t, "abcdefg" NOTICE("10"));
	trace_log_close(t, false);

	/* Ends exactly at the limit: whole, then the notice on the next byte. */
	t = open_log(10, false);
	put(t, TRACE_STDOUT, "abcdefg\xe2\x82\xac");
	assert_false(trace_log_truncated(t));
	put(t, TRACE_STDOUT, "x");
	expect_log(t, "abcdefg\xe2\x82\xac" NOTICE("10"));
	trace_log_close(t, false);
}

static void
test_limit_counts_timestamps(void **state)
{
	struct trace_log	*t;

	(void)state;
	t = open_log(40, true);
	put(t, TRACE_STDOUT, "hello\n");
	assert_int_equal(trace_log_size(t), 38);
	put(t, TRACE_STDOUT, "world\n");
	assert_true(trace_log_truncated(t));
	expect_log(t, H0 "01O hello\n" "20" NOTICE("40"));
	trace_log_close(t, false);
}

static void
test_ts_headers(void **state)
{
	struct trace_log	*t;

	(void)state;
	t = open_log(UINT64_MAX, true);
	put(t, TRACE_STDOUT, "$ make test\n");
	put(t, TRACE_STDERR, "warning: x\n");
	assert_int_equal(trace_log_printf(t, "Running with %s %d\n", "runner", 1), 0);
	fake_now = T0 + 1000000;
	put(t, TRACE_STDOUT, "a\nb\n\n");
	fake_now = INT64_C(1787307302000042);
	put(t, TRACE_STDERR, "early\n");
	expect_log(t,
	    H0 "01O $ make test\n"
	    H0 "01E warning: x\n"
	    H0 "00O Running with runner 1\n"
	    H1 "01O a\n"
	    H1 "01O b\n"
	    H1 "01O \n"
	    "2026-08-21T10:15:02.000042Z 01E early\n");
	trace_log_close(t, false);
}

static void
test_ts_partial_line(void **state)
{
	struct trace_log	*t;

	(void)state;
	t = open_log(UINT64_MAX, true);
	put(t, TRACE_STDOUT, "abc");
	assert_int_equal(trace_log_size(t), 0);
	/* The line carries the time it started. */
	fake_now = T0 + 1000000;
	put(t, TRACE_STDOUT, "def");
	put(t, TRACE_STDERR, "err\n");
	assert_int_equal(trace_log_size(t), 32 + 4);
	put(t, TRACE_STDOUT, "ghi\nnext\nrest");
	fake_now = T0;
	put(t, TRACE_STDOUT, "\n");
	expect_log(t,
	    H1 "01E err\n"
	    H0 "01O abcdefghi\n"
	    H1 "01O next\n"
	    H1 "01O rest\n");
	trace_log_close(t, false);
}

static void
test_ts_carriage_return(void **state)
{
	struct trace_log	*t;

	(void)state;
	t = open_log(UINT64_MAX, true);
	put(t, TRACE_STDOUT, "10%\r");
	assert_int_equal(trace_log_size(t), 32 + 5);
	put(t, TRACE_STDOUT, "50%\r");
	put(t, TRACE_STDOUT, "done\n");
	put(t, TRACE_STDOUT, "next\n");
	/* The rest after the last '\n' is one entry, not cut at the '\r'. */
	put(t, TRACE_STDOUT, "line\nsection_start:1:x\r\x1b[0K");
	put(t, TRACE_STDOUT, "$ cmd\n");
	/* A pending partial line goes out with it. */
	put(t, TRACE_STDERR, "xy");
	put(t, TRACE_STDERR, "z\r");
	put(t, TRACE_STDERR, "w");
	expect_log(t,
	    H0 "01O 10%\r\n"
	    H0 "01O+50%\r\n"
	    H0 "01O+done\n"
	    H0 "01O next\n"
	    H0 "01O line\n"
	    H0 "01O section_start:1:x\r\x1b[0K\n"
	    H0 "01O+$ cmd\n"
	    H0 "01E xyz\r\n"
	    H0 "01E+w\n");
	trace_log_close(t, false);
}

static void
test_ts_long_line(void **state)
{
	struct trace_log	*t;
	char			*big, *want, *p;
	size_t			 wlen;

	(void)state;
	big = malloc(9000);
	want = malloc(40000);
	assert_non_null(big);
	assert_non_null(want);
	memset(big, 'a', 9000);

	t = open_log(UINT64_MAX, true);
	/* More than 8 KiB in one write: out at once, then '+'. */
	assert_int_equal(trace_log_write(t, TRACE_STDOUT, big, 9000), 0);
	assert_int_equal(trace_log_size(t), 32 + 9000 + 1);
	put(t, TRACE_STDOUT, "end\n");
	/* 8 KiB exactly waits; the next byte pushes it over. */
	assert_int_equal(trace_log_write(t, TRACE_STDERR, big, 8192), 0);
	assert_int_equal(trace_log_size(t), 32 + 9000 + 1 + 36);
	put(t, TRACE_STDERR, "b");
	put(t, TRACE_STDERR, "c\n");
	/* Held 8000 + 200: over 8 KiB with the header. */
	assert_int_equal(trace_log_write(t, TRACE_STDOUT, big, 8000), 0);
	assert_int_equal(trace_log_write(t, TRACE_STDOUT, big, 200), 0);

	p = stpcpy(want, H0 "01O ");
	memset(p, 'a', 9000);
	p = stpcpy(p + 9000, "\n" H0 "01O+end\n" H0 "01E ");
	memset(p, 'a', 8192);
	p = stpcpy(p + 8192, "b\n" H0 "01E+c\n" H0 "01O ");
	memset(p, 'a', 8200);
	p = stpcpy(p + 8200, "\n");
	wlen = (size_t)(p - want);
	expect_log_n(t, want, wlen);
	trace_log_close(t, false);
	free(big);
	free(want);
}

static void
test_finish(void **state)
{
	struct trace_log	*t;

	(void)state;
	t = open_log(UINT64_MAX, true);
	put(t, TRACE_STDOUT, "abc\xe2\x82");
	put(t, TRACE_STDERR, "x");
	put(t, TRACE_RUNNER, "\xc3");
	assert_int_equal(trace_log_size(t), 0);
	expect_log(t,
	    H0 "00O " FFFD "\n"
	    H0 "01O abc" FFFD "\n"
	    H0 "01E x\n");
	/* Later writes are dropped; finishing again changes nothing. */
	put(t, TRACE_STDOUT, "late\n");
	assert_int_equal(trace_log_printf(t, "late\n"), 0);
	expect_log(t,
	    H0 "00O " FFFD "\n"
	    H0 "01O abc" FFFD "\n"
	    H0 "01E x\n");
	trace_log_close(t, false);

	/* Without timestamps a partial line is not held at all. */
	t = open_log(UINT64_MAX, false);
	put(t, TRACE_STDOUT, "abc");
	assert_int_equal(trace_log_size(t), 3);
	put(t, TRACE_STDOUT, "\r");
	expect_log(t, "abc\r");
	trace_log_close(t, false);
}

static void
test_read_ranges(void **state)
{
	struct trace_log	*t;
	char			*want, *got, small[8];
	size_t			 total = 200 * 1000 + 123, i, off, len;
	unsigned		 seed = 7;
	ssize_t			 n;

	(void)state;
	want = malloc(total);
	got = malloc(total);
	assert_non_null(want);
	assert_non_null(got);
	for (i = 0; i < total; i++)
		want[i] = (char)('!' + (i * 7 + i / 253) % 90);

	t = open_log(UINT64_MAX, false);
	/* Before anything reaches the file. */
	assert_int_equal(trace_log_write(t, TRACE_STDOUT, want, 5), 0);
	assert_int_equal(trace_log_read(t, 0, small, sizeof small), 5);
	assert_memory_equal(small, want, 5);
	assert_int_equal(trace_log_read(t, 2, small, 2), 2);
	assert_memory_equal(small, want + 2, 2);
	assert_int_equal(trace_log_read(t, 5, small, 2), 0);
	assert_int_equal(trace_log_read(t, 500, small, 2), 0);

	for (off = 5; off < total; off += len) {
		len = 1000 + off % 777;
		if (len > total - off)
			len = total - off;
		assert_int_equal(trace_log_write(t, TRACE_STDOUT, want + off,
		    len), 0);
	}
	assert_int_equal(trace_log_size(t), total);

	/* Not finished: part in the file, part only in memory. */
	for (i = 0; i < 300; i++) {
		seed = seed * 1103515245 + 12345;
		off = (seed >> 4) % (total + 10);
		seed = seed * 1103515245 + 12345;
		len = (seed >> 4) % 70000;
		if (i < 4) {
			/* Around the first buffer boundaries. */
			off = 65536 * (i + 1) - 3;
			len = 6;
		}
		n = trace_log_read(t, off, got, len);
		if (off >= total) {
			assert_int_equal(n, 0);
			continue;
		}
		assert_int_equal(n, (ssize_t)(len < total - off ? len : total - off));
		assert_memory_equal(got, want + off, (size_t)n);
	}
	assert_int_equal(trace_log_read(t, 0, got, total), (ssize_t)total);
	assert_memory_equal(got, want, total);
	expect_log_n(t, want, total);
	trace_log_close(t, false);
	free(want);
	free(got);
}

static void
test_reopen(void **state)
{
	struct trace_log	*t;
	uint64_t		 size;
	uint32_t		 crc;
	char			 buf[64];

	(void)state;
	t = open_log(UINT64_MAX, true);
	put(t, TRACE_STDOUT, "one\n");
	put(t, TRACE_STDERR, "two ü\n");
	assert_int_equal(trace_log_finish(t), 0);
	size = trace_log_size(t);
	crc = trace_log_crc32(t);
	trace_log_close(t, false);

	t = trace_log_reopen(log_path);
	assert_non_null(t);
	assert_string_equal(trace_log_path(t), log_path);
	assert_int_equal(trace_log_size(t), size);
	assert_int_equal(trace_log_crc32(t), crc);
	assert_false(trace_log_truncated(t));
	assert_int_equal(trace_log_read(t, 32, buf, 4), 4);
	assert_memory_equal(buf, "one\n", 4);
	assert_int_equal(trace_log_write(t, TRACE_STDOUT, "x", 1), -EBADF);
	assert_int_equal(trace_log_printf(t, "x"), -EBADF);
	assert_int_equal(trace_log_finish(t), 0);
	assert_int_equal(trace_log_size(t), size);
	trace_log_close(t, true);
	assert_int_equal(access(log_path, F_OK), -1);

	errno = 0;
	assert_null(trace_log_reopen(log_path));
	assert_int_equal(errno, ENOENT);
}

static void
test_open(void **state)
{
	struct trace_log_config	 cfg;
	struct trace_log	*t;
	struct stat		 st;
	int			 fd;

	(void)state;
	memset(&cfg, 0, sizeof cfg);
	cfg.path = "/nonexistent-dir/trace.log";
	errno = 0;
	assert_null(trace_log_open(&cfg));
	assert_int_equal(errno, ENOENT);

	/* An old file is truncated, a new one is private. */
	fd = open(log_path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "old content", 11), 11);
	close(fd);
	t = open_log(100, false);
	assert_int_equal(trace_log_size(t), 0);
	trace_log_close(t, true);
	t = open_log(100, false);
	assert_int_equal(stat(log_path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(trace_log_write(t, 3, "x", 1), -EINVAL);
	put(t, TRACE_STDOUT, "kept");
	/* Closing without finish still leaves the buffered bytes in the file. */
	trace_log_close(t, false);
	assert_int_equal(stat(log_path, &st), 0);
	assert_int_equal(st.st_size, 4);
}

#define DISK_NOTICE "\x1b[31;1mERROR: the job log could not be written to disk: " \
	"File too large\x1b[0;m\n"

/*
 * In a child: the file size limit makes the disk "fail" with EFBIG.  The
 * log is sealed: the file keeps what fitted, the write buffer's bytes and
 * the notice stay in memory, crc and size describe exactly those, and
 * nothing more is taken.
 */
static int
disk_error_child(void)
{
	struct trace_log	*t;
	struct rlimit		 rl = { 100000, 100000 };
	char			 chunk[10000], *back, *file;
	int			 i, rc, failed = 0;
	uint64_t		 size;
	size_t			 flen, k;

	signal(SIGXFSZ, SIG_IGN);
	if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
		return 10;
	memset(chunk, 'z', sizeof chunk);
	t = open_log(UINT64_MAX, false);
	for (i = 0; i < 30; i++) {
		rc = trace_log_write(t, TRACE_STDOUT, chunk, sizeof chunk);
		if (rc == -EFBIG)
			failed = 1;
		else if (rc != 0 || failed)
			return 11;	/* after the failure, every write fails */
	}
	if (!failed || trace_log_disk_error(t) != EFBIG)
		return 12;
	size = trace_log_size(t);
	if (trace_log_finish(t) != -EFBIG || trace_log_size(t) != size)
		return 13;
	if (trace_log_flush(t) != 0 || trace_log_sync(t) != 0)
		return 14;
	/* The file: what fitted, not a byte more. */
	file = read_file(trace_log_path(t), &flen);
	if (flen != 100000)
		return 15;
	back = malloc(size);
	if (trace_log_read(t, 0, back, size) != (ssize_t)size)
		return 16;
	if (memcmp(back, file, flen) != 0)
		return 17;
	/* Then the buffer's bytes, a line end, the notice. */
	k = size - strlen(DISK_NOTICE) - 1;
	if (k < flen || k > flen + 32 * 1024 || back[k] != '\n' ||
	    memcmp(back + k + 1, DISK_NOTICE, strlen(DISK_NOTICE)) != 0)
		return 18;
	for (i = 0; (size_t)i < k; i++)
		if (back[i] != 'z')
			return 19;
	if (trace_log_crc32(t) != crc_of(back, size))
		return 20;
	free(back);
	free(file);
	trace_log_close(t, true);
	return 0;
}

/*
 * In a child: no byte fits on the disk.  The first flush seals the log and
 * it still holds the job's line and the notice, stamped like any runner
 * line, for GitLab.
 */
static int
disk_full_child(void)
{
	static const char	 want[] = H0 "01O needs no disk\n" H0 "00O " DISK_NOTICE;
	struct trace_log	*t;
	struct rlimit		 rl = { 0, 0 };
	char			*back;
	size_t			 len, flen;

	signal(SIGXFSZ, SIG_IGN);
	if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
		return 10;
	t = open_log(UINT64_MAX, true);
	if (trace_log_write(t, TRACE_STDOUT, "needs no disk\n", 14) != 0)
		return 11;
	if (trace_log_write(t, TRACE_STDOUT, "half a line", 11) != 0)
		return 12;
	if (trace_log_flush(t) != -EFBIG || trace_log_disk_error(t) != EFBIG)
		return 13;
	if (trace_log_printf(t, "Job succeeded\n") != -EFBIG)
		return 14;
	if (trace_log_finish(t) != -EFBIG)
		return 15;
	back = read_all(t, &len);
	if (len != sizeof want - 1 || memcmp(back, want, len) != 0)
		return 16;
	if (trace_log_crc32(t) != crc_of(want, len))
		return 17;
	free(back);
	free(read_file(trace_log_path(t), &flen));
	if (flen != 0)
		return 18;
	trace_log_close(t, false);
	return 0;
}

static void
run_child(int (*child)(void))
{
	pid_t	 pid;
	int	 status;

	pid = fork();
	assert_true(pid != -1);
	if (pid == 0)
		_exit(child());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void
test_disk_full(void **state)
{
	(void)state;
	run_child(disk_full_child);
}

static void
test_disk_error(void **state)
{
	(void)state;
	run_child(disk_error_child);
}

static void
test_mask_split(void **state)
{
	static const char	*phrases[] = { "supersecret123", NULL };
	const char		*s = "pre supersecret123 post\n";
	size_t			 n = strlen(s), i, j, len;
	struct trace_log	*t;
	char			*got;
	int			 ts;

	(void)state;
	for (ts = 0; ts <= 1; ts++) {
		for (i = 0; i <= n; i++) {
			for (j = i; j <= n; j++) {
				t = open_phrases(ts, phrases);
				assert_int_equal(trace_log_write(t, TRACE_STDOUT,
				    s, i), 0);
				assert_int_equal(trace_log_write(t, TRACE_STDOUT,
				    s + i, j - i), 0);
				assert_int_equal(trace_log_write(t, TRACE_STDOUT,
				    s + j, n - j), 0);
				expect_log(t, ts ? H0 "01O pre [MASKED] post\n" :
				    "pre [MASKED] post\n");
				trace_log_close(t, false);
			}
		}
	}

	/* Nothing of it goes out early, not even what reads would see. */
	t = open_phrases(false, phrases);
	put(t, TRACE_STDOUT, "pre super");
	got = read_all(t, &len);
	assert_int_equal(len, 4);
	assert_memory_equal(got, "pre ", 4);
	free(got);
	put(t, TRACE_STDOUT, "secret12");
	assert_int_equal(trace_log_size(t), 4);
	put(t, TRACE_STDOUT, "3!");
	expect_log(t, "pre [MASKED]!");
	trace_log_close(t, false);

	/* A prefix that turns out not to be a secret is released whole. */
	t = open_phrases(false, phrases);
	put(t, TRACE_STDOUT, "supersecret12");
	assert_int_equal(trace_log_size(t), 0);
	put(t, TRACE_STDOUT, "4");
	expect_log(t, "supersecret124");
	trace_log_close(t, false);
}

/*
 * The masker hands on most of a write without copying it, and the log
 * then gives the timestamper its held bytes with the first line, then the
 * rest.  That must be the same log as one write of the masker's copied
 * output (what the log did before): here log b gets exactly that, from a
 * masker of its own, and both must match byte for byte.
 */
static void
test_mask_direct_same_as_copy(void **state)
{
	static const char *const phrases[] = { "topsecret-value", "hunter22hunter" };
	static const char *const pieces[] = { "line of text ", "\n", "\r",
	    "topsecret-value", "topsecret-", "hunter22", "hunter22hunter",
	    "?private_token=abc&x=1 ", "glpat-abcdef ", "\n\n", "zz" };
	const char *const	*prefixes = masker_default_prefixes(false);
	struct trace_log_config	 cfg;
	struct trace_log	*a, *b;
	struct masker		*m;
	struct buf		 mo;
	char			 text[2048], path_b[64], *wa, *wb;
	size_t			 n, i, la, lb, from, to;
	uint32_t		 rng = 777;
	int			 round, k, fd;

	(void)state;
	snprintf(path_b, sizeof path_b, "/tmp/test_trace_log_b.XXXXXX");
	fd = mkstemp(path_b);
	assert_true(fd >= 0);
	close(fd);
	buf_init(&mo, BUF_UNLIMITED);
	for (round = 0; round < 200; round++) {
		n = 0;
		for (k = 0; k < 40; k++) {
			rng = rng * 1103515245u + 12345u;
			i = (rng >> 16) % (sizeof(pieces) / sizeof(pieces[0]));
			memcpy(text + n, pieces[i], strlen(pieces[i]));
			n += strlen(pieces[i]);
		}
		a = open_masked(UINT64_MAX, round % 4 != 0, phrases, 2, prefixes, 1, true);
		memset(&cfg, 0, sizeof cfg);
		cfg.path = path_b;
		cfg.limit = UINT64_MAX;
		cfg.timestamps = round % 4 != 0;
		cfg.now_us = fake_clock;
		b = trace_log_open(&cfg);
		assert_non_null(b);
		m = masker_new(phrases, 2, prefixes, 1, true);
		for (from = 0; from < n; from = to) {
			rng = rng * 1103515245u + 12345u;
			to = from + 1 + (rng >> 16) % 90;
			if (to > n)
				to = n;
			assert_int_equal(trace_log_write(a, TRACE_STDOUT, text + from,
			    to - from), 0);
			buf_reset(&mo);
			assert_int_equal(masker_write(m, text + from, to - from, &mo), 0);
			assert_int_equal(trace_log_write(b, TRACE_STDOUT, mo.ptr, mo.len), 0);
		}
		buf_reset(&mo);
		assert_int_equal(masker_flush(m, &mo), 0);
		assert_int_equal(trace_log_write(b, TRACE_STDOUT, mo.ptr, mo.len), 0);
		masker_free(m);
		assert_int_equal(trace_log_finish(a), 0);
		assert_int_equal(trace_log_finish(b), 0);
		wa = read_all(a, &la);
		wb = read_all(b, &lb);
		assert_int_equal(la, lb);
		assert_memory_equal(wa, wb, la);
		assert_int_equal(trace_log_crc32(a), trace_log_crc32(b));
		free(wa);
		free(wb);
		trace_log_close(a, false);
		trace_log_close(b, false);
	}
	buf_release(&mo);
	unlink(path_b);
}

static void
test_mask_held_attribution(void **state)
{
	static const char	*phrases[] = { "secretvalue", NULL };
	struct trace_log	*t;

	(void)state;
	/* "secr" is held when stderr writes; it is still stdout's. */
	t = open_phrases(true, phrases);
	put(t, TRACE_STDOUT, "abc secr");
	put(t, TRACE_STDERR, "oops\n");
	put(t, TRACE_STDOUT, "\n");
	expect_log(t, H0 "01E oops\n" H0 "01O abc secr\n");
	trace_log_close(t, false);

	/* Held across several switches, then a '\r' flush. */
	t = open_phrases(true, phrases);
	put(t, TRACE_STDOUT, "x s");
	put(t, TRACE_STDERR, "e");
	put(t, TRACE_STDOUT, "secre");
	put(t, TRACE_RUNNER, "r\n");
	put(t, TRACE_STDOUT, "tvalu\r");
	put(t, TRACE_STDERR, "\n");
	expect_log(t,
	    H0 "00O r\n"
	    H0 "01O x ssecretvalu\r\n"
	    H0 "01E e\n");
	trace_log_close(t, false);

	/* Held at the end: released by finish, to the right streams. */
	t = open_phrases(true, phrases);
	put(t, TRACE_STDOUT, "abc secr");
	put(t, TRACE_STDERR, "\xc3");
	expect_log(t, H0 "01O abc secr\n" H0 "01E " FFFD "\n");
	trace_log_close(t, false);
}

static void
test_mask_replacement_then_switch(void **state)
{
	static const char	*phrases[] = { "a_long_secret_value_here",
				    "shhh", NULL };
	struct trace_log	*t;

	(void)state;
	/* "[MASKED]" is shorter or longer than what it replaced. */
	t = open_phrases(true, phrases);
	put(t, TRACE_STDOUT, "token a_long_secret_value_here\n");
	put(t, TRACE_STDERR, "err\n");
	put(t, TRACE_STDOUT, "k=shhh");
	put(t, TRACE_STDERR, "e2\n");
	put(t, TRACE_STDOUT, " and a_long_secret_va");
	put(t, TRACE_STDERR, "e3\n");
	put(t, TRACE_STDOUT, "lue_here end\n");
	assert_int_equal(trace_log_printf(t, "r %s\n",
	    "a_long_secret_value_here"), 0);
	put(t, TRACE_STDERR, "shhh\n");
	expect_log(t,
	    H0 "01O token [MASKED]\n"
	    H0 "01E err\n"
	    H0 "01E e2\n"
	    /* Split by stderr's line, still one secret on stdout's masker. */
	    H0 "01E e3\n"
	    H0 "01O k=[MASKED] and [MASKED] end\n"
	    H0 "00O r [MASKED]\n"
	    H0 "01E [MASKED]\n");
	trace_log_close(t, false);
}

static void
test_mask_tokens_urls(void **state)
{
	const char *const	*prefixes = masker_default_prefixes(true);
	struct trace_log	*t;
	size_t			 n = 0;

	(void)state;
	while (prefixes[n] != NULL)
		n++;
	t = open_masked(UINT64_MAX, false, NULL, 0, prefixes, n, true);
	put(t, TRACE_STDOUT, "glp");
	put(t, TRACE_STDOUT, "at-abc");
	put(t, TRACE_STDOUT, "def\n");
	put(t, TRACE_STDERR, "GET https://x/?private_token=ab");
	put(t, TRACE_STDERR, "c&x=1\n");
	expect_log(t, "glpat-[MASKED]\n"
	    "GET https://x/?private_token=[MASKED]&x=1\n");
	trace_log_close(t, false);
}

/* gitlab-runner's reason for a masker per stream. */
static void
test_mask_secret_split_by_other_stream(void **state)
{
	static const char	*phrases[] = { "secret", NULL };
	struct trace_log	*t;

	(void)state;
	t = open_phrases(false, phrases);
	put(t, TRACE_STDOUT, "a sec");
	put(t, TRACE_STDERR, "warning\n");
	put(t, TRACE_STDOUT, "ret b\n");
	assert_int_equal(trace_log_finish(t), 0);
	/* No timestamps: bytes go out as they come, but never "secret". */
	expect_log(t, "a warning\n[MASKED] b\n");
	trace_log_close(t, false);
}

static void
test_mask_limit(void **state)
{
	static const char	*phrases[] = { "secretvalue", NULL };
	struct trace_log	*t;

	(void)state;
	/* The limit counts what is stored: after masking. */
	t = open_masked(12, false, phrases, 1, NULL, 0, false);
	put(t, TRACE_STDOUT, "ab secretvalue cd");
	expect_log(t, "ab [MASKED] " NOTICE("12"));
	trace_log_close(t, false);
}

/* Reference: leftmost, non-overlapping replacement of the two phrases. */
static size_t
ref_mask(const char *in, size_t n, const char *const *ph, char *out)
{
	size_t	 i = 0, o = 0, k, l;

	while (i < n) {
		for (k = 0; ph[k] != NULL; k++) {
			l = strlen(ph[k]);
			if (l <= n - i && memcmp(in + i, ph[k], l) == 0)
				break;
		}
		if (ph[k] != NULL) {
			memcpy(out + o, "[MASKED]", 8);
			o += 8;
			i += l;
		} else
			out[o++] = in[i++];
	}
	return o;
}

/*
 * Random interleavings of two streams, cut anywhere, secrets included:
 * each stream has its own masker, so a secret cut by the other stream's
 * output is still masked.  Held prefixes and decoys make the maskers hold
 * bytes at switches.  Putting each stream back together from the log's
 * headers gives exactly its masked text.
 */
static void
test_mask_stress(void **state)
{
	static const char	*phrases[] = { "SECRETVALUE", "K9ZX4MW2", NULL };
	static const char	*words[2][8] = {
		{ "alpha ", "SECRETVALUE ", "SECRETVALUX", "SE", "S", "\n",
		    "up\r", "\xc3\xbc" },
		{ "warn ", "K9ZX4MW2\n", "K9", "K", "K9ZX4MWQ", "\n", "x\r",
		    "\xe2\x82\xac" },
	};
	char		*text[2], *want, *got, *res[2];
	size_t		 tlen[2], pos[2], rlen[2], glen, wlen, cut, k, p, end;
	unsigned	 seed;
	int		 round, s, cur, stream;
	struct trace_log *t;

	(void)state;
	for (s = 0; s < 2; s++) {
		text[s] = malloc(20000);
		res[s] = malloc(40000);
		assert_non_null(text[s]);
		assert_non_null(res[s]);
	}
	want = malloc(40000);
	assert_non_null(want);

	for (round = 0; round < 60; round++) {
		seed = (unsigned)round * 7919 + 1;
		for (s = 0; s < 2; s++) {
			tlen[s] = 0;
			while (tlen[s] < 4000) {
				seed = seed * 1103515245 + 12345;
				k = (seed >> 16) % 8;
				memcpy(text[s] + tlen[s], words[s][k],
				    strlen(words[s][k]));
				tlen[s] += strlen(words[s][k]);
			}
			text[s][tlen[s]++] = '\n';
			pos[s] = 0;
		}

		t = open_phrases(true, phrases);
		cur = 0;
		while (pos[0] < tlen[0] || pos[1] < tlen[1]) {
			if (pos[cur] == tlen[cur])
				cur = !cur;
			seed = seed * 1103515245 + 12345;
			cut = pos[cur] + 1 + (seed >> 16) % 30;
			if (cut > tlen[cur])
				cut = tlen[cur];
			assert_int_equal(trace_log_write(t, (enum trace_stream)
			    (cur + 1), text[cur] + pos[cur], cut - pos[cur]), 0);
			pos[cur] = cut;
			seed = seed * 1103515245 + 12345;
			if ((seed >> 16) % 2)
				cur = !cur;
		}
		assert_int_equal(trace_log_finish(t), 0);
		got = read_all(t, &glen);
		assert_null(memmem(got, glen, "SECRETVALUE", 11));
		assert_null(memmem(got, glen, "K9ZX4MW2", 8));

		/* Split the entries by stream, undoing the added '\n's. */
		rlen[0] = rlen[1] = 0;
		for (p = 0; p < glen; p = end + 1) {
			assert_true(glen - p > 32);
			assert_memory_equal(got + p, H0 "01", 30);
			stream = got[p + 30] == 'O' ? 0 : 1;
			assert_true(got[p + 30] == (stream ? 'E' : 'O'));
			if (got[p + 31] == '+') {
				assert_true(rlen[stream] > 0);
				assert_int_equal(res[stream][rlen[stream] - 1],
				    '\n');
				rlen[stream]--;
			} else
				assert_int_equal(got[p + 31], ' ');
			end = (size_t)((char *)memchr(got + p + 32, '\n',
			    glen - p - 32) - got);
			memcpy(res[stream] + rlen[stream], got + p + 32,
			    end + 1 - (p + 32));
			rlen[stream] += end + 1 - (p + 32);
		}
		for (s = 0; s < 2; s++) {
			wlen = ref_mask(text[s], tlen[s], phrases, want);
			assert_int_equal(rlen[s], wlen);
			assert_memory_equal(res[s], want, wlen);
		}
		free(got);
		trace_log_close(t, false);
	}
	for (s = 0; s < 2; s++) {
		free(text[s]);
		free(res[s]);
	}
	free(want);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_conformance, setup, teardown),
		cmocka_unit_test_setup_teardown(test_crc_many_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_utf8_splits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_utf8_fast_path, setup, teardown),
		cmocka_unit_test_setup_teardown(test_utf8_per_stream, setup, teardown),
		cmocka_unit_test_setup_teardown(test_utf8_invalid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limit_notice, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limit_utf8, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limit_counts_timestamps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ts_headers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ts_partial_line, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ts_carriage_return, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ts_long_line, setup, teardown),
		cmocka_unit_test_setup_teardown(test_finish, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_ranges, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disk_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disk_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mask_split, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mask_held_attribution, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mask_direct_same_as_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mask_replacement_then_switch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mask_tokens_urls, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mask_secret_split_by_other_stream,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_mask_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mask_stress, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

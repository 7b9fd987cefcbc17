/*
 * Unit tests for the daemon log: exact lines in each format, filtering,
 * the errno suffix, the length cut, secret masking and token shortening.
 * Lines go to a temporary file through log_set_fd() and are read back.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/clock.h"
#include "lib/log.h"

static int	out_fd = -1;
static char	out_text[65536];

static int
setup(void **state)
{
	FILE	*f;

	(void)state;
	if ((f = tmpfile()) == NULL)
		return -1;
	out_fd = dup(fileno(f));
	fclose(f);
	log_set_fd(out_fd);
	log_set_level(LOG_LEVEL_INFO);
	log_set_format(LOG_FORMAT_RUNNER);
	log_secret_clear();
	return out_fd < 0 ? -1 : 0;
}

static int
teardown(void **state)
{
	(void)state;
	log_set_fd(2);
	log_set_level(LOG_LEVEL_INFO);
	log_set_format(LOG_FORMAT_RUNNER);
	log_secret_clear();
	close(out_fd);
	out_fd = -1;
	return 0;
}

/* Everything logged since the last call, as a string. */
static const char *
take(void)
{
	ssize_t	n;
	size_t	got = 0;

	while (got < sizeof out_text - 1 &&
	    (n = pread(out_fd, out_text + got, sizeof out_text - 1 - got,
	    (off_t)got)) > 0)
		got += (size_t)n;
	out_text[got] = '\0';
	assert_int_equal(ftruncate(out_fd, 0), 0);
	assert_int_equal(lseek(out_fd, 0, SEEK_SET), 0);
	return out_text;
}

static void
test_runner_format(void **state)
{
	(void)state;
	log_set_level(LOG_LEVEL_DEBUG);
	log_debug("d %d", 1);
	log_info("i %s", "two");
	log_warnx("w");
	log_error("e");
	log_msg(LOG_LEVEL_PANIC, "p");
	log_msg(LOG_LEVEL_FATAL, "f");
	assert_string_equal(take(),
	    "DEBUG: d 1\n"
	    "i two\n"
	    "WARNING: w\n"
	    "ERROR: e\n"
	    "PANIC: p\n"
	    "FATAL: f\n");
}

static void
test_level_filter(void **state)
{
	(void)state;
	assert_int_equal(log_get_level(), LOG_LEVEL_INFO);
	log_debug("hidden");
	log_info("shown");
	assert_string_equal(take(), "shown\n");

	log_set_level(LOG_LEVEL_WARN);
	assert_int_equal(log_get_level(), LOG_LEVEL_WARN);
	log_info("hidden");
	log_debug("hidden");
	log_warnx("warn");
	log_error("err");
	assert_string_equal(take(), "WARNING: warn\nERROR: err\n");

	log_set_level(LOG_LEVEL_ERROR);
	errno = EIO;
	log_warn("hidden");
	assert_int_equal(errno, EIO);
	log_msg(LOG_LEVEL_WARN, "hidden");
	log_msg(LOG_LEVEL_ERROR, "kept");
	assert_string_equal(take(), "ERROR: kept\n");

	log_set_level(LOG_LEVEL_DEBUG);
	log_debug("now %s", "shown");
	assert_string_equal(take(), "DEBUG: now shown\n");
}

/* The counter gitlab_runner_errors_total is made from (a logrus hook there). */
static unsigned	counted[LOG_LEVEL_PANIC + 1];

static void
count_line(enum log_level level)
{
	counted[level]++;
	/* A line the counter logs is written, not counted again. */
	log_warnx("from the counter");
	errno = ENOMEM;
}

static void
test_counter(void **state)
{
	(void)state;
	memset(counted, 0, sizeof counted);
	log_set_counter(count_line);
	log_set_level(LOG_LEVEL_DEBUG);
	log_debug("d");
	log_info("i");
	errno = EIO;
	log_warnx("w");
	assert_int_equal(errno, EIO);
	log_error("e");
	log_msg(LOG_LEVEL_PANIC, "p");
	/* Filtered out: not counted, as logrus fires no hook for them. */
	log_set_level(LOG_LEVEL_ERROR);
	log_warnx("hidden");
	log_set_counter(NULL);
	log_error("not counted");
	assert_int_equal(counted[LOG_LEVEL_DEBUG] + counted[LOG_LEVEL_INFO], 0);
	assert_int_equal(counted[LOG_LEVEL_WARN], 1);
	assert_int_equal(counted[LOG_LEVEL_ERROR], 1);
	assert_int_equal(counted[LOG_LEVEL_PANIC], 1);
	assert_string_equal(take(),
	    "DEBUG: d\n"
	    "i\n"
	    "WARNING: from the counter\n"
	    "WARNING: w\n"
	    "WARNING: from the counter\n"
	    "ERROR: e\n"
	    "WARNING: from the counter\n"
	    "PANIC: p\n"
	    "ERROR: not counted\n");
}

static void
test_errno_suffix(void **state)
{
	(void)state;
	errno = ENOENT;
	log_warn("open %s", "/x");
	/* errno survives the call, so a second use sees the same value. */
	assert_int_equal(errno, ENOENT);
	log_warnx("plain %d", 3);
	assert_int_equal(errno, ENOENT);
	errno = EACCES;
	log_info("info never gets it");
	assert_int_equal(errno, EACCES);
	assert_string_equal(take(),
	    "WARNING: open /x: No such file or directory\n"
	    "WARNING: plain 3\n"
	    "info never gets it\n");
}

/* Accept the line with the time of either side of a second boundary. */
static void
assert_timed_line(const char *got, const char *fmt, const char *t0,
    const char *t1)
{
	char	a[1024], b[1024];

	snprintf(a, sizeof a, fmt, t0);
	snprintf(b, sizeof b, fmt, t1);
	if (strcmp(got, a) != 0 && strcmp(got, b) != 0)
		fail_msg("got   \"%s\"\nwanted \"%s\"", got, a);
}

static void
test_text_format(void **state)
{
	char	t0[32], t1[32];

	(void)state;
	log_set_format(LOG_FORMAT_TEXT);
	clock_rfc3339(clock_wall(), t0);
	log_warnx("the message");
	clock_rfc3339(clock_wall(), t1);
	assert_timed_line(take(),
	    "time=\"%s\" level=warning msg=\"the message\"\n", t0, t1);

	clock_rfc3339(clock_wall(), t0);
	log_info("q\"b\\n\nt\tc\001");
	clock_rfc3339(clock_wall(), t1);
	assert_timed_line(take(),
	    "time=\"%s\" level=info msg=\"q\\\"b\\\\n\\nt\\tc\\x01\"\n",
	    t0, t1);

	log_set_level(LOG_LEVEL_DEBUG);
	clock_rfc3339(clock_wall(), t0);
	log_debug("d");
	log_error("e");
	clock_rfc3339(clock_wall(), t1);
	take();
	assert_non_null(strstr(out_text, " level=debug msg=\"d\"\n"));
	assert_non_null(strstr(out_text, " level=error msg=\"e\"\n"));
}

static void
test_json_format(void **state)
{
	char	t0[32], t1[32];

	(void)state;
	log_set_format(LOG_FORMAT_JSON);
	clock_rfc3339(clock_wall(), t0);
	log_warnx("the message");
	clock_rfc3339(clock_wall(), t1);
	assert_timed_line(take(),
	    "{\"level\":\"warning\",\"msg\":\"the message\",\"time\":\"%s\"}\n",
	    t0, t1);

	clock_rfc3339(clock_wall(), t0);
	errno = ENOENT;
	log_warn("a\"b\\c\nd\001\037\b\f\r\t\x7f\xc3\xa9");
	clock_rfc3339(clock_wall(), t1);
	assert_timed_line(take(),
	    "{\"level\":\"warning\",\"msg\":\"a\\\"b\\\\c\\nd\\u0001\\u001f"
	    "\\b\\f\\r\\t\x7f\xc3\xa9: No such file or directory\","
	    "\"time\":\"%s\"}\n", t0, t1);
}

static void
test_time_shape(void **state)
{
	const char	*s;
	int		 i;

	(void)state;
	log_set_format(LOG_FORMAT_TEXT);
	log_info("x");
	s = take();
	/* time="YYYY-MM-DDTHH:MM:SSZ" */
	assert_int_equal(strncmp(s, "time=\"", 6), 0);
	s += 6;
	for (i = 0; i < 20; i++) {
		switch (i) {
		case 4: case 7: assert_int_equal(s[i], '-'); break;
		case 10: assert_int_equal(s[i], 'T'); break;
		case 13: case 16: assert_int_equal(s[i], ':'); break;
		case 19: assert_int_equal(s[i], 'Z'); break;
		default: assert_true(s[i] >= '0' && s[i] <= '9'); break;
		}
	}
	assert_int_equal(s[20], '"');
}

static void
test_long_lines(void **state)
{
	char		*big;
	const char	*s;
	size_t		 len;

	(void)state;
	big = malloc(20001);
	assert_non_null(big);

	/* Past the stack buffer but under the cut: intact. */
	memset(big, 'a', 5000);
	big[5000] = '\0';
	log_warnx("%s|", big);
	s = take();
	len = strlen(s);
	assert_int_equal(len, 9 + 5000 + 2);
	assert_int_equal(strncmp(s, "WARNING: aaaa", 13), 0);
	assert_string_equal(s + 9 + 5000, "|\n");

	/* Past 16 KiB: cut and marked. */
	memset(big, 'b', 20000);
	big[20000] = '\0';
	log_info("%s", big);
	s = take();
	assert_int_equal(strlen(s), 16384 + 4);
	assert_string_equal(s + 16384, "...\n");
	assert_int_equal(s[16383], 'b');

	/* The cut does not split a UTF-8 sequence. */
	memset(big, 'c', 16383);
	memcpy(big + 16383, "\xc3\xa9zzz", 6);
	log_info("%s", big);
	s = take();
	assert_int_equal(strlen(s), 16383 + 4);
	assert_string_equal(s + 16383, "...\n");

	/* Exactly 16 KiB is not cut. */
	memset(big, 'd', 16384);
	big[16384] = '\0';
	log_info("%s", big);
	s = take();
	assert_int_equal(strlen(s), 16384 + 1);
	assert_null(strstr(s, "..."));

	/* One byte more is. */
	memset(big, 'e', 16385);
	big[16385] = '\0';
	log_info("%s", big);
	s = take();
	assert_int_equal(strlen(s), 16384 + 4);
	assert_string_equal(s + 16384, "...\n");
	free(big);
}

static void
test_secret_masked(void **state)
{
	(void)state;
	log_secret_add("s3cr3t-value");
	log_info("token=%s", "s3cr3t-value");
	log_info("twice: s3cr3t-value and s3cr3t-value.");
	log_info("partial s3cr3t-valu stays");
	assert_string_equal(take(),
	    "token=[MASKED]\n"
	    "twice: [MASKED] and [MASKED].\n"
	    "partial s3cr3t-valu stays\n");

	/* Also in the other formats, and in the errno suffix path. */
	log_set_format(LOG_FORMAT_JSON);
	errno = EPERM;
	log_warn("x s3cr3t-value y");
	take();
	assert_null(strstr(out_text, "s3cr3t"));
	assert_non_null(strstr(out_text, "\"msg\":\"x [MASKED] y: "));
	log_set_format(LOG_FORMAT_TEXT);
	log_error("s3cr3t-values3cr3t-value");
	take();
	assert_null(strstr(out_text, "s3cr3t"));
	assert_non_null(strstr(out_text, "msg=\"[MASKED]\"\n"));
}

static void
test_secret_overlapping(void **state)
{
	const char	*s;

	(void)state;
	/* Overlapping: neither may leave a tail in the clear. */
	log_secret_add("abcdef12");
	log_secret_add("ef12ghij");
	log_info("<abcdef12ghij>");
	s = take();
	assert_string_equal(s, "<[MASKED]>\n");

	/* Nested: the longer one must not leave "super" behind. */
	log_secret_clear();
	log_secret_add("secret");
	log_secret_add("supersecret");
	log_info("a supersecret b secret c");
	assert_string_equal(take(), "a [MASKED] b [MASKED] c\n");

	/* A secret that looks like part of the mask itself. */
	log_secret_clear();
	log_secret_add("MASK");
	log_info("MASK x MASKED");
	assert_string_equal(take(), "[MASKED] x [MASKED]ED\n");

	/* A secret with characters the formats escape. */
	log_secret_clear();
	log_secret_add("pa\"ss\nword");
	log_set_format(LOG_FORMAT_JSON);
	log_info("[pa\"ss\nword]");
	take();
	assert_null(strstr(out_text, "pa\\\"ss"));
	assert_non_null(strstr(out_text, "\"msg\":\"[[MASKED]]\""));
}

static void
test_secret_list(void **state)
{
	struct log_secret *a, *b, *first, *second;

	(void)state;
	/* Not held: NULL, empty, shorter than 4 bytes. */
	assert_null(log_secret_hold(NULL));
	assert_null(log_secret_hold(""));
	assert_null(log_secret_hold("abc"));
	log_secret_drop(NULL);
	log_info("abc");
	assert_string_equal(take(), "abc\n");

	/* Held twice (a reload that keeps an entry): masked until both drop it. */
	a = log_secret_hold("abcd");
	b = log_secret_hold("abcd");
	assert_ptr_equal(a, b);
	log_info("abcd");
	assert_string_equal(take(), "[MASKED]\n");
	log_secret_drop(a);
	log_info("abcd");
	assert_string_equal(take(), "[MASKED]\n");
	log_secret_drop(b);
	log_info("abcd");
	assert_string_equal(take(), "abcd\n");

	/* Dropping one leaves the others; a process-long add stays. */
	first = log_secret_hold("first-secret");
	second = log_secret_hold("second-secret");
	log_secret_add("third-secret");
	log_secret_drop(first);
	log_info("first-secret second-secret third-secret");
	assert_string_equal(take(), "first-secret [MASKED] [MASKED]\n");
	log_secret_drop(second);
	log_info("second-secret third-secret");
	assert_string_equal(take(), "second-secret [MASKED]\n");

	log_secret_clear();
	log_info("second-secret");
	assert_string_equal(take(), "second-secret\n");

	/* The list keeps its own copy. */
	{
		char	tmp[] = "copied-secret";

		log_secret_add(tmp);
		memset(tmp, 'x', sizeof tmp - 1);
		log_info("copied-secret");
		assert_string_equal(take(), "[MASKED]\n");
	}

	/* A secret that straddles the 16 KiB cut is masked, not halved. */
	{
		char	*big = malloc(16400);

		assert_non_null(big);
		log_secret_clear();
		log_secret_add("straddling-secret");
		/* 16387 bytes raw, 16378 once masked: no cut needed. */
		memset(big, 'z', 16370);
		strcpy(big + 16370, "straddling-secret");
		log_info("%s", big);
		take();
		assert_null(strstr(out_text, "strad"));
		assert_non_null(strstr(out_text, "zz[MASKED]\n"));
		free(big);
	}
}

static void
test_token(void **state)
{
	char		 out[LOG_TOKEN_SIZE];
	static const struct {
		const char	*in;
		const char	*want;
	} cases[] = {
		{ "glrt-abcdefghijklmnop", "abcdefghi" },
		{ "glrt-t1_abcdefghijklmnop", "abcdefghi" },
		{ "glrt-t2_abcdefghijklmnop", "abcdefghi" },
		{ "glrt-t3_abc", "abc" },
		{ "glrt-t4_abcdefghijklmnop", "t4_abcdef" },
		{ "t1_abcdefghijklmnop", "abcdefghi" },
		{ "t2_abcdefghijklmnop", "abcdefghi" },
		{ "glrtr-abcdefghijklmnop", "abcdefghi" },
		{ "glcbt-abcdefghijklmnop", "abcdefghi" },
		{ "GR1348941abcdefghijklmnop", "abcdefghi" },
		{ "GR1348941_iAgdMy7a3NhZaa5oNoH", "_iAgdMy7a" },
		{ "GRaBcDeF0xyz", "xyz" },
		{ "GR13489zzabcdefgh", "GR13489zz" },
		{ "GR134894zabcdefgh", "GR134894z" },
		{ "GR12", "GR12" },
		{ "glpat-abcdefghijkl", "glpat-abc" },
		{ "abcdefghijkl", "abcdefghi" },
		{ "abcdefghi", "abcdefghi" },
		{ "abc", "abc" },
		{ "glrt-", "" },
		{ "", "" },
	};
	size_t	i;

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		memset(out, '#', sizeof out);
		assert_ptr_equal(log_token(cases[i].in, out), out);
		if (strcmp(out, cases[i].want) != 0)
			fail_msg("log_token(\"%s\") = \"%s\", want \"%s\"",
			    cases[i].in, out, cases[i].want);
	}
	memset(out, '#', sizeof out);
	assert_string_equal(log_token(NULL, out), "");
}

static void
test_parse_names(void **state)
{
	enum log_level	l = LOG_LEVEL_PANIC;
	enum log_format	f = LOG_FORMAT_JSON;

	(void)state;
	assert_int_equal(log_level_parse("debug", &l), 0);
	assert_int_equal(l, LOG_LEVEL_DEBUG);
	assert_int_equal(log_level_parse("info", &l), 0);
	assert_int_equal(l, LOG_LEVEL_INFO);
	assert_int_equal(log_level_parse("warn", &l), 0);
	assert_int_equal(l, LOG_LEVEL_WARN);
	l = LOG_LEVEL_DEBUG;
	assert_int_equal(log_level_parse("warning", &l), 0);
	assert_int_equal(l, LOG_LEVEL_WARN);
	assert_int_equal(log_level_parse("error", &l), 0);
	assert_int_equal(l, LOG_LEVEL_ERROR);
	assert_int_equal(log_level_parse("fatal", &l), 0);
	assert_int_equal(l, LOG_LEVEL_FATAL);
	assert_int_equal(log_level_parse("panic", &l), 0);
	assert_int_equal(l, LOG_LEVEL_PANIC);
	assert_int_equal(log_level_parse("WARN", &l), -1);
	assert_int_equal(log_level_parse("trace", &l), -1);
	assert_int_equal(log_level_parse("", &l), -1);
	assert_int_equal(log_level_parse(NULL, &l), -1);
	assert_int_equal(l, LOG_LEVEL_PANIC);	/* untouched on failure */

	assert_int_equal(log_format_parse("runner", &f), 0);
	assert_int_equal(f, LOG_FORMAT_RUNNER);
	assert_int_equal(log_format_parse("text", &f), 0);
	assert_int_equal(f, LOG_FORMAT_TEXT);
	assert_int_equal(log_format_parse("json", &f), 0);
	assert_int_equal(f, LOG_FORMAT_JSON);
	assert_int_equal(log_format_parse("JSON", &f), -1);
	assert_int_equal(log_format_parse("logfmt", &f), -1);
	assert_int_equal(f, LOG_FORMAT_JSON);

	assert_string_equal(log_level_name(LOG_LEVEL_DEBUG), "debug");
	assert_string_equal(log_level_name(LOG_LEVEL_INFO), "info");
	assert_string_equal(log_level_name(LOG_LEVEL_WARN), "warning");
	assert_string_equal(log_level_name(LOG_LEVEL_ERROR), "error");
	assert_string_equal(log_level_name(LOG_LEVEL_FATAL), "fatal");
	assert_string_equal(log_level_name(LOG_LEVEL_PANIC), "panic");
}

static void
test_colour_on_tty(void **state)
{
	struct termios	 t;
	char		 got[256];
	size_t		 len = 0;
	ssize_t		 n;
	int		 m, s = -1;

	(void)state;
	if ((m = posix_openpt(O_RDWR | O_NOCTTY)) < 0 || grantpt(m) != 0 ||
	    unlockpt(m) != 0 || (s = open(ptsname(m), O_RDWR | O_NOCTTY)) < 0)
		skip();
	/* Raw, so the terminal does not turn \n into \r\n. */
	assert_int_equal(tcgetattr(s, &t), 0);
	cfmakeraw(&t);
	assert_int_equal(tcsetattr(s, TCSANOW, &t), 0);

	log_set_fd(s);
	log_warnx("careful");
	log_info("plain");
	log_set_fd(out_fd);
	while (len < sizeof got - 1 &&
	    (n = read(m, got + len, sizeof got - 1 - len)) > 0) {
		len += (size_t)n;
		got[len] = '\0';
		if (strstr(got, "plain\n") != NULL)
			break;
	}
	got[len] = '\0';
	close(s);
	close(m);
	assert_string_equal(got,
	    "\033[0;33mWARNING: \033[0mcareful\n"
	    "plain\n");

	/* Back on a file: no escapes. */
	log_warnx("careful");
	assert_string_equal(take(), "WARNING: careful\n");
}

/*
 * Fields: gitlab-runner's logrus lines.  JSON: every field a key, all keys
 * (level, msg and time among them) in sorted order, numbers unquoted, as
 * logrus's JSONFormatter writes a map; text: time, level, msg, then the
 * fields sorted, a value quoted only where logrus quotes one.
 */
static void
test_fields_json(void **state)
{
	char	t0[32], t1[32];

	(void)state;
	log_set_format(LOG_FORMAT_JSON);
	clock_rfc3339(clock_wall(), t0);
	log_kv(LOG_LEVEL_INFO, LOG_FIELDS(LOG_JOB(1234), LOG_RUNNER("xYzZy123"),
	    LOG_SECS("duration_s", 1.5), LOG_STR("job-status", "success")), "Job %s",
	    "succeeded");
	clock_rfc3339(clock_wall(), t1);
	assert_timed_line(take(),
	    "{\"duration_s\":1.5,\"job\":1234,\"job-status\":\"success\",\"level\":\"info\","
	    "\"msg\":\"Job succeeded\",\"runner\":\"xYzZy123\",\"time\":\"%s\"}\n", t0, t1);

	/* A field named as one of the line's keys does not replace it. */
	clock_rfc3339(clock_wall(), t0);
	log_kv(LOG_LEVEL_WARN, LOG_FIELDS(LOG_STR("msg", "x\"y"), LOG_STR("a", NULL)), "m");
	clock_rfc3339(clock_wall(), t1);
	assert_timed_line(take(),
	    "{\"a\":\"\",\"fields.msg\":\"x\\\"y\",\"level\":\"warning\",\"msg\":\"m\","
	    "\"time\":\"%s\"}\n", t0, t1);

	/* No fields: the line as before. */
	clock_rfc3339(clock_wall(), t0);
	log_kv(LOG_LEVEL_ERROR, NULL, "plain");
	clock_rfc3339(clock_wall(), t1);
	assert_timed_line(take(), "{\"level\":\"error\",\"msg\":\"plain\",\"time\":\"%s\"}\n",
	    t0, t1);
}

static void
test_fields_text(void **state)
{
	char	t0[32], t1[32];

	(void)state;
	log_set_format(LOG_FORMAT_TEXT);
	clock_rfc3339(clock_wall(), t0);
	log_kv(LOG_LEVEL_WARN, LOG_FIELDS(LOG_RUNNER("xYzZy123"), LOG_JOB(7),
	    LOG_STR("status", "403 Forbidden"), LOG_STR("repo_url", "https://h/g/p.git"),
	    LOG_STR("empty", "")), "Checking for jobs... failed");
	clock_rfc3339(clock_wall(), t1);
	assert_timed_line(take(),
	    "time=\"%s\" level=warning msg=\"Checking for jobs... failed\" empty= job=7 "
	    "repo_url=\"https://h/g/p.git\" runner=xYzZy123 status=\"403 Forbidden\"\n", t0, t1);
}

/*
 * The runner format keeps this runner's lines ("job 42: ...", "runner a
 * (tok): ..."): fields with a head lead the message in their order; the
 * others follow it sorted, as gitlab-runner's runner format prints them.
 */
static void
test_fields_runner(void **state)
{
	(void)state;
	log_kv(LOG_LEVEL_INFO, LOG_FIELDS(LOG_JOB(42)), "finished, %s", "succeeded");
	log_kv(LOG_LEVEL_WARN, LOG_FIELDS(LOG_RUNNER_NAME("alpha"), LOG_RUNNER("xYzZy123"),
	    LOG_STR("status", "503"), LOG_SECS("duration_s", 0.25)), "checking for jobs... failed");
	log_kv(LOG_LEVEL_INFO, LOG_FIELDS(LOG_STR("k", "v")), "no head");
	assert_string_equal(take(),
	    "job 42: finished, succeeded\n"
	    "WARNING: runner alpha (xYzZy123): checking for jobs... failed  duration_s=0.25 "
	    "status=503\n"
	    "no head  k=v\n");
}

/* A secret in a field's value is masked as in the message, in every format. */
static void
test_fields_masked(void **state)
{
	(void)state;
	log_secret_add("glrt-SECRETVALUE");
	log_kv(LOG_LEVEL_INFO, LOG_FIELDS(LOG_STR("url", "https://x/glrt-SECRETVALUE"),
	    LOG_RUNNER_NAME("glrt-SECRETVALUE")), "m");
	assert_string_equal(take(), "runner [MASKED]: m  url=https://x/[MASKED]\n");
	log_set_format(LOG_FORMAT_JSON);
	log_kv(LOG_LEVEL_INFO, LOG_FIELDS(LOG_STR("url", "glrt-SECRETVALUE")), "m");
	assert_non_null(strstr(take(), "\"url\":\"[MASKED]\""));
	log_set_format(LOG_FORMAT_TEXT);
	log_kv(LOG_LEVEL_INFO, LOG_FIELDS(LOG_STR("url", "glrt-SECRETVALUE")), "m");
	assert_non_null(strstr(take(), " url=\"[MASKED]\"\n"));
}

/* A duration as Go's encoding/json writes a float64: shortest, no exponent in range. */
static void
test_fields_seconds(void **state)
{
	static const struct {
		double		 v;
		const char	*want;
	} cases[] = {
		{ 1.5, "1.5" }, { 0.1, "0.1" }, { 12.345678, "12.345678" }, { 3, "3" },
		{ 0.000001, "0.000001" }, { 0.00001234, "0.00001234" }, { 1e20, "100000000000000000000" },
		{ 1e21, "1e+21" }, { 1e-7, "1e-7" }, { 1.5e-10, "1.5e-10" }, { 0, "0" },
	};
	char want[128];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		log_kv(LOG_LEVEL_INFO, LOG_FIELDS(LOG_SECS("d", cases[i].v)), "m");
		snprintf(want, sizeof want, "m  d=%s\n", cases[i].want);
		assert_string_equal(take(), want);
	}
}

/*
 * --syslog: gitlab-runner's system logger hook gets info and above at the
 * severity of each, debug never; the line on stderr stays.
 */
static char	syslog_got[4096];
static char	syslog_ident[64];
static int	syslog_open;

void	__wrap_openlog(const char *ident, int option, int facility);
void	__wrap_closelog(void);
void	__wrap_syslog(int prio, const char *fmt, ...);

void
__wrap_openlog(const char *ident, int option, int facility)
{
	(void)option;
	(void)facility;
	snprintf(syslog_ident, sizeof syslog_ident, "%s", ident);
	syslog_open++;
}

void
__wrap_closelog(void)
{
	syslog_open--;
}

void
__wrap_syslog(int prio, const char *fmt, ...)
{
	size_t	len = strlen(syslog_got);
	va_list	ap;

	snprintf(syslog_got + len, sizeof syslog_got - len, "%d ", prio);
	len = strlen(syslog_got);
	va_start(ap, fmt);
	vsnprintf(syslog_got + len, sizeof syslog_got - len, fmt, ap);
	va_end(ap);
	len = strlen(syslog_got);
	snprintf(syslog_got + len, sizeof syslog_got - len, "|");
}

static void
test_syslog(void **state)
{
	(void)state;
	syslog_got[0] = '\0';
	log_set_syslog("gitlab-runner");
	assert_string_equal(syslog_ident, "gitlab-runner");
	assert_int_equal(syslog_open, 1);
	log_set_level(LOG_LEVEL_DEBUG);
	log_debug("d");
	log_info("i");
	log_warnx("w");
	log_error("e");
	log_kv(LOG_LEVEL_INFO, LOG_FIELDS(LOG_JOB(3)), "done");
	/* LOG_INFO 6, LOG_WARNING 4, LOG_ERR 3. */
	assert_string_equal(syslog_got, "6 i|4 WARNING: w|3 ERROR: e|6 job 3: done|");
	assert_string_equal(take(), "DEBUG: d\ni\nWARNING: w\nERROR: e\njob 3: done\n");
	log_set_syslog(NULL);
	assert_int_equal(syslog_open, 0);
	log_info("after");
	assert_string_equal(syslog_got, "6 i|4 WARNING: w|3 ERROR: e|6 job 3: done|");
	take();
}

static void
call_fatal(void)
{
	errno = EACCES;
	fatal("cannot %s", "go on");
}

static void
call_fatalx(void)
{
	errno = EACCES;
	fatalx("stop %d", 7);
}

static void
run_dying(void (*fn)(void), const char *want)
{
	pid_t	pid;
	int	status;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		fn();
		_exit(99);	/* not reached */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 1);
	assert_string_equal(take(), want);
}

static void
test_fatal(void **state)
{
	(void)state;
	run_dying(call_fatal, "FATAL: cannot go on: Permission denied\n");
	run_dying(call_fatalx, "FATAL: stop 7\n");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_runner_format, setup, teardown),
		cmocka_unit_test_setup_teardown(test_level_filter, setup, teardown),
		cmocka_unit_test_setup_teardown(test_errno_suffix, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counter, setup, teardown),
		cmocka_unit_test_setup_teardown(test_text_format, setup, teardown),
		cmocka_unit_test_setup_teardown(test_json_format, setup, teardown),
		cmocka_unit_test_setup_teardown(test_time_shape, setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_secret_masked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_secret_overlapping, setup, teardown),
		cmocka_unit_test_setup_teardown(test_secret_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_token, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parse_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_colour_on_tty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fatal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fields_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fields_text, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fields_runner, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fields_masked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fields_seconds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_syslog, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Unit tests for the TOML parser and value tree, for what the toml-test
 * suite (tests/integration/test_toml_suite.py) does not reach: hostile
 * sizes and depths, truncated input, encoding errors in every context,
 * exact error positions and messages, the table kinds and positions the
 * writer and the config loader rely on, and the mutators.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "lib/buf.h"
#include "lib/xmalloc.h"
#include "runner/toml.h"

/* A config.toml the way gitlab-runner writes it, plus the rarer syntax. */
static const char config_text[] =
    "# Source: a test\n"
    "concurrent = 4\n"
    "check_interval = 3 # seconds\n"
    "log_level = \"info\"\n"
    "listen_address = ':9252'\n"
    "\n"
    "[session_server]\n"
    "  session_timeout = 1800\n"
    "\n"
    "[[runners]]\n"
    "  name = \"first \\\"one\\\" \\u00e9\"\n"
    "  url = \"https://gitlab.example.com/\"\n"
    "  id = 0x1F\n"
    "  token = \"glrt-xxxxxxxxxxxxxxxxxxxx\"\n"
    "  token_obtained_at = 2023-06-03T21:05:13Z\n"
    "  token_expires_at = 0001-01-01T00:00:00Z\n"
    "  executor = \"docker\"\n"
    "  environment = [\"A=1\", \"B=2\",   # trailing comment\n"
    "    \"C=3\",\n"
    "  ]\n"
    "  pre_build_script = \"\"\"\n"
    "echo hello \\\n"
    "     world\n"
    "two \"\"quotes\"\"\"\n"
    "  [runners.custom_build_dir]\n"
    "  [runners.cache]\n"
    "    MaxUploadedArchiveSize = 0\n"
    "    [runners.cache.s3]\n"
    "      ServerAddress = 'minio:9000'\n"
    "      Insecure = true\n"
    "  [runners.docker]\n"
    "    image = \"alpine:3.19\"\n"
    "    shm_size = 1_000_000_000\n"
    "    cpus = 1.5\n"
    "    log_options = { max-size = \"10m\", \"max.file\" = 3, a.b = -inf }\n"
    "    volumes = [\"/cache\", [1, 2.0e3], {x = 1979-05-27}]\n"
    "    when = [07:32:00.999, 1979-05-27 07:32:00, 1979-05-27T00:32:00-07:00]\n"
    "    literal = '''\n"
    "C:\\path\\''\n"
    "'''\n"
    "\n"
    "[[runners]]\n"
    "  name = \"second\"\n"
    "  limit = -1\n"
    "  feature_flags.FF_USE_FASTZIP = true\n";

static struct toml_value *
parse_ok(const char *text, size_t len)
{
	struct toml_error	 err;
	struct toml_value	*root;

	root = toml_parse(text, len, &err);
	if (root == NULL)
		fail_msg("unexpected error %d:%d: %s", err.line, err.column,
		    err.msg);
	assert_int_equal(root->type, TOML_TABLE);
	return root;
}

static struct toml_value *
parse_str(const char *text)
{
	return parse_ok(text, strlen(text));
}

/* Fails unless text is rejected; line/column 0 means "any". */
static void
expect_error(const char *text, size_t len, int line, int column,
    const char *msg)
{
	struct toml_error	 err;
	struct toml_value	*root;

	root = toml_parse(text, len, &err);
	if (root != NULL) {
		toml_free(root);
		fail_msg("accepted: %.*s", (int)(len > 200 ? 200 : len), text);
	}
	assert_true(err.line >= 1);
	assert_true(err.column >= 1);
	assert_true(err.msg[0] != '\0');
	if (line != 0)
		assert_int_equal(err.line, line);
	if (column != 0)
		assert_int_equal(err.column, column);
	if (msg != NULL && strstr(err.msg, msg) == NULL)
		fail_msg("message \"%s\" lacks \"%s\"", err.msg, msg);
}

static void
expect_error_str(const char *text, const char *msg)
{
	expect_error(text, strlen(text), 0, 0, msg);
}

static char *
repeat(const char *head, const char *unit, size_t n, const char *tail,
    size_t *lenp)
{
	struct buf	b;
	size_t		i;

	buf_init(&b, BUF_UNLIMITED);
	buf_puts(&b, head);
	for (i = 0; i < n; i++)
		buf_puts(&b, unit);
	buf_puts(&b, tail);
	return buf_detach(&b, lenp);
}

static double
now(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
test_deep_nesting_is_an_error(void **state)
{
	char	*text;
	size_t	 len;

	(void)state;
	text = repeat("a = ", "[", 100000, "", &len);
	expect_error(text, len, 1, 0, "nesting too deep");
	free(text);

	text = repeat("a = ", "{b=", 100000, "", &len);
	expect_error(text, len, 1, 0, "nesting too deep");
	free(text);

	text = repeat("a", ".b", 100000, " = 1", &len);
	expect_error(text, len, 1, 0, "nesting too deep");
	free(text);

	text = repeat("[a", ".b", 100000, "]", &len);
	expect_error(text, len, 1, 0, "nesting too deep");
	free(text);

	/* Bare brackets and braces on their own never get that far. */
	text = repeat("", "[", 100000, "", &len);
	expect_error(text, len, 1, 0, NULL);
	free(text);
	text = repeat("", "{", 100000, "", &len);
	expect_error(text, len, 1, 1, "expected a key");
	free(text);
}

static void
test_nesting_limit_is_512(void **state)
{
	struct toml_value	*root, *v;
	char			*text, *close;
	size_t			 len, clen;
	int			 depth;

	(void)state;
	close = repeat("", "]", 512, "", &clen);
	text = repeat("a = ", "[", 512, close, &len);
	root = parse_ok(text, len);
	for (depth = 0, v = toml_get(root, "a"); v->u.array.len > 0; depth++)
		v = v->u.array.items[0];
	assert_int_equal(depth, 511);
	toml_free(root);
	free(text);
	free(close);

	close = repeat("", "]", 513, "", &clen);
	text = repeat("a = ", "[", 513, close, &len);
	expect_error(text, len, 1, 4 + 513, "nesting too deep");
	free(text);
	free(close);

	/* Headers count too: the limit is on the depth of the tree. */
	text = repeat("[t", ".t", 510, "]\na = [1]", &len);
	root = parse_ok(text, len);
	toml_free(root);
	free(text);
	text = repeat("[t", ".t", 510, "]\na = [[1]]", &len);
	expect_error(text, len, 2, 6, "nesting too deep");
	free(text);
}

static void
test_long_string_and_line(void **state)
{
	struct toml_value	*root, *v;
	char			*text;
	size_t			 len;
	double			 start;

	(void)state;
	text = repeat("s = \"", "x", 1 << 20, "\"\n", &len);
	root = parse_ok(text, len);
	v = toml_get(root, "s");
	assert_int_equal(v->type, TOML_STRING);
	assert_int_equal(v->u.s.len, 1 << 20);
	assert_int_equal(v->u.s.ptr[(1 << 20) - 1], 'x');
	assert_int_equal(v->u.s.ptr[1 << 20], '\0');
	toml_free(root);
	free(text);

	/* A 1 MiB line of values: columns must not be found by rescanning. */
	start = now();
	text = repeat("a = [", "7, ", 350000, "8]", &len);
	root = parse_ok(text, len);
	v = toml_get(root, "a");
	assert_int_equal(v->u.array.len, 350001);
	assert_int_equal(v->u.array.items[350000]->line, 1);
	assert_int_equal(v->u.array.items[350000]->column, 6 + 3 * 350000);
	assert_true(now() - start < 5.0);
	toml_free(root);
	free(text);

	/* An unterminated 1 MiB string is reported where it starts. */
	text = repeat("\n\ns = \"", "y", 1 << 20, "\n", &len);
	expect_error(text, len, 3, 5, "unterminated string");
	free(text);
}

static void
test_every_prefix_parses_or_fails(void **state)
{
	struct toml_value	*root;
	struct toml_error	 err;
	size_t			 len = sizeof config_text - 1, n;
	char			*copy;
	int			 parsed = 0;

	(void)state;
	/* The whole text is valid. */
	root = parse_ok(config_text, len);
	toml_free(root);
	for (n = 0; n <= len; n++) {
		/* An exact-size copy, so ASan sees any read past the end. */
		copy = xmalloc(n == 0 ? 1 : n);
		memcpy(copy, config_text, n);
		root = toml_parse(copy, n, &err);
		if (root != NULL) {
			parsed++;
			toml_free(root);
		} else {
			assert_true(err.line >= 1 && err.line <= 70);
			assert_true(err.column >= 1);
			assert_true(err.msg[0] != '\0');
		}
		free(copy);
	}
	/* Cutting at a line end gives a valid document most of the time. */
	assert_true(parsed > 50);
	assert_true(parsed < (int)len);
}

static void
test_invalid_utf8_everywhere(void **state)
{
	static const char *const	contexts[] = {
		"# c%s\n",
		"a = \"%s\"\n",
		"a = '%s'\n",
		"a = \"\"\"\n%s\"\"\"\n",
		"a = '''%s'''\n",
		"\"%s\" = 1\n",
		"'%s' = 1\n",
		"[\"%s\"]\n",
		"a = [\"%s\"]\n",
		"a = { \"%s\" = 1 }\n",
		"a = 1 # %s",
		"a%s = 1\n",
		"a = %s\n",
		"%s",
	};
	static const char *const	bad[] = {
		"\xff",			/* never valid */
		"\x80",			/* lone continuation byte */
		"\xc0\x80",		/* overlong NUL */
		"\xe0\x80\xaf",		/* overlong '/' */
		"\xed\xa0\x80",		/* surrogate U+D800 */
		"\xf4\x90\x80\x80",	/* U+110000 */
		"\xf8\x88\x80\x80\x80",	/* five bytes */
		"\xe2\x82",		/* truncated */
	};
	char	text[128];
	size_t	i, j;
	int	n;

	(void)state;
	for (i = 0; i < sizeof contexts / sizeof contexts[0]; i++) {
		for (j = 0; j < sizeof bad / sizeof bad[0]; j++) {
			n = snprintf(text, sizeof text, contexts[i], bad[j]);
			expect_error(text, (size_t)n, 0, 0, NULL);
		}
	}
	/* The same places take well-formed text up to U+10FFFF. */
	for (i = 0; i < 11; i++) {
		n = snprintf(text, sizeof text, contexts[i],
		    "\xc3\xa9\xe2\x82\xac\xf4\x8f\xbf\xbf");
		toml_free(parse_ok(text, (size_t)n));
	}
	/* At the end of input, inside a comment. */
	expect_error("a = 1 # \xe2\x82", 10, 1, 9, "invalid UTF-8");
}

static void
test_nul_in_keys_and_strings(void **state)
{
	struct toml_value	*root, *v;
	static const char	 nul_in_input[] = "a = \"x\0y\"\n";

	(void)state;
	root = parse_str("\"\\u0000\" = \"a\\u0000b\"\n\"\" = 1\n"
	    "\"\\u0000x\" = 2\n");
	v = toml_getn(root, "\0", 1);
	assert_non_null(v);
	assert_int_equal(v->type, TOML_STRING);
	assert_int_equal(v->u.s.len, 3);
	assert_memory_equal(v->u.s.ptr, "a\0b", 4);
	assert_int_equal(toml_get(root, "")->u.i, 1);
	assert_int_equal(toml_getn(root, "\0x", 2)->u.i, 2);
	assert_null(toml_getn(root, "\0y", 2));
	assert_null(toml_get(root, "x"));
	toml_free(root);

	/* A raw NUL byte is an error wherever it stands. */
	expect_error(nul_in_input, sizeof nul_in_input - 1, 1, 7,
	    "control character U+0000");
	expect_error("a = 1\0", 6, 1, 6, NULL);
	expect_error("\0", 1, 1, 1, NULL);
	expect_error("# \0", 3, 1, 3, "control character U+0000");
}

static void
test_bom(void **state)
{
	struct toml_value	*root, *v;

	(void)state;
	root = parse_str("\xef\xbb\xbf" "a = 1\nb = 2\n");
	v = toml_get(root, "a");
	assert_int_equal(v->u.i, 1);
	assert_int_equal(v->line, 1);
	assert_int_equal(v->column, 5);
	toml_free(root);
	toml_free(parse_str("\xef\xbb\xbf"));

	expect_error_str("\xef\xbb\xbf\xef\xbb\xbf" "a = 1\n", NULL);
	expect_error_str("a = \xef\xbb\xbf" "1\n", NULL);
	expect_error_str("a = 1\n\xef\xbb\xbf" "b = 1\n", NULL);
	expect_error_str(" \xef\xbb\xbf" "a = 1\n", NULL);
}

static void
test_integer_limits(void **state)
{
	struct toml_value	*root;

	(void)state;
	root = parse_str("max = 9223372036854775807\n"
	    "min = -9223372036854775808\n"
	    "hex = 0x7FFF_FFFF_ffff_ffff\n"
	    "oct = 0o777777777777777777777\n"
	    "bin = 0b111111111111111111111111111111111111111111111111111111111111111\n"
	    "zero = -0\n"
	    "lead = 0x000001\n");
	assert_true(toml_get(root, "max")->u.i == INT64_MAX);
	assert_true(toml_get(root, "min")->u.i == INT64_MIN);
	assert_true(toml_get(root, "hex")->u.i == INT64_MAX);
	assert_true(toml_get(root, "oct")->u.i == INT64_MAX);
	assert_true(toml_get(root, "bin")->u.i == INT64_MAX);
	assert_true(toml_get(root, "zero")->u.i == 0);
	assert_true(toml_get(root, "lead")->u.i == 1);
	toml_free(root);

	expect_error("a = 9223372036854775808", 23, 1, 5,
	    "integer out of range");
	expect_error_str("a = -9223372036854775809", "integer out of range");
	expect_error_str("a = 0x8000000000000000", "integer out of range");
	expect_error_str("a = 0b1000000000000000000000000000000000000000000000000"
	    "000000000000000", "integer out of range");
	expect_error_str("a = 0o1000000000000000000000", "integer out of range");
	expect_error_str("a = 99999999999999999999999999", "integer out of range");
	expect_error_str("a = +0x1", "invalid number");
	expect_error_str("a = 0X1", "invalid number");
	expect_error_str("a = 1__0", "invalid number");
	expect_error_str("a = 10_", "invalid number");
	expect_error_str("a = 012", "leading zeros");
}

static void
test_floats(void **state)
{
	struct toml_value	*root;

	(void)state;
	root = parse_str("a = 1e1_0\nb = -0.0\nc = +inf\nd = -nan\n"
	    "e = 6.626e-34\nf = 0e0\ng = 1_000.000_1\n");
	assert_true(toml_get(root, "a")->u.f == 1e10);
	assert_true(toml_get(root, "b")->u.f == 0.0);
	assert_true(signbit(toml_get(root, "b")->u.f));
	assert_true(isinf(toml_get(root, "c")->u.f));
	assert_true(isnan(toml_get(root, "d")->u.f));
	assert_true(toml_get(root, "e")->u.f == 6.626e-34);
	assert_true(toml_get(root, "g")->u.f == 1000.0001);
	assert_int_equal(toml_get(root, "f")->type, TOML_FLOAT);
	toml_free(root);
	expect_error_str("a = 1.", "invalid number");
	expect_error_str("a = .1", "expected a value");
	expect_error_str("a = 1e", "invalid number");
	expect_error_str("a = 1._0", "invalid number");
	expect_error_str("a = 01.0", "leading zeros");
	expect_error_str("a = Inf", "expected a value");
}

static void
test_datetimes(void **state)
{
	struct toml_value	*root, *v;

	(void)state;
	root = parse_str("a = 0001-01-01T00:00:00Z\n"
	    "b = 1987-07-05t17:45:56.123456789123-07:30\n"
	    "c = 1979-05-27 07:32:00.5\n"
	    "d = 2000-02-29\n"
	    "e = 23:59:60.01\n"
	    "f = 2024-02-29 # a date then a comment\n"
	    "g = 1979-05-27T07:32:00+00:00\n");
	v = toml_get(root, "a");
	assert_int_equal(v->type, TOML_DATETIME);
	assert_int_equal(v->u.dt.year, 1);
	assert_int_equal(v->u.dt.month, 1);
	assert_int_equal(v->u.dt.day, 1);
	assert_true(v->u.dt.offset_z);
	assert_int_equal(v->u.dt.offset_minutes, 0);
	assert_int_equal(v->u.dt.frac_digits, 0);

	v = toml_get(root, "b");
	assert_int_equal(v->type, TOML_DATETIME);
	assert_int_equal(v->u.dt.nanosecond, 123456789);
	assert_int_equal(v->u.dt.frac_digits, 12);
	assert_int_equal(v->u.dt.offset_minutes, -(7 * 60 + 30));
	assert_false(v->u.dt.offset_z);

	v = toml_get(root, "c");
	assert_int_equal(v->type, TOML_DATETIME_LOCAL);
	assert_int_equal(v->u.dt.nanosecond, 500000000);
	assert_int_equal(v->u.dt.frac_digits, 1);
	assert_int_equal(v->u.dt.hour, 7);

	assert_int_equal(toml_get(root, "d")->type, TOML_DATE_LOCAL);
	v = toml_get(root, "e");
	assert_int_equal(v->type, TOML_TIME_LOCAL);
	assert_int_equal(v->u.dt.second, 60);
	assert_int_equal(v->u.dt.nanosecond, 10000000);
	assert_int_equal(toml_get(root, "f")->type, TOML_DATE_LOCAL);
	v = toml_get(root, "g");
	assert_false(v->u.dt.offset_z);
	assert_int_equal(v->u.dt.offset_minutes, 0);
	toml_free(root);

	expect_error("x = 2100-02-29", 14, 1, 5, "invalid date");
	expect_error_str("x = 2023-04-31", "invalid date");
	expect_error_str("x = 2023-13-01", "invalid date");
	expect_error_str("x = 12:30", "invalid time");
	expect_error_str("x = 1979-05-27T07:32", "invalid time");
	expect_error_str("x = 1979-05-27T07:32:00+24:00", "offset");
	expect_error_str("x = 07:32:00Z", "expected end of line");
	expect_error_str("x = 1979-05-27T07:32:00.", "invalid time");
}

static void
test_strings(void **state)
{
	struct toml_value	*root;

	(void)state;
	root = parse_str("a = \"\\b\\t\\n\\f\\r\\\"\\\\\\u00e9\\U0001F600\"\n"
	    "b = \"\"\"\nline\\\n   \n  next\"\"\"\n"
	    "c = \"\"\"x\"\"\"\"\"\n"
	    "d = '''\r\none\r\ntwo'''\n"
	    "e = 'C:\\no\\escape'\n"
	    "f = \"\"\"\\\r\n  crlf\"\"\"\n");
	assert_string_equal(toml_get(root, "a")->u.s.ptr,
	    "\b\t\n\f\r\"\\\xc3\xa9\xf0\x9f\x98\x80");
	assert_string_equal(toml_get(root, "b")->u.s.ptr, "linenext");
	assert_string_equal(toml_get(root, "c")->u.s.ptr, "x\"\"");
	assert_string_equal(toml_get(root, "d")->u.s.ptr, "one\ntwo");
	assert_string_equal(toml_get(root, "e")->u.s.ptr, "C:\\no\\escape");
	assert_string_equal(toml_get(root, "f")->u.s.ptr, "crlf");
	toml_free(root);

	expect_error("a = \"\\x41\"", 10, 1, 6, "invalid escape '\\x' in string");
	expect_error_str("a = \"\\uD800\"", "invalid Unicode code point");
	expect_error_str("a = \"\\U00110000\"", "invalid Unicode code point");
	expect_error_str("a = \"\\u12\"", "hex digits");
	expect_error_str("a = \"\\ \"", "invalid escape");
	expect_error_str("a = \"\"\"\\ x\n\"\"\"", "invalid escape");
	expect_error_str("a = \"\"\"x\"\"\"\"\"\"", "expected end of line");
	expect_error_str("a = \"x\ny\"", "unterminated string");
	expect_error_str("a = \"x\ry\"", "carriage return");
	expect_error_str("a = '''x\ry'''", "carriage return");
	expect_error_str("a = \"tab\tok\" # tab\tok too\nb = \"\x7f\"",
	    "control character U+007F");
	expect_error("a = '''\n\n\nno end", 16, 1, 5, "unterminated string");
}

static void
test_many_keys_is_not_quadratic(void **state)
{
	struct toml_value	*root, *t, *v;
	struct buf		 b;
	char			 key[32];
	double			 start;
	int			 i;

	(void)state;
	buf_init(&b, BUF_UNLIMITED);
	buf_puts(&b, "[t]\n");
	for (i = 0; i < 100000; i++)
		buf_printf(&b, "k%d = %d\n", i, i);
	for (i = 0; i < 20000; i++)
		buf_printf(&b, "[s.k%d]\n", i);
	start = now();
	root = parse_ok(b.ptr, b.len);
	assert_true(now() - start < 5.0);
	t = toml_get(root, "t");
	assert_int_equal(t->u.table.len, 100000);
	assert_non_null(t->u.table.index);
	for (i = 0; i < 100000; i += 997) {
		snprintf(key, sizeof key, "k%d", i);
		v = toml_get(t, key);
		assert_non_null(v);
		assert_int_equal(v->u.i, i);
		assert_int_equal(v->line, i + 2);
	}
	assert_int_equal(toml_get(root, "s")->u.table.len, 20000);
	toml_free(root);

	/* The same key a second time is found among them all. */
	buf_puts(&b, "[t]\n");
	expect_error(b.ptr, b.len, 100000 + 20000 + 2, 2,
	    "table \"t\" defined twice");
	buf_reset(&b);
	for (i = 0; i < 50000; i++)
		buf_printf(&b, "k%d = %d\n", i, i);
	buf_puts(&b, "k31337 = 1\n");
	expect_error(b.ptr, b.len, 50001, 1, "key \"k31337\" defined twice");
	buf_release(&b);
}

/* Documents that break one of TOML's rules about defining things once. */
static void
test_redefinition_rules(void **state)
{
	static const struct {
		const char	*text;
		const char	*msg;	/* NULL: valid */
	} cases[] = {
		{ "a = 1\na = 2", "key \"a\" defined twice" },
		{ "[a]\n[a]", "table \"a\" defined twice" },
		{ "[a.b]\n[a]\n[a]", "table \"a\" defined twice" },
		{ "[a.b]\n[a]\nc = 1", NULL },
		{ "[a]\nb = 1\n[a.b]", "key \"a.b\" already defined as integer" },
		{ "[a]\nb.c = 1\n[a.b]", "table \"a.b\" defined twice" },
		{ "[a]\nb.c = 1\n[a.b.d]", NULL },
		{ "a.b = 1\n[a]", "table \"a\" defined twice" },
		{ "a.b = 1\n[a.c]", NULL },
		{ "[a.b.c]\n[a]\nb.c.d = 1", "dotted keys cannot add" },
		{ "[a.b.c]\n[a]\nb.d = 1", NULL },
		{ "[a.b.c]\n[a]\nb.d = 1\n[a.b]", "table \"a.b\" defined twice" },
		{ "a = {}\n[a]", "table \"a\" defined twice" },
		{ "a = {}\n[a.b]", "inline table \"a\" cannot be extended" },
		{ "a = {b = 1}\na.c = 2", "inline table \"a\" cannot be extended" },
		{ "a = {b = {c = 1}, b.d = 2}", "inline table \"b\"" },
		{ "a = {b.c = 1, b.d = 2}", NULL },
		{ "a = {b = 1, b = 2}", "key \"b\" defined twice" },
		{ "a = []\n[[a]]", "static array \"a\" cannot be extended" },
		{ "a = [{}]\n[a.b]", "static array \"a\" cannot be extended" },
		{ "[[a]]\n[a]", "key \"a\" already defined as array of tables" },
		{ "[a]\n[[a]]", "already defined as table" },
		{ "[[a.b]]\n[[a]]", "already defined as table" },
		{ "[[a.b]]\n[a]\nc = 1", NULL },
		{ "[[a]]\nb = 1\n[a.c]\n[[a]]\nb = 2\n[a.c]", NULL },
		{ "[[a]]\n[a.c]\n[a.c]", "table \"a.c\" defined twice" },
		{ "[[a]]\nb.c = 1\n[a.b]", "table \"a.b\" defined twice" },
		{ "[[t.a]]\n[t]\na.b = 1", "key \"a\" already defined as array of tables" },
		{ "a = [{}]\na.b = 1", "key \"a\" already defined as array" },
		{ "a = 1\n[a.b]", "key \"a\" already defined as integer" },
		{ "a = 1\na.b = 2", "key \"a\" already defined as integer" },
		{ "\"a\" = 1\n'a' = 2", "key \"a\" defined twice" },
		{ "a.\"b.c\" = 1\na.b.c = 2", NULL },
	};
	struct toml_value	*root;
	size_t			 i;

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (cases[i].msg == NULL) {
			root = parse_str(cases[i].text);
			toml_free(root);
		} else
			expect_error_str(cases[i].text, cases[i].msg);
	}
}

static void
test_error_positions_and_messages(void **state)
{
	struct toml_error	 err;
	char			*text;
	size_t			 len;

	(void)state;
	expect_error("concurrent 4", 12, 1, 12,
	    "expected '=' after key \"concurrent\"");
	assert_null(toml_parse("log_level = \"info\"\nconcurrent 4\n", 32,
	    &err));
	assert_int_equal(err.line, 2);
	assert_int_equal(err.column, 12);
	assert_string_equal(err.msg, "expected '=' after key \"concurrent\"");

	/* Columns count characters: é and € are one each. */
	expect_error("k = \"\xc3\xa9\xe2\x82\xac\" x", 13, 1, 10,
	    "expected end of line after value");
	expect_error("a = 1\r\nb = 2\r\nc = \r\n", 20, 3, 5, "expected a value");
	expect_error("a = 1\rb = 2", 11, 1, 6, "carriage return");
	expect_error("[a]\nb = 1\n[a]\n", 14, 3, 2, "table \"a\" defined twice");
	expect_error("x = [1,\n2,\n", 11, 1, 5, "unterminated array");
	expect_error("id = id", 7, 1, 6, "expected a value");
	expect_error("[a b]", 5, 1, 4, "expected ']' after table name \"a\"");
	expect_error("\"q\\\"\\u0001\" 1", 13, 1, 13,
	    "expected '=' after key \"q\\\"\\u0001\"");
	/* Long keys are cut short in messages, at a character boundary. */
	text = repeat("\"", "\xc3\xa9", 200, "\" x", &len);
	assert_null(toml_parse(text, len, &err));
	free(text);
	assert_int_equal(err.column, 204);
	assert_non_null(strstr(err.msg, "\xc3\xa9...\""));
	assert_true(strlen(err.msg) < 130);
}

static void
test_positions_and_kinds(void **state)
{
	struct toml_value	*root, *r, *v, *t;

	(void)state;
	root = parse_ok(config_text, sizeof config_text - 1);
	assert_int_equal(root->u.table.kind, TOML_TABLE_HEADER);

	v = toml_get(root, "concurrent");
	assert_int_equal(v->line, 2);
	assert_int_equal(v->column, 14);

	r = toml_get(root, "runners");
	assert_int_equal(r->type, TOML_ARRAY);
	assert_true(r->u.array.of_tables);
	assert_int_equal(r->u.array.len, 2);
	assert_int_equal(r->line, 10);
	assert_int_equal(r->u.array.items[0]->line, 10);
	assert_int_equal(r->u.array.items[0]->column, 1);
	assert_int_equal(r->u.array.items[1]->line, 42);
	assert_int_equal(r->u.array.items[0]->u.table.kind, TOML_TABLE_HEADER);

	t = toml_get(r->u.array.items[0], "cache");
	assert_int_equal(t->u.table.kind, TOML_TABLE_HEADER);
	assert_int_equal(t->line, 26);
	assert_int_equal(t->column, 3);
	t = toml_get(t, "s3");
	assert_int_equal(t->line, 28);
	assert_int_equal(t->column, 5);
	assert_int_equal(toml_get(t, "Insecure")->type, TOML_BOOL);

	t = toml_get(toml_get(r->u.array.items[0], "docker"), "log_options");
	assert_int_equal(t->u.table.kind, TOML_TABLE_INLINE);
	assert_int_equal(toml_get(t, "max.file")->u.i, 3);
	assert_int_equal(toml_get(t, "a")->u.table.kind, TOML_TABLE_DOTTED);
	v = toml_get(toml_get(r->u.array.items[0], "docker"), "volumes");
	assert_false(v->u.array.of_tables);
	assert_int_equal(v->u.array.items[1]->type, TOML_ARRAY);
	assert_int_equal(v->u.array.items[2]->type, TOML_TABLE);

	v = toml_get(r->u.array.items[0], "pre_build_script");
	assert_string_equal(v->u.s.ptr, "echo hello world\ntwo \"\"quotes");
	assert_int_equal(v->line, 21);
	v = toml_get(toml_get(r->u.array.items[0], "docker"), "literal");
	assert_string_equal(v->u.s.ptr, "C:\\path\\''\n");
	v = toml_get(r->u.array.items[0], "name");
	assert_string_equal(v->u.s.ptr, "first \"one\" \xc3\xa9");

	t = toml_get(r->u.array.items[1], "feature_flags");
	assert_int_equal(t->u.table.kind, TOML_TABLE_DOTTED);
	assert_int_equal(t->line, 45);
	assert_int_equal(t->column, 3);
	toml_free(root);

	/* Implicit until a header defines it; then the header's position. */
	root = parse_str("[a.b]\n\n  [a]\n");
	t = toml_get(root, "a");
	assert_int_equal(t->u.table.kind, TOML_TABLE_HEADER);
	assert_int_equal(t->line, 3);
	assert_int_equal(t->column, 3);
	toml_free(root);
	root = parse_str("[a.b]\n");
	assert_int_equal(toml_get(root, "a")->u.table.kind, TOML_TABLE_IMPLICIT);
	toml_free(root);
	root = parse_str("[a.b.c]\n[a]\nb.x = 1\n");
	assert_int_equal(toml_get(toml_get(root, "a"), "b")->u.table.kind,
	    TOML_TABLE_DOTTED);
	toml_free(root);
}

static void
test_table_mutators(void **state)
{
	struct toml_value	*t, *a;
	char			 key[16];
	int			 i;

	(void)state;
	t = toml_new_table(TOML_TABLE_HEADER);
	toml_table_set(t, "a", 1, toml_new_integer(1));
	toml_table_set(t, "b", 1, toml_new_string("two", 3));
	toml_table_set(t, "c", 1, toml_new_bool(true));
	assert_int_equal(t->u.table.len, 3);

	/* Replacing keeps the key where it was. */
	toml_table_set(t, "b", 1, toml_new_float(2.5));
	assert_int_equal(t->u.table.len, 3);
	assert_string_equal(t->u.table.items[1].key.ptr, "b");
	assert_true(t->u.table.items[1].value->u.f == 2.5);
	assert_int_equal(t->u.table.items[1].value->line, 0);

	assert_int_equal(toml_table_remove(t, "a", 1), 0);
	assert_int_equal(toml_table_remove(t, "a", 1), -1);
	assert_int_equal(t->u.table.len, 2);
	assert_string_equal(t->u.table.items[0].key.ptr, "b");
	assert_null(toml_get(t, "a"));

	/* Past the index threshold, set and remove keep lookups right. */
	for (i = 0; i < 100; i++) {
		snprintf(key, sizeof key, "k%d", i);
		toml_table_set(t, key, strlen(key), toml_new_integer(i));
	}
	assert_non_null(t->u.table.index);
	for (i = 0; i < 100; i += 2) {
		snprintf(key, sizeof key, "k%d", i);
		assert_int_equal(toml_table_remove(t, key, strlen(key)), 0);
	}
	for (i = 0; i < 100; i++) {
		snprintf(key, sizeof key, "k%d", i);
		if (i % 2 == 0)
			assert_null(toml_get(t, key));
		else
			assert_int_equal(toml_get(t, key)->u.i, i);
	}
	toml_table_set(t, "k51", 3, toml_new_integer(-51));
	assert_int_equal(toml_get(t, "k51")->u.i, -51);
	assert_int_equal(t->u.table.len, 52);
	toml_table_set(t, "\0z", 2, toml_new_integer(7));
	assert_int_equal(toml_getn(t, "\0z", 2)->u.i, 7);
	assert_null(toml_get(t, ""));
	for (i = 1; i < 100; i += 2) {
		snprintf(key, sizeof key, "k%d", i);
		assert_int_equal(toml_table_remove(t, key, strlen(key)), 0);
	}
	assert_int_equal(t->u.table.len, 3);
	assert_null(t->u.table.index);
	assert_true(toml_get(t, "b")->u.f == 2.5);
	assert_true(toml_get(t, "c")->u.b);

	/* Not a table: the value is still taken (and freed). */
	a = toml_new_array();
	toml_table_set(a, "x", 1, toml_new_integer(1));
	assert_null(toml_get(a, "x"));
	assert_int_equal(toml_table_remove(a, "x", 1), -1);
	toml_free(a);
	toml_free(t);
}

static void
test_array_mutators(void **state)
{
	struct toml_value	*a;
	int			 i;

	(void)state;
	a = toml_new_array();
	for (i = 0; i < 10; i++)
		toml_array_push(a, toml_new_integer(i));
	assert_int_equal(a->u.array.len, 10);
	toml_array_remove(a, 0);
	toml_array_remove(a, 8);
	toml_array_remove(a, 3);
	toml_array_remove(a, 100);
	assert_int_equal(a->u.array.len, 7);
	assert_int_equal(a->u.array.items[0]->u.i, 1);
	assert_int_equal(a->u.array.items[2]->u.i, 3);
	assert_int_equal(a->u.array.items[3]->u.i, 5);
	assert_int_equal(a->u.array.items[6]->u.i, 8);
	toml_array_push(a, toml_new_table(TOML_TABLE_INLINE));
	assert_int_equal(a->u.array.items[7]->type, TOML_TABLE);
	toml_free(a);
}

static void
test_clone_and_equal(void **state)
{
	struct toml_value	*root, *copy, *other, *r;
	struct toml_datetime	 dt;

	(void)state;
	root = parse_ok(config_text, sizeof config_text - 1);
	copy = toml_clone(root);
	assert_true(toml_equal(root, copy));
	assert_int_equal(toml_get(copy, "concurrent")->line, 2);
	r = toml_get(copy, "runners");
	assert_true(r->u.array.of_tables);

	/* A change anywhere deep down is seen. */
	toml_table_set(toml_get(r->u.array.items[1], "feature_flags"),
	    "FF_USE_FASTZIP", 14, toml_new_bool(false));
	assert_false(toml_equal(root, copy));
	toml_table_set(toml_get(r->u.array.items[1], "feature_flags"),
	    "FF_USE_FASTZIP", 14, toml_new_bool(true));
	assert_true(toml_equal(root, copy));
	toml_array_remove(toml_get(r->u.array.items[0], "environment"), 2);
	assert_false(toml_equal(root, copy));
	toml_free(copy);
	toml_free(root);

	/* Key order, kinds and positions do not matter; values do. */
	root = parse_str("a = 1\nb = {c = 2.0, d = nan}\n");
	other = parse_str("\n[b]\nd = -nan\nc = 2e0\n[x]\n");
	assert_false(toml_equal(root, other));
	toml_table_remove(other, "x", 1);
	toml_table_set(other, "a", 1, toml_new_integer(1));
	assert_true(toml_equal(root, other));
	toml_table_set(other, "a", 1, toml_new_float(1.0));
	assert_false(toml_equal(root, other));
	toml_free(other);
	toml_free(root);

	root = parse_str("z = -0.0\nt = 12:00:00.5\nd = 1979-05-27T07:32:00Z\n");
	other = parse_str("z = 0.0\nt = 12:00:00.500\nd = 1979-05-27 07:32:00+00:00\n");
	assert_true(toml_equal(root, other));
	toml_free(other);
	other = parse_str("z = 0.0\nt = 12:00:00.5\nd = 1979-05-27T08:32:00+01:00\n");
	assert_false(toml_equal(root, other));
	toml_free(other);
	toml_free(root);

	memset(&dt, 0, sizeof dt);
	dt.hour = 1;
	root = toml_new_datetime(TOML_TIME_LOCAL, &dt);
	other = toml_new_datetime(TOML_DATETIME_LOCAL, &dt);
	assert_false(toml_equal(root, other));
	assert_null(toml_new_datetime(TOML_STRING, &dt));
	toml_free(other);
	other = toml_clone(root);
	assert_true(toml_equal(root, other));
	toml_free(other);
	toml_free(root);

	root = toml_new_float(NAN);
	other = toml_new_float(-NAN);
	assert_true(toml_equal(root, other));
	toml_free(other);
	other = toml_new_float(0.0);
	assert_false(toml_equal(root, other));
	assert_false(toml_equal(other, root));
	toml_free(other);
	toml_free(root);
	assert_true(toml_equal(NULL, NULL));
	root = toml_new_string("a\0b", 3);
	other = toml_new_string("a\0c", 3);
	assert_false(toml_equal(root, other));
	assert_false(toml_equal(root, NULL));
	toml_free(other);
	toml_free(root);
}

static void
test_type_names(void **state)
{
	(void)state;
	assert_string_equal(toml_type_name(TOML_STRING), "string");
	assert_string_equal(toml_type_name(TOML_INTEGER), "integer");
	assert_string_equal(toml_type_name(TOML_FLOAT), "float");
	assert_string_equal(toml_type_name(TOML_BOOL), "bool");
	assert_string_equal(toml_type_name(TOML_DATETIME), "datetime");
	assert_string_equal(toml_type_name(TOML_DATETIME_LOCAL),
	    "datetime-local");
	assert_string_equal(toml_type_name(TOML_DATE_LOCAL), "date-local");
	assert_string_equal(toml_type_name(TOML_TIME_LOCAL), "time-local");
	assert_string_equal(toml_type_name(TOML_ARRAY), "array");
	assert_string_equal(toml_type_name(TOML_TABLE), "table");
}

static void
test_odd_but_valid(void **state)
{
	struct toml_value	*root;

	(void)state;
	toml_free(parse_ok("", 0));
	toml_free(parse_ok(NULL, 0));
	toml_free(parse_str(" \t\n\r\n# only a comment"));
	root = parse_str("a = [\n  1, # one\n  # nothing\n  2,\n]\n"
	    "\"\" = 'empty key'\n1.2 = 'dotted digits'\n"
	    "b = {}\nc=[]\n[ x . \"y z\" . 'w' ]\n[[ q ]]\n");
	assert_int_equal(toml_get(root, "a")->u.array.len, 2);
	assert_string_equal(toml_get(root, "")->u.s.ptr, "empty key");
	assert_string_equal(toml_get(toml_get(root, "1"), "2")->u.s.ptr,
	    "dotted digits");
	assert_non_null(toml_get(toml_get(toml_get(root, "x"), "y z"), "w"));
	assert_true(toml_get(root, "q")->u.array.of_tables);
	toml_free(root);
	assert_null(toml_get(NULL, "a"));
	assert_null(toml_getn(NULL, "a", 1));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_deep_nesting_is_an_error),
		cmocka_unit_test(test_nesting_limit_is_512),
		cmocka_unit_test(test_long_string_and_line),
		cmocka_unit_test(test_every_prefix_parses_or_fails),
		cmocka_unit_test(test_invalid_utf8_everywhere),
		cmocka_unit_test(test_nul_in_keys_and_strings),
		cmocka_unit_test(test_bom),
		cmocka_unit_test(test_integer_limits),
		cmocka_unit_test(test_floats),
		cmocka_unit_test(test_datetimes),
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_many_keys_is_not_quadratic),
		cmocka_unit_test(test_redefinition_rules),
		cmocka_unit_test(test_error_positions_and_messages),
		cmocka_unit_test(test_positions_and_kinds),
		cmocka_unit_test(test_table_mutators),
		cmocka_unit_test(test_array_mutators),
		cmocka_unit_test(test_clone_and_equal),
		cmocka_unit_test(test_type_names),
		cmocka_unit_test(test_odd_but_valid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

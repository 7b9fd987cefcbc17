/* Go duration strings, both ways (lib/duration.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "lib/duration.h"

static int64_t
parse_ok(const char *s)
{
	int64_t ns = -12345;

	assert_int_equal(duration_parse(s, &ns), 0);
	return ns;
}

static void
test_parse_units(void **state)
{
	(void)state;
	assert_true(parse_ok("0") == 0);
	assert_true(parse_ok("15m") == 15LL * 60 * 1000000000);
	assert_true(parse_ok("15m0s") == 15LL * 60 * 1000000000);
	assert_true(parse_ok("1h30m") == 90LL * 60 * 1000000000);
	assert_true(parse_ok("300ms") == 300LL * 1000000);
	assert_true(parse_ok("1.5h") == 90LL * 60 * 1000000000);
	assert_true(parse_ok("2us") == 2000);
	assert_true(parse_ok("2\xc2\xb5s") == 2000);
	assert_true(parse_ok("7ns") == 7);
	assert_true(parse_ok("-1m") == -60LL * 1000000000);
	assert_true(parse_ok("+3s") == 3LL * 1000000000);
	assert_true(parse_ok(".5s") == 500000000);
	assert_true(parse_ok("1h2m3s4ms5us6ns") ==
	    3723LL * 1000000000 + 4000000 + 5000 + 6);
}

static void
test_parse_rejects(void **state)
{
	int64_t ns;

	(void)state;
	assert_int_equal(duration_parse("", &ns), -1);
	assert_int_equal(duration_parse("15", &ns), -1);	/* no unit */
	assert_int_equal(duration_parse("m", &ns), -1);
	assert_int_equal(duration_parse("1x", &ns), -1);
	assert_int_equal(duration_parse("1h ", &ns), -1);
	assert_int_equal(duration_parse("-", &ns), -1);
	assert_int_equal(duration_parse(".s", &ns), -1);
	assert_int_equal(duration_parse("3000000h", &ns), -1);	/* > int64 ns */
	assert_int_equal(duration_parse(NULL, &ns), -1);
}

static void
test_format_like_go(void **state)
{
	char out[64];

	(void)state;
	duration_format(0, out, sizeof(out));
	assert_string_equal(out, "0s");
	duration_format(15LL * 60 * 1000000000, out, sizeof(out));
	assert_string_equal(out, "15m0s");
	duration_format(3600LL * 1000000000, out, sizeof(out));
	assert_string_equal(out, "1h0m0s");
	duration_format(5400LL * 1000000000 + 500000000, out, sizeof(out));
	assert_string_equal(out, "1h30m0.5s");
	duration_format(1500000, out, sizeof(out));
	assert_string_equal(out, "1.5ms");
	duration_format(999, out, sizeof(out));
	assert_string_equal(out, "999ns");
	duration_format(-2LL * 1000000000, out, sizeof(out));
	assert_string_equal(out, "-2s");
}

static void
test_format_parses_back(void **state)
{
	static const int64_t values[] = { 1, 999, 1000, 1500000, 1000000000,
	    61LL * 1000000000 + 1, 3600LL * 1000000000 * 24 * 365, INT64_MAX };
	char out[64];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		duration_format(values[i], out, sizeof(out));
		assert_true(parse_ok(out) == values[i]);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_units),
		cmocka_unit_test(test_parse_rejects),
		cmocka_unit_test(test_format_like_go),
		cmocka_unit_test(test_format_parses_back),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

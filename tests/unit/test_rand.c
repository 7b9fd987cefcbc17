/*
 * Unit tests for the random helpers and the clock.  Randomness is checked
 * for shape (length, alphabet, every bit moving), not for quality.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "lib/clock.h"
#include "lib/rand.h"

static void
test_rand_hex_shape(void **state)
{
	char	out[80];
	size_t	n, i;

	(void)state;
	for (n = 0; n < 70; n++) {
		memset(out, '#', sizeof out);
		rand_hex(out, n);
		assert_int_equal(strlen(out), n);
		for (i = 0; i < n; i++)
			assert_non_null(strchr("0123456789abcdef", out[i]));
		/* Nothing written past the NUL. */
		assert_int_equal(out[n + 1], '#');
	}
}

static void
test_rand_hex_differs(void **state)
{
	char	a[33], b[33];

	(void)state;
	rand_hex(a, 32);
	rand_hex(b, 32);
	assert_string_not_equal(a, b);
}

static void
test_rand_hex_uses_all_digits(void **state)
{
	char	out[4097];
	size_t	i;
	int	seen[16] = { 0 };

	(void)state;
	rand_hex(out, 4096);
	for (i = 0; i < 4096; i++)
		seen[out[i] <= '9' ? out[i] - '0' : out[i] - 'a' + 10]++;
	for (i = 0; i < 16; i++)
		assert_true(seen[i] > 100);	/* expected 256 each */
}

static void
test_rand_u32_bits(void **state)
{
	uint32_t	ones = 0, zeros = 0, v, prev;
	int		i, same = 0;

	(void)state;
	prev = rand_u32();
	for (i = 0; i < 1000; i++) {
		v = rand_u32();
		ones |= v;
		zeros |= ~v;
		if (v == prev)
			same++;
		prev = v;
	}
	assert_int_equal(ones, UINT32_MAX);
	assert_int_equal(zeros, UINT32_MAX);
	assert_true(same < 2);
}

static void
test_clock_rfc3339(void **state)
{
	char	out[32];

	(void)state;
	clock_rfc3339(0, out);
	assert_string_equal(out, "1970-01-01T00:00:00Z");
	clock_rfc3339(1796033211, out);
	assert_string_equal(out, "2026-11-30T10:06:51Z");
	clock_rfc3339(951868799, out);
	assert_string_equal(out, "2000-02-29T23:59:59Z");
}

static void
test_clock_mono(void **state)
{
	struct timespec	ts = { 0, 20 * 1000 * 1000 };
	uint64_t	ns0, ns1, ms0, ms1;

	(void)state;
	ns0 = clock_mono_ns();
	ms0 = clock_mono_ms();
	assert_true(ms0 >= ns0 / 1000000);
	assert_true(ms0 - ns0 / 1000000 < 1000);
	nanosleep(&ts, NULL);
	ns1 = clock_mono_ns();
	ms1 = clock_mono_ms();
	assert_true(ns1 - ns0 >= 20 * 1000 * 1000);
	assert_true(ms1 - ms0 >= 19);
	assert_true(ns1 - ns0 < 10ull * 1000 * 1000 * 1000);
}

static void
test_clock_wall(void **state)
{
	time_t	a, w, b;

	(void)state;
	a = time(NULL);
	w = clock_wall();
	b = time(NULL);
	assert_true(a <= w && w <= b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rand_hex_shape),
		cmocka_unit_test(test_rand_hex_differs),
		cmocka_unit_test(test_rand_hex_uses_all_digits),
		cmocka_unit_test(test_rand_u32_bits),
		cmocka_unit_test(test_clock_rfc3339),
		cmocka_unit_test(test_clock_mono),
		cmocka_unit_test(test_clock_wall),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

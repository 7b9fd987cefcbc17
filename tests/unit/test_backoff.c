/*
 * Unit tests for backoff_delay().  The jitter is pinned at both ends with
 * rnd = 0 and rnd = UINT32_MAX, and the attempt count is pushed far past
 * the point where min * 2^n overflows 64 bits.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "lib/backoff.h"
#include "lib/clock.h"

/* The delay must lie in [base / 2, base]. */
static void
check_delay(uint64_t d, uint64_t min, uint64_t base)
{
	uint64_t	lo = base / 2;

	(void)min;
	if (d < lo || d > base)
		fail_msg("delay %llu outside [%llu, %llu]",
		    (unsigned long long)d, (unsigned long long)lo,
		    (unsigned long long)base);
}

static void
test_first_delay(void **state)
{
	(void)state;
	/* [min / 2, min]: the first retry is jittered too. */
	assert_int_equal(backoff_delay(1000, 60000, 0, 0), 500);
	assert_int_equal(backoff_delay(1000, 60000, 0, 1), 501);
	assert_int_equal(backoff_delay(1000, 60000, 0, 500), 1000);
	assert_int_equal(backoff_delay(1000, 60000, 0, 501), 500);
	assert_int_equal(backoff_delay(1000, 60000, 0, UINT32_MAX), 506);
}

static void
test_doubling(void **state)
{
	uint64_t	base = 1000;
	unsigned	n;

	(void)state;
	for (n = 1; n <= 5; n++) {
		base *= 2;
		/* rnd = 0 gives the bottom of the range, base / 2 ... */
		assert_int_equal(backoff_delay(1000, 1000000, n, 0), base / 2);
		/* ... and rnd = base - base / 2 the top, base itself. */
		assert_int_equal(backoff_delay(1000, 1000000, n,
		    (uint32_t)(base - base / 2)), base);
	}
	assert_int_equal(backoff_delay(1000, 1000000, 1, 1000), 2000);
	assert_int_equal(backoff_delay(1000, 1000000, 1, 1001), 1000);
	assert_int_equal(backoff_delay(1000, 1000000, 3, 123), 4123);
}

static void
test_rnd_uint32_max(void **state)
{
	(void)state;
	/* 1000 + UINT32_MAX % 1001 */
	assert_int_equal(backoff_delay(1000, 60000, 1, UINT32_MAX), 1619);
	/* capped: base 60000, 30000 + UINT32_MAX % 30001 */
	assert_int_equal(backoff_delay(1000, 60000, 20, UINT32_MAX), 54135);
}

static void
test_cap_at_max(void **state)
{
	unsigned	n;

	(void)state;
	/* 1000 * 2^6 = 64000 > 60000: capped from attempt 6 on. */
	assert_int_equal(backoff_delay(1000, 60000, 5, 16000), 32000);
	for (n = 6; n < 100; n++) {
		assert_int_equal(backoff_delay(1000, 60000, n, 0), 30000);
		assert_int_equal(backoff_delay(1000, 60000, n, 30000), 60000);
		assert_true(backoff_delay(1000, 60000, n, UINT32_MAX) <= 60000);
	}
	/* A max that is not a power-of-two multiple of min. */
	assert_int_equal(backoff_delay(3, 10, 2, 5), 10);
	assert_int_equal(backoff_delay(3, 10, 2, 0), 5);
}

static void
test_huge_attempts(void **state)
{
	(void)state;
	/* No shift by >= 64 and no wrapped product: the cap holds. */
	assert_int_equal(backoff_delay(1000, 60000, 64, 0), 30000);
	assert_int_equal(backoff_delay(1000, 60000, 65, 0), 30000);
	assert_int_equal(backoff_delay(1000, 60000, UINT_MAX, 0), 30000);
	assert_int_equal(backoff_delay(1000, 60000, UINT_MAX, 30000), 60000);

	/* With no effective cap the base saturates at UINT64_MAX. */
	assert_int_equal(backoff_delay(1, UINT64_MAX, 63, 0),
	    (uint64_t)1 << 62);
	assert_int_equal(backoff_delay(1, UINT64_MAX, 64, 0), UINT64_MAX / 2);
	assert_int_equal(backoff_delay(3, UINT64_MAX, 1000, 0), UINT64_MAX / 2);
	assert_int_equal(backoff_delay(3, UINT64_MAX, UINT_MAX, 7),
	    UINT64_MAX / 2 + 7);
	assert_int_equal(backoff_delay(UINT64_MAX, UINT64_MAX, UINT_MAX, 7),
	    UINT64_MAX / 2 + 7);
}

static void
test_degenerate(void **state)
{
	uint64_t	t0, sum = 0;
	unsigned	i;

	(void)state;
	/* min 0 stays 0 and does not spin through 4 billion doublings. */
	assert_int_equal(backoff_delay(0, 60000, 0, 12345), 0);
	assert_int_equal(backoff_delay(0, 60000, UINT_MAX, 12345), 0);
	/* ... not even once per call: a thousand calls take no time. */
	t0 = clock_mono_ms();
	for (i = 0; i < 1000; i++)
		sum += backoff_delay(0, UINT64_MAX, UINT_MAX - i, (uint32_t)i);
	assert_int_equal(sum, 0);
	assert_true(clock_mono_ms() - t0 < 2000);
	/* min == max: about that delay, [max / 2, max]. */
	assert_int_equal(backoff_delay(500, 500, 0, 0), 250);
	assert_int_equal(backoff_delay(500, 500, 9, 250), 500);
	/* max < min: taken as max == min. */
	assert_int_equal(backoff_delay(500, 100, 3, 0), 250);
	assert_int_equal(backoff_delay(500, 100, 3, 250), 500);
}

static void
test_jitter_bounds(void **state)
{
	static const uint32_t	rnds[] = {
		0, 1, 2, 499, 500, 501, 999, 1000, 1001, 65535, 65536,
		0x7fffffff, 0x80000000, UINT32_MAX - 1, UINT32_MAX,
	};
	static const uint64_t	mins[] = { 1, 2, 3, 100, 1000, 7777 };
	uint64_t		base, max = 3600000;
	size_t			i, j;
	unsigned		n;
	bool			seen_lo, seen_hi;

	(void)state;
	for (i = 0; i < sizeof mins / sizeof mins[0]; i++) {
		base = mins[i];
		for (n = 0; n < 40; n++) {
			for (j = 0; j < sizeof rnds / sizeof rnds[0]; j++)
				check_delay(backoff_delay(mins[i], max, n,
				    rnds[j]), mins[i], base);
			/* Both ends of the range are reachable. */
			seen_lo = backoff_delay(mins[i], max, n, 0) == base / 2;
			seen_hi = backoff_delay(mins[i], max, n,
			    (uint32_t)(base - base / 2)) == base;
			assert_true(seen_lo);
			assert_true(seen_hi);
			base = base > max / 2 ? max : base * 2;
		}
	}
}

static void
test_struct(void **state)
{
	struct backoff	b;

	(void)state;
	backoff_init(&b, 100, 1000);
	assert_int_equal(b.attempt, 0);
	assert_int_equal(backoff_next(&b, 50), 100);	/* [50,100] */
	assert_int_equal(b.attempt, 1);
	assert_int_equal(backoff_next(&b, 100), 200);
	assert_int_equal(backoff_next(&b, 0), 200);	/* base 400 */
	assert_int_equal(backoff_next(&b, 400), 800);
	assert_int_equal(backoff_next(&b, 500), 1000);	/* capped */
	assert_int_equal(b.attempt, 5);
	backoff_reset(&b);
	assert_int_equal(b.attempt, 0);
	assert_int_equal(backoff_next(&b, 0), 50);
	assert_int_equal(b.min_ms, 100);
	assert_int_equal(b.max_ms, 1000);

	/* The counter saturates instead of wrapping back to attempt 0. */
	b.attempt = UINT_MAX;
	assert_int_equal(backoff_next(&b, 0), 500);
	assert_int_equal(b.attempt, UINT_MAX);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_delay),
		cmocka_unit_test(test_doubling),
		cmocka_unit_test(test_rnd_uint32_max),
		cmocka_unit_test(test_cap_at_max),
		cmocka_unit_test(test_huge_attempts),
		cmocka_unit_test(test_degenerate),
		cmocka_unit_test(test_jitter_bounds),
		cmocka_unit_test(test_struct),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * crc32_update() against zlib's crc32(): every length around the folding
 * thresholds, every alignment, chained calls, and large buffers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "lib/crc32.h"
#include "tests/seeded_rand.h"

static uint32_t
zcrc(uint32_t crc, const unsigned char *p, size_t n)
{
	return (uint32_t)crc32(crc, p, (uInt)n);
}

static void
test_start(void **state)
{
	(void)state;
	assert_int_equal(crc32_update(0, NULL, 0), (uint32_t)crc32(0L, Z_NULL, 0));
	assert_int_equal(crc32_update(0, "123456789", 9), 0xcbf43926u);
}

static void
test_lengths_and_alignments(void **state)
{
	enum { MAX = 600 };
	unsigned char	 buf[MAX + 32];
	size_t		 n, off, i;
	uint32_t	 init;

	(void)state;
	for (i = 0; i < sizeof buf; i++)
		buf[i] = (unsigned char)rnd();
	for (n = 0; n <= MAX; n++) {
		for (off = 0; off < 16; off++) {
			init = (n + off) % 3 == 0 ? 0 : rnd();
			assert_int_equal(crc32_update(init, buf + off, n),
			    zcrc(init, buf + off, n));
		}
	}
}

static void
test_chained_large(void **state)
{
	size_t		 size = 3u << 20, i, at, k;
	unsigned char	*buf = malloc(size);
	uint32_t	 a, b;

	(void)state;
	assert_non_null(buf);
	for (i = 0; i < size; i++)
		buf[i] = (unsigned char)rnd();
	/* Zeros and ones too: a fold constant wrong in one bit shows there. */
	memset(buf + 1000, 0, 70000);
	memset(buf + 100000, 0xff, 70000);
	assert_int_equal(crc32_update(0, buf, size), zcrc(0, buf, size));
	a = b = 0;
	for (at = 0; at < size; at += k) {
		k = rnd() % 200000;
		if (k > size - at)
			k = size - at;
		a = crc32_update(a, buf + at, k);
		b = zcrc(b, buf + at, k);
		assert_int_equal(a, b);
	}
	free(buf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_start),
		cmocka_unit_test(test_lengths_and_alignments),
		cmocka_unit_test(test_chained_large),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Byte counts for the job log (lib/size.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "lib/size.h"

static const char *
fmt(unsigned long long bytes)
{
	static char out[32];

	size_format(bytes, out, sizeof(out));
	return out;
}

static void
test_units(void **state)
{
	(void)state;
	assert_string_equal(fmt(0), "0 B");
	assert_string_equal(fmt(1023), "1023 B");
	assert_string_equal(fmt(1024), "1.0 KiB");
	assert_string_equal(fmt(1536), "1.5 KiB");
	assert_string_equal(fmt(10ULL << 20), "10.0 MiB");
	assert_string_equal(fmt(3ULL << 30), "3.0 GiB");
	/* TiB is the largest unit: no "PiB". */
	assert_string_equal(fmt(2048ULL << 40), "2048.0 TiB");
}

static void
test_truncates_to_fit(void **state)
{
	char out[4];

	(void)state;
	size_format(1536, out, sizeof(out));
	assert_string_equal(out, "1.5");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_units),
		cmocka_unit_test(test_truncates_to_fit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The retry decision (api/retry.c): every rule, no network, no clock. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <time.h>

#include "api/retry.h"

/* 2026-11-30 10:00:00 UTC */
#define NOW	((time_t)1796032800)

static struct retry_input
base(long status)
{
	struct retry_input in;

	memset(&in, 0, sizeof(in));
	in.attempts = 1;
	in.max_attempts = 5;
	in.status = status;
	in.now = NOW;
	in.remaining_ms = 60 * 60 * 1000;
	in.backoff_ms = 150;
	return in;
}

static void
test_retryable_statuses(void **state)
{
	static const long yes[] = { 408, 429, 500, 502, 503, 504, 512, 515, 599 };
	static const long no[] = { 200, 201, 204, 301, 307, 308, 400, 401, 403, 404,
	    409, 410, 412, 413, 416, 422, 501, 505, 511 };
	struct retry_input in;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		in = base(yes[i]);
		assert_true(retry_decide(&in).again);
	}
	for (i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		in = base(no[i]);
		assert_false(retry_decide(&in).again);
		assert_string_equal(retry_decide(&in).why_not, "not retryable");
	}
}

static void
test_transport_errors(void **state)
{
	struct retry_input in = base(0);

	(void)state;
	in.transport_retryable = true;
	assert_true(retry_decide(&in).again);
	in.transport_retryable = false;
	assert_false(retry_decide(&in).again);
}

static void
test_backoff_is_the_default_wait(void **state)
{
	struct retry_input in = base(503);
	struct retry_decision d = retry_decide(&in);

	(void)state;
	assert_true(d.again);
	assert_int_equal(d.delay_ms, 150);
	assert_int_equal(d.reason, RETRY_WAIT_BACKOFF);
	assert_string_equal(retry_wait_reason_name(d.reason), "backoff");
}

static void
test_retry_after_seconds(void **state)
{
	struct retry_input in = base(429);
	struct retry_decision d;

	(void)state;
	in.retry_after = "2";
	d = retry_decide(&in);
	assert_true(d.again);
	assert_int_equal(d.delay_ms, 2000);
	assert_int_equal(d.reason, RETRY_WAIT_RETRY_AFTER);

	in.retry_after = " 30 ";
	assert_int_equal(retry_decide(&in).delay_ms, 30000);
	/* Zero, garbage and negatives fall back to the backoff. */
	in.retry_after = "0";
	assert_int_equal(retry_decide(&in).delay_ms, 150);
	in.retry_after = "soon";
	assert_int_equal(retry_decide(&in).reason, RETRY_WAIT_BACKOFF);
	in.retry_after = "-5";
	assert_int_equal(retry_decide(&in).delay_ms, 150);
	in.retry_after = "2.5";
	assert_int_equal(retry_decide(&in).delay_ms, 150);
}

static void
test_retry_after_http_date(void **state)
{
	struct retry_input in = base(503);
	struct retry_decision d;

	(void)state;
	/* NOW + 90 s, in each of the three forms RFC 7231 allows. */
	in.retry_after = "Mon, 30 Nov 2026 10:01:30 GMT";
	d = retry_decide(&in);
	assert_true(d.again);
	assert_int_equal(d.delay_ms, 90000);
	assert_int_equal(d.reason, RETRY_WAIT_RETRY_AFTER);
	in.retry_after = "Monday, 30-Nov-26 10:01:30 GMT";
	assert_int_equal(retry_decide(&in).delay_ms, 90000);
	in.retry_after = "Mon Nov 30 10:01:30 2026";
	assert_int_equal(retry_decide(&in).delay_ms, 90000);
	/* A date in the past is no wait at all: back off instead. */
	in.retry_after = "Mon, 30 Nov 2026 09:00:00 GMT";
	assert_int_equal(retry_decide(&in).reason, RETRY_WAIT_BACKOFF);
}

static void
test_ratelimit_reset_wins(void **state)
{
	struct retry_input in = base(429);
	struct retry_decision d;

	(void)state;
	in.retry_after = "5";
	in.ratelimit_reset = "Mon, 30 Nov 2026 10:00:20 GMT";
	d = retry_decide(&in);
	assert_int_equal(d.delay_ms, 20000);
	assert_int_equal(d.reason, RETRY_WAIT_RATELIMIT_RESET);
	assert_string_equal(retry_wait_reason_name(d.reason), "RateLimit-ResetTime");
	/* Unparsable reset: Retry-After is next in line. */
	in.ratelimit_reset = "tomorrow";
	d = retry_decide(&in);
	assert_int_equal(d.delay_ms, 5000);
	assert_int_equal(d.reason, RETRY_WAIT_RETRY_AFTER);
}

static void
test_never_past_the_deadline(void **state)
{
	struct retry_input in = base(429);
	struct retry_decision d;

	(void)state;
	in.remaining_ms = 10000;
	in.retry_after = "30";
	d = retry_decide(&in);
	assert_false(d.again);
	assert_string_equal(d.why_not, "the wait would pass the deadline");
	in.retry_after = "9";
	assert_true(retry_decide(&in).again);
	/* The backoff is bound by it too. */
	in.retry_after = NULL;
	in.backoff_ms = 20000;
	assert_false(retry_decide(&in).again);
}

static void
test_attempts_and_opt_outs(void **state)
{
	struct retry_input in = base(502);

	(void)state;
	in.attempts = 5;
	assert_false(retry_decide(&in).again);
	assert_string_equal(retry_decide(&in).why_not, "attempts exhausted");
	in.attempts = 4;
	assert_true(retry_decide(&in).again);

	in = base(429);
	in.no_retry_429 = true;
	assert_false(retry_decide(&in).again);
	in.status = 503;
	assert_true(retry_decide(&in).again);
	in.no_retry = true;
	assert_false(retry_decide(&in).again);
}

static void
test_http_date_parse(void **state)
{
	time_t t;

	(void)state;
	assert_int_equal(http_date_parse("Sun, 06 Nov 1994 08:49:37 GMT", &t), 0);
	assert_int_equal((long long)t, 784111777LL);
	assert_int_equal(http_date_parse("Sunday, 06-Nov-94 08:49:37 GMT", &t), 0);
	assert_int_equal((long long)t, 784111777LL);
	assert_int_equal(http_date_parse("Sun Nov  6 08:49:37 1994", &t), 0);
	assert_int_equal((long long)t, 784111777LL);
	assert_int_equal(http_date_parse("Sun, 06 Nov 1994 08:49:37 GMT trailing", &t), -1);
	assert_int_equal(http_date_parse("120", &t), -1);
	assert_int_equal(http_date_parse("", &t), -1);
	assert_int_equal(http_date_parse(NULL, &t), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_retryable_statuses),
		cmocka_unit_test(test_transport_errors),
		cmocka_unit_test(test_backoff_is_the_default_wait),
		cmocka_unit_test(test_retry_after_seconds),
		cmocka_unit_test(test_retry_after_http_date),
		cmocka_unit_test(test_ratelimit_reset_wins),
		cmocka_unit_test(test_never_past_the_deadline),
		cmocka_unit_test(test_attempts_and_opt_outs),
		cmocka_unit_test(test_http_date_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

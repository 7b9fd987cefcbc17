/* Pushback gates (api/pushback.c): windows, one probe, no network. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "api/pushback.h"

static int a, b, c;	/* three requests, by address */

static void
test_gates_are_per_key(void **state)
{
	struct pushback_gate *list = NULL, *g1, *g2;

	(void)state;
	g1 = pushback_gate(&list, "PATCH http://h/jobs/{id}/trace", 0);
	g2 = pushback_gate(&list, "PUT http://h/jobs/{id}", 0);
	assert_ptr_not_equal(g1, g2);
	assert_ptr_equal(pushback_gate(&list, "PATCH http://h/jobs/{id}/trace", 0), g1);
	assert_int_equal(g1->users, 2);
	assert_false(pushback_answered(g1, &a, 0, 5000));
	assert_int_equal(pushback_admit(g2, &b, 1000, &(uint64_t){ 0 }), PUSHBACK_SEND);
	pushback_free(list);
}

static int
count(const struct pushback_gate *list)
{
	int n = 0;

	for (; list != NULL; list = list->next)
		n++;
	return n;
}

/* Unused gates go, unless they keep a window: one per URL would pile up. */
static void
test_unused_gates_are_dropped(void **state)
{
	struct pushback_gate *list = NULL, *open, *closed, *g;

	(void)state;
	open = pushback_gate(&list, "GET https://storage/a/b/c", 0);
	closed = pushback_gate(&list, "PATCH http://h/jobs/{id}/trace", 0);
	pushback_answered(closed, &a, 0, 5000);
	pushback_put(open);
	pushback_put(closed);
	g = pushback_gate(&list, "PUT http://h/jobs/{id}", 1000);
	assert_int_equal(count(list), 2);	/* the open one went, the closed stays */
	assert_ptr_equal(pushback_gate(&list, "PATCH http://h/jobs/{id}/trace", 1000), closed);
	assert_int_equal(closed->until, 5000);
	pushback_put(closed);
	pushback_put(g);
	pushback_gate(&list, "GET https://storage/x", 5000);	/* both are over now */
	assert_int_equal(count(list), 1);
	pushback_free(list);
}

static void
test_window_then_one_probe(void **state)
{
	struct pushback_gate *list = NULL, *g;
	uint64_t until = 0;

	(void)state;
	g = pushback_gate(&list, "k", 0);
	assert_int_equal(pushback_admit(g, &a, 1000, &until), PUSHBACK_SEND);
	assert_false(pushback_answered(g, &a, 0, 31000));		/* 429, Retry-After 30 */

	assert_int_equal(pushback_admit(g, &b, 2000, &until), PUSHBACK_WAIT_WINDOW);
	assert_int_equal(until, 31000);
	assert_int_equal(pushback_admit(g, &a, 30999, &until), PUSHBACK_WAIT_WINDOW);

	/* The first to ask after the window probes; the others wait for it. */
	assert_int_equal(pushback_admit(g, &b, 31000, &until), PUSHBACK_SEND);
	assert_int_equal(pushback_admit(g, &a, 31001, &until), PUSHBACK_WAIT_PROBE);
	assert_int_equal(pushback_admit(g, &c, 40000, &until), PUSHBACK_WAIT_PROBE);
	assert_int_equal(pushback_admit(g, &b, 31002, &until), PUSHBACK_SEND);

	/* The probe is answered: open, every one sends. */
	assert_true(pushback_answered(g, &b, 0, 0));
	assert_int_equal(pushback_admit(g, &a, 31003, &until), PUSHBACK_SEND);
	assert_int_equal(pushback_admit(g, &c, 31003, &until), PUSHBACK_SEND);
	pushback_free(list);
}

static void
test_probe_pushed_back_closes_again(void **state)
{
	struct pushback_gate *list = NULL, *g;
	uint64_t until = 0;

	(void)state;
	g = pushback_gate(&list, "k", 0);
	pushback_answered(g, &a, 0, 10000);
	assert_int_equal(pushback_admit(g, &b, 10000, &until), PUSHBACK_SEND);
	assert_false(pushback_answered(g, &b, 0, 20000));
	assert_int_equal(pushback_admit(g, &b, 15000, &until), PUSHBACK_WAIT_WINDOW);
	assert_int_equal(until, 20000);
	/* A shorter wait from a late answer does not shorten the window. */
	assert_false(pushback_answered(g, &c, 0, 12000));
	assert_int_equal(pushback_admit(g, &a, 19000, &until), PUSHBACK_WAIT_WINDOW);
	assert_int_equal(until, 20000);
	pushback_free(list);
}

static void
test_probe_gone_passes_the_turn(void **state)
{
	struct pushback_gate *list = NULL, *g;
	uint64_t until = 0;

	(void)state;
	g = pushback_gate(&list, "k", 0);
	pushback_answered(g, &a, 0, 10000);
	assert_int_equal(pushback_admit(g, &a, 10000, &until), PUSHBACK_SEND);
	assert_int_equal(pushback_admit(g, &b, 10001, &until), PUSHBACK_WAIT_PROBE);
	assert_false(pushback_gone(g, &b));		/* not the probe */
	assert_true(pushback_gone(g, &a));		/* canceled or gave up */
	assert_int_equal(pushback_admit(g, &b, 10002, &until), PUSHBACK_SEND);
	assert_int_equal(pushback_admit(g, &c, 10002, &until), PUSHBACK_WAIT_PROBE);
	pushback_free(list);
}

static void
test_any_good_answer_opens(void **state)
{
	struct pushback_gate *list = NULL, *g;
	uint64_t until = 0;

	(void)state;
	g = pushback_gate(&list, "k", 0);
	pushback_answered(g, &a, 0, 10000);
	/* Sent before the window, answered within it: the server is back. */
	assert_true(pushback_answered(g, &b, 0, 0));
	assert_int_equal(pushback_admit(g, &c, 5000, &until), PUSHBACK_SEND);
	/* Open: an answer without a wait changes nothing. */
	assert_false(pushback_answered(g, &c, 0, 0));
	pushback_free(list);
}

/* A server that is down says no "wait": its failures hold the class anyway. */
static void
test_failure_closes_and_windows_double(void **state)
{
	struct pushback_gate *list = NULL, *g;
	uint64_t until = 0;

	(void)state;
	g = pushback_gate(&list, "k", 0);
	/* rnd 0 takes the short end of each window: base / 2. */
	assert_int_equal(pushback_failed(g, &a, 1000, 1000, 1000, 8000, 0, &until),
	    PUSHBACK_CLOSED);
	assert_int_equal(until, 1500);
	assert_true(g->failing);
	assert_int_equal(pushback_admit(g, &b, 1200, &until), PUSHBACK_WAIT_WINDOW);
	assert_int_equal(pushback_admit(g, &a, 1499, &until), PUSHBACK_WAIT_WINDOW);

	/* The window is over: one probe, and only its failure counts. */
	assert_int_equal(pushback_admit(g, &b, 1500, &until), PUSHBACK_SEND);
	assert_int_equal(pushback_admit(g, &a, 1501, &until), PUSHBACK_WAIT_PROBE);
	assert_int_equal(pushback_failed(g, &c, 1400, 1600, 1000, 8000, 0, &until),
	    PUSHBACK_HELD_ALREADY);
	assert_int_equal(pushback_failed(g, &b, 1500, 1600, 1000, 8000, 0, &until),
	    PUSHBACK_CLOSED_AGAIN);
	assert_int_equal(until, 2600);			/* 2 s base, 1 s at least */
	assert_null(g->probe);

	/* Doubling, with the jitter inside [base / 2, base], up to the cap. */
	pushback_admit(g, &a, 2600, &until);
	assert_int_equal(pushback_failed(g, &a, 2600, 2700, 1000, 8000, UINT32_MAX, &until),
	    PUSHBACK_CLOSED_AGAIN);
	assert_in_range(until - 2700, 2000, 4000);		/* base 4 s */
	pushback_admit(g, &a, 7000, &until);
	pushback_failed(g, &a, 7000, 7000, 1000, 8000, 0, &until);
	assert_int_equal(until, 7000 + 4000);		/* base 8 s, the cap */
	pushback_admit(g, &a, 11000, &until);
	pushback_failed(g, &a, 11000, 11000, 1000, 8000, 0, &until);
	assert_int_equal(until, 11000 + 4000);		/* still the cap */
	pushback_free(list);
}

/* Answers to what was sent before the gate last changed say nothing of now. */
static void
test_stale_answers_change_nothing(void **state)
{
	struct pushback_gate *list = NULL, *g;
	uint64_t until = 0;

	(void)state;
	g = pushback_gate(&list, "k", 0);
	pushback_failed(g, &a, 1000, 1000, 1000, 8000, 0, &until);
	/* A long poll sent at 900 ends at 1200 with a 204: still closed. */
	assert_false(pushback_answered(g, &b, 900, 0));
	assert_int_equal(pushback_admit(g, &c, 1200, &until), PUSHBACK_WAIT_WINDOW);
	/* Another sent at 900 fails at 1300: the window stays as it was. */
	assert_int_equal(pushback_failed(g, &b, 900, 1300, 1000, 8000, 0, &until),
	    PUSHBACK_STALE);
	assert_int_equal(g->until, 1500);

	/* The probe is answered: open, and the doubling starts again. */
	assert_int_equal(pushback_admit(g, &c, 1500, &until), PUSHBACK_SEND);
	assert_true(pushback_answered(g, &c, 1500, 0));
	assert_false(g->failing);
	assert_int_equal(g->failed_windows, 0);
	/* A failure of a request that left before the probe does not close it again. */
	assert_int_equal(pushback_failed(g, &a, 1400, 1700, 1000, 8000, 0, &until),
	    PUSHBACK_STALE);
	assert_int_equal(pushback_admit(g, &a, 1700, &until), PUSHBACK_SEND);
	/* One that left after it does, from the first window. */
	assert_int_equal(pushback_failed(g, &a, 1700, 1800, 1000, 8000, 0, &until),
	    PUSHBACK_CLOSED);
	assert_int_equal(until, 2300);
	pushback_free(list);
}

/* A probe that fails and gives up does not pass its turn: the next window does. */
static void
test_failed_probe_gone_waits_for_the_window(void **state)
{
	struct pushback_gate *list = NULL, *g;
	uint64_t until = 0;

	(void)state;
	g = pushback_gate(&list, "k", 0);
	pushback_failed(g, &a, 0, 0, 1000, 8000, 0, &until);
	assert_int_equal(pushback_admit(g, &a, 500, &until), PUSHBACK_SEND);
	pushback_failed(g, &a, 500, 600, 1000, 8000, 0, &until);
	assert_false(pushback_gone(g, &a));	/* out of attempts: it goes */
	assert_int_equal(pushback_admit(g, &b, 700, &until), PUSHBACK_WAIT_WINDOW);
	assert_int_equal(until, 1600);
	pushback_free(list);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gates_are_per_key),
		cmocka_unit_test(test_unused_gates_are_dropped),
		cmocka_unit_test(test_window_then_one_probe),
		cmocka_unit_test(test_probe_pushed_back_closes_again),
		cmocka_unit_test(test_probe_gone_passes_the_turn),
		cmocka_unit_test(test_any_good_answer_opens),
		cmocka_unit_test(test_failure_closes_and_windows_double),
		cmocka_unit_test(test_stale_answers_change_nothing),
		cmocka_unit_test(test_failed_probe_gone_waits_for_the_window),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

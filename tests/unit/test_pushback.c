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
	assert_false(pushback_answered(g1, &a, 5000));
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
	pushback_answered(closed, &a, 5000);
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
	assert_false(pushback_answered(g, &a, 31000));		/* 429, Retry-After 30 */

	assert_int_equal(pushback_admit(g, &b, 2000, &until), PUSHBACK_WAIT_WINDOW);
	assert_int_equal(until, 31000);
	assert_int_equal(pushback_admit(g, &a, 30999, &until), PUSHBACK_WAIT_WINDOW);

	/* The first to ask after the window probes; the others wait for it. */
	assert_int_equal(pushback_admit(g, &b, 31000, &until), PUSHBACK_SEND);
	assert_int_equal(pushback_admit(g, &a, 31001, &until), PUSHBACK_WAIT_PROBE);
	assert_int_equal(pushback_admit(g, &c, 40000, &until), PUSHBACK_WAIT_PROBE);
	assert_int_equal(pushback_admit(g, &b, 31002, &until), PUSHBACK_SEND);

	/* The probe is answered: open, every one sends. */
	assert_true(pushback_answered(g, &b, 0));
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
	pushback_answered(g, &a, 10000);
	assert_int_equal(pushback_admit(g, &b, 10000, &until), PUSHBACK_SEND);
	assert_false(pushback_answered(g, &b, 20000));
	assert_int_equal(pushback_admit(g, &b, 15000, &until), PUSHBACK_WAIT_WINDOW);
	assert_int_equal(until, 20000);
	/* A shorter wait from a late answer does not shorten the window. */
	assert_false(pushback_answered(g, &c, 12000));
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
	pushback_answered(g, &a, 10000);
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
	pushback_answered(g, &a, 10000);
	/* Sent before the window, answered within it: the server is back. */
	assert_true(pushback_answered(g, &b, 0));
	assert_int_equal(pushback_admit(g, &c, 5000, &until), PUSHBACK_SEND);
	/* Open: an answer without a wait changes nothing. */
	assert_false(pushback_answered(g, &c, 0));
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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

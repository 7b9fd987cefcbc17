/* Pushback windows per endpoint class; see pushback.h. */
#include <stdlib.h>
#include <string.h>

#include "api/pushback.h"
#include "lib/backoff.h"
#include "lib/xmalloc.h"

struct pushback_gate *
pushback_gate(struct pushback_gate **list, const char *key, uint64_t now)
{
	struct pushback_gate **pp = list, *g, *found = NULL;

	while ((g = *pp) != NULL) {
		if (strcmp(g->key, key) == 0) {
			found = g;
			pp = &g->next;
		} else if (g->users == 0 && g->until <= now) {
			*pp = g->next;		/* unused, and no window to keep */
			free(g->key);
			free(g);
		} else
			pp = &g->next;
	}
	if ((g = found) == NULL) {
		g = xcalloc(1, sizeof(*g));
		g->key = xstrdup(key);
		g->next = *list;
		*list = g;
	}
	g->users++;
	return g;
}

void
pushback_put(struct pushback_gate *g)
{
	g->users--;
}

void
pushback_free(struct pushback_gate *list)
{
	struct pushback_gate *next;

	for (; list != NULL; list = next) {
		next = list->next;
		free(list->key);
		free(list);
	}
}

enum pushback_verdict
pushback_admit(struct pushback_gate *g, const void *who, uint64_t now, uint64_t *until)
{
	if (g->until == 0 || g->probe == who)
		return PUSHBACK_SEND;
	if (now < g->until) {
		*until = g->until;
		return PUSHBACK_WAIT_WINDOW;
	}
	if (g->probe == NULL) {
		g->probe = who;
		return PUSHBACK_SEND;
	}
	return PUSHBACK_WAIT_PROBE;
}

bool
pushback_answered(struct pushback_gate *g, const void *who, uint64_t sent_at,
    uint64_t wait_until)
{
	if (wait_until != 0) {
		/* Closed (again): the probe, if it was one, waits like the rest. */
		if (g->until == 0) {
			g->changed_at = sent_at;
			g->failing = false;
		}
		if (wait_until > g->until)
			g->until = wait_until;
		if (g->probe == who)
			g->probe = NULL;
		return false;
	}
	if (g->until == 0 || (g->probe != who && g->probe != NULL))
		return false;	/* open already, or not the one that tells */
	/*
	 * A server that asked for a pause answered, so it answers: any such
	 * answer tells.  One that failed may have sent this before it did.
	 */
	if (g->failing && sent_at < g->changed_at)
		return false;
	g->until = 0;
	g->probe = NULL;
	g->failing = false;
	g->failed_windows = 0;
	g->changed_at = sent_at;
	return true;
}

enum pushback_failure
pushback_failed(struct pushback_gate *g, const void *who, uint64_t sent_at, uint64_t now,
    uint64_t min_ms, uint64_t max_ms, uint32_t rnd, uint64_t *until)
{
	enum pushback_failure verdict;

	if (sent_at < g->changed_at)
		return PUSHBACK_STALE;
	if (g->until == 0) {
		verdict = PUSHBACK_CLOSED;
		g->failed_windows = 0;
		g->changed_at = now;
	} else if (g->probe == who) {
		verdict = PUSHBACK_CLOSED_AGAIN;
	} else
		return PUSHBACK_HELD_ALREADY;
	g->failing = true;
	g->probe = NULL;
	g->until = now + backoff_delay(min_ms, max_ms, g->failed_windows, rnd);
	if (g->failed_windows < 64)
		g->failed_windows++;
	*until = g->until;
	return verdict;
}

bool
pushback_gone(struct pushback_gate *g, const void *who)
{
	if (g->probe != who)
		return false;
	/* The probe went without telling: the next one asking probes. */
	g->probe = NULL;
	return true;
}

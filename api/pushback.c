/* Pushback windows per endpoint class; see pushback.h. */
#include <stdlib.h>
#include <string.h>

#include "api/pushback.h"
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
pushback_answered(struct pushback_gate *g, const void *who, uint64_t wait_until)
{
	if (wait_until != 0) {
		/* Closed (again): the probe, if it was one, waits like the rest. */
		if (wait_until > g->until)
			g->until = wait_until;
		if (g->probe == who)
			g->probe = NULL;
		return false;
	}
	if (g->until == 0 || (g->probe != who && g->probe != NULL))
		return false;	/* open already, or not the one that tells */
	g->until = 0;
	g->probe = NULL;
	return true;
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

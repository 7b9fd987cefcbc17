/* Vectors of owned strings. */
#include <stdlib.h>

#include "lib/strv.h"
#include "lib/xmalloc.h"

void
strv_push_owned(struct strv *sv, char *s)
{
	/*
	 * Doubling: a job may bring 100,000 variables or an artifact 100,000
	 * paths, and one slot at a time is quadratic where realloc copies
	 * (always, under ASan).  v == NULL counts as no room, so a vector
	 * whose array was taken and reset to NULL, n 0 starts over.
	 */
	if (sv->v == NULL || sv->n + 2 > sv->cap) {
		size_t cap = sv->v == NULL ? 0 : sv->cap;

		cap = cap < 8 ? 8 : cap * 2;
		if (cap < sv->n + 2)
			cap = sv->n + 2;
		sv->v = xreallocarray(sv->v, cap, sizeof(char *));
		sv->cap = cap;
	}
	sv->v[sv->n++] = s;
	sv->v[sv->n] = NULL;
}

void
strv_push(struct strv *sv, const char *s)
{
	strv_push_owned(sv, xstrdup(s));
}

void
strv_release(struct strv *sv)
{
	size_t i;

	for (i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->n = 0;
	sv->cap = 0;
}

/* Vectors of owned strings, grown one at a time (few elements, rarely). */
#include <stdlib.h>

#include "runner/strv.h"
#include "runner/xmalloc.h"

void
strv_push_owned(struct strv *sv, char *s)
{
	sv->v = xreallocarray(sv->v, sv->n + 2, sizeof(char *));
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
}

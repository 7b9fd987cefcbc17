/*
 * A NULL-terminated vector of owned strings: argv-shaped, so it can be
 * handed to execvp() as it is.
 */
#ifndef LIB_STRV_H
#define LIB_STRV_H

#include <stddef.h>

struct strv {
	char	**v;	/* v[n] == NULL once anything was pushed; NULL while empty */
	size_t	  n;
	size_t	  cap;	/* slots allocated in v; meaningless while v is NULL */
};

/* Append a copy of s. */
void	strv_push(struct strv *sv, const char *s);
/* Append s itself; the vector takes ownership. */
void	strv_push_owned(struct strv *sv, char *s);
void	strv_release(struct strv *sv);

#endif

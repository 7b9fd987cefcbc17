/*
 * Allocation that never fails: on exhaustion the process prints what it
 * tried to allocate and aborts (tmux, OpenSMTPD, redis).  A daemon that
 * cannot allocate a few hundred bytes cannot do anything useful, and one
 * policy here removes an error path from every caller.
 */
#ifndef LIB_XMALLOC_H
#define LIB_XMALLOC_H

#include <stddef.h>

void	*xmalloc(size_t size);
void	*xcalloc(size_t nmemb, size_t size);
void	*xrealloc(void *ptr, size_t size);
/* realloc of nmemb * size with the multiplication checked for overflow. */
void	*xreallocarray(void *ptr, size_t nmemb, size_t size);
char	*xstrdup(const char *s);
/* Copy of len bytes plus a terminating NUL (the bytes may contain NUL). */
char	*xmemdup(const void *p, size_t len);
/* Formatted string in a new allocation; the caller frees it. */
char	*xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

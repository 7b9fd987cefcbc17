/*
 * Allocation wrappers that abort on exhaustion.  Every caller in the daemon
 * would otherwise need an error path that can do nothing but give up, so
 * giving up happens here, once, with a message saying how much was asked.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/xmalloc.h"

static _Noreturn void
xmalloc_fail(size_t size)
{
	fprintf(stderr, "runner: out of memory allocating %zu bytes\n", size);
	abort();
}

void *
xmalloc(size_t size)
{
	void	*p;

	/* malloc(0) may return NULL legitimately; ask for one byte instead. */
	if (size == 0)
		size = 1;
	if ((p = malloc(size)) == NULL)
		xmalloc_fail(size);
	return p;
}

void *
xcalloc(size_t nmemb, size_t size)
{
	void	*p;

	if (nmemb == 0 || size == 0)
		nmemb = size = 1;
	if (size > SIZE_MAX / nmemb)
		xmalloc_fail(SIZE_MAX);
	if ((p = calloc(nmemb, size)) == NULL)
		xmalloc_fail(nmemb * size);
	return p;
}

void *
xrealloc(void *ptr, size_t size)
{
	return xreallocarray(ptr, 1, size);
}

void *
xreallocarray(void *ptr, size_t nmemb, size_t size)
{
	void	*p;
	size_t	 total;

	if (nmemb != 0 && size > SIZE_MAX / nmemb)
		xmalloc_fail(SIZE_MAX);
	total = nmemb * size;
	/* realloc(p, 0) may free p and return NULL; keep a live block. */
	if (total == 0)
		total = 1;
	if ((p = realloc(ptr, total)) == NULL)
		xmalloc_fail(total);
	return p;
}

char *
xstrdup(const char *s)
{
	return xmemdup(s, strlen(s));
}

char *
xmemdup(const void *p, size_t len)
{
	char	*copy;

	if (len == SIZE_MAX)
		xmalloc_fail(SIZE_MAX);
	copy = xmalloc(len + 1);
	if (len != 0)
		memcpy(copy, p, len);
	copy[len] = '\0';
	return copy;
}

char *
xasprintf(const char *fmt, ...)
{
	va_list	 ap;
	char	*s;
	int	 n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0) {
		/* Only an allocation failure or a bad format gets here. */
		fprintf(stderr, "runner: xasprintf failed for \"%s\"\n", fmt);
		abort();
	}
	return s;
}

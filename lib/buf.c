/*
 * Growable byte buffer with a hard cap.  An empty buffer points at a shared
 * static "" so that ptr is always a valid C string without an allocation;
 * the first append replaces it.  Every failing operation leaves the buffer
 * untouched, so callers can report -ENOSPC and carry on with what they had.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "lib/xmalloc.h"

/* Never written: cap == 0 marks a buffer still pointing here. */
static char	buf_empty[1] = "";

#define BUF_MIN_CAP	64

void
buf_init(struct buf *b, size_t max)
{
	b->ptr = buf_empty;
	b->len = 0;
	b->cap = 0;
	b->max = max > BUF_UNLIMITED ? BUF_UNLIMITED : max;
}

/* Make room for `more` bytes plus the NUL, or fail without changing b. */
static int
buf_grow(struct buf *b, size_t more)
{
	size_t	 need, cap;
	char	*p;

	if (more > b->max || b->len > b->max - more)
		return -ENOSPC;
	need = b->len + more + 1;
	if (need <= b->cap)
		return 0;

	cap = b->cap < BUF_MIN_CAP ? BUF_MIN_CAP : b->cap;
	while (cap < need)
		cap *= 2;	/* need <= BUF_UNLIMITED + 1, cannot overflow */
	/* Do not reserve far past what the cap can ever let us use. */
	if (cap > b->max + 1)
		cap = b->max + 1;

	if (b->cap == 0) {
		p = xmalloc(cap);
		p[0] = '\0';
	} else
		p = xrealloc(b->ptr, cap);
	b->ptr = p;
	b->cap = cap;
	return 0;
}

int
buf_append(struct buf *b, const void *data, size_t len)
{
	int	rc;

	if (len == 0)
		return 0;
	if ((rc = buf_grow(b, len)) != 0)
		return rc;
	memcpy(b->ptr + b->len, data, len);
	b->len += len;
	b->ptr[b->len] = '\0';
	return 0;
}

int
buf_puts(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int
buf_putc(struct buf *b, char c)
{
	return buf_append(b, &c, 1);
}

int
buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list	ap;
	int	rc;

	va_start(ap, fmt);
	rc = buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rc;
}

int
buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
	va_list	 ap2;
	size_t	 avail;
	int	 n, rc;

	/* Try in place first; most lines fit in what is already there. */
	avail = b->cap == 0 ? 0 : b->cap - b->len;
	va_copy(ap2, ap);
	if (avail == 0) {
		char	c;

		n = vsnprintf(&c, 1, fmt, ap2);
	} else
		n = vsnprintf(b->ptr + b->len, avail, fmt, ap2);
	va_end(ap2);
	if (n < 0) {
		if (b->cap != 0)
			b->ptr[b->len] = '\0';
		return -EINVAL;
	}
	if ((size_t)n < avail) {
		/* It fitted, but it must also respect the cap. */
		if ((size_t)n > b->max - b->len) {
			b->ptr[b->len] = '\0';
			return -ENOSPC;
		}
		b->len += (size_t)n;
		return 0;
	}

	/* Put the NUL back: vsnprintf may have written over it. */
	if (b->cap != 0)
		b->ptr[b->len] = '\0';
	if ((rc = buf_grow(b, (size_t)n)) != 0)
		return rc;
	va_copy(ap2, ap);
	n = vsnprintf(b->ptr + b->len, b->cap - b->len, fmt, ap2);
	va_end(ap2);
	if (n < 0) {
		b->ptr[b->len] = '\0';
		return -EINVAL;
	}
	b->len += (size_t)n;
	return 0;
}

void
buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->cap != 0)
		b->ptr[0] = '\0';
}

void
buf_consume(struct buf *b, size_t n)
{
	if (n >= b->len) {
		buf_reset(b);
		return;
	}
	memmove(b->ptr, b->ptr + n, b->len - n);
	b->len -= n;
	b->ptr[b->len] = '\0';
}

void
buf_release(struct buf *b)
{
	if (b->cap != 0)
		free(b->ptr);
	b->ptr = buf_empty;
	b->len = 0;
	b->cap = 0;
}

char *
buf_detach(struct buf *b, size_t *len)
{
	char	*p;

	if (len != NULL)
		*len = b->len;
	if (b->cap == 0)
		p = xstrdup("");
	else
		p = b->ptr;
	b->ptr = buf_empty;
	b->len = 0;
	b->cap = 0;
	return p;
}

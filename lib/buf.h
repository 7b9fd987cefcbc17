/*
 * A growable byte buffer with a hard cap (curl's dynbuf, git's strbuf).
 *
 * Invariants: after buf_init() `ptr` is never NULL and ptr[len] is always a
 * NUL byte, so the contents can be used as a C string when they hold no NUL.
 * An append that would take `len` past `max` fails with -ENOSPC and leaves
 * the buffer exactly as it was: a buffer fed by the network or by a job can
 * never grow past what its owner chose.
 */
#ifndef LIB_BUF_H
#define LIB_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct buf {
	char	*ptr;	/* never NULL; ptr[len] == '\0' */
	size_t	 len;	/* bytes held, not counting the NUL */
	size_t	 cap;	/* bytes allocated (0 while ptr is the shared empty string) */
	size_t	 max;	/* appends past this many bytes fail */
};

#define BUF_UNLIMITED	((size_t)-1 / 2)

void	 buf_init(struct buf *b, size_t max);
/* 0, or -ENOSPC when the result would exceed b->max (buffer unchanged). */
int	 buf_append(struct buf *b, const void *data, size_t len);
int	 buf_puts(struct buf *b, const char *s);
int	 buf_putc(struct buf *b, char c);
int	 buf_printf(struct buf *b, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
int	 buf_vprintf(struct buf *b, const char *fmt, va_list ap)
	    __attribute__((format(printf, 2, 0)));
/* Empty the buffer but keep its memory for reuse. */
void	 buf_reset(struct buf *b);
/* Drop the first n bytes (n <= len). */
void	 buf_consume(struct buf *b, size_t n);
/* Free the memory; the buffer is left initialised and empty (same max). */
void	 buf_release(struct buf *b);
/*
 * Hand the bytes to the caller (who frees them), NUL-terminated, and leave
 * the buffer empty.  *len receives the length when len is not NULL.
 */
char	*buf_detach(struct buf *b, size_t *len);

#endif

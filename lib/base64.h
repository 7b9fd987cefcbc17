/*
 * RFC 4648 base64, both alphabets: the standard one ("+/") that docker's
 * config.json uses for "auth", and the URL-safe one ("-_") of the
 * X-Registry-Auth header, padded as Go's base64.URLEncoding writes it.
 */
#ifndef LIB_BASE64_H
#define LIB_BASE64_H

#include <stdbool.h>
#include <stddef.h>

/* NUL-terminated; the caller frees it. */
char	*base64_encode(const void *data, size_t len, bool url);
/*
 * Either alphabet, padding optional, no whitespace.  The result is
 * NUL-terminated (its length in *out_len); -1 on anything else.
 */
int	 base64_decode(const char *s, size_t len, char **out, size_t *out_len);

#endif

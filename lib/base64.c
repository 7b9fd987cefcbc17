/* base64 both ways; see base64.h. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base64.h"
#include "lib/xmalloc.h"

static const char std_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char url_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

char *
base64_encode(const void *data, size_t len, bool url)
{
	const unsigned char *p = data;
	const char *abc = url ? url_alphabet : std_alphabet;
	char *out = xmalloc((len + 2) / 3 * 4 + 1), *o = out;
	size_t i;

	for (i = 0; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

		*o++ = abc[v >> 18 & 63];
		*o++ = abc[v >> 12 & 63];
		*o++ = abc[v >> 6 & 63];
		*o++ = abc[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0);

		*o++ = abc[v >> 18 & 63];
		*o++ = abc[v >> 12 & 63];
		*o++ = i + 1 < len ? abc[v >> 6 & 63] : '=';
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

static int
value_of(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

int
base64_decode(const char *s, size_t len, char **out, size_t *out_len)
{
	char *buf, *o;
	uint32_t acc = 0;
	size_t i, bits = 0;
	int v;

	while (len > 0 && s[len - 1] == '=')
		len--;
	if (len % 4 == 1)
		return -1;
	buf = o = xmalloc(len / 4 * 3 + 3);
	for (i = 0; i < len; i++) {
		if ((v = value_of(s[i])) < 0) {
			free(buf);
			return -1;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			*o++ = (char)(acc >> bits & 0xff);
		}
	}
	*o = '\0';
	*out = buf;
	*out_len = (size_t)(o - buf);
	return 0;
}

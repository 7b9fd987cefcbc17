/*
 * Redaction of server text quoted in a log line; see redact.h.
 *
 * The text is not parsed: a refused answer is refused because it does not
 * parse.  One pass marks the bytes to hide, another prints the rest.  A
 * member is found by its shape alone, NAME QUOTE? SEP VALUE, wherever it
 * is, so JSON quoted inside a JSON string or an HTML page is covered too.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "api/redact.h"
#include "lib/xmalloc.h"

const char *const redact_token_prefixes[] = {
	"glpat-", "gloas-", "gldt-", "glrt-", "glcbt-", "glrtr-", "glptt-",
	"glft-", "glimt-", "glagent-", "glsoat-", "glffct-",
	"_gitlab_session=", "gltok-", NULL
};

/* Quote forms, longest first so that \" is not taken for ". */
static const struct {
	const char	*s;
	size_t		 len;
} quotes[] = {
	{ "&#x22;", 6 }, { "&quot;", 6 }, { "&#34;", 5 }, { "\\\"", 2 },
	{ "\"", 1 }, { "'", 1 },
};
#define PLAIN_QUOTE	4	/* index of ", whose strings have \ escapes */
#define SINGLE_QUOTE	5

/* How far past a value "masked": false is looked for. */
#define MASKED_LOOKAHEAD	512

struct member {
	size_t	name, name_len;
	size_t	val, val_len;	/* the value, without its quotes */
	size_t	end;		/* just past the value and its closing quote */
	bool	quoted;
};

static bool
is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* What a token may be made of (the masker's tok_alpha). */
static bool
is_token_char(char c)
{
	return is_name_char(c) || c == '.' || c == '=';
}

static bool
is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* The quote form at s[i], or -1. */
static int
quote_at(const char *s, size_t n, size_t i)
{
	size_t k;

	for (k = 0; k < sizeof(quotes) / sizeof(quotes[0]); k++) {
		if (n - i >= quotes[k].len && memcmp(s + i, quotes[k].s, quotes[k].len) == 0)
			return (int)k;
	}
	return -1;
}

/* Where the string opened by quote form q and starting at i ends, or lim. */
static size_t
quote_end(const char *s, size_t lim, size_t i, int q)
{
	const char *qs = quotes[q].s;
	size_t ql = quotes[q].len;

	while (i < lim) {
		if ((q == PLAIN_QUOTE || q == SINGLE_QUOTE) && s[i] == '\\') {
			i += 2;
			continue;
		}
		if (lim - i >= ql && memcmp(s + i, qs, ql) == 0)
			return i;
		i++;
	}
	return lim;
}

/* A bare value (a header's, a parameter's, a number) ends here. */
static bool
bare_end(char c)
{
	return strchr("\r\n,;&<>{}[]@\"'", c) != NULL || c == '\0';
}

/*
 * The member whose name starts at s[i]: NAME, a closing quote, blanks, ':'
 * or '=', blanks, then a quoted or bare value.  Nothing is read at or past
 * lim; a value cut there ends there.
 */
static bool
member_at(const char *s, size_t lim, size_t i, struct member *m)
{
	size_t p = i, q;
	int qf;

	while (p < lim && is_name_char(s[p]))
		p++;
	m->name = i;
	m->name_len = p - i;
	if (p < lim && (qf = quote_at(s, lim, p)) >= 0)
		p += quotes[qf].len;
	while (p < lim && is_blank(s[p]))
		p++;
	if (p >= lim || (s[p] != ':' && s[p] != '='))
		return false;
	p++;
	while (p < lim && is_blank(s[p]))
		p++;
	if (p < lim && (qf = quote_at(s, lim, p)) >= 0) {
		m->val = p + quotes[qf].len;
		q = quote_end(s, lim, m->val, qf);
		m->val_len = q - m->val;
		m->end = q < lim ? q + quotes[qf].len : lim;
		m->quoted = true;
		return true;
	}
	m->val = p;
	while (p < lim && !bare_end(s[p]))
		p++;
	m->end = p;
	while (p > m->val && is_blank(s[p - 1]))
		p--;
	m->val_len = p - m->val;
	m->quoted = false;
	return true;
}

static bool
name_is(const char *s, const struct member *m, const char *name)
{
	return m->name_len == strlen(name) &&
	    strncasecmp(s + m->name, name, m->name_len) == 0;
}

static bool
value_is(const char *s, const struct member *m, const char *v)
{
	return m->val_len == strlen(v) && strncasecmp(s + m->val, v, m->val_len) == 0;
}

bool
redact_name_is_secret(const char *name, size_t len)
{
	static const char *const exact[] = {
		"token", "password", "passwd", "secret", "authorization",
		"proxy_authorization", "x_amz_signature", "x_amz_credential",
		"secret_access_key", "signature", "sig", NULL
	};
	static const char *const suffix[] = { "_token", "_password", "_secret", NULL };
	char norm[64];
	size_t i, k, sl;

	if (len == 0 || len >= sizeof(norm))
		return false;
	for (i = 0; i < len; i++) {
		char c = name[i];

		norm[i] = c == '-' ? '_' : (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
	}
	norm[len] = '\0';
	for (k = 0; exact[k] != NULL; k++) {
		if (strcmp(norm, exact[k]) == 0)
			return true;
	}
	for (k = 0; suffix[k] != NULL; k++) {
		sl = strlen(suffix[k]);
		if (len > sl && strcmp(norm + len - sl, suffix[k]) == 0)
			return true;
	}
	return false;
}

static bool
name_starts_at(const char *s, size_t i)
{
	return is_name_char(s[i]) && (i == 0 || !is_name_char(s[i - 1]));
}

/*
 * Whether the object a "value" belongs to says "masked": false between the
 * value and its end, as GitLab's variables do.  A cut object, a nested one
 * or no such member: unknown, which counts as masked.
 */
static bool
says_unmasked(const char *s, size_t n, size_t from)
{
	size_t i, lim = n - from > MASKED_LOOKAHEAD ? from + MASKED_LOOKAHEAD : n;
	struct member m;

	for (i = from; i < lim; i++) {
		if (s[i] == '{' || s[i] == '}')
			return false;
		if (!name_starts_at(s, i) || !member_at(s, lim, i, &m))
			continue;
		if (name_is(s, &m, "masked"))
			return value_is(s, &m, "false");
		if (m.end > i)
			i = m.end - 1;
	}
	return false;
}

static void
mark_range(uint8_t *mark, size_t from, size_t len)
{
	memset(mark + from, 1, len);
}

static void
mark_members(const char *s, size_t n, uint8_t *mark)
{
	struct member m;
	size_t i;

	for (i = 0; i < n; i++) {
		bool value, secret;

		if (!name_starts_at(s, i))
			continue;
		if (!member_at(s, n, i, &m))
			continue;
		value = name_is(s, &m, "value");
		secret = !value && redact_name_is_secret(s + m.name, m.name_len);
		if (!value && !secret)
			continue;
		if (!m.quoted && (value_is(s, &m, "null") || value_is(s, &m, "true") ||
		    value_is(s, &m, "false")))
			continue;
		if (value && says_unmasked(s, n, m.end))
			continue;
		mark_range(mark, m.val, m.val_len);
		/* What is hidden needs no further look; this keeps the pass linear. */
		if (m.end > i)
			i = m.end - 1;
	}
}

static void
mark_prefixes(const char *s, size_t n, uint8_t *mark)
{
	const char *at, *end = s + n;
	size_t k, pl, e;

	for (k = 0; redact_token_prefixes[k] != NULL; k++) {
		pl = strlen(redact_token_prefixes[k]);
		at = s;
		while ((at = memmem(at, (size_t)(end - at), redact_token_prefixes[k], pl)) != NULL) {
			at += pl;
			for (e = (size_t)(at - s); e < n && is_token_char(s[e]); e++)
				mark[e] = 1;
		}
	}
}

/* scheme://user:secret@host and scheme://secret@host, also as :\/\/. */
static void
mark_url_credentials(const char *s, size_t n, uint8_t *mark)
{
	static const char *const seps[] = { "://", ":\\/\\/", NULL };
	const char *at, *end = s + n;
	size_t k, p, start, colon;

	for (k = 0; seps[k] != NULL; k++) {
		at = s;
		while ((at = memmem(at, (size_t)(end - at), seps[k], strlen(seps[k]))) != NULL) {
			at += strlen(seps[k]);
			start = p = (size_t)(at - s);
			colon = 0;
			while (p < n && strchr("/?#@ \t\r\n\"'<>\\", s[p]) == NULL && s[p] != '\0') {
				if (s[p] == ':' && colon == 0)
					colon = p;
				p++;
			}
			/* Cut before the host: what follows may be a credential. */
			if (p < n && s[p] != '@')
				continue;
			if (colon != 0)
				mark_range(mark, colon + 1, p - colon - 1);
			else
				mark_range(mark, start, p - start);
		}
	}
}

static uint8_t *
marks_of(const char *text, size_t len)
{
	uint8_t *mark = xcalloc(len > 0 ? len : 1, 1);

	mark_members(text, len, mark);
	mark_prefixes(text, len, mark);
	mark_url_credentials(text, len, mark);
	return mark;
}

void
redact_excerpt(struct buf *b, const char *text, size_t len, size_t max)
{
	uint8_t *mark = marks_of(text, len);
	size_t i = 0;

	while (i < len && i < max) {
		unsigned char c = (unsigned char)text[i];

		if (mark[i]) {
			buf_puts(b, "[REDACTED]");
			while (i < len && mark[i])
				i++;
			continue;
		}
		if (c == '\n')
			buf_puts(b, "\\n");
		else if (c < 0x20 || c == 0x7f)
			buf_printf(b, "\\x%02x", c);
		else
			buf_putc(b, (char)c);
		i++;
	}
	if (i < len)
		buf_printf(b, "... (%zu bytes)", len);
	free(mark);
}

char *
redact_copy(const char *text, size_t len, size_t *outlen)
{
	uint8_t *mark = marks_of(text, len);
	struct buf b;
	size_t i = 0, run;

	buf_init(&b, BUF_UNLIMITED);
	while (i < len) {
		if (mark[i]) {
			buf_puts(&b, "[REDACTED]");
			while (i < len && mark[i])
				i++;
			continue;
		}
		for (run = i; run < len && !mark[run]; run++)
			;
		buf_append(&b, text + i, run - i);
		i = run;
	}
	free(mark);
	return buf_detach(&b, outlen);
}

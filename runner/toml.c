/*
 * The TOML 1.0.0 parser and the value tree of runner/toml.h (the writer is
 * in toml_write.c).
 *
 * The parser is recursive descent over (ptr, len) bytes, one function per
 * grammar production, with a small cursor (struct toml_parser) that knows
 * the current line so that every value and every error gets a line and a
 * column.  It builds the tree as it reads and enforces TOML's rules about
 * which tables may be defined or extended where; each table's kind records
 * how it came to exist, which is all those rules need.  The first problem
 * stops the parse with a short git-style message.
 *
 * The tree never gets deeper than TOML_MAX_DEPTH, counting every table and
 * array on the way down (headers and dotted keys included), so the parser
 * and every recursive walk over a parsed tree have bounded stack use.
 * Tables keep their keys in definition order in a plain array; past a few
 * keys a hash index (struct toml_index) keeps lookups constant time, so a
 * table with many keys does not make parsing quadratic.
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "lib/xmalloc.h"
#include "runner/toml.h"

#define TOML_MAX_DEPTH	512	/* tables and arrays, root excluded */
#define TOML_INDEX_MIN	8	/* a table with more keys gets a hash index */
#define TOML_KEY_SHOW	80	/* bytes of a key quoted in an error message */
#define TOML_SHOW_SIZE	(TOML_KEY_SHOW + 4)
#define TOML_NOT_FOUND	((size_t)-1)

/* Open addressing with linear probing; at most half the slots are used. */
struct toml_index {
	size_t	 mask;		/* slots - 1, slots being a power of two */
	size_t	*slots;		/* position in the items array + 1; 0 is free */
};

/* A position in the input, enough to give a line and a column later. */
struct toml_mark {
	size_t	pos;
	size_t	line_start;
	int	line;
};

struct toml_keypart {
	char			*ptr;
	size_t			 len;
	bool			 owned;	/* false once a table took ptr over */
	struct toml_mark	 mark;
};

/* A dotted key as written: a.b."c d" has three parts. */
struct toml_key {
	struct toml_keypart	*parts;
	size_t			 len;
	size_t			 cap;
};

struct toml_parser {
	const char		*data;
	size_t			 len;
	size_t			 pos;
	int			 line;		/* line of pos, 1-based */
	size_t			 line_start;	/* offset where that line starts */

	/*
	 * Columns count characters, not bytes, so finding one means walking
	 * the line.  The last answer is kept so that values on one long line
	 * are found by walking forward from the previous one.
	 */
	size_t			 col_line_start;
	size_t			 col_pos;
	int			 col;

	struct buf		 scratch;	/* decoded strings, float text */
	struct toml_error	*err;
	bool			 failed;
};

static int	toml_parse_value(struct toml_parser *, struct toml_value **,
		    int);

/*
 * The tree.
 */

static struct toml_value *
toml_value_new(enum toml_type type)
{
	struct toml_value	*v;

	v = xcalloc(1, sizeof *v);
	v->type = type;
	return v;
}

static uint64_t
toml_hash(const char *key, size_t len)
{
	uint64_t	h = 0xcbf29ce484222325ULL;	/* FNV-1a */
	size_t		i;

	for (i = 0; i < len; i++) {
		h ^= (unsigned char)key[i];
		h *= 0x100000001b3ULL;
	}
	/* Fold the high bits in: only the low ones pick a slot. */
	return h ^ (h >> 29);
}

static void
toml_index_free(struct toml_value *t)
{
	struct toml_index	*ix = t->u.table.index;

	if (ix != NULL) {
		free(ix->slots);
		free(ix);
		t->u.table.index = NULL;
	}
}

static void
toml_index_add(struct toml_index *ix, const struct toml_kv *items, size_t pos)
{
	size_t	i;

	i = toml_hash(items[pos].key.ptr, items[pos].key.len) & ix->mask;
	while (ix->slots[i] != 0)
		i = (i + 1) & ix->mask;
	ix->slots[i] = pos + 1;
}

/* Make the index match the items again, or drop it for a small table. */
static void
toml_index_rebuild(struct toml_value *t)
{
	struct toml_index	*ix;
	size_t			 n = 32, i;

	toml_index_free(t);
	if (t->u.table.len <= TOML_INDEX_MIN)
		return;
	while (n / 2 < t->u.table.len)
		n *= 2;
	ix = xmalloc(sizeof *ix);
	ix->slots = xcalloc(n, sizeof *ix->slots);
	ix->mask = n - 1;
	for (i = 0; i < t->u.table.len; i++)
		toml_index_add(ix, t->u.table.items, i);
	t->u.table.index = ix;
}

static size_t
toml_table_find(const struct toml_value *t, const char *key, size_t len)
{
	const struct toml_index	*ix = t->u.table.index;
	const struct toml_kv	*kv;
	size_t			 i, pos;

	if (ix == NULL) {
		for (i = 0; i < t->u.table.len; i++) {
			kv = &t->u.table.items[i];
			if (kv->key.len == len && memcmp(kv->key.ptr, key, len) == 0)
				return i;
		}
		return TOML_NOT_FOUND;
	}
	i = toml_hash(key, len) & ix->mask;
	while ((pos = ix->slots[i]) != 0) {
		kv = &t->u.table.items[pos - 1];
		if (kv->key.len == len && memcmp(kv->key.ptr, key, len) == 0)
			return pos - 1;
		i = (i + 1) & ix->mask;
	}
	return TOML_NOT_FOUND;
}

/* Append a key that is not there yet; the table takes key (malloc'd). */
static void
toml_table_append(struct toml_value *t, char *key, size_t len,
    struct toml_value *v)
{
	struct toml_index	*ix;
	struct toml_kv		*kv;
	size_t			 cap;

	if (t->u.table.len == t->u.table.cap) {
		cap = t->u.table.cap == 0 ? 4 : t->u.table.cap * 2;
		t->u.table.items = xreallocarray(t->u.table.items, cap,
		    sizeof *t->u.table.items);
		t->u.table.cap = cap;
	}
	kv = &t->u.table.items[t->u.table.len++];
	kv->key.ptr = key;
	kv->key.len = len;
	kv->value = v;

	ix = t->u.table.index;
	if (ix == NULL || t->u.table.len > (ix->mask + 1) / 2)
		toml_index_rebuild(t);
	else
		toml_index_add(ix, t->u.table.items, t->u.table.len - 1);
}

void
toml_free(struct toml_value *v)
{
	size_t	i;

	if (v == NULL)
		return;
	switch (v->type) {
	case TOML_STRING:
		free(v->u.s.ptr);
		break;
	case TOML_ARRAY:
		for (i = 0; i < v->u.array.len; i++)
			toml_free(v->u.array.items[i]);
		free(v->u.array.items);
		break;
	case TOML_TABLE:
		for (i = 0; i < v->u.table.len; i++) {
			free(v->u.table.items[i].key.ptr);
			toml_free(v->u.table.items[i].value);
		}
		free(v->u.table.items);
		toml_index_free(v);
		break;
	default:
		break;
	}
	free(v);
}

struct toml_value *
toml_getn(const struct toml_value *t, const char *key, size_t keylen)
{
	size_t	pos;

	if (t == NULL || t->type != TOML_TABLE || (key == NULL && keylen != 0))
		return NULL;
	pos = toml_table_find(t, key == NULL ? "" : key, keylen);
	return pos == TOML_NOT_FOUND ? NULL : t->u.table.items[pos].value;
}

struct toml_value *
toml_get(const struct toml_value *t, const char *key)
{
	if (key == NULL)
		return NULL;
	return toml_getn(t, key, strlen(key));
}

struct toml_value *
toml_new_string(const char *s, size_t len)
{
	struct toml_value	*v;

	if (s == NULL)
		len = 0;
	v = toml_value_new(TOML_STRING);
	v->u.s.ptr = xmemdup(s == NULL ? "" : s, len);
	v->u.s.len = len;
	return v;
}

struct toml_value *
toml_new_integer(int64_t i)
{
	struct toml_value	*v;

	v = toml_value_new(TOML_INTEGER);
	v->u.i = i;
	return v;
}

struct toml_value *
toml_new_float(double f)
{
	struct toml_value	*v;

	v = toml_value_new(TOML_FLOAT);
	v->u.f = f;
	return v;
}

struct toml_value *
toml_new_bool(bool b)
{
	struct toml_value	*v;

	v = toml_value_new(TOML_BOOL);
	v->u.b = b;
	return v;
}

struct toml_value *
toml_new_datetime(enum toml_type type, const struct toml_datetime *dt)
{
	struct toml_value	*v;

	switch (type) {
	case TOML_DATETIME:
	case TOML_DATETIME_LOCAL:
	case TOML_DATE_LOCAL:
	case TOML_TIME_LOCAL:
		break;
	default:
		return NULL;
	}
	v = toml_value_new(type);
	if (dt != NULL)
		v->u.dt = *dt;
	return v;
}

struct toml_value *
toml_new_array(void)
{
	return toml_value_new(TOML_ARRAY);
}

struct toml_value *
toml_new_table(enum toml_table_kind kind)
{
	struct toml_value	*v;

	v = toml_value_new(TOML_TABLE);
	v->u.table.kind = kind;
	return v;
}

struct toml_value *
toml_clone(const struct toml_value *v)
{
	struct toml_value	*c;
	const struct toml_kv	*kv;
	size_t			 i, n;

	if (v == NULL)
		return NULL;
	c = toml_value_new(v->type);
	c->line = v->line;
	c->column = v->column;
	switch (v->type) {
	case TOML_STRING:
		c->u.s.ptr = xmemdup(v->u.s.ptr, v->u.s.len);
		c->u.s.len = v->u.s.len;
		break;
	case TOML_ARRAY:
		n = v->u.array.len;
		c->u.array.of_tables = v->u.array.of_tables;
		if (n == 0)
			break;
		c->u.array.items = xreallocarray(NULL, n, sizeof *c->u.array.items);
		for (i = 0; i < n; i++)
			c->u.array.items[i] = toml_clone(v->u.array.items[i]);
		c->u.array.len = c->u.array.cap = n;
		break;
	case TOML_TABLE:
		c->u.table.kind = v->u.table.kind;
		for (i = 0; i < v->u.table.len; i++) {
			kv = &v->u.table.items[i];
			toml_table_append(c, xmemdup(kv->key.ptr, kv->key.len),
			    kv->key.len, toml_clone(kv->value));
		}
		break;
	default:
		c->u = v->u;
		break;
	}
	return c;
}

void
toml_table_set(struct toml_value *t, const char *key, size_t keylen,
    struct toml_value *v)
{
	size_t	pos;

	if (t == NULL || t->type != TOML_TABLE || v == NULL ||
	    (key == NULL && keylen != 0)) {
		/* The caller gave v away either way. */
		toml_free(v);
		return;
	}
	if (key == NULL)
		key = "";
	pos = toml_table_find(t, key, keylen);
	if (pos != TOML_NOT_FOUND) {
		if (t->u.table.items[pos].value == v)
			return;
		toml_free(t->u.table.items[pos].value);
		t->u.table.items[pos].value = v;
		return;
	}
	toml_table_append(t, xmemdup(key, keylen), keylen, v);
}

int
toml_table_remove(struct toml_value *t, const char *key, size_t keylen)
{
	struct toml_kv	*items;
	size_t		 pos;

	if (t == NULL || t->type != TOML_TABLE || (key == NULL && keylen != 0))
		return -1;
	pos = toml_table_find(t, key == NULL ? "" : key, keylen);
	if (pos == TOML_NOT_FOUND)
		return -1;
	items = t->u.table.items;
	free(items[pos].key.ptr);
	toml_free(items[pos].value);
	memmove(&items[pos], &items[pos + 1],
	    (t->u.table.len - pos - 1) * sizeof *items);
	t->u.table.len--;
	/* Every later key moved down one place. */
	toml_index_rebuild(t);
	return 0;
}

void
toml_array_push(struct toml_value *a, struct toml_value *v)
{
	size_t	cap;

	if (a == NULL || a->type != TOML_ARRAY || v == NULL) {
		toml_free(v);
		return;
	}
	if (a->u.array.len == a->u.array.cap) {
		cap = a->u.array.cap == 0 ? 4 : a->u.array.cap * 2;
		a->u.array.items = xreallocarray(a->u.array.items, cap,
		    sizeof *a->u.array.items);
		a->u.array.cap = cap;
	}
	a->u.array.items[a->u.array.len++] = v;
}

void
toml_array_remove(struct toml_value *a, size_t i)
{
	struct toml_value	**items;

	if (a == NULL || a->type != TOML_ARRAY || i >= a->u.array.len)
		return;
	items = a->u.array.items;
	toml_free(items[i]);
	memmove(&items[i], &items[i + 1],
	    (a->u.array.len - i - 1) * sizeof *items);
	a->u.array.len--;
}

static bool
toml_datetime_equal(enum toml_type type, const struct toml_datetime *a,
    const struct toml_datetime *b)
{
	if (type != TOML_TIME_LOCAL && (a->year != b->year ||
	    a->month != b->month || a->day != b->day))
		return false;
	if (type != TOML_DATE_LOCAL && (a->hour != b->hour ||
	    a->minute != b->minute || a->second != b->second ||
	    a->nanosecond != b->nanosecond))
		return false;
	return type != TOML_DATETIME || a->offset_minutes == b->offset_minutes;
}

bool
toml_equal(const struct toml_value *a, const struct toml_value *b)
{
	const struct toml_kv	*kv;
	size_t			 i;

	if (a == b)
		return true;
	if (a == NULL || b == NULL || a->type != b->type)
		return false;
	switch (a->type) {
	case TOML_STRING:
		return a->u.s.len == b->u.s.len &&
		    memcmp(a->u.s.ptr, b->u.s.ptr, a->u.s.len) == 0;
	case TOML_INTEGER:
		return a->u.i == b->u.i;
	case TOML_FLOAT:
		if (isnan(a->u.f) || isnan(b->u.f))
			return isnan(a->u.f) && isnan(b->u.f);
		return a->u.f == b->u.f;
	case TOML_BOOL:
		return a->u.b == b->u.b;
	case TOML_DATETIME:
	case TOML_DATETIME_LOCAL:
	case TOML_DATE_LOCAL:
	case TOML_TIME_LOCAL:
		return toml_datetime_equal(a->type, &a->u.dt, &b->u.dt);
	case TOML_ARRAY:
		if (a->u.array.len != b->u.array.len)
			return false;
		for (i = 0; i < a->u.array.len; i++)
			if (!toml_equal(a->u.array.items[i], b->u.array.items[i]))
				return false;
		return true;
	case TOML_TABLE:
		/* Keys are unique, so same count and a in b means same set. */
		if (a->u.table.len != b->u.table.len)
			return false;
		for (i = 0; i < a->u.table.len; i++) {
			kv = &a->u.table.items[i];
			if (!toml_equal(kv->value,
			    toml_getn(b, kv->key.ptr, kv->key.len)))
				return false;
		}
		return true;
	}
	return false;
}

const char *
toml_type_name(enum toml_type type)
{
	switch (type) {
	case TOML_STRING:
		return "string";
	case TOML_INTEGER:
		return "integer";
	case TOML_FLOAT:
		return "float";
	case TOML_BOOL:
		return "bool";
	case TOML_DATETIME:
		return "datetime";
	case TOML_DATETIME_LOCAL:
		return "datetime-local";
	case TOML_DATE_LOCAL:
		return "date-local";
	case TOML_TIME_LOCAL:
		return "time-local";
	case TOML_ARRAY:
		return "array";
	case TOML_TABLE:
		return "table";
	}
	return "unknown";
}

/*
 * The cursor: positions, columns and errors.
 */

/* The byte off bytes ahead of the cursor, or -1 past the end. */
static int
toml_peek(const struct toml_parser *p, size_t off)
{
	if (off >= p->len - p->pos)
		return -1;
	return (unsigned char)p->data[p->pos + off];
}

static bool
toml_digit_at(const struct toml_parser *p, size_t off)
{
	int	c = toml_peek(p, off);

	return c >= '0' && c <= '9';
}

static struct toml_mark
toml_here(const struct toml_parser *p)
{
	struct toml_mark	m;

	m.pos = p->pos;
	m.line_start = p->line_start;
	m.line = p->line;
	return m;
}

static int
toml_column(struct toml_parser *p, const struct toml_mark *m)
{
	size_t	i;
	int	col;

	if (m->line_start == p->col_line_start && p->col_pos <= m->pos) {
		i = p->col_pos;
		col = p->col;
	} else {
		i = m->line_start;
		col = 1;
	}
	/* Count the bytes that start a UTF-8 character. */
	for (; i < m->pos; i++)
		if ((p->data[i] & 0xc0) != 0x80 && col < INT_MAX)
			col++;
	p->col_line_start = m->line_start;
	p->col_pos = m->pos;
	p->col = col;
	return col;
}

static void	toml_vfail(struct toml_parser *, const struct toml_mark *,
		    const char *, va_list) __attribute__((format(printf, 3, 0)));
static void	toml_fail(struct toml_parser *, const struct toml_mark *,
		    const char *, ...) __attribute__((format(printf, 3, 4)));
static void	toml_fail_here(struct toml_parser *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));

static void
toml_vfail(struct toml_parser *p, const struct toml_mark *m, const char *fmt,
    va_list ap)
{
	/* The first problem is the one worth reporting. */
	if (p->failed)
		return;
	p->failed = true;
	p->err->line = m->line;
	p->err->column = toml_column(p, m);
	vsnprintf(p->err->msg, sizeof p->err->msg, fmt, ap);
}

static void
toml_fail(struct toml_parser *p, const struct toml_mark *m, const char *fmt,
    ...)
{
	va_list	ap;

	va_start(ap, fmt);
	toml_vfail(p, m, fmt, ap);
	va_end(ap);
}

static void
toml_fail_here(struct toml_parser *p, const char *fmt, ...)
{
	struct toml_mark	m = toml_here(p);
	va_list			ap;

	va_start(ap, fmt);
	toml_vfail(p, &m, fmt, ap);
	va_end(ap);
}

/* Bytes of the newline at the cursor: 1 for LF, 2 for CRLF, else 0. */
static size_t
toml_newline_len(const struct toml_parser *p)
{
	int	c = toml_peek(p, 0);

	if (c == '\n')
		return 1;
	if (c == '\r' && toml_peek(p, 1) == '\n')
		return 2;
	return 0;
}

static void
toml_take_newline(struct toml_parser *p, size_t n)
{
	p->pos += n;
	if (p->line < INT_MAX)
		p->line++;
	p->line_start = p->pos;
}

static void
toml_skip_ws(struct toml_parser *p)
{
	while (p->pos < p->len &&
	    (p->data[p->pos] == ' ' || p->data[p->pos] == '\t'))
		p->pos++;
}

/* Length of the well-formed UTF-8 character at s, or 0. */
static size_t
toml_utf8_len(const unsigned char *s, size_t avail)
{
	unsigned char	lo = 0x80, hi = 0xbf;
	size_t		n, i;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		if (s[0] == 0xe0)
			lo = 0xa0;	/* overlong */
		else if (s[0] == 0xed)
			hi = 0x9f;	/* surrogates */
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		if (s[0] == 0xf0)
			lo = 0x90;	/* overlong */
		else if (s[0] == 0xf4)
			hi = 0x8f;	/* past U+10FFFF */
	} else
		return 0;
	if (avail < n || s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

/*
 * Length of the character at the cursor (not the end of input, not a
 * newline) when it may stand as it is in a comment or string: tab,
 * printable ASCII or well-formed UTF-8.  Otherwise report it, return 0.
 */
static size_t
toml_text_char(struct toml_parser *p, const char *where)
{
	int	c = toml_peek(p, 0);
	size_t	n;

	if (c == '\t' || (c >= 0x20 && c < 0x7f))
		return 1;
	if (c == '\r') {
		toml_fail_here(p, "carriage return without line feed in %s",
		    where);
		return 0;
	}
	if (c < 0x80) {
		toml_fail_here(p, "control character U+%04X in %s", c, where);
		return 0;
	}
	n = toml_utf8_len((const unsigned char *)p->data + p->pos,
	    p->len - p->pos);
	if (n == 0)
		toml_fail_here(p, "invalid UTF-8 in %s", where);
	return n;
}

/*
 * The structural expectation failed at the cursor.  Bad bytes there are
 * named as such: "expected a key" would hide an encoding problem.
 */
static void	toml_fail_expected(struct toml_parser *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));

static void
toml_fail_expected(struct toml_parser *p, const char *fmt, ...)
{
	struct toml_mark	m = toml_here(p);
	int			c = toml_peek(p, 0);
	va_list			ap;

	if (c >= 0x80 && toml_utf8_len((const unsigned char *)p->data +
	    p->pos, p->len - p->pos) == 0) {
		toml_fail_here(p, "invalid UTF-8");
		return;
	}
	if (c == '\r' && toml_peek(p, 1) != '\n') {
		toml_fail_here(p, "carriage return without line feed");
		return;
	}
	va_start(ap, fmt);
	toml_vfail(p, &m, fmt, ap);
	va_end(ap);
}

/* Append n bytes to a key being shown, or end it with "..." when full. */
static bool
toml_show_put(char *out, size_t *o, const char *s, size_t n)
{
	if (*o + n > TOML_KEY_SHOW) {
		memcpy(out + *o, "...", 4);
		return false;
	}
	memcpy(out + *o, s, n);
	*o += n;
	out[*o] = '\0';
	return true;
}

/*
 * Keys in messages: the first nparts parts joined with dots, with quotes,
 * backslashes and control characters escaped, cut at a character boundary
 * when long.  out has TOML_SHOW_SIZE bytes.
 */
static const char *
toml_key_show(const struct toml_key *k, size_t nparts, char *out)
{
	const struct toml_keypart	*part;
	size_t				 i, j, n, o = 0;
	unsigned char			 c;
	char				 esc[8];

	out[0] = '\0';
	for (i = 0; i < nparts; i++) {
		part = &k->parts[i];
		if (i > 0 && !toml_show_put(out, &o, ".", 1))
			return out;
		for (j = 0; j < part->len; j += n) {
			c = (unsigned char)part->ptr[j];
			n = 1;
			if (c == '"' || c == '\\')
				snprintf(esc, sizeof esc, "\\%c", c);
			else if (c < 0x20 || c == 0x7f)
				snprintf(esc, sizeof esc, "\\u%04X", c);
			else {
				if (c >= 0x80 && (n = toml_utf8_len((const
				    unsigned char *)part->ptr + j,
				    part->len - j)) == 0)
					n = 1;
				if (!toml_show_put(out, &o, part->ptr + j, n))
					return out;
				continue;
			}
			if (!toml_show_put(out, &o, esc, strlen(esc)))
				return out;
		}
	}
	return out;
}

/*
 * Comments, line ends and keys.
 */

static int
toml_parse_comment(struct toml_parser *p)
{
	size_t	n;

	p->pos++;	/* '#' */
	while (p->pos < p->len && toml_newline_len(p) == 0) {
		if ((n = toml_text_char(p, "comment")) == 0)
			return -1;
		p->pos += n;
	}
	return 0;
}

/* Whitespace, comments and newlines, as allowed inside arrays. */
static int
toml_skip_wscnl(struct toml_parser *p)
{
	size_t	n;

	for (;;) {
		toml_skip_ws(p);
		if (toml_peek(p, 0) == '#') {
			if (toml_parse_comment(p) == -1)
				return -1;
		} else if ((n = toml_newline_len(p)) > 0)
			toml_take_newline(p, n);
		else
			return 0;
	}
}

/* After a key/value pair or header: a comment, then a newline or the end. */
static int
toml_parse_line_end(struct toml_parser *p, const char *after)
{
	size_t	n;

	toml_skip_ws(p);
	if (toml_peek(p, 0) == '#' && toml_parse_comment(p) == -1)
		return -1;
	if (p->pos == p->len)
		return 0;
	if ((n = toml_newline_len(p)) > 0) {
		toml_take_newline(p, n);
		return 0;
	}
	toml_fail_expected(p, "expected end of line after %s", after);
	return -1;
}

static void
toml_key_free(struct toml_key *k)
{
	size_t	i;

	for (i = 0; i < k->len; i++)
		if (k->parts[i].owned)
			free(k->parts[i].ptr);
	free(k->parts);
	memset(k, 0, sizeof *k);
}

static bool
toml_is_bare(int c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static int	toml_parse_string(struct toml_parser *, struct toml_string *,
		    bool);

/* simple-key = quoted-key / unquoted-key */
static int
toml_parse_simple_key(struct toml_parser *p, struct toml_key *k)
{
	struct toml_keypart	 part;
	struct toml_string	 s;
	size_t			 start = p->pos;
	int			 c = toml_peek(p, 0);

	part.mark = toml_here(p);
	part.owned = true;
	if (c == '"' || c == '\'') {
		if (toml_parse_string(p, &s, false) == -1)
			return -1;
		part.ptr = s.ptr;
		part.len = s.len;
	} else {
		while (p->pos < p->len && toml_is_bare(p->data[p->pos]))
			p->pos++;
		if (p->pos == start) {
			toml_fail_expected(p, "expected a key");
			return -1;
		}
		part.len = p->pos - start;
		part.ptr = xmemdup(p->data + start, part.len);
	}
	if (k->len == k->cap) {
		k->cap = k->cap == 0 ? 4 : k->cap * 2;
		k->parts = xreallocarray(k->parts, k->cap, sizeof *k->parts);
	}
	k->parts[k->len++] = part;
	return 0;
}

/* key = simple-key *( ws "." ws simple-key ) */
static int
toml_parse_key(struct toml_parser *p, struct toml_key *k)
{
	for (;;) {
		if (k->len >= TOML_MAX_DEPTH) {
			toml_fail_here(p, "nesting too deep");
			return -1;
		}
		if (toml_parse_simple_key(p, k) == -1)
			return -1;
		toml_skip_ws(p);
		if (toml_peek(p, 0) != '.')
			return 0;
		p->pos++;
		toml_skip_ws(p);
	}
}

/*
 * Strings.  The decoded bytes collect in p->scratch.
 */

static void
toml_put_utf8(struct buf *b, uint32_t cp)
{
	char	u[4];
	size_t	n;

	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xc0 | (cp >> 6));
		u[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xe0 | (cp >> 12));
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (char)(0xf0 | (cp >> 18));
		u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	buf_append(b, u, n);
}

static int
toml_hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* \uXXXX or \UXXXXXXXX, the cursor after the u. */
static int
toml_parse_ucs(struct toml_parser *p, const struct toml_mark *m, int u)
{
	size_t		ndigits = u == 'u' ? 4 : 8, i;
	uint32_t	cp = 0;
	int		d;

	for (i = 0; i < ndigits; i++) {
		if ((d = toml_hex_value(toml_peek(p, i))) == -1) {
			toml_fail(p, m, "expected %zu hex digits after '\\%c' "
			    "in string", ndigits, u);
			return -1;
		}
		cp = cp << 4 | (uint32_t)d;
	}
	if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
		toml_fail(p, m, "invalid Unicode code point U+%04X in string",
		    (unsigned int)cp);
		return -1;
	}
	p->pos += ndigits;
	toml_put_utf8(&p->scratch, cp);
	return 0;
}

/*
 * A backslash escape in a basic string.  In a multi-line one a backslash
 * at the end of a line (trailing whitespace allowed) swallows the newline
 * and all whitespace and newlines after it.
 */
static int
toml_parse_escape(struct toml_parser *p, bool multiline)
{
	struct toml_mark	 m = toml_here(p);
	const char		*from = "btnfr\"\\", *to = "\b\t\n\f\r\"\\";
	const char		*e;
	int			 c = toml_peek(p, 1);
	size_t			 n;

	if (c == -1) {
		p->pos++;
		toml_fail_here(p, "unterminated string");
		return -1;
	}
	if (c != 0 && (e = strchr(from, c)) != NULL) {
		buf_putc(&p->scratch, to[e - from]);
		p->pos += 2;
		return 0;
	}
	if (c == 'u' || c == 'U') {
		p->pos += 2;
		return toml_parse_ucs(p, &m, c);
	}
	if (multiline && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
		p->pos++;
		toml_skip_ws(p);
		if (toml_newline_len(p) == 0) {
			toml_fail(p, &m, "invalid escape: only whitespace may "
			    "follow a line-ending backslash");
			return -1;
		}
		for (;;) {
			toml_skip_ws(p);
			if ((n = toml_newline_len(p)) == 0)
				return 0;
			toml_take_newline(p, n);
		}
	}
	if (c > 0x20 && c < 0x7f)
		toml_fail(p, &m, "invalid escape '\\%c' in string", c);
	else
		toml_fail(p, &m, "invalid escape in string");
	return -1;
}

/* Whether c ends a run of bytes that a string copies as they are. */
static bool
toml_string_special(int c, int quote)
{
	return c == quote || (c == '\\' && quote == '"') ||
	    (c < 0x20 && c != '\t') || c >= 0x7f;
}

/* "basic" or 'literal' on one line, the cursor after the opening quote. */
static int
toml_parse_line_string(struct toml_parser *p, const struct toml_mark *m,
    int quote)
{
	size_t	start, n;
	int	c;

	for (;;) {
		start = p->pos;
		while (p->pos < p->len &&
		    !toml_string_special((unsigned char)p->data[p->pos], quote))
			p->pos++;
		buf_append(&p->scratch, p->data + start, p->pos - start);
		c = toml_peek(p, 0);
		if (c == -1 || toml_newline_len(p) > 0) {
			toml_fail(p, m, "unterminated string");
			return -1;
		}
		if (c == quote) {
			p->pos++;
			return 0;
		}
		if (c == '\\') {
			if (toml_parse_escape(p, false) == -1)
				return -1;
			continue;
		}
		if ((n = toml_text_char(p, "string")) == 0)
			return -1;
		buf_append(&p->scratch, p->data + p->pos, n);
		p->pos += n;
	}
}

/*
 * """basic""" or '''literal''' over several lines, the cursor after the
 * opening delimiter and the newline that may follow it.  Up to two quotes
 * may stand right before the closing delimiter: """a""""" is a"".
 * Newlines are stored as LF whatever the file used.
 */
static int
toml_parse_ml_string(struct toml_parser *p, const struct toml_mark *m,
    int quote)
{
	size_t	start, n;
	int	c;

	for (;;) {
		start = p->pos;
		while (p->pos < p->len &&
		    !toml_string_special((unsigned char)p->data[p->pos], quote))
			p->pos++;
		buf_append(&p->scratch, p->data + start, p->pos - start);
		c = toml_peek(p, 0);
		if (c == -1) {
			toml_fail(p, m, "unterminated string");
			return -1;
		}
		if (c == quote) {
			for (n = 1; n < 5 && toml_peek(p, n) == quote; n++)
				;
			if (n >= 3) {
				buf_append(&p->scratch, p->data + p->pos, n - 3);
				p->pos += n;
				return 0;
			}
			buf_append(&p->scratch, p->data + p->pos, n);
			p->pos += n;
			continue;
		}
		if (c == '\\') {
			if (toml_parse_escape(p, true) == -1)
				return -1;
			continue;
		}
		if ((n = toml_newline_len(p)) > 0) {
			buf_putc(&p->scratch, '\n');
			toml_take_newline(p, n);
			continue;
		}
		if ((n = toml_text_char(p, "string")) == 0)
			return -1;
		buf_append(&p->scratch, p->data + p->pos, n);
		p->pos += n;
	}
}

/*
 * Any string at the cursor (which holds a quote) into out, newly
 * allocated.  Keys may not be multi-line strings: for them """ is the
 * empty string followed by a stray quote.
 */
static int
toml_parse_string(struct toml_parser *p, struct toml_string *out,
    bool multiline_ok)
{
	struct toml_mark	m = toml_here(p);
	int			quote = toml_peek(p, 0), rc;
	size_t			n;

	buf_reset(&p->scratch);
	if (multiline_ok && toml_peek(p, 1) == quote &&
	    toml_peek(p, 2) == quote) {
		p->pos += 3;
		if ((n = toml_newline_len(p)) > 0)
			toml_take_newline(p, n);
		rc = toml_parse_ml_string(p, &m, quote);
	} else {
		p->pos++;
		rc = toml_parse_line_string(p, &m, quote);
	}
	if (rc == -1)
		return -1;
	out->ptr = xmemdup(p->scratch.ptr, p->scratch.len);
	out->len = p->scratch.len;
	return 0;
}

/*
 * Numbers and booleans.
 */

/*
 * Length of a run of digits in base with single underscores between
 * digits, at the start of s; 0 when s does not start with a digit.
 */
static size_t
toml_digits(const char *s, size_t n, int base)
{
	size_t	i = 0;
	int	d;

	for (;;) {
		if (i >= n || (d = toml_hex_value(s[i])) == -1 || d >= base)
			return i > 0 && s[i - 1] == '_' ? i - 1 : i;
		i++;
		if (i < n && s[i] == '_')
			i++;
	}
}

/* Accumulate digits (underscores skipped) up to limit, or fail. */
static int
toml_accumulate(const char *s, size_t n, int base, uint64_t limit,
    uint64_t *out)
{
	uint64_t	v = 0;
	size_t		i;
	int		d;

	for (i = 0; i < n; i++) {
		if (s[i] == '_')
			continue;
		d = toml_hex_value(s[i]);
		if (v > (limit - (uint64_t)d) / (uint64_t)base)
			return -1;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	*out = v;
	return 0;
}

static struct toml_value *
toml_make_integer(struct toml_parser *p, const struct toml_mark *m,
    const char *s, size_t n, int base, bool neg)
{
	uint64_t	limit = (uint64_t)INT64_MAX + (neg ? 1 : 0), v;

	if (toml_accumulate(s, n, base, limit, &v) == -1) {
		toml_fail(p, m, "integer out of range");
		return NULL;
	}
	if (!neg)
		return toml_new_integer((int64_t)v);
	if (v == (uint64_t)INT64_MAX + 1)
		return toml_new_integer(INT64_MIN);
	return toml_new_integer(-(int64_t)v);
}

static struct toml_value *
toml_make_float(struct toml_parser *p, const struct toml_mark *m,
    const char *s, size_t n)
{
	char	*end;
	double	 f;
	size_t	 i;

	/* strtod wants the text without underscores and NUL-terminated. */
	buf_reset(&p->scratch);
	for (i = 0; i < n; i++)
		if (s[i] != '_')
			buf_putc(&p->scratch, s[i]);
	f = strtod(p->scratch.ptr, &end);
	if (end != p->scratch.ptr + p->scratch.len) {
		toml_fail(p, m, "invalid float");
		return NULL;
	}
	return toml_new_float(f);
}

/*
 * integer = dec-int / hex-int / oct-int / bin-int
 * float = float-int-part ( exp / frac [ exp ] ) / special-float
 * s is the whole word, which must be one of these exactly.
 */
static struct toml_value *
toml_parse_number(struct toml_parser *p, const struct toml_mark *m,
    const char *s, size_t n)
{
	size_t	i = 0, j, len;
	bool	neg = false;
	int	base;

	if (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-';
		i = 1;
	}
	if (n - i == 3 && memcmp(s + i, "inf", 3) == 0)
		return toml_new_float(neg ? -INFINITY : INFINITY);
	if (n - i == 3 && memcmp(s + i, "nan", 3) == 0)
		return toml_new_float(neg ? -NAN : NAN);

	/* Prefixed integers take no sign. */
	if (i == 0 && n > 2 && s[0] == '0' &&
	    (s[1] == 'x' || s[1] == 'o' || s[1] == 'b')) {
		base = s[1] == 'x' ? 16 : s[1] == 'o' ? 8 : 2;
		if (toml_digits(s + 2, n - 2, base) != n - 2)
			goto bad;
		return toml_make_integer(p, m, s + 2, n - 2, base, false);
	}

	if ((len = toml_digits(s + i, n - i, 10)) == 0)
		goto bad;
	if (s[i] == '0' && len > 1) {
		toml_fail(p, m, "leading zeros are not allowed in numbers");
		return NULL;
	}
	j = i + len;
	if (j == n)
		return toml_make_integer(p, m, s + i, len, 10, neg);
	if (s[j] == '.') {
		j++;
		if ((len = toml_digits(s + j, n - j, 10)) == 0)
			goto bad;
		j += len;
	}
	if (j < n && (s[j] == 'e' || s[j] == 'E')) {
		j++;
		if (j < n && (s[j] == '+' || s[j] == '-'))
			j++;
		if ((len = toml_digits(s + j, n - j, 10)) == 0)
			goto bad;
		j += len;
	}
	if (j != n)
		goto bad;
	return toml_make_float(p, m, s, n);
bad:
	toml_fail(p, m, "invalid number");
	return NULL;
}

static bool
toml_is_word(int c)
{
	return toml_is_bare(c) || c == '+' || c == '.';
}

/* true, false, a number, inf or nan: one word of value characters. */
static struct toml_value *
toml_parse_word(struct toml_parser *p, const struct toml_mark *m)
{
	const char	*s = p->data + p->pos;
	size_t		 n;
	int		 c = toml_peek(p, 0);

	while (p->pos < p->len && toml_is_word(p->data[p->pos]))
		p->pos++;
	n = (size_t)(p->data + p->pos - s);
	if (n == 4 && memcmp(s, "true", 4) == 0)
		return toml_new_bool(true);
	if (n == 5 && memcmp(s, "false", 5) == 0)
		return toml_new_bool(false);
	if ((c >= '0' && c <= '9') || c == '+' || c == '-' ||
	    (n == 3 && (memcmp(s, "inf", 3) == 0 || memcmp(s, "nan", 3) == 0)))
		return toml_parse_number(p, m, s, n);
	p->pos = m->pos;
	if (n > 0 && ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')))
		toml_fail(p, m, "expected a value (strings need quotes)");
	else
		toml_fail_expected(p, "expected a value");
	return NULL;
}

/*
 * Dates and times.
 */

/* Exactly n digits at the cursor. */
static int
toml_fixed_digits(struct toml_parser *p, size_t n, int *out)
{
	size_t	i;
	int	v = 0;

	for (i = 0; i < n; i++) {
		if (!toml_digit_at(p, i))
			return -1;
		v = v * 10 + (p->data[p->pos + i] - '0');
	}
	p->pos += n;
	*out = v;
	return 0;
}

static int
toml_expect_char(struct toml_parser *p, int c)
{
	if (toml_peek(p, 0) != c)
		return -1;
	p->pos++;
	return 0;
}

static int
toml_days_in_month(int year, int month)
{
	static const int	days[] = {
		31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31
	};

	if (month == 2 && year % 4 == 0 && (year % 100 != 0 || year % 400 == 0))
		return 29;
	return days[month - 1];
}

/* full-date = 4DIGIT "-" 2DIGIT "-" 2DIGIT */
static int
toml_parse_date(struct toml_parser *p, const struct toml_mark *m,
    struct toml_datetime *dt)
{
	if (toml_fixed_digits(p, 4, &dt->year) == -1 ||
	    toml_expect_char(p, '-') == -1 ||
	    toml_fixed_digits(p, 2, &dt->month) == -1 ||
	    toml_expect_char(p, '-') == -1 ||
	    toml_fixed_digits(p, 2, &dt->day) == -1) {
		toml_fail(p, m, "invalid date: expected YYYY-MM-DD");
		return -1;
	}
	if (dt->month < 1 || dt->month > 12 || dt->day < 1 ||
	    dt->day > toml_days_in_month(dt->year, dt->month)) {
		toml_fail(p, m, "invalid date: day or month out of range");
		return -1;
	}
	return 0;
}

/* partial-time = 2DIGIT ":" 2DIGIT ":" 2DIGIT [ "." 1*DIGIT ] */
static int
toml_parse_time(struct toml_parser *p, const struct toml_mark *m,
    struct toml_datetime *dt)
{
	int	ndigits = 0;

	if (toml_fixed_digits(p, 2, &dt->hour) == -1 ||
	    toml_expect_char(p, ':') == -1 ||
	    toml_fixed_digits(p, 2, &dt->minute) == -1 ||
	    toml_expect_char(p, ':') == -1 ||
	    toml_fixed_digits(p, 2, &dt->second) == -1) {
		toml_fail(p, m, "invalid time: expected HH:MM:SS");
		return -1;
	}
	if (toml_peek(p, 0) == '.') {
		p->pos++;
		if (!toml_digit_at(p, 0)) {
			toml_fail(p, m, "invalid time: expected digits after "
			    "'.'");
			return -1;
		}
		/* Keep nanoseconds; further digits are counted, not kept. */
		while (toml_digit_at(p, 0)) {
			if (ndigits < 9)
				dt->nanosecond = dt->nanosecond * 10 +
				    (p->data[p->pos] - '0');
			if (ndigits < INT_MAX)
				ndigits++;
			p->pos++;
		}
		dt->frac_digits = ndigits;
		for (; ndigits < 9; ndigits++)
			dt->nanosecond *= 10;
	}
	/* Second 60 is a leap second. */
	if (dt->hour > 23 || dt->minute > 59 || dt->second > 60) {
		toml_fail(p, m, "invalid time: hour, minute or second out of "
		    "range");
		return -1;
	}
	return 0;
}

/* time-offset = "Z" / ( "+" / "-" ) 2DIGIT ":" 2DIGIT */
static int
toml_parse_offset(struct toml_parser *p, const struct toml_mark *m,
    struct toml_datetime *dt)
{
	int	sign, hour, minute;

	if (toml_peek(p, 0) == 'Z' || toml_peek(p, 0) == 'z') {
		p->pos++;
		dt->offset_z = true;
		return 0;
	}
	sign = toml_peek(p, 0) == '-' ? -1 : 1;
	p->pos++;
	if (toml_fixed_digits(p, 2, &hour) == -1 ||
	    toml_expect_char(p, ':') == -1 ||
	    toml_fixed_digits(p, 2, &minute) == -1) {
		toml_fail(p, m, "invalid time offset: expected +HH:MM");
		return -1;
	}
	if (hour > 23 || minute > 59) {
		toml_fail(p, m, "invalid time offset: out of range");
		return -1;
	}
	dt->offset_minutes = sign * (hour * 60 + minute);
	return 0;
}

/*
 * A date-time value when the cursor holds one: 4 digits and '-' start a
 * date, 2 digits and ':' a time.  Returns 0 when neither.
 */
static int
toml_datetime_shape(const struct toml_parser *p)
{
	if (toml_digit_at(p, 0) && toml_digit_at(p, 1) && toml_digit_at(p, 2) &&
	    toml_digit_at(p, 3) && toml_peek(p, 4) == '-')
		return 'D';
	if (toml_digit_at(p, 0) && toml_digit_at(p, 1) && toml_peek(p, 2) == ':')
		return 'T';
	return 0;
}

static struct toml_value *
toml_parse_datetime(struct toml_parser *p, const struct toml_mark *m,
    int shape)
{
	struct toml_datetime	dt;
	enum toml_type		type;
	int			c;

	memset(&dt, 0, sizeof dt);
	if (shape == 'T') {
		if (toml_parse_time(p, m, &dt) == -1)
			return NULL;
		return toml_new_datetime(TOML_TIME_LOCAL, &dt);
	}
	if (toml_parse_date(p, m, &dt) == -1)
		return NULL;
	/* A space separates date and time only when a time follows. */
	c = toml_peek(p, 0);
	if (c == 'T' || c == 't' || (c == ' ' && toml_digit_at(p, 1) &&
	    toml_digit_at(p, 2) && toml_peek(p, 3) == ':')) {
		p->pos++;
		if (toml_parse_time(p, m, &dt) == -1)
			return NULL;
		c = toml_peek(p, 0);
		if (c == 'Z' || c == 'z' || c == '+' || c == '-') {
			if (toml_parse_offset(p, m, &dt) == -1)
				return NULL;
			type = TOML_DATETIME;
		} else
			type = TOML_DATETIME_LOCAL;
	} else
		type = TOML_DATE_LOCAL;
	return toml_new_datetime(type, &dt);
}

/*
 * Tables: the rules about what may be defined where.
 */

static struct toml_value *
toml_new_table_at(struct toml_parser *p, enum toml_table_kind kind,
    const struct toml_mark *m)
{
	struct toml_value	*t;

	t = toml_new_table(kind);
	t->line = m->line;
	t->column = toml_column(p, m);
	return t;
}

static struct toml_value *
toml_lookup(const struct toml_value *t, const struct toml_keypart *part)
{
	size_t	pos;

	pos = toml_table_find(t, part->ptr, part->len);
	return pos == TOML_NOT_FOUND ? NULL : t->u.table.items[pos].value;
}

/* What a value is, for messages about keys that already hold one. */
static const char *
toml_what(const struct toml_value *v)
{
	if (v->type == TOML_ARRAY && v->u.array.of_tables)
		return "array of tables";
	return toml_type_name(v->type);
}

/*
 * Add a new key from a key part.  The table takes the string over; the
 * part still points at it, for error messages about longer keys.
 */
static void
toml_add(struct toml_value *t, struct toml_keypart *part, struct toml_value *v)
{
	toml_table_append(t, part->ptr, part->len, v);
	part->owned = false;
}

/*
 * One step of a dotted key on a key/value line: into a table made by
 * dotted keys, or one that so far only exists as a prefix of a header.
 * Tables defined by a header or inline are closed to dotted keys.
 */
static struct toml_value *
toml_dotted_step(struct toml_parser *p, struct toml_value *t,
    struct toml_key *k, size_t i, int depth)
{
	struct toml_keypart	*part = &k->parts[i];
	struct toml_value	*v;
	char			 show[TOML_SHOW_SIZE];

	if (depth > TOML_MAX_DEPTH) {
		toml_fail(p, &part->mark, "nesting too deep");
		return NULL;
	}
	if ((v = toml_lookup(t, part)) == NULL) {
		v = toml_new_table_at(p, TOML_TABLE_DOTTED, &part->mark);
		toml_add(t, part, v);
		return v;
	}
	if (v->type != TOML_TABLE) {
		toml_fail(p, &part->mark, "key \"%s\" already defined as %s",
		    toml_key_show(k, i + 1, show),
		    toml_what(v));
		return NULL;
	}
	switch (v->u.table.kind) {
	case TOML_TABLE_IMPLICIT:
		v->u.table.kind = TOML_TABLE_DOTTED;
		return v;
	case TOML_TABLE_DOTTED:
		return v;
	case TOML_TABLE_HEADER:
		toml_fail(p, &part->mark, "table \"%s\" defined twice: dotted "
		    "keys cannot add to a [table]",
		    toml_key_show(k, i + 1, show));
		return NULL;
	case TOML_TABLE_INLINE:
		toml_fail(p, &part->mark, "inline table \"%s\" cannot be "
		    "extended", toml_key_show(k, i + 1, show));
		return NULL;
	}
	return NULL;
}

/* keyval = key keyval-sep val, added to t (at tree depth depth). */
static int
toml_parse_keyval(struct toml_parser *p, struct toml_value *t, int depth)
{
	struct toml_key		 key;
	struct toml_keypart	*last;
	struct toml_value	*v;
	char			 show[TOML_SHOW_SIZE];
	size_t			 i;
	int			 rc = -1;

	memset(&key, 0, sizeof key);
	if (toml_parse_key(p, &key) == -1)
		goto out;
	toml_skip_ws(p);
	if (toml_peek(p, 0) != '=') {
		toml_fail_expected(p, "expected '=' after key \"%s\"",
		    toml_key_show(&key, key.len, show));
		goto out;
	}
	p->pos++;
	toml_skip_ws(p);

	for (i = 0; i + 1 < key.len; i++) {
		t = toml_dotted_step(p, t, &key, i, ++depth);
		if (t == NULL)
			goto out;
	}
	last = &key.parts[key.len - 1];
	if (toml_lookup(t, last) != NULL) {
		toml_fail(p, &last->mark, "key \"%s\" defined twice",
		    toml_key_show(&key, key.len, show));
		goto out;
	}
	if (toml_parse_value(p, &v, depth + 1) == -1)
		goto out;
	toml_add(t, last, v);
	rc = 0;
out:
	toml_key_free(&key);
	return rc;
}

/*
 * One step of a header's key: through any table that is not inline, and
 * through an array of tables into its last element.  Missing tables are
 * made implicit, for a later header to define.
 */
static struct toml_value *
toml_header_step(struct toml_parser *p, struct toml_value *t,
    struct toml_key *k, size_t i, const struct toml_mark *m, int *depth)
{
	struct toml_keypart	*part = &k->parts[i];
	struct toml_value	*v, *last;
	char			 show[TOML_SHOW_SIZE];

	if (++*depth > TOML_MAX_DEPTH) {
		toml_fail(p, &part->mark, "nesting too deep");
		return NULL;
	}
	if ((v = toml_lookup(t, part)) == NULL) {
		v = toml_new_table_at(p, TOML_TABLE_IMPLICIT, m);
		toml_add(t, part, v);
		return v;
	}
	if (v->type == TOML_TABLE) {
		if (v->u.table.kind != TOML_TABLE_INLINE)
			return v;
		toml_fail(p, &part->mark, "inline table \"%s\" cannot be "
		    "extended", toml_key_show(k, i + 1, show));
		return NULL;
	}
	if (v->type == TOML_ARRAY && v->u.array.of_tables &&
	    v->u.array.len > 0) {
		last = v->u.array.items[v->u.array.len - 1];
		if (last->type == TOML_TABLE && ++*depth <= TOML_MAX_DEPTH)
			return last;
	}
	if (v->type == TOML_ARRAY && !v->u.array.of_tables)
		toml_fail(p, &part->mark, "static array \"%s\" cannot be "
		    "extended", toml_key_show(k, i + 1, show));
	else if (v->type == TOML_ARRAY)
		toml_fail(p, &part->mark, "nesting too deep");
	else
		toml_fail(p, &part->mark, "key \"%s\" already defined as %s",
		    toml_key_show(k, i + 1, show),
		    toml_what(v));
	return NULL;
}

/* The last key of [[a.b]]: append a table to the array of tables b. */
static struct toml_value *
toml_header_array(struct toml_parser *p, struct toml_value *t,
    struct toml_key *k, const struct toml_mark *m, int *depth)
{
	struct toml_keypart	*last = &k->parts[k->len - 1];
	struct toml_value	*a, *elem;
	char			 show[TOML_SHOW_SIZE];

	if ((*depth += 2) > TOML_MAX_DEPTH) {
		toml_fail(p, &last->mark, "nesting too deep");
		return NULL;
	}
	if ((a = toml_lookup(t, last)) == NULL) {
		a = toml_new_array();
		a->line = m->line;
		a->column = toml_column(p, m);
		a->u.array.of_tables = true;
		toml_add(t, last, a);
	} else if (a->type != TOML_ARRAY) {
		toml_fail(p, &last->mark, "key \"%s\" already defined as %s",
		    toml_key_show(k, k->len, show),
		    toml_what(a));
		return NULL;
	} else if (!a->u.array.of_tables) {
		toml_fail(p, &last->mark, "static array \"%s\" cannot be "
		    "extended", toml_key_show(k, k->len, show));
		return NULL;
	}
	elem = toml_new_table_at(p, TOML_TABLE_HEADER, m);
	toml_array_push(a, elem);
	return elem;
}

/* The last key of [a.b]: define table b, new or so far implicit. */
static struct toml_value *
toml_header_table(struct toml_parser *p, struct toml_value *t,
    struct toml_key *k, const struct toml_mark *m, int *depth)
{
	struct toml_keypart	*last = &k->parts[k->len - 1];
	struct toml_value	*v;
	char			 show[TOML_SHOW_SIZE];

	if (++*depth > TOML_MAX_DEPTH) {
		toml_fail(p, &last->mark, "nesting too deep");
		return NULL;
	}
	if ((v = toml_lookup(t, last)) == NULL) {
		v = toml_new_table_at(p, TOML_TABLE_HEADER, m);
		toml_add(t, last, v);
		return v;
	}
	if (v->type == TOML_TABLE && v->u.table.kind == TOML_TABLE_IMPLICIT) {
		v->u.table.kind = TOML_TABLE_HEADER;
		v->line = m->line;
		v->column = toml_column(p, m);
		return v;
	}
	if (v->type == TOML_TABLE)
		toml_fail(p, &last->mark, "table \"%s\" defined twice",
		    toml_key_show(k, k->len, show));
	else
		toml_fail(p, &last->mark, "key \"%s\" already defined as %s",
		    toml_key_show(k, k->len, show),
		    toml_what(v));
	return NULL;
}

/*
 * std-table = "[" ws key ws "]", array-table = "[[" ws key ws "]]".
 * On success *cur is the table that the following key/value lines fill,
 * and *depth its depth in the tree.
 */
static int
toml_parse_header(struct toml_parser *p, struct toml_value *root,
    struct toml_value **cur, int *depth)
{
	struct toml_mark	 m = toml_here(p);
	struct toml_key		 key;
	struct toml_value	*t = root;
	char			 show[TOML_SHOW_SIZE];
	bool			 array;
	size_t			 i;
	int			 d = 0, rc = -1;

	memset(&key, 0, sizeof key);
	p->pos++;
	array = toml_peek(p, 0) == '[';
	if (array)
		p->pos++;
	toml_skip_ws(p);
	if (toml_parse_key(p, &key) == -1)
		goto out;
	toml_skip_ws(p);
	if (toml_peek(p, 0) != ']' || (array && toml_peek(p, 1) != ']')) {
		toml_fail_expected(p, "expected '%s' after table name \"%s\"",
		    array ? "]]" : "]",
		    toml_key_show(&key, key.len, show));
		goto out;
	}
	p->pos += array ? 2 : 1;

	for (i = 0; i + 1 < key.len; i++)
		if ((t = toml_header_step(p, t, &key, i, &m, &d)) == NULL)
			goto out;
	if (array)
		t = toml_header_array(p, t, &key, &m, &d);
	else
		t = toml_header_table(p, t, &key, &m, &d);
	if (t == NULL)
		goto out;
	*cur = t;
	*depth = d;
	rc = 0;
out:
	toml_key_free(&key);
	return rc;
}

/*
 * Arrays and inline tables.
 */

/* array = "[" values with optional trailing comma, comments, newlines "]" */
static int
toml_parse_array(struct toml_parser *p, struct toml_value *a,
    const struct toml_mark *m, int depth)
{
	struct toml_value	*v;
	int			 c;

	p->pos++;
	for (;;) {
		if (toml_skip_wscnl(p) == -1)
			return -1;
		if (toml_peek(p, 0) == ']') {
			p->pos++;
			return 0;
		}
		if (toml_peek(p, 0) == -1) {
			toml_fail(p, m, "unterminated array");
			return -1;
		}
		if (toml_parse_value(p, &v, depth + 1) == -1)
			return -1;
		toml_array_push(a, v);
		if (toml_skip_wscnl(p) == -1)
			return -1;
		c = toml_peek(p, 0);
		if (c == ']') {
			p->pos++;
			return 0;
		}
		if (c == -1) {
			toml_fail(p, m, "unterminated array");
			return -1;
		}
		if (c != ',') {
			toml_fail_expected(p, "expected ',' or ']' in array");
			return -1;
		}
		p->pos++;
	}
}

/*
 * inline-table = "{" ws [ keyval *( ws "," ws keyval ) ] ws "}", all on
 * one line (values such as arrays may still span lines), no trailing
 * comma.
 */
static int
toml_parse_inline_table(struct toml_parser *p, struct toml_value *t,
    int depth)
{
	int	c;

	p->pos++;
	toml_skip_ws(p);
	if (toml_peek(p, 0) == '}') {
		p->pos++;
		return 0;
	}
	for (;;) {
		if (toml_parse_keyval(p, t, depth) == -1)
			return -1;
		toml_skip_ws(p);
		c = toml_peek(p, 0);
		if (c == '}') {
			p->pos++;
			return 0;
		}
		if (c != ',') {
			toml_fail_expected(p, "expected ',' or '}' in inline "
			    "table");
			return -1;
		}
		p->pos++;
		toml_skip_ws(p);
		if (toml_peek(p, 0) == '}') {
			toml_fail_here(p, "trailing comma not allowed in "
			    "inline table");
			return -1;
		}
	}
}

/* val, at depth in the tree. */
static int
toml_parse_value(struct toml_parser *p, struct toml_value **out, int depth)
{
	struct toml_mark	 m = toml_here(p);
	struct toml_value	*v;
	struct toml_string	 s;
	int			 c = toml_peek(p, 0), line = m.line, column, rc;

	*out = NULL;
	column = toml_column(p, &m);
	if (c == '[' || c == '{') {
		if (depth > TOML_MAX_DEPTH) {
			toml_fail_here(p, "nesting too deep");
			return -1;
		}
		if (c == '[') {
			v = toml_new_array();
			rc = toml_parse_array(p, v, &m, depth);
		} else {
			v = toml_new_table(TOML_TABLE_INLINE);
			rc = toml_parse_inline_table(p, v, depth);
		}
		if (rc == -1) {
			toml_free(v);
			return -1;
		}
	} else if (c == '"' || c == '\'') {
		if (toml_parse_string(p, &s, true) == -1)
			return -1;
		v = toml_value_new(TOML_STRING);
		v->u.s = s;
	} else if ((c = toml_datetime_shape(p)) != 0)
		v = toml_parse_datetime(p, &m, c);
	else
		v = toml_parse_word(p, &m);
	if (v == NULL)
		return -1;
	v->line = line;
	v->column = column;
	*out = v;
	return 0;
}

/*
 * The document: expression *( newline expression ).
 */

static int
toml_parse_document(struct toml_parser *p, struct toml_value *root)
{
	struct toml_value	*cur = root;
	int			 depth = 0, c;

	for (;;) {
		toml_skip_ws(p);
		c = toml_peek(p, 0);
		if (c == -1)
			return 0;
		if (c == '#' || c == '\n' || c == '\r') {
			if (toml_parse_line_end(p, "comment") == -1)
				return -1;
			continue;
		}
		if (c == '[') {
			if (toml_parse_header(p, root, &cur, &depth) == -1 ||
			    toml_parse_line_end(p, "table header") == -1)
				return -1;
			continue;
		}
		if (toml_parse_keyval(p, cur, depth) == -1 ||
		    toml_parse_line_end(p, "value") == -1)
			return -1;
	}
}

struct toml_value *
toml_parse(const char *data, size_t len, struct toml_error *err)
{
	struct toml_parser	 p;
	struct toml_error	 ignored;
	struct toml_value	*root;

	if (err == NULL)
		err = &ignored;
	memset(err, 0, sizeof *err);
	memset(&p, 0, sizeof p);
	p.data = data == NULL ? "" : data;
	p.len = data == NULL ? 0 : len;
	p.line = 1;
	p.col = 1;
	p.err = err;
	buf_init(&p.scratch, BUF_UNLIMITED);

	/* A byte order mark is not part of the first line's columns. */
	if (p.len >= 3 && memcmp(p.data, "\xef\xbb\xbf", 3) == 0)
		p.pos = p.line_start = 3;

	root = toml_new_table(TOML_TABLE_HEADER);
	root->line = 1;
	root->column = 1;
	if (toml_parse_document(&p, root) == -1) {
		toml_free(root);
		root = NULL;
	}
	buf_release(&p.scratch);
	return root;
}

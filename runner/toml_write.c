/*
 * Writing a TOML tree back out as a document.
 *
 * config.toml is rewritten by register and token rotation, and it must come
 * back with every entry, unknown key and table the user had, so the writer
 * is exact rather than pretty: re-parsing its output gives a tree equal to
 * the one written (the fuzzer checks this).  The layout imitates what
 * gitlab-runner writes, so that a file both programs touch does not churn:
 * plain keys first, then [tables] and [[arrays of tables]], each level of
 * sub-table indented by two spaces.
 *
 * A table is written in one of three ways, chosen by how it was made:
 * as a [header] section (HEADER, IMPLICIT), as dotted keys inside its
 * parent's section (DOTTED), or inline as { ... } (INLINE, and everything
 * nested in an inline value).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "runner/toml.h"

/* A path of keys from the root to the table being written. */
struct path {
	const struct toml_string	**keys;
	size_t				  len;
	size_t				  cap;
};

struct writer {
	struct buf	*out;
	int		 err;		/* first error; writing stops at it */
	struct path	 path;
	bool		 wrote_any;	/* for blank lines between sections */
};

static void	write_inline(struct writer *, const struct toml_value *);
static void	write_section(struct writer *, const struct toml_value *, bool);

static void
emit(struct writer *w, const void *p, size_t len)
{
	if (w->err == 0 && buf_append(w->out, p, len) != 0)
		w->err = -ENOSPC;
}

static void
emits(struct writer *w, const char *s)
{
	emit(w, s, strlen(s));
}

static void
indent(struct writer *w, size_t n)
{
	static const char spaces[] = "                                ";

	while (n > 0) {
		size_t k = n < sizeof(spaces) - 1 ? n : sizeof(spaces) - 1;
		emit(w, spaces, k);
		n -= k;
	}
}

/* Length of the UTF-8 sequence at p (1..4), or 0 if it is not valid. */
static size_t
utf8_len(const unsigned char *p, size_t avail)
{
	uint32_t cp;
	size_t n, i;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (avail < n)
		return 0;
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	/* Overlong forms, surrogates and code points past U+10FFFF. */
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return n;
}

/*
 * A basic string with every control character escaped.  TOML cannot hold
 * bytes that are not UTF-8, so such a value is an error rather than being
 * silently changed.
 */
static void
write_string(struct writer *w, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	char esc[8];
	size_t i = 0, n;

	emit(w, "\"", 1);
	while (i < len) {
		unsigned char c = p[i];

		switch (c) {
		case '"':  emit(w, "\\\"", 2); i++; continue;
		case '\\': emit(w, "\\\\", 2); i++; continue;
		case '\b': emit(w, "\\b", 2); i++; continue;
		case '\t': emit(w, "\\t", 2); i++; continue;
		case '\n': emit(w, "\\n", 2); i++; continue;
		case '\f': emit(w, "\\f", 2); i++; continue;
		case '\r': emit(w, "\\r", 2); i++; continue;
		default:
			break;
		}
		if (c < 0x20 || c == 0x7f) {
			snprintf(esc, sizeof(esc), "\\u%04X", c);
			emit(w, esc, 6);
			i++;
			continue;
		}
		if ((n = utf8_len(p + i, len - i)) == 0) {
			if (w->err == 0)
				w->err = -EILSEQ;
			return;
		}
		emit(w, p + i, n);
		i += n;
	}
	emit(w, "\"", 1);
}

static bool
is_bare_key(const struct toml_string *k)
{
	size_t i;

	if (k->len == 0)
		return false;
	for (i = 0; i < k->len; i++) {
		char c = k->ptr[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return false;
	}
	return true;
}

static void
write_key(struct writer *w, const struct toml_string *k)
{
	if (is_bare_key(k))
		emit(w, k->ptr, k->len);
	else
		write_string(w, k->ptr, k->len);
}

/* The shortest decimal form that reads back as the same double. */
static void
write_float(struct writer *w, double f)
{
	char tmp[40];
	int prec;

	if (isnan(f)) {
		emits(w, "nan");
		return;
	}
	if (isinf(f)) {
		emits(w, f < 0 ? "-inf" : "inf");
		return;
	}
	for (prec = 1; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*g", prec, f);
		if (strtod(tmp, NULL) == f)
			break;
	}
	emits(w, tmp);
	/* TOML tells floats from integers by a fraction or an exponent. */
	if (strpbrk(tmp, ".e") == NULL)
		emits(w, ".0");
}

static void
write_datetime(struct writer *w, enum toml_type type, const struct toml_datetime *dt)
{
	char tmp[64];
	int digits, i;
	long frac;

	if (type != TOML_TIME_LOCAL) {
		snprintf(tmp, sizeof(tmp), "%04d-%02d-%02d", dt->year, dt->month, dt->day);
		emits(w, tmp);
		if (type == TOML_DATE_LOCAL)
			return;
		emits(w, "T");
	}
	snprintf(tmp, sizeof(tmp), "%02d:%02d:%02d", dt->hour, dt->minute, dt->second);
	emits(w, tmp);

	digits = dt->frac_digits > 9 ? 9 : dt->frac_digits < 0 ? 0 : dt->frac_digits;
	frac = dt->nanosecond;
	if (digits == 0 && frac != 0) {
		/* Built in code, not parsed: drop trailing zeros. */
		digits = 9;
		while (digits > 1 && frac % 10 == 0) {
			frac /= 10;
			digits--;
		}
	} else {
		for (i = digits; i < 9; i++)
			frac /= 10;
	}
	if (digits > 0) {
		/* By hand: the width is data, and snprintf's check cannot see it is <= 9. */
		tmp[0] = '.';
		for (i = digits; i > 0; i--) {
			tmp[i] = (char)('0' + frac % 10);
			frac /= 10;
		}
		emit(w, tmp, (size_t)digits + 1);
	}

	if (type != TOML_DATETIME)
		return;
	if (dt->offset_z || dt->offset_minutes == 0) {
		emits(w, "Z");
	} else {
		int off = dt->offset_minutes < 0 ? -dt->offset_minutes : dt->offset_minutes;

		snprintf(tmp, sizeof(tmp), "%c%02d:%02d",
		    dt->offset_minutes < 0 ? '-' : '+', off / 60, off % 60);
		emits(w, tmp);
	}
}

static void
write_inline(struct writer *w, const struct toml_value *v)
{
	char tmp[32];
	size_t i;

	switch (v->type) {
	case TOML_STRING:
		write_string(w, v->u.s.ptr, v->u.s.len);
		break;
	case TOML_INTEGER:
		snprintf(tmp, sizeof(tmp), "%" PRId64, v->u.i);
		emits(w, tmp);
		break;
	case TOML_FLOAT:
		write_float(w, v->u.f);
		break;
	case TOML_BOOL:
		emits(w, v->u.b ? "true" : "false");
		break;
	case TOML_DATETIME:
	case TOML_DATETIME_LOCAL:
	case TOML_DATE_LOCAL:
	case TOML_TIME_LOCAL:
		write_datetime(w, v->type, &v->u.dt);
		break;
	case TOML_ARRAY:
		emits(w, "[");
		for (i = 0; i < v->u.array.len; i++) {
			if (i > 0)
				emits(w, ", ");
			write_inline(w, v->u.array.items[i]);
		}
		emits(w, "]");
		break;
	case TOML_TABLE:
		if (v->u.table.len == 0) {
			emits(w, "{}");
			break;
		}
		emits(w, "{ ");
		for (i = 0; i < v->u.table.len; i++) {
			if (i > 0)
				emits(w, ", ");
			write_key(w, &v->u.table.items[i].key);
			emits(w, " = ");
			write_inline(w, v->u.table.items[i].value);
		}
		emits(w, " }");
		break;
	}
}

/* Tables that become [sections] rather than a value on a key line. */
static bool
is_section(const struct toml_value *v)
{
	return v->type == TOML_TABLE &&
	    (v->u.table.kind == TOML_TABLE_HEADER ||
	    v->u.table.kind == TOML_TABLE_IMPLICIT);
}

static bool
is_array_of_tables(const struct toml_value *v)
{
	size_t i;

	if (v->type != TOML_ARRAY || !v->u.array.of_tables || v->u.array.len == 0)
		return false;
	for (i = 0; i < v->u.array.len; i++)
		if (v->u.array.items[i]->type != TOML_TABLE)
			return false;
	return true;
}

static bool
is_dotted(const struct toml_value *v)
{
	return v->type == TOML_TABLE && v->u.table.kind == TOML_TABLE_DOTTED &&
	    v->u.table.len > 0;
}

static void
path_push(struct writer *w, const struct toml_string *k)
{
	struct path *p = &w->path;

	if (p->len == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 8;
		const struct toml_string **keys = realloc(p->keys, cap * sizeof(*keys));

		if (keys == NULL) {
			w->err = -ENOMEM;
			return;
		}
		p->keys = keys;
		p->cap = cap;
	}
	p->keys[p->len++] = k;
}

static void
path_pop(struct writer *w)
{
	if (w->path.len > 0)
		w->path.len--;
}

/* Write the key lines of table t: everything that is not a section. */
static void
write_body_keys(struct writer *w, const struct toml_value *t, size_t depth,
    size_t prefix_from)
{
	size_t i, j;

	for (i = 0; i < t->u.table.len; i++) {
		const struct toml_kv *kv = &t->u.table.items[i];

		if (is_section(kv->value) || is_array_of_tables(kv->value))
			continue;
		if (is_dotted(kv->value)) {
			path_push(w, &kv->key);
			write_body_keys(w, kv->value, depth, prefix_from);
			path_pop(w);
			continue;
		}
		indent(w, depth * 2);
		/* Keys of dotted tables are written as a.b.c = value. */
		for (j = prefix_from; j < w->path.len; j++) {
			write_key(w, w->path.keys[j]);
			emits(w, ".");
		}
		write_key(w, &kv->key);
		emits(w, " = ");
		write_inline(w, kv->value);
		emits(w, "\n");
	}
}

static bool
has_body_keys(const struct toml_value *t)
{
	size_t i;

	for (i = 0; i < t->u.table.len; i++) {
		const struct toml_value *v = t->u.table.items[i].value;

		if (is_dotted(v)) {
			if (has_body_keys(v))
				return true;
		} else if (!is_section(v) && !is_array_of_tables(v))
			return true;
	}
	return false;
}

static bool
has_sections(const struct toml_value *t)
{
	size_t i;

	for (i = 0; i < t->u.table.len; i++) {
		const struct toml_value *v = t->u.table.items[i].value;

		if (is_section(v) || is_array_of_tables(v) ||
		    (is_dotted(v) && has_sections(v)))
			return true;
	}
	return false;
}

static void
write_header(struct writer *w, bool array)
{
	size_t i;

	/* A blank line before each top-level section, as gitlab-runner does. */
	if (w->path.len == 1 && w->wrote_any)
		emits(w, "\n");
	indent(w, (w->path.len - 1) * 2);
	emits(w, array ? "[[" : "[");
	for (i = 0; i < w->path.len; i++) {
		if (i > 0)
			emits(w, ".");
		write_key(w, w->path.keys[i]);
	}
	emits(w, array ? "]]\n" : "]\n");
	w->wrote_any = true;
}

/* The sections below t (whose own path is w->path). */
static void
write_subsections(struct writer *w, const struct toml_value *t)
{
	size_t i, j;

	for (i = 0; i < t->u.table.len && w->err == 0; i++) {
		const struct toml_kv *kv = &t->u.table.items[i];

		path_push(w, &kv->key);
		if (is_section(kv->value)) {
			write_section(w, kv->value, false);
		} else if (is_array_of_tables(kv->value)) {
			for (j = 0; j < kv->value->u.array.len; j++)
				write_section(w, kv->value->u.array.items[j], true);
		} else if (is_dotted(kv->value)) {
			/* Its keys went into our body; its sections come here. */
			write_subsections(w, kv->value);
		}
		path_pop(w);
	}
}

/*
 * One [section] (or [[element]]) at w->path, then what is below it.  An
 * implicit table with nothing of its own gets no header: [a.b] alone is
 * enough to bring a back.  An empty table always gets one, or it would be
 * lost.
 */
static void
write_section(struct writer *w, const struct toml_value *t, bool array_elem)
{
	bool body = has_body_keys(t);

	if (array_elem || body || t->u.table.kind == TOML_TABLE_HEADER ||
	    !has_sections(t)) {
		write_header(w, array_elem);
		write_body_keys(w, t, w->path.len, w->path.len);
	}
	write_subsections(w, t);
}

int
toml_write(const struct toml_value *root, struct buf *out)
{
	struct writer w = { .out = out };

	if (root == NULL || root->type != TOML_TABLE)
		return -EINVAL;
	write_body_keys(&w, root, 0, 0);
	w.wrote_any = has_body_keys(root);
	write_subsections(&w, root);
	free(w.path.keys);
	return w.err;
}

/*
 * toml_decode: the TOML parser seen from outside, for the conformance
 * tests.  Each file named on the command line is read as raw bytes and
 * parsed; one JSON object per file goes to stdout, with the document in
 * toml-test's tagged form (scalars as {"type": ..., "value": ...}) or the
 * error as "LINE:COL: message".  Parse errors are data, not failures: the
 * exit status is 0 unless a file could not be read (2).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/xmalloc.h"
#include "runner/toml.h"

static void	json_value(FILE *, const struct toml_value *);

/*
 * A JSON string.  Valid UTF-8 passes through; any other byte (the parser
 * never produces one, but file names and messages are not checked) is
 * written as the U+FFFD replacement so that the line stays valid JSON.
 */
static void
json_string(FILE *f, const char *s, size_t len)
{
	const unsigned char	*u = (const unsigned char *)s;
	size_t			 i, n, k;

	fputc('"', f);
	for (i = 0; i < len; i += n) {
		n = 1;
		switch (u[i]) {
		case '"':
			fputs("\\\"", f);
			continue;
		case '\\':
			fputs("\\\\", f);
			continue;
		case '\n':
			fputs("\\n", f);
			continue;
		case '\t':
			fputs("\\t", f);
			continue;
		case '\r':
			fputs("\\r", f);
			continue;
		}
		if (u[i] < 0x20 || u[i] == 0x7f) {
			fprintf(f, "\\u%04x", u[i]);
			continue;
		}
		if (u[i] < 0x80) {
			fputc(u[i], f);
			continue;
		}
		/* A well-formed multi-byte sequence, or one bad byte. */
		n = u[i] >= 0xf0 ? 4 : u[i] >= 0xe0 ? 3 : u[i] >= 0xc0 ? 2 : 0;
		if (u[i] > 0xf4 || u[i] < 0xc2 || i + n > len)
			n = 0;
		for (k = 1; k < n; k++)
			if ((u[i + k] & 0xc0) != 0x80)
				n = 0;
		if (n == 3 && ((u[i] == 0xe0 && u[i + 1] < 0xa0) ||
		    (u[i] == 0xed && u[i + 1] > 0x9f)))
			n = 0;
		if (n == 4 && ((u[i] == 0xf0 && u[i + 1] < 0x90) ||
		    (u[i] == 0xf4 && u[i + 1] > 0x8f)))
			n = 0;
		if (n == 0) {
			fputs("\\ufffd", f);
			n = 1;
		} else
			fwrite(u + i, 1, n, f);
	}
	fputc('"', f);
}

static void
json_cstring(FILE *f, const char *s)
{
	json_string(f, s, strlen(s));
}

/* The shortest %g text that reads back as the same double. */
static void
format_float(char *out, size_t outsz, double d)
{
	int	prec;

	if (isnan(d)) {
		snprintf(out, outsz, "nan");
		return;
	}
	if (isinf(d)) {
		snprintf(out, outsz, "%s", d < 0 ? "-inf" : "inf");
		return;
	}
	for (prec = 1; prec < 17; prec++) {
		snprintf(out, outsz, "%.*g", prec, d);
		if (strtod(out, NULL) == d)
			return;
	}
	snprintf(out, outsz, "%.17g", d);
}

/* RFC 3339 text, with T, the fraction as written and Z when written so. */
static void
format_datetime(char *out, size_t outsz, enum toml_type type,
    const struct toml_datetime *dt)
{
	size_t	o = 0;
	int	digits, frac, i;

	if (type != TOML_TIME_LOCAL)
		o += (size_t)snprintf(out + o, outsz - o, "%04d-%02d-%02d",
		    dt->year, dt->month, dt->day);
	if (type == TOML_DATE_LOCAL)
		return;
	if (type != TOML_TIME_LOCAL)
		out[o++] = 'T';
	o += (size_t)snprintf(out + o, outsz - o, "%02d:%02d:%02d", dt->hour,
	    dt->minute, dt->second);
	if (dt->frac_digits > 0) {
		digits = dt->frac_digits > 9 ? 9 : dt->frac_digits;
		frac = dt->nanosecond;
		for (i = digits; i < 9; i++)
			frac /= 10;
		o += (size_t)snprintf(out + o, outsz - o, ".%0*d", digits,
		    frac);
	}
	if (type != TOML_DATETIME)
		return;
	if (dt->offset_z)
		snprintf(out + o, outsz - o, "Z");
	else
		snprintf(out + o, outsz - o, "%c%02d:%02d",
		    dt->offset_minutes < 0 ? '-' : '+',
		    abs(dt->offset_minutes) / 60, abs(dt->offset_minutes) % 60);
}

static void
json_scalar(FILE *f, const struct toml_value *v)
{
	char	text[128];

	switch (v->type) {
	case TOML_STRING:
		fputs("{\"type\": \"string\", \"value\": ", f);
		json_string(f, v->u.s.ptr, v->u.s.len);
		fputc('}', f);
		return;
	case TOML_INTEGER:
		snprintf(text, sizeof text, "%" PRId64, v->u.i);
		break;
	case TOML_FLOAT:
		format_float(text, sizeof text, v->u.f);
		break;
	case TOML_BOOL:
		snprintf(text, sizeof text, "%s", v->u.b ? "true" : "false");
		break;
	default:
		format_datetime(text, sizeof text, v->type, &v->u.dt);
		break;
	}
	fprintf(f, "{\"type\": \"%s\", \"value\": \"%s\"}",
	    toml_type_name(v->type), text);
}

static void
json_value(FILE *f, const struct toml_value *v)
{
	const struct toml_kv	*kv;
	size_t			 i;

	switch (v->type) {
	case TOML_ARRAY:
		fputc('[', f);
		for (i = 0; i < v->u.array.len; i++) {
			if (i > 0)
				fputs(", ", f);
			json_value(f, v->u.array.items[i]);
		}
		fputc(']', f);
		break;
	case TOML_TABLE:
		fputc('{', f);
		for (i = 0; i < v->u.table.len; i++) {
			kv = &v->u.table.items[i];
			if (i > 0)
				fputs(", ", f);
			json_string(f, kv->key.ptr, kv->key.len);
			fputs(": ", f);
			json_value(f, kv->value);
		}
		fputc('}', f);
		break;
	default:
		json_scalar(f, v);
		break;
	}
}

/* The whole file, which may hold NUL bytes; NULL with errno set. */
static char *
read_file(const char *path, size_t *lenp)
{
	FILE	*f;
	char	*data = NULL;
	size_t	 len = 0, cap = 0, n;
	int	 saved;

	if ((f = fopen(path, "rb")) == NULL)
		return NULL;
	for (;;) {
		if (len == cap) {
			cap = cap == 0 ? 65536 : cap * 2;
			data = xrealloc(data, cap);
		}
		n = fread(data + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		saved = errno;
		fclose(f);
		free(data);
		errno = saved;
		return NULL;
	}
	fclose(f);
	*lenp = len;
	return data;
}

int
main(int argc, char **argv)
{
	struct toml_value	*doc;
	struct toml_error	 err;
	char			*data, text[320];
	size_t			 len;
	int			 i, status = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: toml_decode FILE...\n");
		return 2;
	}
	for (i = 1; i < argc; i++) {
		if ((data = read_file(argv[i], &len)) == NULL) {
			fprintf(stderr, "toml_decode: %s: %s\n", argv[i],
			    strerror(errno));
			status = 2;
			continue;
		}
		doc = toml_parse(data, len, &err);
		free(data);
		fputs("{\"file\": ", stdout);
		json_cstring(stdout, argv[i]);
		if (doc != NULL) {
			fputs(", \"ok\": true, \"doc\": ", stdout);
			json_value(stdout, doc);
			toml_free(doc);
		} else {
			snprintf(text, sizeof text, "%d:%d: %s", err.line,
			    err.column, err.msg);
			fputs(", \"ok\": false, \"error\": ", stdout);
			json_cstring(stdout, text);
		}
		fputs("}\n", stdout);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "toml_decode: stdout: %s\n", strerror(errno));
		return 2;
	}
	return status;
}

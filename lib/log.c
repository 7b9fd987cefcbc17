/*
 * The daemon log.  A line is formatted completely in memory (on the stack
 * unless it is long), masked, and handed to the kernel in one write(2), so
 * that processes sharing stderr never interleave within a line and a
 * registered secret is never on its way out in pieces.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/xmalloc.h"

/* Longer messages are cut and end in "..."; a log line is not a dump. */
#define LOG_MAX_MSG	16384
#define LOG_STACK	2048
#define LOG_MASKED	"[MASKED]"
/* Shorter values would mask ordinary words and help nobody. */
#define LOG_SECRET_MIN	4
/* More fields on one line are dropped: a line is not a record dump. */
#define LOG_MAX_FIELDS	32

#define ANSI_RESET	"\033[0m"
#define ANSI_DIM_WHITE	"\033[2;37m"
#define ANSI_YELLOW	"\033[0;33m"
#define ANSI_BOLD_RED	"\033[1;31m"

static int		log_fd = 2;
static int		log_tty = -1;	/* -1: not asked yet */
static enum log_level	log_level = LOG_LEVEL_INFO;
static enum log_format	log_format = LOG_FORMAT_RUNNER;
static const char	*log_syslog_ident;	/* NULL: no syslog */
static void		(*log_counter)(enum log_level);

/*
 * The values to mask, each held by as many owners as gave it: a config
 * entry, a job's payload, a replayed report, or the process itself
 * (log_secret_add).  Longest first, so that a secret that contains
 * another is masked whole.
 */
struct log_secret {
	char	*value;
	size_t	 len;
	unsigned refs;
};
static struct log_secret **log_secrets;
static size_t		   log_nsecrets;

static const char *const log_names[] = {
	[LOG_LEVEL_DEBUG] = "debug",
	[LOG_LEVEL_INFO] = "info",
	[LOG_LEVEL_WARN] = "warning",
	[LOG_LEVEL_ERROR] = "error",
	[LOG_LEVEL_FATAL] = "fatal",
	[LOG_LEVEL_PANIC] = "panic",
};

static const char *const log_prefixes[] = {
	[LOG_LEVEL_DEBUG] = "DEBUG: ",
	[LOG_LEVEL_INFO] = "",
	[LOG_LEVEL_WARN] = "WARNING: ",
	[LOG_LEVEL_ERROR] = "ERROR: ",
	[LOG_LEVEL_FATAL] = "FATAL: ",
	[LOG_LEVEL_PANIC] = "PANIC: ",
};

static const char *const log_colours[] = {
	[LOG_LEVEL_DEBUG] = ANSI_DIM_WHITE,
	[LOG_LEVEL_INFO] = "",
	[LOG_LEVEL_WARN] = ANSI_YELLOW,
	[LOG_LEVEL_ERROR] = ANSI_BOLD_RED,
	[LOG_LEVEL_FATAL] = ANSI_BOLD_RED,
	[LOG_LEVEL_PANIC] = ANSI_BOLD_RED,
};

/*
 * A string under construction that lives in the caller's stack array until
 * it outgrows it.
 */
struct log_str {
	char	*p;
	size_t	 len;
	size_t	 cap;
	char	*stack;
};

static void
log_str_init(struct log_str *s, char *stack, size_t size)
{
	s->p = s->stack = stack;
	s->len = 0;
	s->cap = size;
	s->p[0] = '\0';
}

static void
log_str_free(struct log_str *s)
{
	if (s->p != s->stack)
		free(s->p);
}

static void
log_str_reserve(struct log_str *s, size_t more)
{
	size_t	 cap;
	char	*p;

	if (s->len + more < s->cap)
		return;
	cap = s->cap;
	while (s->len + more >= cap)
		cap *= 2;
	if (s->p == s->stack) {
		p = xmalloc(cap);
		memcpy(p, s->p, s->len + 1);
	} else
		p = xrealloc(s->p, cap);
	s->p = p;
	s->cap = cap;
}

static void
log_str_add(struct log_str *s, const char *data, size_t len)
{
	log_str_reserve(s, len);
	memcpy(s->p + s->len, data, len);
	s->len += len;
	s->p[s->len] = '\0';
}

static void
log_str_puts(struct log_str *s, const char *str)
{
	log_str_add(s, str, strlen(str));
}

static void
log_str_vprintf(struct log_str *s, const char *fmt, va_list ap)
{
	va_list	ap2;
	int	n;

	va_copy(ap2, ap);
	n = vsnprintf(s->p + s->len, s->cap - s->len, fmt, ap2);
	va_end(ap2);
	if (n < 0) {
		s->p[s->len] = '\0';
		return;
	}
	if ((size_t)n >= s->cap - s->len) {
		log_str_reserve(s, (size_t)n);
		va_copy(ap2, ap);
		n = vsnprintf(s->p + s->len, s->cap - s->len, fmt, ap2);
		va_end(ap2);
		if (n < 0) {
			s->p[s->len] = '\0';
			return;
		}
	}
	s->len += (size_t)n;
}

void
log_set_fd(int fd)
{
	log_fd = fd;
	log_tty = -1;
}

void
log_set_level(enum log_level level)
{
	if (level >= LOG_LEVEL_DEBUG && level <= LOG_LEVEL_PANIC)
		log_level = level;
}

enum log_level
log_get_level(void)
{
	return log_level;
}

void
log_set_format(enum log_format format)
{
	if (format >= LOG_FORMAT_RUNNER && format <= LOG_FORMAT_JSON)
		log_format = format;
}

void
log_set_syslog(const char *ident)
{
	if (log_syslog_ident != NULL)
		closelog();
	log_syslog_ident = ident;
	if (ident != NULL)
		openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

int
log_level_parse(const char *name, enum log_level *level)
{
	size_t	i;

	if (name == NULL)
		return -1;
	if (strcmp(name, "warn") == 0) {
		*level = LOG_LEVEL_WARN;
		return 0;
	}
	for (i = 0; i < sizeof log_names / sizeof log_names[0]; i++) {
		if (strcmp(name, log_names[i]) == 0) {
			*level = (enum log_level)i;
			return 0;
		}
	}
	return -1;
}

int
log_format_parse(const char *name, enum log_format *format)
{
	if (name == NULL)
		return -1;
	if (strcmp(name, "runner") == 0)
		*format = LOG_FORMAT_RUNNER;
	else if (strcmp(name, "text") == 0)
		*format = LOG_FORMAT_TEXT;
	else if (strcmp(name, "json") == 0)
		*format = LOG_FORMAT_JSON;
	else
		return -1;
	return 0;
}

const char *
log_level_name(enum log_level level)
{
	if (level < LOG_LEVEL_DEBUG || level > LOG_LEVEL_PANIC)
		return "unknown";
	return log_names[level];
}

/*
 * Copy msg into out with every byte covered by an occurrence of a secret
 * replaced.  Occurrences are marked on the original text first and each
 * run of marked bytes becomes one "[MASKED]": replacing one secret after
 * another could leave the tail of an overlapping secret in the clear, or
 * find a secret inside an earlier "[MASKED]".
 */
static void
log_mask(const char *msg, size_t len, struct log_str *out)
{
	char		 stack[LOG_STACK];
	char		*mark;
	const char	*at, *end = msg + len;
	size_t		 i, slen, start;
	bool		 any = false;

	if (log_nsecrets == 0) {
		log_str_add(out, msg, len);
		return;
	}
	mark = len <= sizeof stack ? stack : xmalloc(len);
	memset(mark, 0, len);
	for (i = 0; i < log_nsecrets; i++) {
		slen = log_secrets[i]->len;
		at = msg;
		while ((size_t)(end - at) >= slen &&
		    (at = memmem(at, (size_t)(end - at), log_secrets[i]->value,
		    slen)) != NULL) {
			memset(mark + (at - msg), 1, slen);
			any = true;
			at++;
		}
	}
	if (!any)
		log_str_add(out, msg, len);
	else {
		for (i = 0; i < len; ) {
			if (mark[i]) {
				while (i < len && mark[i])
					i++;
				log_str_puts(out, LOG_MASKED);
				continue;
			}
			start = i;
			while (i < len && !mark[i])
				i++;
			log_str_add(out, msg + start, i - start);
		}
	}
	if (mark != stack)
		free(mark);
}

/* Cut at a UTF-8 character boundary at or below len. */
static size_t
log_cut(const char *s, size_t len)
{
	size_t	i = len;

	while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80)
		i--;
	return i;
}

static void
log_escape_text(struct log_str *out, const char *s, size_t len)
{
	char		hex[8];
	unsigned char	c;
	size_t		i;

	for (i = 0; i < len; i++) {
		c = (unsigned char)s[i];
		switch (c) {
		case '"':
			log_str_add(out, "\\\"", 2);
			break;
		case '\\':
			log_str_add(out, "\\\\", 2);
			break;
		case '\n':
			log_str_add(out, "\\n", 2);
			break;
		case '\r':
			log_str_add(out, "\\r", 2);
			break;
		case '\t':
			log_str_add(out, "\\t", 2);
			break;
		default:
			if (c < 0x20 || c == 0x7f) {
				snprintf(hex, sizeof hex, "\\x%02x", c);
				log_str_puts(out, hex);
			} else
				log_str_add(out, (const char *)&s[i], 1);
			break;
		}
	}
}

static void
log_escape_json(struct log_str *out, const char *s, size_t len)
{
	char		hex[8];
	unsigned char	c;
	size_t		i;

	for (i = 0; i < len; i++) {
		c = (unsigned char)s[i];
		switch (c) {
		case '"':
			log_str_add(out, "\\\"", 2);
			break;
		case '\\':
			log_str_add(out, "\\\\", 2);
			break;
		case '\n':
			log_str_add(out, "\\n", 2);
			break;
		case '\r':
			log_str_add(out, "\\r", 2);
			break;
		case '\t':
			log_str_add(out, "\\t", 2);
			break;
		case '\b':
			log_str_add(out, "\\b", 2);
			break;
		case '\f':
			log_str_add(out, "\\f", 2);
			break;
		default:
			if (c < 0x20) {
				snprintf(hex, sizeof hex, "\\u%04x", c);
				log_str_puts(out, hex);
			} else
				log_str_add(out, (const char *)&s[i], 1);
			break;
		}
	}
}

static void
log_write(const char *p, size_t len)
{
	ssize_t	n;

	/* One call for the whole line; loop only for what it left over. */
	while (len > 0) {
		n = write(log_fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		p += n;
		len -= (size_t)n;
	}
}

void
log_set_counter(void (*counter)(enum log_level))
{
	log_counter = counter;
}

/* Not again from inside the counter: a line it logs is not counted twice. */
static void
log_count(enum log_level level)
{
	static bool	 counting;
	int		 saved = errno;

	if (counting)
		return;
	counting = true;
	log_counter(level);
	counting = false;
	errno = saved;
}

/* A line's parts, formatted by log_line() for each place it goes. */
struct log_entry {
	enum log_level		 level;
	const char		*msg;	/* masked, cut to mlen */
	size_t			 mlen;
	bool			 cut;
	const struct log_field	*fields;	/* NULL, or a list ending in key NULL */
	const struct log_field	*sorted[LOG_MAX_FIELDS];
	size_t			 nfields;
	char			 now[32];
};

/* A string value, masked as the message is. */
static void
log_field_string(struct log_str *out, const struct log_field *f)
{
	const char *v = f->s != NULL ? f->s : "";

	log_mask(v, strlen(v), out);
}

/*
 * A duration as Go prints a float64 in JSON: the fewest digits that read
 * back as the same number, without an exponent between 1e-6 and 1e21.
 */
static void
log_seconds(double v, char out[40])
{
	int p, exp10, decimals;
	char *e;

	if (isnan(v) || isinf(v)) {
		snprintf(out, 40, "0");
		return;
	}
	for (p = 1; p < 17; p++) {
		snprintf(out, 40, "%.*g", p, v);
		if (strtod(out, NULL) == v)
			break;
	}
	snprintf(out, 40, "%.*g", p, v);
	if ((e = strchr(out, 'e')) == NULL)
		return;
	if (fabs(v) >= 1e-6 && fabs(v) < 1e21) {
		exp10 = (int)floor(log10(fabs(v)));
		decimals = p - 1 - exp10;
		snprintf(out, 40, "%.*f", decimals > 0 ? decimals : 0, v);
	} else if (e[1] == '-' && e[2] == '0' && e[3] != '\0' && e[4] == '\0') {
		e[2] = e[3];	/* Go writes 1e-7, not 1e-07 */
		e[3] = '\0';
	}
}

/* A field's value as it is, for the runner format and as a JSON number. */
static void
log_field_plain(struct log_str *out, const struct log_field *f)
{
	char num[40];

	switch (f->type) {
	case LOG_FIELD_INT:
		snprintf(num, sizeof num, "%" PRId64, f->i);
		log_str_puts(out, num);
		break;
	case LOG_FIELD_SECONDS:
		log_seconds(f->secs, num);
		log_str_puts(out, num);
		break;
	case LOG_FIELD_STRING:
	default:
		log_field_string(out, f);
		break;
	}
}

/*
 * logrus's key: a field named as one of the line's own keys becomes
 * "fields.<key>", so that it cannot replace the message or the level.
 */
static const char *
log_field_key(const struct log_field *f, char buf[64])
{
	if (strcmp(f->key, "level") == 0 || strcmp(f->key, "msg") == 0 ||
	    strcmp(f->key, "time") == 0) {
		snprintf(buf, 64, "fields.%s", f->key);
		return buf;
	}
	return f->key;
}

static int
log_field_cmp(const struct log_field *a, const struct log_field *b)
{
	char ka[64], kb[64];

	return strcmp(log_field_key(a, ka), log_field_key(b, kb));
}

/* The fields in key order, as logrus writes them (insertion: lines have few). */
static void
log_sort_fields(struct log_entry *e)
{
	const struct log_field *f;
	size_t j;

	e->nfields = 0;
	for (f = e->fields; f != NULL && f->key != NULL && e->nfields < LOG_MAX_FIELDS; f++) {
		for (j = e->nfields; j > 0 && log_field_cmp(e->sorted[j - 1], f) > 0; j--)
			e->sorted[j] = e->sorted[j - 1];
		e->sorted[j] = f;
		e->nfields++;
	}
}

/* logrus's needsQuoting: anything but these characters is quoted. */
static bool
log_needs_quoting(const char *s, size_t len)
{
	size_t i;
	char c;

	for (i = 0; i < len; i++) {
		c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
		    c == '/' || c == '@' || c == '^' || c == '+'))
			return true;
	}
	return false;
}

static void
log_line_text(struct log_str *line, const struct log_entry *e)
{
	char vstack[LOG_STACK], kbuf[64];
	struct log_str v;
	size_t i;

	log_str_puts(line, "time=\"");
	log_str_puts(line, e->now);
	log_str_puts(line, "\" level=");
	log_str_puts(line, log_names[e->level]);
	log_str_puts(line, " msg=\"");
	log_escape_text(line, e->msg, e->mlen);
	if (e->cut)
		log_str_puts(line, "...");
	log_str_puts(line, "\"");
	for (i = 0; i < e->nfields; i++) {
		log_str_add(line, " ", 1);
		log_str_puts(line, log_field_key(e->sorted[i], kbuf));
		log_str_add(line, "=", 1);
		log_str_init(&v, vstack, sizeof vstack);
		log_field_plain(&v, e->sorted[i]);
		if (log_needs_quoting(v.p, v.len)) {
			log_str_add(line, "\"", 1);
			log_escape_text(line, v.p, v.len);
			log_str_add(line, "\"", 1);
		} else
			log_str_add(line, v.p, v.len);
		log_str_free(&v);
	}
	log_str_add(line, "\n", 1);
}

/* A JSON member: ,"key":value (the value quoted unless it is a number). */
static void
log_json_member(struct log_str *line, bool *first, const char *key, const char *value,
    size_t len, bool quote)
{
	log_str_puts(line, *first ? "{\"" : ",\"");
	*first = false;
	log_escape_json(line, key, strlen(key));
	log_str_puts(line, quote ? "\":\"" : "\":");
	if (quote)
		log_escape_json(line, value, len);
	else
		log_str_add(line, value, len);
	if (quote)
		log_str_add(line, "\"", 1);
}

static void
log_line_json(struct log_str *line, const struct log_entry *e)
{
	static const char *const own[] = { "level", "msg", "time" };
	char vstack[LOG_STACK], kbuf[64], mstack[LOG_STACK];
	struct log_str v, m;
	const char *key;
	size_t i = 0, o = 0;
	bool first = true;

	log_str_init(&m, mstack, sizeof mstack);
	log_str_add(&m, e->msg, e->mlen);
	if (e->cut)
		log_str_puts(&m, "...");
	/* The line's own keys and the sorted fields, merged in key order. */
	while (o < 3 || i < e->nfields) {
		key = i < e->nfields ? log_field_key(e->sorted[i], kbuf) : NULL;
		if (o < 3 && (key == NULL || strcmp(own[o], key) < 0)) {
			if (o == 0)
				log_json_member(line, &first, "level", log_names[e->level],
				    strlen(log_names[e->level]), true);
			else if (o == 1)
				log_json_member(line, &first, "msg", m.p, m.len, true);
			else
				log_json_member(line, &first, "time", e->now, strlen(e->now),
				    true);
			o++;
			continue;
		}
		log_str_init(&v, vstack, sizeof vstack);
		log_field_plain(&v, e->sorted[i]);
		log_json_member(line, &first, key, v.p, v.len,
		    e->sorted[i]->type == LOG_FIELD_STRING);
		log_str_free(&v);
		i++;
	}
	log_str_free(&m);
	log_str_puts(line, "}\n");
}

/* "job %s" with the value in place of the %s. */
static void
log_head(struct log_str *line, const struct log_field *f)
{
	const char *at = strstr(f->head, "%s");

	if (at == NULL) {
		log_str_puts(line, f->head);
		return;
	}
	log_str_add(line, f->head, (size_t)(at - f->head));
	log_field_plain(line, f);
	log_str_puts(line, at + 2);
}

static void
log_line_runner(struct log_str *line, const struct log_entry *e, bool colour)
{
	const struct log_field *f;
	size_t i;
	bool head = false, tail = false;

	if (colour && *log_prefixes[e->level] != '\0') {
		log_str_puts(line, log_colours[e->level]);
		log_str_puts(line, log_prefixes[e->level]);
		log_str_puts(line, ANSI_RESET);
	} else
		log_str_puts(line, log_prefixes[e->level]);
	for (f = e->fields; f != NULL && f->key != NULL; f++) {
		if (f->head == NULL)
			continue;
		if (head)
			log_str_add(line, " ", 1);
		log_head(line, f);
		head = true;
	}
	if (head)
		log_str_add(line, ": ", 2);
	log_str_add(line, e->msg, e->mlen);
	if (e->cut)
		log_str_puts(line, "...");
	/* As gitlab-runner's runner format: the other fields after the message. */
	for (i = 0; i < e->nfields; i++) {
		if (e->sorted[i]->head != NULL)
			continue;
		log_str_puts(line, tail ? " " : "  ");
		tail = true;
		log_str_puts(line, e->sorted[i]->key);
		log_str_add(line, "=", 1);
		log_field_plain(line, e->sorted[i]);
	}
	log_str_add(line, "\n", 1);
}

static void
log_line(struct log_str *line, const struct log_entry *e, bool colour)
{
	switch (log_format) {
	case LOG_FORMAT_TEXT:
		log_line_text(line, e);
		break;
	case LOG_FORMAT_JSON:
		log_line_json(line, e);
		break;
	case LOG_FORMAT_RUNNER:
	default:
		log_line_runner(line, e, colour);
		break;
	}
}

/* gitlab-runner's system logger hook: info and above, by severity. */
static void
log_to_syslog(const struct log_entry *e)
{
	char linestack[LOG_STACK];
	struct log_str line;
	int prio;

	if (log_syslog_ident == NULL || e->level < LOG_LEVEL_INFO)
		return;
	prio = e->level == LOG_LEVEL_INFO ? LOG_INFO : e->level == LOG_LEVEL_WARN ?
	    LOG_WARNING : LOG_ERR;
	log_str_init(&line, linestack, sizeof linestack);
	log_line(&line, e, false);
	syslog(prio, "%.*s", (int)(line.len - 1), line.p);
	log_str_free(&line);
}

static void
log_emit(enum log_level level, const struct log_field *fields, const char *suffix,
    const char *fmt, va_list ap)
{
	char		 rawstack[LOG_STACK], maskstack[LOG_STACK];
	char		 linestack[LOG_STACK];
	struct log_str	 raw, msg, line;
	struct log_entry e = { .fields = fields };

	if (level < log_level)
		return;
	if (level > LOG_LEVEL_PANIC)
		level = LOG_LEVEL_PANIC;
	e.level = level;
	if (level >= LOG_LEVEL_WARN && log_counter != NULL)
		log_count(level);

	log_str_init(&raw, rawstack, sizeof rawstack);
	log_str_vprintf(&raw, fmt, ap);
	if (suffix != NULL) {
		log_str_add(&raw, ": ", 2);
		log_str_puts(&raw, suffix);
	}

	/* Mask before cutting so a cut never leaves half a secret behind. */
	log_str_init(&msg, maskstack, sizeof maskstack);
	log_mask(raw.p, raw.len, &msg);
	log_str_free(&raw);
	e.msg = msg.p;
	e.mlen = msg.len;
	if (e.mlen > LOG_MAX_MSG) {
		e.mlen = log_cut(msg.p, LOG_MAX_MSG);
		e.cut = true;
	}
	log_sort_fields(&e);
	if (log_format != LOG_FORMAT_RUNNER)
		clock_rfc3339(clock_wall(), e.now);
	if (log_format == LOG_FORMAT_RUNNER && log_tty == -1)
		log_tty = isatty(log_fd) == 1;

	log_str_init(&line, linestack, sizeof linestack);
	log_line(&line, &e, log_format == LOG_FORMAT_RUNNER && log_tty);
	log_write(line.p, line.len);
	log_str_free(&line);
	log_to_syslog(&e);
	log_str_free(&msg);
}

void
log_kv(enum log_level level, const struct log_field *fields, const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_emit(level, fields, NULL, fmt, ap);
	va_end(ap);
	errno = saved;
}

void
log_msg(enum log_level level, const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_emit(level, NULL, NULL, fmt, ap);
	va_end(ap);
	errno = saved;
}

void
log_debug(const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_DEBUG, NULL, NULL, fmt, ap);
	va_end(ap);
	errno = saved;
}

void
log_info(const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_INFO, NULL, NULL, fmt, ap);
	va_end(ap);
	errno = saved;
}

void
log_warn(const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_WARN, NULL, strerror(saved), fmt, ap);
	va_end(ap);
	errno = saved;
}

void
log_warnx(const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_WARN, NULL, NULL, fmt, ap);
	va_end(ap);
	errno = saved;
}

void
log_error(const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_ERROR, NULL, NULL, fmt, ap);
	va_end(ap);
	errno = saved;
}

void
fatal(const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_FATAL, NULL, strerror(saved), fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_FATAL, NULL, NULL, fmt, ap);
	va_end(ap);
	exit(1);
}

static bool
log_has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* "t1_", "t2_" or "t3_": the partition part of newer runner tokens. */
static size_t
log_partition_prefix(const char *s)
{
	if (s[0] == 't' && s[1] >= '1' && s[1] <= '3' && s[2] == '_')
		return 3;
	return 0;
}

static bool
log_is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
	    (c >= 'A' && c <= 'F');
}

const char *
log_token(const char *token, char out[LOG_TOKEN_SIZE])
{
	size_t	n, i;

	out[0] = '\0';
	if (token == NULL)
		return out;

	if (log_has_prefix(token, "glrt-")) {
		token += 5;
		token += log_partition_prefix(token);
	} else if ((n = log_partition_prefix(token)) != 0)
		token += n;
	else if (log_has_prefix(token, "glrtr-"))
		token += 6;

	if (log_has_prefix(token, "glcbt-"))
		token += 6;

	if (token[0] == 'G' && token[1] == 'R') {
		for (i = 2; i < 9 && log_is_hex(token[i]); i++)
			;
		if (i == 9)
			token += 9;
	}

	n = strnlen(token, 9);
	memcpy(out, token, n);
	out[n] = '\0';
	return out;
}

struct log_secret *
log_secret_hold(const char *value)
{
	struct log_secret	*ls;
	size_t			 len, i, at;

	if (value == NULL || (len = strlen(value)) < LOG_SECRET_MIN)
		return NULL;
	for (i = 0; i < log_nsecrets; i++) {
		if (log_secrets[i]->len == len && memcmp(log_secrets[i]->value, value, len) == 0) {
			log_secrets[i]->refs++;
			return log_secrets[i];
		}
	}
	for (at = 0; at < log_nsecrets; at++) {
		if (log_secrets[at]->len < len)
			break;
	}
	ls = xmalloc(sizeof *ls);
	ls->value = xstrdup(value);
	ls->len = len;
	ls->refs = 1;
	log_secrets = xreallocarray(log_secrets, log_nsecrets + 1, sizeof *log_secrets);
	memmove(log_secrets + at + 1, log_secrets + at,
	    (log_nsecrets - at) * sizeof *log_secrets);
	log_secrets[at] = ls;
	log_nsecrets++;
	return ls;
}

static void
log_secret_free(struct log_secret *ls)
{
	explicit_bzero(ls->value, ls->len);
	free(ls->value);
	free(ls);
}

void
log_secret_drop(struct log_secret *ls)
{
	size_t	i;

	if (ls == NULL || --ls->refs > 0)
		return;
	for (i = 0; i < log_nsecrets; i++) {
		if (log_secrets[i] != ls)
			continue;
		memmove(log_secrets + i, log_secrets + i + 1,
		    (log_nsecrets - i - 1) * sizeof *log_secrets);
		log_nsecrets--;
		break;
	}
	log_secret_free(ls);
}

void
log_secret_add(const char *value)
{
	/* The process is the owner; nothing drops this hold. */
	(void)log_secret_hold(value);
}

void
log_secret_clear(void)
{
	size_t	i;

	for (i = 0; i < log_nsecrets; i++)
		log_secret_free(log_secrets[i]);
	free(log_secrets);
	log_secrets = NULL;
	log_nsecrets = 0;
}

/*
 * The daemon log.  A line is formatted completely in memory (on the stack
 * unless it is long), masked, and handed to the kernel in one write(2), so
 * that processes sharing stderr never interleave within a line and a
 * registered secret is never on its way out in pieces.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/xmalloc.h"

/* Longer messages are cut and end in "..."; a log line is not a dump. */
#define LOG_MAX_MSG	16384
#define LOG_STACK	2048
#define LOG_MASK	"[MASKED]"
/* Shorter values would mask ordinary words and help nobody. */
#define LOG_SECRET_MIN	4

#define ANSI_RESET	"\033[0m"
#define ANSI_DIM_WHITE	"\033[2;37m"
#define ANSI_YELLOW	"\033[0;33m"
#define ANSI_BOLD_RED	"\033[1;31m"

static int		log_fd = 2;
static int		log_tty = -1;	/* -1: not asked yet */
static enum log_level	log_level = LOG_LEVEL_INFO;
static enum log_format	log_format = LOG_FORMAT_RUNNER;
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
				log_str_puts(out, LOG_MASK);
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

static void
log_emit(enum log_level level, const char *suffix, const char *fmt,
    va_list ap)
{
	char		 rawstack[LOG_STACK], maskstack[LOG_STACK];
	char		 linestack[LOG_STACK], now[32];
	struct log_str	 raw, msg, line;
	size_t		 mlen;
	bool		 cut = false;

	if (level < log_level)
		return;
	if (level > LOG_LEVEL_PANIC)
		level = LOG_LEVEL_PANIC;
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
	mlen = msg.len;
	if (mlen > LOG_MAX_MSG) {
		mlen = log_cut(msg.p, LOG_MAX_MSG);
		cut = true;
	}

	log_str_init(&line, linestack, sizeof linestack);
	switch (log_format) {
	case LOG_FORMAT_TEXT:
		clock_rfc3339(clock_wall(), now);
		log_str_puts(&line, "time=\"");
		log_str_puts(&line, now);
		log_str_puts(&line, "\" level=");
		log_str_puts(&line, log_names[level]);
		log_str_puts(&line, " msg=\"");
		log_escape_text(&line, msg.p, mlen);
		if (cut)
			log_str_puts(&line, "...");
		log_str_puts(&line, "\"\n");
		break;
	case LOG_FORMAT_JSON:
		clock_rfc3339(clock_wall(), now);
		log_str_puts(&line, "{\"level\":\"");
		log_str_puts(&line, log_names[level]);
		log_str_puts(&line, "\",\"msg\":\"");
		log_escape_json(&line, msg.p, mlen);
		if (cut)
			log_str_puts(&line, "...");
		log_str_puts(&line, "\",\"time\":\"");
		log_str_puts(&line, now);
		log_str_puts(&line, "\"}\n");
		break;
	case LOG_FORMAT_RUNNER:
	default:
		if (log_tty == -1)
			log_tty = isatty(log_fd) == 1;
		if (log_tty && *log_prefixes[level] != '\0') {
			log_str_puts(&line, log_colours[level]);
			log_str_puts(&line, log_prefixes[level]);
			log_str_puts(&line, ANSI_RESET);
		} else
			log_str_puts(&line, log_prefixes[level]);
		log_str_add(&line, msg.p, mlen);
		if (cut)
			log_str_puts(&line, "...");
		log_str_add(&line, "\n", 1);
		break;
	}
	log_str_free(&msg);

	log_write(line.p, line.len);
	log_str_free(&line);
}

void
log_msg(enum log_level level, const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_emit(level, NULL, fmt, ap);
	va_end(ap);
	errno = saved;
}

void
log_debug(const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_DEBUG, NULL, fmt, ap);
	va_end(ap);
	errno = saved;
}

void
log_info(const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_INFO, NULL, fmt, ap);
	va_end(ap);
	errno = saved;
}

void
log_warn(const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_WARN, strerror(saved), fmt, ap);
	va_end(ap);
	errno = saved;
}

void
log_warnx(const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_WARN, NULL, fmt, ap);
	va_end(ap);
	errno = saved;
}

void
log_error(const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_ERROR, NULL, fmt, ap);
	va_end(ap);
	errno = saved;
}

void
fatal(const char *fmt, ...)
{
	va_list	ap;
	int	saved = errno;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_FATAL, strerror(saved), fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_FATAL, NULL, fmt, ap);
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

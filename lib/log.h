/*
 * The daemon log: for operators, on stderr by default so that systemd's
 * journal keeps it.  The job log (trace) is data sent to GitLab and never
 * goes through here.
 *
 * Formats follow gitlab-runner's --log-format: "runner" (a level prefix such
 * as "WARNING: ", coloured on a terminal), "text" (logfmt: time=... level=...
 * msg=...) and "json" (one object per line).
 *
 * Fields: what a line is about (the job id, the runner's short token, a
 * duration) is data, as in gitlab-runner's logrus lines: log_kv() takes them
 * beside the message, and "json" makes each one a key ({"job":42,
 * "level":"info","msg":"...","runner":"abc",...}, keys sorted as logrus
 * sorts them), "text" writes them after msg as logfmt (job=42 runner=abc),
 * and "runner" keeps this runner's human lines: the fields with a head lead
 * the message ("job 42: ..."), the others follow it as key=value.
 *
 * Secrets: a token is never passed to a log call as it is.  Callers print
 * log_token(token, buf), the shortened form gitlab-runner prints.  As a
 * second line of defence every value held in the secret set below is replaced
 * by "[MASKED]" in every line before it is written.
 *
 * The log functions leave errno as they found it.  They are not
 * thread-safe: the daemon is one thread, and so is every helper command.
 */
#ifndef LIB_LOG_H
#define LIB_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

enum log_level {
	LOG_LEVEL_DEBUG,
	LOG_LEVEL_INFO,
	LOG_LEVEL_WARN,
	LOG_LEVEL_ERROR,
	LOG_LEVEL_FATAL,
	LOG_LEVEL_PANIC,
};

enum log_format {
	LOG_FORMAT_RUNNER,
	LOG_FORMAT_TEXT,
	LOG_FORMAT_JSON,
};

/* Where lines go (default 2, stderr).  Colour only if fd is a terminal. */
void	log_set_fd(int fd);
void	log_set_level(enum log_level level);
enum log_level log_get_level(void);
void	log_set_format(enum log_format format);
/*
 * --syslog: every line at info or above (and at the log level or above) goes
 * to syslog(3) as well, under ident (gitlab-runner's service name), as its
 * system service logger does.  NULL stops it.  The ident must outlive it.
 */
void	log_set_syslog(const char *ident);
/*
 * Called with the level of each line written at warning or above, before
 * it is written: how the daemon counts them (gitlab_runner_errors_total)
 * without lib/ knowing about metrics.  Lines the level filters out are not
 * counted; a line the counter itself logs is.  NULL: none.
 */
void	log_set_counter(void (*counter)(enum log_level level));
/* Names as gitlab-runner spells them ("warn" and "warning" both work). */
int	log_level_parse(const char *name, enum log_level *level);
int	log_format_parse(const char *name, enum log_format *format);
const char *log_level_name(enum log_level level);

void	log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* log_warn and fatal append ": strerror(errno)"; the x forms do not. */
void	log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	log_msg(enum log_level level, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
enum log_field_type {
	LOG_FIELD_STRING,
	LOG_FIELD_INT,
	LOG_FIELD_SECONDS,	/* a duration, as gitlab-runner's duration_s */
};

struct log_field {
	const char		*key;	/* gitlab-runner's name; NULL ends a list */
	enum log_field_type	 type;
	const char		*s;	/* masked as the message is; NULL is "" */
	int64_t			 i;
	double			 secs;
	/*
	 * The runner format only: the value in this text ("job %s") leads the
	 * message, the heads of a line joined by blanks, then ": ".
	 */
	const char		*head;
};

#define LOG_STR(k, v)	{ .key = (k), .type = LOG_FIELD_STRING, .s = (v) }
#define LOG_INT(k, v)	{ .key = (k), .type = LOG_FIELD_INT, .i = (v) }
#define LOG_SECS(k, v)	{ .key = (k), .type = LOG_FIELD_SECONDS, .secs = (v) }
/* What most daemon lines are about, under gitlab-runner's keys. */
#define LOG_JOB(id)	{ .key = "job", .type = LOG_FIELD_INT, .i = (id), .head = "job %s" }
#define LOG_RUNNER_NAME(n) { .key = "runner_name", .type = LOG_FIELD_STRING, .s = (n), \
	.head = "runner %s" }
/* The short token (log_token), gitlab-runner's "runner" field. */
#define LOG_RUNNER(t)	{ .key = "runner", .type = LOG_FIELD_STRING, .s = (t), .head = "(%s)" }
/* The fields of one line, as a compound literal: LOG_FIELDS(LOG_JOB(id)). */
#define LOG_FIELDS(...)	((const struct log_field[]){ __VA_ARGS__, { .key = NULL } })

void	log_kv(enum log_level level, const struct log_field *fields, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
_Noreturn void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define LOG_TOKEN_SIZE	16

/*
 * The shortened form of a token that may appear in logs and in the job
 * environment (gitlab-runner's ShortenToken): known prefixes stripped
 * (glrt-, glrt-t1_, t1_, glrtr-, glcbt-, GR + 7 hex digits), then at most
 * 9 characters.  Writes into out and returns it; NULL gives "".
 */
const char *log_token(const char *token, char out[LOG_TOKEN_SIZE]);

/*
 * The secrets masked in every log line, one reference-counted set.  Whoever
 * holds a token holds its mask for as long: a config entry (config.c), a
 * job's payload (api/json.c), a replayed report (job_replay.c).  The same
 * value held twice (a reload that keeps an entry, two entries with one
 * token) stays masked until its last holder drops it, so nobody pairs an
 * add with a remove.  NULL and values shorter than 4 bytes are not held:
 * log_secret_hold() returns NULL, which log_secret_drop() takes.
 */
struct log_secret;
struct log_secret *log_secret_hold(const char *value);
void	log_secret_drop(struct log_secret *held);
/* Masked for the rest of the process: a command's flag, a token just issued. */
void	log_secret_add(const char *value);
/* Tests: forget every secret; handles still held become invalid. */
void	log_secret_clear(void);

#endif

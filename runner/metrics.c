/*
 * The metrics registry and the HTTP listener that serves it with the
 * health probes.
 *
 * Registry: two chained hash tables, one of names (families) and one of
 * series keyed by name and labels, so that an update after the first is a
 * hash, a compare and an addition.  Each family keeps its series sorted by
 * labels, and the families are kept sorted by name, both at insertion: the
 * scrape walks them in order and allocates nothing but its output.
 *
 * Listener: a connection is a small state machine.  READING collects bytes
 * into a capped buffer until a whole request head is there (a head that
 * does not fit is answered 431); WRITING has one response in flight with
 * reading stopped, so a client that pipelines without reading its answers
 * costs at most one head and one response; LINGER follows a final response:
 * we send FIN and discard what the client still sends until it closes or a
 * short timer fires, so that our close does not turn into a reset that
 * destroys the response before the client has read it.  One timer per
 * connection bounds the time from the start of a request to the end of its
 * answer: a client that dribbles or never reads is closed, bytes arriving
 * do not extend it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "runner/buf.h"
#include "runner/clock.h"
#include "runner/log.h"
#include "runner/metrics.h"
#include "runner/xmalloc.h"

/* ---------------------------------------------------------------- registry */

#define NBUCKETS	14	/* the bounds below, then +Inf */

static const double	bucket_bound[NBUCKETS - 1] = {
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
};
/* As Prometheus clients print them: le values are compared as text. */
static const char *const bucket_le[NBUCKETS] = {
	"0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5",
	"5", "10", "30", "60", "+Inf",
};

enum kind {
	KIND_COUNTER,
	KIND_GAUGE,
	KIND_HISTOGRAM,
};

static const char *const kind_name[] = { "counter", "gauge", "histogram" };

struct series;

struct family {
	char		*name;
	char		*help;		/* NULL until described */
	enum kind	 kind;
	bool		 invalid;	/* not a valid name: never rendered */
	bool		 warned;	/* misuse reported once */
	uint64_t	 hash;
	struct family	*hnext;
	struct series	**series;	/* sorted by labels */
	size_t		 nseries;
	size_t		 series_cap;
};

struct series {
	struct family	*fam;
	char		*labels;
	uint64_t	 hash;
	struct series	*hnext;
	double		 value;		/* histogram: the sum */
	uint64_t	 count;		/* histogram only */
	uint64_t	 buckets[];	/* histogram only; not cumulative */
};

struct table {
	void	**slot;
	size_t	  size;		/* a power of two, or 0 */
	size_t	  n;
};

static struct {
	struct table	  families;
	struct table	  series;
	struct family	**sorted;	/* every family, by name */
	size_t		  nsorted;
	size_t		  sorted_cap;
} reg;

/* FNV-1a over name, a separator no name contains, then labels. */
static uint64_t
hash_key(const char *name, const char *labels)
{
	uint64_t		 h = 0xcbf29ce484222325ULL;
	const unsigned char	*p;

	for (p = (const unsigned char *)name; *p != '\0'; p++)
		h = (h ^ *p) * 0x100000001b3ULL;
	h = (h ^ 0xff) * 0x100000001b3ULL;
	if (labels != NULL) {
		for (p = (const unsigned char *)labels; *p != '\0'; p++)
			h = (h ^ *p) * 0x100000001b3ULL;
	}
	return h;
}

/* ASCII only, whatever the locale says. */
static bool
is_digit(unsigned char ch)
{
	return ch >= '0' && ch <= '9';
}

static bool
is_alnum(unsigned char ch)
{
	return is_digit(ch) || (ch >= 'a' && ch <= 'z') ||
	    (ch >= 'A' && ch <= 'Z');
}

/* [a-zA-Z_:][a-zA-Z0-9_:]* */
static bool
valid_name(const char *name)
{
	const char	*p;

	if (name == NULL || *name == '\0' || is_digit((unsigned char)*name))
		return false;
	for (p = name; *p != '\0'; p++) {
		if (!is_alnum((unsigned char)*p) && *p != '_' && *p != ':')
			return false;
	}
	return true;
}

/*
 * Both tables chain through an hnext field and store the hash; the
 * accessors below are the only code that knows which struct is which.
 */
static uint64_t
family_hash(void *e)
{
	return ((struct family *)e)->hash;
}

static uint64_t
series_hash(void *e)
{
	return ((struct series *)e)->hash;
}

static void **
family_next(void *e)
{
	return (void **)&((struct family *)e)->hnext;
}

static void **
series_next(void *e)
{
	return (void **)&((struct series *)e)->hnext;
}

static void
table_insert(struct table *t, void *e, uint64_t (*hash)(void *),
    void **(*next)(void *))
{
	void	**slot, *cur, *nx;
	size_t	  i, size;

	if (t->n + 1 > t->size) {
		size = t->size == 0 ? 64 : t->size * 2;
		slot = xcalloc(size, sizeof *slot);
		for (i = 0; i < t->size; i++) {
			for (cur = t->slot[i]; cur != NULL; cur = nx) {
				nx = *next(cur);
				*next(cur) = slot[hash(cur) & (size - 1)];
				slot[hash(cur) & (size - 1)] = cur;
			}
		}
		free(t->slot);
		t->slot = slot;
		t->size = size;
	}
	i = hash(e) & (t->size - 1);
	*next(e) = t->slot[i];
	t->slot[i] = e;
	t->n++;
}

static struct family *
family_find(const char *name, uint64_t h)
{
	struct family	*f;

	if (reg.families.size == 0)
		return NULL;
	f = reg.families.slot[h & (reg.families.size - 1)];
	for (; f != NULL; f = f->hnext) {
		if (f->hash == h && strcmp(f->name, name) == 0)
			return f;
	}
	return NULL;
}

/* The family of name, created with kind if it is new. */
static struct family *
family_get(const char *name, enum kind kind)
{
	struct family	*f;
	uint64_t	 h = hash_key(name, NULL);
	size_t		 lo, hi, mid;

	if ((f = family_find(name, h)) != NULL)
		return f;

	f = xcalloc(1, sizeof *f);
	f->name = xstrdup(name);
	f->kind = kind;
	f->hash = h;
	table_insert(&reg.families, f, family_hash, family_next);
	if ((f->invalid = !valid_name(name))) {
		/* Kept so that the warning is printed once, not rendered. */
		log_warnx("metrics: \"%s\" is not a valid metric name; dropped",
		    name);
		f->warned = true;
		return f;
	}

	lo = 0;
	hi = reg.nsorted;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (strcmp(reg.sorted[mid]->name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (reg.nsorted == reg.sorted_cap) {
		reg.sorted_cap = reg.sorted_cap == 0 ? 32 : reg.sorted_cap * 2;
		reg.sorted = xreallocarray(reg.sorted, reg.sorted_cap,
		    sizeof *reg.sorted);
	}
	memmove(reg.sorted + lo + 1, reg.sorted + lo,
	    (reg.nsorted - lo) * sizeof *reg.sorted);
	reg.sorted[lo] = f;
	reg.nsorted++;
	return f;
}

static void
family_misuse(struct family *f, enum kind kind)
{
	if (f->warned)
		return;
	f->warned = true;
	log_warnx("metrics: %s is a %s, not a %s; update dropped", f->name,
	    kind_name[f->kind], kind_name[kind]);
}

static struct series *
series_new(struct family *f, const char *labels, uint64_t h)
{
	struct series	*s;
	size_t		 size, lo, hi, mid;

	size = sizeof *s;
	if (f->kind == KIND_HISTOGRAM)
		size += NBUCKETS * sizeof s->buckets[0];
	s = xcalloc(1, size);
	s->fam = f;
	s->labels = xstrdup(labels);
	s->hash = h;
	table_insert(&reg.series, s, series_hash, series_next);

	lo = 0;
	hi = f->nseries;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (strcmp(f->series[mid]->labels, labels) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (f->nseries == f->series_cap) {
		f->series_cap = f->series_cap == 0 ? 4 : f->series_cap * 2;
		f->series = xreallocarray(f->series, f->series_cap,
		    sizeof *f->series);
	}
	memmove(f->series + lo + 1, f->series + lo,
	    (f->nseries - lo) * sizeof *f->series);
	f->series[lo] = s;
	f->nseries++;
	return s;
}

/* The series to update, or NULL if this update is to be dropped. */
static struct series *
series_get(enum kind kind, const char *name, const char *labels)
{
	struct series	*s = NULL;
	struct family	*f;
	uint64_t	 h;

	if (name == NULL)
		return NULL;
	if (labels == NULL)
		labels = "";
	h = hash_key(name, labels);
	if (reg.series.size != 0)
		s = reg.series.slot[h & (reg.series.size - 1)];
	for (; s != NULL; s = s->hnext) {
		if (s->hash == h && strcmp(s->labels, labels) == 0 &&
		    strcmp(s->fam->name, name) == 0)
			break;
	}
	if (s != NULL) {
		if (s->fam->kind == kind)
			return s;
		family_misuse(s->fam, kind);
		return NULL;
	}

	f = family_get(name, kind);
	if (f->invalid)
		return NULL;
	if (f->kind != kind) {
		family_misuse(f, kind);
		return NULL;
	}
	return series_new(f, labels, h);
}

static int
kind_parse(const char *type, enum kind *kind)
{
	size_t	i;

	for (i = 0; i < sizeof kind_name / sizeof kind_name[0]; i++) {
		if (type != NULL && strcmp(type, kind_name[i]) == 0) {
			*kind = (enum kind)i;
			return 0;
		}
	}
	return -EINVAL;
}

int
metrics_describe(const char *name, const char *type, const char *help)
{
	struct family	*f;
	enum kind	 kind;

	if (!valid_name(name) || kind_parse(type, &kind) != 0)
		return -EINVAL;
	f = family_get(name, kind);
	if (f->kind != kind)
		family_misuse(f, kind);
	if (f->help == NULL && help != NULL)
		f->help = xstrdup(help);
	return 0;
}

void
metrics_counter_add(const char *name, const char *labels, double v)
{
	struct series	*s;

	if (!(v >= 0))	/* negative or NaN */
		return;
	if ((s = series_get(KIND_COUNTER, name, labels)) != NULL)
		s->value += v;
}

void
metrics_gauge_set(const char *name, const char *labels, double v)
{
	struct series	*s;

	if ((s = series_get(KIND_GAUGE, name, labels)) != NULL)
		s->value = v;
}

void
metrics_gauge_add(const char *name, const char *labels, double v)
{
	struct series	*s;

	if ((s = series_get(KIND_GAUGE, name, labels)) != NULL)
		s->value += v;
}

void
metrics_histogram_observe(const char *name, const char *labels,
    double seconds)
{
	struct series	*s;
	size_t		 i;

	if (isnan(seconds))
		return;
	if ((s = series_get(KIND_HISTOGRAM, name, labels)) == NULL)
		return;
	for (i = 0; i < NBUCKETS - 1; i++) {
		if (seconds <= bucket_bound[i])
			break;
	}
	s->buckets[i]++;
	s->count++;
	s->value += seconds;
}

void
metrics_reset(void)
{
	struct family	*f;
	struct series	*s, *snext;
	size_t		 i;

	for (i = 0; i < reg.series.size; i++) {
		for (s = reg.series.slot[i]; s != NULL; s = snext) {
			snext = s->hnext;
			free(s->labels);
			free(s);
		}
	}
	for (i = 0; i < reg.families.size; i++) {
		while ((f = reg.families.slot[i]) != NULL) {
			reg.families.slot[i] = f->hnext;
			free(f->name);
			free(f->help);
			free(f->series);
			free(f);
		}
	}
	free(reg.series.slot);
	free(reg.families.slot);
	free(reg.sorted);
	memset(&reg, 0, sizeof reg);
}

int
metrics_label_escape(struct buf *out, const char *value)
{
	const char	*p;
	int		 rc = 0;

	for (p = value; rc == 0 && *p != '\0'; p++) {
		if (*p == '\\')
			rc = buf_puts(out, "\\\\");
		else if (*p == '"')
			rc = buf_puts(out, "\\\"");
		else if (*p == '\n')
			rc = buf_puts(out, "\\n");
		else
			rc = buf_putc(out, *p);
	}
	return rc;
}

/* HELP text escapes only backslash and newline. */
static int
put_help(struct buf *out, const char *help)
{
	const char	*p;
	int		 rc = 0;

	for (p = help; rc == 0 && *p != '\0'; p++) {
		if (*p == '\\')
			rc = buf_puts(out, "\\\\");
		else if (*p == '\n')
			rc = buf_puts(out, "\\n");
		else
			rc = buf_putc(out, *p);
	}
	return rc;
}

/*
 * The shortest text that reads back as v; whole numbers without an
 * exponent (what %g would print for 100 at its shortest is "1e+02").
 */
static int
put_value(struct buf *out, double v)
{
	char	tmp[40];
	int	prec;

	if (isnan(v))
		return buf_puts(out, "NaN");
	if (isinf(v))
		return buf_puts(out, v > 0 ? "+Inf" : "-Inf");
	if (v == floor(v) && fabs(v) < 9007199254740992.0)	/* 2^53 */
		return buf_printf(out, "%.0f", v == 0 ? 0.0 : v);
	for (prec = 1; prec < 17; prec++) {
		snprintf(tmp, sizeof tmp, "%.*g", prec, v);
		if (strtod(tmp, NULL) == v)
			return buf_puts(out, tmp);
	}
	return buf_printf(out, "%.17g", v);
}

static int
put_sample(struct buf *out, const char *name, const char *suffix,
    const char *labels, const char *le, double v)
{
	int	rc;

	rc = buf_printf(out, "%s%s", name, suffix);
	if (*labels != '\0' || le != NULL) {
		rc |= buf_putc(out, '{');
		rc |= buf_puts(out, labels);
		if (le != NULL) {
			rc |= buf_printf(out, "%sle=\"%s\"",
			    *labels != '\0' ? "," : "", le);
		}
		rc |= buf_putc(out, '}');
	}
	rc |= buf_putc(out, ' ');
	rc |= put_value(out, v);
	rc |= buf_putc(out, '\n');
	return rc;
}

static int
put_family(struct buf *out, const struct family *f)
{
	const struct series	*s;
	uint64_t		 cum;
	size_t			 i, j;
	int			 rc = 0;

	if (f->help != NULL) {
		rc |= buf_printf(out, "# HELP %s ", f->name);
		rc |= put_help(out, f->help);
		rc |= buf_putc(out, '\n');
	}
	rc |= buf_printf(out, "# TYPE %s %s\n", f->name, kind_name[f->kind]);
	for (i = 0; i < f->nseries; i++) {
		s = f->series[i];
		if (f->kind != KIND_HISTOGRAM) {
			rc |= put_sample(out, f->name, "", s->labels, NULL,
			    s->value);
			continue;
		}
		cum = 0;
		for (j = 0; j < NBUCKETS; j++) {
			cum += s->buckets[j];
			rc |= put_sample(out, f->name, "_bucket", s->labels,
			    bucket_le[j], (double)cum);
		}
		rc |= put_sample(out, f->name, "_sum", s->labels, NULL,
		    s->value);
		rc |= put_sample(out, f->name, "_count", s->labels, NULL,
		    (double)s->count);
	}
	return rc;
}

/* ------------------------------------------------------- process metrics */

/* A small /proc file into out, NUL-terminated; its length or -1. */
static ssize_t
read_proc(const char *path, char *out, size_t size)
{
	ssize_t	n;
	size_t	len = 0;
	int	fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	while (len < size - 1) {
		n = read(fd, out + len, size - 1 - len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	out[len] = '\0';
	return (ssize_t)len;
}

/* Fields 14, 15 and 22 of /proc/self/stat (utime, stime, starttime). */
static int
read_self_stat(unsigned long long *utime, unsigned long long *stime,
    unsigned long long *start)
{
	char			 text[2048], *p, *end;
	unsigned long long	 v;
	int			 field;

	if (read_proc("/proc/self/stat", text, sizeof text) <= 0)
		return -1;
	/* comm (field 2) may hold spaces and parentheses: skip to the last ')'. */
	if ((p = strrchr(text, ')')) == NULL)
		return -1;
	p++;
	for (field = 3; field <= 22; field++) {
		while (*p == ' ')
			p++;
		if (*p == '\0')
			return -1;
		if (field == 14 || field == 15 || field == 22) {
			errno = 0;
			v = strtoull(p, &end, 10);
			if (end == p || errno != 0)
				return -1;
			if (field == 14)
				*utime = v;
			else if (field == 15)
				*stime = v;
			else
				*start = v;
		}
		while (*p != ' ' && *p != '\0')
			p++;
	}
	return 0;
}

/* Seconds since the epoch at boot; /proc/stat is large, so read by lines. */
static double
boot_time(void)
{
	FILE	*fp;
	char	*line = NULL;
	size_t	 size = 0;
	double	 bt = -1;

	if ((fp = fopen("/proc/stat", "re")) == NULL)
		return -1;
	while (getline(&line, &size, fp) != -1) {
		if (strncmp(line, "btime ", 6) == 0) {
			bt = strtod(line + 6, NULL);
			break;
		}
	}
	free(line);
	fclose(fp);
	return bt;
}

static void
process_update(void)
{
	static double		 start_time = -1;	/* fixed for the process */
	char			 text[4096], *p;
	unsigned long long	 ut = 0, st = 0, start = 0;
	long			 tck = sysconf(_SC_CLK_TCK);
	double			 bt, fds = 0;
	struct series		*s;
	struct dirent		*de;
	DIR			*d;

	metrics_describe("process_cpu_seconds_total", "counter",
	    "Total user and system CPU time spent in seconds.");
	metrics_describe("process_open_fds", "gauge",
	    "Number of open file descriptors.");
	metrics_describe("process_resident_memory_bytes", "gauge",
	    "Resident memory size in bytes.");
	metrics_describe("process_start_time_seconds", "gauge",
	    "Start time of the process since unix epoch in seconds.");

	if (tck > 0 && read_self_stat(&ut, &st, &start) == 0) {
		s = series_get(KIND_COUNTER, "process_cpu_seconds_total", "");
		if (s != NULL)
			s->value = (double)(ut + st) / (double)tck;
		if (start_time < 0 && (bt = boot_time()) >= 0)
			start_time = bt + (double)start / (double)tck;
	}
	if (start_time >= 0)
		metrics_gauge_set("process_start_time_seconds", "", start_time);

	if (read_proc("/proc/self/status", text, sizeof text) > 0 &&
	    (p = strstr(text, "\nVmRSS:")) != NULL) {
		metrics_gauge_set("process_resident_memory_bytes", "",
		    (double)strtoull(p + 7, NULL, 10) * 1024);
	}

	if ((d = opendir("/proc/self/fd")) != NULL) {
		while ((de = readdir(d)) != NULL) {
			/* Not ".", "..", nor the descriptor reading the list. */
			if (de->d_name[0] != '.' &&
			    atoi(de->d_name) != dirfd(d))
				fds++;
		}
		closedir(d);
		metrics_gauge_set("process_open_fds", "", fds);
	}
}

int
metrics_render(struct buf *out)
{
	size_t	i;
	int	rc = 0;

	process_update();
	for (i = 0; i < reg.nsorted; i++) {
		/* A name described but never updated has nothing to show. */
		if (reg.sorted[i]->nseries != 0)
			rc |= put_family(out, reg.sorted[i]);
	}
	return rc != 0 ? -ENOSPC : 0;
}

/* ---------------------------------------------------------------- listener */

#define REQ_MAX			(16 * 1024)	/* a request head, at most */
#define MAX_CONNS		64
#define DEFAULT_TIMEOUT_MS	(30 * 1000)
#define LINGER_MS		2000	/* draining after a final response */
#define BACKLOG			128
#define MAX_METHOD		32
#define BODY_KEEP		(64 * 1024)	/* larger ones freed after use */

enum conn_state {
	CONN_READING,	/* waiting for a whole request head */
	CONN_WRITING,	/* one response in flight, not reading */
	CONN_LINGER,	/* final response sent, FIN sent, discarding input */
	CONN_CLOSED,	/* handles closing */
};

struct conn {
	struct metrics_server	*s;
	struct conn		*prev, *next;
	uv_tcp_t		 tcp;
	uv_timer_t		 timer;
	uv_write_t		 wreq;
	uv_shutdown_t		 sreq;
	enum conn_state		 state;
	unsigned		 open_handles;
	bool			 close_after;	/* after the response in flight */
	struct buf		 in;		/* request bytes, REQ_MAX at most */
	size_t			 scanned;	/* of in, searched for the end */
	struct buf		 head;		/* status line and headers */
	struct buf		 body;
};

struct metrics_server {
	uv_loop_t		*loop;
	uv_tcp_t		 listener;
	struct metrics_health	 health;
	int			 port;
	uint64_t		 timeout_ms;
	struct conn		*conns;		/* open ones */
	unsigned		 nconns;	/* open ones, for MAX_CONNS */
	unsigned		 allocated;	/* not freed yet, closing too */
	bool			 closing;
	bool			 listener_closed;
	/* Every read lands here first; the loop thread reads one at a time. */
	char			 scratch[REQ_MAX];
};

/* What the handler needs of a request; pointers into the connection's buffer. */
struct request {
	const char	*method;
	size_t		 method_len;
	const char	*path;		/* without the query */
	size_t		 path_len;
	int		 minor;		/* HTTP/1.minor */
	bool		 conn_close;
	bool		 conn_keep_alive;
	bool		 has_body;
};

static void	conn_close(struct conn *);
static void	conn_process(struct conn *);
static void	on_alloc(uv_handle_t *, size_t, uv_buf_t *);
static void	on_read(uv_stream_t *, ssize_t, const uv_buf_t *);
static void	on_timeout(uv_timer_t *);

static void
server_maybe_free(struct metrics_server *s)
{
	if (s->closing && s->listener_closed && s->allocated == 0)
		free(s);
}

/* RFC 9110 token characters. */
static bool
is_tchar(unsigned char ch)
{
	if (is_alnum(ch))
		return true;
	return ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

/*
 * Whether p could still become a request line: the method and the first
 * byte of the target.  Lets garbage (a TLS hello, a random probe) get its
 * 400 at once instead of waiting out the cap or the timer; bounded, so
 * calling it on every read costs nothing.
 */
static bool
plausible_start(const char *p, size_t len)
{
	size_t	i = 0;

	while (i < len && i <= MAX_METHOD && is_tchar((unsigned char)p[i]))
		i++;
	if (i == len)
		return i <= MAX_METHOD;
	if (i == 0 || i > MAX_METHOD || p[i] != ' ')
		return false;
	if (++i == len)
		return true;
	return (unsigned char)p[i] > ' ' && (unsigned char)p[i] < 0x7f;
}

/*
 * The length of the head (through its empty line) in p, or 0 if it is not
 * all there.  Lines may end in CRLF or a bare LF.  from: bytes already
 * searched before, so that a head arriving a byte at a time is not
 * rescanned from the start on every read.
 */
static size_t
find_head_end(const char *p, size_t len, size_t from)
{
	size_t	i;

	for (i = from >= 2 ? from - 2 : 0; i < len; i++) {
		if (p[i] != '\n')
			continue;
		if (i + 1 < len && p[i + 1] == '\n')
			return i + 2;
		if (i + 2 < len && p[i + 1] == '\r' && p[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

static bool
token_eq(const char *p, size_t len, const char *word)
{
	return strlen(word) == len && strncasecmp(p, word, len) == 0;
}

/* The comma-separated tokens of a Connection header. */
static void
parse_connection(const char *v, size_t len, struct request *rq)
{
	size_t	i = 0, start, end;

	while (i < len) {
		while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		start = i;
		while (i < len && v[i] != ',')
			i++;
		end = i;
		while (end > start && (v[end - 1] == ' ' || v[end - 1] == '\t'))
			end--;
		if (token_eq(v + start, end - start, "close"))
			rq->conn_close = true;
		else if (token_eq(v + start, end - start, "keep-alive"))
			rq->conn_keep_alive = true;
	}
}

/* One header line (no line end); 0 or an HTTP status for the error. */
static int
parse_header(const char *p, size_t len, struct request *rq)
{
	size_t	i = 0, name_len, vstart, vend;

	/* Obsolete line folding is refused, as RFC 9112 lets a server do. */
	while (i < len && is_tchar((unsigned char)p[i]))
		i++;
	if (i == 0 || i == len || p[i] != ':')
		return 400;
	name_len = i++;
	while (i < len && (p[i] == ' ' || p[i] == '\t'))
		i++;
	vstart = i;
	for (; i < len; i++) {
		if ((unsigned char)p[i] < ' ' && p[i] != '\t')
			return 400;
		if (p[i] == 0x7f)
			return 400;
	}
	vend = len;
	while (vend > vstart && (p[vend - 1] == ' ' || p[vend - 1] == '\t'))
		vend--;

	if (token_eq(p, name_len, "connection"))
		parse_connection(p + vstart, vend - vstart, rq);
	else if (token_eq(p, name_len, "content-length")) {
		if (vend == vstart)
			return 400;
		for (i = vstart; i < vend; i++) {
			if (!is_digit((unsigned char)p[i]))
				return 400;
			if (p[i] != '0')
				rq->has_body = true;
		}
	} else if (token_eq(p, name_len, "transfer-encoding"))
		rq->has_body = true;
	return 0;
}

/* A whole head of len bytes; 0 or an HTTP status for the error. */
static int
parse_head(const char *p, size_t len, struct request *rq)
{
	const char	*line, *nl, *q;
	size_t		 line_len, i, skip;
	int		 rc;

	memset(rq, 0, sizeof *rq);

	/* Request line: method SP target SP HTTP/1.x */
	nl = memchr(p, '\n', len);
	line_len = (size_t)(nl - p);
	if (line_len > 0 && p[line_len - 1] == '\r')
		line_len--;
	for (i = 0; i < line_len && is_tchar((unsigned char)p[i]); i++)
		;
	if (i == 0 || i > MAX_METHOD || i == line_len || p[i] != ' ')
		return 400;
	rq->method = p;
	rq->method_len = i++;
	rq->path = p + i;
	for (; i < line_len && (unsigned char)p[i] > ' ' &&
	    (unsigned char)p[i] < 0x7f; i++)
		;
	if (p + i == rq->path || i == line_len || p[i] != ' ')
		return 400;
	rq->path_len = (size_t)(p + i - rq->path);
	i++;
	if (line_len - i != 8 || strncmp(p + i, "HTTP/", 5) != 0 ||
	    !is_digit((unsigned char)p[i + 5]) || p[i + 6] != '.' ||
	    !is_digit((unsigned char)p[i + 7]))
		return 400;
	if (p[i + 5] != '1' || (p[i + 7] != '0' && p[i + 7] != '1'))
		return 505;
	rq->minor = p[i + 7] - '0';

	/* An absolute-form target (a proxy's habit) is reduced to its path. */
	skip = 0;
	if (rq->path_len >= 7 && strncasecmp(rq->path, "http://", 7) == 0)
		skip = 7;
	else if (rq->path_len >= 8 && strncasecmp(rq->path, "https://", 8) == 0)
		skip = 8;
	if (skip != 0) {
		q = memchr(rq->path + skip, '/', rq->path_len - skip);
		if (q == NULL) {
			rq->path = "/";
			rq->path_len = 1;
		} else {
			rq->path_len -= (size_t)(q - rq->path);
			rq->path = q;
		}
	}
	if ((q = memchr(rq->path, '?', rq->path_len)) != NULL)
		rq->path_len = (size_t)(q - rq->path);

	/* Header lines, up to the empty one. */
	for (line = nl + 1; line < p + len; line = nl + 1) {
		nl = memchr(line, '\n', (size_t)(p + len - line));
		line_len = (size_t)(nl - line);
		if (line_len > 0 && line[line_len - 1] == '\r')
			line_len--;
		if (line_len == 0)
			break;
		if ((rc = parse_header(line, line_len, rq)) != 0)
			return rc;
	}
	return 0;
}

static const char *
status_text(int status)
{
	switch (status) {
	case 200:	return "OK";
	case 400:	return "Bad Request";
	case 404:	return "Not Found";
	case 405:	return "Method Not Allowed";
	case 431:	return "Request Header Fields Too Large";
	case 503:	return "Service Unavailable";
	case 505:	return "HTTP Version Not Supported";
	default:	return "Error";
	}
}

/* An IMF-fixdate, spelled out so that no locale can change it. */
static void
http_date(char out[40])
{
	static const char *const day[] = {
		"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat",
	};
	static const char *const mon[] = {
		"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep",
		"Oct", "Nov", "Dec",
	};
	time_t		t = clock_wall();
	struct tm	tm;

	if (gmtime_r(&t, &tm) == NULL) {
		snprintf(out, 40, "Thu, 01 Jan 1970 00:00:00 GMT");
		return;
	}
	snprintf(out, 40, "%s, %02d %s %04d %02d:%02d:%02d GMT",
	    day[tm.tm_wday % 7], tm.tm_mday, mon[tm.tm_mon % 12],
	    tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static void
on_shutdown(uv_shutdown_t *req, int status)
{
	struct conn	*c = req->data;

	if (status < 0 && status != UV_ECANCELED && c->state != CONN_CLOSED)
		conn_close(c);
}

/*
 * After the last response: send FIN, then read and discard until the
 * client closes or the linger timer fires.  Closing at once while the
 * client still sends (the rest of an oversized head, a body we never
 * read) would answer it with a reset, which can destroy our response in
 * the client's socket before it reads it.
 */
static void
conn_linger(struct conn *c)
{
	uint64_t	ms = LINGER_MS;

	c->state = CONN_LINGER;
	c->sreq.data = c;
	if (uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
		conn_close(c);
		return;
	}
	if (c->s->timeout_ms < ms)
		ms = c->s->timeout_ms;
	uv_timer_start(&c->timer, on_timeout, ms, 0);
	if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
		conn_close(c);
}

static void
on_write(uv_write_t *req, int status)
{
	struct conn	*c = req->data;

	if (status == UV_ECANCELED || c->state == CONN_CLOSED)
		return;
	if (status < 0) {
		conn_close(c);
		return;
	}
	buf_reset(&c->head);
	if (c->body.cap > BODY_KEEP)
		buf_release(&c->body);
	else
		buf_reset(&c->body);
	if (c->close_after) {
		conn_linger(c);
		return;
	}

	/* The next request gets the whole timeout, counted from now. */
	c->state = CONN_READING;
	uv_timer_start(&c->timer, on_timeout, c->s->timeout_ms, 0);
	conn_process(c);	/* one may be buffered already (pipelining) */
	if (c->state == CONN_READING &&
	    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
		conn_close(c);
}

/*
 * Queue status and c->body (or, for HEAD, just the headers saying what the
 * body would be).  Reading stops until the write completes.
 */
static void
respond(struct conn *c, int status, const char *content_type, bool head_only,
    const char *extra)
{
	uv_buf_t	bufs[2];
	char		date[40];
	unsigned	n = 1;

	if (c->state == CONN_CLOSED)	/* the server closed from a callback */
		return;
	http_date(date);
	buf_reset(&c->head);
	buf_printf(&c->head,
	    "HTTP/1.1 %d %s\r\n"
	    "Date: %s\r\n"
	    "Content-Type: %s\r\n"
	    "Content-Length: %zu\r\n"
	    "%s"
	    "%s"
	    "\r\n",
	    status, status_text(status), date, content_type, c->body.len,
	    extra != NULL ? extra : "",
	    c->close_after ? "Connection: close\r\n" : "");
	bufs[0] = uv_buf_init(c->head.ptr, (unsigned)c->head.len);
	if (!head_only && c->body.len > 0) {
		bufs[1] = uv_buf_init(c->body.ptr, (unsigned)c->body.len);
		n = 2;
	}
	uv_read_stop((uv_stream_t *)&c->tcp);
	c->state = CONN_WRITING;
	c->wreq.data = c;
	if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, bufs, n, on_write) != 0)
		conn_close(c);
}

static void
respond_error(struct conn *c, int status, const char *text)
{
	c->close_after = true;
	buf_reset(&c->body);
	buf_puts(&c->body, text);
	respond(c, status, "text/plain; charset=utf-8", false, NULL);
}

static bool
span_is(const char *p, size_t len, const char *s)
{
	return strlen(s) == len && memcmp(p, s, len) == 0;
}

static void
handle(struct conn *c, const struct request *rq)
{
	const struct metrics_health *h = &c->s->health;
	const char	*ctype = "text/plain; charset=utf-8";
	char		 extra[64];
	bool		 get, head, ok;
	int		 status = 200;
	enum { R_NONE, R_METRICS, R_LIVE, R_READY } route = R_NONE;

	/* Methods are case-sensitive; paths are compared exactly. */
	get = span_is(rq->method, rq->method_len, "GET");
	head = span_is(rq->method, rq->method_len, "HEAD");
	if (span_is(rq->path, rq->path_len, "/metrics"))
		route = R_METRICS;
	else if (span_is(rq->path, rq->path_len, "/health") ||
	    span_is(rq->path, rq->path_len, "/health/live"))
		route = R_LIVE;
	else if (span_is(rq->path, rq->path_len, "/health/ready"))
		route = R_READY;

	/* HTTP/1.0 closes unless asked not to; a body we never read closes too. */
	if (rq->minor == 0)
		c->close_after = !rq->conn_keep_alive;
	else
		c->close_after = rq->conn_close;
	if (rq->has_body)
		c->close_after = true;

	buf_reset(&c->body);
	if (route == R_NONE) {
		status = 404;
		buf_puts(&c->body, "not found\n");
	} else if (!get && !head) {
		status = 405;
		buf_puts(&c->body, "method not allowed\n");
	} else if (route == R_METRICS) {
		ctype = "text/plain; version=0.0.4; charset=utf-8";
		metrics_render(&c->body);
	} else {
		if (route == R_LIVE)
			ok = h->live == NULL || h->live(h->arg);
		else
			ok = h->ready == NULL || h->ready(h->arg);
		if (ok)
			buf_puts(&c->body, "ok\n");
		else {
			status = 503;
			buf_puts(&c->body, route == R_LIVE ? "not live\n" :
			    "not ready\n");
		}
	}
	snprintf(extra, sizeof extra, "%s%s",
	    status == 405 ? "Allow: GET, HEAD\r\n" : "",
	    !c->close_after && rq->minor == 0 ?
	    "Connection: keep-alive\r\n" : "");
	respond(c, status, ctype, head, extra);
}

/* Answer the request in c->in if a whole head is there. */
static void
conn_process(struct conn *c)
{
	struct request	rq;
	size_t		end, skip;
	int		status;

	if (c->state != CONN_READING)
		return;
	/* Empty lines before a request line are allowed (RFC 9112 2.2). */
	for (skip = 0; skip < c->in.len &&
	    (c->in.ptr[skip] == '\r' || c->in.ptr[skip] == '\n'); skip++)
		;
	if (skip > 0) {
		buf_consume(&c->in, skip);
		c->scanned = c->scanned > skip ? c->scanned - skip : 0;
	}

	end = find_head_end(c->in.ptr, c->in.len, c->scanned);
	if (end == 0) {
		c->scanned = c->in.len;
		if (!plausible_start(c->in.ptr, c->in.len))
			respond_error(c, 400, "bad request\n");
		else if (c->in.len >= REQ_MAX)
			respond_error(c, 431, "request header fields too large\n");
		else if (c->in.len == 0) {
			/* Idle between requests: hold no memory for it. */
			buf_release(&c->in);
		}
		return;
	}
	c->scanned = 0;
	if ((status = parse_head(c->in.ptr, end, &rq)) != 0) {
		respond_error(c, status, status == 505 ?
		    "HTTP version not supported\n" : "bad request\n");
		return;
	}
	/* The response is built before the request bytes are dropped. */
	handle(c, &rq);
	buf_consume(&c->in, end);
}

static void
on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
	struct conn	*c = h->data;
	size_t		 room = sizeof c->s->scratch;

	(void)suggested;
	/* Never more than fits: the buffer cannot overflow, only fill. */
	if (c->state == CONN_READING)
		room = c->in.len < REQ_MAX ? REQ_MAX - c->in.len : 0;
	*b = uv_buf_init(c->s->scratch, (unsigned)room);
}

static void
on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *b)
{
	struct conn	*c = stream->data;

	if (nread == 0 || c->state == CONN_CLOSED)
		return;
	if (nread < 0) {
		/* EOF or error: mid-request, between requests or lingering. */
		conn_close(c);
		return;
	}
	if (c->state != CONN_READING)
		return;		/* lingering: discard */
	if (buf_append(&c->in, b->base, (size_t)nread) != 0) {
		respond_error(c, 431, "request header fields too large\n");
		return;
	}
	conn_process(c);
}

static void
on_timeout(uv_timer_t *t)
{
	conn_close(t->data);
}

static void
on_conn_closed(uv_handle_t *h)
{
	struct conn		*c = h->data;
	struct metrics_server	*s = c->s;

	if (--c->open_handles > 0)
		return;
	buf_release(&c->in);
	buf_release(&c->head);
	buf_release(&c->body);
	free(c);
	s->allocated--;
	server_maybe_free(s);
}

static void
conn_close(struct conn *c)
{
	struct metrics_server	*s = c->s;

	if (c->state == CONN_CLOSED)
		return;
	c->state = CONN_CLOSED;
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	s->nconns--;
	uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
	uv_close((uv_handle_t *)&c->timer, on_conn_closed);
}

static void
on_connection(uv_stream_t *listener, int status)
{
	struct metrics_server	*s = listener->data;
	struct conn		*c;

	if (status < 0) {
		log_warnx("metrics: accept: %s", uv_strerror(status));
		return;
	}
	c = xcalloc(1, sizeof *c);
	c->s = s;
	buf_init(&c->in, REQ_MAX);
	buf_init(&c->head, BUF_UNLIMITED);
	buf_init(&c->body, BUF_UNLIMITED);
	uv_tcp_init(s->loop, &c->tcp);
	uv_timer_init(s->loop, &c->timer);
	c->tcp.data = c;
	c->timer.data = c;
	c->open_handles = 2;
	c->state = CONN_READING;
	s->allocated++;
	c->next = s->conns;
	if (s->conns != NULL)
		s->conns->prev = c;
	s->conns = c;
	s->nconns++;

	if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
		conn_close(c);
		return;
	}
	if (s->nconns > MAX_CONNS) {
		log_debug("metrics: %d connections open; closing a new one",
		    MAX_CONNS);
		conn_close(c);
		return;
	}
	uv_tcp_nodelay(&c->tcp, 1);
	uv_timer_start(&c->timer, on_timeout, s->timeout_ms, 0);
	if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
		conn_close(c);
}

/*
 * listen_address as gitlab-runner takes it, into a socket address.  Names
 * other than localhost are refused rather than resolved: resolving blocks.
 */
static int
parse_address(const char *addr, struct sockaddr_storage *ss, char **cause)
{
	const char	*host, *host_end, *port, *p;
	char		 hbuf[INET6_ADDRSTRLEN + 64];
	unsigned long	 pnum = 0;
	bool		 v6 = false;
	size_t		 hlen;

	if (*addr == '\0') {
		*cause = xstrdup("listen_address is empty");
		return -1;
	}
	if (addr[0] == '[') {
		host = addr + 1;
		if ((host_end = strchr(host, ']')) == NULL) {
			*cause = xasprintf("listen_address \"%s\": missing ']'",
			    addr);
			return -1;
		}
		if (host_end[1] != ':') {
			*cause = xasprintf("listen_address \"%s\": missing port "
			    "(expected [address]:port)", addr);
			return -1;
		}
		port = host_end + 2;
		v6 = true;
	} else {
		host = addr;
		if ((host_end = strrchr(addr, ':')) == NULL) {
			*cause = xasprintf("listen_address \"%s\": missing port "
			    "(expected host:port or :port)", addr);
			return -1;
		}
		if (memchr(host, ':', (size_t)(host_end - host)) != NULL) {
			*cause = xasprintf("listen_address \"%s\": an IPv6 "
			    "address goes in brackets, as [::1]:9252", addr);
			return -1;
		}
		port = host_end + 1;
	}

	for (p = port; *p != '\0'; p++) {
		if (!is_digit((unsigned char)*p) || p - port >= 5)
			break;
		pnum = pnum * 10 + (unsigned long)(*p - '0');
	}
	if (p == port || *p != '\0' || pnum > 65535) {
		*cause = xasprintf("listen_address \"%s\": invalid port \"%s\" "
		    "(0 to 65535)", addr, port);
		return -1;
	}

	hlen = (size_t)(host_end - host);
	if (hlen >= sizeof hbuf) {
		*cause = xasprintf("listen_address \"%s\": host too long", addr);
		return -1;
	}
	memcpy(hbuf, host, hlen);
	hbuf[hlen] = '\0';
	memset(ss, 0, sizeof *ss);
	if (v6) {
		if (uv_ip6_addr(hbuf, (int)pnum, (struct sockaddr_in6 *)ss) != 0) {
			*cause = xasprintf("listen_address \"%s\": \"%s\" is not "
			    "an IPv6 address", addr, hbuf);
			return -1;
		}
		return 0;
	}
	if (hlen == 0)
		snprintf(hbuf, sizeof hbuf, "0.0.0.0");
	else if (strcasecmp(hbuf, "localhost") == 0)
		snprintf(hbuf, sizeof hbuf, "127.0.0.1");
	if (uv_ip4_addr(hbuf, (int)pnum, (struct sockaddr_in *)ss) != 0) {
		*cause = xasprintf("listen_address \"%s\": \"%s\" is not an IP "
		    "address (host names other than localhost are not "
		    "resolved)", addr, hbuf);
		return -1;
	}
	return 0;
}

/*
 * The listening socket is made here rather than by uv_tcp_bind(), which
 * reports some bind errors only at uv_listen(): every way to fail comes
 * before a handle exists, so a failure leaves nothing to close.
 */
static int
open_listener(const char *addr, const struct sockaddr_storage *ss, int *port,
    char **cause)
{
	struct sockaddr_storage	 bound;
	socklen_t		 len;
	int			 fd, one = 1, saved;

	len = ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
	    sizeof(struct sockaddr_in);
	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0);
	if (fd == -1)
		goto fail;
	/* A restarted daemon must not wait out TIME_WAIT of the old one. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (const struct sockaddr *)ss, len) == -1 ||
	    listen(fd, BACKLOG) == -1)
		goto fail;
	len = sizeof bound;
	if (getsockname(fd, (struct sockaddr *)&bound, &len) == -1)
		goto fail;
	*port = ntohs(bound.ss_family == AF_INET6 ?
	    ((struct sockaddr_in6 *)&bound)->sin6_port :
	    ((struct sockaddr_in *)&bound)->sin_port);
	return fd;

fail:
	saved = errno;
	if (fd != -1)
		close(fd);
	*cause = xasprintf("listen_address \"%s\": cannot listen: %s", addr,
	    strerror(saved));
	return -1;
}

static void
on_listener_closed(uv_handle_t *h)
{
	struct metrics_server	*s = h->data;

	s->listener_closed = true;
	server_maybe_free(s);
}

struct metrics_server *
metrics_server_start(uv_loop_t *loop, const char *listen_address,
    const struct metrics_health *health, char **cause)
{
	struct metrics_server	*s;
	struct sockaddr_storage	 ss;
	int			 fd, port, rc;

	*cause = NULL;
	if (listen_address == NULL)
		listen_address = "";
	if (parse_address(listen_address, &ss, cause) != 0)
		return NULL;
	if ((fd = open_listener(listen_address, &ss, &port, cause)) == -1)
		return NULL;

	s = xcalloc(1, sizeof *s);
	s->loop = loop;
	if (health != NULL)
		s->health = *health;
	s->port = port;
	s->timeout_ms = DEFAULT_TIMEOUT_MS;
	if ((rc = uv_tcp_init(loop, &s->listener)) != 0) {
		close(fd);
		free(s);
		*cause = xasprintf("listen_address \"%s\": %s", listen_address,
		    uv_strerror(rc));
		return NULL;
	}
	s->listener.data = s;
	/*
	 * Neither failure below is seen in practice (the socket is new and
	 * already listening), but the handle exists now: it is closed like
	 * any other, and owns the descriptor once uv_tcp_open() took it.
	 */
	if ((rc = uv_tcp_open(&s->listener, fd)) != 0)
		close(fd);
	else
		rc = uv_listen((uv_stream_t *)&s->listener, BACKLOG,
		    on_connection);
	if (rc != 0) {
		*cause = xasprintf("listen_address \"%s\": %s", listen_address,
		    uv_strerror(rc));
		s->closing = true;
		uv_close((uv_handle_t *)&s->listener, on_listener_closed);
		return NULL;
	}
	log_debug("metrics: listening on %s (port %d)", listen_address, port);
	return s;
}

int
metrics_server_port(const struct metrics_server *s)
{
	return s->port;
}

void
metrics_server_set_timeout(struct metrics_server *s, uint64_t ms)
{
	s->timeout_ms = ms;
}

void
metrics_server_close(struct metrics_server *s)
{
	if (s == NULL || s->closing)
		return;
	s->closing = true;
	while (s->conns != NULL)
		conn_close(s->conns);
	uv_close((uv_handle_t *)&s->listener, on_listener_closed);
}

/*
 * The metrics registry (metrics.h); the listener that serves it is
 * runner/metrics_server.c.
 *
 * Two chained hash tables, one of names (families) and one of
 * series keyed by name and labels, so that an update after the first is a
 * hash, a compare and an addition.  Each family keeps its series sorted by
 * labels, and the families are kept sorted by name, both at insertion: the
 * scrape walks them in order and allocates nothing but its output.
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

#include "lib/buf.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/metrics.h"
#include "lib/xmalloc.h"

#define MAX_BOUNDS	32

/* The default upper bounds; +Inf follows every list. */
static const double	default_bounds[] = {
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
};
#define NDEFAULT	(sizeof default_bounds / sizeof default_bounds[0])

enum kind {
	KIND_COUNTER,
	KIND_GAUGE,
	KIND_HISTOGRAM,
};

static const char *const kind_name[] = {
	[KIND_COUNTER] = "counter",
	[KIND_GAUGE] = "gauge",
	[KIND_HISTOGRAM] = "histogram",
};

struct series;

struct family {
	char		*name;
	char		*help;		/* NULL until described */
	enum kind	 kind;
	bool		 invalid;	/* not a valid name: never rendered */
	bool		 warned;	/* misuse reported once */
	const double	*bounds;	/* histogram: default_bounds or owned */
	size_t		 nbounds;	/* histogram: without +Inf */
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
	void		(*collect)(void *);
	void		 *collect_arg;
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
	f->bounds = default_bounds;
	f->nbounds = NDEFAULT;
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
		size += (f->nbounds + 1) * sizeof s->buckets[0];
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

int
metrics_describe_histogram(const char *name, const char *help,
    const double *bounds, size_t nbounds)
{
	struct family	*f;
	double		*copy;
	size_t		 i;
	int		 rc;

	if (nbounds == 0 || nbounds > MAX_BOUNDS)
		return -EINVAL;
	for (i = 0; i < nbounds; i++) {
		if (!isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1]))
			return -EINVAL;
	}
	if ((rc = metrics_describe(name, "histogram", help)) != 0)
		return rc;
	f = family_get(name, KIND_HISTOGRAM);
	/* The series already made have their buckets: the first bounds stay. */
	if (f->kind != KIND_HISTOGRAM || f->nseries != 0 ||
	    f->bounds != default_bounds)
		return 0;
	copy = xcalloc(nbounds, sizeof *copy);
	memcpy(copy, bounds, nbounds * sizeof *copy);
	f->bounds = copy;
	f->nbounds = nbounds;
	return 0;
}

void
metrics_clear(const char *name)
{
	struct family	*f;
	struct series	*s, **pp;
	size_t		 i;

	if (name == NULL || (f = family_find(name, hash_key(name, NULL))) == NULL)
		return;
	for (i = 0; i < f->nseries; i++) {
		s = f->series[i];
		pp = (struct series **)&reg.series.slot[s->hash &
		    (reg.series.size - 1)];
		while (*pp != s)
			pp = &(*pp)->hnext;
		*pp = s->hnext;
		reg.series.n--;
		free(s->labels);
		free(s);
	}
	f->nseries = 0;
}

void
metrics_set_collector(void (*collect)(void *), void *arg)
{
	reg.collect = collect;
	reg.collect_arg = arg;
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
	for (i = 0; i < s->fam->nbounds; i++) {
		if (seconds <= s->fam->bounds[i])
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
			if (f->bounds != default_bounds)
				free((double *)f->bounds);
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
static void
format_value(char *out, size_t size, double v)
{
	int	prec;

	if (isnan(v)) {
		snprintf(out, size, "NaN");
		return;
	}
	if (isinf(v)) {
		snprintf(out, size, "%s", v > 0 ? "+Inf" : "-Inf");
		return;
	}
	if (v == floor(v) && fabs(v) < 9007199254740992.0) {	/* 2^53 */
		snprintf(out, size, "%.0f", v == 0 ? 0.0 : v);
		return;
	}
	for (prec = 1; prec < 17; prec++) {
		snprintf(out, size, "%.*g", prec, v);
		if (strtod(out, NULL) == v)
			return;
	}
	snprintf(out, size, "%.17g", v);
}

static int
put_value(struct buf *out, double v)
{
	char	tmp[40];

	format_value(tmp, sizeof tmp, v);
	return buf_puts(out, tmp);
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
	char			 le[40];
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
		for (j = 0; j <= f->nbounds; j++) {
			cum += s->buckets[j];
			if (j < f->nbounds)
				format_value(le, sizeof le, f->bounds[j]);
			else
				snprintf(le, sizeof le, "+Inf");
			rc |= put_sample(out, f->name, "_bucket", s->labels,
			    le, (double)cum);
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

	if (reg.collect != NULL)
		reg.collect(reg.collect_arg);
	process_update();
	for (i = 0; i < reg.nsorted; i++) {
		/* A name described but never updated has nothing to show. */
		if (reg.sorted[i]->nseries != 0)
			rc |= put_family(out, reg.sorted[i]);
	}
	return rc != 0 ? -ENOSPC : 0;
}

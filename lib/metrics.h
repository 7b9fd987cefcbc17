/*
 * What the daemon tells Prometheus and a supervisor about itself: a small
 * process-wide registry of counters, gauges and histograms rendered in the
 * Prometheus text exposition format 0.0.4 (runner/metrics_server.h serves
 * it over HTTP).
 *
 * The registry.  A series is a metric name plus its rendered label set
 * without braces, e.g. `endpoint="jobs_request",status="204"`, or "" (NULL
 * means "") for none.  Label values must be escaped with
 * metrics_label_escape(); the registry stores the label string as given.
 * A series is allocated the first time it is seen; after that an update is
 * a hash lookup and an addition, without allocation.  A name belongs to
 * one kind (counter, gauge, histogram), fixed by metrics_describe() or by
 * its first update.  Dropped: counter decrements, updates of another
 * kind and names that are not valid Prometheus names (those two with one
 * warning per name).  The registry is not thread-safe: it belongs to the
 * loop thread.
 */
#ifndef LIB_METRICS_H
#define LIB_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf;

/*
 * HELP and TYPE of a name; type is "counter", "gauge" or "histogram".  The
 * first description of a name wins; later ones are ignored.  Returns 0, or
 * -EINVAL for an unknown type or an invalid name.  Strings are copied.
 */
int	metrics_describe(const char *name, const char *type, const char *help);
/*
 * A histogram with its own upper bounds (ascending, finite, at most 32;
 * +Inf is added).  Must come before the name's first observation, which
 * otherwise fixes the default bounds.  0, or -EINVAL.
 */
int	metrics_describe_histogram(const char *name, const char *help,
	    const double *bounds, size_t nbounds);
/* Counters only go up: a negative or NaN v is ignored. */
void	metrics_counter_add(const char *name, const char *labels, double v);
void	metrics_gauge_set(const char *name, const char *labels, double v);
void	metrics_gauge_add(const char *name, const char *labels, double v);
/*
 * One observation in seconds, in the name's buckets (by default 0.005
 * 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10 30 60 +Inf); rendered as
 * name_bucket{...,le="..."}, name_sum and name_count.
 */
void	metrics_histogram_observe(const char *name, const char *labels,
	    double seconds);

/*
 * Drop every series of name; the name keeps its kind and description.
 * For series made afresh at each scrape (the collector below), so that
 * one that is gone is not shown.
 */
void	metrics_clear(const char *name);
/*
 * A function metrics_render() calls first, to set the series that are a
 * view of state rather than a count of events.  One; NULL removes it.
 */
void	metrics_set_collector(void (*collect)(void *arg), void *arg);

/*
 * Append the exposition text to out: every name in byte order with its
 * HELP (if described) and TYPE lines, series ordered by labels, and the
 * process metrics read now from /proc (process_cpu_seconds_total,
 * process_open_fds, process_resident_memory_bytes,
 * process_start_time_seconds).  Returns 0, or -ENOSPC if out's cap was
 * reached (out then holds an incomplete text).
 */
int	metrics_render(struct buf *out);
/* Append value escaped for a label value: \ " and newline. 0 or -ENOSPC. */
int	metrics_label_escape(struct buf *out, const char *value);
/* Forget every name and series and free their memory (tests, exit). */
void	metrics_reset(void);

#endif

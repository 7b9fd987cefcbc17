/*
 * What the daemon tells Prometheus and a supervisor about itself: a small
 * process-wide registry of counters, gauges and histograms rendered in the
 * Prometheus text exposition format 0.0.4, and the HTTP listener on
 * listen_address that serves it (/metrics) with /health/live and
 * /health/ready.
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
 *
 * The listener.  It speaks just enough HTTP/1.1 (and 1.0) for scrapers and
 * probes: keep-alive with Content-Length, one response at a time per
 * connection, request heads capped at 16 KiB (431 and close), a 30 s limit
 * for a client to send a request and read its answer, at most 64
 * connections (more are closed as they are accepted).  It never blocks
 * the loop: the health callbacks and metrics_render() run on it and must
 * be quick.
 */
#ifndef RUNNER_METRICS_H
#define RUNNER_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

struct buf;
struct metrics_server;

/*
 * HELP and TYPE of a name; type is "counter", "gauge" or "histogram".  The
 * first description of a name wins; later ones are ignored.  Returns 0, or
 * -EINVAL for an unknown type or an invalid name.  Strings are copied.
 */
int	metrics_describe(const char *name, const char *type, const char *help);
/* Counters only go up: a negative or NaN v is ignored. */
void	metrics_counter_add(const char *name, const char *labels, double v);
void	metrics_gauge_set(const char *name, const char *labels, double v);
void	metrics_gauge_add(const char *name, const char *labels, double v);
/*
 * One observation in seconds, in the buckets 0.005 0.01 0.025 0.05 0.1
 * 0.25 0.5 1 2.5 5 10 30 60 +Inf; rendered as name_bucket{...,le="..."},
 * name_sum and name_count.
 */
void	metrics_histogram_observe(const char *name, const char *labels,
	    double seconds);

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

/*
 * Probe answers.  A NULL callback (or a NULL struct) means "yes".  They
 * run on the loop, once per request.
 */
struct metrics_health {
	bool	(*ready)(void *arg);	/* /health/ready: 200 "ok", else 503 */
	bool	(*live)(void *arg);	/* /health/live, /health: 200, else 503 */
	void	*arg;
};

/*
 * Listen on listen_address, gitlab-runner's form: "host:port",
 * "[v6addr]:port", or ":port" for 0.0.0.0.  The host is an IP address or
 * "localhost" (127.0.0.1): names are not resolved, which would block.
 * Port 0 picks a free port (metrics_server_port() says which).  *health is
 * copied; its arg must outlive the server.
 *
 * Returns NULL on failure with *cause set to a sentence naming the address
 * (the caller frees it).  Nothing is left open on the loop then, save in
 * one case not seen in practice (libuv refusing the new socket), where a
 * handle is closing and the loop must run before uv_loop_close().  On
 * success the server serves until metrics_server_close().
 */
struct metrics_server *metrics_server_start(uv_loop_t *loop,
	    const char *listen_address, const struct metrics_health *health,
	    char **cause);
/* The port it listens on (useful after port 0). */
int	metrics_server_port(const struct metrics_server *s);
/*
 * Stop listening and close every connection, whatever it was doing.  The
 * memory is freed by the close callbacks: run the loop afterwards and it
 * ends with nothing of the server left open.  s must not be used after
 * this call.  NULL is accepted.
 */
void	metrics_server_close(struct metrics_server *s);
/*
 * Tests: the time a client has to send a request and read its answer
 * (default 30 s), for connections accepted or requests started after the
 * call.
 */
void	metrics_server_set_timeout(struct metrics_server *s, uint64_t ms);

#endif

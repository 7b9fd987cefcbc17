/*
 * The HTTP listener on listen_address that serves the metrics registry
 * (lib/metrics.h) as /metrics, with /health/live and /health/ready.
 *
 * It speaks just enough HTTP/1.1 (and 1.0) for scrapers and
 * probes: keep-alive with Content-Length, one response at a time per
 * connection, request heads capped at 16 KiB (431 and close), a 30 s limit
 * for a client to send a request and read its answer, at most 64
 * connections (more are closed as they are accepted).  It never blocks
 * the loop: the health callbacks and metrics_render() run on it and must
 * be quick.
 */
#ifndef RUNNER_METRICS_SERVER_H
#define RUNNER_METRICS_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

struct metrics_server;

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

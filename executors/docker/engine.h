/*
 * The Docker Engine API, as this executor speaks it: plain HTTP/1.1 over
 * the engine's unix socket (or tcp://, with TLS from tls_cert_path), on
 * api/http.h's libcurl multi on libuv.  Every path is sent with the
 * version prefix negotiated by engine_connect() (GET /_ping's Api-Version,
 * capped at the newest version this client knows, refused below 1.41).
 *
 * Engine calls are not retried by the HTTP layer: creates are not
 * idempotent, and the executor knows which failures are worth another go.
 * Long calls (wait, attach, logs?follow, pulls) have no deadline; their
 * caller cancels them.
 *
 * Contract of every call: NULL from the call means the callback will
 * never come; otherwise the callback comes exactly once (error -ECANCELED
 * after engine_call_cancel() or engine_close()), and the call is freed by
 * the engine after it returns.
 */
#ifndef EXECUTORS_DOCKER_ENGINE_H
#define EXECUTORS_DOCKER_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

struct engine;
struct engine_call;
struct engine_result;

#define ENGINE_API_MIN		"1.41"	/* Debian 12's docker.io */
#define ENGINE_API_MAX		"1.47"	/* the newest whose create bodies we write */

struct engine_config {
	uv_loop_t	*loop;
	/*
	 * unix:///path or tcp://host:port; NULL or "": $DOCKER_HOST, then
	 * unix:///var/run/docker.sock.
	 */
	const char	*host;
	/*
	 * TLS for tcp:// (DOCKER_TLS_VERIFY): the directory of ca.pem, cert.pem
	 * and key.pem; NULL: $DOCKER_CERT_PATH, then ~/.docker.
	 */
	bool		 tls_verify;
	const char	*tls_cert_path;
	const char	*user_agent;	/* NULL: "runner" */
};

/*
 * Parse the address; nothing is sent yet.  NULL with *cause (one line
 * naming the host) for a host this client cannot use.
 */
struct engine	*engine_new(const struct engine_config *cfg, char **cause);
/*
 * Cancel every call (each callback gets -ECANCELED) and free the engine
 * once libuv has closed its handles: run the loop afterwards.
 */
void		 engine_close(struct engine *e);
/* The address as the user wrote it or it was defaulted: for messages. */
const char	*engine_address(const struct engine *e);
/*
 * Why a GET /_ping did not answer 200, naming the engine once: the
 * transport's message names it already, the daemon's does not.  The
 * caller frees it.
 */
char		*engine_unreachable(const struct engine *e, const struct engine_result *res);
/* The negotiated version ("1.41"), or NULL before engine_connect() ended. */
const char	*engine_api_version(const struct engine *e);
/* Whether the negotiated version is at least "major.minor". */
bool		 engine_api_at_least(const struct engine *e, const char *version);

/* What a call ended with; valid inside the callback. */
struct engine_result {
	long		 status;	/* HTTP status; 0 if there was no answer */
	int		 error;		/* 0, or -errno for the transport (-ECANCELED ...) */
	/*
	 * In words, for the log: the daemon's {"message": ...}, or the
	 * transport's error ("cannot connect to /var/run/docker.sock: No
	 * such file or directory"), or "" on success.
	 */
	const char	*message;
	const char	*body;		/* NUL-terminated; "" when streamed */
	size_t		 body_len;
};

typedef void	engine_done_cb(const struct engine_result *res, void *arg);
/* Bytes of a streamed answer, as they arrive (any split). */
typedef void	engine_data_cb(const char *data, size_t len, void *arg);

/*
 * GET /_ping, then the version: ready gets the result of the ping (status
 * 200 and error 0 on success; the message says why not).
 */
struct engine_call *engine_connect(struct engine *e, engine_done_cb *ready, void *arg);

/* Options of one call; zero is the default (a JSON answer up to 4 MiB, no deadline). */
struct engine_call_opts {
	const char	*json;		/* request body, application/json */
	/* A tar body read from fd at [offset, offset+len) (PUT .../archive). */
	int		 tar_fd;	/* used when tar_len > 0 */
	off_t		 tar_offset;
	off_t		 tar_len;
	/* X-Registry-Auth: a secret header, never logged (pulls). */
	const char	*registry_auth;
	/* Streamed answer: 2xx bytes go to on_data, not into res->body. */
	engine_data_cb	*on_data;
	uint64_t	 timeout_ms;	/* 0: none */
};

/*
 * method and path ("/containers/create?name=x": the version prefix is
 * added); query values must already be URL-encoded (engine_query_escape).
 */
struct engine_call *engine_call(struct engine *e, const char *method, const char *path,
		    const struct engine_call_opts *opts, engine_done_cb *done, void *arg);
void		 engine_call_cancel(struct engine_call *c);

/* s URL-encoded for a query value; the caller frees it. */
char		*engine_query_escape(const char *s);

/*
 * Streams of JSON lines (pulls, loads): give it bytes as they come, it
 * calls line() for each complete line, whatever the split.
 */
struct engine_lines {
	char	*buf;
	size_t	 len, cap;
};
void	engine_lines_feed(struct engine_lines *l, const char *data, size_t len,
	    void (*line)(const char *s, size_t n, void *arg), void *arg);
/* The unterminated rest, as a last line, then release. */
void	engine_lines_end(struct engine_lines *l,
	    void (*line)(const char *s, size_t n, void *arg), void *arg);

/* ---- internal to executors/docker: the socket of a hijacked connection ---- */

/*
 * How to reach the engine outside libcurl's multi handle (attach.c): the
 * unix socket path, or NULL for tcp; the base URL ("http://docker" or
 * "https://host:port"); the TLS files when verifying.
 */
struct engine_endpoint {
	const char	*unix_path;
	const char	*base_url;
	const char	*ca_file, *cert_file, *key_file;
	bool		 tls_verify;
};
const struct engine_endpoint *engine_endpoint(const struct engine *e);
uv_loop_t	*engine_loop(const struct engine *e);

#endif

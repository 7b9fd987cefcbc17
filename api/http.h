/*
 * HTTP on libcurl's multi socket interface, driven by libuv, with the
 * retry layer.  Knows nothing of GitLab: the GitLab calls (api.h) and,
 * later, the docker executor build on it.  What a caller's peer is called
 * in log lines and what its endpoints are called in metrics are the
 * caller's to say (http_config.peer, http_req_endpoint()).
 *
 * One struct http per loop owns the curl multi handle, one uv_timer and a
 * uv_poll per socket libcurl asks us to watch (curl's multi-uv pattern).
 * A struct http_req is one logical request: it owns its method, URL,
 * headers, body bytes, response buffer and policy, and it sends the same
 * bytes on every attempt.  Whether to try again is decided by one pure
 * function (retry.h); the waits honour Retry-After and RateLimit-ResetTime
 * but never outlast the request's deadline.
 *
 * Redirects are followed here, for every request, by the one rule of
 * redirect.h: token headers (and bodies that carry a token) stay with the
 * origin they were issued for, and https never becomes http.  A redirect
 * that rule refuses ends the request with -EPERM and says why.
 *
 * Contract of http_req_start(): if it returns an error the callback is
 * never called; if it returns 0 the callback is called exactly once, after
 * the last attempt, on cancel (status 0, error -ECANCELED), or when the
 * http is closed.  The callback may free the request.
 */
#ifndef API_HTTP_H
#define API_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "lib/buf.h"

struct http;
struct http_req;

struct http_config {
	uv_loop_t	*loop;
	const char	*user_agent;		/* copied */
	/*
	 * Who answers, as log lines and the help of the request counter name
	 * it ("GitLab asked for a pause"); copied.  NULL: "the server".
	 */
	const char	*peer;
	/* Connections older than this are not reused (0: no limit). */
	uint64_t	 connection_max_age_ms;
	/*
	 * How many retry attempts may be on the wire at once, across every
	 * request: a storm of 429s then queues retries in memory instead of
	 * opening connections.  0 means the default (8).
	 */
	unsigned	 max_retries_in_flight;
	/* Backoff bounds; 0 means the defaults (100 ms, 60 s). */
	uint64_t	 backoff_min_ms;
	uint64_t	 backoff_max_ms;
	/*
	 * A failure that says the server is down or drowning (5xx or 429
	 * without a wait, refused, reset, timed out) holds its endpoint class
	 * too (api/pushback.h), for windows from gate_min_ms (0: 1 s)
	 * doubling to gate_max_ms (0: 8 s).  Off, only a server's "wait"
	 * holds: right for a peer whose 500 is about the request (an engine).
	 */
	bool		 hold_on_failure;
	uint64_t	 gate_min_ms;
	uint64_t	 gate_max_ms;
	/* Once a class opens, what it held resumes over this long (0: at once). */
	uint64_t	 resume_spread_ms;
};

/* TLS settings of a request; every path is copied. */
struct http_tls {
	const char	*ca_file;	/* trusted in addition to the system CAs */
	const char	*cert_file;	/* client certificate (PEM) */
	const char	*key_file;	/* its key (PEM) */
};

enum http_flags {
	HTTP_NO_RETRY		= 1 << 0,	/* one attempt, whatever happens */
	HTTP_NO_RETRY_429	= 1 << 1,	/* a 429 is the answer, not retried */
	HTTP_ACCEPT_JSON	= 1 << 2,	/* send Accept: application/json */
	/*
	 * A redirect drops the token headers even to the same origin: a
	 * download sent on to object storage, whose presigned URL needs none.
	 */
	HTTP_REDIRECT_NO_TOKENS	= 1 << 3,
	/*
	 * The caller says what failed in its own words (a 404 may be its
	 * answer): failed attempts are logged at debug level, not as warnings.
	 */
	HTTP_QUIET		= 1 << 4,
	/*
	 * The server may hold it by design (a long poll).  When it probes a
	 * class held for failures and is held past a moment, without the fast
	 * failure of a server that is down, the class opens: waiting out the
	 * hold would keep every entry away that long after GitLab came back.
	 */
	HTTP_LONG_POLL		= 1 << 5,
};

/* What a request ended with; valid inside the callback. */
struct http_result {
	long		 status;	/* HTTP status of the last attempt; 0 if none */
	int		 error;		/* 0, -ECANCELED, -ETIMEDOUT, -EMSGSIZE, -EIO ... */
	const char	*error_text;	/* transport error in words, or "" */
	const char	*body;		/* response body, NUL-terminated */
	size_t		 body_len;
	uint64_t	 file_len;	/* bytes written to the response fd, if one was set */
	unsigned	 attempts;	/* how many times it was sent */
	const char	*request_id;	/* X-Request-Id sent (the server's if it sent one) */
};

typedef void	http_done_cb(struct http_req *req, const struct http_result *res,
		    void *data);

struct http	*http_new(const struct http_config *cfg);
/*
 * Cancel every request (each callback gets -ECANCELED), release libcurl
 * and start closing the libuv handles.  Memory is freed by the close
 * callbacks: run the loop afterwards until it has no more handles.
 */
void		 http_close(struct http *h);

/* New bounds for the failure windows and the spread (a config reload); 0 keeps one. */
void		 http_set_pushback(struct http *h, uint64_t gate_max_ms,
		    uint64_t resume_spread_ms);

/* A new request; nothing is sent until http_req_start(). */
struct http_req	*http_req_new(struct http *h, const char *method, const char *url);
/*
 * Add a header.  A secret header carries a token: it is never logged and
 * never follows a redirect to another origin (nor do Job-Token,
 * Runner-Token, Private-Token and Authorization however they were added).
 */
void		 http_req_header(struct http_req *r, const char *name, const char *value);
void		 http_req_secret_header(struct http_req *r, const char *name,
		    const char *value);
/* The body: copied into the request, sent identically on every attempt. */
void		 http_req_body(struct http_req *r, const char *content_type,
		    const void *data, size_t len);
/* A body with a token in it: a redirect that would send it elsewhere is refused. */
void		 http_req_secret_body(struct http_req *r, const char *content_type,
		    const void *data, size_t len);
/*
 * A streamed body read from fd (which the request does not own) at offsets
 * offset .. offset+len-1 with pread, so every attempt sends the same bytes
 * as long as the caller leaves that range of the file alone.
 */
void		 http_req_body_fd(struct http_req *r, const char *content_type,
		    int fd, off_t offset, off_t len);
void		 http_req_tls(struct http_req *r, const struct http_tls *tls);
/*
 * Connect to this unix socket instead of the URL's host (the URL still
 * names the scheme and the Host header: "http://docker/_ping"); copied.
 */
void		 http_req_unix_socket(struct http_req *r, const char *path);
/*
 * What the request is for, as the endpoint label of runner_api_requests_total
 * and the pushback class it belongs to (with its method and origin): few
 * distinct values, no ids, no query, no quotes ("/jobs/{id}/trace"); copied.
 * Default: http_endpoint_label(url, NULL).
 */
void		 http_req_endpoint(struct http_req *r, const char *endpoint);
void		 http_req_flags(struct http_req *r, int flags);
/* Deadline for the whole request, retries included (default 60 min). */
void		 http_req_deadline(struct http_req *r, uint64_t timeout_ms);
/* Time one attempt may take (default 10 min; long polls hold ~50 s). */
void		 http_req_attempt_timeout(struct http_req *r, uint64_t timeout_ms);
/* Attempts in all (default 5, as gitlab-runner). */
void		 http_req_max_attempts(struct http_req *r, unsigned n);
/*
 * A 2xx body goes to fd (which the request does not own) from offset 0,
 * the file truncated before every attempt, instead of into memory; other
 * answers' bodies still land in the buffer, for the log.
 */
void		 http_req_response_fd(struct http_req *r, int fd);
/*
 * A 2xx body goes to cb as it arrives, in pieces of any size, instead of
 * into memory (the response cap does not apply to it); other answers'
 * bodies still land in the buffer, for the error message.  A retried
 * request may stream again from the first byte: streamed requests want
 * HTTP_NO_RETRY.  cb runs inside libcurl: it must not free the request
 * nor start one (libcurl refuses that from its callbacks: the start fails);
 * it may cancel it, and then the done callback comes (-ECANCELED) once
 * libcurl has let go of the transfer, not from inside http_req_cancel().
 */
typedef void	http_data_cb(const char *data, size_t len, void *arg);
void		 http_req_on_data(struct http_req *r, http_data_cb *cb, void *arg);
/* Largest response body accepted (default 1 MiB); more fails with -EMSGSIZE. */
void		 http_req_response_cap(struct http_req *r, size_t max);

int		 http_req_start(struct http_req *r, http_done_cb *cb, void *data);
/* The callback gets error -ECANCELED (at once, from inside this call). */
void		 http_req_cancel(struct http_req *r);
/* Free a request that is not running (never started, or its callback ran). */
void		 http_req_free(struct http_req *r);

/* A response header of the last attempt (case-insensitive), or NULL. */
const char	*http_req_response_header(const struct http_req *r, const char *name);
/* The method and URL the request was made with, whatever it was redirected to. */
const char	*http_req_method(const struct http_req *r);
const char	*http_req_url(const struct http_req *r);

/*
 * The endpoint label of a URL: its path, less root if the path starts with
 * it (NULL: nothing taken off), each all-digit segment as {id}, no query.
 * Cut to fit size.
 */
void		 http_endpoint_label(const char *url, const char *root, char *out,
		    size_t size);

/* How many requests are active or waiting to retry (for shutdown and tests). */
unsigned	 http_active(const struct http *h);

#endif

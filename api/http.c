/*
 * HTTP requests on libcurl's multi socket interface, driven by libuv, and
 * the retry layer around them.
 *
 * The glue is curl's multi-uv pattern: libcurl tells us which sockets to
 * watch (on_curl_socket: one uv_poll each) and when to call it back
 * (on_curl_timer: one uv_timer); we hand events back with
 * curl_multi_socket_action() and then collect finished transfers in
 * drain().  That is the only place an attempt ends, and it runs after
 * libcurl has returned, so a request's callback may start, cancel or free
 * requests freely.
 *
 * A request between attempts holds no connection: it sits in the backoff
 * list (one more uv_timer serves them all, armed for the earliest).  When
 * its wait is over it needs one of the retry slots; without one it waits in
 * a queue.  So a storm of 429s costs memory for the waiting requests, not
 * connections or file descriptors.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#include "api/http.h"
#include "api/pushback.h"
#include "api/redact.h"
#include "api/redirect.h"
#include "api/retry.h"
#include "lib/backoff.h"
#include "lib/buf.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/metrics.h"
#include "lib/rand.h"
#include "lib/xmalloc.h"

#define DEFAULT_RETRY_SLOTS		8
#define DEFAULT_BACKOFF_MIN_MS		100
#define DEFAULT_GATE_MIN_MS		1000
#define DEFAULT_GATE_MAX_MS		8000
/*
 * A probe that a server holds this long has not met the fast failure of
 * one that is down (a load balancer's 502, a refusal): it is long polled.
 */
#define LONG_POLL_PROBE_MS		2000
#define DEFAULT_BACKOFF_MAX_MS		(60 * 1000)
#define DEFAULT_DEADLINE_MS		(60ULL * 60 * 1000)
#define DEFAULT_ATTEMPT_TIMEOUT_MS	(10ULL * 60 * 1000)
#define DEFAULT_MAX_ATTEMPTS		5
#define DEFAULT_RESPONSE_CAP		(1024 * 1024)
#define CONNECT_TIMEOUT_MS		30000
#define LOG_BODY_EXCERPT		512
#define MAX_REDIRECTS			10	/* as Go's http.Client, gitlab-runner's */

/* Where a request is in its life. */
enum req_state {
	REQ_NEW,	/* built, not started */
	REQ_ACTIVE,	/* an attempt is in the multi handle */
	REQ_BACKOFF,	/* waiting out a delay before the next attempt */
	REQ_QUEUED,	/* delay over, waiting for a retry slot */
	REQ_DONE,	/* callback called (or about to be) */
};

static const char *const req_state_names[] = {
	[REQ_NEW] = "new",
	[REQ_ACTIVE] = "active",
	[REQ_BACKOFF] = "backoff",
	[REQ_QUEUED] = "queued",
	[REQ_DONE] = "done",
};
_Static_assert(sizeof(req_state_names) / sizeof(req_state_names[0]) == REQ_DONE + 1,
    "a name for every request state");

struct http_req {
	struct http		*h;
	enum req_state		 state;
	struct http_req		*prev, *next;	/* h->requests: every started one */
	struct http_req		*wait_next;	/* h->backoff or h->queue */

	char			*method;
	char			*url;
	char			*endpoint;	/* label in metrics and the gate's key */
	struct curl_slist	*headers;
	struct curl_slist	*secret_headers;	/* the ones that carry tokens */
	struct curl_slist	*wire_headers;	/* what libcurl was given, this attempt */
	char			*content_type;
	bool			 has_body;
	bool			 body_has_token;
	/* Where redirects took it; the caller's method and URL stay as they were. */
	char			*redirect_url;	/* NULL: not redirected */
	bool			 redirect_get;	/* a 303 made it a GET without body */
	bool			 tokens_dropped;	/* it left the origin of its tokens */
	unsigned		 redirects;
	struct buf		 body;		/* in-memory body: the same bytes each time */
	int			 body_fd;	/* streamed body, or -1 */
	off_t			 body_off;	/* where in body_fd it starts */
	off_t			 body_len;
	off_t			 body_pos;	/* sent so far, this attempt */
	char			*ca_file, *cert_file, *key_file;
	char			*unix_path;	/* CURLOPT_UNIX_SOCKET_PATH, or NULL */
	int			 flags;
	uint64_t		 deadline_ms;	/* relative, until started */
	uint64_t		 deadline_at;	/* monotonic ms, once started */
	uint64_t		 attempt_timeout_ms;
	unsigned		 max_attempts;
	unsigned		 attempts;
	size_t			 response_cap;
	int			 response_fd;	/* 2xx bodies go here (pwrite), or -1 */
	off_t			 response_pos;	/* bytes of this attempt written there */
	int			 write_errno;	/* writing response_fd failed */
	http_data_cb		*data_cb;	/* 2xx bodies go here, or NULL */
	void			*data_arg;
	bool			 in_data_cb;	/* inside data_cb, in libcurl's callback */
	bool			 cancel_later;	/* canceled from data_cb: ends in drain() */
	char			 request_id[33];

	CURL			*easy;
	char			 errbuf[CURL_ERROR_SIZE];
	struct buf		 response;
	struct buf		 resp_headers;	/* "name\0value\0" pairs of the last response */
	bool			 too_big;
	bool			 holds_slot;
	struct backoff		 backoff;
	uint64_t		 wake_at;	/* monotonic ms, in REQ_BACKOFF */
	struct pushback_gate	*gate;		/* of its endpoint class, in h->gates */
	bool			 held;		/* in REQ_BACKOFF for the gate, not a retry */
	bool			 released;	/* its class opened: goes without a retry slot */
	uint64_t		 sent_at;	/* monotonic ms this attempt left */

	/* The last attempt's outcome, kept across the wait before a retry. */
	long			 status;
	int			 error;
	char			 error_text[CURL_ERROR_SIZE + 64];

	http_done_cb		*cb;
	void			*cb_data;
};

struct http_sock {
	uv_poll_t	 poll;
	curl_socket_t	 fd;
	struct http	*h;
};

struct http {
	uv_loop_t	*loop;
	CURLM		*multi;
	uv_timer_t	 curl_timer;	/* the one timeout libcurl asks for */
	uv_timer_t	 retry_timer;	/* the earliest end of a backoff wait */
	uv_timer_t	 probe_timer;	/* a long-poll probe held long enough (LONG_POLL_PROBE_MS) */
	char		*user_agent;
	char		*peer;		/* who answers, in log lines */
	uint64_t	 max_age_ms;
	uint64_t	 backoff_min_ms;
	uint64_t	 backoff_max_ms;
	bool		 hold_on_failure;
	uint64_t	 gate_min_ms;
	uint64_t	 gate_max_ms;
	uint64_t	 resume_spread_ms;
	unsigned	 retry_slots;
	unsigned	 retries_in_flight;
	struct http_req	*requests;	/* every started, unfinished request */
	struct http_req	*backoff;	/* sorted by wake_at */
	struct http_req	*queue_head, *queue_tail;
	unsigned	 active;
	int		 in_drain;
	bool		 closing;
	bool		 closed;	/* libcurl released, handles closing */
	unsigned	 open_handles;	/* libuv handles not yet closed */
	struct ca_bundle *bundles;	/* system CAs + one ca_file each, made once */
	struct pushback_gate *gates;	/* one per endpoint class seen */
};

/* The system CA bundle with one extra CA file appended, in a private file. */
struct ca_bundle {
	struct ca_bundle	*next;
	char			*ca_file;	/* what was added */
	char			*path;		/* the combined file */
};

static void	drain(struct http *);
static void	attempt_start(struct http_req *);
static void	finish(struct http_req *);
static void	arm_retry_timer(struct http *);
static void	maybe_free_http(struct http *);
static struct pushback_gate *gate_of(struct http_req *);
static void	hold(struct http_req *, uint64_t);
static unsigned	wake_held(struct http *, struct pushback_gate *, uint64_t, uint64_t, bool);
static bool	gate_admits(struct http_req *, uint64_t);
static void	watch_probe(struct http_req *);
static void	on_probe_timer(uv_timer_t *);
static char	*log_path(const char *);

/*
 * Every change of a request's state goes through here, so that a debug log
 * tells each request's life.  Nothing else happens on entry: the callers
 * order their side effects around it.
 */
static void
req_enter(struct http_req *r, enum req_state to)
{
	char *path;

	/* log_path() allocates: only for a line that will be written. */
	if (log_get_level() == LOG_LEVEL_DEBUG) {
		path = log_path(r->url);
		log_debug("api: %s %s: %s -> %s", r->method, path,
		    req_state_names[r->state], req_state_names[to]);
		free(path);
	}
	r->state = to;
}

/* ---- libcurl <-> libuv ---- */

static void
on_handle_closed(uv_handle_t *handle)
{
	struct http *h = handle->data;

	h->open_handles--;
	maybe_free_http(h);
}

static void
on_sock_closed(uv_handle_t *handle)
{
	struct http_sock *s = handle->data;
	struct http *h = s->h;

	free(s);
	h->open_handles--;
	maybe_free_http(h);
}

static void
on_poll(uv_poll_t *poll, int status, int events)
{
	struct http_sock *s = poll->data;
	struct http *h = s->h;
	int flags = 0, running;

	if (status < 0)
		flags = CURL_CSELECT_ERR;
	if (events & UV_READABLE)
		flags |= CURL_CSELECT_IN;
	if (events & UV_WRITABLE)
		flags |= CURL_CSELECT_OUT;
	curl_multi_socket_action(h->multi, s->fd, flags, &running);
	drain(h);
}

static int
on_curl_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	struct http *h = userp;
	struct http_sock *s = socketp;
	int events = 0;

	(void)easy;
	if (what == CURL_POLL_REMOVE) {
		if (s != NULL) {
			/* libcurl may close fd right after this; libuv allows that once stopped. */
			uv_poll_stop(&s->poll);
			uv_close((uv_handle_t *)&s->poll, on_sock_closed);
			curl_multi_assign(h->multi, fd, NULL);
		}
		return 0;
	}
	if (s == NULL) {
		s = xcalloc(1, sizeof(*s));
		s->fd = fd;
		s->h = h;
		if (uv_poll_init_socket(h->loop, &s->poll, fd) != 0) {
			free(s);
			return -1;
		}
		s->poll.data = s;
		h->open_handles++;
		curl_multi_assign(h->multi, fd, s);
	}
	if (what & CURL_POLL_IN)
		events |= UV_READABLE;
	if (what & CURL_POLL_OUT)
		events |= UV_WRITABLE;
	uv_poll_start(&s->poll, events, on_poll);
	return 0;
}

static void
on_curl_timeout(uv_timer_t *timer)
{
	struct http *h = timer->data;
	int running;

	curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	/* Always drain: a timeout may have finished the last transfer. */
	drain(h);
}

static int
on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
	struct http *h = userp;

	(void)multi;
	if (timeout_ms < 0)
		uv_timer_stop(&h->curl_timer);
	else
		uv_timer_start(&h->curl_timer, on_curl_timeout, (uint64_t)timeout_ms, 0);
	return 0;
}

/* ---- the client ---- */

struct http *
http_new(const struct http_config *cfg)
{
	static int curl_ready;
	struct http *h = xcalloc(1, sizeof(*h));
	char *help;

	if (!curl_ready) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
			fatalx("libcurl: global init failed");
		curl_ready = 1;
	}
	h->loop = cfg->loop;
	h->user_agent = xstrdup(cfg->user_agent != NULL ? cfg->user_agent : "runner");
	h->peer = xstrdup(cfg->peer != NULL ? cfg->peer : "the server");
	h->max_age_ms = cfg->connection_max_age_ms;
	h->retry_slots = cfg->max_retries_in_flight ? cfg->max_retries_in_flight :
	    DEFAULT_RETRY_SLOTS;
	h->backoff_min_ms = cfg->backoff_min_ms ? cfg->backoff_min_ms : DEFAULT_BACKOFF_MIN_MS;
	h->backoff_max_ms = cfg->backoff_max_ms ? cfg->backoff_max_ms : DEFAULT_BACKOFF_MAX_MS;
	h->hold_on_failure = cfg->hold_on_failure;
	h->gate_min_ms = cfg->gate_min_ms ? cfg->gate_min_ms : DEFAULT_GATE_MIN_MS;
	h->gate_max_ms = cfg->gate_max_ms ? cfg->gate_max_ms : DEFAULT_GATE_MAX_MS;
	h->resume_spread_ms = cfg->resume_spread_ms;
	if ((h->multi = curl_multi_init()) == NULL)
		fatalx("libcurl: cannot create a multi handle");
	curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
	curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h);
	curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
	curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h);
	uv_timer_init(h->loop, &h->curl_timer);
	h->curl_timer.data = h;
	uv_timer_init(h->loop, &h->retry_timer);
	h->retry_timer.data = h;
	uv_timer_init(h->loop, &h->probe_timer);
	h->probe_timer.data = h;
	h->open_handles = 3;
	help = xasprintf("HTTP requests to %s, each attempt, by endpoint and status.", h->peer);
	metrics_describe("runner_api_requests_total", "counter", help);
	free(help);
	metrics_describe("runner_api_retry_waits_total", "counter",
	    "Waits before sending a request again, by what decided the wait.");
	metrics_describe("runner_api_retry_wait_seconds_total", "counter",
	    "Time spent waiting before sending requests again.");
	metrics_describe("runner_api_endpoint_held", "gauge",
	    "1 while requests of an endpoint class are held back because the server asked "
	    "for a pause or is failing, else 0.");
	metrics_describe("runner_api_requests_held_back_total", "counter",
	    "Attempts that were due but held back by their endpoint class's gate: "
	    "requests not sent to a server that asked for a pause or was failing.");
	return h;
}

void
http_set_pushback(struct http *h, uint64_t gate_max_ms, uint64_t resume_spread_ms)
{
	if (gate_max_ms != 0)
		h->gate_max_ms = gate_max_ms;
	if (resume_spread_ms != 0)
		h->resume_spread_ms = resume_spread_ms;
}

static void
maybe_free_http(struct http *h)
{
	struct ca_bundle *b;

	if (!h->closed || h->open_handles > 0)
		return;
	while ((b = h->bundles) != NULL) {
		h->bundles = b->next;
		unlink(b->path);
		free(b->path);
		free(b->ca_file);
		free(b);
	}
	pushback_free(h->gates);
	free(h->user_agent);
	free(h->peer);
	free(h);
}

/* Release libcurl and close our handles; only outside drain(). */
static void
finish_close(struct http *h)
{
	if (h->closed)
		return;
	h->closed = true;
	/* May call on_curl_socket() to remove sockets: the loop is still here. */
	curl_multi_cleanup(h->multi);
	h->multi = NULL;
	uv_close((uv_handle_t *)&h->curl_timer, on_handle_closed);
	uv_close((uv_handle_t *)&h->retry_timer, on_handle_closed);
	uv_close((uv_handle_t *)&h->probe_timer, on_handle_closed);
}

void
http_close(struct http *h)
{
	struct http_req *r;

	h->closing = true;
	for (;;) {
		/* One canceled from its data callback ends in drain(), soon. */
		for (r = h->requests; r != NULL && r->cancel_later; r = r->next)
			;
		if (r == NULL)
			break;
		http_req_cancel(r);
	}
	if (h->in_drain == 0)
		finish_close(h);
}

unsigned
http_active(const struct http *h)
{
	return h->active;
}

/* ---- building a request ---- */

struct http_req *
http_req_new(struct http *h, const char *method, const char *url)
{
	struct http_req *r = xcalloc(1, sizeof(*r));

	r->h = h;
	r->state = REQ_NEW;	/* born; every change after goes through req_enter() */
	r->method = xstrdup(method);
	r->url = xstrdup(url);
	r->body_fd = -1;
	r->response_fd = -1;
	r->deadline_ms = DEFAULT_DEADLINE_MS;
	r->attempt_timeout_ms = DEFAULT_ATTEMPT_TIMEOUT_MS;
	r->max_attempts = DEFAULT_MAX_ATTEMPTS;
	r->response_cap = DEFAULT_RESPONSE_CAP;
	buf_init(&r->body, BUF_UNLIMITED);
	buf_init(&r->response, r->response_cap);
	buf_init(&r->resp_headers, 256 * 1024);
	/* One id for the logical request, the same on every attempt. */
	rand_hex(r->request_id, 32);
	return r;
}

void
http_req_header(struct http_req *r, const char *name, const char *value)
{
	char *line = xasprintf("%s: %s", name, value);
	struct curl_slist *l = curl_slist_append(r->headers, line);

	if (l == NULL)
		fatalx("libcurl: out of memory");
	r->headers = l;
	explicit_bzero(line, strlen(line));
	free(line);
}

/* A new list entry; libcurl copies the line. */
static struct curl_slist *
slist_add(struct curl_slist *l, const char *line)
{
	struct curl_slist *n = curl_slist_append(l, line);

	if (n == NULL)
		fatalx("libcurl: out of memory");
	return n;
}

/* Free a header list, its token values wiped first. */
static void
slist_wipe(struct curl_slist *l)
{
	struct curl_slist *p;

	for (p = l; p != NULL; p = p->next)
		explicit_bzero(p->data, strlen(p->data));
	curl_slist_free_all(l);
}

void
http_req_secret_header(struct http_req *r, const char *name, const char *value)
{
	/* Headers are never logged; kept apart so a redirect can leave these behind. */
	char *line = xasprintf("%s: %s", name, value);

	r->secret_headers = slist_add(r->secret_headers, line);
	explicit_bzero(line, strlen(line));
	free(line);
}

void
http_req_body(struct http_req *r, const char *content_type, const void *data, size_t len)
{
	free(r->content_type);
	r->content_type = content_type != NULL ? xstrdup(content_type) : NULL;
	buf_reset(&r->body);
	buf_append(&r->body, data, len);
	r->has_body = true;
	r->body_has_token = false;
	r->body_fd = -1;
}

void
http_req_secret_body(struct http_req *r, const char *content_type, const void *data,
    size_t len)
{
	http_req_body(r, content_type, data, len);
	r->body_has_token = true;
}

void
http_req_body_fd(struct http_req *r, const char *content_type, int fd, off_t offset,
    off_t len)
{
	free(r->content_type);
	r->content_type = content_type != NULL ? xstrdup(content_type) : NULL;
	buf_release(&r->body);
	r->has_body = true;
	r->body_has_token = false;
	r->body_fd = fd;
	r->body_off = offset;
	r->body_len = len;
}

void
http_req_tls(struct http_req *r, const struct http_tls *tls)
{
	free(r->ca_file);
	free(r->cert_file);
	free(r->key_file);
	r->ca_file = tls->ca_file && *tls->ca_file ? xstrdup(tls->ca_file) : NULL;
	r->cert_file = tls->cert_file && *tls->cert_file ? xstrdup(tls->cert_file) : NULL;
	r->key_file = tls->key_file && *tls->key_file ? xstrdup(tls->key_file) : NULL;
}

void
http_req_unix_socket(struct http_req *r, const char *path)
{
	free(r->unix_path);
	r->unix_path = path != NULL && *path != '\0' ? xstrdup(path) : NULL;
}

void
http_req_on_data(struct http_req *r, http_data_cb *cb, void *arg)
{
	r->data_cb = cb;
	r->data_arg = arg;
}

void
http_req_endpoint(struct http_req *r, const char *endpoint)
{
	free(r->endpoint);
	r->endpoint = xstrdup(endpoint);
}

void
http_req_flags(struct http_req *r, int flags)
{
	r->flags = flags;
}

void
http_req_deadline(struct http_req *r, uint64_t timeout_ms)
{
	r->deadline_ms = timeout_ms;
}

void
http_req_attempt_timeout(struct http_req *r, uint64_t timeout_ms)
{
	r->attempt_timeout_ms = timeout_ms;
}

void
http_req_max_attempts(struct http_req *r, unsigned n)
{
	r->max_attempts = n > 0 ? n : 1;
}

void
http_req_response_fd(struct http_req *r, int fd)
{
	r->response_fd = fd;
}

void
http_req_response_cap(struct http_req *r, size_t max)
{
	r->response_cap = max;
	buf_release(&r->response);
	buf_init(&r->response, max);
}

const char *
http_req_method(const struct http_req *r)
{
	return r->method;
}

const char *
http_req_url(const struct http_req *r)
{
	return r->url;
}

const char *
http_req_response_header(const struct http_req *r, const char *name)
{
	const char *p = r->resp_headers.ptr, *end = p + r->resp_headers.len;
	const char *found = NULL;

	while (p < end) {
		const char *value = p + strlen(p) + 1;

		if (strcasecmp(p, name) == 0)
			found = value;	/* the last one wins */
		p = value + strlen(value) + 1;
	}
	return found;
}

/* ---- libcurl callbacks of one transfer ---- */

static size_t
on_body(char *data, size_t size, size_t nmemb, void *userp)
{
	struct http_req *r = userp;
	size_t len = size * nmemb, done;
	long status = 0;
	ssize_t n;

	if (r->cancel_later)
		return 0;
	if (r->data_cb != NULL) {
		/* The headers are in by the first body byte, so the status is known. */
		curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
		if (status >= 200 && status <= 299) {
			/* Inside libcurl: an http_close() from cb must wait for drain(). */
			r->h->in_drain++;
			r->in_data_cb = true;
			r->data_cb(data, len, r->data_arg);
			r->in_data_cb = false;
			r->h->in_drain--;
			/* A cancel from the callback: libcurl aborts the transfer. */
			return r->cancel_later ? 0 : len;
		}
	}
	if (r->response_fd >= 0) {
		curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
		if (status >= 200 && status <= 299) {
			for (done = 0; done < len; done += (size_t)n) {
				n = pwrite(r->response_fd, data + done, len - done,
				    r->response_pos);
				if (n == -1 && errno == EINTR) {
					n = 0;
					continue;
				}
				if (n <= 0) {
					r->write_errno = n == 0 ? EIO : errno;
					return 0;
				}
				r->response_pos += n;
			}
			return len;
		}
	}
	if (buf_append(&r->response, data, len) != 0) {
		r->too_big = true;
		return 0;	/* aborts the transfer with CURLE_WRITE_ERROR */
	}
	return len;
}

static size_t
on_header(char *data, size_t size, size_t nmemb, void *userp)
{
	struct http_req *r = userp;
	size_t len = size * nmemb, n, v;

	/* A new status line (a 100 Continue, say) starts a new header set. */
	if (len >= 5 && memcmp(data, "HTTP/", 5) == 0) {
		buf_reset(&r->resp_headers);
		return len;
	}
	for (n = 0; n < len && data[n] != ':'; n++)
		;
	if (n == 0 || n == len)
		return len;
	for (v = n + 1; v < len && (data[v] == ' ' || data[v] == '\t'); v++)
		;
	while (len > v && (data[len - 1] == '\r' || data[len - 1] == '\n' ||
	    data[len - 1] == ' '))
		len--;
	/* A header set past its cap is cut, not the response failed. */
	if (buf_append(&r->resp_headers, data, n) == 0 &&
	    buf_putc(&r->resp_headers, '\0') == 0 &&
	    buf_append(&r->resp_headers, data + v, len - v) == 0)
		buf_putc(&r->resp_headers, '\0');
	return size * nmemb;
}

static size_t
on_read_body(char *dst, size_t size, size_t nmemb, void *userp)
{
	struct http_req *r = userp;
	size_t want = size * nmemb;
	off_t left = r->body_len - r->body_pos;
	ssize_t n;

	if (left <= 0)
		return 0;
	if ((off_t)want > left)
		want = (size_t)left;
	do {
		n = pread(r->body_fd, dst, want, r->body_off + r->body_pos);
	} while (n == -1 && errno == EINTR);
	if (n <= 0)
		return CURL_READFUNC_ABORT;	/* the file shrank or failed */
	r->body_pos += n;
	return (size_t)n;
}

static int
on_seek_body(void *userp, curl_off_t offset, int origin)
{
	struct http_req *r = userp;

	if (origin != SEEK_SET || offset < 0 || offset > r->body_len)
		return CURL_SEEKFUNC_CANTSEEK;
	r->body_pos = offset;
	return CURL_SEEKFUNC_OK;
}

/* ---- TLS ---- */

static int
copy_file_into(int out, const char *path)
{
	char chunk[65536];
	ssize_t n, w, off;
	int in = open(path, O_RDONLY | O_CLOEXEC);

	if (in == -1)
		return -1;
	while ((n = read(in, chunk, sizeof(chunk))) > 0) {
		for (off = 0; off < n; off += w)
			if ((w = write(out, chunk + off, (size_t)(n - off))) <= 0) {
				close(in);
				return -1;
			}
	}
	close(in);
	return n == 0 ? 0 : -1;
}

/*
 * A tls-ca-file is trusted in addition to the system's CAs (as
 * gitlab-runner does), and libcurl takes one bundle: so the two are written
 * into one private file once, which libcurl then caches.  A CA directory
 * (CURLOPT_CAPATH) is never used: Debian's libcurl rebuilds its store from
 * it for every new connection (~21 ms instead of ~1.5 ms).
 */
static const char *
ca_bundle(struct http *h, const char *ca_file)
{
	curl_version_info_data *vi = curl_version_info(CURLVERSION_NOW);
	const char *system = vi->cainfo != NULL ? vi->cainfo :
	    "/etc/ssl/certs/ca-certificates.crt";
	char path[] = "/tmp/runner-ca-XXXXXX";
	struct ca_bundle *b;
	int fd;

	for (b = h->bundles; b != NULL; b = b->next)
		if (strcmp(b->ca_file, ca_file) == 0)
			return b->path;
	if ((fd = mkstemp(path)) == -1)
		return ca_file;	/* still trust the given CA, if only it */
	if (access(system, R_OK) == 0)
		(void)copy_file_into(fd, system);
	if (write(fd, "\n", 1) != 1 || copy_file_into(fd, ca_file) != 0) {
		close(fd);
		unlink(path);
		return ca_file;
	}
	close(fd);
	b = xcalloc(1, sizeof(*b));
	b->ca_file = xstrdup(ca_file);
	b->path = xstrdup(path);
	b->next = h->bundles;
	h->bundles = b;
	return b->path;
}

/* ---- attempts ---- */

/* What goes on the wire: the caller's request, or where redirects took it. */
static const char *
wire_url(const struct http_req *r)
{
	return r->redirect_url != NULL ? r->redirect_url : r->url;
}

static const char *
wire_method(const struct http_req *r)
{
	return r->redirect_get ? "GET" : r->method;
}

static bool
wire_body(const struct http_req *r)
{
	return r->has_body && !r->redirect_get;
}

/* The caller's headers, less the token ones once it left their origin, and ours. */
static struct curl_slist *
wire_headers(const struct http_req *r)
{
	struct curl_slist *wire = NULL, *p;
	char *line;

	for (p = r->headers; p != NULL; p = p->next)
		if (!r->tokens_dropped || !token_header(p->data))
			wire = slist_add(wire, p->data);
	for (p = r->secret_headers; p != NULL && !r->tokens_dropped; p = p->next)
		wire = slist_add(wire, p->data);
	line = xasprintf("X-Request-Id: %s", r->request_id);
	wire = slist_add(wire, line);
	free(line);
	if (r->flags & HTTP_ACCEPT_JSON)
		wire = slist_add(wire, "Accept: application/json");
	if (r->content_type != NULL && wire_body(r)) {
		line = xasprintf("Content-Type: %s", r->content_type);
		wire = slist_add(wire, line);
		free(line);
	}
	/* libcurl would add "Expect: 100-continue" to large bodies: a 1 s stall. */
	return slist_add(wire, "Expect:");
}

static void
setup_easy(struct http_req *r)
{
	struct http *h = r->h;
	CURL *e = r->easy;
	const char *bundle, *method = wire_method(r);

	curl_easy_setopt(e, CURLOPT_URL, wire_url(r));
	curl_easy_setopt(e, CURLOPT_PRIVATE, r);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_USERAGENT, h->user_agent);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	curl_easy_setopt(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 30L);
	curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
	if (h->max_age_ms > 0)
		curl_easy_setopt(e, CURLOPT_MAXLIFETIME_CONN,
		    (long)((h->max_age_ms + 999) / 1000));
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, r);

	if (r->unix_path != NULL)
		curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, r->unix_path);
	curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
	if (r->ca_file != NULL && (bundle = ca_bundle(h, r->ca_file)) != NULL)
		curl_easy_setopt(e, CURLOPT_CAINFO, bundle);
	if (r->cert_file != NULL) {
		curl_easy_setopt(e, CURLOPT_SSLCERT, r->cert_file);
		curl_easy_setopt(e, CURLOPT_SSLKEY,
		    r->key_file != NULL ? r->key_file : r->cert_file);
	}

	slist_wipe(r->wire_headers);
	r->wire_headers = wire_headers(r);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->wire_headers);

	if (wire_body(r) && r->body_fd >= 0) {
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read_body);
		curl_easy_setopt(e, CURLOPT_READDATA, r);
		curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek_body);
		curl_easy_setopt(e, CURLOPT_SEEKDATA, r);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
		/*
		 * libcurl's upload buffer is 64 KiB per handle; a log PATCH
		 * (at most 1 MiB) in flight for each of 100 jobs would hold
		 * 6 MiB of them.  Its smallest, 16 KiB, for all but big files.
		 */
		if (r->body_len <= 1024 * 1024)
			curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, 16384L);
	} else if (wire_body(r) || strcmp(method, "POST") == 0) {
		/* Our own buffer: libcurl reads it anew for every send. */
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body.len);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body.ptr);
	}
	if (strcmp(method, "GET") == 0)
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	else if (strcmp(method, "POST") != 0)
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
}

static uint64_t
remaining_ms(const struct http_req *r)
{
	uint64_t now = clock_mono_ms();

	return r->deadline_at > now ? r->deadline_at - now : 0;
}

static void
attempt_start(struct http_req *r)
{
	struct http *h = r->h;
	uint64_t timeout = r->attempt_timeout_ms, left = remaining_ms(r);
	CURLMcode mc;

	if (left < timeout)
		timeout = left;
	if (timeout == 0) {
		r->error = -ETIMEDOUT;
		snprintf(r->error_text, sizeof(r->error_text), "deadline passed");
		finish(r);
		return;
	}
	buf_reset(&r->response);
	buf_reset(&r->resp_headers);
	r->errbuf[0] = '\0';
	r->too_big = false;
	r->body_pos = 0;
	r->write_errno = 0;
	r->cancel_later = false;
	if (r->response_fd >= 0) {
		/* Every attempt writes the file from its first byte. */
		r->response_pos = 0;
		if (ftruncate(r->response_fd, 0) == -1)
			r->write_errno = errno;
	}
	curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, (long)timeout);
	r->sent_at = clock_mono_ms();
	watch_probe(r);
	req_enter(r, REQ_ACTIVE);
	if ((mc = curl_multi_add_handle(h->multi, r->easy)) != CURLM_OK) {
		r->error = -EIO;
		snprintf(r->error_text, sizeof(r->error_text), "%s",
		    curl_multi_strerror(mc));
		finish(r);
	}
}

static void
add_request(struct http *h, struct http_req *r)
{
	r->next = h->requests;
	if (h->requests != NULL)
		h->requests->prev = r;
	h->requests = r;
	h->active++;
}

int
http_req_start(struct http_req *r, http_done_cb *cb, void *data)
{
	struct http *h = r->h;
	enum pushback_verdict verdict;
	uint64_t until = 0;

	if (r->state != REQ_NEW || h->closing || r->deadline_ms == 0)
		return -EINVAL;
	if (r->endpoint == NULL) {
		char endpoint[96];

		http_endpoint_label(r->url, NULL, endpoint, sizeof(endpoint));
		r->endpoint = xstrdup(endpoint);
	}
	if ((r->easy = curl_easy_init()) == NULL)
		fatalx("libcurl: cannot create a handle");
	setup_easy(r);
	r->cb = cb;
	r->cb_data = data;
	r->deadline_at = clock_mono_ms() + r->deadline_ms;
	backoff_init(&r->backoff, h->backoff_min_ms, h->backoff_max_ms);
	r->gate = gate_of(r);
	verdict = pushback_admit(r->gate, r, clock_mono_ms(), &until);
	if (verdict == PUSHBACK_WAIT_PROBE ||
	    (verdict == PUSHBACK_WAIT_WINDOW && until < r->deadline_at)) {
		/*
		 * The server asked for a pause on this endpoint: the first attempt
		 * waits with the retries.  (One whose deadline ends first is
		 * sent: its caller would rather have an answer than a timeout.)
		 */
		r->attempts = 0;
		add_request(h, r);
		hold(r, verdict == PUSHBACK_WAIT_WINDOW ? until : 0);
		return 0;
	}
	r->attempts = 1;
	r->sent_at = clock_mono_ms();
	watch_probe(r);
	curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, (long)(r->attempt_timeout_ms <
	    r->deadline_ms ? r->attempt_timeout_ms : r->deadline_ms));
	/* The first attempt fails here, not in the callback: see http.h. */
	if (curl_multi_add_handle(h->multi, r->easy) != CURLM_OK) {
		if (pushback_gone(r->gate, r))
			wake_held(h, r->gate, clock_mono_ms(), 0, false);
		pushback_put(r->gate);
		r->gate = NULL;
		return -EIO;
	}
	req_enter(r, REQ_ACTIVE);
	add_request(h, r);
	return 0;
}

/* The path and query of a URL for logs, with token-like query values masked. */
static char *
log_path(const char *url)
{
	const char *p = strstr(url, "://"), *q;
	struct buf b;

	p = p != NULL ? strchr(p + 3, '/') : NULL;
	if (p == NULL)
		return xstrdup("/");
	buf_init(&b, BUF_UNLIMITED);
	if ((q = strchr(p, '?')) == NULL) {
		buf_puts(&b, p);
		return buf_detach(&b, NULL);
	}
	buf_append(&b, p, (size_t)(q - p));
	while (*q != '\0') {
		const char *amp = strchr(q + 1, '&'), *eq = strchr(q + 1, '=');
		const char *end = amp != NULL ? amp : q + strlen(q);

		if (eq != NULL && eq < end) {
			buf_append(&b, q, (size_t)(eq - q + 1));
			if (redact_name_is_secret(q + 1, (size_t)(eq - q - 1)) ||
			    (strcasestr(q + 1, "token") != NULL &&
			    strcasestr(q + 1, "token") < eq))
				buf_puts(&b, "[MASKED]");
			else
				buf_append(&b, eq + 1, (size_t)(end - eq - 1));
		} else
			buf_append(&b, q, (size_t)(end - q));
		q = end;
	}
	return buf_detach(&b, NULL);
}

/* The headers that say how hard the server pushes back, for the log. */
static void
append_pushback_headers(struct http_req *r, struct buf *b)
{
	const char *p = r->resp_headers.ptr, *end = p + r->resp_headers.len;

	while (p < end) {
		const char *value = p + strlen(p) + 1;

		if (strcasecmp(p, "Retry-After") == 0 ||
		    strncasecmp(p, "RateLimit-", 10) == 0)
			buf_printf(b, ", %s: %s", p, value);
		p = value + strlen(value) + 1;
	}
}

static const char *
request_id_of(const struct http_req *r)
{
	const char *id = http_req_response_header(r, "X-Request-Id");

	return id != NULL && *id != '\0' ? id : r->request_id;
}

void
http_endpoint_label(const char *url, const char *root, char *out, size_t size)
{
	const char *p = strstr(url, "://"), *q;
	size_t n = 0;

	p = p != NULL ? strchr(p + 3, '/') : NULL;
	if (p == NULL)
		p = "/";
	if (root != NULL && strncmp(p, root, strlen(root)) == 0)
		p += strlen(root);
	while (*p != '\0' && *p != '?' && n + 5 < size) {
		if (*p >= '0' && *p <= '9' && p[-1] == '/') {
			for (q = p; *q >= '0' && *q <= '9'; q++)
				;
			if (*q == '/' || *q == '\0' || *q == '?') {
				memcpy(out + n, "{id}", 4);
				n += 4;
				p = q;
				continue;
			}
		}
		out[n++] = *p++;
	}
	out[n] = '\0';
}

static void
count_attempt(const struct http_req *r)
{
	char labels[192], status[16];

	if (r->status != 0)
		snprintf(status, sizeof(status), "%ld", r->status);
	else
		snprintf(status, sizeof(status), "%s", r->error == -ETIMEDOUT ? "timeout" : "error");
	snprintf(labels, sizeof(labels), "method=\"%s\",endpoint=\"%s\",status=\"%s\"",
	    r->method, r->endpoint, status);
	metrics_counter_add("runner_api_requests_total", labels, 1);
}

/* Every answer that is not a success is logged once, with all we know. */
static void
log_failed_attempt(struct http_req *r)
{
	struct buf b;
	char *path = log_path(r->url);

	buf_init(&b, BUF_UNLIMITED);
	if (r->status != 0)
		buf_printf(&b, "api: %s %s: HTTP %ld, request id %s", r->method, path,
		    r->status, request_id_of(r));
	else
		buf_printf(&b, "api: %s %s: %s, request id %s", r->method, path,
		    r->error_text, r->request_id);
	append_pushback_headers(r, &b);
	if (r->response.len > 0) {
		buf_puts(&b, ", body: ");
		redact_excerpt(&b, r->response.ptr, r->response.len, LOG_BODY_EXCERPT);
	}
	log_msg((r->flags & HTTP_QUIET) ? LOG_LEVEL_DEBUG : LOG_LEVEL_WARN, "%s", b.ptr);
	buf_release(&b);
	free(path);
}

/* Transport failures worth another attempt; the rest will fail the same way. */
static bool
transport_retryable(CURLcode rc)
{
	switch (rc) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_AGAIN:
		return true;
	default:
		return false;
	}
}

static void
backoff_insert(struct http_req *r)
{
	struct http *h = r->h;
	struct http_req **pp = &h->backoff;

	while (*pp != NULL && (*pp)->wake_at <= r->wake_at)
		pp = &(*pp)->wait_next;
	r->wait_next = *pp;
	*pp = r;
}

static void
backoff_remove(struct http_req *r)
{
	struct http_req **pp;

	for (pp = &r->h->backoff; *pp != NULL; pp = &(*pp)->wait_next)
		if (*pp == r) {
			*pp = r->wait_next;
			break;
		}
	r->wait_next = NULL;
}

static void
queue_remove(struct http_req *r)
{
	struct http *h = r->h;
	struct http_req **pp, *prev = NULL;

	for (pp = &h->queue_head; *pp != NULL; prev = *pp, pp = &(*pp)->wait_next)
		if (*pp == r) {
			*pp = r->wait_next;
			if (h->queue_tail == r)
				h->queue_tail = prev;
			break;
		}
	r->wait_next = NULL;
}

/* A retry attempt may start now if a slot is free; otherwise it queues. */
static void
retry_now(struct http_req *r)
{
	struct http *h = r->h;

	if (h->retries_in_flight >= h->retry_slots) {
		req_enter(r, REQ_QUEUED);
		r->wait_next = NULL;
		if (h->queue_tail != NULL)
			h->queue_tail->wait_next = r;
		else
			h->queue_head = r;
		h->queue_tail = r;
		return;
	}
	h->retries_in_flight++;
	r->holds_slot = true;
	r->attempts++;
	attempt_start(r);
}

static void
release_slot(struct http_req *r)
{
	struct http *h = r->h;
	struct http_req *next;

	if (!r->holds_slot)
		return;
	r->holds_slot = false;
	h->retries_in_flight--;
	if ((next = h->queue_head) != NULL && !h->closing) {
		queue_remove(next);
		retry_now(next);
	}
}

static void
on_retry_timer(uv_timer_t *timer)
{
	struct http *h = timer->data;
	uint64_t now = clock_mono_ms();
	struct http_req *r;

	h->in_drain++;
	while ((r = h->backoff) != NULL && r->wake_at <= now) {
		h->backoff = r->wait_next;
		r->wait_next = NULL;
		if (!gate_admits(r, now))
			continue;
		if (r->released) {
			/*
			 * Its class opened: the spread paces these, and a slot
			 * each would let 8 long polls hold back a hundred.
			 */
			r->released = false;
			r->attempts++;
			attempt_start(r);
		} else
			retry_now(r);
	}
	h->in_drain--;
	arm_retry_timer(h);
	if (h->closing && h->in_drain == 0)
		finish_close(h);
}

static void
arm_retry_timer(struct http *h)
{
	uint64_t now = clock_mono_ms();

	if (h->closed)
		return;
	if (h->backoff == NULL) {
		uv_timer_stop(&h->retry_timer);
		return;
	}
	uv_timer_start(&h->retry_timer, on_retry_timer,
	    h->backoff->wake_at > now ? h->backoff->wake_at - now : 0, 0);
}

/* ---- pushback: one probe per endpoint class after a server's "wait" ---- */

/* "PATCH http://host:port/jobs/{id}/trace": method, origin, endpoint. */
static struct pushback_gate *
gate_of(struct http_req *r)
{
	char *key;
	const char *p = strstr(r->url, "://"), *host, *end, *at;
	struct pushback_gate *g;

	host = p != NULL ? p + 3 : r->url;
	end = host + strcspn(host, "/?#");
	/* The key is logged: no user:password@ of a URL in it. */
	if ((at = memchr(host, '@', (size_t)(end - host))) != NULL)
		host = at + 1;
	key = xasprintf("%s %.*s%.*s%s", r->method, p != NULL ? (int)(p + 3 - r->url) : 0,
	    r->url, (int)(end - host), host, r->endpoint);
	g = pushback_gate(&r->h->gates, key, clock_mono_ms());
	free(key);
	return g;
}

/* Its gate's labels in metrics: the method and the endpoint, as the request counter has them. */
static void
gate_labels(const struct http_req *r, char *labels, size_t size)
{
	snprintf(labels, size, "method=\"%s\",endpoint=\"%s\"", r->method, r->endpoint);
}

/* 1 while requests of r's class wait at its gate (closed with nobody waiting: 0). */
static void
gate_gauge(const struct http_req *r, bool held)
{
	char labels[160];

	gate_labels(r, labels, sizeof(labels));
	metrics_gauge_set("runner_api_endpoint_held", labels, held ? 1 : 0);
}

/* Hold r for its gate: until the window ends, or (0) the probe's answer. */
static void
hold(struct http_req *r, uint64_t until)
{
	char labels[160];

	gate_labels(r, labels, sizeof(labels));
	metrics_counter_add("runner_api_requests_held_back_total", labels, 1);
	metrics_gauge_set("runner_api_endpoint_held", labels, 1);
	req_enter(r, REQ_BACKOFF);
	r->held = true;
	r->wake_at = until != 0 && until < r->deadline_at ? until : r->deadline_at;
	backoff_insert(r);
	arm_retry_timer(r->h);
}

/* May r, due now, send?  If not, it is held. */
static bool
gate_admits(struct http_req *r, uint64_t now)
{
	uint64_t until = 0;

	r->held = false;
	if (now >= r->deadline_at)
		return true;	/* attempt_start tells the caller */
	switch (pushback_admit(r->gate, r, now, &until)) {
	case PUSHBACK_SEND:
		return true;
	case PUSHBACK_WAIT_WINDOW:
		hold(r, until);
		return false;
	case PUSHBACK_WAIT_PROBE:
		hold(r, 0);
		return false;
	}
	return true;
}

/*
 * What g holds is due again from `at`, spread evenly over `spread` ms so
 * that a class that opens does not send everything it held in one burst.
 * Those that sent fewest attempts go first, so the next probe is one that
 * has not probed: held for a probe they sort by deadline, and the oldest
 * request would otherwise probe every window.  released: the class is
 * open, they go without a retry slot.  Returns how many.
 */
static unsigned
wake_held(struct http *h, struct pushback_gate *g, uint64_t at, uint64_t spread,
    bool released)
{
	struct http_req **pp = &h->backoff, *r, *woken = NULL, **tail = &woken;
	unsigned n = 0, i = 0, most = 0, a;

	while ((r = *pp) != NULL) {
		if (r->held && r->gate == g) {
			*pp = r->wait_next;
			r->wait_next = NULL;
			*tail = r;
			tail = &r->wait_next;
			n++;
			if (r->attempts > most)
				most = r->attempts;
		} else
			pp = &r->wait_next;
	}
	for (a = 0; a <= most; a++) {
		for (pp = &woken; (r = *pp) != NULL;) {
			if (r->attempts != a) {
				pp = &r->wait_next;
				continue;
			}
			*pp = r->wait_next;
			r->wake_at = at + spread * i++ / n;
			if (r->wake_at > r->deadline_at)
				r->wake_at = r->deadline_at;
			r->released = released;
			backoff_insert(r);
		}
	}
	arm_retry_timer(h);
	return n;
}

/* A failure of a server that is down or drowning, not one about the request. */
static bool
down_sign(const struct http_req *r, const struct retry_decision *d, bool transport_retryable)
{
	if (r->status == 0)
		return transport_retryable;
	if (r->status == 429)
		return d->reason == RETRY_WAIT_BACKOFF;	/* no wait said */
	return r->status >= 500 && retry_status_retryable(r->status);
}

static void
format_since(time_t since, char *out, size_t size)
{
	struct tm tm;

	if (localtime_r(&since, &tm) == NULL || strftime(out, size, "%H:%M:%S", &tm) == 0)
		snprintf(out, size, "?");
}

/* What failed, for the hold's log line: "HTTP 503" or the transport error. */
static void
failure_text(const struct http_req *r, char *out, size_t size)
{
	if (r->status != 0)
		snprintf(out, size, "HTTP %ld", r->status);
	else
		snprintf(out, size, "%s", r->error_text);
}

/* A failure held the class, or held it longer: once per class and window. */
static void
tell_gate_failure(struct http_req *r, bool transport_retryable, const struct retry_decision *d)
{
	struct http *h = r->h;
	struct pushback_gate *g = r->gate;
	uint64_t now = clock_mono_ms(), until = 0;
	char what[sizeof(r->error_text)], since[16];

	if (!down_sign(r, d, transport_retryable))
		return;
	switch (pushback_failed(g, r, r->sent_at, now, h->gate_min_ms, h->gate_max_ms,
	    rand_u32(), &until)) {
	case PUSHBACK_CLOSED:
		g->since = clock_wall();
		failure_text(r, what, sizeof(what));
		format_since(g->since, since, sizeof(since));
		log_warnx("api: %s: %s is failing (%s) since %s: holding back every request "
		    "to this endpoint; next probe in %llu ms", g->key, h->peer, what, since,
		    (unsigned long long)(until - now));
		gate_gauge(r, true);
		break;
	case PUSHBACK_CLOSED_AGAIN:
		failure_text(r, what, sizeof(what));
		format_since(g->since, since, sizeof(since));
		log_warnx("api: %s: still failing (%s), held since %s (%lld s); next probe "
		    "in %llu ms", g->key, what, since, (long long)(clock_wall() - g->since),
		    (unsigned long long)(until - now));
		break;
	case PUSHBACK_STALE:
	case PUSHBACK_HELD_ALREADY:
		return;
	}
	/* Held for the probe that failed: the first due after the window probes next. */
	wake_held(h, g, until, 0, false);
}

/* r's class opened: what it held resumes, spread over resume_spread_ms; said once. */
static void
gate_opened(struct http_req *r, const char *how, bool was_failing)
{
	struct http *h = r->h;
	struct pushback_gate *g = r->gate;
	char since[16];
	unsigned n;

	n = wake_held(h, g, clock_mono_ms(), h->resume_spread_ms, true);
	format_since(g->since, since, sizeof(since));
	log_info("api: %s: %s %s after %lld s held since %s%s; %u held requests resume "
	    "over %llu ms", g->key, h->peer, how, (long long)(clock_wall() - g->since), since,
	    was_failing ? "" : " for a pause it asked", n,
	    (unsigned long long)(n > 1 ? h->resume_spread_ms : 0));
	gate_gauge(r, false);
}

/* A long-poll probe of a class held for failures: see HTTP_LONG_POLL. */
static void
watch_probe(struct http_req *r)
{
	struct http *h = r->h;

	if ((r->flags & HTTP_LONG_POLL) == 0 || r->gate == NULL || r->gate->probe != r ||
	    !r->gate->failing || h->closed)
		return;
	if (!uv_is_active((uv_handle_t *)&h->probe_timer))
		uv_timer_start(&h->probe_timer, on_probe_timer, LONG_POLL_PROBE_MS, 0);
}

static void
on_probe_timer(uv_timer_t *timer)
{
	struct http *h = timer->data;
	uint64_t now = clock_mono_ms(), next = 0;
	struct http_req *r, *next_r;
	bool was_failing;

	for (r = h->requests; r != NULL; r = next_r) {
		next_r = r->next;
		if (r->state != REQ_ACTIVE || (r->flags & HTTP_LONG_POLL) == 0 ||
		    r->gate == NULL || r->gate->probe != r || !r->gate->failing)
			continue;
		if (now - r->sent_at < LONG_POLL_PROBE_MS) {
			if (next == 0 || r->sent_at + LONG_POLL_PROBE_MS < next)
				next = r->sent_at + LONG_POLL_PROBE_MS;
			continue;
		}
		/* Its answer, when it comes, tells as any answer sent after the opening. */
		was_failing = r->gate->failing;
		if (pushback_answered(r->gate, r, r->sent_at, 0))
			gate_opened(r, "holds a probe as a long poll", was_failing);
	}
	if (next != 0 && !h->closed)
		uv_timer_start(&h->probe_timer, on_probe_timer, next > now ? next - now : 0, 0);
}

/*
 * The server's answer, for the gate: a wait it asked for closes it; a
 * failure of a server down closes it too (tell_gate_failure); an answer
 * that is no failure opens it, and what it held resumes, spread out.
 */
static void
tell_gate(struct http_req *r, bool transport_retryable, const struct retry_decision *d)
{
	struct http *h = r->h;
	struct pushback_gate *g = r->gate;
	uint64_t wait_until = 0;
	bool was_open = g->until == 0, was_failing = g->failing;
	char how[64];
	char *path;

	if (d->again && d->reason != RETRY_WAIT_BACKOFF)
		wait_until = clock_mono_ms() + d->delay_ms;
	else if (r->status == 0 || retry_status_retryable(r->status)) {
		if (h->hold_on_failure)
			tell_gate_failure(r, transport_retryable, d);
		return;
	}
	if (pushback_answered(g, r, r->sent_at, wait_until)) {
		snprintf(how, sizeof(how), "answers again (HTTP %ld)", r->status);
		gate_opened(r, how, was_failing);
	} else if (was_open && wait_until != 0) {
		g->since = clock_wall();
		path = log_path(r->url);
		log_warnx("api: %s %s: %s asked for a pause: no more %s requests to this "
		    "endpoint for %llu ms, then one before the rest", r->method, path,
		    h->peer, r->method, (unsigned long long)d->delay_ms);
		free(path);
		gate_gauge(r, true);
	}
}

/*
 * A 3xx with a Location: followed at once, as the same attempt (no retry
 * is spent), or refused, which ends the request.  Logged with both
 * origins only: a Location may hold a presigned signature, a URL a token.
 * False if the answer is no redirect to act on.
 */
static bool
follow_redirect(struct http_req *r)
{
	struct redirect_input in;
	struct redirect_decision d;
	char *path, *why;

	if (r->h->closing)
		return false;	/* nothing more is sent: the 3xx is the answer */
	memset(&in, 0, sizeof(in));
	in.status = r->status;
	in.method = wire_method(r);
	in.url = wire_url(r);
	in.location = http_req_response_header(r, "Location");
	in.has_body = wire_body(r);
	in.body_has_token = r->body_has_token;
	in.never_keep_tokens = (r->flags & HTTP_REDIRECT_NO_TOKENS) != 0;
	in.hops = r->redirects;
	in.max_hops = MAX_REDIRECTS;
	redirect_decide(&in, &d);
	if (d.action == REDIRECT_NONE)
		return false;
	path = log_path(r->url);
	if (d.action == REDIRECT_REFUSE) {
		why = xasprintf("HTTP %ld redirect from %s to %s refused: %s", r->status,
		    d.from, d.to[0] != '\0' ? d.to : "its Location", d.why_not);
		log_warnx("api: %s %s: %s", r->method, path, why);
		snprintf(r->error_text, sizeof(r->error_text), "%s", why);
		free(why);
		free(path);
		r->status = 0;
		r->error = -EPERM;
		finish(r);
		return true;
	}
	log_debug("api: %s %s: HTTP %ld redirect from %s to %s, %s", r->method, path,
	    r->status, d.from, d.to, d.keep_tokens ? "same origin, token headers kept" :
	    d.same_origin ? "token headers dropped as the caller asked" :
	    "another origin, token headers dropped");
	free(path);
	r->redirects++;
	if (!d.keep_tokens)
		r->tokens_dropped = true;
	/* The rule changes the method only to a GET without the body (303). */
	if (strcmp(d.method, in.method) != 0 || (in.has_body && !d.keep_body))
		r->redirect_get = true;
	free(r->redirect_url);
	r->redirect_url = d.url;
	d.url = NULL;
	curl_easy_reset(r->easy);
	setup_easy(r);
	attempt_start(r);
	return true;
}

/* One attempt is over: answer the caller, or wait and send it again. */
static void
attempt_done(struct http_req *r, CURLcode rc)
{
	struct retry_input in;
	struct retry_decision d;
	long status = 0;
	char *path;

	release_slot(r);
	if (r->cancel_later) {
		r->status = 0;
		r->error = -ECANCELED;
		snprintf(r->error_text, sizeof(r->error_text), "canceled");
		finish(r);
		return;
	}
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
	r->error = 0;
	r->error_text[0] = '\0';
	r->status = status;
	if (rc != CURLE_OK) {
		/* A body cut short is no answer, whatever its status line said. */
		r->status = 0;
		if (r->too_big) {
			r->error = -EMSGSIZE;
			snprintf(r->error_text, sizeof(r->error_text),
			    "response larger than %zu bytes", r->response_cap);
		} else if (r->write_errno != 0) {
			r->error = -r->write_errno;
			snprintf(r->error_text, sizeof(r->error_text),
			    "writing the response: %s", strerror(r->write_errno));
		} else {
			r->error = rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO;
			snprintf(r->error_text, sizeof(r->error_text), "%s (curl %d)",
			    r->errbuf[0] ? r->errbuf : curl_easy_strerror(rc), (int)rc);
		}
	}
	count_attempt(r);
	if (follow_redirect(r))
		return;
	/* A redirect not followed is the caller's answer, not a failure. */
	if (r->status < 200 || r->status > 399)
		log_failed_attempt(r);

	memset(&in, 0, sizeof(in));
	in.attempts = r->attempts;
	in.max_attempts = r->max_attempts;
	in.status = r->status;
	in.transport_retryable = rc != CURLE_OK && !r->too_big && r->write_errno == 0 &&
	    transport_retryable(rc);
	in.no_retry = (r->flags & HTTP_NO_RETRY) != 0 || r->h->closing;
	in.no_retry_429 = (r->flags & HTTP_NO_RETRY_429) != 0;
	in.retry_after = http_req_response_header(r, "Retry-After");
	in.ratelimit_reset = http_req_response_header(r, "RateLimit-ResetTime");
	in.now = clock_wall();
	in.remaining_ms = remaining_ms(r);
	in.backoff_ms = backoff_next(&r->backoff, rand_u32());
	d = retry_decide(&in);
	tell_gate(r, in.transport_retryable, &d);
	if (!d.again) {
		if (r->attempts > 1 && (r->status == 0 || r->status >= 400)) {
			path = log_path(r->url);
			log_warnx("api: %s %s: giving up after %u attempts: %s", r->method,
			    path, r->attempts, d.why_not);
			free(path);
		}
		finish(r);
		return;
	}
	path = log_path(r->url);
	log_warnx("api: %s %s: waiting %llu ms (%s) before attempt %u/%u", r->method,
	    path, (unsigned long long)d.delay_ms, retry_wait_reason_name(d.reason),
	    r->attempts + 1, r->max_attempts);
	free(path);
	{
		char labels[64];

		snprintf(labels, sizeof(labels), "reason=\"%s\"", retry_wait_reason_name(d.reason));
		metrics_counter_add("runner_api_retry_waits_total", labels, 1);
		metrics_counter_add("runner_api_retry_wait_seconds_total", labels,
		    (double)d.delay_ms / 1000);
	}
	req_enter(r, REQ_BACKOFF);
	r->wake_at = clock_mono_ms() + d.delay_ms;
	backoff_insert(r);
	arm_retry_timer(r->h);
}

static void
drain(struct http *h)
{
	struct http_req *r;
	CURLMsg *msg;
	CURLcode rc;
	CURL *easy;
	int left;

	h->in_drain++;
	while (h->multi != NULL && (msg = curl_multi_info_read(h->multi, &left)) != NULL) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		/* msg is invalid once the handle is removed: copy first. */
		easy = msg->easy_handle;
		rc = msg->data.result;
		r = NULL;
		curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&r);
		curl_multi_remove_handle(h->multi, easy);
		if (r != NULL && r->state == REQ_ACTIVE)
			attempt_done(r, rc);
	}
	h->in_drain--;
	if (h->closing && h->in_drain == 0)
		finish_close(h);
}

/* Unlink from the client and call back, once. */
static void
finish(struct http_req *r)
{
	struct http *h = r->h;
	struct http_result res;

	if (r->state == REQ_DONE)
		return;
	req_enter(r, REQ_DONE);
	if (r->gate != NULL) {
		if (pushback_gone(r->gate, r))
			wake_held(h, r->gate, clock_mono_ms(), 0, false);
		pushback_put(r->gate);
		if (r->gate->users == 0 && r->gate->until != 0)
			gate_gauge(r, false);	/* closed, but nothing waits at it */
		r->gate = NULL;
	}
	if (r->prev != NULL)
		r->prev->next = r->next;
	else if (h->requests == r)
		h->requests = r->next;
	if (r->next != NULL)
		r->next->prev = r->prev;
	r->prev = r->next = NULL;
	h->active--;

	memset(&res, 0, sizeof(res));
	res.status = r->status;
	res.error = r->error;
	res.error_text = r->error_text;
	res.body = r->response.ptr;
	res.body_len = r->response.len;
	res.file_len = r->response_fd >= 0 ? (uint64_t)r->response_pos : 0;
	res.attempts = r->attempts;
	res.request_id = request_id_of(r);
	if (r->cb != NULL)
		r->cb(r, &res, r->cb_data);
}

void
http_req_cancel(struct http_req *r)
{
	struct http *h = r->h;

	if (r->in_data_cb) {
		/* libcurl is inside the transfer: on_body stops it, drain() ends it. */
		r->cancel_later = true;
		return;
	}
	switch (r->state) {
	case REQ_ACTIVE:
		curl_multi_remove_handle(h->multi, r->easy);
		release_slot(r);
		break;
	case REQ_BACKOFF:
		backoff_remove(r);
		arm_retry_timer(h);
		break;
	case REQ_QUEUED:
		queue_remove(r);
		break;
	case REQ_NEW:
	case REQ_DONE:
		return;
	}
	r->status = 0;
	r->error = -ECANCELED;
	snprintf(r->error_text, sizeof(r->error_text), "canceled");
	finish(r);
}

void
http_req_free(struct http_req *r)
{
	if (r == NULL)
		return;
	if (r->state != REQ_NEW && r->state != REQ_DONE)
		fatalx("http_req_free: request %s %s is still running", r->method, r->url);
	if (r->easy != NULL)
		curl_easy_cleanup(r->easy);
	slist_wipe(r->headers);
	slist_wipe(r->secret_headers);
	slist_wipe(r->wire_headers);
	free(r->redirect_url);
	if (r->body.cap > 0)
		explicit_bzero(r->body.ptr, r->body.len);
	buf_release(&r->body);
	buf_release(&r->response);
	buf_release(&r->resp_headers);
	free(r->content_type);
	free(r->ca_file);
	free(r->cert_file);
	free(r->key_file);
	free(r->unix_path);
	free(r->method);
	free(r->url);
	free(r->endpoint);
	free(r);
}

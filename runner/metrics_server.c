/*
 * The HTTP listener that serves the metrics registry (/metrics) and the
 * health probes; see metrics_server.h.
 *
 * A connection is a small state machine.  READING collects bytes
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

#include "lib/buf.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/metrics.h"
#include "lib/xmalloc.h"
#include "runner/metrics_server.h"

static bool
is_digit(unsigned char ch)
{
	return ch >= '0' && ch <= '9';
}

static bool
is_alnum(unsigned char ch)
{
	return is_digit(ch) || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

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

static const char *const conn_state_names[] = {
	[CONN_READING] = "reading",
	[CONN_WRITING] = "writing",
	[CONN_LINGER] = "linger",
	[CONN_CLOSED] = "closed",
};
_Static_assert(sizeof(conn_state_names) / sizeof(conn_state_names[0]) ==
    CONN_CLOSED + 1, "a name for every connection state");

struct conn {
	struct metrics_server	*s;
	struct conn		*prev, *next;
	uv_tcp_t		 tcp;
	uv_timer_t		 timer;
	uv_write_t		 wreq;
	uv_shutdown_t		 sreq;
	enum conn_state		 state;
	unsigned		 id;		/* for the log */
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
	unsigned		 accepted;	/* connections so far: the next id */
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

/* Every change of a connection's state goes through here, and is logged. */
static void
conn_enter(struct conn *c, enum conn_state to)
{
	log_debug("metrics: connection %u: %s -> %s", c->id,
	    conn_state_names[c->state], conn_state_names[to]);
	c->state = to;
}

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

	conn_enter(c, CONN_LINGER);
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
	conn_enter(c, CONN_READING);
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
	conn_enter(c, CONN_WRITING);
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
	conn_enter(c, CONN_CLOSED);
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
	c->id = ++s->accepted;
	c->state = CONN_READING;	/* born; every change after goes through conn_enter() */
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

/*
 * A hijacked attach (attach.h), the recipe of docker-executor.md 5.4 and
 * 8.4: libcurl connects (CURLOPT_CONNECT_ONLY) and then only moves bytes
 * with curl_easy_send/recv; the HTTP of this one call is written here.
 *
 * The connect is a curl_easy_perform(), which blocks: a unix socket
 * connects at once (or fails at once), which is the engine's usual
 * address.  For tcp:// it blocks the loop for the TCP and TLS handshakes
 * (bounded by CONNECT_TIMEOUT_MS) — accepted, as the engine is normally
 * near.  Everything after is driven by one uv_poll on libcurl's socket:
 * readable → curl_easy_recv until CURLE_AGAIN; writable, only while bytes
 * wait → curl_easy_send of the rest.
 *
 * Lifetime: the attach is freed in the close callback of its poll, which
 * libuv runs on a later turn of the loop, so the struct stays valid for
 * the rest of any callback that ended it; done says no callback may come.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <cJSON.h>
#include <curl/curl.h>
#include <uv.h>

#include "executors/docker/attach.h"
#include "executors/docker/engine.h"
#include "executors/docker/frames.h"
#include "lib/buf.h"
#include "lib/xmalloc.h"

#define CONNECT_TIMEOUT_MS	30000
#define HEAD_MAX		(64 * 1024)
#define READ_CHUNK		(64 * 1024)

/*
 * One read buffer for every attach: each read is consumed (framed and
 * passed on) before receive() returns, and all attaches run on the one
 * loop thread.  In each attach it would be 64 KiB of every running job.
 */
static char rbuf[READ_CHUNK];

enum attach_state {
	ATTACH_HEAD,		/* request sent or going, answer's head not yet whole */
	ATTACH_ERROR_BODY,	/* an error answer: its body, for the message */
	ATTACH_STREAM,		/* the raw stream */
};

struct attach {
	uv_loop_t		*loop;
	CURL			*curl;
	curl_socket_t		 fd;
	uv_poll_t		 poll;
	enum attach_state	 state;
	char			*id;		/* the container, for messages */
	char			*address;	/* the engine's, for messages */
	struct buf		 head;		/* the answer so far, in ATTACH_HEAD */
	long			 status;	/* of an error answer */
	size_t			 body_want;	/* its Content-Length */
	struct buf		 out;		/* bytes to send: the request, then stdin */
	size_t			 out_off;	/* sent of out */
	struct buf		 stdin_early;	/* attach_send() before the stream opened */
	bool			 stdin_given;	/* attach_send() was called */
	bool			 stdin_queued;	/* ... and its bytes are in out */
	bool			 shut;		/* SHUT_WR done */
	int			 events;	/* what the poll watches */
	struct frames		 frames;
	attach_event_cb		*on_attached;
	attach_output_cb	*on_output;
	attach_event_cb		*on_done;
	void			*arg;
	bool			 done;
	char			 errbuf[CURL_ERROR_SIZE];
};

static void
on_poll_closed(uv_handle_t *h)
{
	struct attach *a = h->data;

	/* libcurl closes the socket; the poll is gone, so that is allowed now. */
	curl_easy_cleanup(a->curl);
	buf_release(&a->head);
	buf_release(&a->out);
	buf_release(&a->stdin_early);
	free(a->id);
	free(a->address);
	free(a);
}

/* The last callback, once; the attach goes with the poll's close. */
static void
finish(struct attach *a, int error, const char *cause)
{
	if (a->done)
		return;
	a->done = true;
	uv_poll_stop(&a->poll);
	a->on_done(error, cause, a->arg);
	uv_close((uv_handle_t *)&a->poll, on_poll_closed);
}

static void
finishf(struct attach *a, int error, const char *fmt, const char *detail)
{
	char *cause = xasprintf(fmt, a->id, detail);

	finish(a, error, cause);
	free(cause);
}

static void	on_poll(uv_poll_t *, int, int);

static void
watch(struct attach *a)
{
	int events = UV_READABLE;

	if (a->done)
		return;
	if (a->out_off < a->out.len)
		events |= UV_WRITABLE;
	if (events != a->events) {
		a->events = events;
		uv_poll_start(&a->poll, events, on_poll);
	}
}

/* Send what waits; then, stdin all written, half-close so the shell reads EOF. */
static int
flush(struct attach *a)
{
	CURLcode rc;
	size_t n;

	while (a->out_off < a->out.len) {
		n = 0;
		rc = curl_easy_send(a->curl, a->out.ptr + a->out_off, a->out.len - a->out_off,
		    &n);
		if (rc == CURLE_AGAIN)
			break;
		if (rc != CURLE_OK) {
			finishf(a, -EIO, "attach to %s: sending: %s",
			    a->errbuf[0] != '\0' ? a->errbuf : curl_easy_strerror(rc));
			return -1;
		}
		a->out_off += n;
	}
	if (a->out_off == a->out.len) {
		buf_reset(&a->out);
		a->out_off = 0;
		if (a->stdin_queued && !a->shut) {
			a->shut = true;
			if (shutdown(a->fd, SHUT_WR) == -1) {
				finishf(a, -errno, "attach to %s: closing stdin: %s",
				    strerror(errno));
				return -1;
			}
		}
	}
	watch(a);
	return 0;
}

static void
queue_stdin(struct attach *a)
{
	buf_append(&a->out, a->stdin_early.ptr, a->stdin_early.len);
	buf_release(&a->stdin_early);
	a->stdin_queued = true;
}

static void
on_frame(int stream, const char *data, size_t len, void *arg)
{
	struct attach *a = arg;

	if (!a->done)
		a->on_output(stream, data, len, a->arg);
}

/* The daemon's {"message": ...}, or the body's first line. */
static char *
body_message(const char *body, size_t len)
{
	cJSON *j = cJSON_ParseWithLength(body, len), *m;
	size_t n = strcspn(body, "\r\n");
	char *s;

	if (cJSON_IsString(m = cJSON_GetObjectItemCaseSensitive(j, "message")))
		s = xstrdup(m->valuestring);
	else
		s = xasprintf("%.*s", (int)(n < len ? n : len), body);
	cJSON_Delete(j);
	return s;
}

static void
fail_answer(struct attach *a, const char *body, size_t len)
{
	char *msg = body_message(body, len), *cause;

	cause = xasprintf("attach to %s: HTTP %ld%s%s", a->id, a->status,
	    *msg != '\0' ? ": " : "", msg);
	if (!a->done)
		a->on_attached(-EIO, cause, a->arg);
	finish(a, -EIO, cause);
	free(cause);
	free(msg);
}

/* A header's value in a head ("Name: value\r\n"), or NULL. */
static const char *
head_header(const char *head, const char *name, size_t *len)
{
	const char *p = head;
	size_t n = strlen(name);

	while ((p = strstr(p, "\r\n")) != NULL) {
		p += 2;
		if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
			p += n + 1;
			while (*p == ' ' || *p == '\t')
				p++;
			*len = strcspn(p, "\r\n");
			return p;
		}
	}
	return NULL;
}

/* Bytes of the answer while its head is not yet whole. */
static void
feed_head(struct attach *a, const char *data, size_t len)
{
	const char *end = NULL, *v;
	size_t head_len, vlen;
	int status = 0;

	if (buf_append(&a->head, data, len) != 0 ||
	    ((end = strstr(a->head.ptr, "\r\n\r\n")) == NULL && a->head.len > HEAD_MAX)) {
		finishf(a, -EPROTO, "attach to %s: %s", "the answer's head is too long");
		return;
	}
	if (end == NULL)
		return;
	head_len = (size_t)(end - a->head.ptr) + 4;
	if (sscanf(a->head.ptr, "HTTP/%*d.%*d %d", &status) != 1) {
		finishf(a, -EPROTO, "attach to %s: %s", "the Docker engine's answer is no HTTP");
		return;
	}
	if (status == 101 || status == 200) {
		a->state = ATTACH_STREAM;
		a->on_attached(0, NULL, a->arg);
		if (a->done)
			return;
		if (a->stdin_given && !a->stdin_queued) {
			queue_stdin(a);
			if (flush(a) != 0)
				return;
		}
		/* What came with the head is the first frames. */
		frames_feed(&a->frames, a->head.ptr + head_len, a->head.len - head_len,
		    on_frame, a);
		buf_release(&a->head);
		return;
	}
	a->status = status;
	a->state = ATTACH_ERROR_BODY;
	if ((v = head_header(a->head.ptr, "Content-Length", &vlen)) != NULL)
		a->body_want = strtoul(v, NULL, 10);
	buf_consume(&a->head, head_len);
	/* Without a length the body came with the head, if there is one. */
	if (v == NULL || a->head.len >= a->body_want)
		fail_answer(a, a->head.ptr, a->head.len);
}

static void
on_eof(struct attach *a)
{
	switch (a->state) {
	case ATTACH_HEAD:
		finishf(a, -ECONNRESET, "attach to %s: %s",
		    "the Docker engine closed the connection before answering");
		break;
	case ATTACH_ERROR_BODY:
		fail_answer(a, a->head.ptr, a->head.len);
		break;
	case ATTACH_STREAM:
		if (frames_partial(&a->frames))
			finishf(a, -EPROTO, "attach to %s: %s",
			    "the output stream ended inside a frame");
		else
			finish(a, 0, NULL);
		break;
	}
}

static void
receive(struct attach *a)
{
	CURLcode rc;
	size_t n;

	while (!a->done) {
		n = 0;
		rc = curl_easy_recv(a->curl, rbuf, sizeof(rbuf), &n);
		if (rc == CURLE_AGAIN)
			return;
		if (rc != CURLE_OK) {
			finishf(a, -EIO, "attach to %s: receiving: %s",
			    a->errbuf[0] != '\0' ? a->errbuf : curl_easy_strerror(rc));
			return;
		}
		if (n == 0) {
			on_eof(a);
			return;
		}
		switch (a->state) {
		case ATTACH_HEAD:
			feed_head(a, rbuf, n);
			break;
		case ATTACH_ERROR_BODY:
			/* A body past the cap: what came is enough for the message. */
			if (buf_append(&a->head, rbuf, n) != 0 || a->head.len >= a->body_want)
				fail_answer(a, a->head.ptr, a->head.len);
			break;
		case ATTACH_STREAM:
			frames_feed(&a->frames, rbuf, n, on_frame, a);
			break;
		}
	}
}

static void
on_poll(uv_poll_t *poll, int status, int events)
{
	struct attach *a = poll->data;

	if (a->done)
		return;
	/* An error on the socket shows in recv or send: let them say it. */
	if (status < 0)
		events = UV_READABLE | UV_WRITABLE;
	if ((events & UV_WRITABLE) && flush(a) != 0)
		return;
	if (events & UV_READABLE)
		receive(a);
}

struct attach *
attach_open(struct engine *e, const char *container_id, attach_event_cb *on_attached,
    attach_output_cb *on_output, attach_event_cb *on_done, void *arg, char **cause)
{
	const struct engine_endpoint *ep = engine_endpoint(e);
	const char *version = engine_api_version(e);
	struct attach *a;
	curl_socket_t fd = CURL_SOCKET_BAD;
	CURLcode rc;
	char *url;

	*cause = NULL;
	a = xcalloc(1, sizeof(*a));
	a->loop = engine_loop(e);
	a->id = xstrdup(container_id);
	a->address = xstrdup(engine_address(e));
	a->on_attached = on_attached;
	a->on_output = on_output;
	a->on_done = on_done;
	a->arg = arg;
	/* A head, and what came with it in the same read. */
	buf_init(&a->head, HEAD_MAX + READ_CHUNK);
	buf_init(&a->out, BUF_UNLIMITED);
	buf_init(&a->stdin_early, BUF_UNLIMITED);
	frames_init(&a->frames);
	if ((a->curl = curl_easy_init()) == NULL)
		goto fail;
	url = xasprintf("%s/", ep->base_url);
	curl_easy_setopt(a->curl, CURLOPT_URL, url);
	free(url);
	curl_easy_setopt(a->curl, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(a->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(a->curl, CURLOPT_ERRORBUFFER, a->errbuf);
	curl_easy_setopt(a->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS);
	curl_easy_setopt(a->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	if (ep->unix_path != NULL)
		curl_easy_setopt(a->curl, CURLOPT_UNIX_SOCKET_PATH, ep->unix_path);
	if (ep->tls_verify) {
		curl_easy_setopt(a->curl, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
		if (ep->ca_file != NULL)
			curl_easy_setopt(a->curl, CURLOPT_CAINFO, ep->ca_file);
		if (ep->cert_file != NULL)
			curl_easy_setopt(a->curl, CURLOPT_SSLCERT, ep->cert_file);
		if (ep->key_file != NULL)
			curl_easy_setopt(a->curl, CURLOPT_SSLKEY, ep->key_file);
	}
	/* The connect: see the top of the file for why blocking is accepted. */
	if ((rc = curl_easy_perform(a->curl)) != CURLE_OK) {
		*cause = xasprintf("cannot connect to the Docker engine at %s: %s", a->address,
		    a->errbuf[0] != '\0' ? a->errbuf : curl_easy_strerror(rc));
		goto fail;
	}
	if (curl_easy_getinfo(a->curl, CURLINFO_ACTIVESOCKET, &fd) != CURLE_OK ||
	    fd == CURL_SOCKET_BAD) {
		*cause = xasprintf("attach to %s: libcurl gave no socket", container_id);
		goto fail;
	}
	a->fd = fd;
	buf_printf(&a->out, "POST /v%s/containers/%s/attach?stream=1&stdin=1&stdout=1&stderr=1 "
	    "HTTP/1.1\r\nHost: docker\r\nContent-Length: 0\r\nConnection: Upgrade\r\n"
	    "Upgrade: tcp\r\n\r\n", version != NULL ? version : ENGINE_API_MIN, container_id);
	if (uv_poll_init_socket(a->loop, &a->poll, fd) != 0) {
		*cause = xasprintf("attach to %s: cannot watch its socket", container_id);
		goto fail;
	}
	a->poll.data = a;
	/* The request goes when the socket is writable: no callback from in here. */
	watch(a);
	return a;

fail:
	if (*cause == NULL)
		*cause = xasprintf("attach to %s: libcurl cannot start", container_id);
	if (a->curl != NULL)
		curl_easy_cleanup(a->curl);
	buf_release(&a->head);
	buf_release(&a->out);
	buf_release(&a->stdin_early);
	free(a->id);
	free(a->address);
	free(a);
	return NULL;
}

void
attach_send(struct attach *a, const char *data, size_t len)
{
	if (a->done || a->stdin_given)
		return;
	a->stdin_given = true;
	buf_append(&a->stdin_early, data, len);
	if (a->state != ATTACH_STREAM)
		return;	/* sent once the stream is open */
	queue_stdin(a);
	(void)flush(a);
}

void
attach_close(struct attach *a)
{
	finish(a, -ECANCELED, "canceled");
}

/*
 * The GitLab runner API over http.c: one function per endpoint, each
 * building its request (URL, headers, body) and mapping the answer to a
 * result as gitlab-runner does (protocol.md 2, 3, 4, 5, 6).
 *
 * Where each token goes is decided here and nowhere else (protocol.md
 * 1.3): runner tokens in the JSON body and Runner-Token, job tokens in the
 * body of PUT /jobs/:id and Job-Token, Private-Token only for a personal
 * access token.  Retries, waits and the logging of failed answers are
 * http.c's; what is left here is meaning.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "api/api.h"
#include "api/http.h"
#include "api/json.h"
#include "api/redact.h"
#include "lib/buf.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/metrics.h"
#include "lib/version.h"
#include "lib/xmalloc.h"

#define CALL_DEADLINE_MS	(5ULL * 60 * 1000)
#define CALL_ATTEMPT_MS		(60ULL * 1000)
/* GitLab (Workhorse) holds a job request up to ~50 s when long polling. */
#define JOB_REQUEST_ATTEMPT_MS	(120ULL * 1000)
#define JOB_PAYLOAD_CAP		(32 * 1024 * 1024)
#define TRACE_PATCH_MAX		(1024 * 1024)
#define DISCOVERY_TTL_MS	(60ULL * 60 * 1000)
#define ARTIFACT_UPLOAD_ATTEMPTS	6
#define ARTIFACT_DOWNLOAD_ATTEMPTS	3

enum call_kind {
	CALL_TOKEN,	/* register, verify, reset: api_token_cb */
	CALL_DONE,	/* unregister: api_done_cb */
	CALL_DISCOVERY,
	CALL_JOB_REQUEST,
	CALL_UPDATE,
	CALL_PATCH,
	CALL_ARTIFACT,	/* artifact upload and downloads: api_artifact_cb */
};

/* What a runner (url + token) has learnt from its GitLab. */
struct client_state {
	struct client_state	*next;
	char			*url;
	char			*token;
	char			*last_update;		/* X-GitLab-Last-Update */
	bool			 discovered;
	uint64_t		 discovered_at;		/* monotonic ms */
	enum api_result		 discovery_result;
	char			*router_url;
};

struct api_call {
	struct api		*a;
	struct api_call		*prev, *next;	/* a->calls */
	enum call_kind		 kind;
	struct http_req		*req;
	struct client_state	*client;
	uint64_t		 patch_end;	/* PATCH: start + len */
	bool			 delivered;	/* callback called: cancel is a no-op */
	/* gitlab-runner's endpoint name if it measures this call, else NULL. */
	const char		*measured;
	char			*measure_runner;	/* runner="..." */
	char			*measure_system;	/* system_id="..." */
	uint64_t		 sent_at;		/* monotonic ms */
	/* Answers known before sending (bad URL, cached discovery). */
	bool			 early;
	enum api_result		 early_result;
	char			*early_message;
	union {
		api_token_cb		*token;
		api_done_cb		*done;
		api_discovery_cb	*discovery;
		api_request_cb		*request;
		api_update_cb		*update;
		api_patch_cb		*patch;
		api_artifact_cb		*artifact;
	} cb;
	void			*data;
};

struct api {
	uv_loop_t		*loop;
	struct http		*http;
	char			*config_dir;
	struct api_call		*calls;
	struct client_state	*clients;
	uv_timer_t		 early_timer;	/* delivers answers known before sending */
	bool			 closing;
};

static char user_agent[128];

/* "runner <version> (<revision>; <os>/<arch>)". */
static const char *
api_user_agent(void)
{
	if (user_agent[0] == '\0')
		snprintf(user_agent, sizeof(user_agent), "runner %s (%s; %s/%s)",
		    version_number(), version_revision(), version_os(), version_arch());
	return user_agent;
}

const char *
api_result_name(enum api_result r)
{
	switch (r) {
	case API_OK:		return "ok";
	case API_FORBIDDEN:	return "forbidden";
	case API_UNAUTHORIZED:	return "unauthorized";
	case API_NOT_FOUND:	return "not found";
	case API_GONE:		return "gone";
	case API_UNPROCESSABLE:	return "unprocessable";
	case API_DISABLED:	return "disabled";
	case API_FAILED:	return "failed";
	case API_CLIENT_ERROR:	return "client error";
	case API_CANCELED:	return "canceled";
	}
	return "unknown";
}

/* ---- client ---- */

struct api *
api_new(const struct api_config *cfg)
{
	struct api *a = xcalloc(1, sizeof(*a));
	struct http_config hc = {
		.loop = cfg->loop,
		.user_agent = api_user_agent(),
		.peer = "GitLab",
		.connection_max_age_ms = cfg->connection_max_age_ms,
		.backoff_min_ms = cfg->backoff_min_ms,
		.backoff_max_ms = cfg->backoff_max_ms,
		.hold_on_failure = true,
		.gate_min_ms = cfg->gate_min_ms,
		.gate_max_ms = cfg->gate_max_ms,
		.resume_spread_ms = cfg->resume_spread_ms,
	};

	static const double duration_bounds[] = { 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };

	a->loop = cfg->loop;
	a->http = http_new(&hc);
	metrics_describe("gitlab_runner_api_request_statuses_total", "counter",
	    "The total number of API requests made by GitLab Runner, partitioned by runner, "
	    "system_id, endpoint, status and method.");
	metrics_describe_histogram("gitlab_runner_api_request_duration_seconds",
	    "Latency histogram of API requests made by GitLab Runner, partitioned by runner, "
	    "system_id, endpoint, status_class and method.", duration_bounds,
	    sizeof(duration_bounds) / sizeof(duration_bounds[0]));
	metrics_describe("gitlab_runner_api_request_retries_total", "counter",
	    "The total number of retries made by GitLab Runner in process of completing a "
	    "request, partitioned by path and method.");
	a->config_dir = cfg->config_dir != NULL ? xstrdup(cfg->config_dir) : NULL;
	uv_timer_init(a->loop, &a->early_timer);
	a->early_timer.data = a;
	return a;
}

static void
on_api_closed(uv_handle_t *handle)
{
	struct api *a = handle->data;
	struct client_state *c;

	while ((c = a->clients) != NULL) {
		a->clients = c->next;
		free(c->url);
		if (c->token != NULL)
			explicit_bzero(c->token, strlen(c->token));
		free(c->token);
		free(c->last_update);
		free(c->router_url);
		free(c);
	}
	free(a->config_dir);
	free(a);
}

void
api_set_pushback(struct api *a, uint64_t gate_max_ms, uint64_t resume_spread_ms)
{
	http_set_pushback(a->http, gate_max_ms, resume_spread_ms);
}

void
api_close(struct api *a)
{
	a->closing = true;
	while (a->calls != NULL)
		api_call_cancel(a->calls);
	http_close(a->http);
	a->http = NULL;
	uv_close((uv_handle_t *)&a->early_timer, on_api_closed);
}

/* ---- URLs, TLS ---- */

/*
 * gitlab-runner's fixCIURL: trailing slashes go, then one trailing /ci,
 * then /api/v4/ is added.  Only http and https are accepted.
 */
static char *
api_base(const char *url, char **cause)
{
	const char *host;
	size_t len;
	char *s;

	if (url == NULL || *url == '\0') {
		*cause = xstrdup("no URL");
		return NULL;
	}
	if (strncasecmp(url, "https://", 8) == 0)
		host = url + 8;
	else if (strncasecmp(url, "http://", 7) == 0)
		host = url + 7;
	else {
		*cause = xasprintf("only http or https URLs are supported, not \"%s\"", url);
		return NULL;
	}
	if (*host == '\0' || *host == '/') {
		*cause = xasprintf("no host in URL \"%s\"", url);
		return NULL;
	}
	if (strpbrk(url, " \t\r\n") != NULL) {
		*cause = xasprintf("URL \"%s\" contains white space", url);
		return NULL;
	}
	s = xstrdup(url);
	len = strlen(s);
	while (len > 0 && s[len - 1] == '/')
		s[--len] = '\0';
	if (len >= 3 && strcmp(s + len - 3, "/ci") == 0 && s + len - 3 >= s + (host - url)) {
		len -= 3;
		s[len] = '\0';
	}
	while (len > 0 && s[len - 1] == '/')
		s[--len] = '\0';
	free(*cause);
	*cause = NULL;
	{
		char *base = xasprintf("%s/api/v4/", s);

		free(s);
		return base;
	}
}

/* The host of a URL, without port or brackets: for certs/<host>.crt. */
static char *
url_host(const char *url)
{
	const char *p = strstr(url, "://"), *end;

	p = p != NULL ? p + 3 : url;
	if ((end = strchr(p, '@')) != NULL && end < p + strcspn(p, "/"))
		p = end + 1;
	if (*p == '[') {
		end = strchr(p, ']');
		return end != NULL ? xmemdup(p + 1, (size_t)(end - p - 1)) : xstrdup(p);
	}
	end = p + strcspn(p, ":/?#");
	return xmemdup(p, (size_t)(end - p));
}

static char *
cert_file(const struct api *a, const char *host, const char *suffix)
{
	char *path;

	if (a->config_dir == NULL)
		return NULL;
	path = xasprintf("%s/certs/%s%s", a->config_dir, host, suffix);
	if (access(path, R_OK) == 0)
		return path;
	free(path);
	return NULL;
}

/*
 * TLS files of the entry, else the ones in <config dir>/certs/ named for
 * the host.  A file that is named but cannot be read is an error here: the
 * alternative, trusting only the system's CAs, fails later with a message
 * about certificates that hides the real cause.
 */
static char *
apply_tls(struct api *a, struct http_req *req, const struct api_creds *c)
{
	char *host = url_host(c->url);
	char *ca = NULL, *cert = NULL, *key = NULL, *problem = NULL;
	struct http_tls tls;

	if (c->tls_ca_file == NULL || *c->tls_ca_file == '\0')
		ca = cert_file(a, host, ".crt");
	if (c->tls_cert_file == NULL || *c->tls_cert_file == '\0') {
		cert = cert_file(a, host, ".auth.crt");
		key = cert_file(a, host, ".auth.key");
	}
	tls.ca_file = ca != NULL ? ca : c->tls_ca_file;
	tls.cert_file = cert != NULL ? cert : c->tls_cert_file;
	tls.key_file = key != NULL ? key : c->tls_key_file;
	http_req_tls(req, &tls);
	{
		const char *names[] = { "tls-ca-file", "tls-cert-file", "tls-key-file" };
		const char *files[] = { tls.ca_file, tls.cert_file, tls.key_file };
		size_t i;

		for (i = 0; i < 3 && problem == NULL; i++)
			if (files[i] != NULL && *files[i] != '\0' && access(files[i], R_OK) != 0)
				problem = xasprintf("cannot read %s %s: %s", names[i], files[i],
				    strerror(errno));
	}
	free(ca);
	free(cert);
	free(key);
	free(host);
	return problem;
}

static struct client_state *
client_for(struct api *a, const struct api_creds *c)
{
	struct client_state *s;
	const char *token = c->token != NULL ? c->token : "";

	for (s = a->clients; s != NULL; s = s->next)
		if (strcmp(s->url, c->url) == 0 && strcmp(s->token, token) == 0)
			return s;
	s = xcalloc(1, sizeof(*s));
	s->url = xstrdup(c->url);
	s->token = xstrdup(token);
	s->next = a->clients;
	a->clients = s;
	return s;
}

/* ---- calls ---- */

static struct api_call *
call_new(struct api *a, enum call_kind kind, void *data)
{
	struct api_call *call = xcalloc(1, sizeof(*call));

	call->a = a;
	call->kind = kind;
	call->data = data;
	call->next = a->calls;
	if (a->calls != NULL)
		a->calls->prev = call;
	a->calls = call;
	return call;
}

/* Take the call off the client's list: from here on nothing cancels it. */
static void
call_unlink(struct api_call *call)
{
	struct api *a = call->a;

	if (call->prev != NULL)
		call->prev->next = call->next;
	else if (a->calls == call)
		a->calls = call->next;
	if (call->next != NULL)
		call->next->prev = call->prev;
	call->prev = call->next = NULL;
}

static void
call_free(struct api_call *call)
{
	http_req_free(call->req);
	free(call->early_message);
	free(call->measure_runner);
	free(call->measure_system);
	free(call);
}

/* Reason phrases for the codes GitLab answers runners with. */
static const char *
reason_phrase(long status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 412: return "Precondition Failed";
	case 413: return "Request Entity Too Large";
	case 416: return "Range Not Satisfiable";
	case 422: return "Unprocessable Entity";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "";
	}
}

/* "403 Forbidden (message)" or the transport error, for the caller's messages. */
static char *
answer_message(const struct http_result *res)
{
	char *flat, *clean;
	size_t clean_len;
	char *msg;

	if (res->status == 0)
		return xstrdup(res->error_text != NULL && *res->error_text ?
		    res->error_text : "no answer");
	/* Redacted as JSON text, so that "token: [is missing]" stays readable. */
	clean = redact_copy(res->body, res->body_len, &clean_len);
	flat = json_error_message(clean, clean_len);
	free(clean);
	/* GitLab's messages often are "403 Forbidden" already: say it once. */
	if (flat != NULL && strtol(flat, NULL, 10) == res->status)
		msg = xstrdup(flat);
	else if (flat != NULL)
		msg = xasprintf("%ld %s (%s)", res->status, reason_phrase(res->status), flat);
	else
		msg = xasprintf("%ld %s", res->status, reason_phrase(res->status));
	free(flat);
	return msg;
}

static bool
is_json(const struct http_req *req)
{
	const char *ct = http_req_response_header(req, "Content-Type");
	size_t n = strlen("application/json");

	if (ct == NULL)
		return false;
	while (*ct == ' ')
		ct++;
	return strncasecmp(ct, "application/json", n) == 0 &&
	    (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

static void
remember_last_update(struct api_call *call)
{
	const char *v;

	if (call->client == NULL || call->req == NULL)
		return;
	v = http_req_response_header(call->req, "X-GitLab-Last-Update");
	if (v != NULL && *v != '\0') {
		free(call->client->last_update);
		call->client->last_update = xstrdup(v);
	}
}

/* A request to an absolute URL, with the TLS files creds name for its host. */
static struct api_call *
call_prepare_url(struct api *a, enum call_kind kind, const struct api_creds *creds,
    const char *method, const char *url, void *data)
{
	struct api_call *call = call_new(a, kind, data);
	char *cause, endpoint[96];

	call->req = http_req_new(a->http, method, url);
	/* Endpoints are named as GitLab's API documents them: below /api/v4. */
	http_endpoint_label(url, "/api/v4", endpoint, sizeof(endpoint));
	http_req_endpoint(call->req, endpoint);
	if ((cause = apply_tls(a, call->req, creds)) != NULL) {
		http_req_free(call->req);
		call->req = NULL;
		call->early = true;
		call->early_result = API_CLIENT_ERROR;
		call->early_message = cause;
		return call;
	}
	http_req_deadline(call->req, CALL_DEADLINE_MS);
	http_req_attempt_timeout(call->req, CALL_ATTEMPT_MS);
	return call;
}

/* Everything an endpoint's request has in common. */
static struct api_call *
call_prepare(struct api *a, enum call_kind kind, const struct api_creds *creds,
    const char *method, const char *path, void *data)
{
	struct api_call *call;
	char *cause = NULL, *base, *url;

	if ((base = api_base(creds->url, &cause)) == NULL) {
		call = call_new(a, kind, data);
		call->early = true;
		call->early_result = API_CLIENT_ERROR;
		call->early_message = cause;
		return call;
	}
	url = xasprintf("%s%s", base, path);
	call = call_prepare_url(a, kind, creds, method, url, data);
	free(url);
	free(base);
	return call;
}

/* ---- gitlab-runner's API metrics ---- */

static void
escaped(struct buf *b, const char *name, const char *value, bool comma)
{
	buf_printf(b, "%s%s=\"", comma ? "," : "", name);
	metrics_label_escape(b, value);
	buf_putc(b, '"');
}

/*
 * Measure this call as gitlab-runner measures endpoint: one count and one
 * duration per call, its retries included, by its last status.  The
 * system_id label is the creds' or else system_id's.
 */
static void
measure(struct api_call *call, const char *endpoint, const struct api_creds *creds,
    const char *system_id)
{
	char short_token[LOG_TOKEN_SIZE];
	struct buf b;

	if (call->req == NULL)
		return;	/* never sent: a client error, which gitlab-runner does not count */
	buf_init(&b, BUF_UNLIMITED);
	escaped(&b, "runner", creds->short_token != NULL ? creds->short_token :
	    log_token(creds->token, short_token), false);
	call->measure_runner = buf_detach(&b, NULL);
	buf_init(&b, BUF_UNLIMITED);
	if (creds->system_id != NULL)
		system_id = creds->system_id;
	escaped(&b, "system_id", system_id != NULL ? system_id : "", false);
	call->measure_system = buf_detach(&b, NULL);
	call->measured = endpoint;
}

static const char *
status_class(long status)
{
	static const char *const classes[] = { "1xx", "2xx", "3xx", "4xx", "5xx" };

	return status >= 100 && status < 600 ? classes[status / 100 - 1] : "unknown";
}

/* Labels in name order, as the Go client prints them. */
static void
count_call(const struct api_call *call, const struct http_result *res)
{
	char method[16], path[256];
	struct buf b;
	size_t i;

	if (call->req == NULL || call->early)
		return;
	snprintf(method, sizeof(method), "%s", http_req_method(call->req));
	for (i = 0; method[i] != '\0'; i++)
		if (method[i] >= 'A' && method[i] <= 'Z')
			method[i] = (char)(method[i] - 'A' + 'a');
	/* Every request, as gitlab-runner's retry requester counts its attempts. */
	if (res->attempts > 0) {
		http_endpoint_label(http_req_url(call->req), NULL, path, sizeof(path));
		buf_init(&b, BUF_UNLIMITED);
		buf_printf(&b, "method=\"%s\"", method);
		escaped(&b, "path", path, true);
		metrics_counter_add("gitlab_runner_api_request_retries_total", b.ptr,
		    res->attempts);
		buf_release(&b);
	}
	/* No answer (refused, timed out, canceled): not counted, as in gitlab-runner. */
	if (call->measured == NULL || res->status == 0)
		return;
	buf_init(&b, BUF_UNLIMITED);
	buf_printf(&b, "endpoint=\"%s\",method=\"%s\",%s,status=\"%ld\",%s",
	    call->measured, method, call->measure_runner, res->status, call->measure_system);
	metrics_counter_add("gitlab_runner_api_request_statuses_total", b.ptr, 1);
	buf_reset(&b);
	buf_printf(&b, "endpoint=\"%s\",method=\"%s\",%s,status_class=\"%s\",%s",
	    call->measured, method, call->measure_runner, status_class(res->status),
	    call->measure_system);
	metrics_histogram_observe("gitlab_runner_api_request_duration_seconds", b.ptr,
	    (double)(clock_mono_ms() - call->sent_at) / 1000);
	buf_release(&b);
}

static void	deliver(struct api_call *, const struct http_result *);

/*
 * Call back once and free.  The call leaves the list first, so a callback
 * that cancels everything (api_close) cannot reach it a second time.
 */
static void
deliver_and_free(struct api_call *call, const struct http_result *res)
{
	call_unlink(call);
	call->delivered = true;
	deliver(call, res);
	call_free(call);
}

static void
on_http_done(struct http_req *req, const struct http_result *res, void *data)
{
	struct api_call *call = data;

	(void)req;
	remember_last_update(call);
	count_call(call, res);
	deliver_and_free(call, res);
}

static void
on_early_timer(uv_timer_t *timer)
{
	struct api *a = timer->data;
	struct api_call *call;
	struct http_result res;

	/* A callback may add or cancel calls: look again from the start each time. */
	for (;;) {
		for (call = a->calls; call != NULL && !call->early; call = call->next)
			;
		if (call == NULL)
			break;
		memset(&res, 0, sizeof(res));
		res.error = -EINVAL;
		res.error_text = call->early_message != NULL ? call->early_message : "";
		res.body = "";
		res.request_id = "";
		deliver_and_free(call, &res);
	}
}

/* Send, or deliver the early answer on the next loop turn. */
static struct api_call *
call_send(struct api_call *call)
{
	struct api *a = call->a;

	call->sent_at = clock_mono_ms();
	if (!call->early && http_req_start(call->req, on_http_done, call) != 0) {
		call->early = true;
		call->early_result = API_CLIENT_ERROR;
		call->early_message = xstrdup("the request could not be started");
	}
	if (call->early)
		uv_timer_start(&a->early_timer, on_early_timer, 0, 0);
	return call;
}

void
api_call_cancel(struct api_call *call)
{
	struct http_result res;

	if (call->delivered)
		return;
	if (call->req != NULL && !call->early) {
		/* on_http_done() delivers and frees. */
		http_req_cancel(call->req);
		return;
	}
	memset(&res, 0, sizeof(res));
	res.error = -ECANCELED;
	res.error_text = "canceled";
	res.body = "";
	res.request_id = "";
	call->early = true;
	call->early_result = API_CANCELED;
	deliver_and_free(call, &res);
}

/* ---- mapping answers ---- */

static enum api_result
simple_result(const struct http_result *res, long ok_status)
{
	if (res->error == -ECANCELED)
		return API_CANCELED;
	if (res->status == ok_status)
		return API_OK;
	switch (res->status) {
	case 401: return API_UNAUTHORIZED;
	case 403: return API_FORBIDDEN;
	case 404: return API_NOT_FOUND;
	case 410: return API_GONE;
	case 422: return API_UNPROCESSABLE;
	case 501: return API_DISABLED;
	default: return API_FAILED;
	}
}

static long
ok_status_of(const struct api_call *call)
{
	const char *m = http_req_method(call->req);

	if (strcmp(m, "DELETE") == 0)
		return 204;
	if (strcmp(m, "GET") == 0)
		return 200;
	return strstr(http_req_url(call->req), "/runners/verify") != NULL ? 200 : 201;
}

static void
deliver_token(struct api_call *call, const struct http_result *res,
    struct api_answer *ans)
{
	struct api_runner_token tok = { 0 };
	enum api_result result;
	char *err = NULL, *msg = NULL;

	if (call->early)
		result = call->early_result;
	else {
		result = simple_result(res, ok_status_of(call));
		if (result == API_OK && !is_json(call->req)) {
			/* Old GitLab answers verify with a plain "200": alive, id unknown. */
			if (strstr(http_req_url(call->req), "/runners/verify") == NULL) {
				result = API_FAILED;
				ans->message = msg = xstrdup("the answer is not application/json");
			}
		} else if (result == API_OK &&
		    json_parse_runner_token(res->body, res->body_len, &tok, &err) != 0) {
			result = API_FAILED;
			ans->message = msg = err;
			err = NULL;
		}
	}
	if (tok.token != NULL)
		log_secret_add(tok.token);
	call->cb.token(result, ans, result == API_OK ? &tok : NULL, call->data);
	api_runner_token_release(&tok);
	free(msg);
	free(err);
}

static void
deliver_discovery(struct api_call *call, const struct http_result *res,
    struct api_answer *ans)
{
	struct client_state *c = call->client;
	enum api_result result;
	char *url = NULL, *err = NULL, *msg = NULL;

	if (call->early) {
		result = call->early_result;
		if (result == API_OK && call->early_message != NULL)
			url = xstrdup(call->early_message);
		if (result != API_CLIENT_ERROR && result != API_CANCELED)
			ans->message = "cached answer";
	} else {
		result = simple_result(res, 200);
		if (result == API_OK && (!is_json(call->req) ||
		    json_parse_discovery(res->body, res->body_len, &url, &err) != 0)) {
			result = API_FAILED;
			ans->message = msg = err != NULL ? err :
			    xstrdup("the answer is not application/json");
			err = NULL;
		}
		/* Remember what we learnt, also "no router"; not a failure to reach it. */
		if (c != NULL && (result == API_OK || result == API_DISABLED ||
		    result == API_FORBIDDEN)) {
			bool changed = !c->discovered || c->discovery_result != result ||
			    (url != NULL) != (c->router_url != NULL) ||
			    (url != NULL && strcmp(url, c->router_url) != 0);
			char tok[LOG_TOKEN_SIZE];

			if (changed)
				log_info("runner %s: job router: %s", log_token(c->token, tok),
				    url != NULL ? url : result == API_DISABLED ?
				    "not available, polling GitLab directly" :
				    "discovery refused the token");
			c->discovered = true;
			c->discovered_at = clock_mono_ms();
			c->discovery_result = result;
			free(c->router_url);
			c->router_url = url != NULL ? xstrdup(url) : NULL;
		}
	}
	call->cb.discovery(result, ans, result == API_OK ? url : NULL, call->data);
	free(url);
	free(msg);
	free(err);
}

static void
deliver_job_request(struct api_call *call, const struct http_result *res,
    struct api_answer *ans)
{
	enum api_request_result result;
	struct api_job *job = NULL;
	char *err = NULL, *msg = NULL;

	if (call->early)
		result = call->early_result == API_CANCELED ? API_JOB_CANCELED :
		    API_JOB_CLIENT_ERROR;
	else if (res->error == -ECANCELED)
		result = API_JOB_CANCELED;
	else if (res->status == 201) {
		if (!is_json(call->req))
			err = xstrdup("the answer is not application/json");
		else
			json_parse_job(res->body, res->body_len, &job, &err);
		if (job != NULL) {
			result = API_JOB_RECEIVED;
		} else {
			/* GitLab has given us this job; it will time out there. Say so. */
			struct buf b;

			buf_init(&b, BUF_UNLIMITED);
			buf_printf(&b, "POST /jobs/request: GitLab assigned a job, but its "
			    "payload cannot be used (%s); the job will time out on GitLab. "
			    "Request id %s, body: ", err, res->request_id);
			redact_excerpt(&b, res->body, res->body_len, 512);
			log_error("%s", b.ptr);
			buf_release(&b);
			result = API_JOB_FAILED;
			ans->message = msg = err;
			err = NULL;
		}
	} else if (res->status == 204) {
		const char *v = call->req != NULL ?
		    http_req_response_header(call->req, "X-GitLab-Last-Update") : NULL;

		result = API_JOB_NONE;
		ans->workhorse_204 = v == NULL || *v == '\0';
		v = call->req != NULL ?
		    http_req_response_header(call->req, "Gitlab-Ci-Builds-Polling") : NULL;
		ans->long_polling = v != NULL && strcasecmp(v, "yes") == 0;
	}
	else if (res->status == 403)
		result = API_JOB_FORBIDDEN;
	else if (res->status == 503)
		result = API_JOB_UNAVAILABLE;
	else
		result = API_JOB_FAILED;
	call->cb.request(result, ans, job, call->data);
	free(msg);
	free(err);
}

static void
job_state_of(const struct api_call *call, struct api_job_state *st)
{
	const char *v;
	char *end;
	long long n;

	memset(st, 0, sizeof(*st));
	if (call->req == NULL || call->early)
		return;
	if ((v = http_req_response_header(call->req, "Job-Status")) != NULL)
		snprintf(st->job_status, sizeof(st->job_status), "%s", v);
	st->cancel_requested = strcmp(st->job_status, "canceling") == 0;
	if ((v = http_req_response_header(call->req, "X-GitLab-Trace-Update-Interval")) != NULL &&
	    *v != '\0') {
		n = strtoll(v, &end, 10);
		if (*end == '\0')
			st->update_interval = n;
		else
			log_warnx("api: cannot parse X-GitLab-Trace-Update-Interval \"%s\"", v);
	}
}

static bool
job_is_over(const struct api_job_state *st)
{
	return strcmp(st->job_status, "canceled") == 0 ||
	    strcmp(st->job_status, "failed") == 0;
}

static void
deliver_update(struct api_call *call, const struct http_result *res,
    struct api_answer *ans)
{
	enum api_update_result result;
	struct api_job_state st;

	job_state_of(call, &st);
	if (call->early)
		result = call->early_result == API_CANCELED ? API_UPDATE_CANCELED :
		    API_UPDATE_ABORT;
	else if (res->error == -ECANCELED)
		result = API_UPDATE_CANCELED;
	else if (job_is_over(&st) || res->status == 403 || res->status == 404)
		result = API_UPDATE_ABORT;
	else if (res->status == 200)
		result = API_UPDATE_OK;
	else if (res->status == 202)
		result = API_UPDATE_ACCEPTED;
	else if (res->status == 412)
		result = API_UPDATE_TRACE_VALIDATION_FAILED;
	else
		result = API_UPDATE_FAILED;
	call->cb.update(result, ans, &st, call->data);
}

/* The number after '-' in "Range: 0-1500", or 0. */
static uint64_t
range_end(const char *v)
{
	const char *dash;

	if (v == NULL || (dash = strchr(v, '-')) == NULL)
		return 0;
	return strtoull(dash + 1, NULL, 10);
}

static void
deliver_patch(struct api_call *call, const struct http_result *res,
    struct api_answer *ans)
{
	enum api_patch_result result;
	struct api_job_state st;
	uint64_t offset = 0;

	job_state_of(call, &st);
	if (call->early)
		result = call->early_result == API_CANCELED ? API_PATCH_CANCELED :
		    API_PATCH_ABORT;
	else if (res->error == -ECANCELED)
		result = API_PATCH_CANCELED;
	else if (job_is_over(&st) || res->status == 403)
		result = API_PATCH_ABORT;
	else if (res->status == 202) {
		result = API_PATCH_OK;
		offset = call->patch_end;
	} else if (res->status == 404)
		result = API_PATCH_NOT_FOUND;
	else if (res->status == 416) {
		result = API_PATCH_RANGE_MISMATCH;
		offset = range_end(http_req_response_header(call->req, "Range"));
	} else
		result = API_PATCH_FAILED;
	call->cb.patch(result, ans, &st, offset, call->data);
}

static void
deliver_artifact(struct api_call *call, const struct http_result *res,
    const struct api_answer *ans)
{
	enum api_artifact_result result;

	if (call->early)
		result = API_ARTIFACT_FAILED;
	else if (res->error == -ECANCELED)
		result = API_ARTIFACT_CANCELED;
	else if (res->error != 0 || res->status == 0)
		result = API_ARTIFACT_FAILED;
	else if (res->status == 200 || res->status == 201)
		result = API_ARTIFACT_OK;
	else if (res->status == 401)
		result = API_ARTIFACT_UNAUTHORIZED;
	else if (res->status == 403)
		result = API_ARTIFACT_FORBIDDEN;
	else if (res->status == 404)
		result = API_ARTIFACT_NOT_FOUND;
	else if (res->status == 413)
		result = API_ARTIFACT_TOO_LARGE;
	else
		result = API_ARTIFACT_FAILED;
	call->cb.artifact(result, ans, res->file_len, call->data);
}

static void
deliver(struct api_call *call, const struct http_result *res)
{
	struct api_answer ans;
	char *msg;

	msg = call->early ? xstrdup(res->error_text) : answer_message(res);
	ans.status = res->status;
	ans.message = msg;
	ans.request_id = res->request_id;
	ans.workhorse_204 = false;
	ans.long_polling = false;
	switch (call->kind) {
	case CALL_TOKEN:
		deliver_token(call, res, &ans);
		break;
	case CALL_DONE:
		call->cb.done(call->early ? call->early_result :
		    simple_result(res, 204), &ans, call->data);
		break;
	case CALL_DISCOVERY:
		deliver_discovery(call, res, &ans);
		break;
	case CALL_JOB_REQUEST:
		deliver_job_request(call, res, &ans);
		break;
	case CALL_UPDATE:
		deliver_update(call, res, &ans);
		break;
	case CALL_PATCH:
		deliver_patch(call, res, &ans);
		break;
	case CALL_ARTIFACT:
		deliver_artifact(call, res, &ans);
		break;
	}
	free(msg);
}

/* ---- endpoints ---- */

static void
json_body(struct api_call *call, char *json)
{
	/* Every JSON body of ours carries a token: never sent on to another origin. */
	if (call->req != NULL)
		http_req_secret_body(call->req, "application/json", json, strlen(json));
	explicit_bzero(json, strlen(json));
	free(json);
}

struct api_call *
api_register(struct api *a, const struct api_creds *creds,
    const struct api_register_params *p, api_token_cb *cb, void *data)
{
	struct api_call *call = call_prepare(a, CALL_TOKEN, creds, "POST", "runners", data);

	call->cb.token = cb;
	if (call->req != NULL) {
		http_req_flags(call->req, HTTP_ACCEPT_JSON);
		http_req_secret_header(call->req, "Runner-Token", creds->token);
		json_body(call, json_register_request(p, creds->token));
	}
	return call_send(call);
}

struct api_call *
api_verify(struct api *a, const struct api_creds *creds, const struct api_info *info,
    const char *system_id, api_token_cb *cb, void *data)
{
	struct api_call *call = call_prepare(a, CALL_TOKEN, creds, "POST",
	    "runners/verify", data);

	call->cb.token = cb;
	if (call->req != NULL) {
		http_req_flags(call->req, HTTP_ACCEPT_JSON);
		http_req_secret_header(call->req, "Runner-Token", creds->token);
		json_body(call, json_verify_request(info, creds->token, system_id));
	}
	return call_send(call);
}

struct api_call *
api_unregister(struct api *a, const struct api_creds *creds, api_done_cb *cb, void *data)
{
	struct api_call *call = call_prepare(a, CALL_DONE, creds, "DELETE", "runners", data);

	call->cb.done = cb;
	if (call->req != NULL) {
		http_req_secret_header(call->req, "Runner-Token", creds->token);
		json_body(call, json_token_request(creds->token, NULL));
	}
	return call_send(call);
}

struct api_call *
api_unregister_manager(struct api *a, const struct api_creds *creds,
    const char *system_id, api_done_cb *cb, void *data)
{
	struct api_call *call = call_prepare(a, CALL_DONE, creds, "DELETE",
	    "runners/managers", data);

	call->cb.done = cb;
	if (call->req != NULL) {
		http_req_secret_header(call->req, "Runner-Token", creds->token);
		json_body(call, json_token_request(creds->token, system_id));
	}
	return call_send(call);
}

struct api_call *
api_reset_token(struct api *a, const struct api_creds *creds, api_token_cb *cb, void *data)
{
	struct api_call *call = call_prepare(a, CALL_TOKEN, creds, "POST",
	    "runners/reset_authentication_token", data);

	call->cb.token = cb;
	measure(call, "reset_token", creds, NULL);
	/* The body token only: this endpoint takes no token header (1.3). */
	if (call->req != NULL) {
		http_req_flags(call->req, HTTP_ACCEPT_JSON);
		json_body(call, json_token_request(creds->token, NULL));
	}
	return call_send(call);
}

struct api_call *
api_reset_token_pat(struct api *a, const struct api_creds *creds, int64_t runner_id,
    const char *pat, api_token_cb *cb, void *data)
{
	char path[64];
	struct api_call *call;

	snprintf(path, sizeof(path), "runners/%" PRId64 "/reset_authentication_token",
	    runner_id);
	call = call_prepare(a, CALL_TOKEN, creds, "POST", path, data);
	call->cb.token = cb;
	measure(call, "reset_token", creds, NULL);
	/* The one request that carries a personal access token, and only it. */
	if (call->req != NULL) {
		http_req_flags(call->req, HTTP_ACCEPT_JSON);
		http_req_secret_header(call->req, "Private-Token", pat);
	}
	return call_send(call);
}

struct api_call *
api_discovery(struct api *a, const struct api_creds *creds, api_discovery_cb *cb,
    void *data)
{
	struct api_call *call;
	struct client_state *c = client_for(a, creds);

	if (c->discovered && clock_mono_ms() - c->discovered_at < DISCOVERY_TTL_MS) {
		/* A cached answer is still delivered on the loop, like any other. */
		call = call_new(a, CALL_DISCOVERY, data);
		call->cb.discovery = cb;
		call->early = true;
		call->early_result = c->discovery_result;
		call->early_message = xstrdup(c->router_url != NULL ? c->router_url : "");
		return call_send(call);
	}
	call = call_prepare(a, CALL_DISCOVERY, creds, "GET", "runners/router/discovery", data);
	call->cb.discovery = cb;
	call->client = c;
	measure(call, "discovery", creds, NULL);
	if (call->req != NULL) {
		http_req_flags(call->req, HTTP_ACCEPT_JSON);
		http_req_secret_header(call->req, "Runner-Token", creds->token);
	}
	return call_send(call);
}

struct api_call *
api_request_job(struct api *a, const struct api_creds *creds, const struct api_info *info,
    const char *system_id, api_request_cb *cb, void *data)
{
	struct api_call *call = call_prepare(a, CALL_JOB_REQUEST, creds, "POST",
	    "jobs/request", data);

	call->cb.request = cb;
	call->client = client_for(a, creds);
	measure(call, "request_job", creds, system_id);
	if (call->req != NULL) {
		http_req_flags(call->req, HTTP_ACCEPT_JSON | HTTP_LONG_POLL);
		http_req_attempt_timeout(call->req, JOB_REQUEST_ATTEMPT_MS);
		http_req_response_cap(call->req, JOB_PAYLOAD_CAP);
		http_req_secret_header(call->req, "Runner-Token", creds->token);
		json_body(call, json_job_request(info, creds->token, system_id,
		    call->client->last_update));
	}
	return call_send(call);
}

struct api_call *
api_update_job(struct api *a, const struct api_job_ref *job, const struct api_info *info,
    const struct api_job_update *u, api_update_cb *cb, void *data)
{
	char path[64];
	struct api_call *call;

	snprintf(path, sizeof(path), "jobs/%" PRId64, job->id);
	call = call_prepare(a, CALL_UPDATE, job->creds, "PUT", path, data);
	call->cb.update = cb;
	measure(call, "update_job", job->creds, NULL);
	if (call->req != NULL) {
		http_req_secret_header(call->req, "Job-Token", job->token);
		json_body(call, json_job_update(info, job->token, u));
	}
	return call_send(call);
}

/* A PATCH of the log's bytes start .. start+len-1, all but its body. */
static struct api_call *
patch_prepare(struct api *a, const struct api_job_ref *job, uint64_t start, size_t len,
    bool debug_trace, api_patch_cb *cb, void *data)
{
	char path[96], range[64];
	struct api_call *call;

	snprintf(path, sizeof(path), "jobs/%" PRId64 "/trace?debug_trace=%s", job->id,
	    debug_trace ? "true" : "false");
	call = call_prepare(a, CALL_PATCH, job->creds, "PATCH", path, data);
	call->cb.patch = cb;
	call->patch_end = start + len;
	if (len == 0 || len > TRACE_PATCH_MAX) {
		/* A caller bug: say so through the usual channel, send nothing. */
		http_req_free(call->req);
		call->req = NULL;
		call->early = true;
		call->early_result = API_CLIENT_ERROR;
		free(call->early_message);
		call->early_message = xasprintf("a log patch must hold 1 to %d bytes, not %zu",
		    TRACE_PATCH_MAX, len);
		return call;
	}
	if (call->req != NULL) {
		snprintf(range, sizeof(range), "%" PRIu64 "-%" PRIu64, start, start + len - 1);
		http_req_secret_header(call->req, "Job-Token", job->token);
		http_req_header(call->req, "Content-Range", range);
	}
	measure(call, "patch_trace", job->creds, NULL);
	return call;
}

struct api_call *
api_patch_trace(struct api *a, const struct api_job_ref *job, int fd, uint64_t start,
    size_t len, bool debug_trace, api_patch_cb *cb, void *data)
{
	struct api_call *call = patch_prepare(a, job, start, len, debug_trace, cb, data);

	if (call->req != NULL)
		http_req_body_fd(call->req, "text/plain", fd, (off_t)start, (off_t)len);
	return call_send(call);
}

struct api_call *
api_patch_trace_bytes(struct api *a, const struct api_job_ref *job, uint64_t start,
    const char *bytes, size_t len, bool debug_trace, api_patch_cb *cb, void *data)
{
	struct api_call *call = patch_prepare(a, job, start, len, debug_trace, cb, data);

	if (call->req != NULL)
		http_req_body(call->req, "text/plain", bytes, len);
	return call_send(call);
}

/* ---- artifacts (protocol.md 7.1, 7.2) ---- */

static void
query_param(struct buf *b, const char *name, const char *value)
{
	const unsigned char *p;

	if (value == NULL || *value == '\0')
		return;
	buf_printf(b, "%c%s=", strchr(b->ptr, '?') != NULL ? '&' : '?', name);
	/* application/x-www-form-urlencoded, as Go's url.Values.Encode. */
	for (p = (const unsigned char *)value; *p != '\0'; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-_.~", *p) != NULL)
			buf_putc(b, (char)*p);
		else if (*p == ' ')
			buf_putc(b, '+');
		else
			buf_printf(b, "%%%02X", *p);
	}
}

struct api_call *
api_upload_artifacts(struct api *a, const struct api_job_ref *job,
    const struct api_artifact_upload *u, api_artifact_cb *cb, void *data)
{
	struct api_call *call;
	struct buf path;

	buf_init(&path, BUF_UNLIMITED);
	buf_printf(&path, "jobs/%" PRId64 "/artifacts", job->id);
	/* Alphabetical, each only when set, as gitlab-runner sends them. */
	query_param(&path, "artifact_format", u->format);
	query_param(&path, "artifact_type", u->type);
	query_param(&path, "expire_in", u->expire_in);
	call = call_prepare(a, CALL_ARTIFACT, job->creds, "POST", path.ptr, data);
	buf_release(&path);
	call->cb.artifact = cb;
	if (call->req != NULL) {
		http_req_secret_header(call->req, "Job-Token", job->token);
		http_req_body_fd(call->req, u->content_type, u->fd, 0, u->len);
		http_req_response_cap(call->req, 64 * 1024);
		/* 503 is worth six tries (gitlab-runner's helper); 403 and 413 one. */
		http_req_max_attempts(call->req, ARTIFACT_UPLOAD_ATTEMPTS);
		if (u->timeout_ms > 0) {
			http_req_deadline(call->req, u->timeout_ms);
			http_req_attempt_timeout(call->req, u->timeout_ms);
		}
	}
	return call_send(call);
}

static struct api_call *
download_setup(struct api_call *call, int fd, uint64_t timeout_ms, api_artifact_cb *cb)
{
	call->cb.artifact = cb;
	if (call->req != NULL) {
		http_req_response_fd(call->req, fd);
		http_req_response_cap(call->req, 64 * 1024);
		http_req_max_attempts(call->req, ARTIFACT_DOWNLOAD_ATTEMPTS);
		if (timeout_ms > 0) {
			http_req_deadline(call->req, timeout_ms);
			http_req_attempt_timeout(call->req, timeout_ms);
		}
	}
	return call_send(call);
}

struct api_call *
api_download_artifacts(struct api *a, const struct api_job_ref *job, bool direct,
    int fd, uint64_t timeout_ms, api_artifact_cb *cb, void *data)
{
	char path[96];
	struct api_call *call;

	snprintf(path, sizeof(path), "jobs/%" PRId64 "/artifacts%s", job->id,
	    direct ? "?direct_download=true" : "");
	call = call_prepare(a, CALL_ARTIFACT, job->creds, "GET", path, data);
	if (call->req != NULL) {
		http_req_secret_header(call->req, "Job-Token", job->token);
		/* Object storage, even on GitLab's origin: a presigned URL, no token of ours. */
		http_req_flags(call->req, HTTP_REDIRECT_NO_TOKENS);
	}
	return download_setup(call, fd, timeout_ms, cb);
}

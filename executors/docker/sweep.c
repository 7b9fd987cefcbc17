/*
 * What a killed daemon left in the engine, removed: every container,
 * volume and network labelled with this runner's system ID whose job is
 * not running here, and the objects a journal names.  Cache volumes
 * (reusable=true) and the helper bundle are kept by design.  Run at start
 * (before any job) and periodically by the daemon; a removal that fails
 * is tried again at the next sweep.
 *
 * Only our label is trusted: a gitlab-runner sharing the engine labels its
 * objects com.gitlab.gitlab-runner.managed too, but never with our system
 * ID, so they are never touched.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "executors/docker/djob.h"
#include "lib/xmalloc.h"

enum sweep_step {
	SWEEP_PING,
	SWEEP_LIST_CONTAINERS,
	SWEEP_LIST_VOLUMES,
	SWEEP_LIST_NETWORKS,
	SWEEP_REMOVING,
	SWEEP_DONE,
};

struct exec_sweep {
	struct engine		*engine;
	struct engine_call	*call;		/* in flight, or NULL */
	bool			 canceled;
	enum sweep_step		 at;
	char			*system_id;
	int64_t			*keep;
	size_t			 n_keep;
	int64_t			 created_before;	/* unix seconds; 0: any age */
	struct strv		 containers, volumes, networks;	/* to remove, in that order */
	size_t			 ci, vi, ni;
	unsigned		 removed;
	char			*first_error;
	exec_sweep_cb		*cb;
	void			*arg;
};

static void	sweep_next(struct exec_sweep *);

static bool
kept(const struct exec_sweep *w, cJSON *labels)
{
	cJSON *job = cJSON_GetObjectItem(labels, RUNNER_LABEL_JOB_ID);
	int64_t id;
	size_t i;

	if (!cJSON_IsString(job))
		return false;
	id = strtoll(job->valuestring, NULL, 10);
	for (i = 0; i < w->n_keep; i++)
		if (w->keep[i] == id)
			return true;
	return false;
}

static bool
reusable(cJSON *labels)
{
	cJSON *r = cJSON_GetObjectItem(labels, DOCKER_LABEL_PREFIX "reusable");

	return cJSON_IsString(r) && strcmp(r->valuestring, "true") == 0;
}

/* docker's RFC 3339 times ("2026-12-03T14:00:00.123456789Z", "+01:00"); -1 if not one. */
static int64_t
rfc3339_seconds(const char *s)
{
	struct tm tm;
	const char *p;
	int64_t t;
	int oh, om;

	memset(&tm, 0, sizeof(tm));
	if ((p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)) == NULL)
		return -1;
	t = (int64_t)timegm(&tm);
	if (*p == '.')
		p += 1 + strspn(p + 1, "0123456789");
	if (*p == 'Z' && p[1] == '\0')
		return t;
	if ((*p == '+' || *p == '-') && sscanf(p + 1, "%2d:%2d", &oh, &om) == 2)
		return *p == '+' ? t - oh * 3600 - om * 60 : t + oh * 3600 + om * 60;
	return -1;
}

/*
 * Made after the sweep began (or of an age we cannot tell): a job that
 * started meanwhile may own it, so a periodic sweep leaves it for the next.
 */
static bool
too_new(const struct exec_sweep *w, cJSON *o)
{
	cJSON *c;
	int64_t t;

	if (w->created_before == 0)
		return false;
	c = cJSON_GetObjectItem(o, "Created");
	if (c == NULL)
		c = cJSON_GetObjectItem(o, "CreatedAt");
	if (cJSON_IsNumber(c))
		t = (int64_t)c->valuedouble;
	else if (cJSON_IsString(c))
		t = rfc3339_seconds(c->valuestring);
	else
		t = -1;
	return t < 0 || t >= w->created_before;
}

static void
add_unique(struct strv *sv, const char *s)
{
	size_t i;

	for (i = 0; i < sv->n; i++)
		if (strcmp(sv->v[i], s) == 0)
			return;
	strv_push(sv, s);
}

static void
collect(struct exec_sweep *w, const char *body, const char *id_key, struct strv *into)
{
	cJSON *root = cJSON_Parse(body), *list, *o;

	if (root == NULL)
		return;
	/* /volumes answers {"Volumes": [...]}; the others a bare array. */
	list = cJSON_IsArray(root) ? root : cJSON_GetObjectItem(root, "Volumes");
	cJSON_ArrayForEach(o, list) {
		cJSON *labels = cJSON_GetObjectItem(o, "Labels");
		cJSON *id = cJSON_GetObjectItem(o, id_key);

		if (!cJSON_IsString(id) || kept(w, labels) || reusable(labels) || too_new(w, o))
			continue;
		add_unique(into, id->valuestring);
	}
	cJSON_Delete(root);
}

static void
sweep_end(struct exec_sweep *w)
{
	exec_sweep_cb *cb = w->cb;
	void *arg = w->arg;
	unsigned removed = w->removed;
	char *err = w->first_error;
	int status = w->canceled ? -ECANCELED : err != NULL ? -EIO : 0;

	engine_close(w->engine);
	strv_release(&w->containers);
	strv_release(&w->volumes);
	strv_release(&w->networks);
	free(w->system_id);
	free(w->keep);
	free(w);
	cb(status, removed, err, arg);
	free(err);
}

/*
 * A list's answer: what it names is swept; a list that failed is said, or
 * what it would have named stays behind unnoticed.  The other lists go on.
 */
static void
listed(struct exec_sweep *w, const struct engine_result *res, const char *what,
    const char *key, struct strv *into)
{
	if (res->status == 200) {
		collect(w, res->body, key, into);
		return;
	}
	if (w->first_error == NULL)
		w->first_error = xasprintf("cannot list the %s of the Docker engine at %s: %s",
		    what, engine_address(w->engine), *res->message ? res->message : "no answer");
}

static void
on_call(const struct engine_result *res, void *arg)
{
	struct exec_sweep *w = arg;

	w->call = NULL;
	if (res->error == -ECANCELED) {
		w->canceled = true;
		if (w->first_error == NULL)
			w->first_error = xstrdup("canceled");
		w->at = SWEEP_DONE;
		sweep_end(w);
		return;
	}
	switch (w->at) {
	case SWEEP_PING:
		if (res->status != 200) {
			w->first_error = engine_unreachable(w->engine, res);
			sweep_end(w);
			return;
		}
		w->at = SWEEP_LIST_CONTAINERS;
		break;
	case SWEEP_LIST_CONTAINERS:
		listed(w, res, "containers", "Id", &w->containers);
		w->at = SWEEP_LIST_VOLUMES;
		break;
	case SWEEP_LIST_VOLUMES:
		listed(w, res, "volumes", "Name", &w->volumes);
		w->at = SWEEP_LIST_NETWORKS;
		break;
	case SWEEP_LIST_NETWORKS:
		listed(w, res, "networks", "Id", &w->networks);
		w->at = SWEEP_REMOVING;
		break;
	case SWEEP_REMOVING:
		if (res->status >= 200 && res->status < 300)
			w->removed++;
		else if (res->status != 404 && w->first_error == NULL)
			w->first_error = xasprintf("cannot remove a leftover: %s", res->message);
		break;
	case SWEEP_DONE:
		break;
	}
	sweep_next(w);
}

static void
call(struct exec_sweep *w, const char *method, const char *path)
{
	if ((w->call = engine_call(w->engine, method, path, NULL, on_call, w)) == NULL) {
		if (w->first_error == NULL)
			w->first_error = xstrdup("cannot call the Docker engine");
		sweep_end(w);
	}
}

static void
list(struct exec_sweep *w, const char *what)
{
	char *filter, *esc, *path;

	filter = xasprintf("{\"label\":[\"%s=%s\"]}", RUNNER_LABEL_SYSTEM_ID, w->system_id);
	esc = engine_query_escape(filter);
	path = xasprintf("/%s%sfilters=%s", what, strcmp(what, "containers/json") == 0 ?
	    "?all=1&" : "?", esc);
	call(w, "GET", path);
	free(path);
	free(esc);
	free(filter);
}

static void
sweep_next(struct exec_sweep *w)
{
	char *path;

	switch (w->at) {
	case SWEEP_PING:
		return;
	case SWEEP_LIST_CONTAINERS:
		list(w, "containers/json");
		return;
	case SWEEP_LIST_VOLUMES:
		list(w, "volumes");
		return;
	case SWEEP_LIST_NETWORKS:
		list(w, "networks");
		return;
	case SWEEP_REMOVING:
		if (w->ci < w->containers.n) {
			path = xasprintf("/containers/%s?force=1&v=1", w->containers.v[w->ci++]);
			call(w, "DELETE", path);
		} else if (w->vi < w->volumes.n) {
			path = xasprintf("/volumes/%s?force=1", w->volumes.v[w->vi++]);
			call(w, "DELETE", path);
		} else if (w->ni < w->networks.n) {
			path = xasprintf("/networks/%s", w->networks.v[w->ni++]);
			call(w, "DELETE", path);
		} else {
			w->at = SWEEP_DONE;
			sweep_end(w);
			return;
		}
		free(path);
		return;
	case SWEEP_DONE:
		return;
	}
}

struct exec_sweep *
docker_sweep(uv_loop_t *loop, const void *settings, const char *system_id,
    const int64_t *keep, size_t n_keep, int64_t created_before, const struct strv *recorded,
    exec_sweep_cb *cb, void *arg, char **cause)
{
	const struct docker_settings *s = settings;
	struct exec_sweep *w;
	size_t i;

	w = xcalloc(1, sizeof(*w));
	w->engine = engine_new(&(struct engine_config){
		.loop = loop,
		.host = s != NULL ? s->host : NULL,
		.tls_verify = s != NULL && s->tls_verify,
		.tls_cert_path = s != NULL ? s->tls_cert_path : NULL,
	}, cause);
	if (w->engine == NULL) {
		free(w);
		return NULL;
	}
	w->system_id = xstrdup(system_id);
	w->n_keep = n_keep;
	w->created_before = created_before;
	w->keep = xcalloc(n_keep ? n_keep : 1, sizeof(*w->keep));
	if (n_keep > 0)
		memcpy(w->keep, keep, n_keep * sizeof(*keep));
	w->cb = cb;
	w->arg = arg;
	/* What a journal names goes whatever its labels say: it was ours. */
	for (i = 0; recorded != NULL && i < recorded->n; i++) {
		const char *r = recorded->v[i];

		if (strncmp(r, "container:", 10) == 0)
			add_unique(&w->containers, r + 10);
		else if (strncmp(r, "volume:", 7) == 0)
			add_unique(&w->volumes, r + 7);
		else if (strncmp(r, "network:", 8) == 0)
			add_unique(&w->networks, r + 8);
	}
	w->at = SWEEP_PING;
	if ((w->call = engine_connect(w->engine, on_call, w)) == NULL) {
		*cause = xasprintf("cannot reach the Docker engine at %s", engine_address(w->engine));
		engine_close(w->engine);
		strv_release(&w->containers);
		strv_release(&w->volumes);
		strv_release(&w->networks);
		free(w->system_id);
		free(w->keep);
		free(w);
		return NULL;
	}
	return w;
}

void
docker_sweep_cancel(struct exec_sweep *w)
{
	if (w->call != NULL)
		engine_call_cancel(w->call);	/* on_call ends it */
}

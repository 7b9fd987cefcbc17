/*
 * Images, as gitlab-runner's pull manager (internal/pull/manager.go): the
 * policies in order as fallbacks; GET /images/{name}/json tells whether
 * it is here; `never` uses it or fails, `if-not-present` uses it if it is
 * there, `always` pulls.  A pull streams JSON lines after a 200 and can
 * still fail in them ({"errorDetail": ...}): the stream is read to its
 * end, and the last error names image, registry and cause in the job's
 * log.  What containers are made from is the image's ID, so a tag moved
 * mid-job changes nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "executors/docker/djob.h"
#include "lib/buf.h"
#include "lib/xmalloc.h"

struct pull {
	struct exec_job		*j;
	struct dimage		*img;
	bool			 is_service;
	djob_step_cb		*step;
	enum pull_policy	 policies[16];
	size_t			 n_policies, at;
	bool			 pulled;	/* the inspect after a pull */
	struct engine_lines	 lines;
	char			*stream_error;	/* the last errorDetail of the stream */
	char			*last_error;	/* the last policy's failure */
};

static void	pull_try(struct pull *);
static void	inspect(struct pull *);

static void
pull_end(struct pull *p, int status, const char *reason, const char *cause)
{
	struct exec_job *j = p->j;
	djob_step_cb *step = p->step;
	/* cause may be the last error, which must outlive p until step has it. */
	char *last = p->last_error;

	free(p->lines.buf);
	free(p->stream_error);
	free(p);
	step(j, status, reason, cause);
	free(last);
}

/* The registry part of an image name, for messages: "docker.io" for bare names. */
static char *
registry_of(const char *name)
{
	const char *slash = strchr(name, '/');
	size_t n;

	if (slash == NULL)
		return xstrdup("docker.io");
	n = (size_t)(slash - name);
	if (memchr(name, '.', n) == NULL && memchr(name, ':', n) == NULL &&
	    !(n == 9 && strncmp(name, "localhost", 9) == 0))
		return xstrdup("docker.io");
	{
		char *r = xmalloc(n + 1);

		memcpy(r, name, n);
		r[n] = '\0';
		return r;
	}
}

static void
on_line(const char *s, size_t n, void *arg)
{
	struct pull *p = arg;
	cJSON *o = cJSON_ParseWithLength(s, n), *e;

	if (o == NULL)
		return;
	e = cJSON_GetObjectItem(o, "errorDetail");
	if (cJSON_IsObject(e) && cJSON_IsString(cJSON_GetObjectItem(e, "message"))) {
		free(p->stream_error);
		p->stream_error = xstrdup(cJSON_GetObjectItem(e, "message")->valuestring);
	} else if (cJSON_IsString(cJSON_GetObjectItem(o, "error"))) {
		free(p->stream_error);
		p->stream_error = xstrdup(cJSON_GetObjectItem(o, "error")->valuestring);
	}
	cJSON_Delete(o);
}

static void
on_data(const char *data, size_t len, void *arg)
{
	struct pull *p = arg;

	engine_lines_feed(&p->lines, data, len, on_line, p);
}

/* This policy failed: the next one, or the end with the last failure. */
static void
next_policy(struct pull *p, char *why)
{
	free(p->last_error);
	p->last_error = why;
	p->at++;
	if (p->at < p->n_policies) {
		djob_say(p->j, "\033[0;33mWARNING: Failed to pull image with policy \"%s\": %s",
		    pull_policy_name(p->policies[p->at - 1]), why);
		pull_try(p);
		return;
	}
	pull_end(p, -EIO, "image_pull_failure", p->last_error);
}

static void
on_pulled(const struct engine_result *res, void *arg)
{
	struct pull *p = arg;
	char *registry, *why;

	p->j->call = NULL;
	engine_lines_end(&p->lines, on_line, p);
	if (res->error == -ECANCELED) {
		pull_end(p, -ECANCELED, "runner_system_failure", "canceled");
		return;
	}
	if (res->status == 200 && p->stream_error == NULL) {
		p->pulled = true;
		inspect(p);
		return;
	}
	registry = registry_of(p->img->name);
	why = xasprintf("failed to pull image \"%s\" from %s: %s", p->img->name, registry,
	    p->stream_error != NULL ? p->stream_error :
	    *res->message ? res->message : "no answer from the Docker engine");
	free(registry);
	free(p->stream_error);
	p->stream_error = NULL;
	djob_say(p->j, "\033[31;1mERROR: %s", why);
	next_policy(p, why);
}

static void
pull(struct pull *p)
{
	char *repo, *tag, *erepo, *etag, *path, *eplat = NULL;

	djob_say(p->j, "Pulling docker image %s ...", p->img->name);
	if (p->img->registry_auth != NULL && p->img->auth_source != NULL)
		djob_say(p->j, "Authenticating with credentials from %s", p->img->auth_source);
	docker_image_split(p->img->name, &repo, &tag);
	erepo = engine_query_escape(repo);
	etag = engine_query_escape(tag);
	if (p->img->platform != NULL && *p->img->platform)
		eplat = engine_query_escape(p->img->platform);
	path = xasprintf("/images/create?fromImage=%s&tag=%s%s%s", erepo, etag,
	    eplat != NULL ? "&platform=" : "", eplat != NULL ? eplat : "");
	free(repo);
	free(tag);
	free(erepo);
	free(etag);
	free(eplat);
	p->j->call = engine_call(p->j->engine, "POST", path, &(struct engine_call_opts){
		.registry_auth = p->img->registry_auth,
		.on_data = on_data,
	}, on_pulled, p);
	free(path);
	if (p->j->call == NULL)
		pull_end(p, -EIO, "runner_system_failure", "cannot call the Docker engine");
}

static void
on_inspected(const struct engine_result *res, void *arg)
{
	struct pull *p = arg;
	enum pull_policy pol = p->policies[p->at];
	cJSON *o, *id, *digests;
	char *why;

	p->j->call = NULL;
	if (res->error == -ECANCELED) {
		pull_end(p, -ECANCELED, "runner_system_failure", "canceled");
		return;
	}
	if (res->status == 200 && (o = cJSON_Parse(res->body)) != NULL) {
		if (!p->pulled && pol == PULL_ALWAYS) {
			cJSON_Delete(o);
			pull(p);
			return;
		}
		id = cJSON_GetObjectItem(o, "Id");
		if (cJSON_IsString(id)) {
			free(p->img->id);
			p->img->id = xstrdup(id->valuestring);
			digests = cJSON_GetObjectItem(o, "RepoDigests");
			if (cJSON_IsArray(digests) && cJSON_GetArraySize(digests) > 0 &&
			    cJSON_IsString(cJSON_GetArrayItem(digests, 0)))
				djob_say(p->j, "Using docker image %s for %s with digest %s ...",
				    p->img->id, p->img->name,
				    cJSON_GetArrayItem(digests, 0)->valuestring);
			else
				djob_say(p->j, "Using docker image %s for %s ...", p->img->id,
				    p->img->name);
			cJSON_Delete(o);
			pull_end(p, 0, NULL, NULL);
			return;
		}
		cJSON_Delete(o);
	}
	if (res->status == 404 && !p->pulled) {
		if (pol == PULL_NEVER) {
			why = xasprintf("image \"%s\" is not on the Docker engine and the pull "
			    "policy is never", p->img->name);
			next_policy(p, why);
			return;
		}
		pull(p);
		return;
	}
	why = xasprintf("cannot inspect image \"%s\": %s", p->img->name,
	    *res->message ? res->message : "unexpected answer");
	next_policy(p, why);
}

static void
inspect(struct pull *p)
{
	char *path;

	/* The name's '/' and ':' are the path's own (/images/a/b:1/json). */
	path = xasprintf("/images/%s/json", p->img->name);
	p->j->call = engine_call(p->j->engine, "GET", path, NULL, on_inspected, p);
	free(path);
	if (p->j->call == NULL)
		pull_end(p, -EIO, "runner_system_failure", "cannot call the Docker engine");
}

static void
pull_try(struct pull *p)
{
	p->pulled = false;
	inspect(p);
}

void
djob_pull(struct exec_job *j, struct dimage *img, bool is_service, djob_step_cb *step)
{
	struct pull *p = xcalloc(1, sizeof(*p));
	const struct strv *allowed = is_service ? &j->s.allowed_services : &j->s.allowed_images;
	char *error = NULL, *why;
	size_t i;

	p->j = j;
	p->img = img;
	p->is_service = is_service;
	p->step = step;
	if (!img->from_config && !docker_allowed(allowed, img->name)) {
		struct buf b;

		buf_init(&b, BUF_UNLIMITED);
		for (i = 0; i < allowed->n; i++)
			buf_printf(&b, "%s%s", i ? ", " : "", allowed->v[i]);
		why = xasprintf("the \"%s\" image is not present on list of allowed %s: [%s]",
		    img->name, is_service ? "services" : "images", b.ptr);
		buf_release(&b);
		djob_say(j, "\033[31;1mERROR: %s", why);
		pull_end(p, -EPERM, "runner_configuration_error", why);
		free(why);
		return;
	}
	if (img == &j->helper_image) {
		/* The runner's own image: not the job's to choose, nor allowed_*'s. */
		p->policies[0] = PULL_IF_NOT_PRESENT;
		p->n_policies = 1;
	} else if (docker_pull_policies(&img->pull_policy, &j->s, p->policies, &p->n_policies,
	    &error) != 0) {
		djob_say(j, "\033[31;1mERROR: %s", error);
		pull_end(p, -EINVAL, "runner_configuration_error", error);
		free(error);
		return;
	}
	if (img != &j->helper_image) {
		struct buf b;

		buf_init(&b, BUF_UNLIMITED);
		for (i = 0; i < p->n_policies; i++)
			buf_printf(&b, "%s%s", i ? " " : "", pull_policy_name(p->policies[i]));
		djob_say(j, "Using effective pull policy of [%s] for container %s",
		    b.ptr, img->name);
		buf_release(&b);
	}
	pull_try(p);
}

/*
 * What every part of a docker job does with the job: say a line in its
 * log, record an object in its journal before making it, label, create
 * and remove its containers, and free what it copied.  docker.c (the
 * job's life), stage.c, pull.c, services.c and sweep.c build on this file
 * and not on one another's insides.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "executors/docker/djob.h"
#include "lib/xmalloc.h"

void
djob_say(struct exec_job *j, const char *fmt, ...)
{
	va_list ap;
	char *line;

	va_start(ap, fmt);
	if (vasprintf(&line, fmt, ap) < 0)
		line = NULL;
	va_end(ap);
	if (line == NULL)
		return;
	if (j->say != NULL)
		j->say(line, j->arg);
	free(line);
}

int
djob_record(struct exec_job *j, const char *kind, const char *name)
{
	if (j->record == NULL)
		return 0;
	return j->record(kind, name, j->arg);
}

void
djob_labels(struct exec_job *j, struct strv *out, enum ctr_type t, const struct strv *extra)
{
	docker_labels(out, &j->label_in, (int)t, extra);
}

/* ---- containers ---- */

char *
djob_ctr_body(struct exec_job *j, enum ctr_type t, char **error)
{
	struct strv cmd = { 0 }, labels = { 0 }, entry = { 0 };
	const struct strv *entrypoint = NULL;
	const char *user = NULL;
	char *body, *script;
	bool privileged;

	docker_detect_shell_cmd(&cmd, false);
	djob_labels(j, &labels, t, NULL);
	if (t == CTR_BUILD) {
		user = j->s.user != NULL && *j->s.user ? j->s.user : j->build_image.user;
		if (user != NULL && *user && j->s.allowed_users.n > 0 &&
		    !docker_allowed(&j->s.allowed_users, user)) {
			*error = xasprintf("user \"%s\" is not an allowed user: [allowed_users]",
			    user);
			strv_release(&cmd);
			strv_release(&labels);
			return NULL;
		}
		if (j->build_image.has_entrypoint && !j->s.disable_entrypoint_overwrite)
			entrypoint = &j->build_image.entrypoint;
		privileged = j->s.privileged &&
		    docker_allowed(&j->s.allowed_privileged_images, j->build_image.name);
	} else {
		/*
		 * gitlab-runner-build's umask 0000: what the helper checks out a
		 * non-root build image can still write.
		 */
		if (!j->disable_umask && cmd.n == 3) {
			script = xasprintf("umask 0000; %s", cmd.v[2]);
			free(cmd.v[2]);
			cmd.v[2] = script;
		}
		strv_push(&entry, "");
		entrypoint = &entry;
		privileged = j->s.privileged && j->s.allowed_privileged_images.n == 0;
	}
	body = docker_create_body(&(struct ctr_spec){
		.type = t,
		.image = t == CTR_BUILD ? j->build_image.id : j->helper_image.id,
		.hostname = j->s.hostname != NULL && *j->s.hostname ? j->s.hostname :
		    j->project_name,
		.user = user != NULL && *user ? user : NULL,
		.cmd = &cmd,
		.entrypoint = entrypoint,
		.env = &j->env,
		.labels = &labels,
		.binds = &j->binds,
		.extra_hosts = &j->extra_hosts,
		.network_mode = j->network_mode,
		.stdin_stage = true,
		/* FF_USE_INIT_WITH_DOCKER_EXECUTOR: the build container's (createHostConfig). */
		.init = t == CTR_BUILD && j->use_init,
		.privileged = privileged,
	}, &j->s, engine_api_version(j->engine), error);
	strv_release(&cmd);
	strv_release(&labels);
	strv_release(&entry);
	return body;
}

struct create_ctx {
	struct exec_job	*j;
	struct dctr	*c;
	djob_step_cb	*step;
};

static void
on_create(const struct engine_result *res, void *arg)
{
	struct create_ctx *x = arg;
	struct exec_job *j = x->j;
	djob_step_cb *step = x->step;
	cJSON *o, *id;
	char *cause = NULL;

	j->call = NULL;
	if (res->status == 201 && (o = cJSON_Parse(res->body)) != NULL) {
		id = cJSON_GetObjectItem(o, "Id");
		if (cJSON_IsString(id))
			x->c->id = xstrdup(id->valuestring);
		cJSON_Delete(o);
	}
	if (x->c->id == NULL)
		cause = xasprintf("cannot create container %s: %s", x->c->name,
		    res->error == -ECANCELED ? "canceled" :
		    *res->message ? res->message : "unexpected answer");
	free(x);
	/* A 400 is the engine refusing what config.toml asked for. */
	step(j, cause != NULL ? (res->error ? res->error : -EIO) : 0,
	    res->status == 400 ? "runner_configuration_error" : "runner_system_failure", cause);
	free(cause);
}

void
djob_create(struct exec_job *j, struct dctr *c, const char *body, djob_step_cb *step)
{
	struct create_ctx *x;
	char *path, *cause;

	if (djob_record(j, "container", c->name) != 0) {
		cause = xasprintf("cannot record container %s in the journal", c->name);
		step(j, -EIO, "runner_system_failure", cause);
		free(cause);
		return;
	}
	x = xcalloc(1, sizeof(*x));
	x->j = j;
	x->c = c;
	x->step = step;
	free(c->id);
	c->id = NULL;
	c->dirty = false;
	path = xasprintf("/containers/create?name=%s", c->name);
	j->call = engine_call(j->engine, "POST", path, &(struct engine_call_opts){ .json = body },
	    on_create, x);
	free(path);
	if (j->call == NULL) {
		free(x);
		step(j, -EIO, "runner_system_failure", "cannot call the Docker engine");
	}
}

static void
on_remove(const struct engine_result *res, void *arg)
{
	struct create_ctx *x = arg;
	struct exec_job *j = x->j;
	djob_step_cb *step = x->step;
	char *cause = NULL;
	int status = 0;

	j->call = NULL;
	if (res->status != 204 && res->status != 404 && res->status != 200) {
		status = -EIO;
		cause = xasprintf("cannot remove container %s: %s", x->c->name,
		    *res->message ? res->message : "no answer");
		djob_say(j, "\033[0;33mWARNING: %s; the sweep removes it later", cause);
	}
	/* Either way it is not the job's to use again. */
	free(x->c->id);
	x->c->id = NULL;
	free(x);
	step(j, status, "runner_system_failure", cause);
	free(cause);
}

void
djob_remove(struct exec_job *j, struct dctr *c, djob_step_cb *step)
{
	struct create_ctx *x = xcalloc(1, sizeof(*x));
	char *path;

	x->j = j;
	x->c = c;
	x->step = step;
	/* v=1: an image's anonymous VOLUMEs go with the container. */
	path = xasprintf("/containers/%s?force=1&v=%d", c->id, j->s.volume_keep ? 0 : 1);
	j->call = engine_call(j->engine, "DELETE", path, NULL, on_remove, x);
	free(path);
	if (j->call == NULL) {
		free(x);
		free(c->id);
		c->id = NULL;
		step(j, -EIO, "runner_system_failure", "cannot call the Docker engine");
	}
}

/* ---- releasing ---- */

void
dimage_release(struct dimage *img)
{
	free(img->name);
	strv_release(&img->entrypoint);
	strv_release(&img->command);
	strv_release(&img->pull_policy);
	free(img->user);
	free(img->platform);
	strv_release(&img->aliases);
	strv_release(&img->variables);
	if (img->registry_auth != NULL) {
		explicit_bzero(img->registry_auth, strlen(img->registry_auth));
		free(img->registry_auth);
	}
	free(img->auth_source);
	free(img->id);
	memset(img, 0, sizeof(*img));
}

void
dctr_release(struct dctr *c)
{
	free(c->name);
	free(c->id);
	c->name = c->id = NULL;
}

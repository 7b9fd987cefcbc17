/*
 * The docker executor: a job runs in two containers made once and started
 * again for every stage, as gitlab-runner's (docs/protocol.md 15): the
 * build container, from the job's image, for the user's steps and
 * after_script; the helper container, from helper_image with this binary
 * mounted read-only at /opt/runner, for git, caches and artifacts.  Both
 * share the job's volumes (/builds, the cache volumes) and see the job's
 * services by alias.
 *
 * This file is the job's life, one state at a time (enum djob_state):
 * connect, pull, the bundle volume, the network, the volumes, the
 * services, then ready for stages (stage.c); at the end every container,
 * temporary volume and network the job made is removed, also after a
 * failed or aborted prepare.  Each object is recorded through the spec's
 * record callback before it is created, so a crash leaves a journal that
 * names it and the next start removes it (sweep.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "executors/docker/auth.h"
#include "executors/docker/bundle.h"
#include "executors/docker/djob.h"
#include "lib/buf.h"
#include "lib/log.h"
#include "lib/mkdirs.h"
#include "lib/version.h"
#include "lib/xmalloc.h"

/* gitlab-runner's default; offline sites and our tests set helper_image. */
#define DEFAULT_HELPER_IMAGE \
	"registry.gitlab.com/gitlab-org/gitlab-runner/gitlab-runner-helper:x86_64-v19.4.0"

static const char *const state_names[] = {
	[DJOB_CONNECTING]	= "connecting",
	[DJOB_PULLING]		= "pulling",
	[DJOB_BUNDLE]		= "bundle",
	[DJOB_NETWORK]		= "network",
	[DJOB_VOLUMES]		= "volumes",
	[DJOB_SERVICES]		= "services",
	[DJOB_READY]		= "ready",
	[DJOB_FAILED]		= "failed",
	[DJOB_CLOSING]		= "closing",
	[DJOB_CLOSED]		= "closed",
};

static void	djob_enter(struct exec_job *, enum djob_state);
static void	prepare_failed(struct exec_job *, const char *, const char *);

/* ---- the spec, copied ---- */

static const char *
own(struct exec_job *j, const char *s)
{
	if (s == NULL)
		return NULL;
	strv_push(&j->own, s);
	return j->own.v[j->own.n - 1];
}

static char *
dup_or_null(const char *s)
{
	return s != NULL ? xstrdup(s) : NULL;
}

static void
copy_strv(struct strv *to, const struct strv *from)
{
	size_t i;

	for (i = 0; from != NULL && i < from->n; i++)
		strv_push(to, from->v[i]);
}

/* The credentials of the most specific registry path name is under, if any. */
static void
dimage_auth(struct dimage *img, const struct exec_job_spec *sp)
{
	const char **paths;
	ssize_t k;
	size_t i;

	if (img->name == NULL || sp->n_registry_auths == 0)
		return;
	paths = xcalloc(sp->n_registry_auths, sizeof(*paths));
	for (i = 0; i < sp->n_registry_auths; i++)
		paths[i] = sp->registry_auths[i].path;
	if ((k = docker_auth_match(paths, sp->n_registry_auths, img->name)) >= 0) {
		img->registry_auth = xstrdup(sp->registry_auths[k].value);
		img->auth_source = xstrdup(sp->registry_auths[k].source);
	}
	free(paths);
}

static void
dimage_copy(struct dimage *to, const struct exec_image *from, const struct exec_job_spec *sp)
{
	memset(to, 0, sizeof(*to));
	to->name = dup_or_null(from->name);
	to->has_entrypoint = from->entrypoint != NULL;
	copy_strv(&to->entrypoint, from->entrypoint);
	to->has_command = from->command != NULL && from->command->n > 0;
	copy_strv(&to->command, from->command);
	copy_strv(&to->pull_policy, from->pull_policy);
	to->user = dup_or_null(from->user);
	to->platform = dup_or_null(from->platform);
	copy_strv(&to->aliases, from->aliases);
	copy_strv(&to->variables, from->variables);
	to->from_config = from->from_config;
	dimage_auth(to, sp);
}

static void
copy_spec(struct exec_job *j, const struct exec_job_spec *sp)
{
	const struct docker_settings *s = sp->settings;
	size_t i;

	docker_settings_copy(&j->s, s);
	j->job_id = sp->job_id;
	j->label_in = (struct label_input){
		.job_id = sp->job_id,
		.job_url = own(j, sp->job_url != NULL ? sp->job_url : ""),
		.sha = own(j, sp->sha != NULL ? sp->sha : ""),
		.before_sha = own(j, sp->before_sha != NULL ? sp->before_sha : ""),
		.ref = own(j, sp->ref != NULL ? sp->ref : ""),
		.timeout_s = sp->timeout_s,
		.project_id = sp->project_id,
		.concurrent_project_id = sp->concurrent_project_id,
		.pipeline_id = sp->pipeline_id,
		.runner_short = own(j, sp->runner_short != NULL ? sp->runner_short : ""),
		.runner_id = sp->runner_id,
		.system_id = own(j, sp->system_id != NULL ? sp->system_id : ""),
	};
	j->unique_name = xstrdup(sp->unique_name != NULL ? sp->unique_name : "runner");
	j->builds_dir = xstrdup(sp->builds_dir != NULL ? sp->builds_dir : "/builds");
	j->project_dir = xstrdup(sp->project_dir != NULL ? sp->project_dir : j->builds_dir);
	j->work_dir = dup_or_null(sp->work_dir);
	j->reuse_builds = sp->reuse_builds;
	j->protected_ref = sp->protected_ref;
	j->network_per_build = sp->network_per_build;
	j->disable_umask = sp->disable_umask;
	j->use_init = sp->use_init;
	j->native_stop = sp->native_stop;
	j->debug_services = sp->debug_services;
	j->stop_grace_ms = sp->stop_grace_ms;
	copy_strv(&j->env, sp->env);
	copy_strv(&j->service_env, sp->service_env);
	j->say = sp->say;
	j->on_output = sp->on_output;
	j->record = sp->record;
	j->arg = sp->arg;

	dimage_copy(&j->build_image, &sp->image, sp);
	if (j->build_image.name == NULL || *j->build_image.name == '\0') {
		dimage_release(&j->build_image);
		dimage_copy(&j->build_image, &(struct exec_image){
			.name = s->image,
			.entrypoint = sp->image.entrypoint,
			.pull_policy = sp->image.pull_policy,
			.user = sp->image.user,
			.platform = sp->image.platform,
			.from_config = true,
		}, sp);
	}
	dimage_copy(&j->helper_image, &(struct exec_image){
		.name = s->helper_image != NULL && *s->helper_image ? s->helper_image :
		    DEFAULT_HELPER_IMAGE,
		.pull_policy = &(struct strv){ .v = (char *[]){ "if-not-present" }, .n = 1 },
		.from_config = true,
	}, sp);

	/* config.toml's services first, then the job's (services.go). */
	j->n_services = s->n_services + sp->n_services;
	j->services = xcalloc(j->n_services ? j->n_services : 1, sizeof(*j->services));
	for (i = 0; i < s->n_services; i++) {
		const struct docker_service_settings *cs = &s->services[i];
		struct dimage *img = &j->services[i].image;
		struct strv aliases = { 0 };

		if (cs->alias != NULL)
			strv_push(&aliases, cs->alias);
		dimage_copy(img, &(struct exec_image){
			.name = cs->name,
			.entrypoint = cs->entrypoint.n > 0 ? &cs->entrypoint : NULL,
			.command = &cs->command,
			.aliases = &aliases,
			.variables = &cs->environment,
			.from_config = true,
		}, sp);
		strv_release(&aliases);
	}
	for (i = 0; i < sp->n_services; i++)
		dimage_copy(&j->services[s->n_services + i].image, &sp->services[i], sp);
}

/* ---- the job's life ---- */

static void
djob_enter(struct exec_job *j, enum djob_state to)
{
	log_kv(LOG_LEVEL_DEBUG, LOG_FIELDS(LOG_JOB(j->job_id)), "docker: %s -> %s",
	    state_names[j->state], state_names[to]);
	j->state = to;
}

static void	prepare_next(struct exec_job *);

/* A step of preparing ended: on to the next state, or fail. */
static void
prepare_step(struct exec_job *j, int status, const char *reason, const char *cause)
{
	if (j->state >= DJOB_READY)
		return;
	if (j->aborted) {
		prepare_failed(j, "runner_system_failure", "preparing was aborted");
		return;
	}
	if (status != 0) {
		prepare_failed(j, reason, cause);
		return;
	}
	prepare_next(j);
}

static void
ready(struct exec_job *j, int status, const char *reason, const char *cause)
{
	exec_job_done_cb *cb = j->done;

	j->done = NULL;
	if (cb != NULL)
		cb(status, reason, cause, j->done_arg);
}

static void
prepare_failed(struct exec_job *j, const char *reason, const char *cause)
{
	djob_enter(j, DJOB_FAILED);
	ready(j, j->aborted ? -ECANCELED : -EIO, reason != NULL ? reason : "runner_system_failure",
	    cause);
}

static void
on_connected(const struct engine_result *res, void *arg)
{
	struct exec_job *j = arg;
	char *cause;

	j->call = NULL;
	if (res->error != 0 || res->status != 200) {
		cause = engine_unreachable(j->engine, res);
		prepare_step(j, -EIO, "runner_system_failure", cause);
		free(cause);
		return;
	}
	log_kv(LOG_LEVEL_DEBUG, LOG_FIELDS(LOG_JOB(j->job_id)), "docker: %s speaks API %s",
	    engine_address(j->engine), engine_api_version(j->engine));
	prepare_step(j, 0, NULL, NULL);
}

/* ---- the bundle volume: this binary for every helper container ---- */

/*
 * The bundle is copied into its volume once per engine and binary: a
 * volume that exists is taken as filled, since it is only ever made by
 * the container that fills it and removed if filling failed.
 */
struct bundle_fill {
	struct exec_job	*j;
	struct bundle	 b;
	struct dctr	 ctr;
	int		 fd;
	int		 step;
	char		*error;
};

static void	bundle_next(struct bundle_fill *, const struct engine_result *);

static void
on_bundle_call(const struct engine_result *res, void *arg)
{
	struct bundle_fill *f = arg;

	f->j->call = NULL;
	bundle_next(f, res);
}

static void
bundle_done(struct bundle_fill *f, int status, const char *cause)
{
	struct exec_job *j = f->j;

	if (f->fd >= 0)
		close(f->fd);
	dctr_release(&f->ctr);
	bundle_release(&f->b);
	free(f);
	prepare_step(j, status, "runner_system_failure", cause);
}

static void
bundle_call(struct bundle_fill *f, const char *method, const char *path,
    const struct engine_call_opts *o)
{
	f->j->call = engine_call(f->j->engine, method, path, o, on_bundle_call, f);
	if (f->j->call == NULL)
		bundle_done(f, -EIO, "cannot call the Docker engine");
}

static void
bundle_next(struct bundle_fill *f, const struct engine_result *res)
{
	struct exec_job *j = f->j;
	struct strv labels = { 0 }, binds = { 0 }, cmd = { 0 };
	char *path, *body, *error = NULL, *cause;
	cJSON *o;

	switch (f->step++) {
	case 0:		/* does it exist? */
		path = xasprintf("/volumes/%s", j->bundle_volume);
		bundle_call(f, "GET", path, NULL);
		free(path);
		return;
	case 1:
		if (res->status == 200) {
			bundle_done(f, 0, NULL);
			return;
		}
		if (res->status != 404)
			break;
		/* A reusable volume: not the job's, not recorded, kept by the sweep. */
		djob_labels(j, &labels, CTR_HELPER, NULL);
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "Name", j->bundle_volume);
		{
			cJSON *l = cJSON_AddObjectToObject(o, "Labels");
			size_t i;

			for (i = 0; i < labels.n; i++) {
				char *eq = strchr(labels.v[i], '=');

				if (eq == NULL)
					continue;
				*eq = '\0';
				if (strcmp(labels.v[i], RUNNER_LABEL_JOB_ID) != 0 &&
				    strcmp(labels.v[i], DOCKER_LABEL_PREFIX "type") != 0)
					cJSON_AddStringToObject(l, labels.v[i], eq + 1);
			}
			cJSON_AddStringToObject(l, DOCKER_LABEL_PREFIX "type", "helper-bundle");
			cJSON_AddStringToObject(l, DOCKER_LABEL_PREFIX "reusable", "true");
		}
		body = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
		strv_release(&labels);
		bundle_call(f, "POST", "/volumes/create", &(struct engine_call_opts){ .json = body });
		free(body);
		return;
	case 2:		/* volume made: a container that mounts it, never started */
		if (res->status != 201 && res->status != 200)
			break;
		f->ctr.type = CTR_HELPER;
		f->ctr.name = xasprintf("%s-bundle", j->prefix);
		strv_push_owned(&binds, xasprintf("%s:%s", j->bundle_volume, BUNDLE_MOUNT));
		strv_push(&cmd, "true");
		djob_labels(j, &labels, CTR_HELPER, NULL);
		body = docker_create_body(&(struct ctr_spec){
			.type = CTR_HELPER,
			.image = j->helper_image.id,
			.cmd = &cmd,
			.labels = &labels,
			.binds = &binds,
			.network_mode = "none",
		}, &j->s, engine_api_version(j->engine), &error);
		strv_release(&labels);
		strv_release(&binds);
		strv_release(&cmd);
		if (body == NULL) {
			bundle_done(f, -EINVAL, error);
			free(error);
			return;
		}
		if (djob_record(j, "container", f->ctr.name) != 0) {
			free(body);
			bundle_done(f, -EIO, "cannot record the bundle container in the journal");
			return;
		}
		path = xasprintf("/containers/create?name=%s", f->ctr.name);
		bundle_call(f, "POST", path, &(struct engine_call_opts){ .json = body });
		free(path);
		free(body);
		return;
	case 3:
		if (res->status != 201 || (o = cJSON_Parse(res->body)) == NULL)
			break;
		if (cJSON_IsString(cJSON_GetObjectItem(o, "Id")))
			f->ctr.id = xstrdup(cJSON_GetObjectItem(o, "Id")->valuestring);
		cJSON_Delete(o);
		if (f->ctr.id == NULL)
			break;
		if ((f->fd = open(f->b.path, O_RDONLY | O_CLOEXEC)) < 0) {
			cause = xasprintf("cannot open the helper bundle %s: %s", f->b.path,
			    strerror(errno));
			f->step = 5;
			f->error = cause;
			path = xasprintf("/containers/%s?force=1&v=1", f->ctr.id);
			bundle_call(f, "DELETE", path, NULL);
			free(path);
			return;
		}
		path = xasprintf("/containers/%s/archive?path=%s", f->ctr.id, BUNDLE_MOUNT);
		bundle_call(f, "PUT", path, &(struct engine_call_opts){
			.tar_fd = f->fd, .tar_offset = 0, .tar_len = f->b.size });
		free(path);
		return;
	case 4:		/* copied (or not): the container goes either way */
		if (res->status != 200)
			f->error = xasprintf("cannot copy the helper bundle into volume %s: %s",
			    j->bundle_volume, res->message);
		path = xasprintf("/containers/%s?force=1&v=1", f->ctr.id);
		bundle_call(f, "DELETE", path, NULL);
		free(path);
		return;
	case 5:
		if (f->error != NULL) {
			/* A half-filled volume must not be taken for a whole one. */
			f->step = 6;
			path = xasprintf("/volumes/%s?force=1", j->bundle_volume);
			bundle_call(f, "DELETE", path, NULL);
			free(path);
			return;
		}
		bundle_done(f, 0, NULL);
		return;
	case 6:
		cause = f->error;
		f->error = NULL;
		bundle_done(f, -EIO, cause);
		free(cause);
		return;
	}
	cause = xasprintf("cannot make the helper bundle volume %s: %s", j->bundle_volume,
	    res->message != NULL && *res->message ? res->message : "unexpected answer");
	bundle_done(f, -EIO, cause);
	free(cause);
}

static void
prepare_bundle(struct exec_job *j)
{
	struct bundle_fill *f = xcalloc(1, sizeof(*f));
	char *dir, *cause = NULL;

	f->j = j;
	f->fd = -1;
	dir = xasprintf("%s/docker", j->work_dir != NULL ? j->work_dir : "/tmp");
	if (bundle_make(dir, &f->b, &cause) != 0) {
		free(dir);
		free(f);
		prepare_step(j, -EIO, "runner_system_failure", cause);
		free(cause);
		return;
	}
	free(dir);
	free(j->bundle_volume);
	j->bundle_volume = bundle_volume_name(&f->b);
	strv_push_owned(&j->binds, xasprintf("%s:%s:ro", j->bundle_volume, BUNDLE_MOUNT));
	bundle_next(f, NULL);
}

/* ---- the per-build network ---- */

static void
on_network(const struct engine_result *res, void *arg)
{
	struct exec_job *j = arg;
	char *cause;

	j->call = NULL;
	if (res->status != 201) {
		cause = xasprintf("cannot create the network %s: %s", j->network, res->message);
		free(j->network);
		j->network = NULL;
		prepare_step(j, -EIO, "runner_system_failure", cause);
		free(cause);
		return;
	}
	free(j->network_mode);
	j->network_mode = xstrdup(j->network);
	prepare_step(j, 0, NULL, NULL);
}

static void
prepare_network(struct exec_job *j)
{
	struct strv labels = { 0 };
	char *body;

	if (j->s.network_mode != NULL && *j->s.network_mode) {
		j->network_mode = xstrdup(j->s.network_mode);
		prepare_step(j, 0, NULL, NULL);
		return;
	}
	if (!j->network_per_build) {
		prepare_step(j, 0, NULL, NULL);
		return;
	}
	j->network = docker_network_name(j->label_in.runner_short, j->label_in.project_id,
	    j->label_in.concurrent_project_id, j->job_id);
	if (djob_record(j, "network", j->network) != 0) {
		prepare_step(j, -EIO, "runner_system_failure",
		    "cannot record the network in the journal");
		return;
	}
	docker_labels(&labels, &j->label_in, -1, NULL);
	body = docker_network_body(j->network, &labels, j->s.enable_ipv6, j->s.network_mtu);
	strv_release(&labels);
	j->call = engine_call(j->engine, "POST", "/networks/create",
	    &(struct engine_call_opts){ .json = body }, on_network, j);
	free(body);
	if (j->call == NULL)
		prepare_step(j, -EIO, "runner_system_failure", "cannot call the Docker engine");
}

/* ---- volumes ---- */

/* Whether a bind of config.toml's volumes already covers path. */
static bool
bind_covers(const struct exec_job *j, const char *path)
{
	size_t i, n = strlen(path);

	for (i = 0; i < j->s.volumes.n; i++) {
		const char *v = j->s.volumes.v[i], *c = strchr(v, ':');
		size_t cl;

		if (c == NULL)
			c = v - 1;	/* a /path volume */
		c++;
		cl = strcspn(c, ":");
		if (cl == n && strncmp(c, path, n) == 0)
			return true;
	}
	return false;
}

static void	volume_next(struct exec_job *);

static void
on_volume(const struct engine_result *res, void *arg)
{
	struct exec_job *j = arg;
	char *cause;

	j->call = NULL;
	if (res->status != 201 && res->status != 200) {
		cause = xasprintf("cannot create a volume: %s", res->message);
		prepare_step(j, -EIO, "runner_system_failure", cause);
		free(cause);
		return;
	}
	volume_next(j);
}

/* POST /volumes/create; temporary ones are recorded and removed at close. */
static void
create_volume(struct exec_job *j, const char *name, const char *dest, bool temporary)
{
	struct strv labels = { 0 };
	cJSON *o, *l;
	char *body;
	size_t i;

	if (temporary) {
		if (djob_record(j, "volume", name) != 0) {
			prepare_step(j, -EIO, "runner_system_failure",
			    "cannot record a volume in the journal");
			return;
		}
		strv_push(&j->temp_volumes, name);
	}
	docker_labels(&labels, &j->label_in, temporary ? -1 : (int)CTR_CACHE_INIT, NULL);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "Name", name);
	if (j->s.volume_driver != NULL && *j->s.volume_driver)
		cJSON_AddStringToObject(o, "Driver", j->s.volume_driver);
	if (j->s.volume_driver_ops.n > 0) {
		cJSON *d = cJSON_AddObjectToObject(o, "DriverOpts");

		for (i = 0; i < j->s.volume_driver_ops.n; i++) {
			char *kv = xstrdup(j->s.volume_driver_ops.v[i]), *eq = strchr(kv, '=');

			if (eq != NULL) {
				*eq = '\0';
				cJSON_AddStringToObject(d, kv, eq + 1);
			}
			free(kv);
		}
	}
	l = cJSON_AddObjectToObject(o, "Labels");
	for (i = 0; i < labels.n; i++) {
		char *eq = strchr(labels.v[i], '=');

		if (eq == NULL)
			continue;
		*eq = '\0';
		/* The cache volume outlives the job: no job's labels on it. */
		if (!temporary && (strcmp(labels.v[i], RUNNER_LABEL_JOB_ID) == 0 ||
		    strcmp(labels.v[i], DOCKER_LABEL_PREFIX "type") == 0))
			continue;
		cJSON_AddStringToObject(l, labels.v[i], eq + 1);
	}
	cJSON_AddStringToObject(l, DOCKER_LABEL_PREFIX "destination", dest);
	cJSON_AddStringToObject(l, DOCKER_LABEL_PREFIX "protected", j->protected_ref ? "true" : "false");
	/* As volumes/manager.go: both kinds are type=cache; reusable tells them apart. */
	cJSON_AddStringToObject(l, DOCKER_LABEL_PREFIX "reusable", temporary ? "false" : "true");
	cJSON_AddStringToObject(l, DOCKER_LABEL_PREFIX "type", "cache");
	body = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	strv_release(&labels);
	j->call = engine_call(j->engine, "POST", "/volumes/create",
	    &(struct engine_call_opts){ .json = body }, on_volume, j);
	free(body);
	if (j->call == NULL)
		prepare_step(j, -EIO, "runner_system_failure", "cannot call the Docker engine");
}

/*
 * One volume at a time: config.toml's volumes in order, then /builds.
 * host:ctr[:mode] is a bind as written; /path is a cache volume (a
 * reusable named volume, a temporary one with disable_cache, or a host
 * directory under cache_dir); /builds is reusable with GIT_STRATEGY=fetch.
 */
static void
volume_next(struct exec_job *j)
{
	const char *v;
	char *name, *dir, *cause = NULL;

	while (j->next < j->s.volumes.n) {
		v = j->s.volumes.v[j->next++];
		if (*v == '\0')
			continue;
		if (strchr(v, ':') != NULL) {
			strv_push(&j->binds, v);
			continue;
		}
		name = docker_cache_volume_name(j->unique_name, v, j->protected_ref);
		if (j->s.disable_cache) {
			free(name);
			name = xasprintf("%s-cache-%zu", j->prefix, j->next);
			strv_push_owned(&j->binds, xasprintf("%s:%s", name, v));
			create_volume(j, name, v, true);
			free(name);
			return;
		}
		if (j->s.cache_dir != NULL && *j->s.cache_dir) {
			/* <cache_dir>/<unique name>/<md5>: the same name's last part. */
			dir = xasprintf("%s/%s/%s", j->s.cache_dir, j->unique_name,
			    name + strlen(j->unique_name) + strlen("-cache-"));
			if (mkdirs(dir, 0777, NULL) == -1) {
				cause = xasprintf("cannot create the cache directory %s: %s "
				    "(check cache_dir)", dir, strerror(errno));
				free(dir);
				free(name);
				prepare_step(j, -EIO, "runner_system_failure", cause);
				free(cause);
				return;
			}
			strv_push_owned(&j->binds, xasprintf("%s:%s", dir, v));
			free(dir);
			free(name);
			continue;
		}
		strv_push_owned(&j->binds, xasprintf("%s:%s", name, v));
		create_volume(j, name, v, false);
		free(name);
		return;
	}
	if (j->next == j->s.volumes.n) {
		j->next++;
		if (!bind_covers(j, j->builds_dir)) {
			if (j->reuse_builds)
				name = docker_cache_volume_name(j->unique_name, j->builds_dir,
				    j->protected_ref);
			else
				name = xasprintf("%s-builds", j->prefix);
			strv_push_owned(&j->binds, xasprintf("%s:%s", name, j->builds_dir));
			create_volume(j, name, j->builds_dir, !j->reuse_builds);
			free(name);
			return;
		}
	}
	prepare_step(j, 0, NULL, NULL);
}

/* ---- preparing, in order ---- */

static void
on_image(struct exec_job *j, int status, const char *reason, const char *cause)
{
	prepare_step(j, status, reason, cause);
}

static void
prepare_next(struct exec_job *j)
{
	switch (j->state) {
	case DJOB_CONNECTING:
		djob_enter(j, DJOB_PULLING);
		j->next = 0;
		if (j->build_image.name == NULL || *j->build_image.name == '\0') {
			prepare_step(j, -EINVAL, "runner_configuration_error",
			    "no Docker image specified to run the build in: give the job an "
			    "image: or set image in [runners.docker]");
			return;
		}
		djob_say(j, "Using Docker executor with image %s ...", j->build_image.name);
		j->next = 1;
		djob_pull(j, &j->build_image, false, on_image);
		return;
	case DJOB_PULLING:
		if (j->next == 1) {
			j->next = 2;
			djob_pull(j, &j->helper_image, false, on_image);
			return;
		}
		djob_enter(j, DJOB_BUNDLE);
		prepare_bundle(j);
		return;
	case DJOB_BUNDLE:
		djob_enter(j, DJOB_NETWORK);
		prepare_network(j);
		return;
	case DJOB_NETWORK:
		djob_enter(j, DJOB_VOLUMES);
		j->next = 0;
		volume_next(j);
		return;
	case DJOB_VOLUMES:
		djob_enter(j, DJOB_SERVICES);
		djob_services(j, prepare_step);
		return;
	case DJOB_SERVICES:
		djob_enter(j, DJOB_READY);
		ready(j, 0, NULL, NULL);
		return;
	case DJOB_READY:
	case DJOB_FAILED:
	case DJOB_CLOSING:
	case DJOB_CLOSED:
		return;
	}
}

static struct exec_job *
docker_job_open(uv_loop_t *loop, const struct exec_job_spec *spec, exec_job_done_cb *done,
    void *arg, char **cause)
{
	const struct docker_settings *s = spec->settings;
	struct exec_job *j;
	char ua[64];

	if (s == NULL) {
		*cause = xstrdup("docker: no [runners.docker] settings");
		return NULL;
	}
	if (s->isolation != NULL && *s->isolation) {
		*cause = xasprintf("docker: isolation = \"%s\" is for Windows containers; "
		    "remove it from [runners.docker]", s->isolation);
		return NULL;
	}
	j = xcalloc(1, sizeof(*j));
	j->loop = loop;
	copy_spec(j, spec);
	snprintf(ua, sizeof(ua), "runner/%s", version_number());
	j->engine = engine_new(&(struct engine_config){
		.loop = loop,
		.host = j->s.host,
		.tls_verify = j->s.tls_verify,
		.tls_cert_path = j->s.tls_cert_path,
		.user_agent = ua,
	}, cause);
	if (j->engine == NULL) {
		j->state = DJOB_CLOSED;
		j->done = NULL;
		/* Nothing was made: free it all. */
		docker_settings_release(&j->s);
		strv_release(&j->own);
		strv_release(&j->env);
		strv_release(&j->service_env);
		dimage_release(&j->build_image);
		dimage_release(&j->helper_image);
		for (size_t i = 0; i < j->n_services; i++)
			dimage_release(&j->services[i].image);
		free(j->services);
		free(j->unique_name);
		free(j->builds_dir);
		free(j->project_dir);
		free(j->work_dir);
		free(j);
		return NULL;
	}
	j->project_name = docker_project_name(j->label_in.runner_short, j->label_in.project_id,
	    j->label_in.concurrent_project_id);
	j->prefix = docker_job_prefix(j->project_name);
	j->build.type = CTR_BUILD;
	j->build.name = xasprintf("%s-build", j->prefix);
	j->helper.type = CTR_HELPER;
	j->helper.name = xasprintf("%s-predefined", j->prefix);
	j->done = done;
	j->done_arg = arg;
	j->state = DJOB_CONNECTING;
	j->call = engine_connect(j->engine, on_connected, j);
	if (j->call == NULL) {
		j->done = NULL;
		djob_enter(j, DJOB_FAILED);
		*cause = xasprintf("cannot reach the Docker engine at %s", engine_address(j->engine));
		/* The caller still closes it: job_close() frees. */
		done(-EIO, "runner_system_failure", *cause, arg);
		free(*cause);
		*cause = NULL;
	}
	return j;
}

static void
docker_job_abort(struct exec_job *j)
{
	if (j->state >= DJOB_READY)
		return;
	j->aborted = true;
	if (j->call != NULL)
		engine_call_cancel(j->call);	/* its callback fails the step */
}

/* ---- closing: remove everything ---- */

static void	close_next(struct exec_job *);

static void
note_close_error(struct exec_job *j, const char *what, const char *name,
    const struct engine_result *res)
{
	if (res->status == 404 || (res->status >= 200 && res->status < 300))
		return;
	djob_say(j, "\033[0;33mWARNING: cannot remove %s %s: %s; the sweep removes it later",
	    what, name, *res->message ? res->message : "no answer");
	if (j->first_error == NULL)
		j->first_error = xasprintf("cannot remove %s %s: %s", what, name, res->message);
}

static void
on_close_step(struct exec_job *j, int status, const char *reason, const char *cause)
{
	(void)reason;
	if (status != 0 && j->first_error == NULL && cause != NULL)
		j->first_error = xstrdup(cause);
	close_next(j);
}

static void
on_close_call(const struct engine_result *res, void *arg)
{
	struct exec_job *j = arg;
	size_t k = j->next - 1;

	j->call = NULL;
	/* next counts services' two containers, then volumes, then the network. */
	if (k < j->temp_volumes.n)
		note_close_error(j, "volume", j->temp_volumes.v[k], res);
	else if (j->network != NULL)
		note_close_error(j, "network", j->network, res);
	close_next(j);
}

static void
close_finish(struct exec_job *j)
{
	exec_job_done_cb *cb = j->done;
	void *arg = j->done_arg;
	char *err = j->first_error;
	size_t i;

	djob_enter(j, DJOB_CLOSED);
	j->first_error = NULL;
	engine_close(j->engine);
	j->engine = NULL;
	dctr_release(&j->build);
	dctr_release(&j->helper);
	for (i = 0; i < j->n_services; i++) {
		dimage_release(&j->services[i].image);
		dctr_release(&j->services[i].ctr);
		dctr_release(&j->services[i].wait);
		strv_release(&j->services[i].aliases);
		strv_release(&j->services[i].ports);
		free(j->services[i].ip);
	}
	free(j->services);
	dimage_release(&j->build_image);
	dimage_release(&j->helper_image);
	docker_settings_release(&j->s);
	strv_release(&j->own);
	strv_release(&j->env);
	strv_release(&j->service_env);
	strv_release(&j->binds);
	strv_release(&j->extra_hosts);
	strv_release(&j->temp_volumes);
	free(j->unique_name);
	free(j->builds_dir);
	free(j->project_dir);
	free(j->work_dir);
	free(j->project_name);
	free(j->prefix);
	free(j->network);
	free(j->network_mode);
	free(j->bundle_volume);
	free(j);
	if (cb != NULL)
		cb(err != NULL ? -EIO : 0, err != NULL ? "runner_system_failure" : NULL, err, arg);
	free(err);
}

/*
 * Containers first (build, helper, then each service and its health
 * check), so that the volumes and the network they hold are free; then
 * the temporary volumes; then the network.
 */
static void
close_next(struct exec_job *j)
{
	struct dctr *c = NULL;
	char *path;
	size_t k;

	for (;;) {
		if (j->build.id != NULL)
			c = &j->build;
		else if (j->helper.id != NULL)
			c = &j->helper;
		else {
			for (k = 0; k < j->n_services && c == NULL; k++) {
				if (j->services[k].wait.id != NULL)
					c = &j->services[k].wait;
				else if (j->services[k].ctr.id != NULL)
					c = &j->services[k].ctr;
			}
		}
		if (c != NULL) {
			djob_remove(j, c, on_close_step);
			return;
		}
		break;
	}
	k = j->next++;
	if (k < j->temp_volumes.n) {
		path = xasprintf("/volumes/%s?force=1", j->temp_volumes.v[k]);
		j->call = engine_call(j->engine, "DELETE", path, NULL, on_close_call, j);
		free(path);
		if (j->call != NULL)
			return;
		k = j->next++;
	}
	if (k == j->temp_volumes.n && j->network != NULL) {
		path = xasprintf("/networks/%s", j->network);
		j->call = engine_call(j->engine, "DELETE", path, NULL, on_close_call, j);
		free(path);
		if (j->call != NULL)
			return;
	}
	if (k < j->temp_volumes.n)
		close_next(j);
	else
		close_finish(j);
}

static void
docker_job_close(struct exec_job *j, exec_job_done_cb *closed, void *arg)
{
	/*
	 * Closed while preparing: the abort's cancel calls back at once, so
	 * ready has come (failed) before closing begins.
	 */
	if (j->done != NULL)
		docker_job_abort(j);
	j->done = closed;
	j->done_arg = arg;
	djob_service_logs_stop(j);
	djob_enter(j, DJOB_CLOSING);
	j->next = 0;
	close_next(j);
}

const struct executor_ops docker_executor = {
	.name = "docker",
	.job_open = docker_job_open,
	.job_abort = docker_job_abort,
	.job_close = docker_job_close,
	.start = djob_stage_start,
	.cancel = djob_stage_cancel,
	.sweep = docker_sweep,
	.sweep_cancel = docker_sweep_cancel,
};

/*
 * The exec_job_spec of a job (job_exec.h).  Images and aliases are
 * expanded with the job's variables, as gitlab-runner expands them;
 * entrypoints and commands are passed as the job wrote them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "lib/xmalloc.h"
#include "runner/job.h"
#include "runner/job_exec.h"
#include "runner/vars.h"

char *
job_exec_unique_name(const char *token, const char *system_id, int64_t project_id,
    int concurrent_project_id)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	char *data, hex[33];
	int i;

	/* gitlab-runner's GetSystemID: an unset ID hashes as "unknown". */
	data = xasprintf("%s-%s-%lld-%d", token != NULL ? token : "",
	    system_id != NULL && *system_id ? system_id : "unknown",
	    (long long)project_id, concurrent_project_id);
	if (EVP_Digest(data, strlen(data), md, &n, EVP_sha256(), NULL) != 1)
		memset(md, 0, sizeof(md));	/* not reached: sha256 is always there */
	explicit_bzero(data, strlen(data));
	free(data);
	for (i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return xasprintf("runner-%s", hex);
}

/* An expanded copy, owned by x. */
static const char *
expand(struct job_exec *x, const struct job_vars *v, const char *s)
{
	if (s == NULL || *s == '\0')
		return NULL;
	strv_push_owned(&x->own, job_vars_expand(v, s));
	return x->own.v[x->own.n - 1];
}

/* "a,b c" as {"a", "b", "c"}. */
static void
split_aliases(struct strv *out, const char *s)
{
	const char *p = s, *e;

	while (p != NULL && *p != '\0') {
		p += strspn(p, ", ");
		e = p + strcspn(p, ", ");
		if (e > p) {
			char *a = xmalloc((size_t)(e - p) + 1);

			memcpy(a, p, (size_t)(e - p));
			a[e - p] = '\0';
			strv_push_owned(out, a);
		}
		p = e;
	}
}

static void
image_of(struct job_exec *x, const struct job_vars *v, struct exec_image *img,
    const struct api_image *ai)
{
	memset(img, 0, sizeof(*img));
	img->name = expand(x, v, ai->name);
	img->entrypoint = ai->entrypoint.n > 0 ? &ai->entrypoint : NULL;
	img->command = ai->command.n > 0 ? &ai->command : NULL;
	img->pull_policy = &ai->pull_policy;
	img->user = expand(x, v, ai->docker_user);
	img->platform = expand(x, v, ai->docker_platform);
}

/* A job variable that the payload sent as not public goes to no service. */
static bool
is_private(const struct api_job *p, const char *key)
{
	size_t i;

	for (i = 0; i < p->n_variables; i++)
		if (!p->variables[i].public_ && strcmp(p->variables[i].key, key) == 0)
			return true;
	return false;
}

void
job_exec_make(struct job_exec *x, const struct job_exec_input *in)
{
	const struct api_job *p = in->payload;
	const struct job_vars *v = &in->prep->vars;
	struct exec_job_spec *s = &x->spec;
	size_t i, k;

	memset(x, 0, sizeof(*x));
	for (i = 0; i < v->n; i++) {
		char *kv = xasprintf("%s=%s", v->v[i].key, v->v[i].value);

		if (!is_private(p, v->v[i].key))
			strv_push(&x->service_env, kv);
		strv_push_owned(&x->env, kv);
	}

	s->settings = in->settings;
	s->job_id = p->id;
	s->project_id = p->job_info.project_id;
	s->pipeline_id = p->job_info.pipeline_id;
	s->job_url = job_vars_get(v, "CI_JOB_URL");
	s->sha = p->git_info.sha;
	s->before_sha = p->git_info.before_sha;
	s->ref = p->git_info.ref;
	s->timeout_s = p->runner_info.timeout > 0 ? p->runner_info.timeout :
	    JOB_DEFAULT_TIMEOUT_S;
	s->runner_id = in->runner_id;
	s->runner_short = in->set->short_token;
	s->system_id = in->set->system_id;
	s->concurrent_id = in->set->concurrent_id;
	s->concurrent_project_id = in->set->concurrent_project_id;
	strv_push_owned(&x->own, job_exec_unique_name(in->runner_token, in->set->system_id,
	    p->job_info.project_id, in->set->concurrent_project_id));
	s->unique_name = x->own.v[x->own.n - 1];
	s->builds_dir = in->set->builds_dir;
	s->project_dir = in->prep->dirs.project_dir;
	s->reuse_builds = strcmp(in->prep->settings.git_strategy, "fetch") == 0;
	s->protected_ref = p->git_info.protected_ == 1;
	if (p->image.present)
		image_of(x, v, &s->image, &p->image);

	x->services = xcalloc(p->n_services + 1, sizeof(*x->services));
	x->service_aliases = xcalloc(p->n_services + 1, sizeof(*x->service_aliases));
	x->service_vars = xcalloc(p->n_services + 1, sizeof(*x->service_vars));
	for (i = 0; i < p->n_services; i++) {
		const struct api_image *ai = &p->services[i];

		image_of(x, v, &x->services[i], ai);
		split_aliases(&x->service_aliases[i], expand(x, v, ai->alias));
		for (k = 0; k < ai->n_variables; k++) {
			const struct api_variable *av = &ai->variables[k];
			char *val = av->raw ? xstrdup(av->value) : job_vars_expand(v, av->value);

			strv_push_owned(&x->service_vars[i], xasprintf("%s=%s", av->key, val));
			free(val);
		}
		x->services[i].aliases = &x->service_aliases[i];
		x->services[i].variables = &x->service_vars[i];
	}
	s->services = x->services;
	s->n_services = p->n_services;
	s->env = &x->env;
	s->service_env = &x->service_env;
	s->network_per_build = job_vars_feature_flag(v, "FF_NETWORK_PER_BUILD");
	s->disable_umask = job_vars_feature_flag(v, "FF_DISABLE_UMASK_FOR_DOCKER_EXECUTOR");
	s->use_init = job_vars_feature_flag(v, "FF_USE_INIT_WITH_DOCKER_EXECUTOR");
	s->native_stop = job_vars_feature_flag(v, "FF_USE_NATIVE_CONTAINER_STOP");
	s->debug_services = in->prep->settings.debug_services;
	s->stop_grace_ms = in->stop_grace_ms;
	registry_auths_make(&x->auths, &(struct registry_auth_input){
		.docker_auth_config = job_vars_get(v, "DOCKER_AUTH_CONFIG"),
		.home_config = in->home_config,
		.home_config_path = in->home_config_path,
		.credentials = p->credentials,
		.n_credentials = p->n_credentials,
	}, &x->auth_warnings);
	s->registry_auths = x->auths.v;
	s->n_registry_auths = x->auths.n;
	strv_push(&x->own, in->work_dir != NULL ? in->work_dir : "/tmp");
	s->work_dir = x->own.v[x->own.n - 1];
}

void
job_exec_release(struct job_exec *x)
{
	size_t i;

	for (i = 0; i < x->spec.n_services; i++) {
		strv_release(&x->service_aliases[i]);
		strv_release(&x->service_vars[i]);
	}
	free(x->services);
	free(x->service_aliases);
	free(x->service_vars);
	/* The variables hold secrets. */
	for (i = 0; i < x->env.n; i++)
		explicit_bzero(x->env.v[i], strlen(x->env.v[i]));
	strv_release(&x->env);
	strv_release(&x->service_env);
	strv_release(&x->own);
	registry_auths_release(&x->auths);
	strv_release(&x->auth_warnings);
	memset(x, 0, sizeof(*x));
}

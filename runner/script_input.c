/*
 * The script input of a job: the payload, the runner entry's settings and
 * the job's variables (vars.c) turned into the one struct script.c makes
 * every stage's text from.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/version.h"
#include "lib/xmalloc.h"
#include "runner/job.h"
#include "runner/script_input.h"
#include "runner/vars.h"

/*
 * Where git fetches from: the payload's URL (it carries the job token as
 * userinfo) or clone_url with the project path; origin gets the same
 * without the token.  repo_url, with it, is for the tmp git config's
 * insteadOf, used only with FF_GIT_URLS_WITHOUT_TOKENS false.
 */
static void
git_urls(struct script_input *in, const struct api_job *payload, const char *clone_url)
{
	const char *url = payload->git_info.repo_url != NULL ? payload->git_info.repo_url : "";
	const char *path = payload->job_info.project_full_path;
	const char *scheme_end, *at, *host_end;
	char *base;

	if (clone_url != NULL && *clone_url != '\0') {
		base = xstrdup(clone_url);
		while (*base && base[strlen(base) - 1] == '/')
			base[strlen(base) - 1] = '\0';
		in->remote_url = xasprintf("%s/%s.git", base, path != NULL ? path : "");
		free(base);
	} else if ((scheme_end = strstr(url, "://")) != NULL &&
	    (at = strchr(scheme_end + 3, '@')) != NULL &&
	    at < scheme_end + 3 + strcspn(scheme_end + 3, "/")) {
		in->remote_url = xasprintf("%.*s%s", (int)(scheme_end + 3 - url), url, at + 1);
	} else
		in->remote_url = xstrdup(url);
	if ((scheme_end = strstr(in->remote_url, "://")) != NULL) {
		in->repo_url = xasprintf("%.*sgitlab-ci-token:%s@%s",
		    (int)(scheme_end + 3 - in->remote_url), in->remote_url,
		    payload->token, scheme_end + 3);
		host_end = scheme_end + 3 + strcspn(scheme_end + 3, "/");
		in->server_host = xasprintf("%.*s", (int)(host_end - in->remote_url),
		    in->remote_url);
	} else {
		in->repo_url = xstrdup(in->remote_url);
		in->server_host = xstrdup("");
	}
}

/*
 * The release step is made by Rails from the release: keyword, whose
 * fields the runner expands (gitlab-runner's writeUserScript).
 */
static void
expand_release_step(struct api_job *payload, const struct job_vars *vars)
{
	size_t i, k;

	for (i = 0; i < payload->n_steps; i++) {
		struct api_step *step = &payload->steps[i];

		if (step->name == NULL || strcmp(step->name, "release") != 0)
			continue;
		for (k = 0; k < step->script.n; k++) {
			char *line = job_vars_expand(vars, step->script.v[k]);

			free(step->script.v[k]);
			step->script.v[k] = line;
		}
	}
}

static void
fill_transfers(struct script_input *in, const struct api_job *payload,
    const struct job_settings *set, const struct job_prep *prep, const char *server_url)
{
	struct script_job *sj = &in->sj;
	struct transfers_input ti = {
		.cache_dir = set->cache_dir != NULL ? set->cache_dir : "",
		.hash_keys = job_vars_feature_flag(&prep->vars, "FF_HASH_CACHE_KEYS"),
	};
	struct transfers *t = &in->transfers;

	transfers_make(t, payload, &prep->vars, &ti);
	sj->runner_command = set->runner_command != NULL ? set->runner_command : "";
	sj->server_url = server_url != NULL ? server_url : "";
	sj->job_id = payload->id;
	sj->cache_request_timeout = prep->settings.cache_request_timeout;
	sj->artifact_download_attempts = prep->settings.artifact_download_attempts;
	sj->caches = t->caches;
	sj->n_caches = t->n_caches;
	sj->artifacts = t->artifacts;
	sj->n_artifacts = t->n_artifacts;
	sj->dependencies = t->dependencies;
	sj->n_dependencies = t->n_dependencies;
}

/* Hooks: config.toml's pre first and post last, the payload's inside. */
static void
fill_hooks(struct script_input *in, const struct api_job *payload,
    const struct job_settings *set)
{
	struct script_job *sj = &in->sj;
	size_t i;

	strv_push(&in->pre_hooks, set->pre_get_sources_script);
	for (i = 0; i < payload->n_hooks; i++) {
		const struct api_hook *h = &payload->hooks[i];
		struct strv *to = h->name == NULL ? NULL :
		    strcmp(h->name, "pre_get_sources_script") == 0 ? &in->pre_hooks :
		    strcmp(h->name, "post_get_sources_script") == 0 ? &in->post_hooks : NULL;
		size_t k;

		for (k = 0; to != NULL && k < h->script.n; k++)
			strv_push(to, h->script.v[k]);
	}
	strv_push(&in->post_hooks, set->post_get_sources_script);
	sj->pre_get_sources.v = (const char *const *)in->pre_hooks.v;
	sj->pre_get_sources.n = in->pre_hooks.n;
	sj->post_get_sources.v = (const char *const *)in->post_hooks.v;
	sj->post_get_sources.n = in->post_hooks.n;
}

void
script_input_make(struct script_input *in, struct api_job *payload,
    const struct job_settings *set, const struct job_prep *prep, const char *server_url)
{
	struct script_job *sj = &in->sj;
	const struct build_settings *bs = &prep->settings;
	const struct job_vars *vars = &prep->vars;
	size_t i;

	memset(in, 0, sizeof(*in));
	snprintf(in->user_agent, sizeof(in->user_agent), "runner %s %s/%s", version_number(),
	    version_os(), version_arch());
	git_urls(in, payload, set->clone_url);
	expand_release_step(payload, vars);
	in->n_vars = job_vars_script(vars, &in->vars);
	/* One more slot: CI_JOB_STATUS, set per stage by script_input_stage(). */
	in->vars = xreallocarray(in->vars, in->n_vars + 1, sizeof(*in->vars));
	for (i = 0; i < in->n_vars; i++)
		if (strcmp(in->vars[i].key, "CI_SERVER_TLS_CA_FILE") == 0)
			in->ca_var_path = xasprintf("%s/CI_SERVER_TLS_CA_FILE",
			    prep->dirs.tmp_dir);
	sj->shell = set->shell;
	sj->builds_dir = set->builds_dir;
	sj->project_dir = prep->dirs.project_dir;
	sj->tmp_dir = prep->dirs.tmp_dir;
	sj->vars = in->vars;
	sj->n_vars = in->n_vars;
	sj->debug_trace = bs->debug_trace;
	sj->script_sections = payload->features.trace_sections &&
	    job_vars_feature_flag(vars, "FF_SCRIPT_SECTIONS");
	sj->exit_code_check = job_vars_feature_flag(vars, "FF_ENABLE_BASH_EXIT_CODE_CHECK");
	sj->git_strategy = bs->git_strategy;
	sj->repo_url = in->repo_url;
	sj->remote_url = in->remote_url;
	sj->server_host = in->server_host;
	sj->git_urls_without_tokens = job_vars_feature_flag(vars, "FF_GIT_URLS_WITHOUT_TOKENS");
	sj->sha = payload->git_info.sha != NULL ? payload->git_info.sha : "";
	sj->ref = payload->git_info.ref != NULL ? payload->git_info.ref : "";
	sj->refspecs.v = (const char *const *)payload->git_info.refspecs.v;
	sj->refspecs.n = payload->git_info.refspecs.n;
	sj->depth = bs->git_depth;
	sj->checkout = bs->git_checkout;
	sj->clean_flags = bs->git_clean_flags;
	sj->fetch_flags = bs->git_fetch_flags;
	sj->clone_flags = bs->git_clone_flags;
	sj->native_clone = job_vars_feature_flag(vars, "FF_USE_GIT_NATIVE_CLONE");
	sj->job_cleanup = job_vars_feature_flag(vars, "FF_ENABLE_JOB_CLEANUP");
	sj->submodule_strategy = bs->submodule_strategy;
	sj->submodule_paths = bs->submodule_paths;
	sj->submodule_update_flags = bs->submodule_update_flags;
	sj->submodule_depth = bs->submodule_depth;
	sj->get_sources_attempts = bs->get_sources_attempts;
	sj->user_agent = in->user_agent;
	sj->ca_file = in->ca_var_path != NULL ? in->ca_var_path : "";
	sj->pre_build_script = set->pre_build_script;
	sj->post_build_script = set->post_build_script;
	fill_transfers(in, payload, set, prep, server_url);
	fill_hooks(in, payload, set);
}

void
script_input_stage(struct script_input *in, const struct api_step *step, bool on_failure,
    const char *job_status)
{
	struct script_job *sj = &in->sj;

	sj->step_name = step != NULL && step->name != NULL ? step->name : "script";
	sj->commands.v = step != NULL ? (const char *const *)step->script.v : NULL;
	sj->commands.n = step != NULL ? step->script.n : 0;
	sj->on_failure = on_failure;
	/* Exported after the others: the last export of a name wins. */
	in->vars[in->n_vars].key = "CI_JOB_STATUS";
	in->vars[in->n_vars].value = job_status;
	in->vars[in->n_vars].file = false;
	sj->n_vars = in->n_vars + 1;
}

void
script_input_release(struct script_input *in)
{
	free(in->vars);
	transfers_release(&in->transfers);
	free(in->repo_url);
	free(in->remote_url);
	free(in->server_host);
	free(in->ca_var_path);
	strv_release(&in->pre_hooks);
	strv_release(&in->post_hooks);
	memset(in, 0, sizeof(*in));
}

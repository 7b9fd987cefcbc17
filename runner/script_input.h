/*
 * What every stage's text is made from (script.h's struct script_job),
 * worked out once when a job starts: its variables as script.c takes them,
 * the git URLs with and without the job token, the get_sources hooks of
 * config.toml and the payload, the caches and artifacts (transfers.h).
 * job.c then points it at one stage at a time.
 */
#ifndef RUNNER_SCRIPT_INPUT_H
#define RUNNER_SCRIPT_INPUT_H

#include <stdbool.h>
#include <stddef.h>

#include "api/api.h"
#include "lib/strv.h"
#include "runner/script.h"
#include "runner/transfers.h"

struct job_prep;
struct job_settings;

/*
 * Owns everything sj points to but the strings it borrows from the
 * payload, the settings and the prep given to script_input_make(), which
 * must outlive it.
 */
struct script_input {
	struct script_job	 sj;
	struct script_var	*vars;		/* prep's, then a CI_JOB_STATUS slot */
	size_t			 n_vars;	/* prep's variables, without that slot */
	struct transfers	 transfers;	/* caches, artifacts, dependencies */
	char			*repo_url;	/* with the job token: the tmp git config */
	char			*remote_url;	/* without: origin */
	char			*server_host;
	char			*ca_var_path;	/* CI_SERVER_TLS_CA_FILE's file, or NULL */
	struct strv		 pre_hooks;	/* pre_get_sources_script lines */
	struct strv		 post_hooks;	/* post_get_sources_script lines */
	char			 user_agent[96];
};

/*
 * Fill in from the job's payload, its runner settings, its prep (vars.h)
 * and the server's URL.  The payload's release step is rewritten in place,
 * its lines expanded against the variables, as gitlab-runner does.  Release
 * in with script_input_release().
 */
void	script_input_make(struct script_input *in, struct api_job *payload,
	    const struct job_settings *set, const struct job_prep *prep,
	    const char *server_url);

/*
 * Point in->sj at one stage: step is the user step or after_script (NULL
 * for the runner's stages), on_failure picks the failed-job variant of the
 * cache and artifact stages, job_status is CI_JOB_STATUS as the stage sees
 * it.  Borrows step and job_status until the next call.
 */
void	script_input_stage(struct script_input *in, const struct api_step *step,
	    bool on_failure, const char *job_status);

void	script_input_release(struct script_input *in);

#endif

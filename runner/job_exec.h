/*
 * What a job tells an executor that has a job part (docker): who the job
 * is, its images, services and variables, as executors/executor.h's
 * exec_job_spec, made from the payload, its variables and the runner's
 * settings.  The runner token that gitlab-runner names cache volumes
 * after is hashed here and goes no further.
 */
#ifndef RUNNER_JOB_EXEC_H
#define RUNNER_JOB_EXEC_H

#include <stdbool.h>
#include <stdint.h>

#include "api/api.h"
#include "executors/executor.h"
#include "lib/strv.h"
#include "runner/registry_auth.h"

struct job_prep;
struct job_settings;

struct job_exec_input {
	const struct api_job		*payload;
	const struct job_prep		*prep;		/* its variables and directories */
	const struct job_settings	*set;
	const void			*settings;	/* the executor's section */
	const char			*runner_token;	/* hashed into the unique name only */
	int64_t				 runner_id;
	const char			*work_dir;
	uint64_t			 stop_grace_ms;
	/* ~/.docker/config.json of the daemon's user: its text (or NULL), and its path. */
	const char			*home_config;
	const char			*home_config_path;
};

/* The spec and everything it points at; the spec's callbacks are the caller's to set. */
struct job_exec {
	struct exec_job_spec	 spec;
	struct strv		 env;
	struct strv		 service_env;
	struct exec_image	*services;
	struct strv		*service_aliases;	/* one per service */
	struct strv		*service_vars;
	struct strv		 own;			/* the expanded strings */
	struct registry_auths	 auths;
	struct strv		 auth_warnings;		/* for the job's log, once */
};

void	job_exec_make(struct job_exec *x, const struct job_exec_input *in);
void	job_exec_release(struct job_exec *x);

/*
 * gitlab-runner's ProjectRealUniqueName: "runner-" and 32 hex digits of
 * sha256("<token>-<system id>-<project id>-<concurrent project id>").
 * The caller frees it.
 */
char	*job_exec_unique_name(const char *token, const char *system_id, int64_t project_id,
	    int concurrent_project_id);

#endif

/*
 * One job, from the 201 that brought it to the final report GitLab
 * accepted (protocol.md 5.4, 9).  The job owns its payload, its log, its
 * log sender, its journal entry and the stage running now; the poller owns
 * the job and is told once, when it is over.
 */
#ifndef RUNNER_JOB_H
#define RUNNER_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "api/api.h"
#include "executors/docker/settings.h"
#include "lib/strv.h"

struct job;
struct executor_ops;
struct runner_config;
struct runner_info;

/*
 * What a job needs of its runner entry, copied when it starts: a config
 * reload while it runs changes nothing for it.
 */
struct job_settings {
	char		*runner_name;
	char		*short_token;	/* CI_RUNNER_SHORT_TOKEN */
	char		*system_id;
	char		*shell;		/* bash or sh */
	char		*builds_dir;	/* absolute */
	char		*cache_dir;	/* absolute: local caches live below it */
	char		*runner_command; /* this binary, for the helper commands */
	char		*user;		/* run stages as this user (--user), or NULL */
	char		*pre_build_script;
	char		*post_build_script;
	char		*pre_get_sources_script;
	char		*post_get_sources_script;
	char		*clone_url;	/* [[runners]] clone_url, or "" */
	char		*tls_ca_file;	/* its content becomes CI_SERVER_TLS_CA_FILE */
	char		*tls_cert_file;
	char		*tls_key_file;
	struct strv	 environment;	/* [[runners]] environment */
	uint64_t	 output_limit;	/* bytes */
	int64_t		 retry_limit;	/* job_status_final_update_retry_limit */
	int		 concurrent_id;	/* CI_CONCURRENT_ID */
	int		 concurrent_project_id; /* CI_CONCURRENT_PROJECT_ID */
	char		*state_dir;	/* the journal lives below it */
	struct docker_settings docker;	/* [runners.docker], for the docker executor */
	/* Timings (ms); 0 means the default.  Tests shorten them. */
	uint64_t	 trace_interval_ms;
	uint64_t	 keepalive_ms;
	uint64_t	 final_backoff_ms;
	uint64_t	 kill_grace_ms;
};

void	job_settings_release(struct job_settings *s);

/* Where a job runs and reports: borrowed by the job, outlive it. */
struct job_env {
	uv_loop_t			*loop;
	struct api			*api;
	const struct executor_ops	*executor;
};

typedef void	job_done_cb(struct job *job, void *arg);

/*
 * Start a job received from GitLab.  Takes payload; settings and info are
 * moved in (the caller's structs are left empty); creds are copied; rc (the
 * entry: feature flags, custom_build_dir) is read during the call only.  done
 * is called once, when GitLab has the final report, when the job was
 * dropped, or when reporting gave up; the job is freed after done returns.
 */
struct job	*job_start(const struct job_env *env, struct api_job *payload,
		    struct job_settings *settings, const struct api_creds *creds,
		    struct runner_info *info, const struct runner_config *rc,
		    job_done_cb *done, void *arg);

/*
 * The runner is stopping by force (SIGTERM, SIGINT): stop the job, fail it
 * with runner_interrupted, still send its report.
 */
void		 job_interrupt(struct job *job);

/*
 * shutdown_timeout is over: kill the stage now, leave the final report in
 * the journal for the next start, talk to GitLab no more.  done still
 * comes, once, as soon as the stage's process is gone.
 */
void		 job_abandon(struct job *job);

/*
 * Finish the reports a crash left in the journal of state_dir: send the
 * rest of each log and its final report (a job that was still running is
 * reported failed, runner_system_failure).  done is called once, when
 * every entry is settled.  In job_replay.c.
 */
void		 job_recover(const struct job_env *env, const char *state_dir,
		    const struct api_info *info, void (*done)(void *arg), void *arg);

#endif

/*
 * How a stage of a job runs somewhere: the contract between the job (which
 * decides what text to run) and an executor (which runs it).
 *
 * An executor sees script text, an environment, a working directory, a
 * user and its output callback; never the GitLab payload, never what a
 * token is for.  The shell executor runs the text with bash or sh on this
 * machine; the docker executor (executors/docker/) runs it in the job's
 * containers.
 *
 * An executor that needs something around the stages (images, containers,
 * volumes) has a job part: job_open() prepares it, every stage names the
 * exec_job it runs in, job_close() takes it all away again.  Executors
 * without one (shell) leave those NULL.
 *
 * Contract of exec_start(): if it returns NULL the callbacks are never
 * called (the error is in *cause); otherwise output arrives through
 * on_output, in order per stream, until on_done is called exactly once,
 * after the stage's process has exited AND its output pipes are closed.
 * The exec is freed by the executor after on_done returns.
 */
#ifndef EXECUTORS_EXECUTOR_H
#define EXECUTORS_EXECUTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "lib/strv.h"

struct exec;
struct exec_job;
struct exec_sweep;

/* Which of the job's places a stage runs in (docker: the container). */
enum exec_where {
	EXEC_IN_BUILD,		/* the job's image: the user's steps, after_script */
	EXEC_IN_HELPER,		/* git, caches, artifacts: the helper */
};

struct exec_stage {
	const char	*name;		/* for messages: "step_script" */
	const char	*shell;		/* "bash" or "sh" */
	const char	*script;	/* fed on stdin, then stdin is closed */
	char *const	*env;		/* the whole environment, "K=V", NULL-terminated */
	const char	*cwd;		/* working directory; NULL: the daemon's */
	const char	*user;		/* run through su as this user; NULL: as we are */
	struct exec_job	*job;		/* from job_open(), or NULL */
	enum exec_where	 where;
};

/* stream: 1 stdout, 2 stderr. */
typedef void	exec_output_cb(int stream, const char *data, size_t len, void *arg);
/*
 * status: 0 when the process ran to its end (exit_code is its status, or
 * 128 + signal when a signal ended it), or -errno when it could not be run
 * or waited for (exit_code -1).
 */
typedef void	exec_done_cb(int status, int exit_code, void *arg);

/* ---- The job part ---- */

/* An image the job runs in, or a service; every string already expanded. */
struct exec_image {
	const char		*name;
	const struct strv	*entrypoint;	/* NULL: the image's own; {""}: none */
	const struct strv	*command;	/* services; NULL: the image's CMD */
	const struct strv	*pull_policy;	/* the job's; NULL or empty: the runner's */
	const char		*user;		/* executor_opts.docker.user, or NULL */
	const char		*platform;	/* executor_opts.docker.platform, or NULL */
	const struct strv	*aliases;	/* services: the job's aliases, split */
	const struct strv	*variables;	/* services: their own "K=V" */
	bool			 from_config;	/* config.toml's own: allowed_* do not apply */
};

/*
 * Credentials for the images under a registry path ("127.0.0.1:5000",
 * "docker.io/library"), resolved in runner/registry_auth.c: an image
 * takes the most specific path it is under (executors/docker/auth.h).
 */
struct exec_registry_auth {
	const char		*path;
	const char		*value;		/* X-Registry-Auth, encoded; a secret */
	const char		*source;	/* for the log: "$DOCKER_AUTH_CONFIG" */
};

/* A line for the job's log from the executor ("Pulling docker image ..."). */
typedef void	exec_say_cb(const char *line, void *arg);
/*
 * Called before the executor creates a container, volume or network
 * (kind "container", "volume", "network"; name as created), so that a
 * crash cannot leak it: 0 once it is on disk, -1 refuses the create.
 */
typedef int	exec_record_cb(const char *kind, const char *name, void *arg);
/*
 * How job_open() or job_close() ended: status 0, or -errno with the GitLab
 * failure reason to report ("image_pull_failure", "runner_system_failure",
 * "runner_configuration_error") and a one-line cause for the log.
 */
typedef void	exec_job_done_cb(int status, const char *failure_reason,
		    const char *cause, void *arg);

struct exec_job_spec {
	const void		*settings;	/* the executor's own section (docker: settings.h) */
	/* Who the job is: the executor's labels and names. */
	int64_t			 job_id;
	int64_t			 project_id;
	int64_t			 pipeline_id;
	const char		*job_url;
	const char		*sha;
	const char		*before_sha;
	const char		*ref;
	int64_t			 timeout_s;
	int64_t			 runner_id;	/* GitLab's id of this runner */
	const char		*runner_short;	/* the short token: runner-<short>-project-... */
	const char		*system_id;
	int			 concurrent_id;	/* CI_CONCURRENT_ID */
	int			 concurrent_project_id; /* CI_CONCURRENT_PROJECT_ID */
	/*
	 * gitlab-runner's ProjectRealUniqueName, "runner-" + 32 hex: what its
	 * cache volumes are named after, so they survive a switch.  Made
	 * from the runner token in runner/, which the executor never sees.
	 */
	const char		*unique_name;
	const char		*builds_dir;	/* inside the containers: "/builds" */
	const char		*project_dir;	/* inside the containers */
	bool			 reuse_builds;	/* GIT_STRATEGY=fetch: /builds outlives the job */
	bool			 protected_ref;	/* cache volume names get -protected */
	struct exec_image	 image;		/* name NULL: the settings' image */
	const struct exec_image	*services;
	size_t			 n_services;
	const struct exec_registry_auth *registry_auths;	/* for every image of the job */
	size_t			 n_registry_auths;
	const struct strv	*env;		/* every job variable, "K=V" */
	const struct strv	*service_env;	/* the public and internal ones only */
	/* Feature flags and switches that change how the job's containers run. */
	bool			 network_per_build;	/* FF_NETWORK_PER_BUILD */
	bool			 disable_umask;		/* FF_DISABLE_UMASK_FOR_DOCKER_EXECUTOR */
	bool			 use_init;		/* FF_USE_INIT_WITH_DOCKER_EXECUTOR */
	bool			 native_stop;		/* FF_USE_NATIVE_CONTAINER_STOP */
	bool			 debug_services;	/* CI_DEBUG_SERVICES */
	uint64_t		 stop_grace_ms;		/* SIGTERM to SIGKILL */
	const char		*work_dir;	/* the executor's files (the helper bundle) */
	exec_say_cb		*say;
	exec_output_cb		*on_output;	/* service logs (stream 1 or 2) */
	exec_record_cb		*record;
	void			*arg;
};

/*
 * After a sweep: how many objects it removed, and the first failure
 * (status -errno, cause) if any.
 */
typedef void	exec_sweep_cb(int status, unsigned removed, const char *cause, void *arg);

struct executor_ops {
	const char	*name;		/* "shell" */
	/*
	 * Prepare the job: images, volumes, networks, services.  NULL with
	 * *cause when it cannot even begin; otherwise ready is called exactly
	 * once, when the stages may run (status 0) or when preparing failed.
	 * The spec's strings are copied.
	 */
	struct exec_job	*(*job_open)(uv_loop_t *loop, const struct exec_job_spec *spec,
			    exec_job_done_cb *ready, void *arg, char **cause);
	/* Stop preparing: ready comes with -ECANCELED.  A no-op once it came. */
	void		(*job_abort)(struct exec_job *j);
	/*
	 * Remove everything the job made (never reusable cache volumes), also
	 * after a failed or aborted open; closed is called once and the job
	 * is freed after it returns.  No stage may be running.
	 */
	void		(*job_close)(struct exec_job *j, exec_job_done_cb *closed, void *arg);
	/*
	 * Remove what this runner (system_id) left behind in the executor's
	 * engine: everything labelled with it whose job is not in keep, and
	 * the objects named in recorded ("container:NAME", as exec_record_cb
	 * was told).  created_before (unix seconds, 0: any) spares what is
	 * newer, so that a sweep beside running jobs cannot take what a job
	 * that started meanwhile made.  NULL for executors with nothing to
	 * sweep.  cb comes once, unless NULL is returned (with *cause).
	 */
	struct exec_sweep *(*sweep)(uv_loop_t *loop, const void *settings,
			    const char *system_id,
			    const int64_t *keep, size_t n_keep, int64_t created_before,
			    const struct strv *recorded, exec_sweep_cb *cb, void *arg,
			    char **cause);
	/* Stop a sweep: its cb comes, -ECANCELED. */
	void		(*sweep_cancel)(struct exec_sweep *w);
	struct exec	*(*start)(uv_loop_t *loop, const struct exec_stage *stage,
			    exec_output_cb *on_output, exec_done_cb *on_done, void *arg,
			    char **cause);
	/*
	 * Stop the stage: SIGTERM to its whole process group now, SIGKILL
	 * after grace_ms if anything of it is still running.  on_done still
	 * comes, once.  A no-op after on_done.
	 */
	void		(*cancel)(struct exec *e, uint64_t grace_ms);
};

/* The executors this build has, by name; NULL if there is no such one. */
const struct executor_ops	*executor_find(const char *name);

#endif

/*
 * Inside the docker executor: one job's containers, volumes and network,
 * shared by the files that each do one part of it (docker.c the job's
 * life, stage.c a stage, pull.c images, services.c services, sweep.c
 * leftovers), all built on djob.c.  Not for anything outside executors/docker/.
 */
#ifndef EXECUTORS_DOCKER_DJOB_H
#define EXECUTORS_DOCKER_DJOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "executors/docker/engine.h"
#include "executors/docker/settings.h"
#include "executors/docker/spec.h"
#include "executors/executor.h"
#include "lib/strv.h"

/* The job's life; djob_enter() makes every change and logs it. */
enum djob_state {
	DJOB_CONNECTING,	/* GET /_ping */
	DJOB_PULLING,		/* the build and helper images */
	DJOB_BUNDLE,		/* this binary's volume for the helper */
	DJOB_NETWORK,		/* FF_NETWORK_PER_BUILD */
	DJOB_VOLUMES,		/* cache and builds volumes */
	DJOB_SERVICES,		/* pulled, created, started, waited for */
	DJOB_READY,		/* stages run */
	DJOB_FAILED,		/* preparing failed or was aborted; only close is left */
	DJOB_CLOSING,		/* removing what the job made */
	DJOB_CLOSED,
};

/* A container of the job; name is chosen (and recorded) before it is created. */
struct dctr {
	enum ctr_type	 type;
	char		*name;
	char		*id;		/* NULL until created */
	bool		 dirty;		/* a stage was stopped in it: replace before reuse */
};

/* An image the job uses, copied from the spec. */
struct dimage {
	char		*name;
	bool		 has_entrypoint;
	struct strv	 entrypoint;
	bool		 has_command;
	struct strv	 command;
	struct strv	 pull_policy;
	char		*user;
	char		*platform;
	struct strv	 aliases;
	struct strv	 variables;
	char		*registry_auth;	/* secret: never logged */
	char		*auth_source;
	bool		 from_config;
	char		*id;		/* after the pull: what containers are made from */
};

struct dservice {
	struct dimage	 image;
	struct dctr	 ctr;
	struct strv	 aliases;	/* docker_service_aliases() */
	struct strv	 ports;		/* exposed tcp ports, for the health check */
	char		*ip;		/* NULL on the host network */
	struct dctr	 wait;		/* the health check's container */
	struct svc_logs	*logs;		/* CI_DEBUG_SERVICES: its output followed, or NULL */
};

typedef void	djob_step_cb(struct exec_job *j, int status, const char *reason,
		    const char *cause);

struct exec_job {
	uv_loop_t		*loop;
	struct engine		*engine;
	struct docker_settings	 s;		/* a copy: a reload changes nothing for the job */
	enum djob_state		 state;

	/* The spec, copied. */
	int64_t			 job_id;
	struct label_input	 label_in;	/* strings point into own */
	char			*unique_name;
	char			*builds_dir;
	char			*project_dir;
	char			*work_dir;
	bool			 reuse_builds;
	bool			 protected_ref;
	bool			 network_per_build, disable_umask, use_init, native_stop;
	bool			 debug_services;
	uint64_t		 stop_grace_ms;
	struct strv		 env;
	struct strv		 service_env;
	exec_say_cb		*say;
	exec_output_cb		*on_output;
	exec_record_cb		*record;
	void			*arg;
	struct strv		 own;		/* strings label_in points at */

	/* What the job made or uses. */
	char			*project_name;	/* runner-<short>-project-<id>-concurrent-<n> */
	char			*prefix;	/* <project name>-<random>: container names */
	struct dimage		 build_image;
	struct dimage		 helper_image;
	struct dservice		*services;
	size_t			 n_services;
	struct dctr		 build, helper;
	struct strv		 binds;		/* of every job container */
	struct strv		 extra_hosts;	/* service aliases */
	struct strv		 temp_volumes;	/* removed at close */
	char			*network;	/* the per-build network, or NULL */
	char			*network_mode;	/* what the containers are given, or NULL */
	char			*bundle_volume;

	/* Preparing and closing: one engine call at a time. */
	struct engine_call	*call;
	struct svc_run		*services_run;	/* services.c's, while a pull or create of it runs */
	size_t			 next;		/* index within the step */
	exec_job_done_cb	*done;
	void			*done_arg;
	bool			 aborted;
	struct exec		*stage;		/* the stage running, or NULL */
	char			*first_error;	/* close: the first removal that failed */
};

/* djob.c: what every part does with the job. */
void	djob_say(struct exec_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Record an object before creating it; -1 if the journal refused. */
int	djob_record(struct exec_job *j, const char *kind, const char *name);
/* The labels of a container of type t, with extra ("key=value") after them. */
void	djob_labels(struct exec_job *j, struct strv *out, enum ctr_type t,
	    const struct strv *extra);
/* The create body of a build or helper container. */
char	*djob_ctr_body(struct exec_job *j, enum ctr_type t, char **error);
/* POST /containers/create for c with body; then c->id is set.  step once. */
void	djob_create(struct exec_job *j, struct dctr *c, const char *body, djob_step_cb *step);
/* DELETE the container c (404 is done); step once. */
void	djob_remove(struct exec_job *j, struct dctr *c, djob_step_cb *step);
void	dimage_release(struct dimage *img);
void	dctr_release(struct dctr *c);

/* pull.c: make img->id usable, pulling by its policies; step once. */
void	djob_pull(struct exec_job *j, struct dimage *img, bool is_service, djob_step_cb *step);

/* services.c: create, start and wait for every service; step once. */
void	djob_services(struct exec_job *j, djob_step_cb *step);

/*
 * service_logs.c: with CI_DEBUG_SERVICES, every started service's output
 * into the job's log until stop (at close).
 */
void	djob_service_logs_start(struct exec_job *j);
void	djob_service_logs_stop(struct exec_job *j);

/* stage.c: the ops of a stage. */
struct exec	*djob_stage_start(uv_loop_t *loop, const struct exec_stage *stage,
		    exec_output_cb *on_output, exec_done_cb *on_done, void *arg, char **cause);
void		 djob_stage_cancel(struct exec *e, uint64_t grace_ms);

/* sweep.c */
struct exec_sweep *docker_sweep(uv_loop_t *loop, const void *settings, const char *system_id,
	    const int64_t *keep, size_t n_keep, int64_t created_before,
	    const struct strv *recorded, exec_sweep_cb *cb, void *arg, char **cause);
void	docker_sweep_cancel(struct exec_sweep *w);

#endif

/*
 * The world of `runner run`: one loop, one GitLab client, the config, one
 * poller per [[runners]] entry, the jobs they started.  This header is
 * the map of the daemon; daemon.c drives it, poller.c asks GitLab for
 * jobs, job.c runs them.
 *
 * Slots: `concurrent` caps jobs across the process and a job request
 * holds a slot while it is in flight (it may turn into a job), so the
 * runner never takes more jobs than it was told; `limit` caps the jobs of
 * one entry and `request_concurrency` its requests in flight.  A request
 * GitLab holds for a long poll takes one slot of its own entry and none of
 * another's.
 */
#ifndef RUNNER_DAEMON_H
#define RUNNER_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "api/api.h"
#include "runner/config.h"
#include "runner/info.h"

struct job;
struct poller;

/*
 * How the daemon is doing: one way only, from top to bottom.  daemon.c's
 * daemon_enter() is the one place it changes, and runs what each state
 * starts with.
 */
enum daemon_state {
	DAEMON_STARTING,	/* loop, GitLab client, signal watchers being set up */
	DAEMON_RECOVERING,	/* finishing reports a crash left; no polling yet */
	DAEMON_RUNNING,		/* polling and running jobs; reloads come here */
	DAEMON_DRAINING,	/* SIGQUIT or --max-builds: no new jobs; running ones finish */
	DAEMON_ABORTING,	/* SIGTERM/SIGINT: jobs interrupted, reports sent */
	DAEMON_ABANDONING,	/* shutdown_timeout passed: jobs left to the journal */
	DAEMON_CLOSING,		/* out of the loop: every handle being closed */
	DAEMON_STOPPED,		/* the loop is closed */
};

struct daemon {
	enum daemon_state	 state;
	uv_loop_t		*loop;
	struct api		*api;
	struct config		 cfg;		/* the current config */
	char			*config_path;
	char			*state_dir;
	char			*builds_base;	/* the working directory */
	char			*self_path;	/* this binary: the job script calls its helpers */
	char			*user;		/* --user, or NULL */
	char			*system_id;
	struct runner_info	 recovery_info;
	struct poller		*pollers;
	unsigned		 jobs_running;
	unsigned		 requests_in_flight;
	int			 exit_code;
	/*
	 * The pollers call this when a job ended or a request returned (slots
	 * may be free); daemon_run() sets it, so poller.c names nothing above it.
	 */
	void			(*slots_changed)(void *arg);
	void			*slots_changed_arg;
	/* Test knobs from the environment (0: defaults). */
	uint64_t		 trace_interval_ms;
	uint64_t		 keepalive_ms;
	uint64_t		 final_backoff_ms;
	uint64_t		 kill_grace_ms;
	/* run-single: stop after this many jobs (0: no limit). */
	unsigned		 max_builds;
	unsigned		 builds_started;
};

/* poller.c */
struct poller	*poller_new(struct daemon *d, struct runner_config *rc, unsigned index,
		    unsigned count);
/* The entry changed (config reload): take its new settings. */
void		 poller_update(struct poller *p, struct runner_config *rc);
/* No more requests; in-flight ones are cancelled.  Jobs run on. */
void		 poller_stop(struct poller *p);
/* Stop every job of this entry by force (runner_interrupted). */
void		 poller_interrupt_jobs(struct poller *p);
/* shutdown_timeout is over: job_abandon() every job of this entry. */
void		 poller_abandon_jobs(struct poller *p);
/* Free once stopped and without jobs; returns false while jobs remain. */
bool		 poller_free_if_idle(struct poller *p);
/* A slot may have freed: ask now if this entry was waiting for one. */
void		 poller_kick(struct poller *p);
struct poller	*poller_next(struct poller *p);
void		 poller_set_next(struct poller *p, struct poller *next);
/* Append the IDs of this entry's running jobs to *ids (n so far); the new count. */
size_t		 poller_job_ids(const struct poller *p, int64_t **ids, size_t n);
/* The entry as identified across reloads: url + token. */
bool		 poller_matches(const struct poller *p, const struct runner_config *rc);

/* What `run` and `run-single` hand to the daemon. */
struct run_options {
	const char	*user;		/* --user */
	const char	*state_dir;	/* --state-dir, or NULL: next to config.toml */
	unsigned	 max_builds;	/* run-single --max-builds; 0: no limit */
	unsigned	 wait_timeout_s; /* run-single --wait-timeout: idle this long, stop; 0: never */
	const char	*listen_address; /* --listen-address, or NULL: the config's */
	bool		 watch_config;	/* reload when config.toml changes */
};

/* daemon.c: run on a loaded config (taken: cfg is left empty) until told to stop. */
int		 daemon_run(const struct run_options *o, struct config *cfg);

#endif

/*
 * gitlab-runner's own series (gitlab_runner_*), beside the runner_* ones,
 * so that dashboards and alerts written for gitlab-runner work unchanged:
 * the same names, types, label names, label values, buckets and help.
 *
 * Counts of events are updated as they happen (the calls below, from
 * daemon.c, poller.c and job.c).  What is a view of state (the jobs by
 * state and stage, the limits, the request slots, the process state) is
 * set afresh at each scrape by the registry's collector, from the daemon
 * and from the runners and jobs registered here, as gitlab-runner's
 * collectors do.  The request and job calls take the runner's short token
 * (log_token()), which is gitlab-runner's "runner" label.
 */
#ifndef RUNNER_GITLAB_METRICS_H
#define RUNNER_GITLAB_METRICS_H

#include <stdbool.h>
#include <stdint.h>

struct api_job_info;
struct daemon;
struct gitlab_metrics_job;

/* Describe every series and become the collector; d is read at each scrape. */
void	gitlab_metrics_start(struct daemon *d);
/* No collector, no log counter, every runner and job forgotten. */
void	gitlab_metrics_stop(void);
/* config.toml was read (at start, at each reload), or could not be. */
void	gitlab_metrics_config_loaded(bool ok);

/* A job request went out for runner, or came back. */
void	gitlab_metrics_request_start(const char *runner, const char *runner_name,
	    const char *system_id, int64_t request_concurrency);
void	gitlab_metrics_request_end(const char *runner);

/* A job was received: counted, and shown in gitlab_runner_jobs until ended. */
struct gitlab_metrics_job *gitlab_metrics_job_new(const char *runner, const char *runner_name,
	    const char *system_id, const char *executor, const struct api_job_info *info);
/*
 * Where the job is, in gitlab-runner's words: state (pending, running,
 * success, failed, canceled, timedout, terminated), executor_stage;
 * stage NULL keeps the last one.
 */
void	gitlab_metrics_job_at(struct gitlab_metrics_job *j, const char *state,
	    const char *stage, const char *executor_stage);
/* The user's script is reached: gitlab_runner_job_execution_mode_total. */
void	gitlab_metrics_job_dispatched(struct gitlab_metrics_job *j);
/* The job failed with reason (the cause's own, before GitLab's mapping). */
void	gitlab_metrics_job_failed(struct gitlab_metrics_job *j, const char *reason);
/* The job is over: its duration is observed and j freed. */
void	gitlab_metrics_job_end(struct gitlab_metrics_job *j);

#endif

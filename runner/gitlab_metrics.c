/*
 * gitlab-runner's series (gitlab_metrics.h).  Each one is defined as in
 * gitlab-runner's source: commands/multi.go (concurrent, limit),
 * commands/builds_helper.go (jobs, jobs_total, job_duration_seconds, the
 * queue and request concurrency series), helpers/prometheus (errors_total
 * from a log hook, failed_jobs_total), commands/internal (configuration,
 * process_state_info) and common/version.go (version_info).  The API
 * request series are api/gitlab.c's.
 *
 * Labels are written in name order, as the Go client prints them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "lib/buf.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/metrics.h"
#include "lib/version.h"
#include "lib/xmalloc.h"
#include "runner/config.h"
#include "runner/daemon.h"
#include "runner/gitlab_metrics.h"

#define STAGE_SIZE	64

/* What gitlab-runner's buildsHelper keeps per runner token (runnerCounter). */
struct runner_counter {
	struct runner_counter	*next;
	char			*runner;	/* the short token */
	/* Each a whole label, escaped: runner="...", runner_name="...", system_id="...". */
	char			*r, *n, *s;
	char			*rns;		/* r,n,s */
	char			*rs;		/* r,s */
	unsigned		 requests;
	int64_t			 hard_limit;
};

struct gitlab_metrics_job {
	struct gitlab_metrics_job *prev, *next;
	struct runner_counter	*rc;
	uint64_t		 started_ms;
	char			*executor;	/* as configured, for execution_mode */
	const char		*state;		/* static strings */
	const char		*executor_stage;
	char			 stage[STAGE_SIZE];
};

static struct {
	struct daemon		*d;
	struct runner_counter	*runners;
	struct gitlab_metrics_job *jobs;
} gm;

static const char *const error_levels[] = {
	[LOG_LEVEL_WARN] = "warning",
	[LOG_LEVEL_ERROR] = "error",
	[LOG_LEVEL_FATAL] = "fatal",
	[LOG_LEVEL_PANIC] = "panic",
};

/* gitlab-runner's ProcessState names, by the daemon's state. */
static const char *const process_states[] = {
	[DAEMON_STARTING] = "starting",
	[DAEMON_RECOVERING] = "starting",
	[DAEMON_RUNNING] = "running",
	[DAEMON_DRAINING] = "graceful-shutdown",
	[DAEMON_ABORTING] = "forceful-shutdown",
	[DAEMON_ABANDONING] = "forceful-shutdown",
	[DAEMON_CLOSING] = "forceful-shutdown",
	[DAEMON_STOPPED] = "forceful-shutdown",
};
_Static_assert(sizeof(process_states) / sizeof(process_states[0]) == DAEMON_STOPPED + 1,
    "a process state for every daemon state");

static void
label(struct buf *b, const char *name, const char *value)
{
	buf_printf(b, "%s%s=\"", b->len > 0 ? "," : "", name);
	metrics_label_escape(b, value != NULL ? value : "");
	buf_putc(b, '"');
}

static char *
label1(const char *name, const char *value)
{
	struct buf b;

	buf_init(&b, BUF_UNLIMITED);
	label(&b, name, value);
	return buf_detach(&b, NULL);
}

/* ---- the log hook ---- */

static void
count_log_line(enum log_level level)
{
	char labels[32];

	if (level < LOG_LEVEL_WARN || level > LOG_LEVEL_PANIC)
		return;
	snprintf(labels, sizeof(labels), "level=\"%s\"", error_levels[level]);
	metrics_counter_add("gitlab_runner_errors_total", labels, 1);
}

/* ---- runners ---- */

/* getRunnerCounter(): made on first use, kept for the process's life. */
static struct runner_counter *
runner_counter(const char *runner, const char *runner_name, const char *system_id)
{
	struct runner_counter *c;

	for (c = gm.runners; c != NULL; c = c->next)
		if (strcmp(c->runner, runner) == 0)
			return c;
	c = xcalloc(1, sizeof(*c));
	c->runner = xstrdup(runner);
	c->r = label1("runner", runner);
	c->n = label1("runner_name", runner_name);
	c->s = label1("system_id", system_id);
	c->rns = xasprintf("%s,%s,%s", c->r, c->n, c->s);
	c->rs = xasprintf("%s,%s", c->r, c->s);
	c->next = gm.runners;
	gm.runners = c;
	metrics_counter_add("gitlab_runner_jobs_total", c->rns, 0);
	return c;
}

void
gitlab_metrics_request_start(const char *runner, const char *runner_name,
    const char *system_id, int64_t request_concurrency)
{
	struct runner_counter *c = runner_counter(runner, runner_name, system_id);

	c->requests++;
	c->hard_limit = request_concurrency > 1 ? request_concurrency : 1;
}

void
gitlab_metrics_request_end(const char *runner)
{
	struct runner_counter *c;

	for (c = gm.runners; c != NULL; c = c->next)
		if (strcmp(c->runner, runner) == 0 && c->requests > 0) {
			c->requests--;
			return;
		}
}

/* ---- jobs ---- */

struct gitlab_metrics_job *
gitlab_metrics_job_new(const char *runner, const char *runner_name, const char *system_id,
    const char *executor, const struct api_job_info *info)
{
	struct gitlab_metrics_job *j = xcalloc(1, sizeof(*j));
	struct buf b;

	j->executor = xstrdup(executor != NULL && *executor != '\0' ? executor : "unknown");
	j->rc = runner_counter(runner, runner_name, system_id);
	j->started_ms = clock_mono_ms();
	j->state = "pending";
	j->executor_stage = "";
	j->next = gm.jobs;
	if (gm.jobs != NULL)
		gm.jobs->prev = j;
	gm.jobs = j;

	/* addBuild() and evaluateJobQueuingDuration(). */
	metrics_counter_add("gitlab_runner_jobs_total", j->rc->rns, 1);
	metrics_counter_add("gitlab_runner_acceptable_job_queuing_duration_exceeded_total",
	    j->rc->rns, 0);
	metrics_gauge_set("gitlab_runner_job_queue_size", j->rc->rns, (double)info->queue_size);
	metrics_gauge_set("gitlab_runner_job_queue_depth", j->rc->rns, (double)info->queue_depth);
	buf_init(&b, BUF_UNLIMITED);
	label(&b, "project_jobs_running", info->project_jobs_running_on_instance_runners_count);
	buf_printf(&b, ",%s", j->rc->rns);
	metrics_histogram_observe("gitlab_runner_job_queue_duration_seconds", b.ptr,
	    info->time_in_queue_seconds);
	buf_release(&b);
	return j;
}

void
gitlab_metrics_job_at(struct gitlab_metrics_job *j, const char *state, const char *stage,
    const char *executor_stage)
{
	if (j == NULL)
		return;
	j->state = state;
	j->executor_stage = executor_stage;
	if (stage != NULL)
		snprintf(j->stage, sizeof(j->stage), "%s", stage);
}

void
gitlab_metrics_job_dispatched(struct gitlab_metrics_job *j)
{
	struct buf b;

	if (j == NULL)
		return;
	buf_init(&b, BUF_UNLIMITED);
	label(&b, "executor", j->executor);
	buf_puts(&b, ",mode=\"traditional\"");
	metrics_counter_add("gitlab_runner_job_execution_mode_total", b.ptr, 1);
	buf_release(&b);
}

void
gitlab_metrics_job_failed(struct gitlab_metrics_job *j, const char *reason)
{
	struct buf b;

	if (j == NULL)
		return;
	/* No reason is a script failure (ensureNonEmptyFailureReason). */
	buf_init(&b, BUF_UNLIMITED);
	label(&b, "failure_reason", reason != NULL && *reason != '\0' ? reason :
	    "script_failure");
	buf_printf(&b, ",mode=\"traditional\",%s,%s", j->rc->r, j->rc->n);
	metrics_counter_add("gitlab_runner_failed_jobs_total", b.ptr, 1);
	buf_release(&b);
}

void
gitlab_metrics_job_end(struct gitlab_metrics_job *j)
{
	char *labels;

	if (j == NULL)
		return;
	labels = xasprintf("mode=\"traditional\",%s", j->rc->rns);
	metrics_histogram_observe("gitlab_runner_job_duration_seconds", labels,
	    (double)(clock_mono_ms() - j->started_ms) / 1000);
	free(labels);
	if (j->prev != NULL)
		j->prev->next = j->next;
	else
		gm.jobs = j->next;
	if (j->next != NULL)
		j->next->prev = j->prev;
	free(j->executor);
	free(j);
}

/* ---- at each scrape ---- */

static void
collect_jobs(void)
{
	const struct runner_counter *c;
	const struct gitlab_metrics_job *j;
	struct buf b;

	metrics_clear("gitlab_runner_jobs");
	buf_init(&b, BUF_UNLIMITED);
	/* An idle series per runner: the metric is there with no jobs running. */
	for (c = gm.runners; c != NULL; c = c->next) {
		buf_reset(&b);
		buf_printf(&b, "executor_stage=\"idle\",%s,%s,stage=\"idle\",state=\"idle\",%s",
		    c->r, c->n, c->s);
		metrics_gauge_set("gitlab_runner_jobs", b.ptr, 0);
	}
	for (j = gm.jobs; j != NULL; j = j->next) {
		buf_reset(&b);
		label(&b, "executor_stage", j->executor_stage);
		buf_printf(&b, ",%s,%s", j->rc->r, j->rc->n);
		label(&b, "stage", j->stage);
		label(&b, "state", j->state);
		buf_printf(&b, ",%s", j->rc->s);
		metrics_gauge_add("gitlab_runner_jobs", b.ptr, 1);
	}
	buf_release(&b);
}

static void
collect(void *arg)
{
	struct daemon *d = arg;
	const struct runner_counter *c;
	char short_token[LOG_TOKEN_SIZE], state[48];
	size_t i;

	metrics_gauge_set("gitlab_runner_concurrent", "", (double)d->cfg.concurrent);
	metrics_clear("gitlab_runner_limit");
	for (i = 0; i < d->cfg.n_runners; i++) {
		const struct runner_config *rc = &d->cfg.runners[i];
		char *r = label1("runner", log_token(rc->token, short_token));
		char *n = label1("runner_name", rc->name);
		char *sys = label1("system_id", d->system_id);
		char *labels = xasprintf("%s,%s,%s", r, n, sys);

		free(r);
		free(n);
		free(sys);
		metrics_gauge_set("gitlab_runner_limit", labels, (double)rc->limit);
		free(labels);
	}
	collect_jobs();
	for (c = gm.runners; c != NULL; c = c->next) {
		metrics_gauge_set("gitlab_runner_request_concurrency", c->rs, c->requests);
		/* This poller asks only when a slot is free: it never exceeds the limit. */
		metrics_counter_add("gitlab_runner_request_concurrency_exceeded_total", c->rs, 0);
		metrics_gauge_set("gitlab_runner_request_concurrency_hard_limit", c->rs,
		    (double)c->hard_limit);
		/* FF_USE_ADAPTIVE_REQUEST_CONCURRENCY is not implemented: 0, as it stays there. */
		metrics_gauge_set("gitlab_runner_request_concurrency_adaptive_limit", c->rs, 0);
		metrics_gauge_set("gitlab_runner_request_concurrency_used_limit", c->rs,
		    (double)c->hard_limit);
	}
	metrics_clear("gitlab_runner_process_state_info");
	snprintf(state, sizeof(state), "state=\"%s\"", process_states[d->state]);
	metrics_gauge_set("gitlab_runner_process_state_info", state, 1);
}

/* ---- start and stop ---- */

static void
describe(void)
{
	static const double job_bounds[] = { 30, 60, 300, 600, 1800, 3600, 7200, 10800,
	    18000, 36000 };
	static const double queue_bounds[] = { 1, 3, 10, 30, 60, 120, 300, 900, 1800, 3600 };

	metrics_describe("gitlab_runner_version_info", "gauge",
	    "A metric with a constant '1' value labeled by different build stats fields.");
	metrics_describe("gitlab_runner_concurrent", "gauge",
	    "The current value of concurrent setting");
	/* Sic: gitlab-runner's limitDesc reuses the concurrent help. */
	metrics_describe("gitlab_runner_limit", "gauge",
	    "The current value of concurrent setting");
	metrics_describe("gitlab_runner_jobs", "gauge", "The current number of running builds.");
	metrics_describe("gitlab_runner_jobs_total", "counter", "Total number of handled jobs");
	metrics_describe("gitlab_runner_job_execution_mode_total", "counter",
	    "Total number of jobs grouped by execution mode and executor");
	metrics_describe_histogram("gitlab_runner_job_duration_seconds",
	    "Histogram of job durations", job_bounds, sizeof(job_bounds) / sizeof(job_bounds[0]));
	metrics_describe_histogram("gitlab_runner_job_queue_duration_seconds",
	    "A histogram representing job queue duration.", queue_bounds,
	    sizeof(queue_bounds) / sizeof(queue_bounds[0]));
	metrics_describe("gitlab_runner_job_queue_size", "gauge",
	    "A gauge representing the size of the queue for the runner");
	metrics_describe("gitlab_runner_job_queue_depth", "gauge",
	    "A gauge representing the search depth in the queue for the runner");
	metrics_describe("gitlab_runner_acceptable_job_queuing_duration_exceeded_total", "counter",
	    "Counts how often jobs exceed the configured queuing time threshold");
	metrics_describe("gitlab_runner_failed_jobs_total", "counter", "Total number of failed jobs");
	metrics_describe("gitlab_runner_errors_total", "counter", "The number of caught errors.");
	metrics_describe("gitlab_runner_request_concurrency", "gauge",
	    "The current number of concurrent requests for a new job");
	metrics_describe("gitlab_runner_request_concurrency_exceeded_total", "counter",
	    "Count of excess requests above the configured request_concurrency limit");
	metrics_describe("gitlab_runner_request_concurrency_hard_limit", "gauge",
	    "Configured request_concurrency limit");
	metrics_describe("gitlab_runner_request_concurrency_adaptive_limit", "gauge",
	    "Computed adaptive request concurrency limit");
	metrics_describe("gitlab_runner_request_concurrency_used_limit", "gauge",
	    "Used request concurrency limit");
	metrics_describe("gitlab_runner_configuration_loaded_total", "counter",
	    "Total number of times the configuration file was loaded by Runner process");
	metrics_describe("gitlab_runner_configuration_loading_error_total", "counter",
	    "Total number of times the configuration file was not loaded by Runner process due "
	    "to errors");
	metrics_describe("gitlab_runner_configuration_saved_total", "counter",
	    "Total number of times the configuration file was saved by Runner process");
	metrics_describe("gitlab_runner_configuration_saving_error_total", "counter",
	    "Total number of times the configuration file was not saved by Runner process due "
	    "to errors");
	metrics_describe("gitlab_runner_process_state_info", "gauge",
	    "This metric provides info about the current state of the GitLab Runner process");
}

void
gitlab_metrics_start(struct daemon *d)
{
	struct buf b;
	size_t i;

	gm.d = d;
	describe();
	buf_init(&b, BUF_UNLIMITED);
	/* A C build has no Go version, branch or build time: empty, not made up. */
	label(&b, "architecture", version_arch());
	label(&b, "branch", "");
	label(&b, "built_at", "");
	label(&b, "go_version", "");
	label(&b, "name", "runner");
	label(&b, "os", version_os());
	label(&b, "revision", version_revision());
	label(&b, "version", version_number());
	metrics_gauge_set("gitlab_runner_version_info", b.ptr, 1);
	buf_release(&b);
	for (i = LOG_LEVEL_WARN; i <= LOG_LEVEL_PANIC; i++) {
		char labels[32];

		snprintf(labels, sizeof(labels), "level=\"%s\"", error_levels[i]);
		metrics_counter_add("gitlab_runner_errors_total", labels, 0);
	}
	/* Config counters are plain counters: there, at 0, from the start. */
	metrics_counter_add("gitlab_runner_configuration_loading_error_total", "", 0);
	metrics_counter_add("gitlab_runner_configuration_saved_total", "", 0);
	metrics_counter_add("gitlab_runner_configuration_saving_error_total", "", 0);
	metrics_counter_add("gitlab_runner_configuration_loaded_total", "", 1);
	log_set_counter(count_log_line);
	metrics_set_collector(collect, d);
}

void
gitlab_metrics_config_loaded(bool ok)
{
	metrics_counter_add(ok ? "gitlab_runner_configuration_loaded_total" :
	    "gitlab_runner_configuration_loading_error_total", "", 1);
}

void
gitlab_metrics_stop(void)
{
	struct runner_counter *c;
	struct gitlab_metrics_job *j;

	log_set_counter(NULL);
	metrics_set_collector(NULL, NULL);
	while ((j = gm.jobs) != NULL) {
		gm.jobs = j->next;
		free(j->executor);
		free(j);
	}
	while ((c = gm.runners) != NULL) {
		gm.runners = c->next;
		free(c->runner);
		free(c->rns);
		free(c->rs);
		free(c->r);
		free(c->n);
		free(c->s);
		free(c);
	}
	gm.d = NULL;
}

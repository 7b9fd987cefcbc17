/*
 * The job lifecycle: one state enum, one transition function that logs
 * every change and runs the new state's entry action, and one small
 * function per event (GitLab's acknowledgement, a stage's end, the
 * timeout, a cancel or abort from GitLab, a forced shutdown).  How the
 * job ends is apart from its state: enum job_ending, set by job_end_as()
 * alone; the first cause is the one reported.
 *
 * The stages are data: gitlab-runner's list (protocol.md 9.1), each with a
 * kind that says when it runs.  A failure before or in the user steps
 * ends them; after_script still runs, also after a graceful cancel (with
 * CI_JOB_STATUS=canceled) or RUNNER_SCRIPT_TIMEOUT (timedout), but not
 * after the job timeout, an abort or a forced shutdown (9.4, 9.6); cleanup always runs
 * unless GitLab aborted the job.  The text of every stage comes from
 * script.c, made from script_input.c's input; the variables and settings
 * come from vars.c.
 */
#include <errno.h>
#include <pwd.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "executors/executor.h"
#include "lib/buf.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/metrics.h"
#include "lib/mkdirs.h"
#include "lib/version.h"
#include "lib/xmalloc.h"
#include "runner/config.h"
#include "runner/gitlab_metrics.h"
#include "runner/info.h"
#include "runner/job.h"
#include "runner/job_exec.h"
#include "runner/journal.h"
#include "runner/mask.h"
#include "runner/registry_auth.h"
#include "runner/script.h"
#include "runner/script_input.h"
#include "runner/trace.h"
#include "runner/trace_log.h"
#include "runner/vars.h"

extern char **environ;

#define DEFAULT_JOB_TIMEOUT_S	7200
#define DEFAULT_KILL_GRACE_MS	10000

enum job_state {
	JOB_ACKNOWLEDGING,	/* PUT state=running sent; nothing runs yet */
	JOB_PREPARING,		/* the executor's job part is being made (images, services) */
	JOB_RUNNING,		/* stages[stage] is running */
	JOB_STOPPING,		/* stages[stage] was told to stop; waiting for it */
	JOB_CLEANING,		/* the stages are over; the executor removes what it made */
	JOB_REPORTING,		/* the log is complete; the trace delivers it and the report */
	JOB_DONE,		/* done was called; freed once the handles closed */
};

static const char *const state_names[] = {
	[JOB_ACKNOWLEDGING]	= "acknowledging",
	[JOB_PREPARING]		= "preparing",
	[JOB_RUNNING]		= "running",
	[JOB_STOPPING]		= "stopping",
	[JOB_CLEANING]		= "cleaning",
	[JOB_REPORTING]		= "reporting",
	[JOB_DONE]		= "done",
};

/*
 * How a job ends: the first cause is the one reported (state, failure
 * reason, exit code, the log's last line).  Every cause, first or not, is
 * also kept in job->causes: a later one still changes what runs.
 */
enum job_ending {
	JOB_ENDING_NONE,		/* still going */
	JOB_ENDING_SUCCESS,		/* nothing failed; said when the report is made */
	JOB_ENDING_FAILED,		/* a stage failed or did not start; a bad setting */
	JOB_ENDING_SYSTEM_FAILURE,	/* the runner's fault, and the log says so */
	JOB_ENDING_CANCELED,		/* in GitLab, in the script: after_script runs */
	JOB_ENDING_CANCELED_AT_PICKUP,	/* before any stage: job_canceled goes raw */
	JOB_ENDING_TIMED_OUT,		/* the job's timeout: only cleanup still runs */
	JOB_ENDING_SCRIPT_TIMED_OUT,	/* RUNNER_SCRIPT_TIMEOUT: the user steps end */
	JOB_ENDING_ABORTED,		/* GitLab ended the job: nothing more runs */
	JOB_ENDING_INTERRUPTED,		/* a forced shutdown: only cleanup still runs */
	JOB_ENDING_ABANDONED,		/* shutdown_timeout: the journal keeps it */
	JOB_ENDING_DROPPED,		/* GitLab refused the job: no stages, no report */
};

static const char *const ending_names[] = {
	[JOB_ENDING_NONE]		= "none",
	[JOB_ENDING_SUCCESS]		= "success",
	[JOB_ENDING_FAILED]		= "failed",
	[JOB_ENDING_SYSTEM_FAILURE]	= "system_failure",
	[JOB_ENDING_CANCELED]		= "canceled",
	[JOB_ENDING_CANCELED_AT_PICKUP]	= "canceled_at_pickup",
	[JOB_ENDING_TIMED_OUT]		= "timed_out",
	[JOB_ENDING_SCRIPT_TIMED_OUT]	= "script_timed_out",
	[JOB_ENDING_ABORTED]		= "aborted",
	[JOB_ENDING_INTERRUPTED]	= "interrupted",
	[JOB_ENDING_ABANDONED]		= "abandoned",
	[JOB_ENDING_DROPPED]		= "dropped",
};

/* gitlab-runner's BuildRuntimeState once the stages are over (gitlab_runner_jobs). */
static const char *const ending_runtime_states[] = {
	[JOB_ENDING_NONE]		= "success",	/* report() makes it a success */
	[JOB_ENDING_SUCCESS]		= "success",
	[JOB_ENDING_FAILED]		= "failed",
	[JOB_ENDING_SYSTEM_FAILURE]	= "failed",
	[JOB_ENDING_CANCELED]		= "canceled",
	[JOB_ENDING_CANCELED_AT_PICKUP]	= "canceled",
	[JOB_ENDING_TIMED_OUT]		= "timedout",
	[JOB_ENDING_SCRIPT_TIMED_OUT]	= "timedout",
	[JOB_ENDING_ABORTED]		= "canceled",
	[JOB_ENDING_INTERRUPTED]	= "terminated",
	[JOB_ENDING_ABANDONED]		= "terminated",
	[JOB_ENDING_DROPPED]		= "failed",
};
_Static_assert(sizeof(ending_runtime_states) / sizeof(ending_runtime_states[0]) ==
    JOB_ENDING_DROPPED + 1, "a runtime state for every ending");

/* An ending as a bit of job->causes. */
#define CAUSE(e)	(1u << (e))
_Static_assert(JOB_ENDING_DROPPED < 32, "every ending has a bit in job->causes");

/* When a stage runs (see stage_wanted()). */
enum stage_kind {
	STAGE_PRE,	/* prepare_script, get_sources, restore_cache, download_artifacts */
	STAGE_USER,	/* step_<name> */
	STAGE_AFTER,	/* after_script */
	STAGE_POST,	/* archive_cache, upload_artifacts */
	STAGE_CLEANUP,	/* cleanup_file_variables */
};

struct stage {
	enum script_stage	 which;
	enum stage_kind		 kind;
	const struct api_step	*step;		/* user steps and after_script */
};

/* What the stage timer is timing. */
enum stage_timer_mode {
	TIMER_OFF,
	TIMER_SCRIPT,		/* RUNNER_SCRIPT_TIMEOUT: all user steps together */
	TIMER_AFTER_SCRIPT,	/* RUNNER_AFTER_SCRIPT_TIMEOUT */
};

struct job {
	enum job_state		 state;
	struct job_env		 env;
	struct api_job		*payload;
	struct job_settings	 set;
	struct runner_info	 info;
	struct api_creds	 creds;
	char			*url, *ca_file, *cert_file, *key_file;

	struct trace_log	*log;
	struct trace		*trace;
	struct api_call		*ack_call;
	struct exec		*exec;
	/*
	 * The executor's job part (docker), from JOB_PREPARING until the
	 * executor closed it in JOB_CLEANING; xspec is what it was opened
	 * with.  A ready or closed that comes during job_open() or
	 * job_close() itself is kept in early_* and acted on after it.
	 */
	struct job_exec		*xspec;
	struct exec_job		*xjob;
	bool			 in_open;
	bool			 early;
	int			 early_status;
	const char		*early_reason;
	char			*early_cause;
	uv_timer_t		 timeout;
	int			 open_handles;

	struct stage		*stages;
	size_t			 n_stages;
	size_t			 stage;		/* running or last run */
	struct job_prep		 prep;		/* variables, settings, directories */
	struct script_input	 input;		/* what every stage's text is made from */
	bool			 user_phase;	/* the user steps were reached */
	uv_timer_t		 stage_timer;
	enum stage_timer_mode	 timer_mode;
	char			*journal_path;
	char			*log_path;
	struct journal_entry	 journal;

	/*
	 * How it ends, set by job_end_as() only (job_fail() is its failing
	 * form).  ending is the first cause; failure_reason, exit_code and
	 * failure_text are its.  causes holds every cause, first or later,
	 * as CAUSE() bits, because a later one still counts: a timeout after
	 * a failed script skips the post stages, a cancel after a lost log
	 * tells after_script "canceled".
	 */
	enum job_ending		 ending;
	unsigned		 causes;
	const char		*failure_reason;
	int			 exit_code;
	char			*failure_text;
	/*
	 * Not a cause: the log's disk failed, said once (check_log), which
	 * is a cause (a system failure) only if nothing failed before.
	 */
	bool			 log_lost;
	bool			 journaled;	/* the last journal write succeeded */
	char			*prep_error;	/* the job cannot run (GIT_CLONE_PATH refused...) */

	struct gitlab_metrics_job *metrics;	/* until JOB_DONE */
	job_done_cb		*done;
	void			*arg;
};

static void	job_enter(struct job *, enum job_state);
static void	run_next_stage(struct job *);
static void	open_executor(struct job *);
static void	close_executor(struct job *);

/*
 * Where gitlab_runner_jobs shows the job, as gitlab-runner's shell
 * executor would be: its executor stage is "prepare" while the stages
 * run, "cleanup" once they are over.  stage NULL: the last one.
 */
static void
metrics_at(struct job *job, const char *stage)
{
	switch (job->state) {
	case JOB_ACKNOWLEDGING:
		gitlab_metrics_job_at(job->metrics, "pending", stage, "");
		break;
	case JOB_PREPARING:
	case JOB_RUNNING:
	case JOB_STOPPING:
		gitlab_metrics_job_at(job->metrics, "running", stage, "prepare");
		break;
	case JOB_CLEANING:
	case JOB_REPORTING:
		gitlab_metrics_job_at(job->metrics, ending_runtime_states[job->ending], stage,
		    "cleanup");
		break;
	case JOB_DONE:
		break;
	}
}

void
job_settings_release(struct job_settings *s)
{
	free(s->runner_name);
	free(s->short_token);
	free(s->system_id);
	free(s->shell);
	free(s->builds_dir);
	free(s->cache_dir);
	free(s->runner_command);
	free(s->user);
	free(s->pre_build_script);
	free(s->post_build_script);
	free(s->pre_get_sources_script);
	free(s->post_get_sources_script);
	free(s->clone_url);
	free(s->tls_ca_file);
	free(s->tls_cert_file);
	free(s->tls_key_file);
	free(s->state_dir);
	docker_settings_release(&s->docker);
	strv_release(&s->environment);
	memset(s, 0, sizeof(*s));
}

static int64_t
job_id(const struct job *job)
{
	return job->payload->id;
}

/*
 * Map a failure reason to one GitLab accepts, as gitlab-runner does
 * (protocol.md 5.6): supported are the payload's failure_reasons plus
 * script_failure, runner_system_failure and job_execution_timeout.
 */
static const char *
job_failure_reason(const struct strv *supported, const char *reason)
{
	static const char *const always[] = { "script_failure", "runner_system_failure",
	    "job_execution_timeout", NULL };
	static const struct { const char *from, *to; } compat[] = {
		{ "image_pull_failure", "runner_system_failure" },
		{ "runner_configuration_error", "script_failure" },
		{ "runner_external_dependency_failure", "runner_system_failure" },
		{ "runner_unsupported", "runner_system_failure" },
	};
	size_t i, hop;

	if (reason == NULL || *reason == '\0')
		return "script_failure";
	for (hop = 0; hop < 10; hop++) {
		for (i = 0; always[i] != NULL; i++)
			if (strcmp(always[i], reason) == 0)
				return always[i];
		for (i = 0; i < supported->n; i++)
			if (strcmp(supported->v[i], reason) == 0)
				return supported->v[i];
		for (i = 0; i < sizeof(compat) / sizeof(compat[0]); i++)
			if (strcmp(compat[i].from, reason) == 0)
				break;
		if (i == sizeof(compat) / sizeof(compat[0]))
			return "unknown_failure";
		reason = compat[i].to;
	}
	return "unknown_failure";
}

/*
 * The one setter of how a job ends.  The first cause wins: it becomes
 * job->ending and true is returned.  A later one is only added to
 * job->causes.
 */
static bool
job_end_as(struct job *job, enum job_ending ending)
{
	job->causes |= CAUSE(ending);
	if (job->ending != JOB_ENDING_NONE) {
		log_kv(LOG_LEVEL_DEBUG, LOG_FIELDS(LOG_JOB(job_id(job))),
		    "also %s; it ends as %s",
		    ending_names[ending], ending_names[job->ending]);
		return false;
	}
	log_kv(LOG_LEVEL_DEBUG, LOG_FIELDS(LOG_JOB(job_id(job))),
	    "ends as %s", ending_names[ending]);
	job->ending = ending;
	return true;
}

/* Has any of the causes in mask (CAUSE() bits) come, first or later? */
static bool
job_saw(const struct job *job, unsigned mask)
{
	return (job->causes & mask) != 0;
}

/* The report says failed: the first cause is a failure. */
static bool
job_failed(const struct job *job)
{
	return job->ending != JOB_ENDING_NONE && job->ending != JOB_ENDING_SUCCESS &&
	    job->ending != JOB_ENDING_DROPPED;
}

/* Canceled in GitLab, at pickup or while the script ran. */
static bool
job_canceled(const struct job *job)
{
	return job_saw(job, CAUSE(JOB_ENDING_CANCELED) | CAUSE(JOB_ENDING_CANCELED_AT_PICKUP));
}

/* A forced shutdown, waited for (interrupted) or not (abandoned). */
static bool
job_interrupted(const struct job *job)
{
	return job_saw(job, CAUSE(JOB_ENDING_INTERRUPTED) | CAUSE(JOB_ENDING_ABANDONED));
}

/* The job timeout, an abort or a shutdown: no after_script, no post stages. */
static bool
job_stopped(const struct job *job)
{
	return job_saw(job, CAUSE(JOB_ENDING_TIMED_OUT) | CAUSE(JOB_ENDING_ABORTED)) ||
	    job_interrupted(job);
}

/*
 * A cause that fails the job.  Only the first one's reason, exit code and
 * text reach GitLab and the log.
 */
static void
job_fail(struct job *job, enum job_ending ending, const char *reason, int exit_code,
    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void
job_fail(struct job *job, enum job_ending ending, const char *reason, int exit_code,
    const char *fmt, ...)
{
	struct buf b;
	va_list ap;

	if (!job_end_as(job, ending))
		return;
	job->failure_reason = reason;
	job->exit_code = exit_code;
	buf_init(&b, BUF_UNLIMITED);
	va_start(ap, fmt);
	buf_vprintf(&b, fmt, ap);
	va_end(ap);
	job->failure_text = buf_detach(&b, NULL);
}

/*
 * Has the log's disk failed?  Then the log is sealed with the ERROR line
 * (trace_log.h) and the job fails as the runner's fault: its log is not
 * what it printed.  Once, from whichever write or flush met the failure.
 */
static void
check_log(struct job *job)
{
	int err = trace_log_disk_error(job->log);

	if (err == 0 || job->log_lost)
		return;
	job->log_lost = true;
	log_kv(LOG_LEVEL_ERROR, LOG_FIELDS(LOG_JOB(job_id(job))),
	    "the job log could not be written to disk (%s): %s; "
	    "the job fails, GitLab gets the log up to there",
	    trace_log_path(job->log), strerror(err));
	/* After another failure the report stays that failure's. */
	if (!job_failed(job))
		job_fail(job, JOB_ENDING_SYSTEM_FAILURE, "runner_system_failure", 0,
		    "the job log could not be written to disk: %s", strerror(err));
}

static void
job_say(struct job *job, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A runner message in the job's log. */
static void
job_say(struct job *job, const char *fmt, ...)
{
	struct buf b;
	va_list ap;

	buf_init(&b, BUF_UNLIMITED);
	va_start(ap, fmt);
	buf_vprintf(&b, fmt, ap);
	va_end(ap);
	buf_puts(&b, "\033[0;m\n");
	(void)trace_log_write(job->log, TRACE_RUNNER, b.ptr, b.len);	/* check_log */
	buf_release(&b);
	check_log(job);
}

static void
write_journal(struct job *job)
{
	char *cause = NULL;

	job->journaled = journal_write(job->journal_path, &job->journal, &cause) == 0;
	if (!job->journaled) {
		log_kv(LOG_LEVEL_ERROR, LOG_FIELDS(LOG_JOB(job_id(job))),
		    "%s: a crash now would lose this job's report", cause);
		free(cause);
	}
}

/*
 * The daemon leaves with the report undelivered: say where it goes.  A
 * journal that could not be written (a full disk) holds the job's entry
 * from its start, if that was written: the next start reports it failed.
 * With no entry the log file would never be read again: it goes too.
 */
static void
left_to_journal(struct job *job, const char *why)
{
	if (job->journaled)
		log_kv(LOG_LEVEL_WARN, LOG_FIELDS(LOG_JOB(job_id(job))),
		    "%s; it stays in %s and is sent when the runner "
		    "starts again", why, job->journal_path);
	else if (access(job->journal_path, F_OK) == 0)
		log_kv(LOG_LEVEL_ERROR, LOG_FIELDS(LOG_JOB(job_id(job))),
		    "%s, and it could not be written to %s: the next "
		    "start reports the job failed (runner_system_failure) from the entry its "
		    "start left", why, job->journal_path);
	else {
		log_kv(LOG_LEVEL_ERROR, LOG_FIELDS(LOG_JOB(job_id(job))),
		    "%s, and it could not be written to %s: it is lost; "
		    "GitLab will show the job as running until it times out there",
		    why, job->journal_path);
		unlink(job->log_path);
	}
}

/* ---- the end ---- */

static void
on_timeout_closed(uv_handle_t *h)
{
	struct job *job = h->data;

	if (--job->open_handles > 0)
		return;
	free(job->stages);
	if (job->xspec != NULL) {
		job_exec_release(job->xspec);
		free(job->xspec);
	}
	free(job->early_cause);
	script_input_release(&job->input);
	job_prep_release(&job->prep);
	free(job->prep_error);
	api_job_free(job->payload);
	job_settings_release(&job->set);
	runner_info_release(&job->info);
	free(job->url);
	free(job->ca_file);
	free(job->cert_file);
	free(job->key_file);
	free(job->journal_path);
	free(job->log_path);
	free(job->failure_text);
	journal_entry_release(&job->journal);
	free(job);
}

static void
on_final(enum trace_final result, const char *last_answer, void *arg)
{
	struct job *job = arg;

	if (job->state == JOB_DONE)
		return;	/* abandoned: job_abandon() finished it */
	switch (result) {
	case TRACE_FINAL_ACCEPTED:
		/* A canceled job is reported failed; GitLab ends it canceled. */
		log_kv(LOG_LEVEL_INFO, LOG_FIELDS(LOG_JOB(job_id(job))),
		    "finished, %s; GitLab has the report",
		    job_canceled(job) ? "canceled" : job_failed(job) ? "failed" : "succeeded");
		metrics_counter_add("runner_jobs_finished_total", job_failed(job) ?
		    "state=\"failed\"" : "state=\"success\"", 1);
		unlink(job->journal_path);
		unlink(job->log_path);
		break;
	case TRACE_FINAL_GAVE_UP:
		metrics_counter_add("runner_jobs_finished_total", "state=\"report_lost\"", 1);
		log_kv(LOG_LEVEL_ERROR, LOG_FIELDS(LOG_JOB(job_id(job))),
		    "the final report (%s) could not be delivered to %s "
		    "after %" PRId64 " attempts; last answer: %s. GitLab will show the job as "
		    "running until it times out there",
		    job_failed(job) ? "failed" : "success", job->url, job->set.retry_limit,
		    last_answer);
		unlink(job->journal_path);
		unlink(job->log_path);
		break;
	case TRACE_FINAL_CANCELED:
		/* The daemon is going away: the journal keeps the report for next time. */
		left_to_journal(job, "the final report is not delivered yet");
		break;
	}
	job_enter(job, JOB_DONE);
}

/* Everything the job did is in the log: say how it ended, then report. */
static void
report(struct job *job)
{
	struct api_job_update u = { 0 };
	int rc;

	/* What the job printed must be on disk before "Job succeeded" is said. */
	(void)trace_log_flush(job->log);	/* a failure seals the log: check_log */
	check_log(job);
	if (!job_failed(job))
		job_say(job, "\033[32;1mJob succeeded");
	else if (job_saw(job, CAUSE(JOB_ENDING_SYSTEM_FAILURE)))
		job_say(job, "\033[31;1mERROR: Job failed (system failure): %s", job->failure_text);
	else
		job_say(job, "\033[31;1mERROR: Job failed: %s", job->failure_text);
	(void)trace_log_finish(job->log);	/* check_log */
	/* The journal is about to say "finished": the log it names must be whole. */
	if ((rc = trace_log_sync(job->log)) != 0)
		log_kv(LOG_LEVEL_WARN, LOG_FIELDS(LOG_JOB(job_id(job))),
		    "cannot write the log to %s: %s",
		    trace_log_path(job->log), strerror(-rc));
	check_log(job);

	if (job->ending == JOB_ENDING_NONE)
		(void)job_end_as(job, JOB_ENDING_SUCCESS);
	u.state = job_failed(job) ? "failed" : "success";
	if (job_failed(job)) {
		const struct strv *supported = &job->payload->features.failure_reasons;

		/* At pickup, job_canceled goes raw (protocol.md 5.4 step 3). */
		u.failure_reason = job_saw(job, CAUSE(JOB_ENDING_CANCELED_AT_PICKUP)) ?
		    job->failure_reason : job_failure_reason(supported, job->failure_reason);
		u.exit_code = job->exit_code;
		gitlab_metrics_job_failed(job->metrics, job->failure_reason);
	}
	u.has_output = true;
	job->journal.finished = true;
	job->journal.state = xstrdup(u.state);
	job->journal.failure_reason = u.failure_reason != NULL ? xstrdup(u.failure_reason) : NULL;
	job->journal.exit_code = u.exit_code;
	write_journal(job);
	if (job_saw(job, CAUSE(JOB_ENDING_ABANDONED))) {
		left_to_journal(job, "the runner is leaving before the final report is sent");
		job_enter(job, JOB_DONE);
		return;
	}
	trace_finish(job->trace, &u, on_final, job);
}

/* ---- stages ---- */

static void
on_output(int stream, const char *data, size_t len, void *arg)
{
	struct job *job = arg;

	(void)trace_log_write(job->log, stream == 2 ? TRACE_STDERR : TRACE_STDOUT, data, len);
	check_log(job);	/* the job runs on; its output is no longer kept */
}

static void
section(struct job *job, const char *edge, const char *name)
{
	char line[256];
	int n;

	if (!job->payload->features.trace_sections)
		return;
	n = snprintf(line, sizeof(line), "section_%s:%lld:%s\r\033[0K", edge,
	    (long long)time(NULL), name);
	(void)trace_log_write(job->log, TRACE_RUNNER, line, (size_t)n);
	check_log(job);
}

/* gitlab-runner's titles, printed before a stage runs. */
static const char *
stage_title(const struct stage *st, bool failed)
{
	switch (st->which) {
	case SCRIPT_PREPARE:			return "Preparing environment";
	case SCRIPT_GET_SOURCES:		return "Getting source from Git repository";
	case SCRIPT_RESTORE_CACHE:		return "Restoring cache";
	case SCRIPT_DOWNLOAD_ARTIFACTS:		return "Downloading artifacts";
	case SCRIPT_STEP:			return NULL;	/* named after the step */
	case SCRIPT_AFTER_SCRIPT:		return "Running after_script";
	case SCRIPT_ARCHIVE_CACHE:		return failed ? "Saving cache for failed job" :
						    "Saving cache for successful job";
	case SCRIPT_UPLOAD_ARTIFACTS:		return failed ? "Uploading artifacts for failed job" :
						    "Uploading artifacts for successful job";
	case SCRIPT_CLEANUP:			return "Cleaning up project directory and file "
						    "based variables";
	}
	return "";
}

static void	on_stage_timer(uv_timer_t *);

static void
stage_timer_start(struct job *job, enum stage_timer_mode mode, int64_t ns)
{
	job->timer_mode = mode;
	uv_timer_start(&job->stage_timer, on_stage_timer, (uint64_t)(ns / 1000000), 0);
}

static void
stage_timer_stop(struct job *job)
{
	job->timer_mode = TIMER_OFF;
	uv_timer_stop(&job->stage_timer);
}

static void
on_stage_done(int status, int exit_code, void *arg)
{
	struct job *job = arg;
	struct stage *st = &job->stages[job->stage];
	char name[64];

	job->exec = NULL;
	script_stage_name(&job->input.sj, st->which, name, sizeof(name));
	section(job, "end", name);
	if (job->state == JOB_DONE)
		return;
	if (job->timer_mode == TIMER_AFTER_SCRIPT)
		stage_timer_stop(job);
	if (status < 0)
		job_fail(job, JOB_ENDING_FAILED, "runner_system_failure", 0, "%s: %s", name,
		    strerror(-status));
	else if (exit_code != 0) {
		switch (st->kind) {
		case STAGE_PRE:
		case STAGE_USER:
			job_fail(job, JOB_ENDING_FAILED, "script_failure", exit_code,
			    "exit code %d", exit_code);
			break;
		case STAGE_AFTER:
			if (!job->prep.settings.after_script_ignore_errors)
				job_fail(job, JOB_ENDING_FAILED, "script_failure", exit_code,
				    "after_script: exit code %d", exit_code);
			else
				job_say(job, "\033[0;33mWARNING: after_script failed, but the job "
				    "continues: exit code %d", exit_code);
			break;
		case STAGE_POST:
			/* Artifacts that did not reach GitLab fail the job, as in gitlab-runner. */
			if (st->which == SCRIPT_UPLOAD_ARTIFACTS && !job_failed(job)) {
				job_fail(job, JOB_ENDING_FAILED, "script_failure", exit_code,
				    "%s: exit code %d", name, exit_code);
				break;
			}
			/* FALLTHROUGH */
		case STAGE_CLEANUP:
			job_say(job, "\033[0;33mWARNING: %s failed: exit code %d", name, exit_code);
			break;
		}
	}
	run_next_stage(job);
}

/* Whether a stage runs, given how the job went so far. */
static bool
stage_wanted(const struct job *job, const struct stage *st)
{
	switch (st->kind) {
	case STAGE_PRE:
	case STAGE_USER:
		return !job_stopped(job) && !job_failed(job) && !job_canceled(job);
	case STAGE_AFTER:
	case STAGE_POST:
		return !job_stopped(job) && job->user_phase;
	case STAGE_CLEANUP:
		return !job_saw(job, CAUSE(JOB_ENDING_ABORTED) | CAUSE(JOB_ENDING_ABANDONED));
	}
	return false;
}

/*
 * after_script's CI_JOB_STATUS, as gitlab-runner's runtimeStateAndError()
 * names how the user steps ended: a cancel first, then a timeout
 * (RUNNER_SCRIPT_TIMEOUT; the job's own timeout skips after_script).
 */
static const char *
after_script_status(const struct job *job)
{
	if (job_canceled(job))
		return "canceled";
	if (job_saw(job, CAUSE(JOB_ENDING_SCRIPT_TIMED_OUT)))
		return "timedout";
	return job_failed(job) ? "failed" : "success";
}

static void
run_next_stage(struct job *job)
{
	const struct executor_ops *ex = job->env.executor;
	struct exec_stage es;
	struct stage *st = NULL;
	const char *title;
	char *script = NULL, *cause = NULL, name[64];
	size_t i;

	for (i = job->state == JOB_ACKNOWLEDGING || job->state == JOB_PREPARING ? 0 :
	    job->stage + 1; i < job->n_stages; i++) {
		st = &job->stages[i];
		if (!stage_wanted(job, st))
			continue;
		script_input_stage(&job->input, st->step, job_failed(job),
		    st->kind != STAGE_AFTER ? "running" : after_script_status(job));
		if ((script = script_stage(&job->input.sj, st->which)) != NULL)
			break;	/* NULL: nothing to do, skipped without a section */
	}
	if (i >= job->n_stages) {
		stage_timer_stop(job);
		job_enter(job, job->xjob != NULL ? JOB_CLEANING : JOB_REPORTING);
		return;
	}
	job->stage = i;
	if (job->state != JOB_RUNNING)
		job_enter(job, JOB_RUNNING);
	if (st->kind == STAGE_USER && !job->user_phase) {
		job->user_phase = true;
		gitlab_metrics_job_dispatched(job->metrics);
		if (job->prep.settings.script_timeout_ns > 0)
			stage_timer_start(job, TIMER_SCRIPT, job->prep.settings.script_timeout_ns);
	} else if (st->kind != STAGE_USER && job->timer_mode == TIMER_SCRIPT)
		stage_timer_stop(job);
	if (st->kind == STAGE_AFTER)
		stage_timer_start(job, TIMER_AFTER_SCRIPT,
		    job->prep.settings.after_script_timeout_ns);

	script_stage_name(&job->input.sj, st->which, name, sizeof(name));
	metrics_at(job, name);
	section(job, "start", name);
	if ((title = stage_title(st, job_failed(job))) != NULL)
		job_say(job, "\033[36;1m%s", title);
	else
		job_say(job, "\033[36;1mExecuting \"%s\" stage of the job script", name);
	memset(&es, 0, sizeof(es));
	es.name = name;
	es.shell = job->set.shell;
	es.script = script;
	es.env = environ;	/* the job's variables are exported by the script */
	es.cwd = NULL;
	es.user = job->xjob == NULL ? job->set.user : NULL;	/* --user is the shell's */
	es.job = job->xjob;
	/* gitlab-runner's predefined stages run in the helper, the user's in the image. */
	es.where = st->kind == STAGE_USER || st->kind == STAGE_AFTER ? EXEC_IN_BUILD :
	    EXEC_IN_HELPER;
	job->exec = ex->start(job->env.loop, &es, on_output, on_stage_done, job, &cause);
	explicit_bzero(script, strlen(script));
	free(script);
	if (job->exec == NULL) {
		job_fail(job, JOB_ENDING_FAILED, "runner_system_failure", 0, "%s", cause);
		free(cause);
		section(job, "end", name);
		run_next_stage(job);
	}
}

/*
 * Stop the running stage; on_stage_done() comes when it has.  While the
 * executor prepares, stop that instead: its ready comes, canceled.
 */
static void
stop_stage(struct job *job, uint64_t grace_ms)
{
	if (job->state == JOB_PREPARING) {
		if (job->xjob != NULL)
			job->env.executor->job_abort(job->xjob);
		return;
	}
	if (job->exec != NULL) {
		job->env.executor->cancel(job->exec, grace_ms);
		if (job->state == JOB_RUNNING)
			job_enter(job, JOB_STOPPING);
	} else if (job->state == JOB_RUNNING)
		run_next_stage(job);
}

static uint64_t
kill_grace(const struct job *job)
{
	return job->set.kill_grace_ms ? job->set.kill_grace_ms : DEFAULT_KILL_GRACE_MS;
}

/* ---- events ---- */

static void
on_timeout(uv_timer_t *t)
{
	struct job *job = t->data;
	int64_t secs = job->payload->runner_info.timeout > 0 ?
	    job->payload->runner_info.timeout : DEFAULT_JOB_TIMEOUT_S;

	if (job->state >= JOB_CLEANING)
		return;
	job_fail(job, JOB_ENDING_TIMED_OUT, "job_execution_timeout", 0,
	    "execution took longer than %" PRId64 " seconds", secs);
	stop_stage(job, kill_grace(job));
}

static void
on_cancel_requested(void *arg)
{
	struct job *job = arg;
	const struct stage *st;

	if (job->state != JOB_RUNNING && job->state != JOB_PREPARING)
		return;
	st = &job->stages[job->stage];
	if (st->kind != STAGE_USER && st->kind != STAGE_PRE)
		return;
	job_fail(job, JOB_ENDING_CANCELED, "job_canceled", 0, "canceled");
	job_say(job, "\033[0;33mWARNING: script canceled externally (UI, API)");
	log_kv(LOG_LEVEL_INFO, LOG_FIELDS(LOG_JOB(job_id(job))),
	    "canceled in GitLab: stopping the job's script, then "
	    "after_script");
	stop_stage(job, kill_grace(job));
}

static void
on_aborted(void *arg)
{
	struct job *job = arg;

	if (job->state >= JOB_CLEANING || job->state == JOB_ACKNOWLEDGING)
		return;
	job_fail(job, JOB_ENDING_ABORTED, "job_canceled", 0,
	    "aborted: the job was canceled or failed in GitLab");
	log_kv(LOG_LEVEL_INFO, LOG_FIELDS(LOG_JOB(job_id(job))),
	    "GitLab ended the job: stopping it");
	stop_stage(job, kill_grace(job));
}

static void
on_stage_timer(uv_timer_t *t)
{
	struct job *job = t->data;
	enum stage_timer_mode mode = job->timer_mode;

	job->timer_mode = TIMER_OFF;
	if (job->state != JOB_RUNNING || job->exec == NULL)
		return;
	if (mode == TIMER_SCRIPT) {
		/* Only the user steps end; after_script and cleanup still run (9.4). */
		job_fail(job, JOB_ENDING_SCRIPT_TIMED_OUT, "job_execution_timeout", 0,
		    "the script took longer than RUNNER_SCRIPT_TIMEOUT");
		stop_stage(job, kill_grace(job));
	} else if (mode == TIMER_AFTER_SCRIPT) {
		job_say(job, "\033[0;33mWARNING: after_script took longer than "
		    "RUNNER_AFTER_SCRIPT_TIMEOUT: stopping it");
		job->env.executor->cancel(job->exec, kill_grace(job));
	}
}

void
job_interrupt(struct job *job)
{
	if (job->state >= JOB_CLEANING)
		return;
	job_fail(job, JOB_ENDING_INTERRUPTED, "runner_interrupted", 0,
	    "aborted: the runner is shutting down");
	if (job->state == JOB_ACKNOWLEDGING) {
		/* The acknowledgement's answer moves it on; nothing runs yet. */
		return;
	}
	stop_stage(job, 1000);
}

void
job_abandon(struct job *job)
{
	if (job->state == JOB_DONE || job_saw(job, CAUSE(JOB_ENDING_ABANDONED)))
		return;
	job_fail(job, JOB_ENDING_ABANDONED, "runner_interrupted", 0,
	    "aborted: the runner is shutting down");
	switch (job->state) {
	case JOB_ACKNOWLEDGING:
		job_enter(job, JOB_REPORTING);
		break;
	case JOB_PREPARING:
		/* The executor's ready comes canceled; cleaning leads to the report. */
		stop_stage(job, 0);
		break;
	case JOB_CLEANING:
		/* Removing the job's containers is quick; the report stops there. */
		break;
	case JOB_RUNNING:
	case JOB_STOPPING:
		/* on_stage_done() moves on to the report, which stops there. */
		if (job->exec != NULL)
			job->env.executor->cancel(job->exec, 0);
		else
			run_next_stage(job);
		break;
	case JOB_REPORTING: {
		struct trace *t = job->trace;

		/*
		 * Closing the trace calls on_final() with TRACE_FINAL_CANCELED,
		 * which keeps the journal and finishes the job.
		 */
		job->trace = NULL;
		trace_close(t);
		break;
	}
	case JOB_DONE:
		break;
	}
}

/*
 * A directory the stages write below.  A failure is the runner's, not the
 * script's.  With --user, a directory we just made is given to the user,
 * as the user's own working directory is under gitlab-runner; one that
 * existed is left as its owner set it up.
 */
static int
stage_dir(struct job *job, const char *dir, const char *what, const char *key)
{
	struct passwd *pw;
	bool created;

	if (mkdirs(dir, 0755, &created) == -1) {
		job_fail(job, JOB_ENDING_SYSTEM_FAILURE, "runner_system_failure", 0,
		    "cannot create the %s directory %s: %s (check %s and that this user may "
		    "write there)", what, dir, strerror(errno), key);
		return -1;
	}
	if (!created || job->set.user == NULL)
		return 0;
	if ((pw = getpwnam(job->set.user)) == NULL || chown(dir, pw->pw_uid, pw->pw_gid) == -1) {
		job_fail(job, JOB_ENDING_SYSTEM_FAILURE, "runner_system_failure", 0,
		    "cannot give the %s directory %s to user %s: %s", what, dir, job->set.user,
		    pw == NULL ? "no such user" : strerror(errno));
		return -1;
	}
	return 0;
}

static int
prepare_dirs(struct job *job)
{
	if (stage_dir(job, job->set.builds_dir, "builds", "builds_dir") == -1)
		return -1;
	if (job->payload->n_caches > 0 && job->set.cache_dir != NULL &&
	    stage_dir(job, job->set.cache_dir, "cache", "cache_dir") == -1)
		return -1;
	return 0;
}

/* ---- the executor's job part (docker) ---- */

static void
on_exec_say(const char *line, void *arg)
{
	job_say(arg, "%s", line);
}

/* Into the journal before the executor creates it: a crash cannot leak it. */
static int
on_exec_record(const char *kind, const char *name, void *arg)
{
	struct job *job = arg;

	strv_push_owned(&job->journal.executor_objects, xasprintf("%s:%s", kind, name));
	write_journal(job);
	return job->journaled ? 0 : -1;
}

static void
prepared(struct job *job, int status, const char *reason, const char *cause)
{
	if (status == 0) {
		run_next_stage(job);	/* a cancel that came meanwhile skips to cleanup */
		return;
	}
	if (status != -ECANCELED || !job_failed(job)) {
		if (reason != NULL && strcmp(reason, "runner_system_failure") == 0)
			job_fail(job, JOB_ENDING_SYSTEM_FAILURE, reason, 0, "%s", cause);
		else
			job_fail(job, JOB_ENDING_FAILED, reason != NULL ? reason :
			    "runner_system_failure", 0, "%s", cause);
	}
	job_enter(job, JOB_CLEANING);
}

static void
on_prepared(int status, const char *reason, const char *cause, void *arg)
{
	struct job *job = arg;

	if (job->in_open) {
		job->early = true;
		job->early_status = status;
		job->early_reason = reason;
		job->early_cause = xstrdup(cause != NULL ? cause : "");
		return;
	}
	prepared(job, status, reason, cause != NULL ? cause : "");
}

static void
open_executor(struct job *job)
{
	const struct executor_ops *ex = job->env.executor;
	char *cause = NULL;

	for (size_t i = 0; i < job->xspec->auth_warnings.n; i++)
		job_say(job, "%s", job->xspec->auth_warnings.v[i]);
	job->in_open = true;
	job->xjob = ex->job_open(job->env.loop, &job->xspec->spec, on_prepared, job, &cause);
	job->in_open = false;
	if (job->xjob == NULL) {
		job_fail(job, JOB_ENDING_SYSTEM_FAILURE, "runner_system_failure", 0, "%s", cause);
		free(cause);
		job_enter(job, JOB_REPORTING);
		return;
	}
	if (job->early) {
		job->early = false;
		prepared(job, job->early_status, job->early_reason, job->early_cause);
	}
}

static void
on_closed(int status, const char *reason, const char *cause, void *arg)
{
	struct job *job = arg;

	(void)reason;
	job->xjob = NULL;	/* freed by the executor after we return */
	if (status != 0) {
		log_kv(LOG_LEVEL_WARN, LOG_FIELDS(LOG_JOB(job_id(job))),
		    "cleaning up after the job: %s", cause);
		job_say(job, "\033[0;33mWARNING: cleaning up after the job: %s", cause);
	}
	if (job->in_open) {
		job->early = true;	/* called from job_close(): close_executor() goes on */
		return;
	}
	job_enter(job, JOB_REPORTING);
}

static void
close_executor(struct job *job)
{
	job->in_open = true;
	job->env.executor->job_close(job->xjob, on_closed, job);
	job->in_open = false;
	if (job->early) {
		job->early = false;
		job_enter(job, JOB_REPORTING);
	}
}

static void
on_acknowledged(enum api_update_result result, const struct api_answer *answer,
    const struct api_job_state *st, void *arg)
{
	struct job *job = arg;

	job->ack_call = NULL;
	if (result == API_UPDATE_CANCELED || job->state != JOB_ACKNOWLEDGING)
		return;
	if (result == API_UPDATE_ABORT) {
		/* GitLab took the job back: no stages, no report (protocol.md 5.4). */
		log_kv(LOG_LEVEL_WARN, LOG_FIELDS(LOG_JOB(job_id(job))),
		    "GitLab refused to let this runner run the job (%s); "
		    "dropping it", answer->message);
		(void)job_end_as(job, JOB_ENDING_DROPPED);
		unlink(job->journal_path);
		unlink(job->log_path);
		job_enter(job, JOB_DONE);
		return;
	}
	if (st->cancel_requested) {
		job_fail(job, JOB_ENDING_CANCELED_AT_PICKUP, "job_canceled", 0,
		    "canceled before it started");
		job_enter(job, JOB_REPORTING);
		return;
	}
	if (job_interrupted(job)) {
		job_enter(job, JOB_REPORTING);
		return;
	}
	if (job->payload->image.unsupported_options.n > 0) {
		job_say(job, "\033[31;1mERROR: unsupported executor options: %s",
		    job->payload->image.unsupported_options.v[0]);
		job_fail(job, JOB_ENDING_SYSTEM_FAILURE, "runner_system_failure", 3,
		    "unsupported executor options");
		job_enter(job, JOB_REPORTING);
		return;
	}
	if (job->payload->run_steps) {
		/*
		 * Its steps are for a step runner, which this runner has not:
		 * with no script of its own the job would pass having run
		 * nothing.
		 */
		job_say(job, "\033[31;1mERROR: this job gives its steps with the `run:` keyword "
		    "(GitLab Functions), which this runner cannot run: it has no step runner; "
		    "use `script:`");
		job_fail(job, JOB_ENDING_FAILED, "runner_unsupported", 3,
		    "GitLab Functions (`run:`) are not supported by this runner");
		job_enter(job, JOB_REPORTING);
		return;
	}
	job_say(job, "\033[36;1mPreparing the \"%s\" executor", job->env.executor->name);
	if (job->xspec == NULL) {
		job_say(job, "Using Shell (%s) executor...", job->set.shell);
		if (prepare_dirs(job) != 0) {
			job_enter(job, JOB_REPORTING);
			return;
		}
	}
	if (job->prep_error != NULL) {
		job_say(job, "\033[31;1mERROR: %s", job->prep_error);
		job_fail(job, JOB_ENDING_FAILED, "runner_configuration_error", 0, "%s",
		    job->prep_error);
		job_enter(job, JOB_REPORTING);
		return;
	}
	if (job->xspec != NULL)
		job_enter(job, JOB_PREPARING);
	else
		run_next_stage(job);
}

/* The transition function: every change of state goes through here. */
static void
job_enter(struct job *job, enum job_state to)
{
	log_kv(LOG_LEVEL_DEBUG, LOG_FIELDS(LOG_JOB(job_id(job))),
	    "%s -> %s", state_names[job->state],
	    state_names[to]);
	job->state = to;
	metrics_at(job, NULL);
	switch (to) {
	case JOB_REPORTING:
		uv_timer_stop(&job->timeout);
		stage_timer_stop(job);
		report(job);
		break;
	case JOB_DONE:
		uv_timer_stop(&job->timeout);
		if (job->trace != NULL) {
			trace_close(job->trace);
			job->trace = NULL;
		}
		if (job->ack_call != NULL)
			api_call_cancel(job->ack_call);
		trace_log_close(job->log, false);
		job->log = NULL;
		gitlab_metrics_job_end(job->metrics);
		job->metrics = NULL;
		job->done(job, job->arg);
		uv_close((uv_handle_t *)&job->timeout, on_timeout_closed);
		uv_close((uv_handle_t *)&job->stage_timer, on_timeout_closed);
		break;
	case JOB_PREPARING:
		open_executor(job);
		break;
	case JOB_CLEANING:
		close_executor(job);
		break;
	case JOB_ACKNOWLEDGING:
	case JOB_RUNNING:
	case JOB_STOPPING:
		break;
	}
}

/* ---- start ---- */

static struct masker *
make_masker(const struct job *job)
{
	const struct strv *custom = &job->payload->features.token_mask_prefixes;
	const char *const *def = masker_default_prefixes(job_vars_feature_flag(
	    &job->prep.vars, "FF_MASK_ALL_DEFAULT_TOKENS"));
	struct strv phrases = { 0 }, prefixes = { 0 };
	struct masker *m;
	size_t i;

	job_vars_masked(&job->prep.vars, &phrases);
	/*
	 * The job token is a secret whatever the variables say; so are the
	 * tokens of the jobs whose artifacts this one downloads.
	 */
	strv_push(&phrases, job->payload->token);
	for (i = 0; i < job->payload->n_dependencies; i++)
		if (job->payload->dependencies[i].token != NULL)
			strv_push(&phrases, job->payload->dependencies[i].token);
	/* The payload's and the defaults together; the masker ranks and cuts them. */
	for (i = 0; i < custom->n; i++)
		strv_push(&prefixes, custom->v[i]);
	for (i = 0; def[i] != NULL; i++)
		strv_push(&prefixes, def[i]);
	m = masker_new((const char *const *)phrases.v, phrases.n,
	    (const char *const *)prefixes.v, prefixes.n, true);
	strv_release(&phrases);
	strv_release(&prefixes);
	return m;
}

static void
add_stage(struct job *job, enum script_stage which, enum stage_kind kind,
    const struct api_step *step)
{
	job->stages[job->n_stages].which = which;
	job->stages[job->n_stages].kind = kind;
	job->stages[job->n_stages++].step = step;
}

/* gitlab-runner's stages in order (protocol.md 9.1). */
static void
build_stages(struct job *job)
{
	const struct api_step *after = NULL;
	size_t i;

	job->stages = xcalloc(job->payload->n_steps + 9, sizeof(*job->stages));
	add_stage(job, SCRIPT_PREPARE, STAGE_PRE, NULL);
	add_stage(job, SCRIPT_GET_SOURCES, STAGE_PRE, NULL);
	add_stage(job, SCRIPT_RESTORE_CACHE, STAGE_PRE, NULL);
	add_stage(job, SCRIPT_DOWNLOAD_ARTIFACTS, STAGE_PRE, NULL);
	for (i = 0; i < job->payload->n_steps; i++) {
		const struct api_step *step = &job->payload->steps[i];

		if (step->name != NULL && strcmp(step->name, "after_script") == 0)
			after = step;
		else
			add_stage(job, SCRIPT_STEP, STAGE_USER, step);
	}
	if (after != NULL)
		add_stage(job, SCRIPT_AFTER_SCRIPT, STAGE_AFTER, after);
	add_stage(job, SCRIPT_ARCHIVE_CACHE, STAGE_POST, NULL);
	add_stage(job, SCRIPT_UPLOAD_ARTIFACTS, STAGE_POST, NULL);
	add_stage(job, SCRIPT_CLEANUP, STAGE_CLEANUP, NULL);
}

struct job *
job_start(const struct job_env *env, struct api_job *payload, struct job_settings *settings,
    const struct api_creds *creds, struct runner_info *info, const struct runner_config *rc,
    job_done_cb *done, void *arg)
{
	struct job *job = xcalloc(1, sizeof(*job));
	struct trace_log_config lc = { 0 };
	struct trace_params tp = { 0 };
	struct api_job_update ack = { .state = "running" };
	char *jdir, *cause = NULL;
	int64_t timeout_s;
	int i;

	job->env = *env;
	job->payload = payload;
	job->set = *settings;
	memset(settings, 0, sizeof(*settings));
	job->info = *info;
	memset(info, 0, sizeof(*info));
	job->url = xstrdup(creds->url);
	job->ca_file = creds->tls_ca_file ? xstrdup(creds->tls_ca_file) : NULL;
	job->cert_file = creds->tls_cert_file ? xstrdup(creds->tls_cert_file) : NULL;
	job->key_file = creds->tls_key_file ? xstrdup(creds->tls_key_file) : NULL;
	job->creds.url = job->url;
	job->creds.token = "";
	job->creds.tls_ca_file = job->ca_file;
	job->creds.tls_cert_file = job->cert_file;
	job->creds.tls_key_file = job->key_file;
	job->creds.short_token = job->set.short_token;
	job->creds.system_id = job->set.system_id;
	job->done = done;
	job->arg = arg;
	job->state = JOB_ACKNOWLEDGING;	/* the first state; job_enter() makes every change */
	job->metrics = gitlab_metrics_job_new(job->set.short_token, job->set.runner_name,
	    job->set.system_id, rc->executor, &payload->job_info);
	uv_timer_init(env->loop, &job->timeout);
	job->timeout.data = job;
	uv_timer_init(env->loop, &job->stage_timer);
	job->stage_timer.data = job;
	job->open_handles = 2;

	/* Variables, settings and directories, as gitlab-runner works them out (vars.c). */
	{
		struct job_vars_input in = { 0 };
		char arch[64];

		snprintf(arch, sizeof(arch), "%s/%s", version_os(), version_arch());
		in.short_token = job->set.short_token;
		in.builds_dir = job->set.builds_dir;
		in.concurrent_id = job->set.concurrent_id;
		in.concurrent_project_id = job->set.concurrent_project_id;
		in.job_timeout = payload->runner_info.timeout;
		in.environment = &job->set.environment;
		in.rc = rc;
		/* The shell's builds directory is shared by jobs; a container's is its own. */
		in.shared_env = env->executor->job_open == NULL;
		in.tls_ca_file = job->set.tls_ca_file;
		in.tls_cert_file = job->set.tls_cert_file;
		in.tls_key_file = job->set.tls_key_file;
		in.version = version_number();
		in.revision = version_revision();
		in.arch = arch;
		if (job_prepare(&job->prep, payload, &in, &cause) != 0) {
			job->prep_error = cause;
			cause = NULL;
		}
	}
	build_stages(job);
	script_input_make(&job->input, payload, &job->set, &job->prep, job->url);
	if (env->executor->job_open != NULL) {
		struct job_exec_input xi = {
			.payload = payload,
			.prep = &job->prep,
			.set = &job->set,
			.settings = &job->set.docker,
			.runner_token = creds->token,
			.runner_id = rc->id,
			.stop_grace_ms = kill_grace(job),
		};
		char *wd = xasprintf("%s/executor", job->set.state_dir);
		char *home_path = NULL, *home = registry_home_config(&home_path);

		xi.work_dir = wd;
		xi.home_config = home;
		xi.home_config_path = home_path;
		job->xspec = xcalloc(1, sizeof(*job->xspec));
		job_exec_make(job->xspec, &xi);
		free(wd);
		if (home != NULL)
			explicit_bzero(home, strlen(home));
		free(home);
		free(home_path);
		job->xspec->spec.say = on_exec_say;
		job->xspec->spec.on_output = on_output;
		job->xspec->spec.record = on_exec_record;
		job->xspec->spec.arg = job;
	}

	if ((jdir = journal_dir(job->set.state_dir, &cause)) == NULL) {
		log_kv(LOG_LEVEL_ERROR, LOG_FIELDS(LOG_JOB(payload->id)),
		    "%s", cause);
		free(cause);
		jdir = xstrdup("/tmp");
	}
	job->journal_path = journal_path(jdir, payload->id, ".toml");
	job->log_path = journal_path(jdir, payload->id, ".log");
	free(jdir);

	lc.path = job->log_path;
	lc.limit = job->set.output_limit;
	lc.timestamps = job_vars_feature_flag(&job->prep.vars, "FF_TIMESTAMPS");
	/* The streams' maskers share one set of compiled rules. */
	lc.masker[0] = make_masker(job);
	for (i = 1; i < 3; i++)
		lc.masker[i] = masker_clone(lc.masker[0]);
	if ((job->log = trace_log_open(&lc)) == NULL) {
		log_warn("job %" PRId64 ": cannot create %s; logging to /tmp", payload->id,
		    job->log_path);
		free(job->log_path);
		job->log_path = xasprintf("/tmp/runner-job-%" PRId64 ".log", payload->id);
		lc.path = job->log_path;
		if ((job->log = trace_log_open(&lc)) == NULL)
			fatal("job %" PRId64 ": cannot create a log file", payload->id);
	}

	job->journal.job_id = payload->id;
	job->journal.job_token = xstrdup(payload->token);
	job->journal.url = xstrdup(job->url);
	job->journal.tls_ca_file = job->ca_file ? xstrdup(job->ca_file) : NULL;
	job->journal.tls_cert_file = job->cert_file ? xstrdup(job->cert_file) : NULL;
	job->journal.tls_key_file = job->key_file ? xstrdup(job->key_file) : NULL;
	job->journal.runner_name = xstrdup(job->set.runner_name);
	job->journal.log_path = xstrdup(job->log_path);
	job->journal.retry_limit = job->set.retry_limit;
	write_journal(job);

	tp.loop = env->loop;
	tp.api = env->api;
	tp.creds = &job->creds;
	tp.job_id = payload->id;
	tp.job_token = payload->token;
	tp.info = &job->info.info;
	tp.log = job->log;
	tp.retry_limit = job->set.retry_limit;
	tp.interval_ms = job->set.trace_interval_ms;
	tp.keepalive_ms = job->set.keepalive_ms;
	tp.final_backoff_ms = job->set.final_backoff_ms;
	tp.debug_trace = job->prep.settings.debug_trace;
	tp.events.cancel_requested = on_cancel_requested;
	tp.events.aborted = on_aborted;
	tp.arg = job;
	job->trace = trace_new(&tp);

	trace_log_printf(job->log, "Running with runner %s (%s)\n", version_number(),
	    version_revision());
	trace_log_printf(job->log, "  on %s %s, system ID: %s\n", job->set.runner_name,
	    job->set.short_token, job->set.system_id);
	for (size_t w = 0; w < job->prep.warnings.n; w++)
		trace_log_printf(job->log, "\033[0;33mWARNING: %s\033[0;m\n",
		    job->prep.warnings.v[w]);
	trace_start(job->trace);

	timeout_s = payload->runner_info.timeout > 0 ? payload->runner_info.timeout :
	    DEFAULT_JOB_TIMEOUT_S;
	uv_timer_start(&job->timeout, on_timeout, (uint64_t)timeout_s * 1000, 0);

	log_kv(LOG_LEVEL_INFO, LOG_FIELDS(LOG_JOB(payload->id)),
	    "received (%s) for runner %s",
	    payload->job_info.name != NULL ? payload->job_info.name : "", job->set.runner_name);
	{
		struct api_job_ref ref = { .creds = &job->creds, .id = payload->id,
		    .token = payload->token };

		job->ack_call = api_update_job(env->api, &ref, &job->info.info, &ack,
		    on_acknowledged, job);
	}
	return job;
}

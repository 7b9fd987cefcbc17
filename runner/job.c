/*
 * The job lifecycle: one state enum, one transition function that logs
 * every change and runs the new state's entry action, and one small
 * function per event (GitLab's acknowledgement, a stage's end, the
 * timeout, a cancel or abort from GitLab, a forced shutdown).
 *
 * The stages are data: the payload's steps in order, then after_script.
 * A failed step ends the steps; after_script still runs, also after a
 * graceful cancel (with CI_JOB_STATUS=canceled), but not after the job
 * timeout, an abort or a forced shutdown (protocol.md 9.4, 9.6).
 */
#include <errno.h>
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
#include "runner/buf.h"
#include "runner/clock.h"
#include "runner/info.h"
#include "runner/job.h"
#include "runner/journal.h"
#include "runner/log.h"
#include "runner/mask.h"
#include "runner/metrics.h"
#include "runner/script.h"
#include "runner/trace.h"
#include "runner/trace_log.h"
#include "runner/version.h"
#include "runner/xmalloc.h"

extern char **environ;

#define DEFAULT_JOB_TIMEOUT_S	7200
#define DEFAULT_KILL_GRACE_MS	10000
#define MAX_TOKEN_PREFIXES	15

enum job_state {
	JOB_ACKNOWLEDGING,	/* PUT state=running sent; nothing runs yet */
	JOB_RUNNING,		/* stages[stage] is running */
	JOB_STOPPING,		/* stages[stage] was told to stop; waiting for it */
	JOB_REPORTING,		/* the log is complete; the trace delivers it and the report */
	JOB_DONE,		/* done was called; freed once the handles closed */
};

static const char *const state_names[] = {
	"acknowledging", "running", "stopping", "reporting", "done",
};

struct stage {
	const struct api_step	*step;
	char			*name;		/* step_script, after_script, ... */
	bool			 after_script;
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
	uv_timer_t		 timeout;
	int			 open_handles;

	struct stage		*stages;
	size_t			 n_stages;
	size_t			 stage;		/* running or last run */
	char			*project_dir;
	char			*journal_path;
	char			*log_path;
	struct journal_entry	 journal;

	/* How it ends; the first cause wins. */
	bool			 failed;
	bool			 system_failure;
	bool			 canceled;
	bool			 timed_out;
	bool			 aborted;
	bool			 interrupted;
	bool			 dropped;	/* GitLab refused the job: no report */
	bool			 canceled_at_pickup; /* before any stage ran */
	bool			 abandoned;	/* shutdown_timeout: journal only, no GitLab */
	const char		*failure_reason;
	int			 exit_code;
	char			*failure_text;

	job_done_cb		*done;
	void			*arg;
};

static void	job_enter(struct job *, enum job_state);
static void	run_next_stage(struct job *);

void
job_settings_release(struct job_settings *s)
{
	free(s->runner_name);
	free(s->short_token);
	free(s->system_id);
	free(s->shell);
	free(s->builds_dir);
	free(s->user);
	free(s->pre_build_script);
	free(s->post_build_script);
	free(s->state_dir);
	strv_release(&s->environment);
	memset(s, 0, sizeof(*s));
}

int64_t
job_id(const struct job *job)
{
	return job->payload->id;
}

bool
job_reporting(const struct job *job)
{
	return job->state >= JOB_REPORTING;
}

const char *
job_failure_reason(const struct strv *supported, const char *reason)
{
	static const char *const always[] = { "script_failure", "runner_system_failure",
	    "job_execution_timeout", NULL };
	static const struct { const char *from, *to; } compat[] = {
		{ "image_pull_failure", "runner_system_failure" },
		{ "runner_configuration_error", "script_failure" },
		{ "runner_external_dependency_failure", "runner_system_failure" },
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

/* The first reason a job fails for is the one it reports. */
static void
job_fail(struct job *job, const char *reason, int exit_code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
job_fail(struct job *job, const char *reason, int exit_code, const char *fmt, ...)
{
	struct buf b;
	va_list ap;

	if (job->failed)
		return;
	job->failed = true;
	job->failure_reason = reason;
	job->exit_code = exit_code;
	buf_init(&b, BUF_UNLIMITED);
	va_start(ap, fmt);
	buf_vprintf(&b, fmt, ap);
	va_end(ap);
	job->failure_text = buf_detach(&b, NULL);
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
	trace_log_write(job->log, TRACE_RUNNER, b.ptr, b.len);
	buf_release(&b);
}

static void
write_journal(struct job *job)
{
	char *cause = NULL;

	if (journal_write(job->journal_path, &job->journal, &cause) != 0) {
		log_error("job %" PRId64 ": %s: a crash now would lose this job's report",
		    job_id(job), cause);
		free(cause);
	}
}

/* ---- the end ---- */

static void
on_timeout_closed(uv_handle_t *h)
{
	struct job *job = h->data;
	size_t i;

	if (--job->open_handles > 0)
		return;
	for (i = 0; i < job->n_stages; i++)
		free(job->stages[i].name);
	free(job->stages);
	api_job_free(job->payload);
	job_settings_release(&job->set);
	runner_info_release(&job->info);
	free(job->url);
	free(job->ca_file);
	free(job->cert_file);
	free(job->key_file);
	free(job->project_dir);
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
		log_info("job %" PRId64 ": finished, %s; GitLab has the report", job_id(job),
		    job->failed ? "failed" : "succeeded");
		metrics_counter_add("runner_jobs_finished_total", job->failed ?
		    "state=\"failed\"" : "state=\"success\"", 1);
		unlink(job->journal_path);
		unlink(job->log_path);
		break;
	case TRACE_FINAL_GAVE_UP:
		metrics_counter_add("runner_jobs_finished_total", "state=\"report_lost\"", 1);
		log_error("job %" PRId64 ": the final report (%s) could not be delivered to %s "
		    "after %" PRId64 " attempts; last answer: %s. GitLab will show the job as "
		    "running until it times out there", job_id(job),
		    job->failed ? "failed" : "success", job->url, job->set.retry_limit,
		    last_answer);
		unlink(job->journal_path);
		unlink(job->log_path);
		break;
	case TRACE_FINAL_CANCELED:
		/* The daemon is going away: the journal keeps the report for next time. */
		log_warnx("job %" PRId64 ": the final report is not delivered yet; it stays in "
		    "%s and is sent when the runner starts again", job_id(job), job->journal_path);
		break;
	}
	job_enter(job, JOB_DONE);
}

/* Everything the job did is in the log: say how it ended, then report. */
static void
report(struct job *job)
{
	struct api_job_update u = { 0 };

	if (!job->failed)
		job_say(job, "\033[32;1mJob succeeded");
	else if (job->system_failure)
		job_say(job, "\033[31;1mERROR: Job failed (system failure): %s", job->failure_text);
	else
		job_say(job, "\033[31;1mERROR: Job failed: %s", job->failure_text);
	trace_log_finish(job->log);
	/* The journal is about to say "finished": the log it names must be whole. */
	if (trace_log_sync(job->log) != 0)
		log_warn("job %" PRId64 ": cannot write the log to disk", job_id(job));

	u.state = job->failed ? "failed" : "success";
	if (job->failed) {
		/* At pickup, job_canceled goes raw (protocol.md 5.4 step 3). */
		u.failure_reason = job->canceled_at_pickup ? job->failure_reason :
		    job_failure_reason(&job->payload->features.failure_reasons, job->failure_reason);
		u.exit_code = job->exit_code;
	}
	u.has_output = true;
	job->journal.finished = true;
	job->journal.state = xstrdup(u.state);
	job->journal.failure_reason = u.failure_reason != NULL ? xstrdup(u.failure_reason) : NULL;
	job->journal.exit_code = u.exit_code;
	write_journal(job);
	if (job->abandoned) {
		log_warnx("job %" PRId64 ": the runner is leaving: the report stays in %s for "
		    "the next start", job_id(job), job->journal_path);
		job_enter(job, JOB_DONE);
		return;
	}
	trace_finish(job->trace, &u, on_final, job);
}

/* ---- stages ---- */

static const char *
variable(const struct job *job, const char *key)
{
	const char *v = NULL;
	size_t i;

	/* The last one of a key wins, as GitLab orders them. */
	for (i = 0; i < job->payload->n_variables; i++)
		if (job->payload->variables[i].key != NULL &&
		    strcmp(job->payload->variables[i].key, key) == 0)
			v = job->payload->variables[i].value;
	return v;
}

static void
env_set(struct strv *env, const char *key, const char *value)
{
	size_t i, klen = strlen(key);

	for (i = 0; i < env->n; i++)
		if (strncmp(env->v[i], key, klen) == 0 && env->v[i][klen] == '=') {
			free(env->v[i]);
			env->v[i] = xasprintf("%s=%s", key, value);
			return;
		}
	strv_push_owned(env, xasprintf("%s=%s", key, value));
}

/* The environment of a stage: the daemon's, then the runner's, then the job's. */
static void
stage_env(struct job *job, const char *status, struct strv *env)
{
	char num[32];
	char **e;
	size_t i;

	for (e = environ; *e != NULL; e++)
		strv_push(env, *e);
	env_set(env, "CI_SERVER", "yes");
	env_set(env, "CI_BUILDS_DIR", job->set.builds_dir);
	env_set(env, "CI_PROJECT_DIR", job->project_dir);
	snprintf(num, sizeof(num), "%d", job->set.concurrent_id);
	env_set(env, "CI_CONCURRENT_ID", num);
	env_set(env, "CI_CONCURRENT_PROJECT_ID", num);
	env_set(env, "CI_RUNNER_SHORT_TOKEN", job->set.short_token);
	env_set(env, "CI_RUNNER_VERSION", version_number());
	env_set(env, "CI_RUNNER_REVISION", version_revision());
	snprintf(num, sizeof(num), "%s/%s", version_os(), version_arch());
	env_set(env, "CI_RUNNER_EXECUTABLE_ARCH", num);
	env_set(env, "CI_SHARED_ENVIRONMENT", "true");
	snprintf(num, sizeof(num), "%" PRId64, job->payload->runner_info.timeout > 0 ?
	    job->payload->runner_info.timeout : DEFAULT_JOB_TIMEOUT_S);
	env_set(env, "CI_JOB_TIMEOUT", num);
	for (i = 0; i < job->set.environment.n; i++) {
		char *kv = job->set.environment.v[i], *eq = strchr(kv, '=');

		if (eq != NULL) {
			*eq = '\0';
			env_set(env, kv, eq + 1);
			*eq = '=';
		}
	}
	for (i = 0; i < job->payload->n_variables; i++) {
		const struct api_variable *v = &job->payload->variables[i];

		if (v->key != NULL && *v->key != '\0' && strchr(v->key, '=') == NULL)
			env_set(env, v->key, v->value != NULL ? v->value : "");
	}
	env_set(env, "CI_JOB_STATUS", status);
}

static void
on_output(int stream, const char *data, size_t len, void *arg)
{
	struct job *job = arg;

	trace_log_write(job->log, stream == 2 ? TRACE_STDERR : TRACE_STDOUT, data, len);
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
	trace_log_write(job->log, TRACE_RUNNER, line, (size_t)n);
}

static void
on_stage_done(int status, int exit_code, void *arg)
{
	struct job *job = arg;
	struct stage *st = &job->stages[job->stage];
	const char *ignore;

	job->exec = NULL;
	section(job, "end", st->name);
	if (job->state == JOB_DONE)
		return;
	if (status < 0)
		job_fail(job, "runner_system_failure", 0, "%s: %s", st->name, strerror(-status));
	else if (exit_code != 0 && st->after_script) {
		ignore = variable(job, "AFTER_SCRIPT_IGNORE_ERRORS");
		if (ignore != NULL && strcmp(ignore, "false") == 0)
			job_fail(job, "script_failure", exit_code, "after_script: exit code %d",
			    exit_code);
		else
			job_say(job, "\033[0;33mWARNING: after_script failed, but the job "
			    "continues: exit code %d", exit_code);
	} else if (exit_code != 0)
		job_fail(job, "script_failure", exit_code, "exit code %d", exit_code);
	run_next_stage(job);
}

/* Whether stages[i] runs, given how the job went so far. */
static bool
stage_wanted(const struct job *job, const struct stage *st)
{
	if (job->timed_out || job->aborted || job->interrupted)
		return false;
	if (st->after_script)
		return true;
	return !job->failed && !job->canceled;
}

static void
run_next_stage(struct job *job)
{
	struct strv env = { 0 };
	struct script_step s = { 0 };
	const struct executor_ops *ex = job->env.executor;
	struct exec_stage es;
	struct stage *st;
	char *script, *cause = NULL;
	size_t i;

	for (i = job->state == JOB_ACKNOWLEDGING ? 0 : job->stage + 1; i < job->n_stages; i++)
		if (stage_wanted(job, &job->stages[i]))
			break;
	if (i >= job->n_stages) {
		job_enter(job, JOB_REPORTING);
		return;
	}
	job->stage = i;
	st = &job->stages[i];
	if (job->state != JOB_RUNNING)
		job_enter(job, JOB_RUNNING);

	section(job, "start", st->name);
	job_say(job, "\033[36;1m%s", st->after_script ? "Running after_script" :
	    "Executing \"step_script\" stage of the job script");
	stage_env(job, st->after_script ? (job->canceled ? "canceled" : job->failed ?
	    "failed" : "success") : "running", &env);
	s.shell = job->set.shell;
	s.dir = job->project_dir;
	s.commands = (const char *const *)st->step->script.v;
	s.n_commands = st->step->script.n;
	if (!st->after_script) {
		s.before = job->set.pre_build_script;
		s.after = job->set.post_build_script;
	}
	script = script_step(&s);
	memset(&es, 0, sizeof(es));
	es.name = st->name;
	es.shell = job->set.shell;
	es.script = script;
	es.env = env.v;
	es.cwd = job->project_dir;
	es.user = job->set.user;
	job->exec = ex->start(job->env.loop, &es, on_output, on_stage_done, job, &cause);
	explicit_bzero(script, strlen(script));
	free(script);
	strv_release(&env);
	if (job->exec == NULL) {
		job_fail(job, "runner_system_failure", 0, "%s", cause);
		free(cause);
		section(job, "end", st->name);
		run_next_stage(job);
	}
}

/* Stop the running stage; on_stage_done() comes when it has. */
static void
stop_stage(struct job *job, uint64_t grace_ms)
{
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

	if (job->state >= JOB_REPORTING)
		return;
	job->timed_out = true;
	job_fail(job, "job_execution_timeout", 0, "execution took longer than %" PRId64
	    " seconds", secs);
	stop_stage(job, kill_grace(job));
}

static void
on_cancel_requested(void *arg)
{
	struct job *job = arg;
	const struct stage *st;

	if (job->state != JOB_RUNNING)
		return;
	st = &job->stages[job->stage];
	if (st->after_script)
		return;
	job->canceled = true;
	job_fail(job, "job_canceled", 0, "canceled");
	job_say(job, "\033[0;33mWARNING: script canceled externally (UI, API)");
	log_info("job %" PRId64 ": canceled in GitLab: stopping %s, then after_script",
	    job_id(job), st->name);
	stop_stage(job, kill_grace(job));
}

static void
on_aborted(void *arg)
{
	struct job *job = arg;

	if (job->state >= JOB_REPORTING || job->state == JOB_ACKNOWLEDGING)
		return;
	job->aborted = true;
	job_fail(job, "job_canceled", 0, "aborted: the job was canceled or failed in GitLab");
	log_info("job %" PRId64 ": GitLab ended the job: stopping it", job_id(job));
	stop_stage(job, kill_grace(job));
}

void
job_interrupt(struct job *job)
{
	if (job->state >= JOB_REPORTING)
		return;
	job->interrupted = true;
	job_fail(job, "runner_interrupted", 0, "aborted: the runner is shutting down");
	if (job->state == JOB_ACKNOWLEDGING) {
		/* The acknowledgement's answer moves it on; nothing runs yet. */
		return;
	}
	stop_stage(job, 1000);
}

void
job_abandon(struct job *job)
{
	if (job->state == JOB_DONE || job->abandoned)
		return;
	job->abandoned = true;
	job->interrupted = true;
	job_fail(job, "runner_interrupted", 0, "aborted: the runner is shutting down");
	switch (job->state) {
	case JOB_ACKNOWLEDGING:
		job_enter(job, JOB_REPORTING);
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

/* Directories the job needs; a failure is the runner's, not the script's. */
static int
prepare_dirs(struct job *job)
{
	char *p, *copy = xstrdup(job->project_dir);

	for (p = copy + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(copy, 0755) == -1 && errno != EEXIST)
			goto fail;
		*p = '/';
	}
	if (mkdir(copy, 0755) == -1 && errno != EEXIST)
		goto fail;
	free(copy);
	return 0;
fail:
	job_fail(job, "runner_system_failure", 0, "cannot create %s: %s (check builds_dir)",
	    copy, strerror(errno));
	free(copy);
	return -1;
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
		log_warnx("job %" PRId64 ": GitLab refused to let this runner run the job (%s); "
		    "dropping it", job_id(job), answer->message);
		job->dropped = true;
		unlink(job->journal_path);
		unlink(job->log_path);
		job_enter(job, JOB_DONE);
		return;
	}
	if (st->cancel_requested) {
		job->canceled = true;
		job->canceled_at_pickup = true;
		job_fail(job, "job_canceled", 0, "canceled before it started");
		job_enter(job, JOB_REPORTING);
		return;
	}
	if (job->interrupted) {
		job_enter(job, JOB_REPORTING);
		return;
	}
	if (job->payload->image.unsupported_options.n > 0) {
		job_say(job, "\033[31;1mERROR: unsupported executor options: %s",
		    job->payload->image.unsupported_options.v[0]);
		job->system_failure = true;
		job_fail(job, "runner_system_failure", 3, "unsupported executor options");
		job_enter(job, JOB_REPORTING);
		return;
	}
	job_say(job, "\033[36;1mPreparing the \"shell\" executor");
	job_say(job, "Using Shell (%s) executor...", job->set.shell);
	if (prepare_dirs(job) != 0) {
		job->system_failure = true;
		job_enter(job, JOB_REPORTING);
		return;
	}
	run_next_stage(job);
}

/* The transition function: every change of state goes through here. */
static void
job_enter(struct job *job, enum job_state to)
{
	log_debug("job %" PRId64 ": %s -> %s", job_id(job), state_names[job->state],
	    state_names[to]);
	job->state = to;
	switch (to) {
	case JOB_REPORTING:
		uv_timer_stop(&job->timeout);
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
		job->done(job, job->arg);
		uv_close((uv_handle_t *)&job->timeout, on_timeout_closed);
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
	const char **phrases = xcalloc(job->payload->n_variables + 2, sizeof(char *));
	const char **prefixes = xcalloc(MAX_TOKEN_PREFIXES + 1, sizeof(char *));
	const char *const *def = masker_default_prefixes(job->set.mask_all_tokens);
	size_t i, np = 0, nx = 0;
	struct masker *m;

	for (i = 0; i < job->payload->n_variables; i++)
		if (job->payload->variables[i].masked && job->payload->variables[i].value != NULL)
			phrases[np++] = job->payload->variables[i].value;
	/* The job token is a secret whatever the variables say. */
	phrases[np++] = job->payload->token;
	for (i = 0; def[i] != NULL && nx < MAX_TOKEN_PREFIXES; i++)
		prefixes[nx++] = def[i];
	for (i = 0; i < job->payload->features.token_mask_prefixes.n && nx < MAX_TOKEN_PREFIXES; i++)
		prefixes[nx++] = job->payload->features.token_mask_prefixes.v[i];
	m = masker_new(phrases, np, prefixes, nx, true);
	free(phrases);
	free(prefixes);
	return m;
}

static void
build_stages(struct job *job)
{
	const struct api_step *after = NULL;
	size_t i;

	job->stages = xcalloc(job->payload->n_steps + 1, sizeof(*job->stages));
	for (i = 0; i < job->payload->n_steps; i++) {
		const struct api_step *step = &job->payload->steps[i];

		if (step->name != NULL && strcmp(step->name, "after_script") == 0) {
			after = step;
			continue;
		}
		job->stages[job->n_stages].step = step;
		job->stages[job->n_stages++].name = xasprintf("step_%s",
		    step->name != NULL ? step->name : "script");
	}
	if (after != NULL && after->script.n > 0) {
		job->stages[job->n_stages].step = after;
		job->stages[job->n_stages].after_script = true;
		job->stages[job->n_stages++].name = xstrdup("after_script");
	}
}

struct job *
job_start(const struct job_env *env, struct api_job *payload, struct job_settings *settings,
    const struct api_creds *creds, struct runner_info *info, job_done_cb *done, void *arg)
{
	struct job *job = xcalloc(1, sizeof(*job));
	struct trace_log_config lc = { 0 };
	struct trace_params tp = { 0 };
	struct api_job_update ack = { .state = "running" };
	const char *path = payload->job_info.project_full_path;
	char *jdir, *cause = NULL, *p;
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
	job->done = done;
	job->arg = arg;
	job->state = JOB_ACKNOWLEDGING;
	uv_timer_init(env->loop, &job->timeout);
	job->timeout.data = job;
	job->open_handles = 1;

	/* <builds>/<short token>/<concurrent id>/<namespace>/<project> */
	job->project_dir = xasprintf("%s/%s/%d/%s", job->set.builds_dir, job->set.short_token,
	    job->set.concurrent_id, path != NULL && *path != '\0' ? path : "project");
	for (p = job->project_dir; (p = strstr(p, "/..")) != NULL; p++)
		p[1] = '_';	/* a project path cannot lead out of builds_dir */
	build_stages(job);

	if ((jdir = journal_dir(job->set.state_dir, &cause)) == NULL) {
		log_error("job %" PRId64 ": %s", payload->id, cause);
		free(cause);
		jdir = xstrdup("/tmp");
	}
	job->journal_path = journal_path(jdir, payload->id, ".toml");
	job->log_path = journal_path(jdir, payload->id, ".log");
	free(jdir);

	lc.path = job->log_path;
	lc.limit = job->set.output_limit;
	lc.timestamps = job->set.timestamps;
	for (i = 0; i < 3; i++)
		lc.masker[i] = make_masker(job);
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
	tp.events.cancel_requested = on_cancel_requested;
	tp.events.aborted = on_aborted;
	tp.arg = job;
	job->trace = trace_new(&tp);

	trace_log_printf(job->log, "Running with runner %s (%s)\n", version_number(),
	    version_revision());
	trace_log_printf(job->log, "  on %s %s, system ID: %s\n", job->set.runner_name,
	    job->set.short_token, job->set.system_id);
	trace_start(job->trace);

	timeout_s = payload->runner_info.timeout > 0 ? payload->runner_info.timeout :
	    DEFAULT_JOB_TIMEOUT_S;
	uv_timer_start(&job->timeout, on_timeout, (uint64_t)timeout_s * 1000, 0);

	log_info("job %" PRId64 ": received (%s) for runner %s", payload->id,
	    payload->job_info.name != NULL ? payload->job_info.name : "", job->set.runner_name);
	{
		struct api_job_ref ref = { .creds = &job->creds, .id = payload->id,
		    .token = payload->token };

		job->ack_call = api_update_job(env->api, &ref, &job->info.info, &ack,
		    on_acknowledged, job);
	}
	return job;
}

/* ---- recovery ---- */

struct recovery {
	struct recovery		*next;
	struct journal_entry	 e;
	struct api_creds	 creds;
	struct trace_log	*log;
	struct trace		*trace;
	char			*path;
	struct recover_all	*all;
};

struct recover_all {
	int			 pending;
	void			(*done)(void *);
	void			*arg;
	struct recovery		*list;
};

/* Every entry is settled: free them and say so. */
static void
recovery_done(struct recover_all *all)
{
	struct recovery *r;

	while ((r = all->list) != NULL) {
		all->list = r->next;
		journal_entry_release(&r->e);
		free(r->path);
		free(r);
	}
	all->done(all->arg);
	free(all);
}

static void
on_recovered(enum trace_final result, const char *last_answer, void *arg)
{
	struct recovery *r = arg;
	struct recover_all *all = r->all;

	if (result == TRACE_FINAL_ACCEPTED) {
		log_info("job %" PRId64 ": the report left by the last run was delivered",
		    r->e.job_id);
		unlink(r->path);
		unlink(r->e.log_path);
	} else if (result == TRACE_FINAL_GAVE_UP) {
		log_error("job %" PRId64 ": the report left by the last run could not be "
		    "delivered to %s; last answer: %s", r->e.job_id, r->e.url, last_answer);
		unlink(r->path);
		unlink(r->e.log_path);
	}
	trace_close(r->trace);
	r->trace = NULL;
	if (r->log != NULL)
		trace_log_close(r->log, false);
	r->log = NULL;
	if (--all->pending == 0)
		recovery_done(all);
}

void
job_recover(const struct job_env *env, const char *state_dir, const struct api_info *info,
    void (*done)(void *arg), void *arg)
{
	struct recover_all *all = xcalloc(1, sizeof(*all));
	struct trace_log_config lc = { 0 };
	struct trace_params tp = { 0 };
	struct api_job_update u = { 0 };
	char **paths, *dir, *cause = NULL;
	size_t i, n;

	all->done = done;
	all->arg = arg;
	all->pending = 1;	/* held until every entry has started */
	if ((dir = journal_dir(state_dir, &cause)) == NULL) {
		log_error("%s", cause);
		free(cause);
		paths = xcalloc(1, sizeof(char *));
		n = 0;
	} else
		paths = journal_list(dir, &n);
	free(dir);
	for (i = 0; i < n; i++) {
		struct recovery *r = xcalloc(1, sizeof(*r));

		r->all = all;
		r->path = paths[i];
		if (journal_read(r->path, &r->e, &cause) != 0) {
			log_error("%s: skipped", cause);
			free(cause);
			cause = NULL;
			free(r->path);
			free(r);
			continue;
		}
		r->next = all->list;
		all->list = r;
		log_secret_add(r->e.job_token);
		r->creds.url = r->e.url;
		r->creds.token = "";
		r->creds.tls_ca_file = r->e.tls_ca_file;
		r->creds.tls_cert_file = r->e.tls_cert_file;
		r->creds.tls_key_file = r->e.tls_key_file;
		if ((r->log = trace_log_reopen(r->e.log_path)) == NULL) {
			/* No log left: report with an empty one rather than not at all. */
			lc.path = r->e.log_path;
			r->log = trace_log_open(&lc);
			if (r->log != NULL)
				trace_log_finish(r->log);
		}
		if (r->log == NULL) {
			log_error("job %" PRId64 ": cannot open or create %s: its report is lost",
			    r->e.job_id, r->e.log_path);
			continue;
		}
		memset(&tp, 0, sizeof(tp));
		tp.loop = env->loop;
		tp.api = env->api;
		tp.creds = &r->creds;
		tp.job_id = r->e.job_id;
		tp.job_token = r->e.job_token;
		tp.info = info;
		tp.log = r->log;
		tp.retry_limit = r->e.retry_limit;
		r->trace = trace_new(&tp);
		memset(&u, 0, sizeof(u));
		if (r->e.finished && r->e.state != NULL) {
			u.state = r->e.state;
			u.failure_reason = r->e.failure_reason;
			u.exit_code = (int)r->e.exit_code;
		} else {
			u.state = "failed";
			u.failure_reason = "runner_system_failure";
		}
		log_info("job %" PRId64 ": sending the report the last run left (%s%s%s)",
		    r->e.job_id, u.state, u.failure_reason ? ", " : "",
		    u.failure_reason ? u.failure_reason : "");
		all->pending++;
		trace_finish(r->trace, &u, on_recovered, r);
	}
	free(paths);
	/* Release the hold: done comes now if there was nothing to do. */
	if (--all->pending == 0)
		recovery_done(all);
}

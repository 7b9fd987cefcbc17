/*
 * The replay of the reports a crash left in the journal (journal.h): at
 * start, before the daemon asks for jobs, each entry's log is sent to its
 * end and its final report after it.  An entry the job finished says what
 * to report; one it did not is reported failed, runner_system_failure, as
 * gitlab-runner's job would be after its runner died.  Each entry is one
 * struct recovery; struct recover_all counts those not settled yet and
 * calls done when the last one is.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "lib/log.h"
#include "lib/xmalloc.h"
#include "runner/job.h"
#include "runner/journal.h"
#include "runner/trace.h"
#include "runner/trace_log.h"

/* One entry being replayed; on its recover_all's list until every one is settled. */
struct recovery {
	struct recovery		*next;
	struct journal_entry	 e;
	struct api_creds	 creds;
	struct trace_log	*log;
	struct trace		*trace;
	char			*path;
	struct log_secret	*token_mask;	/* the job token's, while the report is replayed */
	struct recover_all	*all;
};

/* The whole replay; freed, after done is called, by recovery_done(). */
struct recover_all {
	int			 pending;	/* reports under way, +1 while starting */
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
		log_secret_drop(r->token_mask);
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
	char **paths, *cause = NULL;
	size_t i, n;

	all->done = done;
	all->arg = arg;
	all->pending = 1;	/* held until every entry has started */
	/*
	 * Only read: the state directory is made when a job has a report to
	 * keep, not at every start (a mistyped -c must not leave a directory
	 * owned by root where another account's home would be).
	 */
	paths = journal_list(state_dir, &n, &cause);
	if (cause != NULL) {
		log_error("%s: reports kept there are not sent", cause);
		free(cause);
		cause = NULL;
	}
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
		r->token_mask = log_secret_hold(r->e.job_token);
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

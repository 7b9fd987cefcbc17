/*
 * The daemon's sweeps (sweeper.h).  One sweep per engine address at a
 * time: two [[runners]] entries on one engine are swept once.  A sweep
 * that is still running when the next is due is left to finish.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "executors/executor.h"
#include "lib/log.h"
#include "lib/strv.h"
#include "lib/xmalloc.h"
#include "runner/journal.h"
#include "runner/sweeper.h"

#define SWEEP_INTERVAL_MS	(10 * 60 * 1000)

struct sweep_run {
	struct sweeper		*w;
	const struct executor_ops *ex;
	struct exec_sweep	*sweep;		/* NULL once its cb came */
	char			*where;		/* the entry's engine, for the log */
	struct sweep_run	*next;
};

struct sweeper {
	struct daemon		*d;
	uv_timer_t		 timer;
	uint64_t		 interval_ms;
	struct sweep_run	*runs;		/* in flight */
	bool			 closing;
	bool			 timer_closed;	/* freed once this and runs is NULL */
};

/* Every object the journal recorded: a crashed run's jobs made them. */
static void
journal_objects(const char *state_dir, struct strv *out)
{
	struct journal_entry e;
	char **paths, *cause = NULL;
	size_t i, k, n;

	paths = journal_list(state_dir, &n, &cause);
	free(cause);	/* job_recover() says it */
	for (i = 0; i < n; i++) {
		cause = NULL;
		if (journal_read(paths[i], &e, &cause) == 0) {
			for (k = 0; k < e.executor_objects.n; k++)
				strv_push(out, e.executor_objects.v[k]);
			journal_entry_release(&e);
		}
		free(cause);
		free(paths[i]);
	}
	free(paths);
}

static void
run_free(struct sweep_run *r)
{
	struct sweep_run **pp;

	for (pp = &r->w->runs; *pp != NULL; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	free(r->where);
	free(r);
}

static void
free_if_done(struct sweeper *w)
{
	if (w->timer_closed && w->runs == NULL)
		free(w);
}

static void
on_swept(int status, unsigned removed, const char *cause, void *arg)
{
	struct sweep_run *r = arg;
	struct sweeper *w = r->w;

	r->sweep = NULL;
	if (status == 0 && removed > 0)
		log_info("sweep: removed %u object%s that earlier jobs left in %s", removed,
		    removed == 1 ? "" : "s", r->where);
	else if (status != 0 && !w->closing)
		log_warnx("sweep of %s: %s%s; tried again at the next sweep", r->where,
		    cause != NULL ? cause : "failed",
		    removed > 0 ? " (some leftovers were removed)" : "");
	run_free(r);
	if (w->closing)
		free_if_done(w);
}

static bool
sweeping(const struct sweeper *w, const char *where)
{
	const struct sweep_run *r;

	for (r = w->runs; r != NULL; r = r->next)
		if (strcmp(r->where, where) == 0)
			return true;
	return false;
}

static void
sweep_all(struct sweeper *w, const struct strv *recorded)
{
	struct daemon *d = w->d;
	struct poller *p;
	int64_t *keep = NULL;
	size_t n_keep = 0, i;
	int64_t now = (int64_t)time(NULL);

	for (p = d->pollers; p != NULL; p = poller_next(p))
		n_keep = poller_job_ids(p, &keep, n_keep);
	for (i = 0; i < d->cfg.n_runners; i++) {
		const struct runner_config *rc = &d->cfg.runners[i];
		const struct executor_ops *ex = executor_find(rc->executor);
		struct sweep_run *r;
		char *cause = NULL;

		if (rc->problem != NULL || ex == NULL || ex->sweep == NULL)
			continue;
		r = xcalloc(1, sizeof(*r));
		r->w = w;
		r->ex = ex;
		r->where = xstrdup(rc->docker.host != NULL && *rc->docker.host ? rc->docker.host :
		    "the default Docker engine");
		if (sweeping(w, r->where)) {
			free(r->where);
			free(r);
			continue;
		}
		r->next = w->runs;
		w->runs = r;
		r->sweep = ex->sweep(d->loop, &rc->docker, d->system_id, keep, n_keep, now,
		    recorded, on_swept, r, &cause);
		if (r->sweep == NULL) {
			log_warnx("sweep of %s: %s; tried again at the next sweep", r->where, cause);
			free(cause);
			run_free(r);
		}
	}
	free(keep);
}

static void
on_timer(uv_timer_t *t)
{
	struct sweeper *w = t->data;

	sweep_all(w, NULL);
}

struct sweeper *
sweeper_new(struct daemon *d, uint64_t interval_ms)
{
	struct sweeper *w = xcalloc(1, sizeof(*w));
	struct strv recorded = { 0 };

	w->d = d;
	w->interval_ms = interval_ms ? interval_ms : SWEEP_INTERVAL_MS;
	uv_timer_init(d->loop, &w->timer);
	w->timer.data = w;
	journal_objects(d->state_dir, &recorded);
	sweep_all(w, &recorded);
	strv_release(&recorded);
	uv_timer_start(&w->timer, on_timer, w->interval_ms, w->interval_ms);
	return w;
}

static void
on_timer_closed(uv_handle_t *h)
{
	struct sweeper *w = h->data;

	w->timer_closed = true;
	free_if_done(w);
}

void
sweeper_close(struct sweeper *w)
{
	struct sweep_run *r, *next;

	w->closing = true;
	for (r = w->runs; r != NULL; r = next) {
		next = r->next;
		if (r->sweep != NULL)
			r->ex->sweep_cancel(r->sweep);	/* on_swept frees r */
	}
	uv_close((uv_handle_t *)&w->timer, on_timer_closed);
}

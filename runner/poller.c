/*
 * One [[runners]] entry's request loop (protocol.md 4.3, 4.8): ask GitLab
 * for a job whenever a slot is free, wait check_interval after "no job",
 * ask again at once after a job (unless strict_check_interval), back off
 * with jitter after 409 or an answer it cannot use, leave a GitLab that is
 * down to the endpoint's gate (api/pushback.h), and stop asking for
 * unhealthy_interval after unhealthy_requests_limit refusals in a row.
 *
 * The poller also owns the jobs it started, so that a config reload can
 * drop an entry while its jobs finish.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "executors/docker/bundle.h"
#include "executors/executor.h"
#include "lib/backoff.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/metrics.h"
#include "lib/rand.h"
#include "lib/xmalloc.h"
#include "runner/daemon.h"
#include "runner/gitlab_metrics.h"
#include "runner/info.h"
#include "runner/job.h"
#include "runner/vars.h"

#define MAX_REQUESTS		64	/* request_concurrency beyond this is clamped */
#define MAX_JOBS_PER_ENTRY	1024
#define FAILURE_BACKOFF_MAX_MS	(60ULL * 1000)
#define QUICK_204_MAX		2	/* unheld "ask again" 204s in a row taken at once */
/* What a poller's log lines are about: "runner NAME (TOKEN): ", or runner_name= runner=. */
#define POLLER_FIELDS(p)	LOG_FIELDS(LOG_RUNNER_NAME((p)->rc->name), \
	LOG_RUNNER((p)->short_token))

struct job_link {
	struct job		*job;
	int64_t			 job_id;
	int			 concurrent_id;
	int64_t			 project_id;
	int			 concurrent_project_id;
	struct job_link		*next;
};

struct poller {
	struct daemon		*d;
	struct poller		*next;
	struct runner_config	*rc;		/* in d->cfg; replaced on reload */
	char			*url;		/* identity across reloads */
	char			*token;
	char			 short_token[LOG_TOKEN_SIZE];
	struct runner_info	 info;
	struct api_creds	 creds;
	struct api_call		*calls[MAX_REQUESTS];
	unsigned		 requests;
	unsigned		 jobs;
	struct job_link		*job_list;
	int64_t			 failures;	/* refusals in a row (403, client error) */
	uint64_t		 unhealthy_until;
	struct backoff		 backoff;
	uv_timer_t		 timer;
	uint64_t		 next_at;	/* monotonic ms of the next request */
	bool			 stopped;
	bool			 closing;
	uint64_t		 sent_at[MAX_REQUESTS];	/* when each request left */
	unsigned		 quick_204s;	/* such 204s in a row, each unheld */
	struct api_call		*discovery;	/* FF_USE_JOB_ROUTER: in flight */
	bool			 router_told;	/* said once that we poll directly */
};

static void	poll_now(struct poller *);

/* Up to the daemon, through what it gave: it kicks the pollers, reaps, may stop. */
static void
slots_changed(struct daemon *d)
{
	d->slots_changed(d->slots_changed_arg);
}

struct poller *
poller_next(struct poller *p)
{
	return p->next;
}

void
poller_set_next(struct poller *p, struct poller *next)
{
	p->next = next;
}

bool
poller_matches(const struct poller *p, const struct runner_config *rc)
{
	return strcmp(p->url, rc->url) == 0 && strcmp(p->token, rc->token) == 0;
}

static void
take_settings(struct poller *p, struct runner_config *rc)
{
	p->rc = rc;
	runner_info_release(&p->info);
	runner_info_init(&p->info, &p->d->cfg, rc, true);
	runner_config_creds(rc, &p->creds);
}

static void
on_timer(uv_timer_t *t)
{
	poll_now(t->data);
}

static void
schedule(struct poller *p, uint64_t delay_ms)
{
	if (p->stopped)
		return;
	p->next_at = clock_mono_ms() + delay_ms;
	uv_timer_start(&p->timer, on_timer, delay_ms, 0);
}

struct poller *
poller_new(struct daemon *d, struct runner_config *rc, unsigned index, unsigned count)
{
	struct poller *p = xcalloc(1, sizeof(*p));
	uint64_t spread = (uint64_t)d->cfg.check_interval * 1000 * index / (count ? count : 1);

	p->d = d;
	p->url = xstrdup(rc->url);
	p->token = xstrdup(rc->token);
	log_token(rc->token, p->short_token);
	take_settings(p, rc);
	backoff_init(&p->backoff, (uint64_t)d->cfg.check_interval * 1000, FAILURE_BACKOFF_MAX_MS);
	uv_timer_init(d->loop, &p->timer);
	p->timer.data = p;
	/* Entries start spread over one check_interval, as gitlab-runner feeds them. */
	schedule(p, spread);
	log_kv(LOG_LEVEL_INFO, POLLER_FIELDS(p), "polling %s", rc->url);
	return p;
}

void
poller_update(struct poller *p, struct runner_config *rc)
{
	take_settings(p, rc);
}

/* May this entry ask for a job now? */
static bool
may_request(const struct poller *p)
{
	const struct daemon *d = p->d;
	int64_t limit;
	unsigned rc_conc;

	if (p->stopped || p->rc == NULL || d->state != DAEMON_RUNNING)
		return false;
	limit = p->rc->limit;
	rc_conc = (unsigned)p->rc->request_concurrency;
	if (d->max_builds > 0 && d->builds_started + d->requests_in_flight >= d->max_builds)
		return false;
	if (d->jobs_running + d->requests_in_flight >= (unsigned)d->cfg.concurrent)
		return false;
	if (limit > 0 && p->jobs + p->requests >= (unsigned)limit)
		return false;
	if (rc_conc > MAX_REQUESTS)
		rc_conc = MAX_REQUESTS;
	return p->requests < rc_conc;
}

static void
forget_call(struct poller *p, struct api_call *call)
{
	unsigned i;

	for (i = 0; i < MAX_REQUESTS; i++)
		if (p->calls[i] == call) {
			p->calls[i] = NULL;
			return;
		}
}

/*
 * Slots belong to the runner token, not to the entry: two [[runners]]
 * entries with one token (two executors or limits for one GitLab runner)
 * share a builds directory tree, so they must not hand out the same
 * <concurrent id> or project slot.  gitlab-runner's builds helper compares
 * tokens across every build of the process the same way.  Stopped pollers
 * whose jobs still run stay in d->pollers, so their slots count too.
 */
static bool
same_runner(const struct poller *a, const struct poller *b)
{
	return strcmp(a->token, b->token) == 0;
}

static int
free_concurrent_id(const struct poller *p)
{
	const struct poller *q;
	const struct job_link *l;
	int id;

	for (id = 0; id < MAX_JOBS_PER_ENTRY; id++) {
		bool taken = false;

		for (q = p->d->pollers; q != NULL && !taken; q = q->next)
			if (same_runner(p, q))
				for (l = q->job_list; l != NULL && !taken; l = l->next)
					taken = l->concurrent_id == id;
		if (!taken)
			return id;
	}
	return id;
}

/*
 * The lowest slot no running job of the same project (and token) holds:
 * the <concurrent project id> of the build directory, so two jobs of one
 * project never share a checkout while different projects reuse slot 0.
 */
static int
free_concurrent_project_id(const struct poller *p, int64_t project_id)
{
	const struct poller *q;
	const struct job_link *l;
	int *in_use;
	size_t n = 0, cap = 0;
	int id;

	for (q = p->d->pollers; q != NULL; q = q->next)
		if (same_runner(p, q))
			cap += q->jobs;
	in_use = xcalloc(cap + 1, sizeof(*in_use));
	for (q = p->d->pollers; q != NULL; q = q->next)
		if (same_runner(p, q))
			for (l = q->job_list; l != NULL; l = l->next)
				if (l->project_id == project_id && n < cap)
					in_use[n++] = l->concurrent_project_id;
	id = job_concurrent_project_id(in_use, n);
	free(in_use);
	return id;
}

static void
on_job_done(struct job *job, void *arg)
{
	struct poller *p = arg;
	struct job_link **pp, *l;

	for (pp = &p->job_list; (l = *pp) != NULL; pp = &l->next)
		if (l->job == job) {
			*pp = l->next;
			free(l);
			break;
		}
	p->jobs--;
	p->d->jobs_running--;
	metrics_gauge_add("runner_jobs_running", "", -1);
	slots_changed(p->d);
}

static void
start_job(struct poller *p, struct api_job *payload)
{
	struct daemon *d = p->d;
	struct runner_config *rc = p->rc;
	struct job_settings s;
	struct runner_info info;
	struct job_env env = { .loop = d->loop, .api = d->api };
	struct job_link *l = xcalloc(1, sizeof(*l));
	size_t i;

	memset(&s, 0, sizeof(s));
	s.runner_name = xstrdup(rc->name);
	s.short_token = xstrdup(p->short_token);
	s.system_id = xstrdup(d->system_id);
	s.shell = xstrdup(rc->shell);
	env.executor = executor_find(rc->executor);
	if (env.executor->job_open != NULL) {
		/* Paths inside the job's containers, as gitlab-runner's docker executor has them. */
		s.builds_dir = xstrdup(*rc->builds_dir == '/' ? rc->builds_dir : "/builds");
		s.cache_dir = xstrdup(*rc->cache_dir == '/' ? rc->cache_dir : "/cache");
		s.runner_command = xstrdup(BUNDLE_COMMAND);
		docker_settings_copy(&s.docker, &rc->docker);
	} else {
		s.builds_dir = *rc->builds_dir == '/' ? xstrdup(rc->builds_dir) :
		    xasprintf("%s/%s", d->builds_base, *rc->builds_dir ? rc->builds_dir :
		    "builds");
		/* gitlab-runner's shell executor: caches under <working dir>/cache by default. */
		s.cache_dir = *rc->cache_dir == '/' ? xstrdup(rc->cache_dir) :
		    xasprintf("%s/%s", d->builds_base, *rc->cache_dir ? rc->cache_dir : "cache");
		s.runner_command = xstrdup(d->self_path);
	}
	s.user = d->user != NULL ? xstrdup(d->user) : NULL;
	s.pre_build_script = xstrdup(rc->pre_build_script);
	s.post_build_script = xstrdup(rc->post_build_script);
	s.pre_get_sources_script = xstrdup(rc->pre_get_sources_script);
	s.post_get_sources_script = xstrdup(rc->post_get_sources_script);
	s.clone_url = xstrdup(rc->clone_url);
	s.tls_ca_file = xstrdup(rc->tls_ca_file);
	s.tls_cert_file = xstrdup(rc->tls_cert_file);
	s.tls_key_file = xstrdup(rc->tls_key_file);
	for (i = 0; i < rc->environment.n; i++)
		strv_push(&s.environment, rc->environment.v[i]);
	s.output_limit = (uint64_t)rc->output_limit * 1024;
	s.retry_limit = rc->job_status_final_update_retry_limit;
	s.concurrent_id = free_concurrent_id(p);
	s.concurrent_project_id = free_concurrent_project_id(p, payload->job_info.project_id);
	s.state_dir = xstrdup(d->state_dir);
	s.trace_interval_ms = d->trace_interval_ms;
	s.keepalive_ms = d->keepalive_ms;
	s.final_backoff_ms = d->final_backoff_ms;
	s.kill_grace_ms = d->kill_grace_ms;
	runner_info_init(&info, &d->cfg, rc, true);

	l->job_id = payload->id;
	l->concurrent_id = s.concurrent_id;
	l->project_id = payload->job_info.project_id;
	l->concurrent_project_id = s.concurrent_project_id;
	l->next = p->job_list;
	p->job_list = l;
	p->jobs++;
	d->jobs_running++;
	metrics_gauge_add("runner_jobs_running", "", 1);
	d->builds_started++;
	l->job = job_start(&env, payload, &s, &p->creds, &info, rc, on_job_done, p);
}

size_t
poller_job_ids(const struct poller *p, int64_t **ids, size_t n)
{
	const struct job_link *l;

	for (l = p->job_list; l != NULL; l = l->next) {
		*ids = xreallocarray(*ids, n + 1, sizeof(**ids));
		(*ids)[n++] = l->job_id;
	}
	return n;
}

static void
mark_unhealthy_maybe(struct poller *p, const char *why)
{
	p->failures++;
	if (p->failures < p->rc->unhealthy_requests_limit)
		return;
	p->unhealthy_until = clock_mono_ms() + (uint64_t)p->rc->unhealthy_interval_ms;
	log_kv(LOG_LEVEL_ERROR, POLLER_FIELDS(p),
	    "%" PRId64 " job requests in a row failed (%s): not asking "
	    "for jobs for %" PRId64 " s. If the token was revoked or expired, register the "
	    "runner again or reset its token", p->failures, why,
	    p->rc->unhealthy_interval_ms / 1000);
	p->failures = 0;
}

static void
on_requested(enum api_request_result result, const struct api_answer *answer,
    struct api_job *job, void *arg)
{
	struct poller *p = ((void **)arg)[0];
	struct api_call *self = ((void **)arg)[1];
	struct daemon *d = p->d;
	uint64_t delay = (uint64_t)d->cfg.check_interval * 1000;
	uint64_t took = 0;
	bool again, at_once;

	free(arg);
	for (unsigned i = 0; i < MAX_REQUESTS; i++)
		if (p->calls[i] == self && result != API_JOB_CANCELED) {
			static const char *const names[] = {
				[API_JOB_RECEIVED] = "received",
				[API_JOB_NONE] = "none",
				[API_JOB_FORBIDDEN] = "forbidden",
				[API_JOB_UNAVAILABLE] = "unavailable",
				[API_JOB_FAILED] = "failed",
				[API_JOB_CLIENT_ERROR] = "client_error",
				[API_JOB_CANCELED] = "canceled",
			};
			char labels[48];

			took = clock_mono_ms() - p->sent_at[i];
			snprintf(labels, sizeof(labels), "result=\"%s\"", names[result]);
			metrics_histogram_observe("runner_job_request_duration_seconds", labels,
			    (double)took / 1000);
		}
	forget_call(p, self);
	gitlab_metrics_request_end(p->short_token);
	p->requests--;
	d->requests_in_flight--;
	switch (result) {
	case API_JOB_RECEIVED:
		p->failures = 0;
		p->quick_204s = 0;	/* a job: no 204 loop */
		backoff_reset(&p->backoff);
		if (p->rc == NULL) {
			/* Cannot happen: stopping cancels requests first.  Say so if it does. */
			log_error("job %" PRId64 " arrived for a runner entry that is gone; it "
			    "will time out in GitLab", job->id);
			api_job_free(job);
			slots_changed(d);
			return;
		}
		start_job(p, job);
		delay = p->rc->strict_check_interval == 1 ? delay : 0;
		break;
	case API_JOB_NONE:
		p->failures = 0;
		backoff_reset(&p->backoff);
		log_debug("runner %s: no job", p->rc->name);
		/*
		 * Workhorse's own 204 ends a long poll: the queue changed (a job
		 * may be waiting) or the hold is over, and the runner is meant to
		 * ask again at once (protocol.md 4.4).  So is Rails' 204 when
		 * long polling is on (Gitlab-Ci-Builds-Polling): the next request
		 * carries the value it just gave, which Workhorse holds.  Waiting
		 * check_interval instead adds up to 3 s to the pickup of a job
		 * that comes just after another.  Something that answers so
		 * without holding must not make that a loop: two quick ones in a
		 * row go at once (Rails' 204, then a hold a job ended early),
		 * more wait check_interval until a request is held again.
		 */
		again = answer->workhorse_204 || answer->long_polling;
		at_once = again && (took >= delay || p->quick_204s < QUICK_204_MAX);
		p->quick_204s = again && took < delay ? p->quick_204s + 1 : 0;
		if (at_once)
			delay = 0;
		break;
	case API_JOB_FORBIDDEN:
	case API_JOB_CLIENT_ERROR:
		log_kv(LOG_LEVEL_ERROR, POLLER_FIELDS(p),
		    "checking for jobs... forbidden: %s", answer->message);
		mark_unhealthy_maybe(p, answer->message);
		break;
	case API_JOB_UNAVAILABLE:
	case API_JOB_FAILED:
		log_kv(LOG_LEVEL_WARN, POLLER_FIELDS(p),
		    "checking for jobs... failed: %s", answer->message);
		/*
		 * A GitLab that is down (5xx, no answer) holds the job request
		 * class process-wide (api/pushback.h): the next request waits
		 * there, one probe for all entries, and resumes spread out when
		 * GitLab answers.  A backoff of the entry's own would only keep
		 * it away for up to a minute after that.  What is about this
		 * entry's requests (409, a payload it cannot read) backs off.
		 */
		if (answer->status == 0 || answer->status >= 500)
			backoff_reset(&p->backoff);
		else
			delay = backoff_next(&p->backoff, rand_u32());
		break;
	case API_JOB_CANCELED:
		slots_changed(d);
		return;
	}
	if (p->unhealthy_until > clock_mono_ms())
		delay = p->unhealthy_until - clock_mono_ms();
	schedule(p, delay);
	slots_changed(d);
}

static void
send_request(struct poller *p)
{
	struct daemon *d = p->d;
	void **arg = xcalloc(2, sizeof(void *));
	unsigned i;

	p->requests++;
	d->requests_in_flight++;
	gitlab_metrics_request_start(p->short_token, p->rc->name, d->system_id,
	    p->rc->request_concurrency);
	arg[0] = p;
	for (i = 0; i < MAX_REQUESTS && p->calls[i] != NULL; i++)
		;
	/* The call handle is known only after the call: the callback finds it in arg. */
	arg[1] = api_request_job(d->api, &p->creds, &p->info.info, d->system_id, on_requested, arg);
	if (i < MAX_REQUESTS) {
		p->calls[i] = arg[1];
		p->sent_at[i] = clock_mono_ms();
	}
}

/*
 * FF_USE_JOB_ROUTER: ask where the job router is first (api.c keeps the
 * answer an hour).  This build speaks no gRPC, so whatever the answer it
 * polls GitLab directly, which is what gitlab-runner falls back to when
 * the router fails; it says so once.
 */
static void
on_discovered(enum api_result result, const struct api_answer *answer,
    const char *server_url, void *arg)
{
	struct poller *p = arg;

	(void)answer;
	p->discovery = NULL;
	if (result == API_CANCELED || p->stopped)
		return;
	if (result == API_OK && !p->router_told) {
		log_kv(LOG_LEVEL_INFO, POLLER_FIELDS(p),
		    "GitLab offers a job router at %s; this build asks "
		    "GitLab directly", server_url);
		p->router_told = true;
	}
	if (may_request(p))
		send_request(p);
}

static void
poll_now(struct poller *p)
{
	uint64_t now = clock_mono_ms();

	if (p->stopped)
		return;
	if (p->unhealthy_until > now) {
		schedule(p, p->unhealthy_until - now);
		return;
	}
	if (!may_request(p))
		return;		/* poller_kick() comes when a slot frees */
	if (config_feature_flag(p->rc, "FF_USE_JOB_ROUTER")) {
		if (p->discovery == NULL)
			p->discovery = api_discovery(p->d->api, &p->creds, on_discovered, p);
		return;
	}
	send_request(p);
	/* More request slots (request_concurrency > 1): fill them too. */
	if (may_request(p))
		schedule(p, (uint64_t)p->d->cfg.check_interval * 1000);
}

void
poller_kick(struct poller *p)
{
	uint64_t now = clock_mono_ms();

	if (p->stopped || p->requests > 0 || uv_is_active((uv_handle_t *)&p->timer))
		return;
	if (p->next_at > now) {
		schedule(p, p->next_at - now);
		return;
	}
	poll_now(p);
}

void
poller_stop(struct poller *p)
{
	unsigned i;

	if (p->stopped)
		return;
	p->stopped = true;
	/* The entry may be freed by a reload from here on. */
	p->rc = NULL;
	uv_timer_stop(&p->timer);
	if (p->discovery != NULL) {
		struct api_call *c = p->discovery;

		p->discovery = NULL;
		api_call_cancel(c);
	}
	for (i = 0; i < MAX_REQUESTS; i++)
		if (p->calls[i] != NULL) {
			struct api_call *c = p->calls[i];

			p->calls[i] = NULL;
			api_call_cancel(c);
		}
}

void
poller_interrupt_jobs(struct poller *p)
{
	struct job_link *l, *next;

	for (l = p->job_list; l != NULL; l = next) {
		next = l->next;
		job_interrupt(l->job);
	}
}

void
poller_abandon_jobs(struct poller *p)
{
	struct job_link *l, *next;

	/* job_abandon() may call on_job_done() at once, which unlinks l. */
	for (l = p->job_list; l != NULL; l = next) {
		next = l->next;
		job_abandon(l->job);
	}
}

static void
on_poller_closed(uv_handle_t *h)
{
	struct poller *p = h->data;

	runner_info_release(&p->info);
	free(p->url);
	if (p->token != NULL)
		explicit_bzero(p->token, strlen(p->token));
	free(p->token);
	free(p);
}

bool
poller_free_if_idle(struct poller *p)
{
	if (!p->stopped || p->jobs > 0 || p->requests > 0 || p->discovery != NULL)
		return false;
	if (!p->closing) {
		p->closing = true;
		uv_close((uv_handle_t *)&p->timer, on_poller_closed);
	}
	return true;
}

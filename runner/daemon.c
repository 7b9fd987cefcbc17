/*
 * The daemon that `runner run` and `runner run-single` start, once the
 * config is loaded.  Its life is one state machine (enum daemon_state,
 * daemon.h), and daemon_enter() below is the one place the state changes:
 *
 *   starting    the loop, the GitLab client, the signal watchers;
 *   recovering  the reports a crash left in the journal go first;
 *   running     one poller per entry asks for jobs; SIGHUP or a changed
 *               config.toml reloads without touching running jobs;
 *   draining    SIGQUIT (or --max-builds reached): no new jobs, running
 *               ones finish;
 *   aborting    SIGTERM or SIGINT: jobs are interrupted and still send
 *               their reports; a second one leaves at once (the journal
 *               keeps what was not sent);
 *   abandoning  shutdown_timeout passed: jobs are left to the journal;
 *   closing     out of the loop: every handle is closed;
 *   stopped     the loop closed clean (or says what it left open).
 *
 * Under systemd (Type=notify) it says how it is doing on $NOTIFY_SOCKET:
 * READY=1 when it starts to work, STATUS= as jobs come and go,
 * RELOADING=1/READY=1 around a SIGHUP, STOPPING=1 when a stop begins,
 * WATCHDOG=1 while the loop turns (sd_notify.h).
 */
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/metrics.h"
#include "lib/version.h"
#include "lib/xmalloc.h"
#include "runner/commands.h"
#include "runner/config.h"
#include "runner/daemon.h"
#include "runner/gitlab_metrics.h"
#include "runner/info.h"
#include "runner/job.h"
#include "runner/metrics_server.h"
#include "runner/sd_notify.h"
#include "runner/sweeper.h"
#include "runner/system_id.h"

#define CONFIG_CHECK_MS		3000
/*
 * Reports left by a crash go first, but a GitLab that cannot be reached
 * for one of them must not stop this host from working for hours: after
 * this long, polling starts and the rest are delivered alongside.
 */
#define RECOVERY_WAIT_MS	60000
/* Abandoned jobs kill their stages; one that outlives SIGKILL by this much is left. */
#define ABANDON_WAIT_MS		5000
#define GATE_MAX_MS		8000	/* see gate_max_ms() */

/* The daemon and what only this file touches: d first, so a daemon is its run. */
struct run {
	struct daemon	 d;
	uv_signal_t	 sig_quit, sig_term, sig_int, sig_hup;
	uv_timer_t	 config_check;
	uv_timer_t	 shutdown;	/* shutdown_timeout, then ABANDON_WAIT_MS */
	uv_timer_t	 recovery_wait;
	uint64_t	 recovery_wait_ms;
	struct metrics_server *metrics;
	struct metrics_health health;
	struct timespec	 config_mtime;
	struct notifier	 notify;
	uv_timer_t	 watchdog;
	char		 status[96];	/* the last STATUS= sent */
	uv_timer_t	 wait_check;	/* run-single --wait-timeout */
	uint64_t	 wait_timeout_ms;
	uint64_t	 idle_since_ms;
	struct sweeper	*sweeper;	/* container jobs' leftovers */
};

static const char *const state_names[] = {
	[DAEMON_STARTING] = "starting",
	[DAEMON_RECOVERING] = "recovering",
	[DAEMON_RUNNING] = "running",
	[DAEMON_DRAINING] = "draining",
	[DAEMON_ABORTING] = "aborting",
	[DAEMON_ABANDONING] = "abandoning",
	[DAEMON_CLOSING] = "closing",
	[DAEMON_STOPPED] = "stopped",
};
_Static_assert(sizeof(state_names) / sizeof(state_names[0]) == DAEMON_STOPPED + 1,
    "a name for every daemon state");

/* What `systemctl status` shows before the job count. */
static const char *const status_words[] = {
	[DAEMON_STARTING] = "starting: ",
	[DAEMON_RECOVERING] = "delivering the last run's reports; ",
	[DAEMON_RUNNING] = "",
	[DAEMON_DRAINING] = "draining: ",
	[DAEMON_ABORTING] = "stopping: ",
	[DAEMON_ABANDONING] = "stopping: ",
	[DAEMON_CLOSING] = "stopped: ",
	[DAEMON_STOPPED] = "stopped: ",
};
_Static_assert(sizeof(status_words) / sizeof(status_words[0]) == DAEMON_STOPPED + 1,
    "a STATUS= for every daemon state");

static void	on_recovered(void *);
static void	on_recovery_wait(uv_timer_t *);
static void	on_shutdown_timeout(uv_timer_t *);

static struct run *
run_of(struct daemon *d)
{
	return (struct run *)d;
}

static uint64_t
env_ms(const char *name)
{
	const char *v = getenv(name);

	return v != NULL ? strtoull(v, NULL, 10) : 0;
}

static void
apply_log_settings(const struct config *cfg)
{
	enum log_level level;
	enum log_format format;

	if (!cmd_log_level_given && *cfg->log_level &&
	    log_level_parse(cfg->log_level, &level) == 0)
		log_set_level(level);
	if (!cmd_log_format_given && *cfg->log_format &&
	    log_format_parse(cfg->log_format, &format) == 0)
		log_set_format(format);
}

static unsigned
count_valid(const struct config *cfg)
{
	unsigned n = 0;
	size_t i;

	for (i = 0; i < cfg->n_runners; i++)
		n += cfg->runners[i].problem == NULL;
	return n;
}

/* Entries skipped for a problem; and too few slots for the entries left. */
static void
say_config_warnings(const struct config *cfg)
{
	char *label;
	size_t i;
	unsigned n = count_valid(cfg);

	for (i = 0; i < cfg->n_runners; i++) {
		char *cache = config_cache_unsupported(&cfg->runners[i]);

		if (cfg->runners[i].problem != NULL || cache != NULL) {
			label = cmd_runner_label(cfg, &cfg->runners[i]);
			if (cfg->runners[i].problem != NULL)
				log_warnx("%s: skipped: %s", label, cfg->runners[i].problem);
			else
				log_warnx("%s: %s", label, cache);
			free(label);
		}
		free(cache);
	}
	/*
	 * A job request GitLab holds (long polling, up to 50 s) keeps its
	 * slot: a job could come back on it at any moment, and every job
	 * must have a slot.  With fewer slots than entries, an entry can
	 * wait out another's hold before it may ask.  gitlab-runner warns
	 * the same way (its "worker starvation").
	 */
	if (n > 1 && (uint64_t)cfg->concurrent < n)
		log_warnx("%s: concurrent = %" PRId64 " is less than the %u [[runners]] entries: "
		    "with long polling an entry may wait up to GitLab's hold (50 s) for a "
		    "job request; set concurrent to %u or more", cfg->path, cfg->concurrent,
		    n, n);
}

/* ---- pollers ---- */

static void
start_pollers(struct daemon *d)
{
	unsigned i, n = count_valid(&d->cfg), k = 0;
	struct poller *p;

	say_config_warnings(&d->cfg);
	if (n == 0)
		log_warnx("no runner in %s can run jobs: waiting for a config that has one",
		    d->config_path);
	for (i = 0; i < d->cfg.n_runners; i++) {
		if (d->cfg.runners[i].problem != NULL)
			continue;
		p = poller_new(d, &d->cfg.runners[i], k++, n);
		poller_set_next(p, d->pollers);
		d->pollers = p;
	}
}

/* Drop pollers that were stopped and have no job left. */
static void
reap_pollers(struct daemon *d)
{
	struct poller *p, *prev = NULL, *next;

	for (p = d->pollers; p != NULL; p = next) {
		next = poller_next(p);
		if (poller_free_if_idle(p)) {
			if (prev != NULL)
				poller_set_next(prev, next);
			else
				d->pollers = next;
		} else
			prev = p;
	}
}

static void
stop_pollers(struct daemon *d)
{
	struct poller *p;

	for (p = d->pollers; p != NULL; p = poller_next(p))
		poller_stop(p);
}

/* ---- what systemd hears ---- */

/* STATUS= when it changes: what `systemctl status` shows under the unit. */
static void
say_status(struct run *r)
{
	const struct daemon *d = &r->d;
	char line[sizeof(r->status)];

	if (!notify_enabled(&r->notify))
		return;
	snprintf(line, sizeof(line), "STATUS=%s%u job%s running", status_words[d->state],
	    d->jobs_running, d->jobs_running == 1 ? "" : "s");
	if (strcmp(line, r->status) == 0)
		return;
	memcpy(r->status, line, sizeof(line));
	notify_send(&r->notify, line);
}

/* A stop began (drain, abort, --max-builds): systemd waits for our exit. */
static void
say_stopping(struct run *r)
{
	notify_send(&r->notify, "STOPPING=1");
	say_status(r);
}

static void
on_watchdog(uv_timer_t *t)
{
	struct run *r = t->data;

	notify_send(&r->notify, "WATCHDOG=1");
}

/* ---- the state machine ---- */

/* RECOVERING's work: send what the journal holds, for recovery_wait_ms at most. */
static void
start_recovery(struct run *r)
{
	struct daemon *d = &r->d;
	struct job_env env = { .loop = d->loop, .api = d->api };

	uv_timer_start(&r->recovery_wait, on_recovery_wait, r->recovery_wait_ms, 0);
	/* Beside the reports: what the crashed run's containers left, before any new job. */
	r->sweeper = sweeper_new(d, env_ms("RUNNER_SWEEP_INTERVAL_MS"));
	/* With nothing to send, on_recovered() enters RUNNING from in here. */
	job_recover(&env, d->state_dir, &d->recovery_info.info, on_recovered, r);
}

/*
 * The one place the state changes, forward only, with each state's entry
 * actions.  An action may end the stop at once (stopping the pollers
 * cancels the last request, an abandoned job ends on the spot): CLOSING
 * is then entered from inside.  So the state is set before the actions,
 * and the actions that may lead there come last.
 */
static void
daemon_enter(struct daemon *d, enum daemon_state to)
{
	struct run *r = run_of(d);
	struct poller *p;

	if (to <= d->state) {
		log_error("daemon: %s -> %s goes backwards; staying %s", state_names[d->state],
		    state_names[to], state_names[d->state]);
		return;
	}
	log_debug("daemon: %s -> %s", state_names[d->state], state_names[to]);
	d->state = to;
	switch (to) {
	case DAEMON_STARTING:
		break;
	case DAEMON_RECOVERING:
		start_recovery(r);
		break;
	case DAEMON_RUNNING:
		start_pollers(d);
		break;
	case DAEMON_DRAINING:
		say_stopping(r);
		stop_pollers(d);
		break;
	case DAEMON_ABORTING:
		say_stopping(r);
		uv_timer_start(&r->shutdown, on_shutdown_timeout,
		    (uint64_t)d->cfg.shutdown_timeout * 1000, 0);
		stop_pollers(d);
		for (p = d->pollers; p != NULL; p = poller_next(p))
			poller_interrupt_jobs(p);
		break;
	case DAEMON_ABANDONING:
		d->exit_code = 1;
		uv_timer_start(&r->shutdown, on_shutdown_timeout, ABANDON_WAIT_MS, 0);
		/* Jobs end first, so that nothing they hold outlives the GitLab client. */
		for (p = d->pollers; p != NULL; p = poller_next(p))
			poller_abandon_jobs(p);
		break;
	case DAEMON_CLOSING:
		/*
		 * daemon_run() closes the handles once uv_run() returns: not
		 * here, inside a callback of one of them.
		 */
		uv_stop(d->loop);
		break;
	case DAEMON_STOPPED:
		break;
	}
}

/* Shutting down: nothing new starts, and the loop is left once nothing runs. */
static bool
is_stopping(const struct daemon *d)
{
	return d->state == DAEMON_DRAINING || d->state == DAEMON_ABORTING ||
	    d->state == DAEMON_ABANDONING;
}

/* Given to the pollers: a job ended or a request returned; slots may be free. */
static void
on_slots_changed(void *arg)
{
	struct run *r = arg;
	struct daemon *d = &r->d;
	struct poller *p;

	if (d->state == DAEMON_RUNNING)
		for (p = d->pollers; p != NULL; p = poller_next(p))
			poller_kick(p);
	if (d->state >= DAEMON_CLOSING)
		return;
	reap_pollers(d);
	if (d->max_builds > 0 && d->builds_started >= d->max_builds && d->state == DAEMON_RUNNING &&
	    d->requests_in_flight == 0) {
		log_info("%u job%s run, as --max-builds asked: stopping", d->builds_started,
		    d->builds_started == 1 ? "" : "s");
		daemon_enter(d, DAEMON_DRAINING);
	}
	say_status(r);
	if (is_stopping(d) && d->jobs_running == 0 && d->requests_in_flight == 0)
		daemon_enter(d, DAEMON_CLOSING);
}

/*
 * run-single --wait-timeout: gitlab-runner's checkFinishedConditions, once
 * a second: no job running for that long (since the start or the last
 * job's end) drains the daemon, which then exits 0.
 */
static void
on_wait_check(uv_timer_t *t)
{
	struct run *r = t->data;
	struct daemon *d = &r->d;
	uint64_t now = clock_mono_ms();

	if (d->state != DAEMON_RUNNING || d->jobs_running > 0) {
		r->idle_since_ms = now;
		return;
	}
	if (now - r->idle_since_ms < r->wait_timeout_ms)
		return;
	log_info("This runner has not received a job in %" PRIu64 " seconds, so now exiting",
	    r->wait_timeout_ms / 1000);
	uv_timer_stop(t);
	daemon_enter(d, DAEMON_DRAINING);
	on_slots_changed(r);
}

/*
 * The longest a failing GitLab goes unprobed: the shortest
 * unhealthy_interval of the entries (how long gitlab-runner leaves alone
 * what keeps failing), but never past 8 s.  One probe in 4 .. 8 s per
 * process costs a server nothing, while the default unhealthy_interval (an
 * hour), or even a minute, keeps every job waiting that long after GitLab
 * came back: the outage benchmark measured 51 s with a minute, against
 * gitlab-runner's 12.5 s.
 */
static uint64_t
gate_max_ms(const struct config *cfg)
{
	uint64_t max = GATE_MAX_MS;
	size_t i;

	if (env_ms("RUNNER_GATE_MAX_MS") != 0)
		return env_ms("RUNNER_GATE_MAX_MS");	/* tests shorten it */

	for (i = 0; i < cfg->n_runners; i++)
		if (cfg->runners[i].unhealthy_interval_ms > 0 &&
		    (uint64_t)cfg->runners[i].unhealthy_interval_ms < max)
			max = (uint64_t)cfg->runners[i].unhealthy_interval_ms;
	return max;
}

/* ---- reload: an action of RUNNING, not a state ---- */

/*
 * A new config.toml (SIGHUP, or the file changed).  Any state takes its
 * settings; only RUNNING acts on its entries: RECOVERING starts its
 * pollers from it later, and the states after stay stopped.
 */
static void
reload(struct run *r, const char *why)
{
	struct daemon *d = &r->d;
	struct config next, old;
	struct poller *p;
	char *cause = NULL;
	bool *kept;
	size_t i;
	unsigned k = 0, n;

	if (config_load(&next, d->config_path, 0, &cause) != 0) {
		log_error("config reload (%s): %s; keeping the previous config", why, cause);
		free(cause);
		gitlab_metrics_config_loaded(false);
		return;
	}
	gitlab_metrics_config_loaded(true);
	log_info("config reloaded (%s)", why);
	old = d->cfg;
	d->cfg = next;
	apply_log_settings(&d->cfg);
	api_set_pushback(d->api, gate_max_ms(&d->cfg), (uint64_t)d->cfg.check_interval * 1000);
	if (d->cfg.concurrent < 1) {
		log_error("%s: concurrent is %" PRId64 "; keeping %" PRId64, d->config_path,
		    d->cfg.concurrent, old.concurrent);
		d->cfg.concurrent = old.concurrent;
	}
	if (d->state != DAEMON_RUNNING) {
		config_release(&old);
		return;
	}
	/* Entries are the same runner when url and token are: they keep polling. */
	kept = xcalloc(d->cfg.n_runners + 1, sizeof(bool));
	for (p = d->pollers; p != NULL; p = poller_next(p)) {
		for (i = 0; i < d->cfg.n_runners; i++)
			if (!kept[i] && d->cfg.runners[i].problem == NULL &&
			    poller_matches(p, &d->cfg.runners[i]))
				break;
		if (i < d->cfg.n_runners) {
			kept[i] = true;
			poller_update(p, &d->cfg.runners[i]);
		} else
			poller_stop(p);
	}
	say_config_warnings(&d->cfg);
	n = count_valid(&d->cfg);
	for (i = 0; i < d->cfg.n_runners; i++) {
		if (kept[i] || d->cfg.runners[i].problem != NULL)
			continue;
		p = poller_new(d, &d->cfg.runners[i], k++, n);
		poller_set_next(p, d->pollers);
		d->pollers = p;
	}
	free(kept);
	/* A token both configs hold stays masked: the new entry holds it too. */
	config_release(&old);
	on_slots_changed(r);
}

static bool
config_changed(struct run *r)
{
	struct stat st;

	if (stat(r->d.config_path, &st) != 0)
		return false;
	if (st.st_mtim.tv_sec == r->config_mtime.tv_sec &&
	    st.st_mtim.tv_nsec == r->config_mtime.tv_nsec)
		return false;
	r->config_mtime = st.st_mtim;
	return true;
}

static void
on_config_check(uv_timer_t *t)
{
	struct run *r = t->data;

	if (config_changed(r))
		reload(r, "the file changed");
}

/* ---- the events that move it ---- */

static void
on_recovered(void *arg)
{
	struct run *r = arg;

	uv_timer_stop(&r->recovery_wait);
	if (r->d.state != DAEMON_RECOVERING) {
		on_slots_changed(r);
		return;
	}
	daemon_enter(&r->d, DAEMON_RUNNING);
}

static void
on_recovery_wait(uv_timer_t *t)
{
	struct run *r = t->data;

	if (r->d.state != DAEMON_RECOVERING)
		return;
	log_warnx("reports left by the last run are still being delivered; asking for new "
	    "jobs meanwhile");
	daemon_enter(&r->d, DAEMON_RUNNING);
}

static void
on_shutdown_timeout(uv_timer_t *t)
{
	struct run *r = t->data;
	struct daemon *d = &r->d;

	switch (d->state) {
	case DAEMON_ABORTING:
		log_error("shutdown_timeout: %u job%s not done; their reports stay in the journal "
		    "under %s and are sent at the next start", d->jobs_running,
		    d->jobs_running == 1 ? " is" : "s are", d->state_dir);
		daemon_enter(d, DAEMON_ABANDONING);
		on_slots_changed(r);
		break;
	case DAEMON_ABANDONING:
		/* A stage outlived SIGKILL (a process in the kernel's hands): leave. */
		log_error("jobs did not stop after SIGKILL; leaving them");
		daemon_enter(d, DAEMON_CLOSING);
		break;
	default:
		break;
	}
}

static void
on_signal(uv_signal_t *sig, int signum)
{
	struct run *r = sig->data;
	struct daemon *d = &r->d;

	switch (signum) {
	case SIGHUP:
		/* systemctl reload waits from RELOADING=1 to READY=1. */
		if (d->state == DAEMON_RUNNING || d->state == DAEMON_RECOVERING) {
			notify_send(&r->notify, "RELOADING=1");
			reload(r, "SIGHUP");
			notify_send(&r->notify, "READY=1");
		} else
			reload(r, "SIGHUP");
		return;
	case SIGQUIT:
		if (d->state != DAEMON_RUNNING && d->state != DAEMON_RECOVERING)
			return;
		log_info("SIGQUIT: no new jobs; waiting for %u running job%s to finish",
		    d->jobs_running, d->jobs_running == 1 ? "" : "s");
		daemon_enter(d, DAEMON_DRAINING);
		on_slots_changed(r);
		return;
	default:
		if (d->state >= DAEMON_CLOSING)
			return;		/* came in the turn that left the loop */
		if (d->state == DAEMON_ABORTING || d->state == DAEMON_ABANDONING) {
			log_warnx("%s again: leaving now; unsent reports stay in the journal under %s",
			    strsignal(signum), d->state_dir);
			_exit(1);
		}
		log_info("%s: stopping the %u running job%s and sending their reports "
		    "(again to leave at once)", strsignal(signum), d->jobs_running,
		    d->jobs_running == 1 ? "" : "s");
		daemon_enter(d, DAEMON_ABORTING);
		on_slots_changed(r);
		return;
	}
}

/* ---- start and end ---- */

/* CLOSING's work, once uv_run() has returned. */
static void
close_all(struct run *r)
{
	struct daemon *d = &r->d;
	struct poller *p;

	metrics_server_close(r->metrics);
	r->metrics = NULL;
	if (r->sweeper != NULL)
		sweeper_close(r->sweeper);
	r->sweeper = NULL;
	stop_pollers(d);
	/* Jobs still here (shutdown_timeout) are left to the journal. */
	api_close(d->api);
	d->api = NULL;
	for (p = d->pollers; p != NULL; p = poller_next(p))
		poller_free_if_idle(p);
	uv_close((uv_handle_t *)&r->sig_quit, NULL);
	uv_close((uv_handle_t *)&r->sig_term, NULL);
	uv_close((uv_handle_t *)&r->sig_int, NULL);
	uv_close((uv_handle_t *)&r->sig_hup, NULL);
	uv_close((uv_handle_t *)&r->config_check, NULL);
	uv_close((uv_handle_t *)&r->shutdown, NULL);
	uv_close((uv_handle_t *)&r->recovery_wait, NULL);
	uv_close((uv_handle_t *)&r->watchdog, NULL);
	uv_close((uv_handle_t *)&r->wait_check, NULL);
}

/* Alive while the loop turns; ready while it asks GitLab for jobs. */
static bool
is_ready(void *arg)
{
	return ((struct run *)arg)->d.state == DAEMON_RUNNING;
}

static void
start_metrics(struct run *r, const char *flag)
{
	const char *addr = flag != NULL ? flag : r->d.cfg.listen_address;
	char *cause = NULL;

	metrics_describe("runner_jobs_running", "gauge", "Jobs running or reporting now.");
	metrics_describe("runner_jobs_finished_total", "counter",
	    "Jobs whose final report GitLab accepted, by state (report_lost: gave up).");
	metrics_describe("runner_trace_bytes_sent_total", "counter",
	    "Job log bytes GitLab acknowledged.");
	metrics_describe("runner_job_request_duration_seconds", "histogram",
	    "Time from a job request to its answer, long polls included.");
	metrics_gauge_add("runner_jobs_running", "", 0);
	gitlab_metrics_start(&r->d);
	if (addr == NULL || *addr == '\0')
		return;
	r->health.ready = is_ready;
	r->health.arg = r;
	if ((r->metrics = metrics_server_start(r->d.loop, addr, &r->health, &cause)) == NULL) {
		log_error("listen_address: %s; no /metrics or /health", cause);
		free(cause);
		return;
	}
	log_info("metrics and health on %s (port %d)", addr, metrics_server_port(r->metrics));
}

static void
signal_watch(struct run *r, uv_signal_t *s, int signum)
{
	uv_signal_init(r->d.loop, s);
	s->data = r;
	uv_signal_start(s, on_signal, signum);
}

/*
 * The binary the job scripts call for caches and artifacts: this one, by
 * the path the kernel knows, so a PATH without it or a relative argv[0]
 * does not matter.  "" if unknown: the stages then say the helpers are
 * missing.
 */
static char *
self_path(void)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);

	if (n <= 0)
		return xstrdup("");
	buf[n] = '\0';
	return xstrdup(buf);
}

int
daemon_run(const struct run_options *o, struct config *cfg)
{
	struct run *r = xcalloc(1, sizeof(*r));
	struct daemon *d = &r->d;
	struct api_config ac = { 0 };
	uv_loop_t loop;
	char *dir, cwd[PATH_MAX];
	struct stat st;
	int rc;

	if (uv_loop_init(&loop) != 0)
		fatalx("cannot create an event loop");
	/* First: it takes $NOTIFY_SOCKET out of the environment the jobs inherit. */
	(void)notify_open(&r->notify);
	d->loop = &loop;
	d->cfg = *cfg;
	memset(cfg, 0, sizeof(*cfg));
	d->config_path = xstrdup(d->cfg.path);
	dir = config_dir(&d->cfg);
	d->state_dir = o->state_dir != NULL ? xstrdup(o->state_dir) : xstrdup(dir);
	d->system_id = system_id_load(dir);
	d->user = o->user != NULL ? xstrdup(o->user) : NULL;
	d->builds_base = xstrdup(getcwd(cwd, sizeof(cwd)) != NULL ? cwd : ".");
	d->self_path = self_path();
	d->trace_interval_ms = env_ms("RUNNER_TRACE_INTERVAL_MS");
	d->keepalive_ms = env_ms("RUNNER_KEEPALIVE_MS");
	d->final_backoff_ms = env_ms("RUNNER_FINAL_BACKOFF_MS");
	d->kill_grace_ms = env_ms("RUNNER_KILL_GRACE_MS");
	d->max_builds = o->max_builds;
	d->slots_changed = on_slots_changed;
	d->slots_changed_arg = r;
	if (stat(d->config_path, &st) == 0)
		r->config_mtime = st.st_mtim;
	apply_log_settings(&d->cfg);

	ac.loop = d->loop;
	ac.config_dir = dir;
	ac.connection_max_age_ms = (uint64_t)d->cfg.connection_max_age_ms;
	ac.gate_min_ms = env_ms("RUNNER_GATE_MIN_MS");
	ac.gate_max_ms = gate_max_ms(&d->cfg);
	ac.resume_spread_ms = (uint64_t)d->cfg.check_interval * 1000;
	d->api = api_new(&ac);
	free(dir);
	runner_info_init(&d->recovery_info, &d->cfg, NULL, true);

	signal_watch(r, &r->sig_quit, SIGQUIT);
	signal_watch(r, &r->sig_term, SIGTERM);
	signal_watch(r, &r->sig_int, SIGINT);
	signal_watch(r, &r->sig_hup, SIGHUP);
	uv_timer_init(d->loop, &r->config_check);
	r->config_check.data = r;
	if (o->watch_config) {
		uint64_t every = env_ms("RUNNER_CONFIG_CHECK_MS");

		uv_timer_start(&r->config_check, on_config_check, every ? every : CONFIG_CHECK_MS,
		    every ? every : CONFIG_CHECK_MS);
	}
	uv_timer_init(d->loop, &r->shutdown);
	r->shutdown.data = r;
	start_metrics(r, o->listen_address);
	uv_timer_init(d->loop, &r->recovery_wait);
	r->recovery_wait.data = r;
	r->recovery_wait_ms = env_ms("RUNNER_RECOVERY_WAIT_MS");
	if (r->recovery_wait_ms == 0)
		r->recovery_wait_ms = RECOVERY_WAIT_MS;

	uv_timer_init(d->loop, &r->wait_check);
	r->wait_check.data = r;
	r->wait_timeout_ms = (uint64_t)o->wait_timeout_s * 1000;
	r->idle_since_ms = clock_mono_ms();
	if (r->wait_timeout_ms > 0)
		uv_timer_start(&r->wait_check, on_wait_check, 1000, 1000);

	log_info("runner %s starting: %zu runner%s in %s, concurrent %" PRId64 ", state in %s",
	    version_number(), d->cfg.n_runners, d->cfg.n_runners == 1 ? "" : "s", d->config_path,
	    d->cfg.concurrent, d->state_dir);
	daemon_enter(d, DAEMON_RECOVERING);

	/*
	 * Ready: the config is loaded, the listener is up and the loop is about
	 * to turn.  Not after the recovery: reports to an unreachable GitLab
	 * must not hold `systemctl start` (or a package upgrade) for a minute.
	 */
	uv_timer_init(d->loop, &r->watchdog);
	r->watchdog.data = r;
	if (notify_watchdog_interval_ms(&r->notify) > 0) {
		log_debug("systemd watchdog: WATCHDOG=1 every %" PRIu64 " ms",
		    notify_watchdog_interval_ms(&r->notify));
		uv_timer_start(&r->watchdog, on_watchdog, 0, notify_watchdog_interval_ms(&r->notify));
	}
	notify_send(&r->notify, "READY=1");
	say_status(r);

	/* Until CLOSING stops it: the signal watchers keep the loop alive till then. */
	uv_run(d->loop, UV_RUN_DEFAULT);
	close_all(r);
	uv_run(d->loop, UV_RUN_DEFAULT);
	if ((rc = uv_loop_close(d->loop)) != 0)
		log_warnx("event loop closed with handles still open (%s)", uv_strerror(rc));
	daemon_enter(d, DAEMON_STOPPED);
	gitlab_metrics_stop();

	rc = d->exit_code;
	runner_info_release(&d->recovery_info);
	config_release(&d->cfg);
	free(d->config_path);
	free(d->state_dir);
	free(d->system_id);
	free(d->user);
	free(d->builds_base);
	free(d->self_path);
	notify_close(&r->notify);
	free(r);
	log_info("runner stopped");
	return rc;
}

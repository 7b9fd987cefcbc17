/*
 * `runner run`: the daemon.  Reads top to bottom as its life goes:
 *
 *   1. load config.toml (a bad file stops here; bad entries are skipped);
 *   2. create the loop, the GitLab client, the signal watchers;
 *   3. finish the reports a crash left in the journal;
 *   4. start one poller per entry, and run until told to stop;
 *   5. SIGQUIT drains (no new jobs, running ones finish), SIGTERM and
 *      SIGINT interrupt the jobs and still send their reports, a second
 *      one leaves at once (the journal keeps what was not sent), SIGHUP or
 *      a changed config.toml reloads without touching running jobs;
 *   6. close everything and check the loop closes clean.
 *
 * Under systemd (Type=notify) it says how it is doing on $NOTIFY_SOCKET:
 * READY=1 when it starts to work, STATUS= as jobs come and go,
 * RELOADING=1/READY=1 around a SIGHUP, STOPPING=1 when a stop begins,
 * WATCHDOG=1 while the loop turns (sd_notify.h).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "lib/log.h"
#include "lib/metrics.h"
#include "lib/version.h"
#include "lib/xmalloc.h"
#include "runner/commands.h"
#include "runner/config.h"
#include "runner/daemon.h"
#include "runner/info.h"
#include "runner/job.h"
#include "runner/metrics_server.h"
#include "runner/sd_notify.h"
#include "runner/system_id.h"

static const char usage[] =
    "runner run [-c FILE] [-d DIR] [-u USER] [--state-dir DIR]";

#define CONFIG_CHECK_MS		3000
/*
 * Reports left by a crash go first, but a GitLab that cannot be reached
 * for one of them must not stop this host from working for hours: after
 * this long, polling starts and the rest are delivered alongside.
 */
#define RECOVERY_WAIT_MS	60000

struct run {
	struct daemon	 d;
	uv_signal_t	 sig_quit, sig_term, sig_int, sig_hup;
	uv_timer_t	 config_check;
	uv_timer_t	 shutdown;
	uv_timer_t	 recovery_wait;
	struct metrics_server *metrics;
	struct metrics_health health;
	bool		 abandoning;	/* shutdown_timeout passed: jobs abandoned */
	struct timespec	 config_mtime;
	bool		 closed;
	struct notifier	 notify;
	uv_timer_t	 watchdog;
	char		 status[96];	/* the last STATUS= sent */
};

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

	for (i = 0; i < cfg->n_runners; i++)
		if (cfg->runners[i].problem != NULL) {
			label = cmd_runner_label(cfg, &cfg->runners[i]);
			log_warnx("%s: skipped: %s", label, cfg->runners[i].problem);
			free(label);
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

static void	finish(struct run *);

/* ---- what systemd hears ---- */

/* STATUS= when it changes: what `systemctl status` shows under the unit. */
static void
say_status(struct run *r)
{
	const struct daemon *d = &r->d;
	const char *what = "";
	char line[sizeof(r->status)];

	if (!notify_enabled(&r->notify))
		return;
	switch (d->state) {
	case DAEMON_RECOVERING:	what = "delivering the last run's reports; "; break;
	case DAEMON_DRAINING:	what = "draining: "; break;
	case DAEMON_ABORTING:	what = "stopping: "; break;
	case DAEMON_STOPPED:	what = "stopped: "; break;
	case DAEMON_RUNNING:	break;
	}
	snprintf(line, sizeof(line), "STATUS=%s%u job%s running", what, d->jobs_running,
	    d->jobs_running == 1 ? "" : "s");
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

void
daemon_slots_changed(struct daemon *d)
{
	struct run *r = (struct run *)d;
	struct poller *p;

	if (d->state == DAEMON_RUNNING)
		for (p = d->pollers; p != NULL; p = poller_next(p))
			poller_kick(p);
	if (r->closed)
		return;
	reap_pollers(d);
	if (d->max_builds > 0 && d->builds_started >= d->max_builds && d->state == DAEMON_RUNNING &&
	    d->requests_in_flight == 0) {
		log_info("%u job%s run, as --max-builds asked: stopping", d->builds_started,
		    d->builds_started == 1 ? "" : "s");
		d->state = DAEMON_DRAINING;
		stop_pollers(d);
		say_stopping(r);
	}
	say_status(r);
	if ((d->state == DAEMON_DRAINING || d->state == DAEMON_ABORTING) &&
	    d->jobs_running == 0 && d->requests_in_flight == 0)
		finish(r);
}

/* ---- reload ---- */

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
		return;
	}
	log_info("config reloaded (%s)", why);
	old = d->cfg;
	d->cfg = next;
	apply_log_settings(&d->cfg);
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
	/* Tokens of both configs were masked; releasing the old one unmasks shared ones. */
	config_release(&old);
	for (i = 0; i < d->cfg.n_runners; i++)
		log_secret_add(d->cfg.runners[i].token);
	daemon_slots_changed(d);
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

/* ---- signals ---- */

static void
on_shutdown_timeout(uv_timer_t *t)
{
	struct run *r = t->data;
	struct poller *p;

	if (r->abandoning) {
		/* A stage outlived SIGKILL (a process in the kernel's hands): leave. */
		log_error("jobs did not stop after SIGKILL; leaving them");
		finish(r);
		return;
	}
	log_error("shutdown_timeout: %u job%s not done; their reports stay in the journal "
	    "under %s and are sent at the next start", r->d.jobs_running,
	    r->d.jobs_running == 1 ? " is" : "s are", r->d.state_dir);
	r->d.exit_code = 1;
	r->abandoning = true;
	/* Jobs end first, so that nothing they hold outlives the GitLab client. */
	for (p = r->d.pollers; p != NULL; p = poller_next(p))
		poller_abandon_jobs(p);
	uv_timer_start(&r->shutdown, on_shutdown_timeout, 5000, 0);
	daemon_slots_changed(&r->d);
}

static void
abort_jobs(struct run *r)
{
	struct daemon *d = &r->d;
	struct poller *p;

	d->state = DAEMON_ABORTING;
	stop_pollers(d);
	for (p = d->pollers; p != NULL; p = poller_next(p))
		poller_interrupt_jobs(p);
	uv_timer_start(&r->shutdown, on_shutdown_timeout,
	    (uint64_t)d->cfg.shutdown_timeout * 1000, 0);
	daemon_slots_changed(d);
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
		d->state = DAEMON_DRAINING;
		stop_pollers(d);
		say_stopping(r);
		daemon_slots_changed(d);
		return;
	default:
		if (d->state == DAEMON_ABORTING) {
			log_warnx("%s again: leaving now; unsent reports stay in the journal under %s",
			    strsignal(signum), d->state_dir);
			_exit(1);
		}
		log_info("%s: stopping the %u running job%s and sending their reports "
		    "(again to leave at once)", strsignal(signum), d->jobs_running,
		    d->jobs_running == 1 ? "" : "s");
		abort_jobs(r);
		say_stopping(r);
		return;
	}
}

/* ---- life ---- */

static void
on_recovered(void *arg)
{
	struct run *r = arg;

	uv_timer_stop(&r->recovery_wait);
	if (r->d.state != DAEMON_RECOVERING) {
		daemon_slots_changed(&r->d);
		return;
	}
	r->d.state = DAEMON_RUNNING;
	start_pollers(&r->d);
}

static void
on_recovery_wait(uv_timer_t *t)
{
	struct run *r = t->data;

	if (r->d.state != DAEMON_RECOVERING)
		return;
	log_warnx("reports left by the last run are still being delivered; asking for new "
	    "jobs meanwhile");
	r->d.state = DAEMON_RUNNING;
	start_pollers(&r->d);
}

static void
finish(struct run *r)
{
	if (r->closed)
		return;
	r->closed = true;
	r->d.state = DAEMON_STOPPED;
	uv_stop(r->d.loop);
}

static void
close_all(struct run *r)
{
	struct daemon *d = &r->d;
	struct poller *p;

	metrics_server_close(r->metrics);
	r->metrics = NULL;
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

/* Shared by run and run-single: everything after the config is loaded. */
int
cmd_run_daemon(struct run_options *o, struct config *cfg)
{
	struct run *r = xcalloc(1, sizeof(*r));
	struct daemon *d = &r->d;
	struct api_config ac = { 0 };
	struct job_env env;
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
	if (stat(d->config_path, &st) == 0)
		r->config_mtime = st.st_mtim;
	apply_log_settings(&d->cfg);

	ac.loop = d->loop;
	ac.config_dir = dir;
	ac.connection_max_age_ms = (uint64_t)d->cfg.connection_max_age_ms;
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
	{
		uint64_t wait = env_ms("RUNNER_RECOVERY_WAIT_MS");

		uv_timer_start(&r->recovery_wait, on_recovery_wait,
		    wait ? wait : RECOVERY_WAIT_MS, 0);
	}

	log_info("runner %s starting: %zu runner%s in %s, concurrent %" PRId64 ", state in %s",
	    version_number(), d->cfg.n_runners, d->cfg.n_runners == 1 ? "" : "s", d->config_path,
	    d->cfg.concurrent, d->state_dir);
	d->state = DAEMON_RECOVERING;
	env.loop = d->loop;
	env.api = d->api;
	env.executor = NULL;
	job_recover(&env, d->state_dir, &d->recovery_info.info, on_recovered, r);

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

	uv_run(d->loop, UV_RUN_DEFAULT);
	close_all(r);
	uv_run(d->loop, UV_RUN_DEFAULT);
	if ((rc = uv_loop_close(d->loop)) != 0)
		log_warnx("event loop closed with handles still open (%s)", uv_strerror(rc));

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

/* What the flags of `run` say; o goes to the daemon. */
struct run_flags {
	const char		*config;
	const char		*workdir;
	struct run_options	 o;
};

static int
cmd_run(const struct cli_command *cmd, void *opts)
{
	struct run_flags *f = opts;
	struct run_options *o = &f->o;
	struct config cfg;
	const char *config_flag = f->config, *workdir = f->workdir;
	int rc;

	(void)cmd;
	o->watch_config = true;
	if (workdir != NULL && chdir(workdir) != 0) {
		log_error("run: cannot use %s as working directory: %s", workdir, strerror(errno));
		return 1;
	}
	/*
	 * A service is installed and started before `runner register` writes
	 * its config: like gitlab-runner, run with no runners until the file
	 * appears (the config watch loads it), instead of failing and being
	 * restarted every few seconds.
	 */
	if (cmd_load_config(&cfg, config_flag, CONFIG_ALLOW_MISSING) != 0)
		return 1;
	if (access(cfg.path, F_OK) != 0 && errno == ENOENT)
		log_warnx("%s does not exist yet: no runners until `runner register` writes it",
		    cfg.path);
	if (cfg.concurrent < 1) {
		log_error("%s: concurrent is %" PRId64 ": it must be 1 or more", cfg.path,
		    cfg.concurrent);
		config_release(&cfg);
		return 1;
	}
	rc = cmd_run_daemon(o, &cfg);
	config_release(&cfg);
	return rc;
}

#define RF(f)	offsetof(struct run_flags, f)

static const struct cli_option run_options[] = {
	CMD_OPT_CONFIG(struct run_flags, config),
	CLI_OPT("working-directory", 'd', CLI_STRING, NULL, RF(workdir), "DIR",
	    "where builds/ and cache/ go (default: .)"),
	CLI_OPT("user", 'u', CLI_STRING, NULL, RF(o.user), "USER",
	    "run jobs as this user (through su)"),
	CLI_OPT("state-dir", 0, CLI_STRING, NULL, RF(o.state_dir), "DIR",
	    "the journal of unsent reports (default: next to config.toml)"),
	CLI_OPT("listen-address", 0, CLI_STRING, NULL, RF(o.listen_address), "ADDR",
	    "/metrics and /health (default: listen_address of config.toml)"),
	/* gitlab-runner's; nothing to do here */
	CLI_OPT("service", 'n', CLI_IGNORED_VALUE, NULL, 0, "NAME",
	    "accepted for gitlab-runner's service files; not used"),
	CLI_OPT("syslog", 0, CLI_IGNORED_BOOL, NULL, 0, NULL,
	    "accepted for gitlab-runner's service files; not used"),
	CLI_END,
};

const struct cli_command cmd_run_entry = {
	.name = "run",
	.summary = "Run the runners: ask GitLab for jobs, run them, report them",
	.usage = usage,
	.help = "Run the runners of config.toml: ask GitLab for jobs, run them, report them.",
	.options = run_options,
	.opts_size = sizeof(struct run_flags),
	.run = cmd_run,
};

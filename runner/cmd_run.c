/*
 * `runner run`: its options, then config.toml, then the daemon
 * (daemon.c) until it stops.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/cli.h"
#include "lib/log.h"
#include "runner/commands.h"
#include "runner/config.h"
#include "runner/daemon.h"

static const char usage[] =
    "runner run [-c FILE] [-d DIR] [-u USER] [--state-dir DIR] [--listen-address ADDR] "
    "[-n NAME] [--syslog]";

struct run_flags {
	const char		*config;
	const char		*workdir;
	const char		*service;
	bool			 syslog;
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
	/*
	 * gitlab-runner's --syslog adds its system service logger, named by
	 * --service, beside stderr; here that is syslog(3) under that name.
	 */
	if (f->syslog)
		log_set_syslog(f->service);
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
	rc = daemon_run(o, &cfg);
	config_release(&cfg);
	log_set_syslog(NULL);
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
	CLI_OPT("listen-address", 0, CLI_STRING, "LISTEN_ADDRESS", RF(o.listen_address), "ADDR",
	    "/metrics and /health (default: listen_address of config.toml)"),
	CLI_OPT("service", 'n', CLI_STRING, NULL, RF(service), "NAME",
	    "the service's name: what --syslog logs as", .def = "gitlab-runner"),
	CLI_OPT("syslog", 0, CLI_BOOL, "LOG_SYSLOG", RF(syslog), NULL,
	    "log to syslog as well (info and above)"),
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

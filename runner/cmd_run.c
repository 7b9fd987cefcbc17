/*
 * `runner run`: its options, then config.toml, then the daemon
 * (daemon.c) until it stops.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "runner/commands.h"
#include "runner/config.h"
#include "runner/daemon.h"

static const char usage[] =
    "runner run [-c FILE] [-d DIR] [-u USER] [--state-dir DIR]";

int
cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "working-directory", required_argument, NULL, 'd' },
		{ "user", required_argument, NULL, 'u' },
		{ "state-dir", required_argument, NULL, 's' },
		{ "service", required_argument, NULL, 'n' },
		{ "syslog", no_argument, NULL, 'l' },
		{ "listen-address", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct run_options o = { .watch_config = true };
	struct config cfg;
	const char *config_flag = NULL, *workdir = NULL;
	int ch, rc;

	opterr = 0;
	optind = 1;
	while ((ch = cmd_getopt(argc, argv, "+:c:d:u:n:h", longopts, "run", usage)) != -1) {
		switch (ch) {
		case 'c': config_flag = optarg; break;
		case 'd': workdir = optarg; break;
		case 'u': o.user = optarg; break;
		case 's': o.state_dir = optarg; break;
		case 'L': o.listen_address = optarg; break;
		case 'n': case 'l': break;	/* gitlab-runner's; nothing to do here */
		case 'h':
			printf("usage: %s\n\nRun the runners of config.toml: ask GitLab for jobs, "
			    "run them, report them.\n"
			    "  -c, --config FILE             config file\n"
			    "  -d, --working-directory DIR   where builds/ and cache/ go (default: .)\n"
			    "  -u, --user USER               run jobs as this user (through su)\n"
			    "      --state-dir DIR           the journal of unsent reports "
			    "(default: next to config.toml)\n"
			    "      --listen-address ADDR     /metrics and /health (default: "
			    "listen_address of config.toml)\n", usage);
			return 0;
		default:
			return 2;
		}
	}
	if (cmd_no_arguments(argc, argv, "run", usage) != 0)
		return 2;
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
	rc = daemon_run(&o, &cfg);
	config_release(&cfg);
	return rc;
}

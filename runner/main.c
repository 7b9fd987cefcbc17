/*
 * runner: a GitLab-compatible CI job runner agent.
 *
 * This file reads top to bottom: global options (log level and format),
 * then the command table, then the command.  Each command lives in its own
 * cmd_<name>.c; the table below is the list of what `runner` can do.
 *
 * Where to read next: the daemon, which is what `runner run` is: its life
 * top to bottom in runner/daemon.c, its map in runner/daemon.h (poller.c
 * asks GitLab for jobs, job.c runs one, trace.c sends its log).  README.md
 * ("How the code is laid out") names every folder: lib/ (leaf utilities),
 * api/ (the GitLab client), executors/, helpers/ (the commands the job
 * script calls) and runner/.
 */
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/close_range.h>
#include <sys/syscall.h>

#include "helpers/helpers.h"
#include "lib/log.h"
#include "lib/version.h"
#include "runner/commands.h"

struct command {
	const char	*name;
	const char	*summary;
	int		(*run)(int argc, char **argv);
};

static const struct command commands[] = {
	{ "run", "Run the runners: ask GitLab for jobs, run them, report them", cmd_run },
	{ "run-single", "Run one runner given by flags, for N jobs", cmd_run_single },
	{ "register", "Register a runner with GitLab and save it in config.toml", cmd_register },
	{ "verify", "Check each runner's token with GitLab", cmd_verify },
	{ "unregister", "Unregister runners and remove them from config.toml", cmd_unregister },
	{ "reset-token", "Rotate runner authentication tokens", cmd_reset_token },
	{ "list", "List the runners in config.toml", cmd_list },
	{ "install", "Install the runner as a systemd service", cmd_service },
	{ "uninstall", "Remove the systemd service", cmd_service },
	{ "start", "Start the service (systemctl start)", cmd_service },
	{ "stop", "Stop the service: running jobs finish first", cmd_service },
	{ "restart", "Restart the service (systemctl restart)", cmd_service },
	{ "status", "Say whether the service is running", cmd_service },
	{ "artifacts-uploader", "Archive files and upload them as job artifacts "
	    "(called by the job script)", cmd_artifacts_uploader },
	{ "artifacts-downloader", "Download and extract a job's artifacts "
	    "(called by the job script)", cmd_artifacts_downloader },
	{ "cache-archiver", "Archive files into the local cache (called by the job script)",
	    cmd_cache_archiver },
	{ "cache-extractor", "Extract a cache archive (called by the job script)",
	    cmd_cache_extractor },
};

#define NCOMMANDS	(sizeof(commands) / sizeof(commands[0]))

static const char usage_line[] =
    "runner [--debug] [--log-level LEVEL] [--log-format FORMAT] COMMAND [OPTIONS]";

static void
print_help(FILE *f)
{
	size_t i;

	fprintf(f, "usage: %s\n\n"
	    "A GitLab-compatible CI job runner agent, a drop-in for gitlab-runner.\n\n"
	    "Commands:\n", usage_line);
	for (i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-20s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nGlobal options:\n"
	    "  --debug               log at debug level\n"
	    "  --log-level LEVEL     debug, info, warn, error, fatal or panic "
	    "(env LOG_LEVEL)\n"
	    "  --log-format FORMAT   runner, text or json (env LOG_FORMAT)\n"
	    "  -h, --help            show this help\n"
	    "  -v, --version         print the version\n\n"
	    "Run 'runner COMMAND --help' for the options of a command.\n");
}

static void
print_version(void)
{
	printf("Version:      %s\n"
	    "Git revision: %s\n"
	    "OS/Arch:      %s/%s\n",
	    version_number(), version_revision(), version_os(), version_arch());
}

/*
 * Descriptors inherited from whoever started us must not reach the jobs'
 * processes.  close_range() does it in one call where the kernel has
 * CLOSE_RANGE_CLOEXEC (5.11); otherwise each open one is marked.
 */
static void
cloexec_inherited(void)
{
	long max = sysconf(_SC_OPEN_MAX);
	int fd;

	if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return;
	for (fd = 3; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
		(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
}

static int
usage_error(const char *fmt, const char *arg)
{
	fputs("runner: ", stderr);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nusage: %s\nRun 'runner --help' for the commands.\n",
	    usage_line);
	return 2;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "debug", no_argument, NULL, 'd' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "log-format", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	enum log_level level;
	enum log_format format;
	const char *env;
	size_t i;
	int ch;

	/* As in gitlab-runner, the environment variables are the flags' defaults. */
	/*
	 * A stage that exits without reading all of its script makes our
	 * write to its stdin fail: that is an error to handle, not a signal
	 * that ends the daemon.
	 */
	signal(SIGPIPE, SIG_IGN);
	cloexec_inherited();

	if ((env = getenv("LOG_LEVEL")) != NULL && *env != '\0' &&
	    log_level_parse(env, &level) == 0) {
		log_set_level(level);
		cmd_log_level_given = true;
	}
	if ((env = getenv("LOG_FORMAT")) != NULL && *env != '\0' &&
	    log_format_parse(env, &format) == 0) {
		log_set_format(format);
		cmd_log_format_given = true;
	}

	/* '+': stop at the command name; its options are the command's. */
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+:hv", longopts, NULL)) != -1) {
		switch (ch) {
		case 'd':
			log_set_level(LOG_LEVEL_DEBUG);
			cmd_log_level_given = true;
			break;
		case 'l':
			if (log_level_parse(optarg, &level) != 0)
				return usage_error("unknown log level '%s' (debug, info, "
				    "warn, error, fatal, panic)", optarg);
			log_set_level(level);
			cmd_log_level_given = true;
			break;
		case 'f':
			if (log_format_parse(optarg, &format) != 0)
				return usage_error("unknown log format '%s' (runner, "
				    "text, json)", optarg);
			log_set_format(format);
			cmd_log_format_given = true;
			break;
		case 'h':
			print_help(stdout);
			return 0;
		case 'v':
			print_version();
			return 0;
		case ':':
			return usage_error("%s needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown flag '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error("%s", "no command given");

	for (i = 0; i < NCOMMANDS; i++)
		if (strcmp(argv[optind], commands[i].name) == 0)
			return commands[i].run(argc - optind, argv + optind);
	if (strcmp(argv[optind], "help") == 0) {
		print_help(stdout);
		return 0;
	}
	if (strcmp(argv[optind], "version") == 0) {
		print_version();
		return 0;
	}
	return usage_error("unknown command '%s'", argv[optind]);
}

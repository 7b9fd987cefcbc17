/*
 * runner: a GitLab-compatible CI job runner agent.
 *
 * This file reads top to bottom: the list of commands, global options (log
 * level and format), then the command.  Each command is a table entry
 * (struct cli_command, lib/cli.h) in its own cmd_<name>.c: its options
 * are data that lib/cli.c parses, and its help comes from them.
 *
 * Where to read next: the daemon, which is what `runner run` is: its life
 * top to bottom in runner/daemon.c, its map in runner/daemon.h (poller.c
 * asks GitLab for jobs, job.c runs one, trace.c sends its log).  The whole
 * design, folder by folder and state machine by state machine, is
 * docs/design.md; the wire protocol as this runner speaks it, with the
 * section numbers comments cite, is docs/protocol.md.
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
#include "lib/cli.h"
#include "lib/log.h"
#include "lib/strconv.h"
#include "lib/version.h"
#include "runner/commands.h"

/* What `runner` can do, in the order `runner help` lists it. */
static const struct cli_command *const commands[] = {
	&cmd_run_entry,
	&cmd_run_single_entry,
	&cmd_register_entry,
	&cmd_verify_entry,
	&cmd_unregister_entry,
	&cmd_reset_token_entry,
	&cmd_list_entry,
	&cmd_install_entry,
	&cmd_uninstall_entry,
	&cmd_start_entry,
	&cmd_stop_entry,
	&cmd_restart_entry,
	&cmd_status_entry,
	&cmd_artifacts_uploader_entry,
	&cmd_artifacts_downloader_entry,
	&cmd_cache_archiver_entry,
	&cmd_cache_extractor_entry,
	&cmd_health_check_entry,
};

#define NCOMMANDS	(sizeof(commands) / sizeof(commands[0]))

static const char usage_line[] =
    "runner [--debug] [-l LEVEL] [--log-format FORMAT] COMMAND [OPTIONS]";

static void
print_help(FILE *f)
{
	size_t i;

	fprintf(f, "usage: %s\n\n"
	    "A GitLab-compatible CI job runner agent, a drop-in for gitlab-runner.\n\n"
	    "Commands:\n", usage_line);
	for (i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-20s %s\n", commands[i]->name, commands[i]->summary);
	fprintf(f, "\nGlobal options:\n"
	    "  --debug                   log at debug level (env RUNNER_DEBUG)\n"
	    "  -l, --log-level LEVEL     debug, info, warn, error, fatal or panic "
	    "(env LOG_LEVEL)\n"
	    "  --log-format FORMAT       runner, text or json (env LOG_FORMAT)\n"
	    "  -h, --help                show this help\n"
	    "  -v, --version             print the version\n\n"
	    "Run 'runner help COMMAND' or 'runner COMMAND --help' for the options of "
	    "a command.\n");
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

static const struct cli_command *
find_command(const char *name)
{
	size_t i;

	for (i = 0; i < NCOMMANDS; i++)
		if (strcmp(name, commands[i]->name) == 0)
			return commands[i];
	return NULL;
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

/*
 * gitlab-runner's global flags take their environment variables as
 * defaults (urfave/cli's EnvVar): RUNNER_DEBUG for --debug, LOG_LEVEL for
 * -l/--log-level, LOG_FORMAT for --log-format.  A value it cannot read is
 * an error there too, not a silent default.  --debug (or RUNNER_DEBUG)
 * wins over any level, as there.
 */
static int
global_env(bool *debug)
{
	enum log_level level;
	enum log_format format;
	const char *env;

	if ((env = getenv("LOG_LEVEL")) != NULL && *env != '\0') {
		if (log_level_parse(env, &level) != 0)
			return usage_error("$LOG_LEVEL: unknown log level '%s' (debug, info, "
			    "warn, error, fatal, panic)", env);
		log_set_level(level);
		cmd_log_level_given = true;
	}
	if ((env = getenv("LOG_FORMAT")) != NULL && *env != '\0') {
		if (log_format_parse(env, &format) != 0)
			return usage_error("$LOG_FORMAT: unknown log format '%s' (runner, "
			    "text, json)", env);
		log_set_format(format);
		cmd_log_format_given = true;
	}
	if ((env = getenv("RUNNER_DEBUG")) != NULL && *env != '\0') {
		if (strconv_parse_bool(env, debug) != 0)
			return usage_error("$RUNNER_DEBUG: \"%s\" is not true or false", env);
	}
	return 0;
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
	const struct cli_command *cmd;
	enum log_level level;
	enum log_format format;
	bool debug = false;
	int ch;

	/*
	 * A stage that exits without reading all of its script makes our
	 * write to its stdin fail: that is an error to handle, not a signal
	 * that ends the daemon.
	 */
	signal(SIGPIPE, SIG_IGN);
	cloexec_inherited();

	if (global_env(&debug) != 0)
		return 2;

	/* '+': stop at the command name; its options are the command's. */
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+:hvl:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'd':
			debug = true;
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
	if (debug) {
		log_set_level(LOG_LEVEL_DEBUG);
		cmd_log_level_given = true;
	}
	if (optind >= argc)
		return usage_error("%s", "no command given");

	if ((cmd = find_command(argv[optind])) != NULL)
		return cli_run(cmd, argc - optind, argv + optind);
	if (strcmp(argv[optind], "help") == 0) {
		if (optind + 1 >= argc) {
			print_help(stdout);
			return 0;
		}
		if ((cmd = find_command(argv[optind + 1])) == NULL)
			return usage_error("help: unknown command '%s'", argv[optind + 1]);
		cli_help(cmd, stdout);
		return 0;
	}
	if (strcmp(argv[optind], "version") == 0) {
		print_version();
		return 0;
	}
	return usage_error("unknown command '%s'", argv[optind]);
}

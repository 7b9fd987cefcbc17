/*
 * `runner run-single`: one runner from the command line, no config file,
 * for ephemeral or autoscaled hosts (and tests): it asks for jobs, runs
 * up to --max-builds of them, sends their reports, and exits.  Under the
 * flags it is the same daemon as `run`, on a config built in memory.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/xmalloc.h"
#include "runner/commands.h"
#include "runner/config.h"
#include "runner/daemon.h"
#include "runner/toml.h"

static const char usage[] =
    "runner run-single --url URL --token TOKEN [--executor shell] [--max-builds N] [OPTIONS]";

static void
put(struct toml_value *t, const char *key, const char *value)
{
	if (value != NULL && *value != '\0')
		toml_table_set(t, key, strlen(key), toml_new_string(value, strlen(value)));
}

int
cmd_run_single(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "url", required_argument, NULL, 'u' },
		{ "token", required_argument, NULL, 't' },
		{ "name", required_argument, NULL, 'N' },
		{ "executor", required_argument, NULL, 'e' },
		{ "shell", required_argument, NULL, 'S' },
		{ "builds-dir", required_argument, NULL, 'b' },
		{ "max-builds", required_argument, NULL, 'm' },
		{ "state-dir", required_argument, NULL, 's' },
		{ "working-directory", required_argument, NULL, 'd' },
		{ "tls-ca-file", required_argument, NULL, 'C' },
		{ "tls-cert-file", required_argument, NULL, 'T' },
		{ "tls-key-file", required_argument, NULL, 'K' },
		{ "output-limit", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct run_options o = { 0 };
	struct toml_value *doc, *runners, *entry;
	struct config cfg;
	const char *url = getenv("CI_SERVER_URL"), *token = getenv("CI_SERVER_TOKEN");
	const char *name = getenv("RUNNER_NAME"), *executor = "shell", *shell = NULL;
	const char *builds = NULL, *workdir = NULL, *ca = NULL, *cert = NULL, *key = NULL;
	char *end, *cause = NULL, host[256] = "run-single";
	long long n, output_limit = 0;
	int ch, rc;

	opterr = 0;
	optind = 1;
	while ((ch = cmd_getopt(argc, argv, "+:u:t:d:h", longopts, "run-single",
	    usage)) != -1) {
		switch (ch) {
		case 'u': url = optarg; break;
		case 't': token = optarg; break;
		case 'N': name = optarg; break;
		case 'e': executor = optarg; break;
		case 'S': shell = optarg; break;
		case 'b': builds = optarg; break;
		case 's': o.state_dir = optarg; break;
		case 'd': workdir = optarg; break;
		case 'C': ca = optarg; break;
		case 'T': cert = optarg; break;
		case 'K': key = optarg; break;
		case 'm':
		case 'o':
			errno = 0;
			n = strtoll(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || n < 0 || n > INT_MAX)
				return cmd_usage_error(usage, "run-single: %s \"%s\" is not a "
				    "number", argv[optind - 1], optarg);
			if (ch == 'm')
				o.max_builds = (unsigned)n;
			else
				output_limit = n;
			break;
		case 'h':
			printf("usage: %s\n\nRun one runner given by flags, without config.toml; "
			    "with --max-builds N, exit after N jobs.\n", usage);
			return 0;
		default:
			return 2;
		}
	}
	if (cmd_no_arguments(argc, argv, "run-single", usage) != 0)
		return 2;
	if (url == NULL || *url == '\0' || token == NULL || *token == '\0')
		return cmd_usage_error(usage, "run-single: --url and --token are needed");
	if (workdir != NULL && chdir(workdir) != 0) {
		log_error("run-single: cannot use %s as working directory: %s", workdir,
		    strerror(errno));
		return 1;
	}
	if (name == NULL && gethostname(host, sizeof(host) - 1) == 0)
		name = host;

	doc = toml_new_table(TOML_TABLE_HEADER);
	toml_table_set(doc, "concurrent", 10, toml_new_integer(1));
	runners = toml_new_array();
	runners->u.array.of_tables = true;
	entry = toml_new_table(TOML_TABLE_HEADER);
	put(entry, "name", name != NULL ? name : host);
	put(entry, "url", url);
	put(entry, "token", token);
	put(entry, "executor", executor);
	put(entry, "shell", shell);
	put(entry, "builds_dir", builds);
	put(entry, "tls-ca-file", ca);
	put(entry, "tls-cert-file", cert);
	put(entry, "tls-key-file", key);
	if (output_limit > 0)
		toml_table_set(entry, "output_limit", 12, toml_new_integer(output_limit));
	toml_array_push(runners, entry);
	toml_table_set(doc, "runners", 7, runners);
	if (config_load_doc(&cfg, "./run-single", doc, CONFIG_QUIET, &cause) != 0) {
		log_error("%s", cause);
		free(cause);
		return 1;
	}
	if (cfg.runners[0].problem != NULL) {
		log_error("run-single: the runner %s", cfg.runners[0].problem);
		config_release(&cfg);
		return 1;
	}
	rc = daemon_run(&o, &cfg);
	config_release(&cfg);
	return rc;
}

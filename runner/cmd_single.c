/*
 * `runner run-single`: one runner from the command line, no config file,
 * for ephemeral or autoscaled hosts (and tests): it asks for jobs, runs
 * up to --max-builds of them, sends their reports, and exits.  Under the
 * flags it is the same daemon as `run`, on a config built in memory.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
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

static void
put(struct toml_value *t, const char *key, const char *value)
{
	if (value != NULL && *value != '\0')
		toml_table_set(t, key, strlen(key), toml_new_string(value, strlen(value)));
}

struct single_opts {
	const char	*url;
	const char	*token;
	const char	*name;
	const char	*executor;
	const char	*shell;
	const char	*builds_dir;
	const char	*state_dir;
	const char	*workdir;
	const char	*tls_ca_file;
	const char	*tls_cert_file;
	const char	*tls_key_file;
	int64_t		 max_builds;
	int64_t		 output_limit;
};

#define SO(f)	offsetof(struct single_opts, f)

static const struct cli_option single_options[] = {
	CLI_OPT("url", 'u', CLI_STRING, "CI_SERVER_URL", SO(url), "URL", "GitLab's URL"),
	CLI_OPT("token", 't', CLI_STRING, "CI_SERVER_TOKEN", SO(token), "TOKEN",
	    "the runner's authentication token"),
	CLI_OPT("name", 0, CLI_STRING, "RUNNER_NAME", SO(name), "NAME",
	    "the runner's name (default: the host name)"),
	CLI_OPT("executor", 0, CLI_STRING, NULL, SO(executor), "EXECUTOR", "how jobs run",
	    .def = "shell"),
	CLI_OPT("shell", 0, CLI_STRING, NULL, SO(shell), "SHELL", "bash or sh"),
	CLI_OPT("builds-dir", 0, CLI_STRING, NULL, SO(builds_dir), "DIR", "where builds go"),
	CLI_OPT("max-builds", 0, CLI_INT, NULL, SO(max_builds), "N",
	    "exit after N jobs (0: never)", .min = 0, .max = INT_MAX, .what = "a number"),
	CLI_OPT("state-dir", 0, CLI_STRING, NULL, SO(state_dir), "DIR",
	    "the journal of unsent reports"),
	CLI_OPT("working-directory", 'd', CLI_STRING, NULL, SO(workdir), "DIR",
	    "change to DIR first"),
	CLI_OPT("tls-ca-file", 0, CLI_STRING, NULL, SO(tls_ca_file), "FILE",
	    "the CA certificates GitLab's certificate is checked against"),
	CLI_OPT("tls-cert-file", 0, CLI_STRING, NULL, SO(tls_cert_file), "FILE",
	    "a client certificate for GitLab"),
	CLI_OPT("tls-key-file", 0, CLI_STRING, NULL, SO(tls_key_file), "FILE",
	    "its private key"),
	CLI_OPT("output-limit", 0, CLI_INT, NULL, SO(output_limit), "KB",
	    "the most job log to send", .min = 0, .max = INT_MAX, .what = "a number"),
	CLI_END,
};

static int
single_run(const struct cli_command *cmd, void *opts)
{
	const struct single_opts *f = opts;
	struct run_options o = { .state_dir = f->state_dir, .max_builds = (unsigned)f->max_builds };
	struct toml_value *doc, *runners, *entry;
	struct config cfg;
	const char *url = f->url, *token = f->token, *name = f->name;
	const char *workdir = f->workdir;
	char *cause = NULL, host[256] = "run-single";
	int rc;

	if (url == NULL || *url == '\0' || token == NULL || *token == '\0')
		return cli_usage_error(cmd, "run-single: --url and --token are needed");
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
	put(entry, "executor", f->executor);
	put(entry, "shell", f->shell);
	put(entry, "builds_dir", f->builds_dir);
	put(entry, "tls-ca-file", f->tls_ca_file);
	put(entry, "tls-cert-file", f->tls_cert_file);
	put(entry, "tls-key-file", f->tls_key_file);
	if (f->output_limit > 0)
		toml_table_set(entry, "output_limit", 12, toml_new_integer(f->output_limit));
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

const struct cli_command cmd_run_single_entry = {
	.name = "run-single",
	.summary = "Run one runner given by flags, for N jobs",
	.usage = "runner run-single --url URL --token TOKEN [--executor shell] "
	    "[--max-builds N] [OPTIONS]",
	.help = "Run one runner given by flags, without config.toml; with --max-builds N, "
	    "exit after N jobs.",
	.options = single_options,
	.opts_size = sizeof(struct single_opts),
	.run = single_run,
};

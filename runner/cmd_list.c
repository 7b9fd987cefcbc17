/*
 * `runner list`: what config.toml holds, one line per [[runners]] entry,
 * laid out like gitlab-runner's (name, then Executor=, Token=, URL=).
 *
 * Every entry is shown as written, also those `run` would skip; why it
 * would skip them goes to stderr as a warning, so a user who wonders why
 * a runner never picks up jobs finds out here.  So does what an entry
 * asks for that this build cannot do although it runs the entry (a
 * remote cache).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/log.h"
#include "runner/commands.h"
#include "runner/config.h"

struct list_opts {
	const char	*config;
};

static const struct cli_option list_options[] = {
	CMD_OPT_CONFIG(struct list_opts, config),
	CLI_END,
};

static int
list_run(const struct cli_command *cmd, void *opts)
{
	const struct list_opts *o = opts;
	struct config cfg;
	char tok[LOG_TOKEN_SIZE], *cache;
	size_t i;

	(void)cmd;
	if (cmd_load_config(&cfg, o->config, 0) != 0)
		return 1;
	log_info("Listing configured runners%*sConfigFile=%s", 24, "", cfg.path);
	for (i = 0; i < cfg.n_runners; i++) {
		const struct runner_config *rc = &cfg.runners[i];

		/* The name column is as wide as gitlab-runner's message column. */
		printf("%-49s Executor=%s Token=%.8s URL=%s\n", rc->name,
		    rc->executor, log_token(rc->token, tok), rc->url);
		if (rc->problem != NULL)
			log_warnx("%s:%d: runner \"%s\": %s; run and verify skip it",
			    cfg.path, rc->line, rc->name, rc->problem);
		if ((cache = config_cache_unsupported(rc)) != NULL)
			log_warnx("%s:%d: runner \"%s\": %s", cfg.path, rc->line, rc->name,
			    cache);
		free(cache);
	}
	fflush(stdout);
	config_release(&cfg);
	return 0;
}

const struct cli_command cmd_list_entry = {
	.name = "list",
	.summary = "List the runners in config.toml",
	.usage = "runner list [-c FILE]",
	.options = list_options,
	.opts_size = sizeof(struct list_opts),
	.run = list_run,
};

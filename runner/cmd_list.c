/*
 * `runner list`: what config.toml holds, one line per [[runners]] entry,
 * laid out like gitlab-runner's (name, then Executor=, Token=, URL=).
 *
 * Every entry is shown as written, also those `run` would skip; why it
 * would skip them goes to stderr as a warning, so a user who wonders why
 * a runner never picks up jobs finds out here.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/log.h"
#include "runner/commands.h"
#include "runner/config.h"

static const char usage[] = "runner list [-c FILE]";

int
cmd_list(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct config cfg;
	const char *config_flag = NULL;
	char tok[LOG_TOKEN_SIZE];
	size_t i;
	int ch;

	opterr = 0;
	optind = 1;
	while ((ch = cmd_getopt(argc, argv, "+:c:h", longopts, "list",
	    usage)) != -1) {
		switch (ch) {
		case 'c':
			config_flag = optarg;
			break;
		case 'h':
			printf("usage: %s\n\nList the runners in config.toml.\n\n"
			    "  -c, --config FILE   config file (default: $CONFIG_FILE, "
			    "else /etc/gitlab-runner/config.toml as root,\n"
			    "                      ~/.gitlab-runner/config.toml otherwise)\n",
			    usage);
			return 0;
		default:
			return 2;
		}
	}
	if (cmd_no_arguments(argc, argv, "list", usage) != 0)
		return 2;

	if (cmd_load_config(&cfg, config_flag, 0) != 0)
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
	}
	fflush(stdout);
	config_release(&cfg);
	return 0;
}

/*
 * What the commands on config.toml do the same way: find and load it,
 * choose entries, open a GitLab session with its settings.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/metrics.h"
#include "lib/xmalloc.h"
#include "runner/commands.h"
#include "runner/config.h"

bool cmd_log_level_given;
bool cmd_log_format_given;

int
cmd_load_config(struct config *cfg, const char *flag_value, int flags)
{
	char *path = cmd_config_path(flag_value), *cause = NULL;
	int rc = config_load(cfg, path, flags, &cause);

	if (rc != 0) {
		log_error("%s", cause);
		free(cause);
	}
	free(path);
	return rc;
}

char *
cmd_config_path(const char *flag_value)
{
	if (flag_value != NULL && *flag_value != '\0')
		return xstrdup(flag_value);
	return config_default_path();
}

void
cmd_session_open(struct api_session *s, const struct config *cfg)
{
	char *dir = config_dir(cfg);

	api_session_open(s, dir, (uint64_t)cfg->connection_max_age_ms);
	free(dir);
}

char *
cmd_runner_label(const struct config *cfg, const struct runner_config *rc)
{
	return xasprintf("runner \"%s\" (%s:%d)", rc->name, cfg->path, rc->line);
}

int
cmd_select_runners(const struct config *cfg, const struct cmd_select *sel, bool *chosen)
{
	size_t i;
	int n = 0;

	for (i = 0; i < cfg->n_runners; i++) {
		const struct runner_config *rc = &cfg->runners[i];
		bool match = sel->all;

		if (sel->name != NULL && *sel->name)
			match = strcmp(rc->name, sel->name) == 0;
		else if (sel->url != NULL && *sel->url)
			match = strcmp(rc->url, sel->url) == 0 &&
			    (sel->token == NULL || !*sel->token || strcmp(rc->token, sel->token) == 0) &&
			    (sel->id == 0 || rc->id == sel->id);
		else if (sel->token != NULL && *sel->token)
			match = strcmp(rc->token, sel->token) == 0;
		chosen[i] = match;
		n += match;
	}
	if (n == 0 && sel->name != NULL && *sel->name) {
		log_error("no runner named \"%s\" in %s", sel->name, cfg->path);
		return -1;
	}
	return n;
}

void
cmd_remove_runners(struct config *cfg, const bool *remove)
{
	struct toml_value *runners = toml_get(cfg->doc, "runners");
	size_t i;

	if (runners == NULL || runners->type != TOML_ARRAY)
		return;
	/* From the end, so the indexes of the others stay right. */
	for (i = cfg->n_runners; i > 0; i--)
		if (remove[i - 1] && cfg->runners[i - 1].index < runners->u.array.len) {
			toml_array_remove(runners, cfg->runners[i - 1].index);
			cfg->runners[i - 1].table = NULL;
		}
	/* gitlab-runner writes no runners key at all when there are none. */
	if (runners->u.array.len == 0)
		toml_table_remove(cfg->doc, "runners", 7);
}

/*
 * `runner reset-token`: rotate a runner's authentication token and save
 * the new one.  With the current token (POST /runners/reset_authentication_
 * token, token in the body only), or, when the old token is already lost
 * or expired, with a personal access token (--pat: the one request that
 * ever carries Private-Token).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/xmalloc.h"
#include "runner/commands.h"
#include "runner/config.h"
#include "runner/entries.h"

struct reset_opts {
	struct entries_opts	 e;
	const char		*pat;	/* --pat */
};

#define RO(f)	offsetof(struct reset_opts, f)

static const struct cli_option reset_options[] = {
	ENTRIES_OPT_CONFIG(struct reset_opts, e),
	ENTRIES_OPT_NAME(struct reset_opts, e),
	ENTRIES_OPT_URL(struct reset_opts, e),
	CLI_OPT("id", 'i', CLI_INT, NULL, RO(e.sel.id), "ID", "the runner of this id "
	    "(with --url)", .min = 1, .max = INT64_MAX, .what = "a runner id"),
	ENTRIES_OPT_ALL(struct reset_opts, e),
	CLI_OPT("pat", 0, CLI_STRING, NULL, RO(pat), "TOKEN", "use a personal access "
	    "token instead of the runner's current token"),
	CLI_END,
};

static void
on_reset(enum api_result result, const struct api_answer *answer,
    struct api_runner_token *token, void *data)
{
	struct entry *en = data;
	struct toml_value *t = en->rc->table;

	if (result == API_OK && token != NULL && token->token != NULL && *token->token) {
		toml_table_set(t, "token", 5, toml_new_string(token->token, strlen(token->token)));
		config_set_time(t, "token_obtained_at", clock_wall(), true);
		config_set_time(t, "token_expires_at", token->expires_at, token->expires);
		log_info("Resetting runner authentication token... succeeded: %s", en->label);
		entry_answered(en, ENTRY_CHANGED);
		return;
	}
	if (result == API_OK)
		log_error("%s: resetting the token failed: GitLab's answer has no token",
		    en->label);
	else
		log_error("%s: resetting the token failed (%s)%s", en->label, answer->message,
		    result == API_FORBIDDEN || result == API_UNAUTHORIZED ?
		    " (check used token)" : "");
	entry_answered(en, ENTRY_FAILED);
}

static int
reset_choose(struct entries *e, int n)
{
	char *dir;
	int rc = 0;

	if (n == 0) {
		log_error("no runner in %s matches", e->cfg.path);
		return -1;
	}
	/*
	 * GitLab forgets the old token as it hands out the new one: if the new
	 * one cannot be saved, the runner is left with no working token.  So
	 * refuse before asking when the file cannot be replaced.
	 */
	dir = config_dir(&e->cfg);
	if (access(dir, W_OK) != 0) {
		log_error("%s: cannot save a new token there (%s): nothing was reset",
		    e->cfg.path, strerror(errno));
		rc = -1;
	}
	free(dir);
	return rc;
}

static int
reset_start(struct entry *en, const struct api_creds *creds)
{
	const struct reset_opts *o = en->all->data;
	struct api *api = en->all->session.api;

	if (o->pat == NULL) {
		api_reset_token(api, creds, on_reset, en);
		return 0;
	}
	if (en->rc->id == 0) {
		log_error("%s has no id in the config, which --pat needs: register it again",
		    en->label);
		return -1;
	}
	api_reset_token_pat(api, creds, en->rc->id, o->pat, on_reset, en);
	return 0;
}

static void
reset_saved(struct entries *e, size_t removed, size_t changed, const char *cause)
{
	(void)removed;
	if (cause != NULL)
		log_error("%s: the new token%s could not be saved: %s", e->cfg.path,
		    changed == 1 ? "" : "s", cause);
	else
		log_info("Updated %s", e->cfg.path);
}

static const struct entries_ops reset_ops = {
	.choose = reset_choose,
	.start = reset_start,
	.saved = reset_saved,
};

static int
reset_run(const struct cli_command *cmd, void *opts)
{
	struct reset_opts *o = opts;
	const struct cmd_select *sel = &o->e.sel;

	if (!sel->all && (sel->name == NULL || !*sel->name) &&
	    (sel->url == NULL || !*sel->url || sel->id == 0))
		return cli_usage_error(cmd, "reset-token: say which runner: --name, "
		    "--url with --id, or --all-runners");
	if (o->pat != NULL)
		log_secret_add(o->pat);
	return entries_run(&reset_ops, &o->e, o);
}

const struct cli_command cmd_reset_token_entry = {
	.name = "reset-token",
	.summary = "Rotate runner authentication tokens",
	.usage = "runner reset-token [-c FILE] (-n NAME | -u URL -i ID | --all-runners) "
	    "[--pat TOKEN]",
	.help = "Rotate runner authentication tokens and save the new ones in config.toml.",
	.options = reset_options,
	.opts_size = sizeof(struct reset_opts),
	.run = reset_run,
};

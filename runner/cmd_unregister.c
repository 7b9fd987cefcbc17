/*
 * `runner unregister`: tell GitLab this machine no longer serves a runner,
 * then drop the entry from config.toml; only when GitLab said yes, so a
 * failed call never leaves a runner that exists in GitLab but nowhere here.
 *
 * A runner made in GitLab (glrt- token) outlives its machines: only this
 * machine's runner manager is removed (DELETE /runners/managers).  A
 * legacy runner is deleted (DELETE /runners).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "lib/log.h"
#include "lib/xmalloc.h"
#include "runner/commands.h"
#include "runner/config.h"
#include "runner/entries.h"

struct unregister_opts {
	struct entries_opts	 e;
};

static const struct cli_option unregister_options[] = {
	ENTRIES_OPT_CONFIG(struct unregister_opts, e),
	ENTRIES_OPT_NAME(struct unregister_opts, e),
	ENTRIES_OPT_URL(struct unregister_opts, e),
	ENTRIES_OPT_TOKEN(struct unregister_opts, e),
	ENTRIES_OPT_ALL(struct unregister_opts, e),
	CLI_END,
};

static bool
given(const char *s)
{
	return s != NULL && *s != '\0';
}

static void
on_unregistered(enum api_result result, const struct api_answer *answer, void *data)
{
	struct entry *en = data;

	if (result == API_OK)
		log_info("Unregistering runner from GitLab succeeded: %s", en->label);
	else
		log_error("%s: unregistering failed (%s)%s; it stays in the config", en->label,
		    answer->message, result == API_FORBIDDEN ?
		    ": GitLab does not know the token (already deleted, expired or revoked?)" : "");
	entry_answered(en, result == API_OK ? ENTRY_REMOVE : ENTRY_FAILED);
}

static int
unregister_choose(struct entries *e, int n)
{
	const struct cmd_select *sel = &e->opts->sel;
	char tok[LOG_TOKEN_SIZE];
	size_t i;

	/* --name with --token: the entry must have both (RunnerByNameAndToken). */
	if (!sel->all && given(sel->name) && given(sel->token))
		for (i = 0; i < e->cfg.n_runners; i++)
			if (e->entry[i].state == ENTRY_CHOSEN &&
			    strcmp(e->cfg.runners[i].token, sel->token) != 0) {
				entries_unchoose(&e->entry[i]);
				n--;
			}
	if (n == 0 && !sel->all && (given(sel->name) || !given(sel->url))) {
		if (given(sel->name))
			log_error("no runner named \"%s\" with the token %s in %s", sel->name,
			    log_token(sel->token, tok), e->cfg.path);
		else
			log_error("no runner with the token %s in %s (give --url too to "
			    "unregister it from GitLab anyway)", log_token(sel->token, tok),
			    e->cfg.path);
		return -1;
	}
	if (sel->all)
		log_warnx("Unregistering all runners");
	/* Not in the config: still unregister what the flags name. */
	if (n == 0 && !sel->all && given(sel->url) && sel->token != NULL)
		entries_choose_outside(e, xasprintf("runner at %s", sel->url));
	return 0;
}

static int
unregister_start(struct entry *en, const struct api_creds *creds)
{
	struct api *api = en->all->session.api;

	if (strncmp(creds->token, "glrt-", 5) == 0)
		api_unregister_manager(api, creds, en->all->system_id, on_unregistered, en);
	else
		api_unregister(api, creds, on_unregistered, en);
	return 0;
}

static const struct entries_ops unregister_ops = {
	.config_flags = CONFIG_ALLOW_MISSING,
	.system_id = true,
	.choose = unregister_choose,
	.start = unregister_start,
};

static int
unregister_run(const struct cli_command *cmd, void *opts)
{
	struct unregister_opts *o = opts;
	const struct cmd_select *sel = &o->e.sel;

	/* As gitlab-runner: --name, --token (with or without --url), or all. */
	if (!sel->all && !given(sel->name) && !given(sel->token))
		return cli_usage_error(cmd, "unregister: say which runner: --name, "
		    "--token (and --url), or --all-runners");
	if (sel->token != NULL)
		log_secret_add(sel->token);
	return entries_run(&unregister_ops, &o->e, o);
}

const struct cli_command cmd_unregister_entry = {
	.name = "unregister",
	.summary = "Unregister runners and remove them from config.toml",
	.usage = "runner unregister [-c FILE] (-n NAME | [-u URL] -t TOKEN | --all-runners)",
	.help = "Unregister runners from GitLab and remove them from config.toml.",
	.options = unregister_options,
	.opts_size = sizeof(struct unregister_opts),
	.run = unregister_run,
};

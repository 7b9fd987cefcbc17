/*
 * `runner verify`: ask GitLab whether each runner's token is still good
 * (POST /runners/verify), all entries at once.  --delete removes from
 * config.toml the entries GitLab no longer knows.
 *
 * An expired or revoked token is the usual reason a runner silently stops
 * taking jobs, so the message names the entry and says what to do.
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
#include "runner/info.h"

struct verify_opts {
	struct entries_opts	 e;
	bool			 del;	/* --delete */
};

#define VO(f)	offsetof(struct verify_opts, f)

static const struct cli_option verify_options[] = {
	ENTRIES_OPT_CONFIG(struct verify_opts, e),
	ENTRIES_OPT_NAME(struct verify_opts, e),
	ENTRIES_OPT_URL(struct verify_opts, e),
	ENTRIES_OPT_TOKEN(struct verify_opts, e),
	CLI_OPT("delete", 0, CLI_BOOL, NULL, VO(del), NULL,
	    "remove the runners GitLab no longer knows"),
	CLI_END,
};

/* What one request needs until its answer. */
struct verify_one {
	struct entry		*en;
	struct runner_info	 info;
};

static bool
is_auth_token(const char *t)
{
	return strncmp(t, "glrt-", 5) == 0;
}

static void
on_verified(enum api_result result, const struct api_answer *answer,
    struct api_runner_token *token, void *data)
{
	struct verify_one *v = data;
	struct entry *en = v->en;
	const struct verify_opts *o = en->all->data;
	enum entry_state next = ENTRY_FAILED;

	(void)token;
	if (result == API_OK) {
		log_info("Verifying runner... is %s: %s",
		    is_auth_token(en->rc->token) ? "valid" : "alive", en->label);
		next = ENTRY_OK;
	} else if (result == API_FORBIDDEN) {
		log_error("%s: the token is not valid (%s): it has expired or been revoked, "
		    "or the runner was deleted in GitLab. Register it again (runner register), "
		    "or rotate its token (runner reset-token --pat)", en->label, answer->message);
		if (o->del)
			next = ENTRY_REMOVE;
	} else
		log_error("%s: verifying failed: %s", en->label, answer->message);
	runner_info_release(&v->info);
	free(v);
	entry_answered(en, next);
}

static int
verify_choose(struct entries *e, int n)
{
	if (n == 0)
		log_warnx("no runner in %s to verify", e->cfg.path);
	return 0;
}

static int
verify_start(struct entry *en, const struct api_creds *creds)
{
	struct verify_one *v;

	if (en->rc->problem != NULL) {
		log_warnx("%s: skipped: %s", en->label, en->rc->problem);
		return -1;
	}
	v = xcalloc(1, sizeof(*v));
	v->en = en;
	runner_info_init(&v->info, &en->all->cfg, en->rc, false);
	api_verify(en->all->session.api, creds, &v->info.info, en->all->system_id,
	    on_verified, v);
	return 0;
}

static void
verify_saved(struct entries *e, size_t removed, size_t changed, const char *cause)
{
	(void)changed;
	if (cause != NULL)
		log_error("%s", cause);
	else
		log_info("Updated %s: removed %zu runner%s GitLab no longer knows", e->cfg.path,
		    removed, removed == 1 ? "" : "s");
}

static const struct entries_ops verify_ops = {
	.system_id = true,
	.choose = verify_choose,
	.start = verify_start,
	.saved = verify_saved,
};

static int
verify_run(const struct cli_command *cmd, void *opts)
{
	struct verify_opts *o = opts;

	(void)cmd;
	/* Nothing named: every entry. */
	o->e.sel.all = true;
	return entries_run(&verify_ops, &o->e, o);
}

const struct cli_command cmd_verify_entry = {
	.name = "verify",
	.summary = "Check each runner's token with GitLab",
	.usage = "runner verify [-c FILE] [--delete] [-n NAME | -u URL -t TOKEN]",
	.help = "Check every runner's token with GitLab.",
	.options = verify_options,
	.opts_size = sizeof(struct verify_opts),
	.run = verify_run,
};

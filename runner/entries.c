/*
 * The skeleton of verify, unregister and reset-token; see entries.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "lib/xmalloc.h"
#include "runner/entries.h"
#include "runner/system_id.h"

static const char *const entry_state_names[] = {
	[ENTRY_IDLE] = "idle",
	[ENTRY_CHOSEN] = "chosen",
	[ENTRY_SENT] = "sent",
	[ENTRY_OK] = "ok",
	[ENTRY_CHANGED] = "changed",
	[ENTRY_REMOVE] = "remove",
	[ENTRY_FAILED] = "failed",
};

static void
entry_set_state(struct entry *en, enum entry_state state)
{
	log_debug("%s: %s -> %s", en->label != NULL ? en->label : "runner",
	    entry_state_names[en->state], entry_state_names[state]);
	en->state = state;
}

void
entry_answered(struct entry *en, enum entry_state state)
{
	entry_set_state(en, state);
	en->all->session.pending--;
}

void
entries_choose_outside(struct entries *e, char *label)
{
	struct entry *en = &e->entry[e->cfg.n_runners];

	en->label = label;
	entry_set_state(en, ENTRY_CHOSEN);
}

void
entries_unchoose(struct entry *en)
{
	entry_set_state(en, ENTRY_IDLE);
}

/* The outside one first: the flags named it, and it is not in the file. */
static void
send_all(const struct entries_ops *ops, struct entries *e)
{
	struct api_creds creds;
	size_t n = e->cfg.n_runners, k;

	for (k = 0; k <= n; k++) {
		struct entry *en = &e->entry[k == 0 ? n : k - 1];

		if (en->state != ENTRY_CHOSEN)
			continue;
		memset(&creds, 0, sizeof(creds));
		if (en->rc != NULL)
			runner_config_creds(en->rc, &creds);
		else {
			creds.url = e->opts->sel.url;
			creds.token = e->opts->sel.token;
		}
		entry_set_state(en, ENTRY_SENT);
		e->session.pending++;
		if (ops->start(en, &creds) != 0) {
			e->session.pending--;
			entry_set_state(en, ENTRY_FAILED);
		}
	}
}

/* Remove and save what the answers say; the exit status. */
static int
finish(const struct entries_ops *ops, struct entries *e)
{
	bool *remove = xcalloc(e->cfg.n_runners + 1, sizeof(bool));
	size_t i, removed = 0, changed = 0;
	char *cause = NULL;
	int rc = 0;

	for (i = 0; i <= e->cfg.n_runners; i++) {
		switch (e->entry[i].state) {
		case ENTRY_FAILED:
		case ENTRY_SENT:	/* never answered: interrupted */
			rc = 1;
			break;
		case ENTRY_REMOVE:
			if (e->entry[i].rc != NULL) {
				remove[i] = true;
				removed++;
			}
			break;
		case ENTRY_CHANGED:
			changed++;
			break;
		default:
			break;
		}
	}
	if (removed + changed > 0) {
		if (removed > 0)
			cmd_remove_runners(&e->cfg, remove);
		if (config_save(&e->cfg, &cause) != 0)
			rc = 1;
		if (ops->saved != NULL)
			ops->saved(e, removed, changed, cause);
		else if (cause != NULL)
			log_error("%s", cause);
		else
			log_info("Updated %s", e->cfg.path);
	}
	free(cause);
	free(remove);
	return rc;
}

int
entries_run(const struct entries_ops *ops, const struct entries_opts *o, void *data)
{
	struct entries e = { .opts = o, .data = data };
	bool *chosen;
	size_t i;
	char *dir;
	int n, rc = 1;

	if (cmd_load_config(&e.cfg, o->config, ops->config_flags) != 0)
		return 1;
	e.entry = xcalloc(e.cfg.n_runners + 1, sizeof(*e.entry));
	chosen = xcalloc(e.cfg.n_runners + 1, sizeof(bool));
	for (i = 0; i <= e.cfg.n_runners; i++)
		e.entry[i].all = &e;
	if ((n = cmd_select_runners(&e.cfg, &o->sel, chosen)) < 0)
		goto out;
	for (i = 0; i < e.cfg.n_runners; i++) {
		e.entry[i].rc = &e.cfg.runners[i];
		e.entry[i].label = cmd_runner_label(&e.cfg, &e.cfg.runners[i]);
		if (chosen[i])
			entry_set_state(&e.entry[i], ENTRY_CHOSEN);
	}
	if (ops->choose != NULL && ops->choose(&e, n) != 0)
		goto out;

	if (ops->system_id) {
		dir = config_dir(&e.cfg);
		e.system_id = system_id_load(dir);
		free(dir);
	}
	cmd_session_open(&e.session, &e.cfg);
	send_all(ops, &e);
	api_session_wait(&e.session);
	rc = finish(ops, &e);
	api_session_close(&e.session);
out:
	for (i = 0; i <= e.cfg.n_runners; i++)
		free(e.entry[i].label);
	free(e.entry);
	free(chosen);
	free(e.system_id);
	config_release(&e.cfg);
	return rc;
}

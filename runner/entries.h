/*
 * The skeleton of the commands that send one GitLab request for each
 * chosen [[runners]] entry (verify, unregister, reset-token): load
 * config.toml, choose the entries by --name/--url/--token/--id/
 * --all-runners, open a session, send, wait, and save the file when an
 * answer changed it.  The command brings its request and what the answer
 * means (struct entries_ops); the rest is here, once.
 *
 * Each entry goes IDLE -> CHOSEN -> SENT -> OK, CHANGED, REMOVE or FAILED,
 * only through entries.c's one transition function, which logs old -> new
 * at debug level; the commands move it with the calls below.
 */
#ifndef RUNNER_ENTRIES_H
#define RUNNER_ENTRIES_H

#include <stddef.h>

#include "api/api.h"
#include "api/session.h"
#include "runner/commands.h"
#include "runner/config.h"

/* What the three commands' options have in common. */
struct entries_opts {
	const char		*config;	/* -c, --config */
	struct cmd_select	 sel;
};

/* Their lines in the commands' tables (type: the options struct, field: its entries_opts). */
#define ENTRIES_OPT_CONFIG(type, f)	CMD_OPT_CONFIG(type, f.config)
#define ENTRIES_OPT_NAME(type, f)	CLI_OPT("name", 'n', CLI_STRING, NULL, \
	offsetof(type, f.sel.name), "NAME", "the runner of this name")
#define ENTRIES_OPT_URL(type, f)	CLI_OPT("url", 'u', CLI_STRING, NULL, \
	offsetof(type, f.sel.url), "URL", "the runners of this GitLab URL")
#define ENTRIES_OPT_TOKEN(type, f)	CLI_OPT("token", 't', CLI_STRING, NULL, \
	offsetof(type, f.sel.token), "TOKEN", "the runner with this token")
#define ENTRIES_OPT_ALL(type, f)	CLI_OPT("all-runners", 0, CLI_BOOL, NULL, \
	offsetof(type, f.sel.all), NULL, "all the runners of config.toml")

enum entry_state {
	ENTRY_IDLE,	/* not chosen */
	ENTRY_CHOSEN,	/* chosen; nothing sent yet */
	ENTRY_SENT,	/* its request is out */
	ENTRY_OK,	/* GitLab said yes; its entry stays as it is */
	ENTRY_CHANGED,	/* GitLab said yes and the entry changed in cfg.doc: save */
	ENTRY_REMOVE,	/* to be removed from config.toml */
	ENTRY_FAILED,	/* logged; the command exits 1 */
};

struct entries;

struct entry {
	struct entries		*all;
	/* NULL for the one the flags name that is not in config.toml. */
	struct runner_config	*rc;
	char			*label;		/* for messages: cmd_runner_label() */
	enum entry_state	 state;
};

struct entries {
	struct config		 cfg;
	struct api_session	 session;
	char			*system_id;	/* when ops->system_id */
	/* One per cfg.runners[], then the one outside config.toml. */
	struct entry		*entry;
	const struct entries_opts *opts;
	void			*data;		/* the command's options */
};

struct entries_ops {
	int	config_flags;	/* for config_load() */
	bool	system_id;	/* load (or create) .runner_system_id */
	/*
	 * After the selection chose n: refine it, or refuse (-1, logged:
	 * exit 1), before anything is sent.  NULL: take it as it is.
	 */
	int	(*choose)(struct entries *e, int n);
	/*
	 * Send the request for en with creds (the entry's, or the flags' for
	 * the one outside); its callback ends in entry_answered().  -1: not
	 * sent (logged), the entry failed.
	 */
	int	(*start)(struct entry *en, const struct api_creds *creds);
	/* The file was saved (cause NULL) or not.  NULL: say "Updated PATH". */
	void	(*saved)(struct entries *e, size_t removed, size_t changed,
		    const char *cause);
};

/* The whole command after its own flag checks: its exit status. */
int	entries_run(const struct entries_ops *ops, const struct entries_opts *o, void *data);

/* The request of en was answered: state is OK, CHANGED, REMOVE or FAILED. */
void	entry_answered(struct entry *en, enum entry_state state);
/* Choose the runner --url and --token name, which config.toml does not hold. */
void	entries_choose_outside(struct entries *e, char *label);
/* Unchoose en before anything is sent. */
void	entries_unchoose(struct entry *en);

#endif

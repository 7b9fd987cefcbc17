/*
 * The commands `runner` offers, one function each, in one file each
 * (cmd_<name>.c; the helpers the job script calls are in helpers/).
 * main.c holds the table that maps names to them.
 *
 * A command gets the arguments after its name (argv[0] is the command
 * name) and returns the process exit status.  Global options were already
 * applied by main.c.
 */
#ifndef RUNNER_COMMANDS_H
#define RUNNER_COMMANDS_H

#include <stdbool.h>

#include <uv.h>

#include "api/api.h"
#include "api/session.h"
#include "lib/cli.h"
#include "runner/config.h"

int	cmd_run(int argc, char **argv);
int	cmd_run_single(int argc, char **argv);
int	cmd_list(int argc, char **argv);
int	cmd_register(int argc, char **argv);
int	cmd_verify(int argc, char **argv);
int	cmd_unregister(int argc, char **argv);
int	cmd_reset_token(int argc, char **argv);
/* install, uninstall, start, stop, restart, status (argv[0] says which). */
int	cmd_service(int argc, char **argv);
/*
 * The systemd unit `runner install` writes (cmd_service.c): the packaged
 * unit with the ExecStart flags, binary and config directory of these.
 * Paths are absolute; user and init_user may be NULL.  NULL and *cause
 * (to free) for what a unit cannot hold.
 */
struct service_unit {
	const char	*binary;
	const char	*working_dir;
	const char	*config;
	const char	*user;		/* --user: jobs run as this user */
	const char	*init_user;	/* User=: the daemon runs as this user */
};
char	*service_unit_text(const struct service_unit *u, char **cause);
/* One word of an Exec line, quoted and escaped as systemd reads it back. */
char	*service_exec_quote(const char *word);

/* Did the command line set the log level or format?  Then config.toml does not. */
extern bool	cmd_log_level_given;
extern bool	cmd_log_format_given;

/* The config path: the -c/--config value if given, else the default. */
char	*cmd_config_path(const char *flag_value);

/*
 * Load the config the -c/--config value names (or the default one).  On
 * failure the reason is logged and -1 returned: the command exits 1.
 */
int	cmd_load_config(struct config *cfg, const char *flag_value, int flags);

/*
 * A command's session (api/session.h) with the config's certs/ directory
 * and connection_max_age.
 */
void	cmd_session_open(struct api_session *s, const struct config *cfg);

/* "runner \"name\" (config.toml:12)", for messages about one entry. */
char	*cmd_runner_label(const struct config *cfg, const struct runner_config *rc);

/* Which [[runners]] entries a command acts on (gitlab-runner's flags). */
struct cmd_select {
	const char	*name;		/* --name */
	const char	*url;		/* --url */
	const char	*token;		/* --token */
	int64_t		 id;		/* --id (0: not given) */
	bool		 all;		/* --all-runners, or nothing given for verify */
};

/*
 * Mark chosen[i] for every entry that matches.  Returns how many did; a
 * --name that matches nothing is an error (logged, -1).
 */
int	cmd_select_runners(const struct config *cfg, const struct cmd_select *sel,
	    bool *chosen);

/* Remove the chosen entries from cfg->doc (the structs stay as they were). */
void	cmd_remove_runners(struct config *cfg, const bool *remove);

#endif

/*
 * The commands `runner` offers, one table entry each (struct cli_command,
 * lib/cli.h), in one file each (cmd_<name>.c; the helpers the job script
 * calls are in helpers/).  main.c lists the entries.
 *
 * An entry's options are a table that lib/cli.c parses; its run function
 * gets them parsed and returns the process exit status.  Global options
 * were already applied by main.c.
 */
#ifndef RUNNER_COMMANDS_H
#define RUNNER_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#include "api/api.h"
#include "api/session.h"
#include "lib/cli.h"
#include "runner/config.h"

extern const struct cli_command cmd_run_entry;
extern const struct cli_command cmd_run_single_entry;
extern const struct cli_command cmd_list_entry;
extern const struct cli_command cmd_register_entry;
extern const struct cli_command cmd_verify_entry;
extern const struct cli_command cmd_unregister_entry;
extern const struct cli_command cmd_reset_token_entry;
extern const struct cli_command cmd_health_check_entry;
/* cmd_service.c: the runner as a systemd service. */
extern const struct cli_command cmd_install_entry;
extern const struct cli_command cmd_uninstall_entry;
extern const struct cli_command cmd_start_entry;
extern const struct cli_command cmd_stop_entry;
extern const struct cli_command cmd_restart_entry;
extern const struct cli_command cmd_status_entry;

/* -c, --config: every command on config.toml has it (see cmd_config_path). */
#define CMD_OPT_CONFIG(type, field)	CLI_OPT("config", 'c', CLI_STRING, "CONFIG_FILE", \
	offsetof(type, field), "FILE", "the config file (default: " \
	"/etc/gitlab-runner/config.toml as root, ~/.gitlab-runner/config.toml otherwise)")

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
	/*
	 * --syslog: the daemon also logs to syslog, under this name (run
	 * --syslog --service NAME); NULL: the journal only, gitlab-runner's
	 * default under systemd.
	 */
	const char	*syslog_name;
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

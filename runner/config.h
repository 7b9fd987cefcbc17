/*
 * config.toml: gitlab-runner's file, read into plain structs and written
 * back without losing anything.
 *
 * The parsed TOML document stays in `doc`: it is what gets saved, so keys
 * this program does not know, comments aside, survive a register or a token
 * rotation.  The structs below are the view the rest of the program reads;
 * their defaults are gitlab-runner's (protocol.md section 10), already
 * applied, and no string field is ever NULL ("" when the file has none).
 *
 * Errors come in two kinds.  Problems of the file as a whole (TOML syntax,
 * a value of the wrong type, [runners] written as a table) make
 * config_load() fail: no command runs on a file it cannot read exactly.
 * Problems of one [[runners]] entry (a URL that is not http or https, an
 * executor this build does not run, a negative limit) are recorded in that
 * entry's `problem`; `run` and `verify` skip the entry and serve the rest.
 */
#ifndef RUNNER_CONFIG_H
#define RUNNER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "executors/docker/settings.h"
#include "lib/strv.h"
#include "runner/toml.h"

struct api_creds;
struct log_secret;

struct config_pair {
	char	*name;
	char	*value;
};

struct config_flag {
	char	*name;		/* FF_... */
	bool	 value;
};

/* A TOML date-time from the file, if it had one. */
struct config_time {
	bool			set;
	struct toml_datetime	at;
};

/* -1 when the file does not say; 0 or 1 otherwise. */
typedef int config_tristate;

struct config_cache {
	char	*type;			/* s3, gcs, azure, or "" (local only) */
	char	*path;
	bool	 shared;
	int64_t	 max_uploaded_archive_size;
};

/* [runners.custom]: the custom executor's driver programs (section 11). */
struct config_custom {
	char		*config_exec;
	struct strv	 config_args;
	int64_t		 config_exec_timeout;	/* seconds, default 3600 */
	char		*prepare_exec;
	struct strv	 prepare_args;
	int64_t		 prepare_exec_timeout;	/* seconds, default 3600 */
	char		*run_exec;
	struct strv	 run_args;
	char		*cleanup_exec;
	struct strv	 cleanup_args;
	int64_t		 cleanup_exec_timeout;	/* seconds, default 3600 */
	int64_t		 graceful_kill_timeout;	/* seconds, default 600 */
	int64_t		 force_kill_timeout;	/* seconds, default 600 */
};

/* One [[runners]] entry. */
struct runner_config {
	size_t		 index;		/* position among [[runners]], from 0 */
	int		 line;		/* line of its [[runners]] header */
	struct toml_value *table;	/* the entry in config->doc (not owned) */
	char		*problem;	/* why run/verify skip it, or NULL */

	char		*name;
	char		*url;		/* after $VAR expansion */
	int64_t		 id;
	char		*token;		/* after $VAR expansion; never logged */
	struct log_secret *token_mask;	/* masks token in the log while the entry lives */
	struct config_time token_obtained_at;
	struct config_time token_expires_at;
	char		*tls_ca_file;
	char		*tls_cert_file;
	char		*tls_key_file;

	char		*executor;
	char		*shell;		/* default "bash" */
	char		*builds_dir;
	char		*cache_dir;
	char		*clone_url;
	struct strv	 environment;	/* KEY=VALUE */
	int64_t		 limit;		/* 0 = no limit */
	int64_t		 request_concurrency;	/* at least 1 */
	config_tristate	 strict_check_interval;
	int64_t		 output_limit;	/* KiB, default 4096 */
	int64_t		 unhealthy_requests_limit;	/* default 3 */
	int64_t		 unhealthy_interval_ms;		/* default 60 min */
	int64_t		 job_status_final_update_retry_limit;	/* default 10 */
	char		*pre_get_sources_script;
	char		*post_get_sources_script;
	char		*pre_build_script;
	char		*post_build_script;
	int64_t		 prepare_timeout_ms;	/* -1 = not set */
	int64_t		 get_sources_timeout_ms;	/* -1 = not set */
	bool		 debug_trace_disabled;
	config_tristate	 safe_directory_checkout;
	config_tristate	 clean_git_config;
	config_tristate	 custom_build_dir_enabled;
	struct config_flag *feature_flags;
	size_t		 n_feature_flags;
	struct config_pair *labels;
	size_t		 n_labels;
	struct config_cache cache;
	struct config_custom custom;
	struct docker_settings docker;	/* [runners.docker] */
};

struct config {
	char		*path;		/* as given (or the default) */
	struct toml_value *doc;		/* the whole document, owned */
	bool		 exists;	/* false: the file was missing (allowed) */

	int64_t		 concurrent;		/* < 1 stops `run` */
	int64_t		 check_interval;	/* seconds, 3 when <= 0 */
	char		*log_level;		/* "" = not set */
	char		*log_format;		/* "" = not set */
	char		*listen_address;
	int64_t		 shutdown_timeout;	/* seconds, 30 when <= 0 */
	int64_t		 connection_max_age_ms;	/* 15 min; 0 = unlimited */
	char		*sentry_dsn;
	char		*user;
	struct config_pair *labels;
	size_t		 n_labels;
	char		*session_listen_address;
	char		*session_advertise_address;
	int64_t		 session_timeout;	/* seconds, default 1800 */

	struct runner_config *runners;
	size_t		 n_runners;
};

/* Flags for config_load(). */
enum config_load_flags {
	CONFIG_ALLOW_MISSING = 1 << 0,	/* a missing file is an empty config */
	CONFIG_QUIET = 1 << 1,		/* do not log unknown-key warnings */
};

/*
 * The path gitlab-runner would use: $CONFIG_FILE, else
 * /etc/gitlab-runner/config.toml for root, else
 * ~/.gitlab-runner/config.toml.  The caller frees it.
 */
char	*config_default_path(void);

/*
 * Read and check the file at path.  On success fills *cfg and returns 0;
 * unknown keys are logged as warnings.  On failure returns -1, leaves *cfg
 * empty and sets *cause to a one-line message naming the file, line and
 * column (the caller frees it).
 */
int	 config_load(struct config *cfg, const char *path, int flags, char **cause);

/*
 * The same from a document built in memory (run-single builds one from its
 * flags); doc is taken over, name stands for the file in messages.
 */
int	 config_load_doc(struct config *cfg, const char *name, struct toml_value *doc,
	    int flags, char **cause);

/*
 * Write cfg->doc back to cfg->path: a temporary file in the same
 * directory, mode 0600, fsync, rename.  On failure the old file is
 * untouched, -1 is returned and *cause says why.
 */
int	 config_save(const struct config *cfg, char **cause);

void	 config_release(struct config *cfg);

/* The directory that holds config.toml (for certs/ and .runner_system_id). */
char	*config_dir(const struct config *cfg);

/*
 * Set key in an entry's table to a UTC date-time, as gitlab-runner writes
 * token_obtained_at; set false writes its "never", 0001-01-01T00:00:00Z.
 */
void	 config_set_time(struct toml_value *table, const char *key, time_t when, bool set);

/* Is this executor / shell one this build can run? */
bool	 config_executor_supported(const char *executor);
bool	 config_shell_supported(const char *shell);
/* A remote cache Type this build cannot serve, as a sentence; or NULL. */
char	*config_cache_unsupported(const struct runner_config *rc);

/*
 * A feature flag's value for this entry: its own setting, else the
 * default.  For the runner's own use (polling); a job's flags also see its
 * environment and variables (vars.h job_vars_feature_flag()).
 */
bool	 config_feature_flag(const struct runner_config *rc, const char *name);
/* Does [runners.feature_flags] set name?  Then *value is its setting. */
bool	 config_flag_set(const struct runner_config *rc, const char *name, bool *value);

/* How an entry reaches its GitLab, for api/ (strings borrowed from rc). */
void	 runner_config_creds(const struct runner_config *rc, struct api_creds *creds);

/*
 * Expand $NAME and ${NAME} from the environment, as Go's os.ExpandEnv
 * (unset names expand to nothing).  The caller frees the result.
 */
char	*config_expand_env(const char *s);

#endif

/*
 * A job's variables, build settings and directories, as gitlab-runner
 * computes them (common/build.go GetAllVariables, common/variables.go,
 * common/build_settings.go; protocol.md 9.2 "Directories", 9.3, 9.4).
 *
 * Everything here is plain computation on the payload and the runner's
 * settings: no process environment, no logging.  Problems a user should
 * see are returned as warning strings for the job log; a problem that
 * must fail the job is returned as an error string.
 *
 * The usual entry point is job_prepare(), which does gitlab-runner's two
 * passes: variables without a project dir (so GIT_CLONE_PATH can use
 * $CI_BUILDS_DIR), settings, directories, then the final variables.
 */
#ifndef RUNNER_VARS_H
#define RUNNER_VARS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/api.h"
#include "lib/strv.h"

struct runner_config;
struct script_var;

#define JOB_DEFAULT_TIMEOUT_S		7200
#define JOB_AFTER_SCRIPT_TIMEOUT_NS	(5LL * 60 * 1000000000)

/* One variable; key and value owned by the job_vars holding it. */
struct job_var {
	char	*key;
	char	*value;		/* expanded, unless raw */
	bool	 file;		/* exported as a file in the tmp dir holding value */
	bool	 masked;
	bool	 raw;
};

/*
 * All of a job's variables in gitlab-runner's order.  Duplicates are kept,
 * as gitlab-runner keeps them: exporting them in order makes the last one
 * win, and job_vars_get() returns the last one.
 */
struct job_vars {
	struct job_var	*v;
	size_t		 n;
	size_t		 cap;	/* slots allocated in v */
	struct strv	 warnings;	/* for the job log: bad FF_ values, unreadable TLS files */
};

/* What the runner adds; all borrowed, read only during the call. */
/*
 * A feature flag as the job sees it, resolved as gitlab-runner's
 * populateFeatureFlags: config.toml's [runners.feature_flags], else the
 * last FF_ value (expanded) of the runner's environment and the job's
 * variables, the job's last, if it is a bool; else the default.
 */
bool	job_vars_feature_flag(const struct job_vars *v, const char *name);

/*
 * s with $VAR and ${VAR} replaced by the variables' final values
 * (gitlab-runner's ExpandValue, Go's os.Expand): unknown names become "",
 * a file variable its file's path, a '$' before no name stays.  Caller
 * frees.
 */
char	*job_vars_expand(const struct job_vars *v, const char *s);

struct job_vars_input {
	const char		*short_token;	/* CI_RUNNER_SHORT_TOKEN */
	const char		*builds_dir;	/* absolute */
	const char		*project_dir;	/* job_vars_build() only; job_prepare() computes it */
	const char		*tmp_dir;	/* likewise; RUNNER_TEMP_PROJECT_DIR */
	int			 concurrent_id;
	int			 concurrent_project_id;
	int64_t			 job_timeout;	/* seconds; <= 0: runner_info.timeout, else 7200 */
	const struct strv	*environment;	/* [[runners]] environment, KEY=VALUE; NULL: none */
	/*
	 * Feature flags, debug_trace_disabled and custom_build_dir of the
	 * entry; NULL means every default.
	 */
	const struct runner_config *rc;
	bool			 shared_env;	/* true for shell: CI_SHARED_ENVIRONMENT */
	/* TLS files (PEM) whose content becomes file variables; NULL or "": none. */
	const char		*tls_ca_file;
	const char		*tls_cert_file;
	const char		*tls_key_file;
	const char		*version;	/* CI_RUNNER_VERSION */
	const char		*revision;	/* CI_RUNNER_REVISION */
	const char		*arch;		/* CI_RUNNER_EXECUTABLE_ARCH, "linux/amd64" */
};

/*
 * Build the variables of job (protocol.md 9.3 order), then expand $VAR and
 * ${VAR} in every value but raw ones.  Expansion is gitlab-runner's: one
 * pass, against the job's own unexpanded variables (the last of a name),
 * never the process environment; unknown names give "", "$$" gives "$",
 * a '$' before no name stays ("$/x", "a$|b"), "${}" goes, and a file
 * variable gives path.Join(RUNNER_TEMP_PROJECT_DIR, key), not its content.
 * The caller releases *v with job_vars_release().
 */
void		 job_vars_build(struct job_vars *v, const struct api_job *job,
		    const struct job_vars_input *in);
void		 job_vars_release(struct job_vars *v);

/* The value of the last variable named key, or NULL.  Borrowed from v. */
const char	*job_vars_get(const struct job_vars *v, const char *key);

/*
 * The variables as script.h takes them, in order: *out is a new array of
 * v->n entries whose strings are borrowed from v; the caller frees the
 * array (not the strings).  Returns v->n.
 */
size_t		 job_vars_script(const struct job_vars *v, struct script_var **out);

/* Append copies of the non-empty values of masked variables to out. */
void		 job_vars_masked(const struct job_vars *v, struct strv *out);

/* common/build_settings.go: what the job's variables ask of the runner. */
struct build_settings {
	const char	*git_strategy;	/* static: "fetch", "clone", "none" or "empty" */
	bool		 git_checkout;
	int64_t		 git_depth;	/* 0: full */
	/* The flag strings are owned; "none" is kept as is (script.h reads it). */
	char		*git_clean_flags;	/* default "-ffdx" */
	char		*git_fetch_flags;	/* default "--prune --quiet" */
	char		*git_clone_flags;	/* default "" */
	const char	*submodule_strategy;	/* static: "none", "normal", "recursive" */
	char		*submodule_paths;
	int64_t		 submodule_depth;	/* default git_info.depth */
	char		*submodule_update_flags;
	bool		 submodule_force_https;
	bool		 lfs_skip_smudge;
	char		*clone_path;		/* GIT_CLONE_PATH, "" if unset */
	int		 get_sources_attempts;		/* 1..10, default 1 */
	int		 artifact_download_attempts;	/* 1..10, default 1 */
	int		 restore_cache_attempts;	/* 1..10, default 1 */
	int		 executor_job_section_attempts;	/* 1..10, default 1 */
	bool		 after_script_ignore_errors;	/* default true */
	int64_t		 cache_request_timeout;	/* minutes, default 10 */
	bool		 debug_trace;		/* CI_DEBUG_TRACE, off when disabled */
	bool		 debug_services;	/* CI_DEBUG_SERVICES, likewise */
	int64_t		 script_timeout_ns;	/* RUNNER_SCRIPT_TIMEOUT; 0: none */
	int64_t		 after_script_timeout_ns; /* default 5 min */
	struct strv	 warnings;	/* for the job log */
	/* The job must fail with this (an unknown GIT_SUBMODULE_STRATEGY), or NULL. */
	char		*error;
};

/*
 * Parse the settings from the job's (expanded) variables.  job gives
 * allow_git_fetch and git_info.depth; rc (NULL: defaults) gives
 * debug_trace_disabled; job_timeout_s bounds the script timeouts.  The
 * caller releases *s with build_settings_release().
 */
void	build_settings_parse(struct build_settings *s, const struct job_vars *v,
	    const struct api_job *job, const struct runner_config *rc,
	    int64_t job_timeout_s);
void	build_settings_release(struct build_settings *s);

/* Where a job runs; both owned. */
struct job_dirs {
	char	*project_dir;	/* CI_PROJECT_DIR */
	char	*tmp_dir;	/* project dir + ".tmp" */
};

struct job_dirs_input {
	const char	*builds_dir;	/* absolute */
	const char	*short_token;
	int		 concurrent_project_id;
	const char	*project_full_path;	/* job_info.project_full_path */
	int64_t		 project_id;		/* for the fallback name */
	const char	*git_strategy;
	const char	*clone_path;		/* expanded GIT_CLONE_PATH, or NULL/"" */
	bool		 custom_build_dir;	/* [runners.custom_build_dir] enabled */
	/*
	 * The builds directory is the job's alone (a docker job's /builds
	 * volume): no <short token>/<concurrent project id> parts, as
	 * gitlab-runner's ProjectUniqueDir() without a shared dir.
	 */
	bool		 disposable;
};

/*
 * Compute the directories.  The default layout is
 * <builds>/<short token>/<concurrent project id>/<project path> (just
 * <builds>/<project path> when disposable), where the
 * path drops empty and "." parts and is replaced by "project-<id>" (or
 * "project") when empty or when it has a ".." part; GIT_STRATEGY=empty
 * appends "-empty".  GIT_CLONE_PATH replaces it only with custom_build_dir
 * and only if it is absolute and, cleaned, inside builds_dir.  Returns 0,
 * or -1 with *error set (the caller frees it) for a refused GIT_CLONE_PATH:
 * the job fails with it, as gitlab-runner's build error (script_failure).
 */
int	job_dirs_compute(struct job_dirs *d, const struct job_dirs_input *in,
	    char **error);

/*
 * project_full_path as a relative path that cannot leave its parent: empty
 * and "." parts dropped; a ".." part discards the whole path, as
 * gitlab-runner's ProjectSlug falls back to "project-<id>" ("project"
 * without an id).  The builds and the cache directories both use it.
 * Caller frees.
 */
char	*job_project_path(const char *full, int64_t project_id);
void	job_dirs_release(struct job_dirs *d);

/*
 * CI_CONCURRENT_PROJECT_ID: the lowest id >= 0 not in in_use, the ids of
 * the running jobs of the same runner token and project path.
 */
int	job_concurrent_project_id(const int *in_use, size_t n);

/* Everything a job needs from this module; all owned. */
struct job_prep {
	struct job_vars		vars;
	struct build_settings	settings;
	struct job_dirs		dirs;
	struct strv		warnings;	/* vars' and settings', to print in the log */
};

/*
 * Variables, settings and directories of a job, in gitlab-runner's order
 * (in->project_dir and in->tmp_dir are ignored).  Returns 0, or -1 with
 * *error set when the job must fail (a refused GIT_CLONE_PATH, an unknown
 * GIT_SUBMODULE_STRATEGY); *p is filled either way and released with
 * job_prep_release().
 */
int	job_prepare(struct job_prep *p, const struct api_job *job,
	    const struct job_vars_input *in, char **error);
void	job_prep_release(struct job_prep *p);

#endif

/*
 * The text each stage of a job runs: a pure function from plain data to
 * shell text, for bash and for sh, tested byte for byte against golden
 * files (protocol.md 9.2, 6.6).
 *
 * Every value that reaches the script is quoted: no variable, ref name,
 * path or command can break out of its place, whatever quotes, $(),
 * backticks, newlines or non-UTF-8 bytes it holds.  The job token reaches
 * git only through a credential helper that reads CI_JOB_TOKEN from the
 * environment (FF_GIT_URLS_WITHOUT_TOKENS, the default) or, with the flag
 * false, through insteadOf URLs in a temporary external git config in the
 * job's tmp dir; never .git/config, never the log.
 */
#ifndef RUNNER_SCRIPT_H
#define RUNNER_SCRIPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf;

/* gitlab-runner's stages, in the order a job runs them. */
enum script_stage {
	SCRIPT_PREPARE,			/* prepare_script: "Running on <host>..." */
	SCRIPT_GET_SOURCES,		/* get_sources: git, by GIT_STRATEGY */
	SCRIPT_RESTORE_CACHE,		/* restore_cache */
	SCRIPT_DOWNLOAD_ARTIFACTS,	/* download_artifacts */
	SCRIPT_STEP,			/* step_<name>: a user step */
	SCRIPT_AFTER_SCRIPT,		/* after_script */
	SCRIPT_ARCHIVE_CACHE,		/* archive_cache / archive_cache_on_failure */
	SCRIPT_UPLOAD_ARTIFACTS,	/* upload_artifacts_on_success / _on_failure */
	SCRIPT_CLEANUP,			/* cleanup_file_variables */
};

/* One variable as the script exports it: already expanded, final order. */
struct script_var {
	const char	*key;
	const char	*value;
	bool		 file;		/* written to <tmp dir>/<key>, the variable is its path */
};

struct script_lines {
	const char *const	*v;
	size_t			 n;
};

/* One key of a cache and the local file that holds it. */
struct script_cache_key {
	const char	*key;		/* sanitised, as the log shows it */
	const char	*file;		/* <cache dir>/<project path>/<key>/cache.zip */
};

/*
 * One `cache:` entry, its keys already expanded and sanitised (transfers.c):
 * keys[0] is the entry's own, then fallback_keys, then CACHE_FALLBACK_KEY.
 * n_keys is 0 when the entry's key came out empty: the stages say so and
 * skip it.
 */
struct script_cache {
	const struct script_cache_key	*keys;
	size_t				 n_keys;
	const char			*shown_key;	/* for messages when n_keys is 0 */
	struct script_lines		 warnings;	/* sanitising, one line each */
	struct script_lines		 paths;
	bool				 untracked;
	bool				 pull, push;	/* from the expanded policy */
	const char			*when;		/* on_success, on_failure, always */
};

/* One `artifacts:` entry, as the payload gives it. */
struct script_artifact {
	struct script_lines	 paths;
	struct script_lines	 exclude;
	bool			 untracked;
	const char		*name;		/* "" or NULL: not passed */
	const char		*when;		/* on_success (default), on_failure, always */
	const char		*format;	/* zip, gzip, raw; "": not passed */
	const char		*type;		/* archive, junit, ...; "": not passed */
	const char		*expire_in;
};

/* A job whose artifacts this one downloads. */
struct script_dependency {
	int64_t		 id;
	const char	*name;
	const char	*token;		/* its job token: into the helper's environment */
};

/* Everything a stage's text depends on; strings borrowed, never NULL but may be "". */
struct script_job {
	const char		*shell;		/* "bash" or "sh" */
	const char		*builds_dir;	/* CI_BUILDS_DIR */
	const char		*project_dir;	/* CI_PROJECT_DIR */
	const char		*tmp_dir;	/* <project dir>.tmp: file variables, git config */
	const struct script_var	*vars;
	size_t			 n_vars;
	bool			 debug_trace;	/* CI_DEBUG_TRACE (and not debug_trace_disabled) */
	bool			 script_sections; /* FF_SCRIPT_SECTIONS and trace_sections */
	bool			 exit_code_check; /* FF_ENABLE_BASH_EXIT_CODE_CHECK */

	/* get_sources */
	const char		*git_strategy;	/* fetch, clone, none, empty */
	const char		*repo_url;	/* with gitlab-ci-token:<token>@: tmp git config, flag false only */
	const char		*remote_url;	/* the same without credentials: origin */
	const char		*server_host;	/* scheme://host[:port]: the helper's scope, credential reject */
	bool			 git_urls_without_tokens; /* FF_GIT_URLS_WITHOUT_TOKENS: helper, not insteadOf */
	const char		*sha;
	const char		*ref;
	struct script_lines	 refspecs;
	int64_t			 depth;		/* 0: full */
	bool			 checkout;	/* GIT_CHECKOUT */
	const char		*clean_flags;	/* GIT_CLEAN_FLAGS, default "-ffdx"; "none" skips */
	const char		*fetch_flags;	/* GIT_FETCH_EXTRA_FLAGS, default "--prune --quiet" */
	const char		*clone_flags;	/* GIT_CLONE_EXTRA_FLAGS, with native_clone */
	bool			 native_clone;	/* FF_USE_GIT_NATIVE_CLONE: clone uses git clone */
	const char		*submodule_strategy; /* none, normal, recursive */
	const char		*submodule_paths;
	const char		*submodule_update_flags;
	int64_t			 submodule_depth;
	int			 get_sources_attempts; /* 1..10 */
	const char		*user_agent;	/* for git's http.userAgent */
	const char		*ca_file;	/* CI_SERVER_TLS_CA_FILE path, or "" */
	struct script_lines	 pre_get_sources;	/* config.toml's, then the payload hook's */
	struct script_lines	 post_get_sources;	/* the payload hook's, then config.toml's */

	/* steps */
	const char		*step_name;	/* "script", "release", ... for SCRIPT_STEP */
	struct script_lines	 commands;	/* the step's or after_script's lines */
	const char		*pre_build_script;	/* config.toml, before each user step */
	const char		*post_build_script;	/* config.toml, after each user step */
	bool			 on_failure;	/* archive_cache / upload_artifacts variant */

	/* cleanup */
	bool			 job_cleanup;	/* FF_ENABLE_JOB_CLEANUP: clean the project dir too */

	/* caches and artifacts: the helper commands of this binary */
	const char		*runner_command; /* absolute path of runner, or "" */
	const char		*server_url;	/* the entry's url, for the artifact helpers */
	int64_t			 job_id;
	int64_t			 cache_request_timeout;	/* minutes */
	int			 artifact_download_attempts; /* 1..10 */
	const struct script_cache	*caches;
	size_t			 n_caches;
	const struct script_artifact	*artifacts;
	size_t			 n_artifacts;
	const struct script_dependency	*dependencies;	/* with artifacts only */
	size_t			 n_dependencies;
};

/* A shell word that stands for exactly s: single quotes, ' as '\''. */
void	script_quote(struct buf *out, const char *s);

/*
 * The stage's script, or NULL when the stage has nothing to do (it is
 * skipped without a section, as gitlab-runner's ErrSkipBuildStage).  The
 * caller frees it.
 */
char	*script_stage(const struct script_job *j, enum script_stage stage);

/* gitlab-runner's stage name: "get_sources", "step_script", ... (into out). */
const char *script_stage_name(const struct script_job *j, enum script_stage stage,
	    char *out, size_t size);

#endif

/*
 * The text each stage of a job runs: a pure function from plain data to
 * shell text, for bash and for sh, tested byte for byte against golden
 * files (protocol.md 9.2, 6.6).
 *
 * Every value that reaches the script is quoted: no variable, ref name,
 * path or command can break out of its place, whatever quotes, $(),
 * backticks, newlines or non-UTF-8 bytes it holds.  The job token reaches
 * git only through a temporary external git config in the job's tmp dir
 * (never .git/config, never argv, never the log), removed at cleanup.
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
	const char		*repo_url;	/* with gitlab-ci-token:<token>@: only into the tmp git config */
	const char		*remote_url;	/* the same without credentials: origin */
	const char		*server_host;	/* scheme://host[:port], for git credential reject */
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

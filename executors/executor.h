/*
 * How a stage of a job runs somewhere: the contract between the job (which
 * decides what text to run) and an executor (which runs it).
 *
 * An executor sees script text, an environment, a working directory, a
 * user and its output callback; never the GitLab payload, never what a
 * token is for.  The shell executor runs the text with bash or sh on this
 * machine; later ones (custom, docker) implement the same table.
 *
 * Contract of exec_start(): if it returns NULL the callbacks are never
 * called (the error is in *cause); otherwise output arrives through
 * on_output, in order per stream, until on_done is called exactly once,
 * after the stage's process has exited AND its output pipes are closed.
 * The exec is freed by the executor after on_done returns.
 */
#ifndef EXECUTORS_EXECUTOR_H
#define EXECUTORS_EXECUTOR_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

struct exec;

struct exec_stage {
	const char	*name;		/* for messages: "step_script" */
	const char	*shell;		/* "bash" or "sh" */
	const char	*script;	/* fed on stdin, then stdin is closed */
	char *const	*env;		/* the whole environment, "K=V", NULL-terminated */
	const char	*cwd;		/* working directory; NULL: the daemon's */
	const char	*user;		/* run through su as this user; NULL: as we are */
};

/* stream: 1 stdout, 2 stderr. */
typedef void	exec_output_cb(int stream, const char *data, size_t len, void *arg);
/*
 * status: 0 when the process ran to its end (exit_code is its status, or
 * 128 + signal when a signal ended it), or -errno when it could not be run
 * or waited for (exit_code -1).
 */
typedef void	exec_done_cb(int status, int exit_code, void *arg);

struct executor_ops {
	const char	*name;		/* "shell" */
	struct exec	*(*start)(uv_loop_t *loop, const struct exec_stage *stage,
			    exec_output_cb *on_output, exec_done_cb *on_done, void *arg,
			    char **cause);
	/*
	 * Stop the stage: SIGTERM to its whole process group now, SIGKILL
	 * after grace_ms if anything of it is still running.  on_done still
	 * comes, once.  A no-op after on_done.
	 */
	void		(*cancel)(struct exec *e, uint64_t grace_ms);
};

/* The executors this build has, by name; NULL if there is no such one. */
const struct executor_ops	*executor_find(const char *name);

#endif

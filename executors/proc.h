/*
 * A child process on a libuv loop, with its input given up front and its
 * output read as it arrives: the part of an executor that every executor
 * which runs a local program shares (shell now, custom later).
 *
 * The child runs in its own session and process group (pgid = pid), so a
 * cancel reaches everything the stage started.  Its stdin is a memory
 * file holding the input (a shell reads a script from a file in blocks,
 * from a pipe a byte at a time); stdout and stderr are pipes, real pipes
 * (not sockets, so "> /dev/stderr" works in scripts).
 */
#ifndef EXECUTORS_PROC_H
#define EXECUTORS_PROC_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

struct proc;

/*
 * How long output pipes may stay open after the main process exited
 * before the rest of its process group is killed.
 */
#define PROC_DRAIN_MS	200

struct proc_spec {
	const char	*file;		/* path of the program; not searched in PATH */
	char *const	*argv;		/* argv[0] is what the program sees */
	char *const	*env;		/* the whole environment; NULL: an empty one */
	const char	*cwd;		/* NULL: ours */
	const char	*input;		/* copied into the child's stdin */
	size_t		 inputlen;
	uint64_t	 drain_ms;	/* 0: PROC_DRAIN_MS */
};

/* stream: 1 stdout, 2 stderr.  data is valid only during the call. */
typedef void	proc_output_cb(int stream, const char *data, size_t len, void *arg);
/* status 0 and exit_code (128 + signal for a signalled process). */
typedef void	proc_done_cb(int status, int exit_code, void *arg);

/*
 * Start spec->file.  On failure return NULL with an allocated message in
 * *cause ("cannot run /usr/bin/bash: Permission denied", "cannot change to
 * directory '/x': No such file or directory"); no callback is ever called,
 * and the memory is released once the loop has run the close callbacks.
 *
 * Otherwise output_cb (may be NULL) gets the output as it arrives, in order
 * per stream, and done_cb is called exactly once: when the process has
 * exited, both output pipes are at EOF or were closed, and every handle is
 * closed.  The proc is freed when done_cb returns.
 *
 * If the main process exits while something else (a background job of the
 * script) still holds an output pipe, that something gets drain_ms to let
 * go, then the process group is SIGKILLed, and drain_ms later the pipes are
 * closed regardless (a process that left the group cannot hold us).
 */
struct proc	*proc_start(uv_loop_t *loop, const struct proc_spec *spec,
		    proc_output_cb *output_cb, proc_done_cb *done_cb, void *arg,
		    char **cause);

/*
 * SIGTERM to the whole process group now; SIGKILL to the group grace_ms
 * later if the main process or anything else of the group still runs.
 * done_cb still comes, once.  Calling it again keeps the earlier deadline
 * if that is sooner.  A no-op once the process has exited and its pipes
 * are closed (including from inside done_cb).
 */
void		 proc_cancel(struct proc *p, uint64_t grace_ms);

/* The child's pid, which is also its process group id. */
int		 proc_pid(const struct proc *p);

/*
 * Find an executable called name in the directories of path (a PATH value;
 * an empty entry is the current directory).  A name with a slash is taken
 * as it is.  Returns an allocated path, or NULL.
 */
char		*proc_find_program(const char *name, const char *path);

#endif

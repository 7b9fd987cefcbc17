/*
 * The shell executor: a stage is a new `bash -l` (or `sh -l`) on this
 * machine with the script on its stdin, in its own process group, with
 * exactly the environment and working directory the stage gives
 * (protocol.md 9.2).  With a user it goes through su, as gitlab-runner
 * does: `su -s /usr/bin/bash USER -c "bash -l"`.
 *
 * The process work is proc.c's; this file only decides what to run.
 */
#include <stdlib.h>
#include <string.h>

#include "executors/executor.h"
#include "executors/proc.h"
#include "lib/log.h"
#include "lib/xmalloc.h"

struct exec {
	struct proc	*proc;		/* NULL once on_done is being called */
	exec_output_cb	*on_output;
	exec_done_cb	*on_done;
	void		*arg;
};

/* The value of name in a "K=V" environment, or NULL. */
static const char *
shell_env_get(char *const *env, const char *name)
{
	size_t	len = strlen(name);

	for (; env != NULL && *env != NULL; env++) {
		if (strncmp(*env, name, len) == 0 && (*env)[len] == '=')
			return *env + len + 1;
	}
	return NULL;
}

/*
 * Where to look for the shell: the PATH the stage will have, so that what
 * runs is what the script would find itself; the daemon's if it has none.
 */
static char *
shell_find(const struct exec_stage *stage, const char *name, char **cause)
{
	const char	*path;
	char		*file;

	if ((path = shell_env_get(stage->env, "PATH")) == NULL)
		path = getenv("PATH");
	if ((file = proc_find_program(name, path)) == NULL)
		*cause = xasprintf("cannot run %s: not found in PATH (%s)",
		    name, path != NULL ? path : "/usr/bin:/bin");
	return file;
}

static void
shell_on_output(int stream, const char *data, size_t len, void *arg)
{
	struct exec	*e = arg;

	if (e->on_output != NULL)
		e->on_output(stream, data, len, e->arg);
}

static void
shell_on_done(int status, int exit_code, void *arg)
{
	struct exec	*e = arg;

	/* From here on a cancel, even from inside on_done, is a no-op. */
	e->proc = NULL;
	e->on_done(status, exit_code, e->arg);
	free(e);
}

static struct exec *
shell_start(uv_loop_t *loop, const struct exec_stage *stage,
    exec_output_cb *on_output, exec_done_cb *on_done, void *arg, char **cause)
{
	struct proc_spec	 spec;
	struct exec		*e;
	const char		*shell;
	char			*shell_path, *su_path = NULL, *command = NULL;
	char			*argv[7];

	*cause = NULL;
	shell = stage->shell != NULL ? stage->shell : "bash";
	if (strcmp(shell, "bash") != 0 && strcmp(shell, "sh") != 0) {
		*cause = xasprintf("unsupported shell '%s'", shell);
		return NULL;
	}
	if ((shell_path = shell_find(stage, shell, cause)) == NULL)
		return NULL;

	memset(&spec, 0, sizeof spec);
	spec.argv = argv;
	spec.env = stage->env;
	spec.cwd = stage->cwd;
	spec.input = stage->script != NULL ? stage->script : "";
	spec.inputlen = strlen(spec.input);
	if (stage->user == NULL) {
		argv[0] = (char *)shell;
		argv[1] = (char *)"-l";
		argv[2] = NULL;
		spec.file = shell_path;
	} else {
		if ((su_path = shell_find(stage, "su", cause)) == NULL) {
			free(shell_path);
			return NULL;
		}
		command = xasprintf("%s -l", shell);
		argv[0] = (char *)"su";
		argv[1] = (char *)"-s";
		argv[2] = shell_path;
		argv[3] = (char *)stage->user;
		argv[4] = (char *)"-c";
		argv[5] = command;
		argv[6] = NULL;
		spec.file = su_path;
	}

	e = xcalloc(1, sizeof *e);
	e->on_output = on_output;
	e->on_done = on_done;
	e->arg = arg;
	e->proc = proc_start(loop, &spec, shell_on_output, shell_on_done, e,
	    cause);
	if (e->proc == NULL) {
		free(e);
		e = NULL;
	} else
		log_debug("stage %s: %s%s%s running as process %d",
		    stage->name != NULL ? stage->name : "?", shell,
		    stage->user != NULL ? " as " : "",
		    stage->user != NULL ? stage->user : "",
		    proc_pid(e->proc));
	free(command);
	free(su_path);
	free(shell_path);
	return e;
}

static void
shell_cancel(struct exec *e, uint64_t grace_ms)
{
	if (e->proc != NULL)
		proc_cancel(e->proc, grace_ms);
}

const struct executor_ops shell_executor = {
	.name = "shell",
	.start = shell_start,
	.cancel = shell_cancel,
};

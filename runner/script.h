/*
 * The text a stage runs: a pure function from what the job says to shell
 * text, so it can be tested byte for byte (protocol.md 9.2).
 *
 * Every value that reaches the script is quoted: no command, variable or
 * path can break out of its place, whatever quotes, $(), backticks,
 * newlines or non-UTF-8 bytes it holds.
 */
#ifndef RUNNER_SCRIPT_H
#define RUNNER_SCRIPT_H

#include <stddef.h>

struct buf;

struct script_step {
	const char		*shell;		/* "bash" or "sh" */
	const char		*dir;		/* cd here first; NULL: stay */
	const char *const	*commands;	/* the lines of the step */
	size_t			 n_commands;
	const char		*before;	/* pre_build_script, or NULL */
	const char		*after;		/* post_build_script, or NULL */
};

/* A shell word that stands for exactly s: single quotes, ' as '\''. */
void	script_quote(struct buf *out, const char *s);

/*
 * A user step: the shell's settings (a TERM trap that exits quietly,
 * errexit, pipefail where the shell has it), cd, then each command echoed
 * as "$ command" in green and run.  The caller frees the result.
 */
char	*script_step(const struct script_step *s);

#endif

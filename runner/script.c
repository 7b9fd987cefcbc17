/*
 * Stage scripts.  The shape follows gitlab-runner's bash writer
 * (shells/bash.go): a TERM trap so that a cancelled stage exits 1 without
 * bash printing its script, errexit so the first failing command ends the
 * step with its status, pipefail where the shell knows it, and every
 * command echoed before it runs.
 */
#include <stdlib.h>
#include <string.h>

#include "runner/buf.h"
#include "runner/script.h"

void
script_quote(struct buf *out, const char *s)
{
	buf_putc(out, '\'');
	for (; *s != '\0'; s++) {
		if (*s == '\'')
			buf_puts(out, "'\\''");
		else
			buf_putc(out, *s);
	}
	buf_putc(out, '\'');
}

/* printf's format is fixed; the command goes in as an argument. */
static void
echo_command(struct buf *out, const char *cmd)
{
	const char *nl = strchr(cmd, '\n');

	buf_puts(out, "printf '\\033[32;1m$ %s\\033[0;m\\n' ");
	if (nl == NULL) {
		script_quote(out, cmd);
	} else {
		/* A multi-line command shows its first line, as gitlab-runner does. */
		struct buf first;

		buf_init(&first, BUF_UNLIMITED);
		buf_append(&first, cmd, (size_t)(nl - cmd));
		buf_puts(&first, " # collapsed multi-line command");
		script_quote(out, first.ptr);
		buf_release(&first);
	}
	buf_putc(out, '\n');
}

char *
script_step(const struct script_step *s)
{
	struct buf out;
	size_t i;

	buf_init(&out, BUF_UNLIMITED);
	buf_puts(&out, "trap 'exit 1' TERM\n");
	buf_puts(&out, "case \"$(set -o)\" in *pipefail*) set -o pipefail;; esac\n");
	buf_puts(&out, "set -o errexit\nset +o noclobber\n");
	if (s->dir != NULL) {
		buf_puts(&out, "cd ");
		script_quote(&out, s->dir);
		buf_putc(&out, '\n');
	}
	if (s->before != NULL && *s->before != '\0') {
		buf_puts(&out, s->before);
		buf_putc(&out, '\n');
	}
	for (i = 0; i < s->n_commands; i++) {
		echo_command(&out, s->commands[i]);
		buf_puts(&out, s->commands[i]);
		buf_putc(&out, '\n');
	}
	if (s->after != NULL && *s->after != '\0') {
		buf_puts(&out, s->after);
		buf_putc(&out, '\n');
	}
	return buf_detach(&out, NULL);
}

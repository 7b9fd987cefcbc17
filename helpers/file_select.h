/*
 * Which files of the project an artifact or cache takes: gitlab-runner's
 * rules for `paths`, `exclude` and `untracked` (protocol.md 7.5), from its
 * commands/helpers/file_archiver.go and the doublestar globs it uses.
 *
 * - A path is relative to the project directory and may be a glob with
 *   "**" (a whole segment: any number of directories, none included), "*"
 *   and "?" (never across '/', dotfiles included), "[...]" ("[!...]" and
 *   "[^...]" negate), "{a,b}" and '\' escapes; variables are already
 *   expanded by the job script.  It is cleaned lexically ("./a//b/" is
 *   "a/b"); an absolute path inside the project, or a "../p/x" that comes
 *   back into it, is fine.  A matched directory brings its whole tree.  A
 *   path that leads out of the project, a malformed pattern, an empty path
 *   and a path that matches nothing are each skipped with a warning.  The
 *   project directory itself (".") is not an entry, its contents are.
 * - `exclude` globs are matched against the relative path of every
 *   candidate, with the same syntax.  As in gitlab-runner they are not
 *   recursive: an excluded directory loses its own entry but what is in it
 *   is still matched one by one; "dir/" followed by "**" drops a tree.
 * - `untracked` adds what `git ls-files -o` lists (untracked files one by
 *   one, .gitignore not honoured, as gitlab-runner), minus the excludes.
 * - Symlinks are taken as links, never followed, not even as a directory
 *   on the way to a path, so nothing outside the project is ever read.
 *
 * The result holds each path once, in path order: bytewise with '/' below
 * every other byte, so a directory comes right before its contents ("a",
 * "a/b", "a-b").
 */
#ifndef HELPERS_FILE_SELECT_H
#define HELPERS_FILE_SELECT_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/strv.h"

struct file_select {
	const char	*project_dir;	/* absolute */
	char *const	*paths;		/* NULL-terminated, may be NULL */
	char *const	*excludes;	/* NULL-terminated, may be NULL */
	bool		 untracked;
};

/*
 * Append the selected paths, relative to project_dir, to out.  Warnings
 * go to warn(), one line each, if it is not NULL, in gitlab-runner's
 * words (a path matching nothing, a path outside the project, a git that
 * fails or lists nothing for `untracked`).  Returns 0, or -1 with err set
 * and out untouched when the project cannot be opened at all or git cannot
 * be started for lack of a pipe or a process.
 */
int	 file_select(const struct file_select *fs, struct strv *out,
	    void (*warn)(const char *line, void *data), void *data,
	    char *err, size_t errlen);

/*
 * doublestar's match of one relative path, as gitlab-runner's excludes use
 * it ("**" crosses '/'); false for a malformed pattern.
 */
bool	 file_glob_match(const char *pattern, const char *path);

#endif

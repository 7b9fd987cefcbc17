/*
 * Which files of the project an artifact or cache takes: gitlab-runner's
 * rules for `paths`, `exclude` and `untracked` (protocol.md 7.5).
 *
 * - A path is relative to the project directory and may be a glob with
 *   "**" (any number of directories), "*", "?" and "[...]"; variables are
 *   already expanded by the job script.  A matched directory brings its
 *   whole tree.  A path that leads out of the project (absolute elsewhere,
 *   or through "..") is skipped with a warning, as is a path that matches
 *   nothing.
 * - `exclude` globs are matched against the relative path of every
 *   candidate, with the same "**" semantics; a match drops it (and, for a
 *   directory, its tree).
 * - `untracked` adds what `git ls-files -o` lists (untracked files, .gitignore
 *   not honoured, as gitlab-runner).
 * - Symlinks are taken as links, never followed, so nothing outside the
 *   project is ever read.
 *
 * The result is sorted, each path once, parents before children.
 */
#ifndef RUNNER_FILE_SELECT_H
#define RUNNER_FILE_SELECT_H

#include <stdbool.h>
#include <stddef.h>

#include "runner/strv.h"

struct file_select {
	const char	*project_dir;	/* absolute */
	char *const	*paths;		/* NULL-terminated, may be NULL */
	char *const	*excludes;	/* NULL-terminated, may be NULL */
	bool		 untracked;
};

/*
 * Fill out with the selected paths, relative to project_dir.  Warnings (a
 * path matching nothing, a path outside the project) go to warn(), one
 * line each, if it is not NULL.  Returns 0, or -1 with err set when the
 * project cannot be read at all (or git fails for `untracked`).
 */
int	 file_select(const struct file_select *fs, struct strv *out,
	    void (*warn)(const char *line, void *data), void *data,
	    char *err, size_t errlen);

/* gitlab-runner's glob match of one relative path ("**" crosses '/'). */
bool	 file_glob_match(const char *pattern, const char *path);

#endif

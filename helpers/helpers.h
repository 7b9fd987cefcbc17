/*
 * The helper commands the job script calls (artifacts.c, cache.c): they
 * run inside a job, in the project directory, with the job's variables in
 * their environment.  Like every command each is a table entry (struct
 * cli_command, lib/cli.h) that main.c lists.
 */
#ifndef HELPERS_HELPERS_H
#define HELPERS_HELPERS_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/cli.h"

extern const struct cli_command cmd_artifacts_uploader_entry;
extern const struct cli_command cmd_artifacts_downloader_entry;
extern const struct cli_command cmd_cache_archiver_entry;
extern const struct cli_command cmd_cache_extractor_entry;

/* What they share (common.c). */
struct strv;
/* The files --path/--exclude/--untracked select, warnings logged; -1: logged. */
int	helper_select(char *const *paths, char *const *excludes, bool untracked,
	    struct strv *out);
/* Extract the zip at path into the working directory, bounded; -1: logged. */
int	helper_extract(const char *path);

#endif

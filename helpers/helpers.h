/*
 * The helper commands the job script calls (artifacts.c, cache.c): they
 * run inside a job, in the project directory, with the job's variables in
 * their environment.  Like every command they get the arguments after
 * their name and return the exit status.
 */
#ifndef HELPERS_HELPERS_H
#define HELPERS_HELPERS_H

#include <stdbool.h>
#include <stddef.h>

int	cmd_artifacts_uploader(int argc, char **argv);
int	cmd_artifacts_downloader(int argc, char **argv);
int	cmd_cache_archiver(int argc, char **argv);
int	cmd_cache_extractor(int argc, char **argv);

/* What they share (common.c). */
struct strv;
/* The files --path/--exclude/--untracked select, warnings logged; -1: logged. */
int	helper_select(char *const *paths, char *const *excludes, bool untracked,
	    struct strv *out);
/* "12.3 MiB": bytes for a person. */
void	helper_size(unsigned long long bytes, char *out, size_t size);
/* Extract the zip at path into the working directory, bounded; -1: logged. */
int	helper_extract(const char *path);

#endif

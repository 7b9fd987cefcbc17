/*
 * mkdir -p: the missing directories of a path, with one mode.  A leaf
 * utility: config.toml's directory and a job's builds directory both need it.
 */
#ifndef LIB_MKDIRS_H
#define LIB_MKDIRS_H

#include <stdbool.h>
#include <sys/types.h>

/*
 * Make every missing directory of path with mode.  Returns 0, or -1 with
 * errno set.  *created (when not NULL) tells whether path itself was made
 * by this call, so the caller can give it away or set it up once.
 */
int	mkdirs(const char *path, mode_t mode, bool *created);

#endif

/*
 * Whole writes to a file descriptor (write(2) may write less than asked,
 * and a signal may interrupt it), and the directory sync that makes a
 * temp-file-then-rename update durable.
 */
#ifndef LIB_FDIO_H
#define LIB_FDIO_H

#include <stddef.h>
#include <sys/types.h>

/* Write all n bytes of p; 0, or -1 with errno set. */
int	fd_write_all(int fd, const void *p, size_t n);
/*
 * fsync the directory holding path, so that a rename into it survives a
 * crash as the file's own fsync does; 0, or -1 with errno set.
 */
int	fd_sync_parent(const char *path);
/*
 * Replace path with the n bytes of p, all or nothing: a temp file beside it
 * (path.XXXXXX) with this mode, written, fsynced, renamed over path, and
 * the directory fsynced.  A crash leaves the old file or the new one, never
 * half of either.  0, or -1 with errno set and no temp file left.
 */
int	fd_replace_file(const char *path, const void *p, size_t n, mode_t mode);

#endif

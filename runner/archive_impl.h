/*
 * What archive.c (formats, gzip, raw) and archive_zip.c (libarchive) share.
 * Private to the two: the rest of the program includes runner/archive.h.
 *
 * The prefix is arc_, not archive_: libarchive owns the archive_ namespace
 * and a clash would be resolved silently by the dynamic linker.
 */
#ifndef RUNNER_ARCHIVE_IMPL_H
#define RUNNER_ARCHIVE_IMPL_H

#include <sys/stat.h>

#include <stddef.h>

#include "runner/archive.h"

/* Bytes read or written at a time: memory stays flat for any file size. */
#define ARC_CHUNK	(64 * 1024)

/*
 * err = "\"<entry>\": <message>".  The entry name comes from a file system
 * or an archive and may hold anything, so bytes other than printable ASCII
 * are written as \xNN: err stays one printable line.  entry may be NULL.
 */
void	arc_errf(char *err, size_t errlen, const char *entry, const char *fmt, ...)
	    __attribute__((format(printf, 4, 5)));

/*
 * Open dir/rel for reading if it is a regular file, filling *sb; -1 with
 * err naming rel otherwise.  Symlinks are not followed and a FIFO does not
 * block the open, so nothing but the named regular file is ever read.
 */
int	arc_open_regular(const char *dir, const char *rel, struct stat *sb,
	    const char *why, char *err, size_t errlen);

int	arc_write_zip(int fd, const char *dir, char *const *files,
	    struct archive_stats *st, char *err, size_t errlen);

#endif

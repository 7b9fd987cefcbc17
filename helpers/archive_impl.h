/*
 * What archive.c (formats, gzip, raw) and archive_zip.c (libarchive) share.
 * Private to the two: the rest of the program includes helpers/archive.h.
 *
 * The prefix is arc_, not archive_: libarchive owns the archive_ namespace
 * and a clash would be resolved silently by the dynamic linker.
 */
#ifndef HELPERS_ARCHIVE_IMPL_H
#define HELPERS_ARCHIVE_IMPL_H

#include <sys/stat.h>

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "helpers/archive.h"

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

/*
 * The staging directory of one extraction (archive_stage.c): made hidden
 * inside dest, filled entry by entry through the calls below (names clean
 * and checked, raw the name for messages), then either moved into place
 * whole by arc_stage_commit() or removed by arc_stage_free().  Every call
 * returns 0, or -1 with err naming the entry and the cause.
 */
struct arc_stage;

struct arc_stage *arc_stage_new(const char *dest, char *err, size_t errlen);
int	arc_stage_dir(struct arc_stage *s, const char *name, const char *raw,
	    mode_t perm, const struct timespec *mtime, char *err, size_t errlen);
int	arc_stage_symlink(struct arc_stage *s, const char *name, const char *raw,
	    const char *target, const struct timespec *mtime, char *err, size_t errlen);
/* A regular file: opened, written at offsets (zeros become holes), done. */
int	arc_stage_file(struct arc_stage *s, const char *name, const char *raw,
	    char *err, size_t errlen);
int	arc_stage_write(struct arc_stage *s, const void *p, size_t n, int64_t off,
	    char *err, size_t errlen);
int	arc_stage_file_done(struct arc_stage *s, mode_t perm,
	    const struct timespec *mtime, char *err, size_t errlen);
/*
 * Move everything into dest, or nothing when something is in the way;
 * then the directories' modes and times.  The staging directory is gone
 * afterwards either way once arc_stage_free() ran.
 */
int	arc_stage_commit(struct arc_stage *s, char *err, size_t errlen);
void	arc_stage_free(struct arc_stage *s);

#endif

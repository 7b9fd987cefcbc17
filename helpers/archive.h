/*
 * The archives artifacts and caches travel in (protocol.md 7.3): zip with
 * Deflate (ZIP64 when an entry or the archive needs it), concatenated gzip
 * members for reports, and raw single files.  Zip is read and written with
 * libarchive; gzip with zlib.  Everything streams: memory stays flat
 * whatever the archive's size.
 *
 * Extraction is the dangerous half.  An archive comes from the network and
 * may be hostile: archive_extract_zip() refuses absolute paths, ".."
 * components, symlinks leading out of the destination and anything but
 * files, directories and symlinks; it bounds the bytes and entries it
 * writes and refuses an archive that declares more than the destination's
 * file system has free; it checks every header before it writes anything,
 * and writes into a staging directory that moves into place only once every
 * file in it is whole, so a refused, corrupt or truncated archive, a short
 * write or a full disk leaves the destination as it found it.
 *
 * Errors come back as -1 with one line in err naming the entry or file.
 */
#ifndef HELPERS_ARCHIVE_H
#define HELPERS_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>

enum archive_format {
	ARCHIVE_ZIP,
	ARCHIVE_GZIP,
	ARCHIVE_RAW,
};

/*
 * "zip", "gzip", "raw" -> format; -1 for anything else.  (Not
 * archive_format_name(): libarchive has one of its own.)
 */
int		 archive_format_parse(const char *name, enum archive_format *out);
const char	*archive_format_string(enum archive_format f);
/* The upload file name's suffix: ".zip", ".gz" or "". */
const char	*archive_format_suffix(enum archive_format f);

struct archive_stats {
	uint64_t	entries;	/* files, directories and symlinks */
	uint64_t	bytes;		/* uncompressed bytes of regular files */
};

/*
 * Write the entries named by files (paths relative to dir, NULL-terminated,
 * as file_select() returns them) to fd, which must be open for writing at
 * its current offset.  Modes and mtimes are kept; symlinks are stored as
 * symlinks.  RAW takes exactly one regular file; GZIP takes regular files
 * only (one member each, Name = base name, Comment = relative path).
 */
int	 archive_write(int fd, enum archive_format fmt, const char *dir,
	    char *const *files, struct archive_stats *st, char *err, size_t errlen);

struct archive_limits {
	uint64_t	max_bytes;	/* uncompressed bytes in all; 0: no limit */
	uint64_t	max_entries;	/* 0: no limit */
};

/*
 * Extract the zip at path into dir (which must exist), merging with what
 * is there: existing files are replaced, as gitlab-runner does.  The
 * entries are written into a hidden directory inside dir first, with every
 * write, close and metadata call checked, and moved into place only when
 * all are whole; on any failure that directory goes and dir has nothing
 * new.
 */
int	 archive_extract_zip(const char *path, const char *dir,
	    const struct archive_limits *lim, struct archive_stats *st,
	    char *err, size_t errlen);

#endif

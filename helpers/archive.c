/*
 * Archive formats by name, the writer's dispatch, and the two formats zlib
 * and plain copies handle: concatenated gzip members and raw.  Zip lives in
 * archive_zip.c, the one file that includes libarchive.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "helpers/archive.h"
#include "helpers/archive_impl.h"
#include "lib/fdio.h"
#include "lib/xmalloc.h"

static const struct {
	enum archive_format	 fmt;
	const char		*name;
	const char		*suffix;
} formats[] = {
	{ ARCHIVE_ZIP,	"zip",	".zip" },
	{ ARCHIVE_GZIP,	"gzip",	".gz" },
	{ ARCHIVE_RAW,	"raw",	"" },
};

#define NFORMATS	(sizeof(formats) / sizeof(formats[0]))

int
archive_format_parse(const char *name, enum archive_format *out)
{
	size_t i;

	for (i = 0; i < NFORMATS; i++) {
		if (strcmp(name, formats[i].name) == 0) {
			*out = formats[i].fmt;
			return 0;
		}
	}
	return -1;
}

const char *
archive_format_string(enum archive_format f)
{
	size_t i;

	for (i = 0; i < NFORMATS; i++)
		if (formats[i].fmt == f)
			return formats[i].name;
	return "unknown";
}

const char *
archive_format_suffix(enum archive_format f)
{
	size_t i;

	for (i = 0; i < NFORMATS; i++)
		if (formats[i].fmt == f)
			return formats[i].suffix;
	return "";
}

void
arc_errf(char *err, size_t errlen, const char *entry, const char *fmt, ...)
{
	static const char hex[] = "0123456789abcdef";
	size_t off = 0;
	va_list ap;

	if (errlen == 0)
		return;
	err[0] = '\0';
	if (entry != NULL) {
		const unsigned char *p;

		/* Room for the widest byte (\xNN) and the closing quote. */
		if (off + 1 < errlen)
			err[off++] = '"';
		for (p = (const unsigned char *)entry; *p != '\0'; p++) {
			if (off + 6 >= errlen)
				break;
			if (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\') {
				err[off++] = (char)*p;
				continue;
			}
			err[off++] = '\\';
			err[off++] = 'x';
			err[off++] = hex[*p >> 4];
			err[off++] = hex[*p & 0xf];
		}
		if (off + 3 < errlen) {
			memcpy(err + off, "\": ", 3);
			off += 3;
		}
		err[off < errlen ? off : errlen - 1] = '\0';
	}
	va_start(ap, fmt);
	vsnprintf(err + off, errlen - off, fmt, ap);
	va_end(ap);
	/* libarchive's and strerror's messages are one line, but make sure. */
	for (; err[off] != '\0'; off++)
		if (err[off] == '\n' || err[off] == '\r')
			err[off] = ' ';
}

int
arc_open_regular(const char *dir, const char *rel, struct stat *sb,
    const char *why, char *err, size_t errlen)
{
	char *path = xasprintf("%s/%s", dir, rel);
	int fd;

	if (lstat(path, sb) == -1) {
		arc_errf(err, errlen, rel, "%s", strerror(errno));
		free(path);
		return -1;
	}
	if (!S_ISREG(sb->st_mode)) {
		arc_errf(err, errlen, rel, "not a regular file (%s)", why);
		free(path);
		return -1;
	}
	/*
	 * The file may have been swapped for a symlink or FIFO since the
	 * lstat; O_NOFOLLOW and O_NONBLOCK make that an error, not a read
	 * outside the project or a hang, and fstat tells what was opened.
	 */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	free(path);
	if (fd == -1 || fstat(fd, sb) == -1) {
		arc_errf(err, errlen, rel, "cannot open: %s", strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	if (!S_ISREG(sb->st_mode)) {
		arc_errf(err, errlen, rel, "not a regular file (%s)", why);
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * gitlab-runner's gzip header strings: as they are when plain ASCII
 * without '%', else "e:" and the bytes percent-escaped, so that a reader
 * can tell an escaped name from a name and undo it.
 */
static char *
gzip_header_string(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p;
	char *out, *o;

	for (p = (const unsigned char *)s; *p != '\0'; p++)
		if (*p < 0x20 || *p >= 0x7f || *p == '%')
			break;
	if (*p == '\0')
		return xstrdup(s);
	o = out = xmalloc(2 + 3 * strlen(s) + 1);
	*o++ = 'e';
	*o++ = ':';
	for (p = (const unsigned char *)s; *p != '\0'; p++) {
		if (*p < 0x20 || *p >= 0x7f || *p == '%') {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 0xf];
		} else
			*o++ = (char)*p;
	}
	*o = '\0';
	return out;
}

/* Copy fd to out until EOF through deflate (z) or as it is (z == NULL). */
static int
pump(int in, int out, z_stream *z, const char *rel, uint64_t *bytes,
    char *err, size_t errlen)
{
	unsigned char *ibuf = xmalloc(ARC_CHUNK), *obuf = xmalloc(ARC_CHUNK);
	int rc = -1, zrc = Z_OK, flush;
	ssize_t n;

	for (;;) {
		if ((n = read(in, ibuf, ARC_CHUNK)) == -1) {
			if (errno == EINTR)
				continue;
			arc_errf(err, errlen, rel, "read: %s", strerror(errno));
			goto out;
		}
		*bytes += (uint64_t)n;
		if (z == NULL) {
			if (n > 0 && fd_write_all(out, ibuf, (size_t)n) == -1)
				goto write_failed;
		} else {
			flush = n == 0 ? Z_FINISH : Z_NO_FLUSH;
			z->next_in = ibuf;
			z->avail_in = (uInt)n;
			do {
				z->next_out = obuf;
				z->avail_out = ARC_CHUNK;
				if ((zrc = deflate(z, flush)) == Z_STREAM_ERROR) {
					arc_errf(err, errlen, rel, "deflate failed");
					goto out;
				}
				if (fd_write_all(out, obuf, ARC_CHUNK - z->avail_out) == -1)
					goto write_failed;
			} while (z->avail_out == 0);
		}
		if (n == 0)
			break;
	}
	if (z != NULL && zrc != Z_STREAM_END) {
		arc_errf(err, errlen, rel, "deflate did not finish");
		goto out;
	}
	rc = 0;
	goto out;
write_failed:
	arc_errf(err, errlen, NULL, "writing the archive: %s", strerror(errno));
out:
	free(ibuf);
	free(obuf);
	return rc;
}

static int
gzip_member(int out, const char *dir, const char *rel, struct archive_stats *st,
    char *err, size_t errlen)
{
	const char *base = strrchr(rel, '/');
	char *name, *comment;
	struct stat sb;
	gz_header h;
	z_stream z;
	int fd, rc = -1;

	if ((fd = arc_open_regular(dir, rel, &sb, "gzip takes regular files only",
	    err, errlen)) == -1)
		return -1;
	name = gzip_header_string(base != NULL ? base + 1 : rel);
	comment = gzip_header_string(rel);
	memset(&z, 0, sizeof(z));
	memset(&h, 0, sizeof(h));
	h.name = (Bytef *)name;
	h.comment = (Bytef *)comment;
	h.time = (uLong)sb.st_mtime;
	h.os = 3;	/* Unix, as gzip(1) writes */
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
	    Z_DEFAULT_STRATEGY) != Z_OK) {
		arc_errf(err, errlen, rel, "deflateInit2 failed");
		goto out;
	}
	if (deflateSetHeader(&z, &h) != Z_OK)
		arc_errf(err, errlen, rel, "deflateSetHeader failed");
	else if (pump(fd, out, &z, rel, &st->bytes, err, errlen) == 0) {
		st->entries++;
		rc = 0;
	}
	deflateEnd(&z);
out:
	free(name);
	free(comment);
	close(fd);
	return rc;
}

static int
write_gzip(int fd, const char *dir, char *const *files, struct archive_stats *st,
    char *err, size_t errlen)
{
	size_t i;

	for (i = 0; files != NULL && files[i] != NULL; i++)
		if (gzip_member(fd, dir, files[i], st, err, errlen) == -1)
			return -1;
	return 0;
}

static int
write_raw(int fd, const char *dir, char *const *files, struct archive_stats *st,
    char *err, size_t errlen)
{
	struct stat sb;
	size_t n = 0;
	int in, rc;

	while (files != NULL && files[n] != NULL)
		n++;
	if (n != 1) {
		arc_errf(err, errlen, NULL, "raw format takes exactly one file, got %zu", n);
		return -1;
	}
	if ((in = arc_open_regular(dir, files[0], &sb,
	    "raw format takes a regular file", err, errlen)) == -1)
		return -1;
	rc = pump(in, fd, NULL, files[0], &st->bytes, err, errlen);
	close(in);
	if (rc == 0)
		st->entries = 1;
	return rc;
}

int
archive_write(int fd, enum archive_format fmt, const char *dir,
    char *const *files, struct archive_stats *st, char *err, size_t errlen)
{
	struct archive_stats dummy;

	if (st == NULL)
		st = &dummy;
	memset(st, 0, sizeof(*st));
	if (errlen > 0)
		err[0] = '\0';
	switch (fmt) {
	case ARCHIVE_ZIP:
		return arc_write_zip(fd, dir, files, st, err, errlen);
	case ARCHIVE_GZIP:
		return write_gzip(fd, dir, files, st, err, errlen);
	case ARCHIVE_RAW:
		return write_raw(fd, dir, files, st, err, errlen);
	}
	arc_errf(err, errlen, NULL, "unknown archive format %d", (int)fmt);
	return -1;
}

/*
 * Zip through libarchive: the writer (one entry per file, directory and
 * symlink, streamed) and the extractor.
 *
 * Extraction first reads every header without writing anything: every
 * name, every symlink target, and the sizes the central directory gives,
 * against the limits and against the free space of the destination.  Only
 * an archive that passes is read again, inflated once, and written into a
 * staging directory (archive_stage.c), with the limits now counted on the
 * bytes that really come out.  A CRC error, a short write or a full disk
 * then costs the staging directory; the destination sees the entries only
 * once all of them are whole.
 */
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "helpers/archive.h"
#include "helpers/archive_impl.h"
#include "lib/buf.h"
#include "lib/size.h"
#include "lib/xmalloc.h"

/* Symlink hops one target may take before it counts as a loop (ELOOP's 40). */
#define MAX_HOPS	40

/* ---- Writing ---- */

static char *
read_link(const char *path, const struct stat *sb)
{
	size_t size = sb->st_size > 0 ? (size_t)sb->st_size + 1 : PATH_MAX;
	char *target;
	ssize_t n;

	/* A link may change under us; grow until readlink fits. */
	for (;;) {
		target = xmalloc(size);
		if ((n = readlink(path, target, size)) == -1) {
			free(target);
			return NULL;
		}
		if ((size_t)n < size) {
			target[n] = '\0';
			return target;
		}
		free(target);
		size *= 2;
	}
}

static int
zip_file_data(struct archive *a, int fd, const char *rel, int64_t size,
    char *err, size_t errlen)
{
	char *chunk = xmalloc(ARC_CHUNK);
	int64_t left = size;
	ssize_t n;
	int rc = -1;

	/* Exactly the size the header announced, even if the file grows. */
	while (left > 0) {
		n = read(fd, chunk, left < ARC_CHUNK ? (size_t)left : ARC_CHUNK);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			arc_errf(err, errlen, rel, "read: %s", strerror(errno));
			goto out;
		}
		if (n == 0) {
			arc_errf(err, errlen, rel, "file shrank while being archived");
			goto out;
		}
		if (archive_write_data(a, chunk, (size_t)n) != n) {
			arc_errf(err, errlen, rel, "%s", archive_error_string(a));
			goto out;
		}
		left -= n;
	}
	rc = 0;
out:
	free(chunk);
	return rc;
}

static int
zip_entry(struct archive *a, const char *dir, const char *rel,
    struct archive_stats *st, char *err, size_t errlen)
{
	char *path = xasprintf("%s/%s", dir, rel), *target = NULL;
	struct archive_entry *e = archive_entry_new();
	struct stat sb;
	int fd = -1, rc = -1, r;

	if (lstat(path, &sb) == -1) {
		arc_errf(err, errlen, rel, "%s", strerror(errno));
		goto out;
	}
	if (S_ISREG(sb.st_mode)) {
		if ((fd = arc_open_regular(dir, rel, &sb, "it changed type",
		    err, errlen)) == -1)
			goto out;
	} else if (S_ISLNK(sb.st_mode)) {
		if ((target = read_link(path, &sb)) == NULL) {
			arc_errf(err, errlen, rel, "readlink: %s", strerror(errno));
			goto out;
		}
	} else if (!S_ISDIR(sb.st_mode)) {
		arc_errf(err, errlen, rel, "not a file, directory or symlink; "
		    "zip takes only those");
		goto out;
	}
	/* Size from stat: libarchive picks ZIP64 for the entry from it. */
	archive_entry_copy_stat(e, &sb);
	archive_entry_set_pathname(e, rel);
	if (target != NULL)
		archive_entry_set_symlink(e, target);
	if (!S_ISREG(sb.st_mode))
		archive_entry_set_size(e, 0);
	if ((r = archive_write_header(a, e)) != ARCHIVE_OK && r != ARCHIVE_WARN) {
		arc_errf(err, errlen, rel, "%s", archive_error_string(a));
		goto out;
	}
	if (fd != -1 && zip_file_data(a, fd, rel, sb.st_size, err, errlen) == -1)
		goto out;
	st->entries++;
	if (fd != -1)
		st->bytes += (uint64_t)sb.st_size;
	rc = 0;
out:
	if (fd != -1)
		close(fd);
	archive_entry_free(e);
	free(target);
	free(path);
	return rc;
}

int
arc_write_zip(int fd, const char *dir, char *const *files,
    struct archive_stats *st, char *err, size_t errlen)
{
	struct archive *a = archive_write_new();
	int rc = -1;
	size_t i;

	if (archive_write_set_format_zip(a) != ARCHIVE_OK ||
	    archive_write_zip_set_compression_deflate(a) != ARCHIVE_OK ||
	    /* No padding after the end of central directory. */
	    archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
	    archive_write_open_fd(a, fd) != ARCHIVE_OK) {
		arc_errf(err, errlen, NULL, "zip: %s", archive_error_string(a));
		goto out;
	}
	for (i = 0; files != NULL && files[i] != NULL; i++)
		if (zip_entry(a, dir, files[i], st, err, errlen) == -1)
			goto out;
	/* The central directory is written here; a full disk shows here. */
	if (archive_write_close(a) != ARCHIVE_OK) {
		arc_errf(err, errlen, NULL, "writing the archive: %s",
		    archive_error_string(a));
		goto out;
	}
	rc = 0;
out:
	archive_write_free(a);
	return rc;
}

/* ---- Reading: names and symlinks ---- */

/*
 * The entry name as a clean relative path ("a/b", no "", "." or trailing
 * '/'), or why it is refused.  "" comes back for "." and "./".
 */
static const char *
clean_name(const char *name, struct buf *out)
{
	const char *p, *end;
	size_t len;

	buf_reset(out);
	if (*name == '\0')
		return "empty path";
	if (*name == '/')
		return "path is absolute";
	for (p = name; *p != '\0'; p = *end == '/' ? end + 1 : end) {
		end = strchrnul(p, '/');
		len = (size_t)(end - p);
		if (len == 0 || (len == 1 && p[0] == '.'))
			continue;
		if (len == 2 && p[0] == '.' && p[1] == '.')
			return "path leads out of the destination";
		if (out->len > 0)
			buf_putc(out, '/');
		buf_append(out, p, len);
	}
	return NULL;
}

/* The archive's symlinks by clean path: a small open-addressing hash map. */
struct links {
	char	**path;		/* cap slots, NULL when free */
	char	**target;
	size_t	  cap, n;
};

static size_t
hash(const char *s)
{
	size_t h = 14695981039346656037ULL;

	while (*s != '\0')
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return h;
}

static const char *
links_get(const struct links *l, const char *path)
{
	size_t i;

	if (l->cap == 0)
		return NULL;
	for (i = hash(path) & (l->cap - 1); l->path[i] != NULL; i = (i + 1) & (l->cap - 1))
		if (strcmp(l->path[i], path) == 0)
			return l->target[i];
	return NULL;
}

static void
links_put(struct links *l, const char *path, const char *target)
{
	size_t i;

	if (2 * (l->n + 1) > l->cap) {
		struct links bigger = { NULL, NULL, l->cap == 0 ? 64 : 2 * l->cap, 0 };

		bigger.path = xcalloc(bigger.cap, sizeof(char *));
		bigger.target = xcalloc(bigger.cap, sizeof(char *));
		for (i = 0; i < l->cap; i++) {
			if (l->path[i] == NULL)
				continue;
			links_put(&bigger, l->path[i], l->target[i]);
			free(l->path[i]);
			free(l->target[i]);
		}
		free(l->path);
		free(l->target);
		*l = bigger;
	}
	for (i = hash(path) & (l->cap - 1); l->path[i] != NULL; i = (i + 1) & (l->cap - 1)) {
		if (strcmp(l->path[i], path) == 0) {
			/* A later entry of the same name replaces the earlier. */
			free(l->target[i]);
			l->target[i] = xstrdup(target);
			return;
		}
	}
	l->path[i] = xstrdup(path);
	l->target[i] = xstrdup(target);
	l->n++;
}

static void
links_free(struct links *l)
{
	size_t i;

	for (i = 0; i < l->cap; i++) {
		free(l->path[i]);
		free(l->target[i]);
	}
	free(l->path);
	free(l->target);
	memset(l, 0, sizeof(*l));
}

/*
 * The symlink at prefix (clean, relative to dest), if any: the archive's
 * own first, then one already on disk.  An absolute target comes back as
 * it is, for the caller to refuse.
 */
static char *
link_at(const struct links *l, const char *dest, const char *prefix)
{
	const char *t;
	struct stat sb;
	char *path, *target = NULL;

	if ((t = links_get(l, prefix)) != NULL)
		return xstrdup(t);
	path = xasprintf("%s/%s", dest, prefix);
	if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode))
		if ((target = read_link(path, &sb)) == NULL)
			target = xstrdup("/");	/* unreadable: refuse */
	free(path);
	return target;
}

/*
 * Does the symlink at lpath with target stay inside dest?  Resolved as the
 * kernel would, but on names: ".." pops a component, and a component that
 * is itself a symlink (in the archive or on disk) is replaced by its
 * target, so "b -> a/.." with "a -> ." is seen for what it is.
 */
static const char *
link_stays_inside(const struct links *l, const char *dest, const char *lpath,
    const char *target)
{
	const char *slash = strrchr(lpath, '/'), *why = NULL, *p, *end;
	struct buf at, rest;
	char *hop;
	int hops = 0;
	size_t len;

	if (*target == '\0')
		return "symlink has an empty target";
	if (*target == '/')
		return "symlink target is absolute";
	buf_init(&at, BUF_UNLIMITED);
	buf_init(&rest, BUF_UNLIMITED);
	if (slash != NULL)
		buf_append(&at, lpath, (size_t)(slash - lpath));
	buf_puts(&rest, target);
again:
	for (p = rest.ptr; *p != '\0'; p = *end == '/' ? end + 1 : end) {
		end = strchrnul(p, '/');
		len = (size_t)(end - p);
		if (len == 0 || (len == 1 && p[0] == '.'))
			continue;
		if (len == 2 && p[0] == '.' && p[1] == '.') {
			char *up;

			if (at.len == 0) {
				why = "symlink leads out of the destination";
				goto out;
			}
			up = strrchr(at.ptr, '/');
			at.len = up != NULL ? (size_t)(up - at.ptr) : 0;
			at.ptr[at.len] = '\0';
			continue;
		}
		if (at.len > 0)
			buf_putc(&at, '/');
		buf_append(&at, p, len);
		if ((hop = link_at(l, dest, at.ptr)) == NULL)
			continue;
		if (++hops > MAX_HOPS || *hop == '/') {
			why = hops > MAX_HOPS ? "too many levels of symlinks" :
			    "symlink leads through an absolute symlink";
			free(hop);
			goto out;
		}
		/* Go back to the link's directory and walk its target first. */
		{
			char *up = strrchr(at.ptr, '/'), *remaining;

			at.len = up != NULL ? (size_t)(up - at.ptr) : 0;
			at.ptr[at.len] = '\0';
			remaining = xasprintf("%s/%s", hop, end);
			buf_reset(&rest);
			buf_puts(&rest, remaining);
			free(remaining);
		}
		free(hop);
		goto again;
	}
out:
	buf_release(&at);
	buf_release(&rest);
	return why;
}

/* The first proper prefix of name that is a symlink, or NULL. */
static char *
through_link(const struct links *l, const char *dest, const char *name)
{
	const char *slash;
	char *prefix, *target;

	for (slash = strchr(name, '/'); slash != NULL; slash = strchr(slash + 1, '/')) {
		prefix = xmemdup(name, (size_t)(slash - name));
		if ((target = link_at(l, dest, prefix)) != NULL) {
			free(target);
			return prefix;
		}
		free(prefix);
	}
	return NULL;
}

/* ---- Reading: the check, then the extraction ---- */

struct extract {
	const char			*zip;	/* the archive, for messages */
	const char			*dest;	/* the destination, no symlinks */
	const struct archive_limits	*lim;
	struct archive_stats		 st;
	struct links			 links;
	struct buf			 name;	/* the current entry, clean */
	struct buf			 raw;	/* and as the archive has it */
	char				*err;
	size_t				 errlen;
};

static void
corrupt(struct extract *x, const char *entry, struct archive *a)
{
	const char *msg = archive_error_string(a);
	char why[512];

	arc_errf(why, sizeof(why), entry, "%s", msg != NULL ? msg : "unknown error");
	arc_errf(x->err, x->errlen, NULL, "%s: truncated or corrupt: %s", x->zip, why);
}

/*
 * Only the seekable reader: it works from the central directory, so a
 * truncated archive is refused as a whole instead of yielding the entries
 * before the cut, and every entry's size is known before its data.
 */
static struct archive *
open_zip(struct extract *x)
{
	struct archive *r = archive_read_new();
	struct stat sb;

	archive_read_support_format_zip_seekable(r);
	if (stat(x->zip, &sb) == -1) {
		arc_errf(x->err, x->errlen, NULL, "%s: %s", x->zip, strerror(errno));
		archive_read_free(r);
		return NULL;
	}
	if (archive_read_open_filename(r, x->zip, ARC_CHUNK) != ARCHIVE_OK) {
		corrupt(x, NULL, r);
		archive_read_free(r);
		return NULL;
	}
	return r;
}

/*
 * The next entry with its name checked and cleaned into x->name: 1, or 0
 * at the end, or -1 with err set.
 */
static int
next_entry(struct extract *x, struct archive *r, struct archive_entry **e,
    const char **raw)
{
	const char *why;
	int rc, type;

	if ((rc = archive_read_next_header(r, e)) == ARCHIVE_EOF)
		return 0;
	if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
		corrupt(x, NULL, r);
		return -1;
	}
	if ((*raw = archive_entry_pathname(*e)) == NULL) {
		arc_errf(x->err, x->errlen, NULL, "%s: an entry's name cannot be read",
		    x->zip);
		return -1;
	}
	/* A copy: the string goes with the entry at the next header. */
	buf_reset(&x->raw);
	buf_puts(&x->raw, *raw);
	*raw = x->raw.ptr;
	if ((why = clean_name(*raw, &x->name)) != NULL) {
		arc_errf(x->err, x->errlen, *raw, "%s", why);
		return -1;
	}
	type = archive_entry_filetype(*e);
	if (archive_entry_hardlink(*e) != NULL ||
	    (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)) {
		arc_errf(x->err, x->errlen, *raw,
		    "not a file, directory or symlink");
		return -1;
	}
	/* "./" names the destination itself; anything else needs a name. */
	if (x->name.len == 0 && type != AE_IFDIR) {
		arc_errf(x->err, x->errlen, *raw, "empty path");
		return -1;
	}
	x->st.entries++;
	if (x->lim->max_entries != 0 && x->st.entries > x->lim->max_entries) {
		arc_errf(x->err, x->errlen, *raw,
		    "more than %llu entries in the archive, the limit",
		    (unsigned long long)x->lim->max_entries);
		return -1;
	}
	return 1;
}

static int
count_bytes(struct extract *x, const char *raw, uint64_t n)
{
	/* Sizes from a header may be anything: saturate, never wrap. */
	x->st.bytes = n > UINT64_MAX - x->st.bytes ? UINT64_MAX : x->st.bytes + n;
	if (x->lim->max_bytes != 0 && x->st.bytes > x->lim->max_bytes) {
		arc_errf(x->err, x->errlen, raw,
		    "more than %llu bytes uncompressed in the archive, the limit",
		    (unsigned long long)x->lim->max_bytes);
		return -1;
	}
	return 0;
}

/* The size the central directory gives a regular file, or -1. */
static int64_t
declared_size(struct archive_entry *e)
{
	if (archive_entry_filetype(e) != AE_IFREG || !archive_entry_size_is_set(e))
		return -1;
	return archive_entry_size(e) >= 0 ? archive_entry_size(e) : -1;
}

/*
 * Pass 1, headers only: names, types, symlinks and the limits on what the
 * central directory declares, so that a refused archive costs no inflating
 * and no writing.  x->st.bytes ends as the declared total.
 */
static int
check_archive(struct extract *x)
{
	struct archive *r;
	struct archive_entry *e;
	const char *raw, *target, *why;
	char *link;
	int64_t size;
	int rc = -1, more;
	size_t i;

	if ((r = open_zip(x)) == NULL)
		return -1;
	while ((more = next_entry(x, r, &e, &raw)) == 1) {
		if ((link = through_link(&x->links, x->dest, x->name.ptr)) != NULL) {
			arc_errf(x->err, x->errlen, raw,
			    "path leads through the symlink %s", link);
			free(link);
			goto out;
		}
		if (archive_entry_filetype(e) == AE_IFLNK) {
			if ((target = archive_entry_symlink(e)) == NULL)
				target = "";
			links_put(&x->links, x->name.ptr, target);
		}
		if ((size = declared_size(e)) > 0 &&
		    count_bytes(x, raw, (uint64_t)size) == -1)
			goto out;
	}
	if (more == -1)
		goto out;
	/* With every symlink known, so that their order does not matter. */
	for (i = 0; i < x->links.cap; i++) {
		if (x->links.path[i] == NULL)
			continue;
		if ((why = link_stays_inside(&x->links, x->dest, x->links.path[i],
		    x->links.target[i])) != NULL) {
			arc_errf(x->err, x->errlen, x->links.path[i], "%s", why);
			goto out;
		}
	}
	rc = 0;
out:
	archive_read_free(r);
	return rc;
}

/*
 * Will the declared bytes fit?  A file system that runs full half-way is
 * still caught by the writes; this refuses, before anything is written,
 * what cannot fit at all.
 */
static int
check_space(struct extract *x)
{
	struct statvfs vfs;
	uint64_t avail;
	char need[32], have[32];

	if (statvfs(x->dest, &vfs) == -1) {
		arc_errf(x->err, x->errlen, NULL, "%s: %s", x->dest, strerror(errno));
		return -1;
	}
	avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	if (x->st.bytes <= avail)
		return 0;
	size_format(x->st.bytes, need, sizeof(need));
	size_format(avail, have, sizeof(have));
	arc_errf(x->err, x->errlen, NULL, "%s: needs %s, %s free in %s", x->zip,
	    need, have, x->dest);
	return -1;
}

/*
 * The bytes of a regular file, counted on what really comes out: an entry
 * that inflates past the size it declared is refused at once, so the check
 * of the free space above holds for every byte written.
 */
static int
copy_data(struct extract *x, struct archive *r, struct arc_stage *s,
    struct archive_entry *e, const char *raw)
{
	const void *block;
	size_t size;
	la_int64_t off;
	int64_t declared = declared_size(e);
	int rc;

	while ((rc = archive_read_data_block(r, &block, &size, &off)) == ARCHIVE_OK) {
		if (count_bytes(x, raw, size) == -1)
			return -1;
		if (declared >= 0 && off + (int64_t)size > declared) {
			arc_errf(x->err, x->errlen, raw, "more data than the %lld bytes "
			    "the archive declares", (long long)declared);
			return -1;
		}
		if (arc_stage_write(s, block, size, off, x->err, x->errlen) == -1)
			return -1;
	}
	if (rc != ARCHIVE_EOF) {
		corrupt(x, raw, r);
		return -1;
	}
	return 0;
}

/*
 * Pass 2: the archive again, inflated once and written into the staging
 * directory.  A CRC or truncation error shows here and costs only the
 * staging directory.
 */
static int
extract_archive(struct extract *x, struct arc_stage *s)
{
	struct archive *r;
	struct archive_entry *e;
	struct timespec mtime;
	const char *raw, *target;
	mode_t perm;
	int rc = -1, more, w;

	if ((r = open_zip(x)) == NULL)
		return -1;
	memset(&x->st, 0, sizeof(x->st));
	while ((more = next_entry(x, r, &e, &raw)) == 1) {
		if (x->name.len == 0)
			continue;
		/* Not set-id programs from the network, even our own uid's. */
		perm = archive_entry_perm(e) & ~(S_ISUID | S_ISGID);
		mtime.tv_sec = archive_entry_mtime(e);
		mtime.tv_nsec = archive_entry_mtime_nsec(e);
		switch (archive_entry_filetype(e)) {
		case AE_IFDIR:
			w = arc_stage_dir(s, x->name.ptr, raw, perm, &mtime, x->err, x->errlen);
			break;
		case AE_IFLNK:
			if ((target = archive_entry_symlink(e)) == NULL)
				target = "";
			w = arc_stage_symlink(s, x->name.ptr, raw, target, &mtime,
			    x->err, x->errlen);
			break;
		default:
			/* On a failure the open file goes with the stage. */
			if ((w = arc_stage_file(s, x->name.ptr, raw, x->err, x->errlen)) == 0 &&
			    (w = copy_data(x, r, s, e, raw)) == 0)
				w = arc_stage_file_done(s, perm, &mtime, x->err, x->errlen);
		}
		if (w == -1)
			goto out;
	}
	if (more == -1)
		goto out;
	rc = 0;
out:
	archive_read_free(r);
	return rc;
}

int
archive_extract_zip(const char *path, const char *dir,
    const struct archive_limits *lim, struct archive_stats *st,
    char *err, size_t errlen)
{
	static const struct archive_limits unlimited;
	struct arc_stage *stage = NULL;
	struct extract x;
	struct stat sb;
	char *dest;
	int rc = -1;

	if (st != NULL)
		memset(st, 0, sizeof(*st));
	if (errlen > 0)
		err[0] = '\0';
	/* Without symlinks in it, the checks have only the entries to judge. */
	if ((dest = realpath(dir, NULL)) == NULL || stat(dest, &sb) == -1 ||
	    !S_ISDIR(sb.st_mode)) {
		arc_errf(err, errlen, NULL, "%s: %s", dir,
		    dest == NULL ? strerror(errno) : "not a directory");
		free(dest);
		return -1;
	}
	memset(&x, 0, sizeof(x));
	x.zip = path;
	x.dest = dest;
	x.lim = lim != NULL ? lim : &unlimited;
	x.err = err;
	x.errlen = errlen;
	buf_init(&x.name, BUF_UNLIMITED);
	buf_init(&x.raw, BUF_UNLIMITED);
	if (check_archive(&x) == 0 && check_space(&x) == 0 &&
	    (stage = arc_stage_new(dest, err, errlen)) != NULL &&
	    extract_archive(&x, stage) == 0 &&
	    arc_stage_commit(stage, err, errlen) == 0)
		rc = 0;
	/* After a failure this removes everything the extraction wrote. */
	arc_stage_free(stage);
	if (rc == 0 && st != NULL) {
		st->entries = x.st.entries;
		st->bytes = x.st.bytes;
	}
	links_free(&x.links);
	buf_release(&x.name);
	buf_release(&x.raw);
	free(dest);
	return rc;
}

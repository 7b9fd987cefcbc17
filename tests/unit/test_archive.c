/*
 * Unit tests for archive.h: zip, gzip and raw written from a tree and
 * checked with the standard tools (unzip, gzip) and zlib; zip extraction
 * round trips; and hostile or broken archives, each of which must leave the
 * destination exactly as it was (compared by a full listing).
 *
 * Hostile archives are made here with libarchive's writer, which takes any
 * name.  The >4 GiB entry runs only with RUNNER_SLOW_TESTS=1.
 */
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include <archive.h>
#include <archive_entry.h>

#include "helpers/archive.h"
#include "lib/buf.h"
#include "lib/xmalloc.h"

#define MTIME	1600000000

static char root[] = "/tmp/test_archive.XXXXXX";

/* ---- helpers ---- */

static char *
at(const char *rel)
{
	return xasprintf("%s/%s", root, rel);
}

static int
sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int
sh(const char *fmt, ...)
{
	va_list ap;
	char *cmd;
	int rc;

	va_start(ap, fmt);
	assert_true(vasprintf(&cmd, fmt, ap) >= 0);
	va_end(ap);
	rc = system(cmd);
	free(cmd);
	return rc == -1 ? -1 : WEXITSTATUS(rc);
}

static char *
capture(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *
capture(const char *fmt, ...)
{
	char chunk[4096], *cmd;
	struct buf out;
	va_list ap;
	size_t n;
	FILE *p;

	va_start(ap, fmt);
	assert_true(vasprintf(&cmd, fmt, ap) >= 0);
	va_end(ap);
	assert_non_null(p = popen(cmd, "r"));
	buf_init(&out, BUF_UNLIMITED);
	while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
		buf_append(&out, chunk, n);
	pclose(p);
	free(cmd);
	return buf_detach(&out, NULL);
}

static void
put(const char *rel, const char *data, mode_t mode)
{
	char *path = at(rel);
	struct timespec ts[2] = { { MTIME, 0 }, { MTIME, 0 } };
	int fd;

	assert_true((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600)) >= 0);
	assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	assert_int_equal(fchmod(fd, mode), 0);
	assert_int_equal(futimens(fd, ts), 0);
	close(fd);
	free(path);
}

static void
mkdir_at(const char *rel)
{
	char *path = at(rel);

	assert_int_equal(mkdir(path, 0755), 0);
	free(path);
}

static char *
slurp(const char *path, size_t *len)
{
	char chunk[4096];
	struct buf b;
	ssize_t n;
	int fd;

	assert_true((fd = open(path, O_RDONLY)) >= 0);
	buf_init(&b, BUF_UNLIMITED);
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		buf_append(&b, chunk, (size_t)n);
	close(fd);
	return buf_detach(&b, len);
}

/* Write dir's files in fmt to out (relative to root); the rc and err. */
static int
write_to(const char *out, enum archive_format fmt, const char *dir,
    char *const *files, struct archive_stats *st, char *err, size_t errlen)
{
	char *path = at(out), *src = at(dir);
	int fd, rc;

	assert_true((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600)) >= 0);
	rc = archive_write(fd, fmt, src, files, st, err, errlen);
	close(fd);
	free(path);
	free(src);
	return rc;
}

/* Everything about dir that extraction could change, one line a path. */
static char *
listing(const char *dir)
{
	return capture("cd '%s/%s' && find . -printf '%%p %%y %%m %%s %%T@ %%l\\n' "
	    "| sort && find . -type f -exec cat {} + | md5sum", root, dir);
}

enum { F, D, L, ZEROS };

struct hentry {
	const char	*name;
	int		 type;
	const char	*data;	/* file contents or link target */
	size_t		 size;	/* ZEROS: that many zero bytes */
};

/* A zip with exactly these entries, names unchecked. */
static void
make_zip(const char *rel, const struct hentry *h, size_t n, bool store)
{
	struct archive *a = archive_write_new();
	struct archive_entry *e;
	char *path = at(rel), *zeros = xcalloc(1, 1 << 20);
	size_t i, left;

	assert_int_equal(archive_write_set_format_zip(a), ARCHIVE_OK);
	if (store)
		archive_write_zip_set_compression_store(a);
	archive_write_set_bytes_in_last_block(a, 1);
	assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
	for (i = 0; i < n; i++) {
		e = archive_entry_new();
		archive_entry_set_pathname(e, h[i].name);
		archive_entry_set_mtime(e, MTIME, 0);
		switch (h[i].type) {
		case D:
			archive_entry_set_filetype(e, AE_IFDIR);
			archive_entry_set_perm(e, 0755);
			break;
		case L:
			archive_entry_set_filetype(e, AE_IFLNK);
			archive_entry_set_perm(e, 0777);
			archive_entry_set_symlink(e, h[i].data);
			break;
		default:
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_perm(e, 0644);
			archive_entry_set_size(e, h[i].type == ZEROS ? (la_int64_t)h[i].size :
			    (la_int64_t)strlen(h[i].data));
		}
		assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
		if (h[i].type == F)
			archive_write_data(a, h[i].data, strlen(h[i].data));
		for (left = h[i].type == ZEROS ? h[i].size : 0; left > 0; ) {
			size_t k = left < (1 << 20) ? left : (1 << 20);

			assert_int_equal(archive_write_data(a, zeros, k), (la_ssize_t)k);
			left -= k;
		}
		archive_entry_free(e);
	}
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	free(zeros);
	free(path);
}

/* A fresh destination "dest" with a file, a directory and a file in it. */
static void
fresh_dest(void)
{
	assert_int_equal(sh("rm -rf '%s/dest' '%s/outside'", root, root), 0);
	mkdir_at("dest");
	mkdir_at("outside");
	mkdir_at("dest/sub");
	put("dest/keep", "keep me\n", 0644);
	put("dest/sub/also", "me too\n", 0600);
}

/*
 * Extracting zip into dest must fail with an error containing want and
 * leave dest and outside exactly as they were.
 */
static void
refused(const char *zip, const struct archive_limits *lim, const char *want)
{
	char *before, *after, *out_before, *out_after, *path = at(zip), *dest = at("dest");
	struct archive_stats st;
	char err[512];

	before = listing("dest");
	out_before = listing("outside");
	assert_int_equal(archive_extract_zip(path, dest, lim, &st, err, sizeof(err)), -1);
	if (strstr(err, want) == NULL)
		fail_msg("error \"%s\" does not contain \"%s\"", err, want);
	assert_null(strchr(err, '\n'));
	after = listing("dest");
	out_after = listing("outside");
	assert_string_equal(before, after);
	assert_string_equal(out_before, out_after);
	free(before);
	free(after);
	free(out_before);
	free(out_after);
	free(path);
	free(dest);
}

static int
setup(void **state)
{
	(void)state;
	return mkdtemp(root) == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	(void)state;
	/* Extraction may have left read-only directories. */
	return sh("chmod -R u+w '%s'; rm -rf '%s'", root, root);
}

/* ---- formats ---- */

static void
test_format_names(void **state)
{
	enum archive_format f;

	(void)state;
	assert_int_equal(archive_format_parse("zip", &f), 0);
	assert_int_equal(f, ARCHIVE_ZIP);
	assert_int_equal(archive_format_parse("gzip", &f), 0);
	assert_int_equal(f, ARCHIVE_GZIP);
	assert_int_equal(archive_format_parse("raw", &f), 0);
	assert_int_equal(f, ARCHIVE_RAW);
	assert_int_equal(archive_format_parse("tar", &f), -1);
	assert_int_equal(archive_format_parse("ZIP", &f), -1);
	assert_string_equal(archive_format_string(ARCHIVE_GZIP), "gzip");
	assert_string_equal(archive_format_suffix(ARCHIVE_ZIP), ".zip");
	assert_string_equal(archive_format_suffix(ARCHIVE_GZIP), ".gz");
	assert_string_equal(archive_format_suffix(ARCHIVE_RAW), "");
}

/* ---- zip ---- */

static void
make_tree(void)
{
	char *link, *empty;
	struct timespec ts[2] = { { MTIME, 0 }, { MTIME, 0 } };

	assert_int_equal(sh("rm -rf '%s/tree'", root), 0);
	mkdir_at("tree");
	mkdir_at("tree/bin");
	mkdir_at("tree/empty");
	put("tree/bin/run.sh", "#!/bin/sh\necho hi\n", 0755);
	put("tree/readme", "read me\n", 0644);
	link = at("tree/bin/readme.lnk");
	assert_int_equal(symlink("../readme", link), 0);
	free(link);
	empty = at("tree/empty");
	assert_int_equal(utimensat(AT_FDCWD, empty, ts, 0), 0);
	free(empty);
}

static char *const tree_files[] = {
	"bin", "bin/readme.lnk", "bin/run.sh", "empty", "readme", NULL
};

static void
test_zip_round_trip(void **state)
{
	struct archive_stats st;
	char err[512], *zip, *dest, *out, *a, *b;
	struct stat sb;

	(void)state;
	make_tree();
	assert_int_equal(write_to("tree.zip", ARCHIVE_ZIP, "tree", tree_files, &st,
	    err, sizeof(err)), 0);
	assert_int_equal(st.entries, 5);
	assert_int_equal(st.bytes, strlen("#!/bin/sh\necho hi\n") + strlen("read me\n"));

	/* The standard tools accept it and see the modes. */
	assert_int_equal(sh("unzip -tq '%s/tree.zip' >/dev/null", root), 0);
	out = capture("unzip -Z '%s/tree.zip'", root);
	assert_non_null(strstr(out, "-rwxr-xr-x"));
	assert_non_null(strstr(out, "bin/run.sh"));
	assert_non_null(strstr(out, "lrwxrwxrwx"));
	assert_non_null(strstr(out, "empty/"));
	free(out);

	/* And back. */
	assert_int_equal(sh("rm -rf '%s/back'", root), 0);
	mkdir_at("back");
	zip = at("tree.zip");
	dest = at("back");
	assert_int_equal(archive_extract_zip(zip, dest, NULL, &st, err, sizeof(err)), 0);
	assert_int_equal(st.entries, 5);
	assert_int_equal(sh("diff -r --no-dereference '%s/tree' '%s/back'", root, root), 0);
	a = capture("cd '%s/tree' && find . -mindepth 1 -printf '%%p %%y %%m %%Ts %%l\\n' | sort", root);
	b = capture("cd '%s/back' && find . -mindepth 1 -printf '%%p %%y %%m %%Ts %%l\\n' | sort", root);
	/* Symlink times are not kept everywhere; compare the rest. */
	assert_string_equal(a, b);
	free(a);
	free(b);
	a = at("back/bin/run.sh");
	assert_int_equal(lstat(a, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0755);
	assert_int_equal(sb.st_mtime, MTIME);
	assert_int_equal(sb.st_uid, getuid());
	free(a);
	a = at("back/bin/readme.lnk");
	assert_int_equal(lstat(a, &sb), 0);
	assert_true(S_ISLNK(sb.st_mode));
	free(a);

	/* Existing files are replaced. */
	put("back/readme", "old contents that are longer\n", 0600);
	assert_int_equal(archive_extract_zip(zip, dest, NULL, &st, err, sizeof(err)), 0);
	a = at("back/readme");
	b = slurp(a, NULL);
	assert_string_equal(b, "read me\n");
	assert_int_equal(stat(a, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0644);
	free(a);
	free(b);
	free(zip);
	free(dest);
}

static void
test_zip_write_errors(void **state)
{
	char *const missing[] = { "no-such-file", NULL };
	char *const fifo[] = { "fifo", NULL };
	char err[512], *path;

	(void)state;
	mkdir_at("werr");
	assert_int_equal(write_to("werr.zip", ARCHIVE_ZIP, "werr", missing, NULL,
	    err, sizeof(err)), -1);
	assert_non_null(strstr(err, "\"no-such-file\": "));
	path = at("werr/fifo");
	assert_int_equal(mkfifo(path, 0600), 0);
	free(path);
	assert_int_equal(write_to("werr.zip", ARCHIVE_ZIP, "werr", fifo, NULL,
	    err, sizeof(err)), -1);
	assert_non_null(strstr(err, "\"fifo\": not a file, directory or symlink"));
}

static void
push(char ***v, size_t *n, const char *s)
{
	/* Doubling: strv's one-at-a-time growth is quadratic under ASan. */
	if ((*n & (*n + 1)) == 0)
		*v = xreallocarray(*v, 2 * (*n + 1), sizeof(char *));
	(*v)[(*n)++] = s != NULL ? xstrdup(s) : NULL;
}

/*
 * 70 000 entries: more than a zip without ZIP64 can count.  The files are
 * hard links, 1000 to each of 70 files: ext4 makes new inodes slowly right
 * after many were deleted (recently_deleted() in the kernel), which made
 * this test take a minute; links need no new inode (and ext4 allows 65 000
 * links to one).  The reader is checked by the extractor's
 * verifying pass, refusing at one entry under the count, so that nothing is
 * written either.
 */
static void
test_zip_many_entries(void **state)
{
	struct archive_limits one_short = { 0, 70069 };
	struct archive_stats st;
	char err[512], *path, *first, *out, name[64], **files = NULL;
	size_t i, j, n = 0;
	int fd;

	(void)state;
	mkdir_at("many");
	for (i = 0; i < 70; i++) {
		snprintf(name, sizeof(name), "d%02zu", i);
		push(&files, &n, name);
		path = xasprintf("%s/many/%s", root, name);
		assert_int_equal(mkdir(path, 0755), 0);
		free(path);
		first = xasprintf("%s/many/seed%02zu", root, i);
		assert_true((fd = open(first, O_WRONLY | O_CREAT, 0644)) >= 0);
		close(fd);
		for (j = 0; j < 1000; j++) {
			snprintf(name, sizeof(name), "d%02zu/f%03zu", i, j);
			push(&files, &n, name);
			path = xasprintf("%s/many/%s", root, name);
			assert_int_equal(link(first, path), 0);
			free(path);
		}
		free(first);
	}
	push(&files, &n, NULL);
	assert_int_equal(write_to("many.zip", ARCHIVE_ZIP, "many", files, &st,
	    err, sizeof(err)), 0);
	assert_int_equal(st.entries, 70070);
	out = capture("unzip -l '%s/many.zip' | tail -1", root);
	assert_non_null(strstr(out, "70070 files"));
	free(out);

	fresh_dest();
	refused("many.zip", &one_short, "more than 70069 entries");
	for (i = 0; i < n; i++)
		free(files[i]);
	free(files);
	assert_int_equal(sh("rm -rf '%s/many' '%s/many.zip'", root, root), 0);
}

/* An entry over 4 GiB (sparse, so cheap on disk): ZIP64 sizes. */
static void
test_zip_big_entry(void **state)
{
	char *const files[] = { "big", NULL };
	struct archive_stats st;
	char err[512], *path, *out;
	int fd;

	(void)state;
	if (getenv("RUNNER_SLOW_TESTS") == NULL ||
	    strcmp(getenv("RUNNER_SLOW_TESTS"), "1") != 0)
		skip();
	mkdir_at("bigdir");
	path = at("bigdir/big");
	assert_true((fd = open(path, O_WRONLY | O_CREAT, 0644)) >= 0);
	assert_int_equal(ftruncate(fd, (off_t)5 << 30), 0);
	assert_int_equal(pwrite(fd, "end", 3, ((off_t)5 << 30) - 3), 3);
	close(fd);
	free(path);
	assert_int_equal(write_to("big.zip", ARCHIVE_ZIP, "bigdir", files, &st,
	    err, sizeof(err)), 0);
	assert_int_equal(st.bytes, (uint64_t)5 << 30);
	out = capture("unzip -l '%s/big.zip' | tail -1", root);
	assert_non_null(strstr(out, "5368709120"));
	free(out);
	assert_int_equal(sh("unzip -tq '%s/big.zip' >/dev/null", root), 0);
	assert_int_equal(sh("rm -rf '%s/bigdir' '%s/big.zip'", root, root), 0);
}

/* ---- gzip and raw ---- */

/* The next gzip member's header strings and mtime; its data is dropped. */
static void
gzip_member(z_stream *z, char *name, char *comment, size_t len, uLong *mtime)
{
	unsigned char out[4096];
	gz_header h;
	int rc;

	memset(&h, 0, sizeof(h));
	h.name = (Bytef *)name;
	h.name_max = (uInt)len;
	h.comment = (Bytef *)comment;
	h.comm_max = (uInt)len;
	assert_int_equal(inflateGetHeader(z, &h), Z_OK);
	do {
		z->next_out = out;
		z->avail_out = sizeof(out);
		rc = inflate(z, Z_NO_FLUSH);
		assert_true(rc == Z_OK || rc == Z_STREAM_END);
	} while (rc != Z_STREAM_END);
	assert_int_equal(h.done, 1);
	*mtime = h.time;
}

static void
test_gzip(void **state)
{
	char *const files[] = { "a.txt", "sub/b.txt", "caf\xc3\xa9%.txt", NULL };
	char *const link[] = { "a.txt", "lnk", NULL };
	char err[512], name[256], comment[256], *out, *path, *data;
	struct archive_stats st;
	uLong mtime;
	size_t len;
	z_stream z;

	(void)state;
	mkdir_at("gz");
	mkdir_at("gz/sub");
	put("gz/a.txt", "alpha\n", 0644);
	put("gz/sub/b.txt", "beta\n", 0644);
	put("gz/caf\xc3\xa9%.txt", "gamma\n", 0644);
	assert_int_equal(write_to("out.gz", ARCHIVE_GZIP, "gz", files, &st,
	    err, sizeof(err)), 0);
	assert_int_equal(st.entries, 3);
	assert_int_equal(st.bytes, 17);
	out = capture("gzip -dc '%s/out.gz'", root);
	assert_string_equal(out, "alpha\nbeta\ngamma\n");
	free(out);

	path = at("out.gz");
	data = slurp(path, &len);
	free(path);
	memset(&z, 0, sizeof(z));
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (Bytef *)data;
	z.avail_in = (uInt)len;
	gzip_member(&z, name, comment, sizeof(name), &mtime);
	assert_string_equal(name, "a.txt");
	assert_string_equal(comment, "a.txt");
	assert_int_equal(mtime, MTIME);
	assert_int_equal(inflateReset(&z), Z_OK);
	gzip_member(&z, name, comment, sizeof(name), &mtime);
	assert_string_equal(name, "b.txt");
	assert_string_equal(comment, "sub/b.txt");
	assert_int_equal(inflateReset(&z), Z_OK);
	gzip_member(&z, name, comment, sizeof(name), &mtime);
	assert_string_equal(name, "e:caf%C3%A9%25.txt");
	assert_string_equal(comment, "e:caf%C3%A9%25.txt");
	assert_int_equal(z.avail_in, 0);
	inflateEnd(&z);
	free(data);

	/* Only regular files, and the error names the entry. */
	path = at("gz/lnk");
	assert_int_equal(symlink("a.txt", path), 0);
	free(path);
	assert_int_equal(write_to("out.gz", ARCHIVE_GZIP, "gz", link, NULL,
	    err, sizeof(err)), -1);
	assert_non_null(strstr(err, "\"lnk\": not a regular file"));
}

static void
test_raw(void **state)
{
	char *const one[] = { "report.xml", NULL };
	char *const two[] = { "report.xml", "other", NULL };
	char *const none[] = { NULL };
	char *const dir[] = { "d", NULL };
	char err[512], *path, *data;
	struct archive_stats st;
	size_t len;

	(void)state;
	mkdir_at("raw");
	mkdir_at("raw/d");
	put("raw/report.xml", "<testsuite>\0</testsuite>\n", 0644);
	put("raw/other", "x", 0644);
	assert_int_equal(write_to("raw.out", ARCHIVE_RAW, "raw", one, &st,
	    err, sizeof(err)), 0);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.bytes, strlen("<testsuite>"));
	path = at("raw.out");
	data = slurp(path, &len);
	assert_int_equal(len, strlen("<testsuite>"));
	assert_memory_equal(data, "<testsuite>", len);
	free(data);
	free(path);

	assert_int_equal(write_to("raw.out", ARCHIVE_RAW, "raw", two, NULL,
	    err, sizeof(err)), -1);
	assert_string_equal(err, "raw format takes exactly one file, got 2");
	assert_int_equal(write_to("raw.out", ARCHIVE_RAW, "raw", none, NULL,
	    err, sizeof(err)), -1);
	assert_string_equal(err, "raw format takes exactly one file, got 0");
	assert_int_equal(write_to("raw.out", ARCHIVE_RAW, "raw", NULL, NULL,
	    err, sizeof(err)), -1);
	assert_int_equal(write_to("raw.out", ARCHIVE_RAW, "raw", dir, NULL,
	    err, sizeof(err)), -1);
	assert_non_null(strstr(err, "\"d\": not a regular file"));
}

/* ---- hostile and broken archives ---- */

static void
test_refuse_paths(void **state)
{
	const struct hentry abs[] = { { "ok", F, "fine\n", 0 }, { "/tmp/evil", F, "x", 0 } };
	const struct hentry up[] = { { "ok", F, "fine\n", 0 }, { "../evil", F, "x", 0 } };
	const struct hentry deep[] = { { "a/../../x", F, "x", 0 } };
	const struct hentry empty[] = { { ".", F, "x", 0 } };

	(void)state;
	fresh_dest();
	make_zip("abs.zip", abs, 2, false);
	refused("abs.zip", NULL, "\"/tmp/evil\": path is absolute");
	make_zip("up.zip", up, 2, false);
	refused("up.zip", NULL, "\"../evil\": path leads out of the destination");
	make_zip("deep.zip", deep, 1, false);
	refused("deep.zip", NULL, "\"a/../../x\": path leads out of the destination");
	/* A file named "." would be the destination itself. */
	make_zip("empty.zip", empty, 1, false);
	refused("empty.zip", NULL, "\".\": empty path");
}

static void
test_refuse_symlinks(void **state)
{
	const struct hentry etc[] = { { "ok", F, "fine\n", 0 }, { "l", L, "/etc", 0 } };
	const struct hentry up[] = { { "d", D, NULL, 0 }, { "d/l", L, "../../outside", 0 } };
	const struct hentry through[] = { { "a", L, ".", 0 }, { "a/x", F, "x", 0 } };
	const struct hentry escape_dir[] = { { "a", L, "../outside", 0 },
	    { "a/x", F, "x", 0 } };
	const struct hentry chain[] = { { "b", L, "a/..", 0 }, { "a", L, ".", 0 } };
	const struct hentry existing[] = { { "out/x", F, "x", 0 } };
	char *link;

	(void)state;
	fresh_dest();
	make_zip("etc.zip", etc, 2, false);
	refused("etc.zip", NULL, "\"l\": symlink target is absolute");
	make_zip("up.zip", up, 2, false);
	refused("up.zip", NULL, "\"d/l\": symlink leads out of the destination");
	make_zip("through.zip", through, 2, false);
	refused("through.zip", NULL, "\"a/x\": path leads through the symlink a");
	make_zip("escape.zip", escape_dir, 2, false);
	refused("escape.zip", NULL, "\"a/x\": path leads through the symlink a");
	/* Each link alone stays inside; together b is dest/.. . */
	make_zip("chain.zip", chain, 2, false);
	refused("chain.zip", NULL, "\"b\": symlink leads out of the destination");

	/* A symlink already in the destination is not written through. */
	link = at("dest/out");
	assert_int_equal(symlink("../outside", link), 0);
	free(link);
	make_zip("existing.zip", existing, 1, false);
	refused("existing.zip", NULL, "\"out/x\": path leads through the symlink out");
}

static void
test_refuse_broken(void **state)
{
	const struct hentry plain[] = {
		{ "first", F, "The first file, stored as it is: a CRC to break.\n", 0 },
		{ "second", F, "The second file.\n", 0 },
	};
	char *path, *data, *p;
	size_t len;
	int fd;

	(void)state;
	fresh_dest();

	/* Cut in half: no central directory. */
	make_zip("cut.zip", plain, 2, false);
	path = at("cut.zip");
	data = slurp(path, &len);
	assert_true((fd = open(path, O_WRONLY | O_TRUNC)) >= 0);
	assert_int_equal(write(fd, data, len / 2), (ssize_t)(len / 2));
	close(fd);
	free(data);
	free(path);
	refused("cut.zip", NULL, "cut.zip: truncated or corrupt: ");

	/* One byte of stored data changed: the CRC no longer matches. */
	make_zip("crc.zip", plain, 2, true);
	path = at("crc.zip");
	data = slurp(path, &len);
	assert_non_null(p = memmem(data, len, "a CRC to break", 14));
	p[2] ^= 0x20;
	assert_true((fd = open(path, O_WRONLY | O_TRUNC)) >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
	free(data);
	free(path);
	refused("crc.zip", NULL, "crc.zip: truncated or corrupt: \"first\": ");

	/* Not a zip at all. */
	put("junk.zip", "this is not a zip file\n", 0644);
	refused("junk.zip", NULL, "junk.zip: truncated or corrupt: ");
}

static void
test_refuse_limits(void **state)
{
	const struct hentry bomb[] = { { "small", F, "x", 0 }, { "zeros", ZEROS, NULL, 50 << 20 } };
	const struct hentry many[] = {
		{ "1", F, "x", 0 }, { "2", F, "x", 0 }, { "3", D, NULL, 0 },
		{ "3/4", F, "x", 0 }, { "5", F, "x", 0 }, { "6", F, "x", 0 },
	};
	struct archive_limits bytes = { 1 << 20, 0 }, entries = { 0, 5 };
	struct archive_limits enough = { 1 << 20, 6 };
	struct archive_stats st;
	char err[512], *zip, *dest;
	struct stat sb;

	(void)state;
	fresh_dest();
	make_zip("bomb.zip", bomb, 2, false);
	zip = at("bomb.zip");
	assert_int_equal(stat(zip, &sb), 0);
	assert_true(sb.st_size < 1 << 20);
	free(zip);
	refused("bomb.zip", &bytes, "\"zeros\": more than 1048576 bytes uncompressed");
	make_zip("many.zip", many, 6, false);
	refused("many.zip", &entries, "\"6\": more than 5 entries");

	/* At the limit is fine. */
	zip = at("many.zip");
	dest = at("dest");
	assert_int_equal(archive_extract_zip(zip, dest, &enough, &st, err, sizeof(err)), 0);
	assert_int_equal(st.entries, 6);
	assert_int_equal(st.bytes, 5);
	free(zip);
	free(dest);
}

/*
 * A failure in the writing pass (a file where a non-empty directory is)
 * takes away what the pass had made and keeps what was there.
 */
static void
test_rollback(void **state)
{
	const struct hentry h[] = {
		{ "new1", F, "new\n", 0 }, { "newdir/f", F, "new\n", 0 },
		{ "sub/added", F, "new\n", 0 }, { "sub", F, "a file now\n", 0 },
	};
	char err[512], *before, *after, *zip, *dest;

	(void)state;
	fresh_dest();
	make_zip("clash.zip", h, 4, false);
	before = listing("dest");
	zip = at("clash.zip");
	dest = at("dest");
	assert_int_equal(archive_extract_zip(zip, dest, NULL, NULL, err, sizeof(err)), -1);
	if (strstr(err, "\"sub\": ") == NULL)
		fail_msg("%s", err);
	after = listing("dest");
	/* The directory's mtime changed (entries came and went); not its contents. */
	assert_int_equal(sh("cd '%s/dest' && test ! -e new1 && test ! -e newdir && "
	    "test ! -e sub/added && test -f sub/also && test -f keep", root), 0);
	assert_true(strstr(after, "./new1") == NULL);
	free(before);
	free(after);
	free(zip);
	free(dest);
}

/*
 * A write that fails half-way (here: past RLIMIT_FSIZE, EFBIG, as a full
 * disk fails with ENOSPC) fails the extraction, names the file and the
 * cause, and leaves nothing: libarchive reports such a write as a mere
 * ARCHIVE_WARN, which must not pass for success.
 */
static void
test_write_failure(void **state)
{
	char *big = xmalloc(3 << 20);
	const struct hentry h[] = {
		{ "first", F, "a small file that fits\n", 0 },
		{ "deep/big", F, big, 0 },
	};
	struct rlimit old, small = { 1 << 20, 1 << 20 };
	void (*old_handler)(int);

	(void)state;
	memset(big, 'y', (3 << 20) - 1);
	big[(3 << 20) - 1] = '\0';
	fresh_dest();
	make_zip("big.zip", h, 2, false);
	free(big);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	old_handler = signal(SIGXFSZ, SIG_IGN);
	small.rlim_max = old.rlim_max;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
	refused("big.zip", NULL, "\"deep/big\": write: File too large");
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, old_handler);
	assert_int_equal(sh("ls -A '%s/dest' | grep -q runner-extract", root), 1);
}

/*
 * A file of the archive where the destination has a directory that is not
 * empty is found before anything moves: the entries before it stay out.
 */
static void
test_merge_conflict(void **state)
{
	const struct hentry h[] = {
		{ "aaa-new", F, "new\n", 0 }, { "sub", F, "a file now\n", 0 },
	};

	(void)state;
	fresh_dest();
	make_zip("conflict.zip", h, 2, false);
	refused("conflict.zip", NULL, "\"sub\": in ");
	assert_int_equal(sh("ls -A '%s/dest' | grep -q runner-extract", root), 1);
}

/*
 * Extraction merges into what is there: files replaced, directories kept
 * with what they held, an empty directory and a symlink in the way
 * replaced, the archive's directory modes set once their contents are in.
 */
static void
test_merge(void **state)
{
	const struct hentry h[] = {
		{ "sub/", D, NULL, 0 }, { "sub/new", F, "new\n", 0 },
		{ "keep", F, "replaced\n", 0 }, { "gone", F, "was a dir\n", 0 },
		{ "link", F, "was a link\n", 0 }, { "fresh/deeper/f", F, "f\n", 0 },
	};
	char err[512], *zip, *dest, *out;
	struct archive_stats st;
	struct stat sb;
	char *path;

	(void)state;
	fresh_dest();
	mkdir_at("dest/gone");
	path = at("dest/link");
	assert_int_equal(symlink("keep", path), 0);
	free(path);
	make_zip("merge.zip", h, 6, false);
	zip = at("merge.zip");
	dest = at("dest");
	assert_int_equal(archive_extract_zip(zip, dest, NULL, &st, err, sizeof(err)), 0);
	out = capture("cd '%s/dest' && find . -printf '%%p %%y %%m\\n' | sort && cat keep gone "
	    "link sub/also sub/new fresh/deeper/f", root);
	assert_string_equal(out,
	    ". d 755\n./fresh d 755\n./fresh/deeper d 755\n./fresh/deeper/f f 644\n"
	    "./gone f 644\n./keep f 644\n./link f 644\n./sub d 755\n./sub/also f 600\n"
	    "./sub/new f 644\n"
	    "replaced\nwas a dir\nwas a link\nme too\nnew\nf\n");
	free(out);
	path = at("dest/sub");
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mtime, MTIME);
	free(path);
	free(zip);
	free(dest);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format_names),
		cmocka_unit_test(test_zip_round_trip),
		cmocka_unit_test(test_zip_write_errors),
		cmocka_unit_test(test_zip_many_entries),
		cmocka_unit_test(test_zip_big_entry),
		cmocka_unit_test(test_gzip),
		cmocka_unit_test(test_raw),
		cmocka_unit_test(test_refuse_paths),
		cmocka_unit_test(test_refuse_symlinks),
		cmocka_unit_test(test_refuse_broken),
		cmocka_unit_test(test_refuse_limits),
		cmocka_unit_test(test_rollback),
		cmocka_unit_test(test_write_failure),
		cmocka_unit_test(test_merge_conflict),
		cmocka_unit_test(test_merge),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

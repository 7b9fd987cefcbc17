/*
 * The staging directory a zip extraction writes into, and the move that
 * puts its contents in place.
 *
 * The staging directory is a hidden directory inside the destination: on
 * the destination's file system whatever is mounted where, so that every
 * entry is one rename(2) away from its place.  Entries are written into it
 * with every write, truncate, chmod, utimens and close checked; only when
 * all of them are whole does anything move.  A failure before that removes
 * the staging directory and the destination has nothing new.
 *
 * Moving merges into what the destination already holds: an entry missing
 * there is renamed whole (a directory with everything below it), a
 * directory present in both is descended into, and a file, symlink or
 * empty directory in the way is replaced.  Whether every rename can happen
 * is decided before the first one, so a non-empty directory where a file
 * goes, or a directory of the destination on another file system, refuses
 * the whole extraction.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/archive_impl.h"
#include "lib/fdio.h"
#include "lib/xmalloc.h"

/* A growable list of owned paths (strv grows a slot at a time: too slow here). */
struct paths {
	char	**v;
	size_t	  n, cap;
};

/* A directory entry of the archive: its mode and time go on at the end. */
struct stage_dir {
	char		*name;		/* clean, relative; owned */
	mode_t		 perm;
	struct timespec	 mtime;
	size_t		 seq;		/* archive order: a later entry wins */
};

struct arc_stage {
	char		*dest;		/* the destination, no symlinks; owned */
	char		*root;		/* dest/.runner-extract-XXXXXX; owned */
	dev_t		 dev;		/* the file system both are on */
	struct timespec	 dest_mtime;	/* put back if nothing comes of it */
	bool		 committed;
	struct stage_dir *dirs;		/* owned, with their names */
	size_t		 ndirs, capdirs;
	struct paths	 moved;		/* new in dest: what a failed move takes back */
	/* The file being written. */
	int		 fd;
	const char	*raw;		/* its name for messages; the caller's */
	int64_t		 pos;		/* fd's offset */
	int64_t		 end;		/* bytes so far, holes included */
};

static void
paths_push(struct paths *p, char *path)
{
	if (p->n == p->cap) {
		p->cap = p->cap == 0 ? 64 : 2 * p->cap;
		p->v = xreallocarray(p->v, p->cap, sizeof(char *));
	}
	p->v[p->n++] = path;
}

static void
paths_free(struct paths *p)
{
	size_t i;

	for (i = 0; i < p->n; i++)
		free(p->v[i]);
	free(p->v);
	memset(p, 0, sizeof(*p));
}

/* ---- Removing ---- */

static int
remove_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	/* A failure shows as the directory left behind; keep going. */
	if (type == FTW_DP)
		(void)rmdir(path);
	else
		(void)unlink(path);
	return 0;
}

/* rm -rf path, staying on its file system; 0 if nothing is left. */
static int
remove_tree(const char *path)
{
	struct stat sb;

	if (lstat(path, &sb) == -1)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(sb.st_mode))
		return unlink(path);
	/* Directories are made 0777 & ~umask here; make sure we may empty them. */
	(void)chmod(path, 0700);
	(void)nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	if (lstat(path, &sb) == -1 && errno == ENOENT)
		return 0;
	errno = ENOTEMPTY;	/* something in it could not be removed */
	return -1;
}

/* ---- Writing into the staging directory ---- */

struct arc_stage *
arc_stage_new(const char *dest, char *err, size_t errlen)
{
	struct arc_stage *s = xcalloc(1, sizeof(*s));
	struct stat sb;

	s->fd = -1;
	s->dest = xstrdup(dest);
	if (lstat(dest, &sb) == -1) {
		arc_errf(err, errlen, NULL, "%s: %s", dest, strerror(errno));
		arc_stage_free(s);
		return NULL;
	}
	s->dest_mtime = sb.st_mtim;
	s->root = xasprintf("%s/.runner-extract-XXXXXX", dest);
	if (mkdtemp(s->root) == NULL) {
		arc_errf(err, errlen, NULL, "%s: cannot create a staging directory: %s",
		    dest, strerror(errno));
		free(s->root);
		s->root = NULL;
		arc_stage_free(s);
		return NULL;
	}
	if (lstat(s->root, &sb) == -1) {
		arc_errf(err, errlen, NULL, "%s: %s", s->root, strerror(errno));
		arc_stage_free(s);
		return NULL;
	}
	s->dev = sb.st_dev;
	return s;
}

/*
 * Make room for the entry at path: an earlier entry of the same name goes
 * (a later entry replaces it, as in gitlab-runner), a directory only if
 * the new entry is one too or the directory is empty.
 */
static int
clear_place(const char *path, const char *raw, bool for_dir, char *err, size_t errlen)
{
	struct stat sb;

	if (lstat(path, &sb) == -1) {
		if (errno == ENOENT)
			return 0;
		arc_errf(err, errlen, raw, "%s", strerror(errno));
		return -1;
	}
	if (S_ISDIR(sb.st_mode)) {
		if (for_dir || rmdir(path) == 0)
			return 0;
		arc_errf(err, errlen, raw, "a directory of the archive is in the way: %s",
		    strerror(errno));
		return -1;
	}
	if (unlink(path) == -1) {
		arc_errf(err, errlen, raw, "cannot replace an earlier entry: %s",
		    strerror(errno));
		return -1;
	}
	return 0;
}

/* The staged path of name, with its missing parents made. */
static char *
staged_path(struct arc_stage *s, const char *name, const char *raw,
    char *err, size_t errlen)
{
	const char *slash;
	char *path;

	for (slash = strchr(name, '/'); slash != NULL; slash = strchr(slash + 1, '/')) {
		path = xasprintf("%s/%.*s", s->root, (int)(slash - name), name);
		if (mkdir(path, 0777) == -1 && errno != EEXIST)
			goto fail;
		/* There already: a directory stays, an earlier file goes. */
		if (errno == EEXIST) {
			if (clear_place(path, raw, true, err, errlen) == -1) {
				free(path);
				return NULL;
			}
			if (mkdir(path, 0777) == -1 && errno != EEXIST)
				goto fail;
		}
		free(path);
	}
	return xasprintf("%s/%s", s->root, name);
fail:
	arc_errf(err, errlen, raw, "cannot create the directory %s: %s", path,
	    strerror(errno));
	free(path);
	return NULL;
}

int
arc_stage_dir(struct arc_stage *s, const char *name, const char *raw, mode_t perm,
    const struct timespec *mtime, char *err, size_t errlen)
{
	char *path;
	int rc = -1;

	if ((path = staged_path(s, name, raw, err, errlen)) == NULL)
		return -1;
	if (clear_place(path, raw, true, err, errlen) == -1)
		goto out;
	if (mkdir(path, 0777) == -1 && errno != EEXIST) {
		arc_errf(err, errlen, raw, "cannot create the directory: %s", strerror(errno));
		goto out;
	}
	if (s->ndirs == s->capdirs) {
		s->capdirs = s->capdirs == 0 ? 64 : 2 * s->capdirs;
		s->dirs = xreallocarray(s->dirs, s->capdirs, sizeof(*s->dirs));
	}
	s->dirs[s->ndirs].name = xstrdup(name);
	s->dirs[s->ndirs].perm = perm;
	s->dirs[s->ndirs].mtime = *mtime;
	s->dirs[s->ndirs].seq = s->ndirs;
	s->ndirs++;
	rc = 0;
out:
	free(path);
	return rc;
}

int
arc_stage_symlink(struct arc_stage *s, const char *name, const char *raw,
    const char *target, const struct timespec *mtime, char *err, size_t errlen)
{
	struct timespec ts[2] = { { 0, UTIME_OMIT }, *mtime };
	char *path;
	int rc = -1;

	if ((path = staged_path(s, name, raw, err, errlen)) == NULL)
		return -1;
	if (clear_place(path, raw, false, err, errlen) == -1)
		goto out;
	if (symlink(target, path) == -1) {
		arc_errf(err, errlen, raw, "cannot create the symlink: %s", strerror(errno));
		goto out;
	}
	if (utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW) == -1) {
		arc_errf(err, errlen, raw, "cannot set the time: %s", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	free(path);
	return rc;
}

int
arc_stage_file(struct arc_stage *s, const char *name, const char *raw,
    char *err, size_t errlen)
{
	char *path;

	if ((path = staged_path(s, name, raw, err, errlen)) == NULL)
		return -1;
	if (clear_place(path, raw, false, err, errlen) == -1) {
		free(path);
		return -1;
	}
	/* Private until its mode is set, once it is whole. */
	s->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	free(path);
	if (s->fd == -1) {
		arc_errf(err, errlen, raw, "cannot create: %s", strerror(errno));
		return -1;
	}
	s->raw = raw;
	s->pos = s->end = 0;
	return 0;
}

static bool
all_zeros(const unsigned char *p, size_t n)
{
	while (n > 0 && *p == 0) {
		p++;
		n--;
	}
	return n == 0;
}

int
arc_stage_write(struct arc_stage *s, const void *p, size_t n, int64_t off,
    char *err, size_t errlen)
{
	/* Runs of zeros become holes, as a sparse file was before it was archived. */
	if (all_zeros(p, n)) {
		if (off + (int64_t)n > s->end)
			s->end = off + (int64_t)n;
		return 0;
	}
	if (off != s->pos && lseek(s->fd, (off_t)off, SEEK_SET) == -1) {
		arc_errf(err, errlen, s->raw, "seek: %s", strerror(errno));
		return -1;
	}
	if (fd_write_all(s->fd, p, n) == -1) {
		arc_errf(err, errlen, s->raw, "write: %s", strerror(errno));
		return -1;
	}
	s->pos = off + (int64_t)n;
	if (s->pos > s->end)
		s->end = s->pos;
	return 0;
}

int
arc_stage_file_done(struct arc_stage *s, mode_t perm, const struct timespec *mtime,
    char *err, size_t errlen)
{
	struct timespec ts[2] = { { 0, UTIME_OMIT }, *mtime };
	struct stat sb;
	const char *what = NULL;
	int fd = s->fd, saved = 0;

	s->fd = -1;
	if (fstat(fd, &sb) == -1)
		what = "stat";
	/* A hole at the end is a length the writes did not make. */
	else if (sb.st_size < s->end && ftruncate(fd, (off_t)s->end) == -1)
		what = "cannot set the size";
	else if (fchmod(fd, perm) == -1)
		what = "cannot set the mode";
	else if (futimens(fd, ts) == -1)
		what = "cannot set the time";
	if (what != NULL)
		saved = errno;
	/* Where a write error shows on NFS, and with some quotas. */
	if (close(fd) == -1 && what == NULL) {
		what = "close";
		saved = errno;
	}
	if (what != NULL) {
		arc_errf(err, errlen, s->raw, "%s: %s", what, strerror(saved));
		return -1;
	}
	return 0;
}

/* ---- Moving into place ---- */

/* The names in dir, read whole before anything in it is renamed. */
static int
list_dir(const char *dir, struct paths *out)
{
	struct dirent *de;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return -1;
	errno = 0;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			paths_push(out, xstrdup(de->d_name));
		errno = 0;
	}
	if (errno != 0) {
		int saved = errno;

		closedir(d);
		errno = saved;
		return -1;
	}
	closedir(d);
	return 0;
}

static bool
dir_is_empty(const char *dir)
{
	struct paths names = { NULL, 0, 0 };
	bool empty = list_dir(dir, &names) == 0 && names.n == 0;

	paths_free(&names);
	return empty;
}

/* "rel/name", or "name" at the top. */
static char *
join(const char *rel, const char *name)
{
	return *rel == '\0' ? xstrdup(name) : xasprintf("%s/%s", rel, name);
}

/*
 * One entry of the staging directory against the destination: *there says
 * whether the destination has something at that name (ds).
 */
static int
look(struct arc_stage *s, const char *sub, struct stat *ss, struct stat *ds,
    bool *there, char *err, size_t errlen)
{
	char *spath = xasprintf("%s/%s", s->root, sub);
	char *dpath = xasprintf("%s/%s", s->dest, sub);
	int rc = -1;

	if (lstat(spath, ss) == -1) {
		arc_errf(err, errlen, sub, "%s: %s", spath, strerror(errno));
		goto out;
	}
	*there = lstat(dpath, ds) == 0;
	if (!*there && errno != ENOENT) {
		arc_errf(err, errlen, sub, "%s: %s", dpath, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	free(spath);
	free(dpath);
	return rc;
}

/* Can everything under rel move into place?  Nothing is changed. */
static int
plan(struct arc_stage *s, const char *rel, char *err, size_t errlen)
{
	struct paths names = { NULL, 0, 0 };
	struct stat ss, ds;
	char *dir = join(s->root, rel), *sub = NULL, *dpath;
	bool there;
	size_t i;
	int rc = -1;

	if (list_dir(dir, &names) == -1) {
		arc_errf(err, errlen, NULL, "%s: %s", dir, strerror(errno));
		goto out;
	}
	for (i = 0; i < names.n; i++) {
		free(sub);
		sub = join(rel, names.v[i]);
		if (look(s, sub, &ss, &ds, &there, err, errlen) == -1)
			goto out;
		if (!there || !S_ISDIR(ds.st_mode))
			continue;	/* renamed into place, or over what is there */
		if (S_ISDIR(ss.st_mode)) {
			if (ds.st_dev != s->dev) {
				arc_errf(err, errlen, sub, "in %s, a directory on another file "
				    "system: extraction cannot move files into it", s->dest);
				goto out;
			}
			if (plan(s, sub, err, errlen) == -1)
				goto out;
			continue;
		}
		dpath = xasprintf("%s/%s", s->dest, sub);
		there = !dir_is_empty(dpath);
		free(dpath);
		if (there) {
			arc_errf(err, errlen, sub, "in %s, a directory that is not empty "
			    "is where the archive has a file or symlink", s->dest);
			goto out;
		}
	}
	rc = 0;
out:
	free(sub);
	free(dir);
	paths_free(&names);
	return rc;
}

/* Do what plan() found possible. */
static int
move(struct arc_stage *s, const char *rel, char *err, size_t errlen)
{
	struct paths names = { NULL, 0, 0 };
	struct stat ss, ds;
	char *dir = join(s->root, rel), *sub = NULL, *spath = NULL, *dpath = NULL;
	bool there;
	size_t i;
	int rc = -1;

	if (list_dir(dir, &names) == -1) {
		arc_errf(err, errlen, NULL, "%s: %s", dir, strerror(errno));
		goto out;
	}
	for (i = 0; i < names.n; i++) {
		free(sub);
		free(spath);
		free(dpath);
		sub = join(rel, names.v[i]);
		spath = xasprintf("%s/%s", s->root, sub);
		dpath = xasprintf("%s/%s", s->dest, sub);
		if (look(s, sub, &ss, &ds, &there, err, errlen) == -1)
			goto out;
		if (there && S_ISDIR(ss.st_mode) && S_ISDIR(ds.st_mode)) {
			if (move(s, sub, err, errlen) == -1)
				goto out;
			continue;
		}
		/* rename(2) replaces a file with a file, but not across types. */
		if (there && !S_ISDIR(ss.st_mode) != !S_ISDIR(ds.st_mode) &&
		    (S_ISDIR(ds.st_mode) ? rmdir(dpath) : unlink(dpath)) == -1) {
			arc_errf(err, errlen, sub, "cannot replace %s: %s", dpath,
			    strerror(errno));
			goto out;
		}
		if (rename(spath, dpath) == -1) {
			arc_errf(err, errlen, sub, "cannot move into %s: %s", s->dest,
			    strerror(errno));
			goto out;
		}
		if (!there) {
			paths_push(&s->moved, dpath);
			dpath = NULL;
		}
	}
	rc = 0;
out:
	free(sub);
	free(spath);
	free(dpath);
	free(dir);
	paths_free(&names);
	return rc;
}

/* Deepest first (a child sorts after its parent), and a later entry last. */
static int
dir_order(const void *a, const void *b)
{
	const struct stage_dir *x = a, *y = b;
	int c = strcmp(y->name, x->name);

	if (c != 0)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The archive's directory modes and times, once nothing is added below them. */
static int
set_dir_meta(struct arc_stage *s, char *err, size_t errlen)
{
	struct stage_dir *d;
	char *path;
	size_t i;
	int rc = 0;

	if (s->ndirs == 0)
		return 0;
	qsort(s->dirs, s->ndirs, sizeof(*s->dirs), dir_order);
	for (i = 0; i < s->ndirs && rc == 0; i++) {
		struct timespec ts[2] = { { 0, UTIME_OMIT }, s->dirs[i].mtime };

		struct stat sb;

		d = &s->dirs[i];
		path = xasprintf("%s/%s", s->dest, d->name);
		/* A later entry of the name may have been a file or symlink. */
		if (lstat(path, &sb) == -1 || !S_ISDIR(sb.st_mode)) {
			free(path);
			continue;
		}
		if (chmod(path, d->perm) == -1 ||
		    utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW) == -1) {
			arc_errf(err, errlen, d->name, "cannot set the mode and time: %s",
			    strerror(errno));
			rc = -1;
		}
		free(path);
	}
	return rc;
}

int
arc_stage_commit(struct arc_stage *s, char *err, size_t errlen)
{
	size_t i;

	if (plan(s, "", err, errlen) == -1)
		return -1;
	/*
	 * From here on only a failing disk makes a call fail.  What was new
	 * goes again; a file that replaced an older one stays, whole.
	 */
	if (move(s, "", err, errlen) == -1 || set_dir_meta(s, err, errlen) == -1) {
		for (i = s->moved.n; i-- > 0; )
			(void)remove_tree(s->moved.v[i]);
		return -1;
	}
	s->committed = true;
	if (remove_tree(s->root) == -1) {
		arc_errf(err, errlen, NULL, "%s: cannot remove the staging directory: %s",
		    s->root, strerror(errno));
		return -1;
	}
	free(s->root);
	s->root = NULL;
	return 0;
}

void
arc_stage_free(struct arc_stage *s)
{
	size_t i;

	if (s == NULL)
		return;
	if (s->fd != -1)
		close(s->fd);
	if (s->root != NULL) {
		struct timespec ts[2] = { { 0, UTIME_OMIT }, s->dest_mtime };

		/* Best effort: the caller reports the failure that brought us here. */
		(void)remove_tree(s->root);
		/* The staging directory came and went; the destination is as it was. */
		if (!s->committed)
			(void)utimensat(AT_FDCWD, s->dest, ts, 0);
	}
	for (i = 0; i < s->ndirs; i++)
		free(s->dirs[i].name);
	free(s->dirs);
	paths_free(&s->moved);
	free(s->root);
	free(s->dest);
	free(s);
}

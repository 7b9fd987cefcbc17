/*
 * Selection of the files an artifact or a cache takes, after gitlab-runner's
 * commands/helpers/file_archiver.go and the doublestar globs it uses.
 *
 * Every path pattern is made relative to the project lexically, then
 * matched by walking the project from a descriptor of its root: each
 * directory is entered with openat(O_NOFOLLOW), so a symlink anywhere in a
 * path is a leaf and nothing outside the project is ever opened, whatever
 * the patterns say or the job left behind.
 */
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/file_select.h"
#include "lib/buf.h"
#include "lib/xmalloc.h"

/* A pattern such as "{a,b}{c,d}..." could otherwise expand without bound. */
#define MAX_ALTERNATIVES	1024
/* What `git ls-files -o -z` may print before we stop believing it. */
#define MAX_GIT_OUTPUT		((size_t)256 << 20)
#define MAX_GIT_STDERR		((size_t)4096)

struct sel {
	const char	*dir;		/* project dir, cleaned */
	int		 rootfd;
	struct strv	 excludes;	/* relative, braces expanded */
	struct strv	 files;		/* selected so far, unsorted */
	struct strv	 matches;	/* of the path pattern at hand */
	void		(*warn)(const char *, void *);
	void		*data;
};

static void	 warnf(struct sel *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));

static void
warnf(struct sel *s, const char *fmt, ...)
{
	struct buf b;
	va_list ap;

	if (s->warn == NULL)
		return;
	buf_init(&b, BUF_UNLIMITED);
	va_start(ap, fmt);
	(void)buf_vprintf(&b, fmt, ap);
	va_end(ap);
	s->warn(b.ptr, s->data);
	buf_release(&b);
}

/*
 * Go's filepath.Clean, which gitlab-runner applies to every pattern before
 * globbing: "./a//b/" is "a/b", "a/../b" is "b", "/.." is "/".  The result
 * is never empty ("." for nothing).
 */
static char *
path_clean(const char *p)
{
	size_t n = strlen(p), w = 0, dotdot = 0, r = 0;
	bool rooted = p[0] == '/';
	char *out = xmalloc(n + 2);

	if (rooted) {
		out[w++] = '/';
		r = dotdot = 1;
	}
	while (r < n) {
		if (p[r] == '/')
			r++;
		else if (p[r] == '.' && (r + 1 == n || p[r + 1] == '/'))
			r++;
		else if (p[r] == '.' && p[r + 1] == '.' &&
		    (r + 2 == n || p[r + 2] == '/')) {
			r += 2;
			if (w > dotdot) {
				/* Back to the slash before the last element. */
				w--;
				while (w > dotdot && out[w] != '/')
					w--;
			} else if (!rooted) {
				/* A leading ".." stays; later ones stack on it. */
				if (w > 0)
					out[w++] = '/';
				out[w++] = '.';
				out[w++] = '.';
				dotdot = w;
			}
		} else {
			if ((rooted && w != 1) || (!rooted && w != 0))
				out[w++] = '/';
			while (r < n && p[r] != '/')
				out[w++] = p[r++];
		}
	}
	if (w == 0)
		out[w++] = '.';
	out[w] = '\0';
	return out;
}

/*
 * The pattern relative to the project, or NULL when it leads out of it.
 * The project itself is "".  Lexical only, as gitlab-runner: a "../name/x"
 * that comes back into the project is fine.
 */
static char *
project_rel(const char *dir, const char *pattern)
{
	char *joined, *full, *rel = NULL;
	size_t dlen = strlen(dir);

	if (pattern[0] == '/')
		joined = xstrdup(pattern);
	else
		joined = xasprintf("%s/%s", dir, pattern);
	full = path_clean(joined);
	free(joined);
	if (strcmp(full, dir) == 0)
		rel = xstrdup("");
	else if (strcmp(dir, "/") == 0)
		rel = xstrdup(full + 1);
	else if (strncmp(full, dir, dlen) == 0 && full[dlen] == '/')
		rel = xstrdup(full + dlen + 1);
	free(full);
	return rel;
}

/*
 * Order of the result: bytewise, except that '/' sorts below every other
 * byte.  That compares paths component by component, so a directory comes
 * right before its contents ("a", "a/b", "a-b") and a tree is contiguous.
 */
static int
path_cmp(const char *a, const char *b)
{
	unsigned char ca, cb;

	for (;; a++, b++) {
		ca = *a == '/' ? 1 : (unsigned char)*a;
		cb = *b == '/' ? 1 : (unsigned char)*b;
		if (ca != cb || ca == '\0')
			return (int)ca - (int)cb;
	}
}

static int
path_qsort_cmp(const void *a, const void *b)
{
	return path_cmp(*(char *const *)a, *(char *const *)b);
}

/* Sort with path_cmp and drop repeats, freeing them. */
static void
sort_unique(struct strv *sv)
{
	size_t i, w = 0;

	if (sv->n == 0)
		return;
	qsort(sv->v, sv->n, sizeof(char *), path_qsort_cmp);
	for (i = 0; i < sv->n; i++) {
		if (w > 0 && strcmp(sv->v[w - 1], sv->v[i]) == 0)
			free(sv->v[i]);
		else
			sv->v[w++] = sv->v[i];
	}
	sv->n = w;
	sv->v[w] = NULL;
}

/* ---- glob matching ---------------------------------------------------- */

/* One UTF-8 character at s (before end): its code point and length. */
static size_t
rune(const char *s, const char *end, uint32_t *cp)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t len, i, avail = (size_t)(end - s);
	uint32_t c;

	if (u[0] < 0x80) {
		*cp = u[0];
		return 1;
	}
	if ((u[0] & 0xe0) == 0xc0) {
		len = 2;
		c = u[0] & 0x1f;
	} else if ((u[0] & 0xf0) == 0xe0) {
		len = 3;
		c = u[0] & 0x0f;
	} else if ((u[0] & 0xf8) == 0xf0) {
		len = 4;
		c = u[0] & 0x07;
	} else
		goto invalid;
	if (len > avail)
		goto invalid;
	for (i = 1; i < len; i++) {
		if ((u[i] & 0xc0) != 0x80)
			goto invalid;
		c = c << 6 | (u[i] & 0x3f);
	}
	*cp = c;
	return len;
invalid:
	/* A stray byte stands for itself, as Go's RuneError would. */
	*cp = u[0];
	return 1;
}

/* One class item at *pp (an escaped or plain character). */
static bool
class_char(const char **pp, const char *pe, uint32_t *cp)
{
	const char *p = *pp;

	if (p < pe && *p == '\\')
		p++;
	if (p >= pe)
		return false;
	*pp = p + rune(p, pe, cp);
	return true;
}

/*
 * Match one pattern item at *pp against the character c; advance *pp past
 * the item.  False with *pp unchanged for a malformed class.
 */
static bool
match_item(const char **pp, const char *pe, uint32_t c, bool *ok)
{
	const char *p = *pp;
	uint32_t lo, hi, pc;
	bool neg = false, in = false;
	int nitems = 0;

	if (*p == '?') {
		*pp = p + 1;
		*ok = true;
		return true;
	}
	if (*p != '[') {
		if (!class_char(&p, pe, &pc))
			return false;
		*pp = p;
		*ok = pc == c;
		return true;
	}
	p++;
	if (p < pe && (*p == '!' || *p == '^')) {
		neg = true;
		p++;
	}
	for (;;) {
		if (p >= pe)
			return false;
		if (*p == ']' && nitems > 0) {
			p++;
			break;
		}
		if (!class_char(&p, pe, &lo))
			return false;
		hi = lo;
		if (p + 1 < pe && *p == '-' && p[1] != ']') {
			p++;
			if (!class_char(&p, pe, &hi))
				return false;
		}
		if (lo <= c && c <= hi)
			in = true;
		nitems++;
	}
	*pp = p;
	*ok = in != neg;
	return true;
}

/* One path segment [s, se) against one pattern segment [p, pe). */
static bool
match_segment(const char *p, const char *pe, const char *s, const char *se)
{
	const char *star_p = NULL, *star_s = NULL, *q;
	uint32_t c;
	size_t len;
	bool ok;

	while (s < se) {
		if (p < pe && *p == '*') {
			while (p < pe && *p == '*')
				p++;
			star_p = p;
			star_s = s;
			continue;
		}
		len = rune(s, se, &c);
		q = p;
		if (p < pe && match_item(&q, pe, c, &ok) && ok) {
			p = q;
			s += len;
			continue;
		}
		if (star_p == NULL)
			return false;
		/* Let the last star take one more character. */
		star_s += rune(star_s, se, &c);
		s = star_s;
		p = star_p;
	}
	while (p < pe && *p == '*')
		p++;
	return p == pe;
}

static const char *
seg_end(const char *p)
{
	const char *e = strchr(p, '/');

	return e != NULL ? e : p + strlen(p);
}

static const char *
seg_next(const char *e)
{
	return *e == '/' ? e + 1 : e;
}

static bool
is_doublestar(const char *p, const char *pe)
{
	return pe - p == 2 && p[0] == '*' && p[1] == '*';
}

/*
 * A whole relative path against a pattern without braces, both at the
 * start of a segment.  "**" as a whole segment takes zero or more
 * segments; anywhere else '*' stops at '/'.
 */
static bool
match_path(const char *p, const char *s)
{
	const char *pe, *se;

	for (;;) {
		if (*p == '\0')
			return *s == '\0';
		pe = seg_end(p);
		if (is_doublestar(p, pe)) {
			p = seg_next(pe);
			/* Runs of "**" mean no more than one. */
			while (is_doublestar(p, seg_end(p)))
				p = seg_next(seg_end(p));
			if (*p == '\0')
				return true;
			for (;;) {
				if (match_path(p, s))
					return true;
				if ((s = strchr(s, '/')) == NULL)
					return false;
				s++;
			}
		}
		if (*s == '\0')
			return false;
		se = seg_end(s);
		if (!match_segment(p, pe, s, se))
			return false;
		p = seg_next(pe);
		s = seg_next(se);
	}
}

/*
 * Whether the pattern is well formed, as doublestar's ValidatePattern:
 * classes closed within their segment, braces balanced, no trailing '\'.
 */
static bool
pattern_valid(const char *p)
{
	int depth = 0, nitems;

	while (*p != '\0') {
		switch (*p) {
		case '\\':
			if (*++p == '\0')
				return false;
			p++;
			break;
		case '[':
			p++;
			if (*p == '!' || *p == '^')
				p++;
			for (nitems = 0;; nitems++) {
				if (*p == '\0' || *p == '/')
					return false;
				if (*p == ']' && nitems > 0)
					break;
				if (*p == '\\' && *++p == '\0')
					return false;
				p++;
			}
			p++;
			break;
		case '{':
			depth++;
			p++;
			break;
		case '}':
			if (--depth < 0)
				return false;
			p++;
			break;
		default:
			p++;
		}
	}
	return depth == 0;
}

/* Past a class starting at p ('['); the pattern is valid. */
static const char *
skip_class(const char *p)
{
	int nitems;

	p++;
	if (*p == '!' || *p == '^')
		p++;
	for (nitems = 0; !(*p == ']' && nitems > 0); nitems++)
		p += *p == '\\' ? 2 : 1;
	return p + 1;
}

/*
 * The ',' or '}' that ends the brace alternative starting at p.  The
 * pattern is valid.
 */
static const char *
alt_end(const char *p)
{
	int depth = 0;

	for (;;) {
		if (*p == '\\')
			p += 2;
		else if (*p == '[')
			p = skip_class(p);
		else if (*p == '{') {
			depth++;
			p++;
		} else if ((*p == '}' || *p == ',') && depth == 0)
			return p;
		else {
			if (*p == '}')
				depth--;
			p++;
		}
	}
}

/*
 * Expand "{a,b}" alternatives (nested too) into separate patterns, as the
 * rest of the matcher knows nothing of braces.  -1 when there would be too
 * many.  The pattern is valid.
 */
static int
expand_braces(const char *pat, struct strv *out)
{
	const char *p = pat, *open = NULL, *alt, *end, *close;
	struct buf b;
	int rc = 0;

	while (*p != '\0' && open == NULL) {
		if (*p == '\\')
			p += 2;
		else if (*p == '[')
			p = skip_class(p);
		else if (*p == '{')
			open = p;
		else
			p++;
	}
	if (open == NULL) {
		if (out->n >= MAX_ALTERNATIVES)
			return -1;
		strv_push(out, pat);
		return 0;
	}
	for (close = open + 1; *(close = alt_end(close)) != '}'; close++)
		;
	buf_init(&b, BUF_UNLIMITED);
	for (alt = open + 1; rc == 0; alt = end + 1) {
		end = alt_end(alt);
		buf_reset(&b);
		(void)buf_append(&b, pat, (size_t)(open - pat));
		(void)buf_append(&b, alt, (size_t)(end - alt));
		(void)buf_puts(&b, close + 1);
		rc = expand_braces(b.ptr, out);
		if (end == close)
			break;
	}
	buf_release(&b);
	return rc;
}

bool
file_glob_match(const char *pattern, const char *path)
{
	struct strv alts = { 0 };
	bool match = false;
	size_t i;

	if (!pattern_valid(pattern) || expand_braces(pattern, &alts) == -1) {
		strv_release(&alts);
		return false;
	}
	for (i = 0; i < alts.n && !match; i++)
		match = match_path(alts.v[i], path);
	strv_release(&alts);
	return match;
}

/* ---- the walk ---------------------------------------------------------- */

static char *
rel_join(const char *rel, const char *name)
{
	return rel[0] == '\0' ? xstrdup(name) : xasprintf("%s/%s", rel, name);
}

/* Open a directory below dirfd, never through a symlink. */
static int
open_dir_at(int dirfd, const char *name)
{
	return openat(dirfd, name,
	    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/*
 * The relative directory rel ("" for the project), each component opened
 * with O_NOFOLLOW so that a symlink on the way fails with ELOOP or ENOTDIR.
 */
static int
open_rel_dir(int rootfd, const char *rel)
{
	char *copy = xstrdup(rel), *comp, *save = NULL;
	int fd = open_dir_at(rootfd, "."), next;

	for (comp = strtok_r(copy, "/", &save); comp != NULL && fd != -1;
	    comp = strtok_r(NULL, "/", &save)) {
		next = open_dir_at(fd, comp);
		close(fd);
		fd = next;
	}
	free(copy);
	return fd;
}

/* lstat of rel with no symlink followed on the way; -1 if it is missing. */
static int
lstat_rel(int rootfd, const char *rel, struct stat *st)
{
	char *parent = xstrdup(rel), *slash = strrchr(parent, '/');
	const char *leaf = rel;
	int fd, rc;

	if (slash != NULL) {
		*slash = '\0';
		leaf = rel + (slash - parent) + 1;
	} else
		parent[0] = '\0';
	fd = open_rel_dir(rootfd, parent);
	free(parent);
	if (fd == -1)
		return -1;
	rc = fstatat(fd, leaf, st, AT_SYMLINK_NOFOLLOW);
	close(fd);
	return rc;
}

/* The names in a directory, without "." and "..", in no particular order. */
static int
read_names(int dirfd, struct strv *names)
{
	struct dirent *de;
	DIR *d;
	int fd;

	if ((fd = dup(dirfd)) == -1)
		return -1;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -1;
	}
	rewinddir(d);
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		strv_push(names, de->d_name);
	}
	closedir(d);
	return 0;
}

static bool
is_real_dir(int dirfd, const char *name)
{
	struct stat st;

	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISDIR(st.st_mode);
}

/* A literal pattern segment with its backslash escapes removed. */
static char *
unescape(const char *p, const char *pe)
{
	char *out = xmalloc((size_t)(pe - p) + 1), *w = out;

	while (p < pe) {
		if (*p == '\\' && p + 1 < pe)
			p++;
		*w++ = *p++;
	}
	*w = '\0';
	return out;
}

static bool
has_meta(const char *p, const char *pe)
{
	for (; p < pe; p++)
		if (*p == '*' || *p == '?' || *p == '[')
			return true;
	return false;
}

static void	glob_dir(struct sel *, int, const char *, const char *);

/* The entry name of dirfd (at rel/name) against the rest of the pattern. */
static void
glob_entry(struct sel *s, int dirfd, const char *rel, const char *name,
    const char *rest)
{
	char *path = rel_join(rel, name);
	int fd;

	if (*rest == '\0')
		strv_push_owned(&s->matches, path);
	else if (is_real_dir(dirfd, name)) {
		if ((fd = open_dir_at(dirfd, name)) != -1) {
			glob_dir(s, fd, path, rest);
			close(fd);
		}
		free(path);
	} else if (match_path(rest, "")) {
		/* A file x matches "x" then "**": it may stand for nothing. */
		strv_push_owned(&s->matches, path);
	} else
		free(path);
}

/*
 * Every path below the directory dirfd (at rel) that the pattern p, at the
 * start of a segment, matches, into s->matches.  Directories are entered
 * only as themselves, never through a symlink.
 */
static void
glob_dir(struct sel *s, int dirfd, const char *rel, const char *p)
{
	struct strv names = { 0 };
	const char *pe, *rest;
	char *lit, *path;
	size_t i;
	int fd;

	if (*p == '\0') {
		strv_push(&s->matches, rel);
		return;
	}
	pe = seg_end(p);
	rest = seg_next(pe);
	if (is_doublestar(p, pe)) {
		/* Zero directories, then one more level each time. */
		glob_dir(s, dirfd, rel, rest);
		if (read_names(dirfd, &names) == -1)
			return;
		for (i = 0; i < names.n; i++) {
			path = rel_join(rel, names.v[i]);
			if (is_real_dir(dirfd, names.v[i])) {
				if ((fd = open_dir_at(dirfd, names.v[i])) != -1) {
					glob_dir(s, fd, path, p);
					close(fd);
				}
			} else if (match_path(p, names.v[i]))
				strv_push(&s->matches, path);
			free(path);
		}
	} else if (has_meta(p, pe)) {
		if (read_names(dirfd, &names) == -1)
			return;
		for (i = 0; i < names.n; i++) {
			const char *n = names.v[i];

			if (match_segment(p, pe, n, n + strlen(n)))
				glob_entry(s, dirfd, rel, n, rest);
		}
	} else {
		struct stat st;

		lit = unescape(p, pe);
		/* Cleaning leaves no "." or ".."; braces could bring them. */
		if (strcmp(lit, ".") != 0 && strcmp(lit, "..") != 0 &&
		    fstatat(dirfd, lit, &st, AT_SYMLINK_NOFOLLOW) == 0)
			glob_entry(s, dirfd, rel, lit, rest);
		free(lit);
	}
	strv_release(&names);
}

static bool
excluded(const struct sel *s, const char *rel)
{
	size_t i;

	for (i = 0; i < s->excludes.n; i++)
		if (match_path(s->excludes.v[i], rel))
			return true;
	return false;
}

/* Take rel unless an exclude matches it; whether it was taken. */
static bool
take(struct sel *s, const char *rel)
{
	if (excluded(s, rel))
		return false;
	strv_push(&s->files, rel);
	return true;
}

/*
 * Everything below the directory dirfd (at rel).  As filepath.Walk in
 * gitlab-runner, an excluded directory is still entered: exclude patterns
 * are not recursive; "dir" followed by "/" and "**" drops a tree.
 */
static void
walk_tree(struct sel *s, int dirfd, const char *rel, size_t *found)
{
	struct strv names = { 0 };
	char *path;
	size_t i;
	int fd;

	if (read_names(dirfd, &names) == -1)
		return;
	for (i = 0; i < names.n; i++) {
		path = rel_join(rel, names.v[i]);
		if (take(s, path))
			(*found)++;
		if (is_real_dir(dirfd, names.v[i]) &&
		    (fd = open_dir_at(dirfd, names.v[i])) != -1) {
			walk_tree(s, fd, path, found);
			close(fd);
		}
		free(path);
	}
	strv_release(&names);
}

/*
 * Take one match of a path pattern, with its tree if it is a directory;
 * whether it was one (and so everything below it is taken care of).
 */
static bool
take_match(struct sel *s, const char *rel, size_t *found)
{
	struct stat st;
	int fd;

	if (rel[0] == '\0') {
		/* The project itself: not an entry, but all it holds is. */
		if ((fd = open_rel_dir(s->rootfd, "")) != -1) {
			walk_tree(s, fd, "", found);
			close(fd);
		}
		return true;
	}
	if (lstat_rel(s->rootfd, rel, &st) == -1)
		return false;
	if (take(s, rel))
		(*found)++;
	if (!S_ISDIR(st.st_mode))
		return false;
	if ((fd = open_rel_dir(s->rootfd, rel)) != -1) {
		walk_tree(s, fd, rel, found);
		close(fd);
	}
	return true;
}

static bool
inside(const char *dir, const char *path)
{
	size_t n = strlen(dir);

	if (n == 0)
		return true;
	return strncmp(path, dir, n) == 0 && path[n] == '/';
}

static void
select_path(struct sel *s, const char *path)
{
	struct strv alts = { 0 };
	const char *walked = NULL;
	size_t i, found = 0;
	char *rel;
	int fd;

	if (path[0] == '\0') {
		warnf(s, "No matching files. Path is empty.");
		return;
	}
	if ((rel = project_rel(s->dir, path)) == NULL) {
		warnf(s, "processPath: artifact path is not a subpath of "
		    "project directory: %s", path);
		return;
	}
	if (!pattern_valid(rel) || expand_braces(rel, &alts) == -1) {
		warnf(s, "%s: syntax error in pattern", path);
		goto out;
	}
	if ((fd = open_rel_dir(s->rootfd, "")) != -1) {
		for (i = 0; i < alts.n; i++)
			glob_dir(s, fd, "", alts.v[i]);
		close(fd);
	}
	/*
	 * In path order a tree follows its directory, so a match inside
	 * the directory taken last was taken with it.
	 */
	sort_unique(&s->matches);
	for (i = 0; i < s->matches.n; i++) {
		const char *m = s->matches.v[i];

		if (walked != NULL && inside(walked, m))
			continue;
		if (take_match(s, m, &found))
			walked = m;
	}
	if (found == 0)
		warnf(s, "%s: no matching files. Ensure that the artifact "
		    "path is relative to the working directory (%s)",
		    path, s->dir);
out:
	strv_release(&s->matches);
	strv_release(&alts);
	free(rel);
}

/* ---- untracked ---------------------------------------------------------- */

/* Pass each line of git's stderr on as a warning. */
static void
warn_lines(struct sel *s, struct buf *b)
{
	char *line = b->ptr, *nl;

	while (*line != '\0') {
		if ((nl = strchr(line, '\n')) != NULL)
			*nl = '\0';
		if (*line != '\0')
			warnf(s, "%s", line);
		if (nl == NULL)
			break;
		line = nl + 1;
	}
}

/*
 * Run `git ls-files -o -z` in the project and collect its output.  0 with
 * the status in *status (or *exec_errno set when git could not be run),
 * -1 with errno on a failure of our own (pipe, fork).
 */
static int
run_git(const char *dir, struct buf *out, struct buf *err, int *status,
    int *exec_errno)
{
	char *const argv[] = { "git", "ls-files", "-o", "-z", NULL };
	int po[2], pe[2], px[2], e, saved;
	struct pollfd pfd[2];
	char chunk[8192];
	pid_t pid;
	ssize_t n;
	int i, open_fds;

	*exec_errno = 0;
	if (pipe2(po, O_CLOEXEC) == -1)
		return -1;
	if (pipe2(pe, O_CLOEXEC) == -1)
		goto fail_po;
	/* Closed by a successful exec; carries errno when exec fails. */
	if (pipe2(px, O_CLOEXEC) == -1)
		goto fail_pe;
	if ((pid = fork()) == -1)
		goto fail_px;
	if (pid == 0) {
		int nullfd = open("/dev/null", O_RDONLY);

		if (nullfd == -1 || dup2(nullfd, 0) == -1 ||
		    dup2(po[1], 1) == -1 || dup2(pe[1], 2) == -1 ||
		    chdir(dir) == -1) {
			e = errno;
			(void)!write(px[1], &e, sizeof(e));
			_exit(127);
		}
		execvp(argv[0], argv);
		e = errno;
		(void)!write(px[1], &e, sizeof(e));
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	close(px[1]);

	pfd[0].fd = po[0];
	pfd[1].fd = pe[0];
	pfd[0].events = pfd[1].events = POLLIN;
	for (open_fds = 2; open_fds > 0; ) {
		if (poll(pfd, 2, -1) == -1) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (i = 0; i < 2; i++) {
			if (pfd[i].fd == -1 || pfd[i].revents == 0)
				continue;
			n = read(pfd[i].fd, chunk, sizeof(chunk));
			if (n == -1 && errno == EINTR)
				continue;
			if (n <= 0) {
				close(pfd[i].fd);
				pfd[i].fd = -1;
				open_fds--;
				continue;
			}
			/* Past the cap the rest is read and dropped. */
			(void)buf_append(i == 0 ? out : err, chunk, (size_t)n);
		}
	}
	for (i = 0; i < 2; i++)
		if (pfd[i].fd != -1)
			close(pfd[i].fd);
	do
		n = read(px[0], &e, sizeof(e));
	while (n == -1 && errno == EINTR);
	if (n == (ssize_t)sizeof(e))
		*exec_errno = e;
	close(px[0]);
	while (waitpid(pid, status, 0) == -1)
		if (errno != EINTR)
			return -1;
	return 0;

fail_px:
	saved = errno;
	close(px[0]);
	close(px[1]);
	errno = saved;
fail_pe:
	saved = errno;
	close(pe[0]);
	close(pe[1]);
	errno = saved;
fail_po:
	saved = errno;
	close(po[0]);
	close(po[1]);
	errno = saved;
	return -1;
}

/*
 * What git lists as untracked, .gitignore not honoured (gitlab-runner runs
 * it without --exclude-standard).  Each path is taken alone: git lists the
 * files of an untracked directory one by one.  A git that fails is a
 * warning, as in gitlab-runner, and the rest of the selection stands.
 */
static int
select_untracked(struct sel *s, char *err, size_t errlen)
{
	struct buf out, errout;
	int status, exec_errno;
	size_t off, found = 0;
	struct stat st;
	char *rel;

	buf_init(&out, MAX_GIT_OUTPUT);
	buf_init(&errout, MAX_GIT_STDERR);
	if (run_git(s->dir, &out, &errout, &status, &exec_errno) == -1) {
		snprintf(err, errlen, "untracked: git ls-files: %s",
		    strerror(errno));
		buf_release(&out);
		buf_release(&errout);
		return -1;
	}
	warn_lines(s, &errout);
	if (exec_errno != 0) {
		warnf(s, "untracked: git: %s", strerror(exec_errno));
		goto done;
	}
	if (WIFSIGNALED(status)) {
		warnf(s, "untracked: signal: %s", strsignal(WTERMSIG(status)));
		goto done;
	}
	if (WEXITSTATUS(status) != 0) {
		warnf(s, "untracked: exit status %d", WEXITSTATUS(status));
		goto done;
	}
	if (out.len == out.max)
		warnf(s, "untracked: git ls-files printed more than %zu bytes; "
		    "the rest is ignored", out.max);
	for (off = 0; off < out.len; off += strlen(out.ptr + off) + 1) {
		/* The last record may lack its NUL if the cap cut it. */
		if (memchr(out.ptr + off, '\0', out.len - off + 1) == NULL)
			break;
		if ((rel = project_rel(s->dir, out.ptr + off)) == NULL)
			continue;
		if (rel[0] != '\0' && lstat_rel(s->rootfd, rel, &st) == 0 &&
		    take(s, rel))
			found++;
		free(rel);
	}
	if (found == 0)
		warnf(s, "untracked: no files");
done:
	buf_release(&out);
	buf_release(&errout);
	return 0;
}

int
file_select(const struct file_select *fs, struct strv *out,
    void (*warn)(const char *line, void *data), void *data,
    char *err, size_t errlen)
{
	struct sel s = { 0 };
	char *rel;
	size_t i;
	int rc = -1;

	s.warn = warn;
	s.data = data;
	s.rootfd = -1;
	if (fs->project_dir == NULL || fs->project_dir[0] != '/') {
		snprintf(err, errlen, "project directory is not absolute: %s",
		    fs->project_dir != NULL ? fs->project_dir : "(null)");
		return -1;
	}
	s.dir = path_clean(fs->project_dir);
	if ((s.rootfd = open(s.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		snprintf(err, errlen, "%s: %s", s.dir, strerror(errno));
		goto out;
	}

	for (i = 0; fs->excludes != NULL && fs->excludes[i] != NULL; i++) {
		const char *x = fs->excludes[i];

		if ((rel = project_rel(s.dir, x)) == NULL) {
			/* gitlab-runner says this for every path it checks. */
			warnf(&s, "isExcluded: artifact path is not a subpath "
			    "of project directory: %s", x);
			continue;
		}
		/* A malformed exclude matches nothing, as doublestar's. */
		if (pattern_valid(rel))
			(void)expand_braces(rel, &s.excludes);
		free(rel);
	}
	for (i = 0; fs->paths != NULL && fs->paths[i] != NULL; i++)
		select_path(&s, fs->paths[i]);
	if (fs->untracked && select_untracked(&s, err, errlen) == -1)
		goto out;

	sort_unique(&s.files);
	for (i = 0; i < s.files.n; i++)
		strv_push_owned(out, s.files.v[i]);
	free(s.files.v);
	s.files.v = NULL;
	s.files.n = 0;
	rc = 0;
out:
	if (s.rootfd != -1)
		close(s.rootfd);
	strv_release(&s.excludes);
	strv_release(&s.files);
	free((char *)s.dir);
	return rc;
}

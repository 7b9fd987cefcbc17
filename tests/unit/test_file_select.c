/*
 * Unit tests for file_select() and file_glob_match(): the doublestar glob
 * table, then selections in a real directory tree made by each test (plain
 * files, directories with their trees, globs, excludes, paths outside the
 * project, symlinks that must not be followed) and `untracked` in a real
 * git repository.  Results are compared as one string, a path a line, so
 * that the order is checked too.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "helpers/file_select.h"
#include "lib/buf.h"
#include "lib/xmalloc.h"

static char	*root;		/* holds proj/, outside/ and repo/ */
static char	*proj;

static void	 sh(const char *, ...) __attribute__((format(printf, 1, 2)));

static void
sh(const char *fmt, ...)
{
	va_list ap;
	char *cmd;

	va_start(ap, fmt);
	assert_true(vasprintf(&cmd, fmt, ap) != -1);
	va_end(ap);
	assert_int_equal(system(cmd), 0);
	free(cmd);
}

/*
 * proj/                      outside/secret.txt
 *   a.txt  .hidden  b.c
 *   dir/x.txt  dir/sub/y.txt  dir/sub/z.log
 *   dir-b/w.txt
 *   out/keep.txt  out/tmp/t1  out/tmp/deep/t2
 *   link -> ../outside        (a directory outside the project)
 *   flink -> a.txt
 */
static int
setup(void **state)
{
	char tmpl[] = "/tmp/test_file_select.XXXXXX";

	(void)state;
	if (mkdtemp(tmpl) == NULL)
		return -1;
	root = xstrdup(tmpl);
	proj = xasprintf("%s/proj", root);
	sh("cd '%s' && mkdir -p outside proj/dir/sub proj/dir-b proj/out/tmp/deep"
	    " && echo s > outside/secret.txt && cd proj"
	    " && touch a.txt .hidden b.c dir/x.txt dir/sub/y.txt dir/sub/z.log"
	    " dir-b/w.txt out/keep.txt out/tmp/t1 out/tmp/deep/t2"
	    " && ln -s ../outside link && ln -s a.txt flink", root);
	/* git sees no user or system configuration. */
	setenv("HOME", root, 1);
	setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
	setenv("GIT_AUTHOR_NAME", "t", 1);
	setenv("GIT_AUTHOR_EMAIL", "t@example.com", 1);
	setenv("GIT_COMMITTER_NAME", "t", 1);
	setenv("GIT_COMMITTER_EMAIL", "t@example.com", 1);
	return 0;
}

static int
teardown(void **state)
{
	char *cmd;

	(void)state;
	cmd = xasprintf("rm -rf '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", root);
	free(cmd);
	free(proj);
	free(root);
	return 0;
}

static void
collect_warning(const char *line, void *data)
{
	struct buf *b = data;

	assert_int_equal(buf_printf(b, "%s\n", line), 0);
}

struct result {
	char	*files;		/* a path a line */
	char	*warnings;	/* a warning a line */
};

static void
result_free(struct result *r)
{
	free(r->files);
	free(r->warnings);
}

/* Select in dir with NULL-terminated paths and excludes (either may be NULL). */
static struct result
run_in(const char *dir, const char *const *paths, const char *const *excludes,
    bool untracked)
{
	struct file_select fs = {
		.project_dir = dir,
		.paths = (char *const *)paths,
		.excludes = (char *const *)excludes,
		.untracked = untracked,
	};
	struct strv out = { 0 };
	struct buf files, warnings;
	struct result r;
	char err[256] = "";
	size_t i;

	buf_init(&files, BUF_UNLIMITED);
	buf_init(&warnings, BUF_UNLIMITED);
	if (file_select(&fs, &out, collect_warning, &warnings, err,
	    sizeof(err)) != 0)
		fail_msg("file_select: %s", err);
	for (i = 0; i < out.n; i++)
		assert_int_equal(buf_printf(&files, "%s\n", out.v[i]), 0);
	strv_release(&out);
	r.files = buf_detach(&files, NULL);
	r.warnings = buf_detach(&warnings, NULL);
	return r;
}

static struct result
run(const char *const *paths, const char *const *excludes)
{
	return run_in(proj, paths, excludes, false);
}

/* Expect exactly these files and no warning. */
static void
expect(const char *const *paths, const char *const *excludes,
    const char *files)
{
	struct result r = run(paths, excludes);

	assert_string_equal(r.files, files);
	assert_string_equal(r.warnings, "");
	result_free(&r);
}

static void
test_glob_match(void **state)
{
	static const struct {
		const char	*pattern, *path;
		bool		 match;
	} t[] = {
		{ "a.txt", "a.txt", true },
		{ "a.txt", "b.txt", false },
		{ "*.txt", "a.txt", true },
		{ "*.txt", "d/a.txt", false },		/* '*' stops at '/' */
		{ "*", ".hidden", true },		/* dotfiles too */
		{ "d/*", "d/.x", true },
		{ "*", "", false },
		{ "a?c", "abc", true },
		{ "a?c", "a/c", false },
		{ "a?c", "ac", false },
		{ "?", "\xc3\xa9", true },		/* one character, not byte */
		{ "[abc].o", "b.o", true },
		{ "[abc].o", "d.o", false },
		{ "[a-c].o", "c.o", true },
		{ "[!a-c].o", "c.o", false },
		{ "[^a-c].o", "d.o", true },
		{ "[]]", "]", true },
		{ "x[", "x[", false },			/* malformed */
		{ "\\*", "*", true },
		{ "\\*", "a", false },
		{ "**", "a", true },
		{ "**", "a/b/c", true },
		{ "**", ".git/config", true },
		{ "**/*.txt", "a.txt", true },		/* at any depth */
		{ "**/*.txt", "d/e/a.txt", true },
		{ "**/*.txt", "d/e/a.txt.md", false },
		{ "a/**/b", "a/b", true },		/* zero directories */
		{ "a/**/b", "a/x/b", true },
		{ "a/**/b", "a/x/y/b", true },
		{ "a/**/b", "a/x/y/c", false },
		{ "a/**/b", "ab", false },
		{ "a/**", "a", true },			/* trailing "**" */
		{ "a/**", "a/x", true },
		{ "a/**", "a/x/y", true },
		{ "a/**", "ab/x", false },
		{ "**/**/c", "c", true },
		{ "a**b", "axyb", true },		/* "**" inside a segment is '*' */
		{ "a**b", "ax/yb", false },
		{ "*/*", "a/b", true },
		{ "*/*", "a", false },
		{ "*/*", "a/b/c", false },
		{ "foo/**/*/*.*", "foo/bar/f.txt", true },
		{ "foo/**/*/*.*", "foo/f.txt", false },
		{ "{a,b}.txt", "b.txt", true },
		{ "{a,b}.txt", "c.txt", false },
		{ "x/{a,b/{c,d}}", "x/b/d", true },
		{ "{a", "{a", false },			/* malformed */
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (file_glob_match(t[i].pattern, t[i].path) != t[i].match)
			fail_msg("\"%s\" against \"%s\": expected %s",
			    t[i].pattern, t[i].path, t[i].match ? "a match" :
			    "no match");
}

static void
test_plain_file(void **state)
{
	(void)state;
	expect((const char *[]){ "a.txt", NULL }, NULL, "a.txt\n");
	expect((const char *[]){ ".hidden", NULL }, NULL, ".hidden\n");
	/* A file alone does not bring its parent directories. */
	expect((const char *[]){ "dir/sub/y.txt", NULL }, NULL,
	    "dir/sub/y.txt\n");
	/* A symlink to a file is the link. */
	expect((const char *[]){ "flink", NULL }, NULL, "flink\n");
}

static void
test_directory(void **state)
{
	static const char tree[] = "dir\ndir/sub\ndir/sub/y.txt\n"
	    "dir/sub/z.log\ndir/x.txt\n";

	(void)state;
	expect((const char *[]){ "dir", NULL }, NULL, tree);
	/* Cleaned lexically. */
	expect((const char *[]){ "./dir//", NULL }, NULL, tree);
	expect((const char *[]){ "dir/sub/../", NULL }, NULL, tree);
	/* The project itself is no entry; everything in it is. */
	expect((const char *[]){ "dir-b/..", NULL }, NULL,
	    ".hidden\na.txt\nb.c\ndir\ndir/sub\ndir/sub/y.txt\ndir/sub/z.log\n"
	    "dir/x.txt\ndir-b\ndir-b/w.txt\nflink\nlink\nout\nout/keep.txt\n"
	    "out/tmp\nout/tmp/deep\nout/tmp/deep/t2\nout/tmp/t1\n");
}

static void
test_globs(void **state)
{
	(void)state;
	expect((const char *[]){ "**/*.txt", NULL }, NULL,
	    "a.txt\ndir/sub/y.txt\ndir/x.txt\ndir-b/w.txt\nout/keep.txt\n");
	expect((const char *[]){ "dir*/*.txt", NULL }, NULL,
	    "dir/x.txt\ndir-b/w.txt\n");
	expect((const char *[]){ "dir/**/*.{txt,log}", NULL }, NULL,
	    "dir/sub/y.txt\ndir/sub/z.log\ndir/x.txt\n");
	expect((const char *[]){ "[ab].*", NULL }, NULL, "a.txt\nb.c\n");
	/* "*" takes dotfiles and directories, which bring their trees. */
	expect((const char *[]){ "out/*", NULL }, NULL,
	    "out/keep.txt\nout/tmp\nout/tmp/deep\nout/tmp/deep/t2\n"
	    "out/tmp/t1\n");
	expect((const char *[]){ ".h*", NULL }, NULL, ".hidden\n");
	/* A trailing "**" takes the directory itself too. */
	expect((const char *[]){ "out/tmp/**", NULL }, NULL,
	    "out/tmp\nout/tmp/deep\nout/tmp/deep/t2\nout/tmp/t1\n");
}

static void
test_excludes(void **state)
{
	(void)state;
	expect((const char *[]){ "dir", NULL },
	    (const char *[]){ "dir/sub/z.log", NULL },
	    "dir\ndir/sub\ndir/sub/y.txt\ndir/x.txt\n");
	expect((const char *[]){ "**/*.txt", NULL },
	    (const char *[]){ "**/x.txt", "dir-b/*", NULL },
	    "a.txt\ndir/sub/y.txt\nout/keep.txt\n");
	/* A tree goes with "**". */
	expect((const char *[]){ "out", NULL },
	    (const char *[]){ "out/tmp/**", NULL },
	    "out\nout/keep.txt\n");
	/* A directory alone loses its entry only, as in gitlab-runner. */
	expect((const char *[]){ "out", NULL },
	    (const char *[]){ "out/tmp", NULL },
	    "out\nout/keep.txt\nout/tmp/deep\nout/tmp/deep/t2\nout/tmp/t1\n");
	/* Absolute excludes inside the project are fine. */
	{
		char *x = xasprintf("%s/out/tmp/**", proj);

		expect((const char *[]){ "out", NULL },
		    (const char *[]){ x, NULL }, "out\nout/keep.txt\n");
		free(x);
	}
}

static void
test_warnings(void **state)
{
	struct result r;
	char *want;

	(void)state;
	r = run((const char *[]){ "nope/*.c", "a.txt", NULL }, NULL);
	assert_string_equal(r.files, "a.txt\n");
	want = xasprintf("nope/*.c: no matching files. Ensure that the "
	    "artifact path is relative to the working directory (%s)\n", proj);
	assert_string_equal(r.warnings, want);
	free(want);
	result_free(&r);

	/* Everything excluded is nothing found. */
	r = run((const char *[]){ "**", NULL }, (const char *[]){ "**", NULL });
	assert_string_equal(r.files, "");
	want = xasprintf("**: no matching files. Ensure that the artifact "
	    "path is relative to the working directory (%s)\n", proj);
	assert_string_equal(r.warnings, want);
	free(want);
	result_free(&r);

	r = run((const char *[]){ "", "x[", NULL }, NULL);
	assert_string_equal(r.files, "");
	assert_string_equal(r.warnings, "No matching files. Path is empty.\n"
	    "x[: syntax error in pattern\n");
	result_free(&r);

	r = run((const char *[]){ "a.txt", NULL },
	    (const char *[]){ "../*.txt", NULL });
	assert_string_equal(r.files, "a.txt\n");
	assert_string_equal(r.warnings, "isExcluded: artifact path is not a "
	    "subpath of project directory: ../*.txt\n");
	result_free(&r);
}

static void
test_outside(void **state)
{
	char *abs_in, *abs_out, *back, *want;
	struct result r;

	(void)state;
	abs_in = xasprintf("%s/dir/x.txt", proj);
	abs_out = xasprintf("%s/outside/secret.txt", root);
	/* Out and back in is inside, as gitlab-runner cleans it. */
	back = xasprintf("../%s/dir-b/*.txt", basename(proj));

	expect((const char *[]){ abs_in, NULL }, NULL, "dir/x.txt\n");
	expect((const char *[]){ back, NULL }, NULL, "dir-b/w.txt\n");

	r = run((const char *[]){ abs_out, "../outside", "dir/../../x",
	    "/**/secret.txt", NULL }, NULL);
	assert_string_equal(r.files, "");
	want = xasprintf(
	    "processPath: artifact path is not a subpath of project directory: %s\n"
	    "processPath: artifact path is not a subpath of project directory: ../outside\n"
	    "processPath: artifact path is not a subpath of project directory: dir/../../x\n"
	    "processPath: artifact path is not a subpath of project directory: /**/secret.txt\n",
	    abs_out);
	assert_string_equal(r.warnings, want);
	free(want);
	result_free(&r);
	free(abs_in);
	free(abs_out);
	free(back);
}

static void
test_symlinks(void **state)
{
	struct result r;
	char *want;

	(void)state;
	/* The link itself, not what it points to. */
	expect((const char *[]){ "link", NULL }, NULL, "link\n");
	expect((const char *[]){ "l*", NULL }, NULL, "link\n");

	/* Nothing is reached through it. */
	r = run((const char *[]){ "link/secret.txt", "link/*", NULL }, NULL);
	assert_string_equal(r.files, "");
	want = xasprintf("link/secret.txt: no matching files. Ensure that the "
	    "artifact path is relative to the working directory (%s)\n"
	    "link/*: no matching files. Ensure that the artifact path is "
	    "relative to the working directory (%s)\n", proj, proj);
	assert_string_equal(r.warnings, want);
	free(want);
	result_free(&r);

	r = run((const char *[]){ "**", NULL }, NULL);
	assert_null(strstr(r.files, "secret"));
	assert_non_null(strstr(r.files, "\nlink\n"));
	result_free(&r);
}

static void
test_duplicates_and_order(void **state)
{
	(void)state;
	expect((const char *[]){ "dir/x.txt", "a.txt", "dir", "*.txt",
	    "a.txt", "./a.txt", "dir/**", "dir-b", NULL }, NULL,
	    "a.txt\ndir\ndir/sub\ndir/sub/y.txt\ndir/sub/z.log\ndir/x.txt\n"
	    "dir-b\ndir-b/w.txt\n");

	/* A directory right before its contents, "x/..." before "x-" and "x.". */
	sh("cd '%s' && mkdir -p ord/x/y && touch ord/x/y/z ord/x-a ord/x.b "
	    "ord/x0 ord/X", proj);
	expect((const char *[]){ "ord", NULL }, NULL,
	    "ord\nord/X\nord/x\nord/x/y\nord/x/y/z\nord/x-a\nord/x.b\nord/x0\n");
	sh("rm -rf '%s/ord'", proj);
}

static void
test_untracked(void **state)
{
	char *repo = xasprintf("%s/repo", root), *want;
	struct result r;

	(void)state;
	sh("mkdir -p '%s' && cd '%s' && git init -q && "
	    "echo '*.ign' > .gitignore && echo t > tracked.txt && "
	    "git add .gitignore tracked.txt && git commit -q -m one && "
	    "echo n > new.txt && echo i > junk.ign && mkdir -p newdir/deep && "
	    "touch newdir/deep/n1 newdir/n2 && ln -s tracked.txt newlink",
	    repo, repo);

	/* Ignored files too; an untracked directory's files one by one. */
	r = run_in(repo, NULL, NULL, true);
	assert_string_equal(r.files, "junk.ign\nnew.txt\nnewdir/deep/n1\n"
	    "newdir/n2\nnewlink\n");
	assert_string_equal(r.warnings, "");
	result_free(&r);

	/* Excludes apply; paths and untracked add up. */
	r = run_in(repo, (const char *[]){ "tracked.txt", "new.txt", NULL },
	    (const char *[]){ "**/*.ign", "newdir/deep/**", NULL }, true);
	assert_string_equal(r.files, "new.txt\nnewdir/n2\nnewlink\n"
	    "tracked.txt\n");
	assert_string_equal(r.warnings, "");
	result_free(&r);

	/* Nothing untracked (the ignored file is, until it is gone). */
	sh("cd '%s' && git add -A && git commit -q -m two", repo);
	r = run_in(repo, NULL, NULL, true);
	assert_string_equal(r.files, "junk.ign\n");
	result_free(&r);
	sh("rm '%s/junk.ign'", repo);
	r = run_in(repo, NULL, NULL, true);
	assert_string_equal(r.files, "");
	assert_string_equal(r.warnings, "untracked: no files\n");
	result_free(&r);

	/* Not a repository: git's words, then the status, and the rest stands. */
	sh("rm -rf '%s/.git'", repo);
	setenv("GIT_CEILING_DIRECTORIES", root, 1);
	r = run_in(repo, (const char *[]){ "new.txt", NULL }, NULL, true);
	unsetenv("GIT_CEILING_DIRECTORIES");
	assert_string_equal(r.files, "new.txt\n");
	want = strstr(r.warnings, "untracked: exit status 128\n");
	assert_non_null(want);
	assert_string_equal(want, "untracked: exit status 128\n");
	assert_non_null(strstr(r.warnings, "not a git repository"));
	result_free(&r);

	/* No git at all. */
	{
		char *path = xstrdup(getenv("PATH"));

		setenv("PATH", root, 1);
		r = run_in(repo, (const char *[]){ "new.txt", NULL }, NULL,
		    true);
		setenv("PATH", path, 1);
		free(path);
	}
	assert_string_equal(r.files, "new.txt\n");
	assert_string_equal(r.warnings,
	    "untracked: git: No such file or directory\n");
	result_free(&r);
	free(repo);
}

static int
count_fds(void)
{
	struct dirent *de;
	DIR *d;
	int n = 0;

	assert_non_null(d = opendir("/proc/self/fd"));
	while ((de = readdir(d)) != NULL)
		n++;
	closedir(d);
	return n;
}

/* Every descriptor and child is gone after a selection, git or not. */
static void
test_no_leaks(void **state)
{
	struct result r;
	int before;

	(void)state;
	before = count_fds();
	r = run_in(proj, (const char *[]){ "**", "dir", "nope", NULL },
	    (const char *[]){ "out/**", NULL }, true);
	result_free(&r);
	assert_int_equal(count_fds(), before);
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

static void
test_errors(void **state)
{
	struct file_select fs = { 0 };
	struct strv out = { 0 };
	char err[256], *missing;

	(void)state;
	missing = xasprintf("%s/missing", root);
	fs.project_dir = missing;
	assert_int_equal(file_select(&fs, &out, NULL, NULL, err, sizeof(err)),
	    -1);
	assert_non_null(strstr(err, "No such file or directory"));
	assert_null(out.v);

	fs.project_dir = "relative";
	assert_int_equal(file_select(&fs, &out, NULL, NULL, err, sizeof(err)),
	    -1);
	assert_string_equal(err, "project directory is not absolute: relative");
	free(missing);

	/* Nothing asked is nothing selected, silently. */
	fs.project_dir = proj;
	assert_int_equal(file_select(&fs, &out, NULL, NULL, err, sizeof(err)),
	    0);
	assert_int_equal(out.n, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_glob_match),
		cmocka_unit_test(test_plain_file),
		cmocka_unit_test(test_directory),
		cmocka_unit_test(test_globs),
		cmocka_unit_test(test_excludes),
		cmocka_unit_test(test_warnings),
		cmocka_unit_test(test_outside),
		cmocka_unit_test(test_symlinks),
		cmocka_unit_test(test_duplicates_and_order),
		cmocka_unit_test(test_untracked),
		cmocka_unit_test(test_no_leaks),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

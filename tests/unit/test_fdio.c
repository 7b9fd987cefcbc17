/*
 * Unit tests for fd_replace_file(): the new bytes with the mode asked, a
 * new inode over the old file (a reader never sees it half-written), no
 * temp file left, and on failure errno and the old file untouched.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/fdio.h"

static int
entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

static void
read_back(const char *path, const char *want)
{
	char got[64] = { 0 };
	FILE *f = fopen(path, "r");

	assert_non_null(f);
	assert_int_equal(fread(got, 1, sizeof(got) - 1, f), strlen(want));
	fclose(f);
	assert_string_equal(got, want);
}

static void
test_replace_file(void **state)
{
	char root[] = "/tmp/test_fdio.XXXXXX", path[256], bad[256], cmd[300];
	struct stat before, after;

	(void)state;
	assert_non_null(mkdtemp(root));
	snprintf(path, sizeof(path), "%s/f", root);

	assert_int_equal(fd_replace_file(path, "one\n", 4, 0600), 0);
	read_back(path, "one\n");
	assert_int_equal(stat(path, &before), 0);
	assert_int_equal(before.st_mode & 0777, 0600);

	assert_int_equal(fd_replace_file(path, "two two\n", 8, 0644), 0);
	read_back(path, "two two\n");
	assert_int_equal(stat(path, &after), 0);
	assert_int_equal(after.st_mode & 0777, 0644);
	assert_true(after.st_ino != before.st_ino);
	assert_int_equal(entries(root), 1);

	/* A directory in the way of the rename: errno, the old file, no temp left. */
	snprintf(bad, sizeof(bad), "%s/d", root);
	assert_int_equal(mkdir(bad, 0700), 0);
	assert_int_equal(fd_replace_file(bad, "x", 1, 0600), -1);
	assert_int_equal(errno, EISDIR);
	assert_int_equal(entries(root), 2);
	read_back(path, "two two\n");

	/* No directory at all. */
	snprintf(bad, sizeof(bad), "%s/missing/f", root);
	assert_int_equal(fd_replace_file(bad, "x", 1, 0600), -1);
	assert_int_equal(errno, ENOENT);

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_replace_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

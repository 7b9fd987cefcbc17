/*
 * Unit tests for mkdirs(): missing parents made, existing ones left alone,
 * *created only for a path this call made, errors with errno.
 */
#include <sys/stat.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/mkdirs.h"

static void
test_mkdirs(void **state)
{
	char root[] = "/tmp/test_mkdirs.XXXXXX", path[256], file[256];
	struct stat st;
	bool created;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(root));
	snprintf(path, sizeof(path), "%s/a/b/c", root);

	assert_int_equal(mkdirs(path, 0750, &created), 0);
	assert_true(created);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0750 & ~umask(umask(0)));

	/* Again: nothing to do, and it says so. */
	assert_int_equal(mkdirs(path, 0750, &created), 0);
	assert_false(created);
	assert_int_equal(mkdirs(path, 0750, NULL), 0);

	/* A file in the way is an error with errno. */
	snprintf(file, sizeof(file), "%s/file", root);
	assert_non_null(f = fopen(file, "w"));
	fclose(f);
	snprintf(path, sizeof(path), "%s/file/below", root);
	created = true;
	assert_int_equal(mkdirs(path, 0750, &created), -1);
	assert_int_equal(errno, ENOTDIR);
	assert_false(created);

	unlink(file);
	snprintf(path, sizeof(path), "rm -rf '%s'", root);
	assert_int_equal(system(path), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mkdirs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Writing TOML back (runner/toml_write.c): exact layout for what
 * gitlab-runner writes, and parse -> write -> parse equality over every
 * valid document of ../shared (toml-test and the config samples).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/buf.h"
#include "lib/xmalloc.h"
#include "runner/register_flags.h"
#include "runner/toml.h"

static struct toml_value *
parse_ok(const char *text)
{
	struct toml_error err;
	struct toml_value *v = toml_parse(text, strlen(text), &err);

	if (v == NULL)
		fail_msg("parse: %d:%d: %s\n%s", err.line, err.column, err.msg, text);
	return v;
}

static char *
write_ok(const struct toml_value *root)
{
	struct buf out;

	buf_init(&out, BUF_UNLIMITED);
	assert_int_equal(toml_write(root, &out), 0);
	return buf_detach(&out, NULL);
}

/* Written text, re-parsed, equals the tree it came from. */
static void
assert_round_trip(const struct toml_value *root)
{
	struct toml_error err;
	struct toml_value *again;
	char *text = write_ok(root);

	again = toml_parse(text, strlen(text), &err);
	if (again == NULL)
		fail_msg("re-parse: %d:%d: %s\n%s", err.line, err.column, err.msg, text);
	if (!toml_equal(root, again))
		fail_msg("round trip changed the document:\n%s", text);
	toml_free(again);
	free(text);
}

static void
assert_writes_as(const char *in, const char *want)
{
	struct toml_value *root = parse_ok(in);
	char *text = write_ok(root);

	if (strcmp(text, want) != 0)
		fail_msg("wrote:\n%s\nwanted:\n%s", text, want);
	free(text);
	toml_free(root);
}

/* protocol.md 2.7: what gitlab-runner's register writes, to the byte. */
static const char register_output[] =
    "concurrent = 1\n"
    "check_interval = 0\n"
    "connection_max_age = \"15m0s\"\n"
    "shutdown_timeout = 0\n"
    "\n"
    "[session_server]\n"
    "  session_timeout = 1800\n"
    "\n"
    "[[runners]]\n"
    "  name = \"my-host\"\n"
    "  url = \"http://gitlab.example.com/\"\n"
    "  id = 0\n"
    "  token = \"test-runner-token\"\n"
    "  token_obtained_at = 2026-08-21T10:00:00Z\n"
    "  token_expires_at = 0001-01-01T00:00:00Z\n"
    "  executor = \"shell\"\n"
    "  [runners.cache]\n"
    "    MaxUploadedArchiveSize = 0\n"
    "    [runners.cache.s3]\n"
    "      AssumeRoleMaxConcurrency = 0\n"
    "    [runners.cache.gcs]\n"
    "    [runners.cache.azure]\n";

static void
test_gitlab_runner_layout_is_kept(void **state)
{
	(void)state;
	assert_writes_as(register_output, register_output);
}

static void
test_sections_follow_plain_keys(void **state)
{
	(void)state;
	/* Keys after a sub-table in the source still belong to the parent. */
	assert_writes_as("[a]\nx = 1\n[a.b]\ny = 2\n[c]\n",
	    "[a]\n  x = 1\n  [a.b]\n    y = 2\n\n[c]\n");
	assert_writes_as("[x.y.z]\nk = 1\n", "    [x.y.z]\n      k = 1\n");
}

static void
test_dotted_keys_stay_dotted(void **state)
{
	(void)state;
	assert_writes_as("a.b.c = 1\na.d = \"x\"\n", "a.b.c = 1\na.d = \"x\"\n");
	assert_writes_as("[fruit]\napple.color = \"red\"\n[fruit.apple.texture]\nsmooth = true\n",
	    "[fruit]\n  apple.color = \"red\"\n    [fruit.apple.texture]\n      smooth = true\n");
}

static void
test_inline_values(void **state)
{
	(void)state;
	assert_writes_as("t = { a = 1, b = { c = [1, 2] } }\ne = {}\narr = [[1], [\"x\"], []]\n",
	    "t = { a = 1, b = { c = [1, 2] } }\ne = {}\narr = [[1], [\"x\"], []]\n");
	assert_writes_as("a = [{ x = 1 }, { y = 2 }]\n", "a = [{ x = 1 }, { y = 2 }]\n");
}

static void
test_strings_and_keys_are_escaped(void **state)
{
	struct toml_value *root;

	(void)state;
	assert_writes_as("s = '''\nline1\n\"quoted\" \\ tab\there'''\n",
	    "s = \"line1\\n\\\"quoted\\\" \\\\ tab\\there\"\n");
	assert_writes_as("\"\" = 1\n\"a b\" = 2\n\"a.b\" = 3\n\"é\" = 4\nbare-key_1 = 5\n",
	    "\"\" = 1\n\"a b\" = 2\n\"a.b\" = 3\n\"é\" = 4\nbare-key_1 = 5\n");
	assert_writes_as("s = \"\\u0000\\u001F\\u007F\\b\\f\\r\"\n",
	    "s = \"\\u0000\\u001F\\u007F\\b\\f\\r\"\n");

	root = parse_ok("\"\\u0000key\" = \"nul\\u0000inside\"\n");
	assert_round_trip(root);
	toml_free(root);
}

static void
test_numbers(void **state)
{
	(void)state;
	assert_writes_as("a = 0x10\nb = -9223372036854775808\nc = 1_000\n",
	    "a = 16\nb = -9223372036854775808\nc = 1000\n");
	assert_writes_as("a = 1.5\nb = 3.0\nc = 1e300\nd = -0.0\ne = inf\nf = -inf\ng = nan\nh = 0.1\n",
	    "a = 1.5\nb = 3.0\nc = 1e+300\nd = -0.0\ne = inf\nf = -inf\ng = nan\nh = 0.1\n");
}

static void
test_datetimes(void **state)
{
	(void)state;
	assert_writes_as(
	    "a = 1979-05-27T07:32:00Z\nb = 1979-05-27 07:32:00.999999-07:00\n"
	    "c = 1979-05-27T07:32:00.5\nd = 1979-05-27\ne = 07:32:00.120\n"
	    "f = 0001-01-01t00:00:00z\ng = 2000-01-01T00:00:00+00:00\n",
	    "a = 1979-05-27T07:32:00Z\nb = 1979-05-27T07:32:00.999999-07:00\n"
	    "c = 1979-05-27T07:32:00.5\nd = 1979-05-27\ne = 07:32:00.120\n"
	    "f = 0001-01-01T00:00:00Z\ng = 2000-01-01T00:00:00Z\n");
}

static void
test_built_trees(void **state)
{
	struct toml_value *root, *runners, *entry, *empty;
	struct toml_datetime dt = { .year = 2026, .month = 1, .day = 2, .hour = 3,
	    .minute = 4, .second = 5, .nanosecond = 250000000, .offset_z = true };
	char *text;

	(void)state;
	root = toml_new_table(TOML_TABLE_HEADER);
	toml_table_set(root, "concurrent", 10, toml_new_integer(1));
	runners = toml_new_array();
	runners->u.array.of_tables = true;
	entry = toml_new_table(TOML_TABLE_HEADER);
	toml_table_set(entry, "name", 4, toml_new_string("n", 1));
	toml_table_set(entry, "token_obtained_at", 17,
	    toml_new_datetime(TOML_DATETIME, &dt));
	empty = toml_new_table(TOML_TABLE_IMPLICIT);
	toml_table_set(entry, "custom_build_dir", 16, empty);
	toml_array_push(runners, entry);
	toml_table_set(root, "runners", 7, runners);
	text = write_ok(root);
	assert_string_equal(text,
	    "concurrent = 1\n\n[[runners]]\n  name = \"n\"\n"
	    "  token_obtained_at = 2026-01-02T03:04:05.25Z\n"
	    "  [runners.custom_build_dir]\n");
	free(text);
	assert_round_trip(root);
	toml_free(root);
}

static void
test_invalid_utf8_is_refused(void **state)
{
	struct toml_value *root = toml_new_table(TOML_TABLE_HEADER);
	struct buf out;

	(void)state;
	toml_table_set(root, "s", 1, toml_new_string("ok\xc3\x28", 4));
	buf_init(&out, BUF_UNLIMITED);
	assert_int_equal(toml_write(root, &out), -EILSEQ);
	buf_release(&out);
	toml_free(root);
}

static void
test_cap_is_reported(void **state)
{
	struct toml_value *root = parse_ok(register_output);
	struct buf out;

	(void)state;
	buf_init(&out, 40);
	assert_int_equal(toml_write(root, &out), -ENOSPC);
	assert_true(out.len <= 40);
	buf_release(&out);
	toml_free(root);
}

static const char *
shared_dir(void)
{
	const char *d = getenv("RUNNER_SHARED_DIR");

	return d != NULL && *d != '\0' ? d : "../shared";
}

static char *
slurp(const char *path, size_t *len)
{
	struct buf b;
	char chunk[8192];
	size_t n;
	FILE *fp = fopen(path, "rb");

	assert_non_null(fp);
	buf_init(&b, BUF_UNLIMITED);
	while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0)
		buf_append(&b, chunk, n);
	fclose(fp);
	return buf_detach(&b, len);
}

/* Round-trip every .toml file below dir that parses; count them. */
static int
round_trip_dir(const char *dir)
{
	struct dirent *de;
	struct toml_error err;
	struct toml_value *root;
	struct stat st;
	DIR *d = opendir(dir);
	char *path, *data;
	size_t len;
	int n = 0;

	if (d == NULL)
		fail_msg("cannot open %s: set RUNNER_SHARED_DIR", dir);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		path = xasprintf("%s/%s", dir, de->d_name);
		assert_int_equal(stat(path, &st), 0);
		if (S_ISDIR(st.st_mode)) {
			n += round_trip_dir(path);
		} else if (strlen(de->d_name) > 5 &&
		    strcmp(de->d_name + strlen(de->d_name) - 5, ".toml") == 0) {
			data = slurp(path, &len);
			if ((root = toml_parse(data, len, &err)) != NULL) {
				assert_round_trip(root);
				toml_free(root);
				n++;
			}
			free(data);
		}
		free(path);
	}
	closedir(d);
	return n;
}

static void
test_round_trip_shared_documents(void **state)
{
	char *dir;
	int n;

	(void)state;
	dir = xasprintf("%s/toml-test/valid", shared_dir());
	n = round_trip_dir(dir);
	free(dir);
	assert_int_equal(n, 210);
	dir = xasprintf("%s/config-samples", shared_dir());
	n = round_trip_dir(dir);
	free(dir);
	assert_int_equal(n, 33);
}

/* The new [[runners]] entry `register` writes from register_flags.def. */
static char *
entry_text(struct reg_value *v, const char *executor, const struct toml_value *tmpl)
{
	struct toml_value *doc = toml_new_table(TOML_TABLE_HEADER), *arr = toml_new_array();
	struct buf out;

	arr->u.array.of_tables = true;
	toml_array_push(arr, reg_entry_build(v, executor, tmpl));
	toml_table_set(doc, "runners", 7, arr);
	buf_init(&out, BUF_UNLIMITED);
	assert_int_equal(toml_write(doc, &out), 0);
	toml_free(doc);
	return buf_detach(&out, NULL);
}

static void
test_register_entry_is_gitlab_runners_layout(void **state)
{
	static struct reg_value v[REG_N];
	char *text;

	(void)state;
	memset(v, 0, sizeof(v));
	v[REG_DESCRIPTION] = (struct reg_value){ .s = "n", .given = true };
	v[REG_URL] = (struct reg_value){ .s = "https://gitlab.example.com/", .given = true };
	v[REG_TOKEN] = (struct reg_value){ .s = "glrt-x", .given = true };
	v[REG_EXECUTOR] = (struct reg_value){ .s = "shell", .given = true };
	v[REG_K_ID] = (struct reg_value){ .i = 12345, .given = true };
	v[REG_CACHE_S3_BUCKET_NAME] = (struct reg_value){ .s = "b", .given = true };
	/* Another executor's: gitlab-runner drops it. */
	v[REG_DOCKER_IMAGE] = (struct reg_value){ .s = "alpine", .given = true };
	strv_push(&v[REG_FEATURE_FLAGS].v, "FF_TEST_1:true");
	v[REG_FEATURE_FLAGS].given = true;
	text = entry_text(v, "shell", NULL);
	assert_string_equal(text,
	    "[[runners]]\n"
	    "  name = \"n\"\n"
	    "  url = \"https://gitlab.example.com/\"\n"
	    "  id = 12345\n"
	    "  token = \"glrt-x\"\n"
	    "  token_obtained_at = 0001-01-01T00:00:00Z\n"
	    "  token_expires_at = 0001-01-01T00:00:00Z\n"
	    "  executor = \"shell\"\n"
	    "  [runners.cache]\n"
	    "    MaxUploadedArchiveSize = 0\n"
	    "    [runners.cache.s3]\n"
	    "      BucketName = \"b\"\n"
	    "      AssumeRoleMaxConcurrency = 0\n"
	    "    [runners.cache.gcs]\n"
	    "    [runners.cache.azure]\n"
	    "  [runners.feature_flags]\n"
	    "    FF_TEST_1 = true\n");
	free(text);
	/* The custom executor's table, with the key gitlab-runner always writes. */
	v[REG_EXECUTOR].s = "custom";
	text = entry_text(v, "custom", NULL);
	assert_non_null(strstr(text, "  [runners.custom]\n    run_exec = \"\"\n"));
	assert_null(strstr(text, "docker"));
	free(text);
	strv_release(&v[REG_FEATURE_FLAGS].v);
}

static void
test_register_flag_values_are_checked(void **state)
{
	static struct reg_value v[REG_N];
	char *cause = NULL;

	(void)state;
	memset(v, 0, sizeof(v));
	assert_int_equal(reg_values_check(v, &cause), 0);
	v[REG_UNHEALTHY_INTERVAL] = (struct reg_value){ .s = "1hour", .given = true };
	assert_int_equal(reg_values_check(v, &cause), -1);
	assert_string_equal(cause, "--unhealthy-interval: \"1hour\" is not a duration");
	free(cause);
	v[REG_UNHEALTHY_INTERVAL].s = "1h30m";
	strv_push(&v[REG_FEATURE_FLAGS].v, "FF_X:maybe");
	v[REG_FEATURE_FLAGS].given = true;
	assert_int_equal(reg_values_check(v, &cause), -1);
	assert_non_null(strstr(cause, "not true or false"));
	free(cause);
	strv_release(&v[REG_FEATURE_FLAGS].v);
	assert_true(reg_executor_known("docker+machine"));
	assert_false(reg_executor_known("docker-ssh"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gitlab_runner_layout_is_kept),
		cmocka_unit_test(test_sections_follow_plain_keys),
		cmocka_unit_test(test_dotted_keys_stay_dotted),
		cmocka_unit_test(test_inline_values),
		cmocka_unit_test(test_strings_and_keys_are_escaped),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_datetimes),
		cmocka_unit_test(test_built_trees),
		cmocka_unit_test(test_invalid_utf8_is_refused),
		cmocka_unit_test(test_cap_is_reported),
		cmocka_unit_test(test_round_trip_shared_documents),
		cmocka_unit_test(test_register_entry_is_gitlab_runners_layout),
		cmocka_unit_test(test_register_flag_values_are_checked),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

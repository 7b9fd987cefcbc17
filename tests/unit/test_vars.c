/* Job variables, build settings and directories (runner/vars.c). */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/xmalloc.h"
#include "runner/config.h"
#include "runner/script.h"
#include "runner/vars.h"

#define V(k, val)	{ .key = k, .value = val, .public_ = true }
#define MIN_NS		(60LL * 1000000000)

static struct api_job
job_with(struct api_variable *vars, size_t n)
{
	struct api_job job;

	memset(&job, 0, sizeof(job));
	job.variables = vars;
	job.n_variables = n;
	job.runner_info.timeout = 3600;
	return job;
}

static struct job_vars_input
input(void)
{
	struct job_vars_input in;

	memset(&in, 0, sizeof(in));
	in.short_token = "t3_AbCdEf";
	in.builds_dir = "/b";
	in.project_dir = "/b/t3_AbCdEf/0/g/p";
	in.tmp_dir = "/b/t3_AbCdEf/0/g/p.tmp";
	in.concurrent_id = 3;
	in.concurrent_project_id = 0;
	in.shared_env = true;
	in.version = "1.2.3";
	in.revision = "abcdef";
	in.arch = "linux/amd64";
	return in;
}

static size_t
index_of(const struct job_vars *v, const char *key, size_t from)
{
	size_t i;

	for (i = from; i < v->n; i++)
		if (strcmp(v->v[i].key, key) == 0)
			return i;
	return (size_t)-1;
}

static size_t
count_of(const struct job_vars *v, const char *key)
{
	size_t i, n = 0;

	for (i = 0; i < v->n; i++)
		n += strcmp(v->v[i].key, key) == 0;
	return n;
}

static bool
has_warning(const struct strv *w, const char *part)
{
	size_t i;

	for (i = 0; i < w->n; i++)
		if (strstr(w->v[i], part) != NULL)
			return true;
	return false;
}

static void
test_order(void **state)
{
	struct api_variable pv[] = { V("CI_JOB_ID", "42"), V("MY", "x") };
	struct api_job job = job_with(pv, 2);
	struct job_vars_input in = input();
	struct strv env = { 0 };
	struct job_vars v;
	static const char *const want[] = {
		"CI_JOB_IMAGE", "CI_RUNNER_SHORT_TOKEN", "E1", "E2", "CI_BUILDS_DIR",
		"CI_PROJECT_DIR", "CI_CONCURRENT_ID", "CI_CONCURRENT_PROJECT_ID",
		"CI_SERVER", "CI_JOB_STATUS", "CI_JOB_TIMEOUT", "CI_JOB_ID", "MY",
		"CI_SHARED_ENVIRONMENT", "CI_RUNNER_VERSION", "CI_RUNNER_REVISION",
		"CI_RUNNER_EXECUTABLE_ARCH", "RUNNER_TEMP_PROJECT_DIR",
	};
	static const char *const values[] = {
		"alpine:3", "t3_AbCdEf", "one", "two=2", "/b", "/b/t3_AbCdEf/0/g/p",
		"3", "0", "yes", "running", "3600", "42", "x", "true", "1.2.3",
		"abcdef", "linux/amd64", "/b/t3_AbCdEf/0/g/p.tmp",
	};
	size_t i, first;

	(void)state;
	job.image.present = true;
	job.image.name = "alpine:3";
	strv_push(&env, "E1=one");
	strv_push(&env, "NOEQUALS");
	strv_push(&env, "E2=two=2");
	in.environment = &env;
	job_vars_build(&v, &job, &in);

	assert_string_equal(v.v[0].key, "FF_NETWORK_PER_BUILD");
	for (first = 0; first < v.n && strncmp(v.v[first].key, "FF_", 3) == 0; first++)
		assert_true(strcmp(v.v[first].value, "true") == 0 ||
		    strcmp(v.v[first].value, "false") == 0);
	assert_true(first > 40);
	assert_string_equal(job_vars_get(&v, "FF_TIMESTAMPS"), "true");
	assert_string_equal(job_vars_get(&v, "FF_SCRIPT_SECTIONS"), "false");
	assert_int_equal(v.n - first, sizeof(want) / sizeof(want[0]));
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		assert_string_equal(v.v[first + i].key, want[i]);
		assert_string_equal(v.v[first + i].value, values[i]);
		assert_false(v.v[first + i].file);
	}
	assert_null(job_vars_get(&v, "NOEQUALS"));
	assert_null(job_vars_get(&v, "CI_SERVER_TLS_CA_FILE"));
	assert_int_equal(v.warnings.n, 0);
	job_vars_release(&v);

	/* No image, not shared, default timeout. */
	job.image.present = false;
	job.runner_info.timeout = 0;
	in.shared_env = false;
	in.environment = NULL;
	job_vars_build(&v, &job, &in);
	assert_null(job_vars_get(&v, "CI_JOB_IMAGE"));
	assert_null(job_vars_get(&v, "CI_SHARED_ENVIRONMENT"));
	assert_string_equal(job_vars_get(&v, "CI_DISPOSABLE_ENVIRONMENT"), "true");
	assert_string_equal(job_vars_get(&v, "CI_JOB_TIMEOUT"), "7200");
	job_vars_release(&v);
	in.job_timeout = 90;
	job_vars_build(&v, &job, &in);
	assert_string_equal(job_vars_get(&v, "CI_JOB_TIMEOUT"), "90");
	job_vars_release(&v);
	strv_release(&env);
}

static void
test_feature_flags(void **state)
{
	struct api_variable pv[] = {
		V("FF_TIMESTAMPS", "true"), V("FF_SCRIPT_SECTIONS", "1"),
		V("FF_USE_FASTZIP", "maybe"), V("FF_NOT_A_FLAG", "yes"),
	};
	struct config_flag flags[] = { { "FF_TIMESTAMPS", false } };
	struct runner_config rc;
	struct api_job job = job_with(pv, 4);
	struct job_vars_input in = input();
	struct job_vars v;

	(void)state;
	memset(&rc, 0, sizeof(rc));
	rc.feature_flags = flags;
	rc.n_feature_flags = 1;
	in.rc = &rc;
	job_vars_build(&v, &job, &in);
	/* config.toml wins over the job; the job wins over the default. */
	assert_string_equal(job_vars_get(&v, "FF_TIMESTAMPS"), "false");
	assert_string_equal(job_vars_get(&v, "FF_SCRIPT_SECTIONS"), "true");
	/* Unparsable: default, with a warning. */
	assert_string_equal(job_vars_get(&v, "FF_USE_FASTZIP"), "true");
	assert_true(has_warning(&v.warnings, "FF_USE_FASTZIP"));
	assert_int_equal(v.warnings.n, 1);
	/* Known flags appear once, in the flag block; unknown ones pass. */
	assert_int_equal(count_of(&v, "FF_TIMESTAMPS"), 1);
	assert_int_equal(count_of(&v, "FF_SCRIPT_SECTIONS"), 1);
	assert_string_equal(job_vars_get(&v, "FF_NOT_A_FLAG"), "yes");
	assert_true(index_of(&v, "FF_NOT_A_FLAG", 0) > index_of(&v, "CI_JOB_TIMEOUT", 0));
	job_vars_release(&v);
}

/* One flag of a job with one variable and the runner's environment and config. */
static bool
flag_of(const char *name, const char *job_value, const char *env_entry,
    const struct config_flag *cfg, size_t *warnings)
{
	struct api_variable pv[] = { V("OFF", "false"),
	    { .key = (char *)name, .value = (char *)job_value, .public_ = true } };
	struct api_job job = job_with(pv, job_value != NULL ? 2 : 1);
	struct job_vars_input in = input();
	struct config_flag flags[1];
	struct runner_config rc;
	struct strv env = { 0 };
	struct job_vars v;
	bool on;

	memset(&rc, 0, sizeof(rc));
	if (cfg != NULL) {
		flags[0] = *cfg;
		rc.feature_flags = flags;
		rc.n_feature_flags = 1;
	}
	in.rc = &rc;
	if (env_entry != NULL)
		strv_push(&env, env_entry);
	in.environment = &env;
	job_vars_build(&v, &job, &in);
	on = job_vars_feature_flag(&v, name);
	/* The job sees the resolved value, once, in the flag block. */
	assert_string_equal(v.v[index_of(&v, name, 0)].value, on ? "true" : "false");
	if (env_entry == NULL)
		assert_int_equal(count_of(&v, name), 1);
	if (warnings != NULL)
		*warnings = v.warnings.n;
	job_vars_release(&v);
	strv_release(&env);
	return on;
}

/*
 * build_test.go TestIsFeatureFlagOn, _SetWithRunnerVariables, _Precedence
 * and TestGetAllVariables_FeatureFlagResolution, with a real flag
 * (gitlab-runner's FF_TEST_FEATURE is not one, so its default is false):
 * config.toml, then the last of the environment and the job's variables,
 * expanded, then the default.
 */
static void
test_feature_flag_precedence(void **state)
{
	const struct config_flag on = { "FF_NETWORK_PER_BUILD", true };
	const struct config_flag ts_off = { "FF_TIMESTAMPS", false };
	const char *ff = "FF_NETWORK_PER_BUILD";	/* default false */
	size_t w;

	(void)state;
	assert_false(flag_of(ff, NULL, NULL, NULL, &w));
	assert_int_equal(w, 0);
	assert_false(flag_of(ff, "", NULL, NULL, &w));
	assert_int_equal(w, 1);		/* "": could not parse, as ParseBool */
	assert_true(flag_of(ff, "true", NULL, NULL, NULL));
	assert_true(flag_of(ff, "1", NULL, NULL, NULL));
	assert_false(flag_of(ff, "false", NULL, NULL, NULL));
	assert_false(flag_of(ff, "0", NULL, NULL, NULL));
	assert_false(flag_of(ff, "test", NULL, NULL, &w));
	assert_int_equal(w, 1);
	/* config.toml takes precedence over the job and the environment. */
	assert_true(flag_of(ff, "false", NULL, &on, NULL));
	assert_true(flag_of(ff, NULL, "FF_NETWORK_PER_BUILD=false", &on, NULL));
	/* The runner's environment sets a flag; the job's variable beats it. */
	assert_true(flag_of(ff, NULL, "FF_NETWORK_PER_BUILD=true", NULL, NULL));
	assert_false(flag_of(ff, NULL, "FF_NETWORK_PER_BUILD=false", NULL, NULL));
	assert_true(flag_of(ff, "true", "FF_NETWORK_PER_BUILD=false", NULL, NULL));
	assert_false(flag_of(ff, "false", "FF_NETWORK_PER_BUILD=true", NULL, NULL));
	/* Values are expanded first (getVariablesForFeatureFlagResolution). */
	assert_false(flag_of("FF_USE_FASTZIP", "$OFF", NULL, NULL, &w));
	assert_int_equal(w, 0);
	/* The job's own log flags, default on (issue 16). */
	assert_false(flag_of("FF_TIMESTAMPS", "false", NULL, NULL, NULL));
	assert_false(flag_of("FF_MASK_ALL_DEFAULT_TOKENS", "0", NULL, NULL, NULL));
	assert_false(flag_of("FF_TIMESTAMPS", NULL, "FF_TIMESTAMPS=false", NULL, NULL));
	assert_false(flag_of("FF_TIMESTAMPS", "true", NULL, &ts_off, NULL));
	assert_true(flag_of("FF_TIMESTAMPS", NULL, NULL, NULL, NULL));
}

static void
test_expansion(void **state)
{
	struct api_variable pv[] = {
		V("A", "a"),
		V("B", "$A-${A}"),
		V("DOLLAR", "$$x"),
		V("UNDEF", "[$NOPE][${NOPE}]"),
		V("SELF", "<$SELF>"),
		V("LOOP1", "$LOOP2"),
		V("LOOP2", "$LOOP1"),
		V("DIR", "$CI_PROJECT_DIR/sub"),
		V("LATER", "$C"),
		V("C", "c1"),
		V("C", "c2"),
		{ .key = "RAW", .value = "$A ${A}", .raw = true },
		V("ODD", "a$/b$ ${}x${A"),
		V("SPECIAL", "$1$*${#}$-"),
		V("TRAIL", "cost: 5$"),
		V("ENVONLY", "$HOME"),
	};
	struct api_job job = job_with(pv, sizeof(pv) / sizeof(pv[0]));
	struct job_vars_input in = input();
	struct job_vars v;

	(void)state;
	setenv("HOME", "/home/x", 1);
	job_vars_build(&v, &job, &in);
	assert_string_equal(job_vars_get(&v, "B"), "a-a");
	assert_string_equal(job_vars_get(&v, "DOLLAR"), "$x");
	assert_string_equal(job_vars_get(&v, "UNDEF"), "[][]");
	/* One pass against the unexpanded values: no recursion. */
	assert_string_equal(job_vars_get(&v, "SELF"), "<<$SELF>>");
	assert_string_equal(job_vars_get(&v, "LOOP1"), "$LOOP1");
	assert_string_equal(job_vars_get(&v, "LOOP2"), "$LOOP2");
	assert_string_equal(job_vars_get(&v, "DIR"), "/b/t3_AbCdEf/0/g/p/sub");
	/* The last value of a name, also one defined later. */
	assert_string_equal(job_vars_get(&v, "LATER"), "c2");
	assert_string_equal(job_vars_get(&v, "C"), "c2");
	assert_int_equal(count_of(&v, "C"), 2);
	assert_string_equal(job_vars_get(&v, "RAW"), "$A ${A}");
	/* Go's os.Expand: '$' before a non-name stays; "${}" and "${" are eaten. */
	assert_string_equal(job_vars_get(&v, "ODD"), "a$/b$ xA");
	assert_string_equal(job_vars_get(&v, "SPECIAL"), "");
	assert_string_equal(job_vars_get(&v, "TRAIL"), "cost: 5$");
	/* Never the process environment. */
	assert_string_equal(job_vars_get(&v, "ENVONLY"), "");

	/* A release step's line, against the final values. */
	{
		char *line = job_vars_expand(&v, "release $B ${C} $NOPE $$ 'q'");

		assert_string_equal(line, "release a-a c2  $ 'q'");
		free(line);
	}
	job_vars_release(&v);
}

/*
 * Go's os/env_test.go expandTests, with gitlab-runner's mapping
 * (spec.Variables.Get): "$" is "$"; "*", "#", "@", "!", "?" and the
 * digits are ""; any other name is a variable.  Then the cases of
 * variables_test.go TestSpecialVariablesExpansion and a few more of a
 * '$' that starts no name.
 */
static void
test_expansion_go_table(void **state)
{
	struct api_variable pv[] = {
		V("HOME", "/usr/gopher"), V("H", "(Value of H)"),
		V("home_1", "/usr/foo"), V("_", "underscore"),
	};
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "", "" },
		{ "$*", "" },
		{ "$$", "$" },
		{ "${*}", "" },
		{ "$1", "" },
		{ "${1}", "" },
		{ "now is the time", "now is the time" },
		{ "$HOME", "/usr/gopher" },
		{ "$home_1", "/usr/foo" },
		{ "${HOME}", "/usr/gopher" },
		{ "${H}OME", "(Value of H)OME" },
		{ "A$$$#$1$H$home_1*B", "A$(Value of H)/usr/foo*B" },
		{ "start$+middle$^end$", "start$+middle$^end$" },
		{ "mixed$|bag$$$", "mixed$|bag$$" },
		{ "$", "$" },
		{ "$}", "$}" },
		{ "${", "" },
		{ "${}", "" },
		/* TestSpecialVariablesExpansion */
		{ "$/dsa", "$/dsa" },
		{ "aa$@bb", "aabb" },
		{ "aa${@}bb", "aabb" },
		/* issue 16 */
		{ "a$|b", "a$|b" },
		{ "x$.y", "x$.y" },
		{ "$ $: $= $% $\"$'", "$ $: $= $% $\"$'" },
		{ "$_", "underscore" },
		{ "${$}${-}$-$!$?", "$" },
		{ "${HOME", "HOME" },
		{ "${HOME/x}", "" },
	};
	struct api_job job = job_with(pv, sizeof(pv) / sizeof(pv[0]));
	struct job_vars_input in = input();
	struct job_vars v;
	size_t i;

	(void)state;
	job_vars_build(&v, &job, &in);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = job_vars_expand(&v, cases[i].in);

		if (strcmp(got, cases[i].out) != 0)
			fail_msg("expand(\"%s\") = \"%s\", want \"%s\"", cases[i].in,
			    got, cases[i].out);
		free(got);
	}
	job_vars_release(&v);
}

/*
 * variables_test.go TestFileVariablesExpansion: a reference to a file
 * variable is its file's path under RUNNER_TEMP_PROJECT_DIR, never its
 * content; the file variable itself keeps its content.
 */
static void
test_file_variable_references(void **state)
{
	struct api_variable pv[] = {
		{ .key = "a_file_var", .value = "some top secret stuff", .file = true },
		V("ref_file_var", "${a_file_var}.txt"),
		V("regular_var", "bla bla bla"),
		V("ref_regular_var", "$regular_var"),
		{ .key = "SECRET_REF", .value = "$a_file_var", .masked = true },
	};
	struct api_job job = job_with(pv, sizeof(pv) / sizeof(pv[0]));
	struct job_vars_input in = input();
	struct strv masked = { 0 };
	struct job_vars v;
	char *s;
	size_t i;

	(void)state;
	job_vars_build(&v, &job, &in);
	i = index_of(&v, "a_file_var", 0);
	assert_true(v.v[i].file);
	assert_string_equal(v.v[i].value, "some top secret stuff");
	assert_string_equal(job_vars_get(&v, "ref_file_var"),
	    "/b/t3_AbCdEf/0/g/p.tmp/a_file_var.txt");
	assert_string_equal(job_vars_get(&v, "ref_regular_var"), "bla bla bla");
	s = job_vars_expand(&v, "${ref_file_var}.blammo");
	assert_string_equal(s, "/b/t3_AbCdEf/0/g/p.tmp/a_file_var.txt.blammo");
	free(s);
	s = job_vars_expand(&v, "${a_file_var}.blammo");
	assert_string_equal(s, "/b/t3_AbCdEf/0/g/p.tmp/a_file_var.blammo");
	free(s);
	/* The secret is never copied into a plain variable, masked or not. */
	job_vars_masked(&v, &masked);
	for (i = 0; i < masked.n; i++)
		assert_null(strstr(masked.v[i], "top secret"));
	strv_release(&masked);
	for (i = 0; i < v.n; i++)
		if (!v.v[i].file)
			assert_null(strstr(v.v[i].value, "top secret"));
	job_vars_release(&v);

	/* Without a temp dir yet (job_prepare's first pass): path.Join("", key). */
	in.tmp_dir = "";
	job_vars_build(&v, &job, &in);
	assert_string_equal(job_vars_get(&v, "ref_file_var"), "a_file_var.txt");
	job_vars_release(&v);
}

static char *
temp_file(const char *content)
{
	char *path = xstrdup("/tmp/test_vars.XXXXXX");
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	close(fd);
	return path;
}

static void
test_files_and_masks(void **state)
{
	struct api_variable pv[] = {
		{ .key = "KUBECONFIG", .value = "cfg $A", .file = true },
		{ .key = "SECRET", .value = "s3cr3t-$A", .masked = true },
		{ .key = "EMPTY_SECRET", .value = "", .masked = true },
		V("A", "a"),
	};
	struct api_job job = job_with(pv, 4);
	struct job_vars_input in = input();
	struct script_var *sv;
	struct strv masked = { 0 };
	struct job_vars v;
	char *ca, *cert, *key;
	size_t i, n;

	(void)state;
	ca = temp_file("-----BEGIN CERTIFICATE-----\nCA\n");
	cert = temp_file("CERT");
	key = temp_file("KEY");
	in.tls_ca_file = ca;
	in.tls_cert_file = cert;
	in.tls_key_file = key;
	job_vars_build(&v, &job, &in);

	i = index_of(&v, "CI_SERVER_TLS_CA_FILE", 0);
	assert_true(i > index_of(&v, "CI_JOB_TIMEOUT", 0));
	assert_true(i < index_of(&v, "KUBECONFIG", 0));
	assert_true(v.v[i].file);
	assert_string_equal(v.v[i].value, "-----BEGIN CERTIFICATE-----\nCA\n");
	assert_string_equal(v.v[i + 1].key, "CI_SERVER_TLS_CERT_FILE");
	assert_string_equal(v.v[i + 1].value, "CERT");
	assert_true(v.v[i + 1].file);
	assert_string_equal(v.v[i + 2].key, "CI_SERVER_TLS_KEY_FILE");
	assert_string_equal(v.v[i + 2].value, "KEY");
	assert_true(v.v[i + 2].file);

	i = index_of(&v, "KUBECONFIG", 0);
	assert_true(v.v[i].file);
	assert_string_equal(v.v[i].value, "cfg a");

	job_vars_masked(&v, &masked);
	assert_int_equal(masked.n, 1);
	assert_string_equal(masked.v[0], "s3cr3t-a");
	strv_release(&masked);

	n = job_vars_script(&v, &sv);
	assert_int_equal(n, v.n);
	for (i = 0; i < n; i++) {
		assert_ptr_equal(sv[i].key, v.v[i].key);
		assert_ptr_equal(sv[i].value, v.v[i].value);
		assert_int_equal(sv[i].file, v.v[i].file);
	}
	free(sv);
	job_vars_release(&v);

	/* A key without its cert: neither; an unreadable CA: a warning. */
	unlink(cert);
	unlink(ca);
	job_vars_build(&v, &job, &in);
	assert_null(job_vars_get(&v, "CI_SERVER_TLS_CA_FILE"));
	assert_null(job_vars_get(&v, "CI_SERVER_TLS_CERT_FILE"));
	assert_null(job_vars_get(&v, "CI_SERVER_TLS_KEY_FILE"));
	assert_true(has_warning(&v.warnings, "CI_SERVER_TLS_CA_FILE"));
	assert_true(has_warning(&v.warnings, "CI_SERVER_TLS_CERT_FILE"));
	job_vars_release(&v);

	unlink(key);
	free(ca);
	free(cert);
	free(key);
}

/* Settings of a job whose payload has exactly these variables. */
static void
settings_of(struct build_settings *s, struct api_variable *pv, size_t n,
    bool allow_fetch, const struct runner_config *rc)
{
	struct api_job job = job_with(pv, n);
	struct job_vars_input in = input();
	struct job_vars v;

	job.allow_git_fetch = allow_fetch;
	job.git_info.depth = 20;
	job_vars_build(&v, &job, &in);
	build_settings_parse(s, &v, &job, rc, 0);
	job_vars_release(&v);
}

static void
test_settings_defaults(void **state)
{
	struct build_settings s;

	(void)state;
	settings_of(&s, NULL, 0, false, NULL);
	assert_string_equal(s.git_strategy, "clone");
	assert_true(s.git_checkout);
	assert_int_equal(s.git_depth, 20);
	assert_string_equal(s.git_clean_flags, "-ffdx");
	assert_string_equal(s.git_fetch_flags, "--prune --quiet");
	assert_string_equal(s.git_clone_flags, "");
	assert_string_equal(s.submodule_strategy, "none");
	assert_string_equal(s.submodule_paths, "");
	assert_int_equal(s.submodule_depth, 20);
	assert_string_equal(s.submodule_update_flags, "");
	assert_false(s.submodule_force_https);
	assert_false(s.lfs_skip_smudge);
	assert_string_equal(s.clone_path, "");
	assert_int_equal(s.get_sources_attempts, 1);
	assert_int_equal(s.artifact_download_attempts, 1);
	assert_int_equal(s.restore_cache_attempts, 1);
	assert_int_equal(s.executor_job_section_attempts, 1);
	assert_true(s.after_script_ignore_errors);
	assert_int_equal(s.cache_request_timeout, 10);
	assert_false(s.debug_trace);
	assert_false(s.debug_services);
	assert_int_equal(s.script_timeout_ns, 0);
	assert_true(s.after_script_timeout_ns == 5 * MIN_NS);
	assert_int_equal(s.warnings.n, 0);
	assert_null(s.error);
	build_settings_release(&s);

	settings_of(&s, NULL, 0, true, NULL);
	assert_string_equal(s.git_strategy, "fetch");
	build_settings_release(&s);
}

static void
test_settings_values(void **state)
{
	struct api_variable pv[] = {
		V("GIT_STRATEGY", "none"), V("GIT_CHECKOUT", "false"),
		V("GIT_DEPTH", "3"), V("GIT_CLEAN_FLAGS", "none"),
		V("GIT_FETCH_EXTRA_FLAGS", "--no-tags"),
		V("GIT_CLONE_EXTRA_FLAGS", "--filter=blob:none"),
		V("GIT_SUBMODULE_STRATEGY", "recursive"),
		V("GIT_SUBMODULE_PATHS", "a :(exclude)b"),
		V("GIT_SUBMODULE_DEPTH", "1"),
		V("GIT_SUBMODULE_UPDATE_FLAGS", "--remote"),
		V("GIT_SUBMODULE_FORCE_HTTPS", "true"),
		V("GIT_LFS_SKIP_SMUDGE", "1"),
		V("GIT_CLONE_PATH", "$CI_BUILDS_DIR/x"),
		V("GET_SOURCES_ATTEMPTS", "3"), V("ARTIFACT_DOWNLOAD_ATTEMPTS", "10"),
		V("RESTORE_CACHE_ATTEMPTS", "2"), V("EXECUTOR_JOB_SECTION_ATTEMPTS", "4"),
		V("AFTER_SCRIPT_IGNORE_ERRORS", "false"), V("CACHE_REQUEST_TIMEOUT", "3"),
		V("CI_DEBUG_TRACE", "true"), V("CI_DEBUG_SERVICES", "TRUE"),
		V("RUNNER_SCRIPT_TIMEOUT", "30m"), V("RUNNER_AFTER_SCRIPT_TIMEOUT", "10m"),
	};
	struct build_settings s;
	static const char *const strategies[] = { "fetch", "clone", "none", "empty" };
	struct api_variable one[1] = { V("GIT_STRATEGY", NULL) };
	size_t i;

	(void)state;
	settings_of(&s, pv, sizeof(pv) / sizeof(pv[0]), true, NULL);
	assert_string_equal(s.git_strategy, "none");
	assert_false(s.git_checkout);
	assert_int_equal(s.git_depth, 3);
	assert_string_equal(s.git_clean_flags, "none");
	assert_string_equal(s.git_fetch_flags, "--no-tags");
	assert_string_equal(s.git_clone_flags, "--filter=blob:none");
	assert_string_equal(s.submodule_strategy, "recursive");
	assert_string_equal(s.submodule_paths, "a :(exclude)b");
	assert_int_equal(s.submodule_depth, 1);
	assert_string_equal(s.submodule_update_flags, "--remote");
	assert_true(s.submodule_force_https);
	assert_true(s.lfs_skip_smudge);
	assert_string_equal(s.clone_path, "/b/x");
	assert_int_equal(s.get_sources_attempts, 3);
	assert_int_equal(s.artifact_download_attempts, 10);
	assert_int_equal(s.restore_cache_attempts, 2);
	assert_int_equal(s.executor_job_section_attempts, 4);
	assert_false(s.after_script_ignore_errors);
	assert_int_equal(s.cache_request_timeout, 3);
	assert_true(s.debug_trace);
	assert_true(s.debug_services);
	assert_true(s.script_timeout_ns == 30 * MIN_NS);
	assert_true(s.after_script_timeout_ns == 10 * MIN_NS);
	assert_int_equal(s.warnings.n, 0);
	build_settings_release(&s);

	for (i = 0; i < 4; i++) {
		one[0].value = (char *)strategies[i];
		settings_of(&s, one, 1, false, NULL);
		assert_string_equal(s.git_strategy, strategies[i]);
		assert_int_equal(s.warnings.n, 0);
		build_settings_release(&s);
	}
	one[0].key = "GIT_SUBMODULE_STRATEGY";
	one[0].value = "normal";
	settings_of(&s, one, 1, false, NULL);
	assert_string_equal(s.submodule_strategy, "normal");
	build_settings_release(&s);
}

static void
test_settings_invalid(void **state)
{
	struct api_variable pv[] = {
		V("GIT_STRATEGY", "rsync"), V("GIT_CHECKOUT", "nope"),
		V("GIT_DEPTH", "deep"), V("GIT_SUBMODULE_DEPTH", "-"),
		V("GET_SOURCES_ATTEMPTS", "0"), V("ARTIFACT_DOWNLOAD_ATTEMPTS", "11"),
		V("RESTORE_CACHE_ATTEMPTS", "-5"), V("EXECUTOR_JOB_SECTION_ATTEMPTS", "x"),
		V("AFTER_SCRIPT_IGNORE_ERRORS", "yes"),
		V("RUNNER_SCRIPT_TIMEOUT", "ten minutes"),
		V("RUNNER_AFTER_SCRIPT_TIMEOUT", "-1m"),
		V("GIT_SUBMODULE_STRATEGY", "all"),
	};
	struct build_settings s;

	(void)state;
	settings_of(&s, pv, sizeof(pv) / sizeof(pv[0]), true, NULL);
	assert_string_equal(s.git_strategy, "fetch");
	assert_true(has_warning(&s.warnings, "GIT_STRATEGY: expected either"));
	assert_true(has_warning(&s.warnings, "\"rsync\""));
	assert_true(s.git_checkout);
	assert_true(has_warning(&s.warnings, "GIT_CHECKOUT: expected bool"));
	assert_int_equal(s.git_depth, 20);
	assert_true(has_warning(&s.warnings, "GIT_DEPTH: expected int"));
	assert_int_equal(s.submodule_depth, 20);
	assert_true(has_warning(&s.warnings, "GIT_SUBMODULE_DEPTH"));
	assert_int_equal(s.get_sources_attempts, 1);
	assert_true(has_warning(&s.warnings, "GET_SOURCES_ATTEMPTS: number of attempts"));
	assert_int_equal(s.artifact_download_attempts, 10);
	assert_true(has_warning(&s.warnings, "ARTIFACT_DOWNLOAD_ATTEMPTS"));
	assert_int_equal(s.restore_cache_attempts, 1);
	assert_true(has_warning(&s.warnings, "RESTORE_CACHE_ATTEMPTS"));
	assert_int_equal(s.executor_job_section_attempts, 1);
	assert_true(has_warning(&s.warnings, "EXECUTOR_JOB_SECTION_ATTEMPTS"));
	assert_true(s.after_script_ignore_errors);
	assert_true(has_warning(&s.warnings, "AFTER_SCRIPT_IGNORE_ERRORS"));
	assert_int_equal(s.script_timeout_ns, 0);
	assert_true(has_warning(&s.warnings, "RUNNER_SCRIPT_TIMEOUT: invalid"));
	assert_true(s.after_script_timeout_ns == 5 * MIN_NS);
	assert_true(has_warning(&s.warnings, "RUNNER_AFTER_SCRIPT_TIMEOUT: invalid"));
	assert_string_equal(s.submodule_strategy, "none");
	assert_true(has_warning(&s.warnings, "GIT_SUBMODULE_STRATEGY: expected"));
	assert_non_null(s.error);
	assert_string_equal(s.error, "unknown GIT_SUBMODULE_STRATEGY");
	build_settings_release(&s);
}

static void
test_settings_timeouts_clamped(void **state)
{
	struct api_variable pv[] = {
		V("RUNNER_SCRIPT_TIMEOUT", "2h"),
		V("RUNNER_AFTER_SCRIPT_TIMEOUT", "1h30m"),
	};
	struct api_job job = job_with(pv, 2);
	struct job_vars_input in = input();
	struct build_settings s;
	struct job_vars v;

	(void)state;
	job_vars_build(&v, &job, &in);
	build_settings_parse(&s, &v, &job, NULL, 0);	/* runner_info: 1h */
	assert_true(s.script_timeout_ns == 60 * MIN_NS);
	assert_true(s.after_script_timeout_ns == 60 * MIN_NS);
	assert_true(has_warning(&s.warnings, "RUNNER_SCRIPT_TIMEOUT: 2h0m0s is longer "
	    "than the job timeout, using 1h0m0s"));
	assert_true(has_warning(&s.warnings, "RUNNER_AFTER_SCRIPT_TIMEOUT"));
	build_settings_release(&s);

	build_settings_parse(&s, &v, &job, NULL, 3 * 3600);
	assert_true(s.script_timeout_ns == 120 * MIN_NS);
	assert_true(s.after_script_timeout_ns == 90 * MIN_NS);
	assert_int_equal(s.warnings.n, 0);
	build_settings_release(&s);
	job_vars_release(&v);
}

static void
test_debug_trace_disabled(void **state)
{
	struct api_variable pv[] = {
		V("CI_DEBUG_TRACE", "true"), V("CI_DEBUG_SERVICES", "true"),
	};
	struct runner_config rc;
	struct build_settings s;

	(void)state;
	memset(&rc, 0, sizeof(rc));
	rc.debug_trace_disabled = true;
	settings_of(&s, pv, 2, false, &rc);
	assert_false(s.debug_trace);
	assert_false(s.debug_services);
	assert_true(has_warning(&s.warnings,
	    "CI_DEBUG_TRACE: usage is disabled on this Runner"));
	assert_true(has_warning(&s.warnings,
	    "CI_DEBUG_SERVICES: usage is disabled on this Runner"));
	build_settings_release(&s);

	/* Off anyway: nothing to say. */
	settings_of(&s, NULL, 0, false, &rc);
	assert_false(s.debug_trace);
	assert_int_equal(s.warnings.n, 0);
	build_settings_release(&s);
}

static char *
dir_for(const char *full_path, const char *strategy, const char *clone_path,
    bool custom, char **error)
{
	struct job_dirs_input in;
	struct job_dirs d;
	char *dir;

	memset(&in, 0, sizeof(in));
	in.builds_dir = "/srv/builds";
	in.short_token = "t3_AbCdEf";
	in.concurrent_project_id = 2;
	in.project_full_path = full_path;
	in.project_id = 77;
	in.git_strategy = strategy;
	in.clone_path = clone_path;
	in.custom_build_dir = custom;
	if (job_dirs_compute(&d, &in, error) != 0) {
		assert_non_null(*error);
		assert_null(d.project_dir);
		return NULL;
	}
	assert_null(*error);
	dir = xstrdup(d.project_dir);
	{
		char *tmp = xasprintf("%s.tmp", dir);

		assert_string_equal(d.tmp_dir, tmp);
		free(tmp);
	}
	job_dirs_release(&d);
	return dir;
}

#define ASSERT_DIR(want, full, strategy, clone, custom) do {		\
	char *err_ = NULL, *got_ = dir_for(full, strategy, clone, custom, &err_); \
	assert_non_null(got_);						\
	assert_string_equal(got_, want);				\
	free(got_);							\
} while (0)

#define ASSERT_REFUSED(part, full, clone, custom) do {			\
	char *err_ = NULL, *got_ = dir_for(full, "fetch", clone, custom, &err_); \
	assert_null(got_);						\
	assert_non_null(strstr(err_, part));				\
	free(err_);							\
} while (0)

static void
test_dirs(void **state)
{
	(void)state;
	ASSERT_DIR("/srv/builds/t3_AbCdEf/2/acme/widget", "acme/widget", "fetch", NULL, false);
	ASSERT_DIR("/srv/builds/t3_AbCdEf/2/acme/sub/widget", "acme/sub/widget", "clone", "", false);
	ASSERT_DIR("/srv/builds/t3_AbCdEf/2/acme/widget-empty", "acme/widget", "empty", NULL, false);
	/* Nasty project paths never leave the runner's directory. */
	ASSERT_DIR("/srv/builds/t3_AbCdEf/2/project-77", "../../etc", "fetch", NULL, false);
	ASSERT_DIR("/srv/builds/t3_AbCdEf/2/project-77", "acme/../../x", "fetch", NULL, false);
	ASSERT_DIR("/srv/builds/t3_AbCdEf/2/etc/passwd", "/etc/passwd", "fetch", NULL, false);
	ASSERT_DIR("/srv/builds/t3_AbCdEf/2/a/b", "//a/./b/", "fetch", NULL, false);
	ASSERT_DIR("/srv/builds/t3_AbCdEf/2/project-77", "", "fetch", NULL, false);
	ASSERT_DIR("/srv/builds/t3_AbCdEf/2/project-77", NULL, "fetch", NULL, false);
	ASSERT_DIR("/srv/builds/t3_AbCdEf/2/project-77", "/./", "fetch", NULL, false);
	ASSERT_DIR("/srv/builds/t3_AbCdEf/2/a..b/c", "a..b/c", "fetch", NULL, false);
}

/* A docker job's /builds is its own: no short token or concurrent parts (ProjectUniqueDir). */
static void
test_dirs_disposable(void **state)
{
	struct job_dirs_input in;
	struct job_dirs d;
	char *error = NULL;

	(void)state;
	memset(&in, 0, sizeof(in));
	in.builds_dir = "/builds";
	in.short_token = "t3_AbCdEf";
	in.concurrent_project_id = 2;
	in.project_full_path = "acme/widget";
	in.git_strategy = "empty";
	in.disposable = true;
	assert_int_equal(job_dirs_compute(&d, &in, &error), 0);
	assert_string_equal(d.project_dir, "/builds/acme/widget-empty");
	assert_string_equal(d.tmp_dir, "/builds/acme/widget-empty.tmp");
	job_dirs_release(&d);
	in.builds_dir = "/";
	in.git_strategy = "fetch";
	assert_int_equal(job_dirs_compute(&d, &in, &error), 0);
	assert_string_equal(d.project_dir, "/acme/widget");
	job_dirs_release(&d);
}

static void
test_clone_path(void **state)
{
	(void)state;
	ASSERT_DIR("/srv/builds/mine", "acme/widget", "fetch", "/srv/builds/mine", true);
	ASSERT_DIR("/srv/builds/x/y", "acme/widget", "empty", "/srv/builds/x/./y/", true);
	ASSERT_DIR("/srv/builds/y", "acme/widget", "fetch", "/srv/builds/x/../y", true);
	ASSERT_DIR("/srv/builds", "acme/widget", "fetch", "/srv/builds", true);
	ASSERT_REFUSED("custom_build_dir", "acme/widget", "/srv/builds/mine", false);
	ASSERT_REFUSED("has to be within \"/srv/builds\"", "a/b", "/tmp/x", true);
	ASSERT_REFUSED("has to be within", "a/b", "/srv/builds/../etc", true);
	ASSERT_REFUSED("has to be within", "a/b", "/srv/builds/x/../../..", true);
	ASSERT_REFUSED("has to be within", "a/b", "/srv/buildsX/y", true);
	ASSERT_REFUSED("absolute", "a/b", "relative/dir", true);
}

static void
test_concurrent_project_id(void **state)
{
	int a[] = { 0, 1, 3 }, b[] = { 2, 1 }, c[] = { 0, 0, 1, 2, 3, 4 };

	(void)state;
	assert_int_equal(job_concurrent_project_id(NULL, 0), 0);
	assert_int_equal(job_concurrent_project_id(a, 3), 2);
	assert_int_equal(job_concurrent_project_id(b, 2), 0);
	assert_int_equal(job_concurrent_project_id(c, 6), 5);
}

static void
test_prepare(void **state)
{
	struct api_variable pv[] = {
		V("GIT_CLONE_PATH", "$CI_BUILDS_DIR/custom/$CI_CONCURRENT_PROJECT_ID"),
		V("USES_DIR", "$CI_PROJECT_DIR/x"),
		V("GIT_DEPTH", "bad"),
	};
	struct api_job job = job_with(pv, 3);
	struct job_vars_input in = input();
	struct runner_config rc;
	struct job_prep p;
	char *error;

	(void)state;
	memset(&rc, 0, sizeof(rc));
	rc.custom_build_dir_enabled = 1;
	in.rc = &rc;
	in.concurrent_project_id = 4;
	in.project_dir = "ignored";
	job.job_info.project_full_path = "g/p";

	assert_int_equal(job_prepare(&p, &job, &in, &error), 0);
	assert_null(error);
	assert_string_equal(p.dirs.project_dir, "/b/custom/4");
	assert_string_equal(p.dirs.tmp_dir, "/b/custom/4.tmp");
	assert_string_equal(job_vars_get(&p.vars, "CI_PROJECT_DIR"), "/b/custom/4");
	assert_string_equal(job_vars_get(&p.vars, "RUNNER_TEMP_PROJECT_DIR"),
	    "/b/custom/4.tmp");
	assert_string_equal(job_vars_get(&p.vars, "USES_DIR"), "/b/custom/4/x");
	assert_string_equal(p.settings.git_strategy, "clone");
	assert_int_equal(p.warnings.n, 1);
	assert_true(has_warning(&p.warnings, "GIT_DEPTH"));
	job_prep_release(&p);

	/* Default layout without custom_build_dir ... but GIT_CLONE_PATH is set. */
	rc.custom_build_dir_enabled = -1;
	assert_int_equal(job_prepare(&p, &job, &in, &error), -1);
	assert_non_null(strstr(error, "custom_build_dir"));
	free(error);
	job_prep_release(&p);

	job.variables = pv + 1;
	job.n_variables = 2;
	assert_int_equal(job_prepare(&p, &job, &in, &error), 0);
	assert_string_equal(p.dirs.project_dir, "/b/t3_AbCdEf/4/g/p");
	assert_string_equal(job_vars_get(&p.vars, "USES_DIR"), "/b/t3_AbCdEf/4/g/p/x");
	job_prep_release(&p);
}

/*
 * The test binary is linked with --wrap=realloc (Makefile), so this counts
 * every realloc the library makes: a list grown one slot at a time makes
 * one per element, which is quadratic where realloc copies (ASan: always).
 */
static size_t reallocs;
void	*__real_realloc(void *, size_t);
void	*__wrap_realloc(void *, size_t);

void *
__wrap_realloc(void *p, size_t size)
{
	reallocs++;
	return __real_realloc(p, size);
}

/* 100,000 variables, half of them masked: the lists grow by doubling. */
static void
test_many_variables_grow_in_few_steps(void **state)
{
	enum { N = 100000 };
	struct api_variable *pv = xcalloc(N, sizeof(*pv));
	struct api_job job;
	struct job_vars_input in = input();
	struct strv masked = { 0 };
	struct job_vars v;
	size_t i, before;

	(void)state;
	for (i = 0; i < N; i++) {
		pv[i].key = xasprintf("VAR_%zu", i);
		pv[i].value = xasprintf("value-%zu", i);
		pv[i].masked = i % 2 == 0;
	}
	job = job_with(pv, N);
	before = reallocs;
	job_vars_build(&v, &job, &in);
	job_vars_masked(&v, &masked);
	assert_true(v.n > N);
	assert_int_equal(masked.n, N / 2);
	assert_string_equal(job_vars_get(&v, "VAR_99999"), "value-99999");
	/* log2(100,000) is 17: two lists, a margin for the rest. */
	assert_true(reallocs - before < 200);
	strv_release(&masked);
	job_vars_release(&v);
	for (i = 0; i < N; i++) {
		free(pv[i].key);
		free(pv[i].value);
	}
	free(pv);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_feature_flags),
		cmocka_unit_test(test_feature_flag_precedence),
		cmocka_unit_test(test_expansion),
		cmocka_unit_test(test_expansion_go_table),
		cmocka_unit_test(test_file_variable_references),
		cmocka_unit_test(test_files_and_masks),
		cmocka_unit_test(test_settings_defaults),
		cmocka_unit_test(test_settings_values),
		cmocka_unit_test(test_settings_invalid),
		cmocka_unit_test(test_settings_timeouts_clamped),
		cmocka_unit_test(test_debug_trace_disabled),
		cmocka_unit_test(test_dirs),
		cmocka_unit_test(test_dirs_disposable),
		cmocka_unit_test(test_clone_path),
		cmocka_unit_test(test_concurrent_project_id),
		cmocka_unit_test(test_prepare),
		cmocka_unit_test(test_many_variables_grow_in_few_steps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

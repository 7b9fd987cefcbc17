/*
 * The JSON layer of the GitLab client (api/json.c): builders are parsed
 * back and checked key by key (what is sent, what is left out, and that
 * int64 values survive as digits); parsers get the realistic payload of
 * protocol.md 4.6, every kind of wrong type with the exact message, and
 * hostile input (every truncation, garbage, mutations, huge and deep
 * values) that must end in an error, never a crash or a leak.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cJSON.h>

#include "api/api.h"
#include "api/json.h"
#include "lib/xmalloc.h"

/* protocol.md 4.6, verbatim. */
static const char example_job[] =
	"{\n"
	"  \"id\": 8812,\n"
	"  \"token\": \"glcbt-64_xR2mVqk8ZtYw1fHs3Lp9\",\n"
	"  \"allow_git_fetch\": true,\n"
	"  \"job_info\": {\n"
	"    \"id\": 8812, \"name\": \"unit-tests\", \"stage\": \"test\",\n"
	"    \"project_id\": 42, \"project_name\": \"widget\", \"project_full_path\": \"acme/widget\",\n"
	"    \"namespace_id\": 7, \"root_namespace_id\": 7, \"organization_id\": 1,\n"
	"    \"user_id\": 3, \"time_in_queue_seconds\": 1.27,\n"
	"    \"project_jobs_running_on_instance_runners_count\": \"0\",\n"
	"    \"queue_size\": 0, \"queue_depth\": 0\n"
	"  },\n"
	"  \"git_info\": {\n"
	"    \"repo_url\": \"https://gitlab-ci-token:glcbt-64_xR2mVqk8ZtYw1fHs3Lp9@gitlab.example.com/acme/widget.git\",\n"
	"    \"ref\": \"main\",\n"
	"    \"sha\": \"9f3c1a6e2b7d4c80a1e5f6b7c8d9e0f1a2b3c4d5\",\n"
	"    \"before_sha\": \"0000000000000000000000000000000000000000\",\n"
	"    \"ref_type\": \"branch\",\n"
	"    \"refspecs\": [\"+refs/pipelines/1234:refs/pipelines/1234\", \"+refs/heads/main:refs/remotes/origin/main\"],\n"
	"    \"depth\": 20,\n"
	"    \"repo_object_format\": \"sha1\",\n"
	"    \"protected\": true\n"
	"  },\n"
	"  \"runner_info\": { \"timeout\": 3600, \"runner_session_url\": null },\n"
	"  \"variables\": [\n"
	"    { \"key\": \"CI\", \"value\": \"true\", \"public\": true, \"masked\": false },\n"
	"    { \"key\": \"GITLAB_CI\", \"value\": \"true\", \"public\": true, \"masked\": false },\n"
	"    { \"key\": \"CI_SERVER_URL\", \"value\": \"https://gitlab.example.com\", \"public\": true, \"masked\": false },\n"
	"    { \"key\": \"CI_SERVER_HOST\", \"value\": \"gitlab.example.com\", \"public\": true, \"masked\": false },\n"
	"    { \"key\": \"CI_API_V4_URL\", \"value\": \"https://gitlab.example.com/api/v4\", \"public\": true, \"masked\": false },\n"
	"    { \"key\": \"CI_JOB_ID\", \"value\": \"8812\", \"public\": true, \"masked\": false },\n"
	"    { \"key\": \"CI_JOB_NAME\", \"value\": \"unit-tests\", \"public\": true, \"masked\": false },\n"
	"    { \"key\": \"CI_JOB_STAGE\", \"value\": \"test\", \"public\": true, \"masked\": false },\n"
	"    { \"key\": \"CI_JOB_URL\", \"value\": \"https://gitlab.example.com/acme/widget/-/jobs/8812\", \"public\": true, \"masked\": false },\n"
	"    { \"key\": \"CI_JOB_TOKEN\", \"value\": \"glcbt-64_xR2mVqk8ZtYw1fHs3Lp9\", \"public\": false, \"masked\": true },\n"
	"    { \"key\": \"CI_REGISTRY_PASSWORD\", \"value\": \"glcbt-64_xR2mVqk8ZtYw1fHs3Lp9\", \"public\": false, \"masked\": true },\n"
	"    { \"key\": \"CI_REPOSITORY_URL\", \"value\": \"https://gitlab-ci-token:glcbt-64_xR2mVqk8ZtYw1fHs3Lp9@gitlab.example.com/acme/widget.git\", \"public\": false, \"masked\": false },\n"
	"    { \"key\": \"CI_PROJECT_ID\", \"value\": \"42\", \"public\": true, \"masked\": false },\n"
	"    { \"key\": \"CI_PROJECT_PATH\", \"value\": \"acme/widget\", \"public\": true, \"masked\": false },\n"
	"    { \"key\": \"CI_COMMIT_SHA\", \"value\": \"9f3c1a6e2b7d4c80a1e5f6b7c8d9e0f1a2b3c4d5\", \"public\": true, \"masked\": false },\n"
	"    { \"key\": \"CI_COMMIT_REF_NAME\", \"value\": \"main\", \"public\": true, \"masked\": false },\n"
	"    { \"key\": \"CI_PIPELINE_ID\", \"value\": \"1234\", \"public\": true, \"masked\": false },\n"
	"    { \"key\": \"CI_RUNNER_ID\", \"value\": \"17\", \"public\": true, \"masked\": false },\n"
	"    { \"key\": \"GIT_DEPTH\", \"value\": \"20\", \"public\": true, \"masked\": false },\n"
	"    { \"key\": \"DEPLOY_KEY\", \"value\": \"-----BEGIN OPENSSH PRIVATE KEY-----\\n...\", \"public\": false, \"masked\": false, \"file\": true },\n"
	"    { \"key\": \"API_SECRET\", \"value\": \"s3cr3t-Value-1234\", \"public\": false, \"masked\": true },\n"
	"    { \"key\": \"LITERAL\", \"value\": \"$NOT_EXPANDED\", \"public\": false, \"masked\": false, \"raw\": true }\n"
	"  ],\n"
	"  \"steps\": [\n"
	"    { \"name\": \"script\", \"script\": [\"make deps\", \"make test\"], \"timeout\": 3600,\n"
	"      \"when\": \"on_success\", \"allow_failure\": false },\n"
	"    { \"name\": \"after_script\", \"script\": [\"echo done\"], \"timeout\": 3600,\n"
	"      \"when\": \"always\", \"allow_failure\": true }\n"
	"  ],\n"
	"  \"hooks\": [\n"
	"    { \"name\": \"pre_get_sources_script\", \"script\": [\"git config --global http.lowSpeedLimit 1000\"] }\n"
	"  ],\n"
	"  \"image\": null,\n"
	"  \"services\": [],\n"
	"  \"artifacts\": [\n"
	"    { \"name\": \"test-output\", \"untracked\": false, \"paths\": [\"out/\"], \"exclude\": [\"out/tmp/**\"],\n"
	"      \"when\": \"always\", \"expire_in\": \"1 week\", \"artifact_type\": \"archive\", \"artifact_format\": \"zip\" },\n"
	"    { \"name\": \"junit.xml\", \"untracked\": false, \"paths\": [\"report.xml\"], \"when\": \"always\",\n"
	"      \"expire_in\": null, \"artifact_type\": \"junit\", \"artifact_format\": \"gzip\" }\n"
	"  ],\n"
	"  \"cache\": [\n"
	"    { \"key\": \"deps-main-protected\", \"untracked\": false, \"policy\": \"pull-push\",\n"
	"      \"paths\": [\"vendor/\"], \"when\": \"on_success\", \"fallback_keys\": [\"deps-default-protected\"] }\n"
	"  ],\n"
	"  \"credentials\": [\n"
	"    { \"type\": \"registry\", \"url\": \"registry.gitlab.example.com\",\n"
	"      \"username\": \"gitlab-ci-token\", \"password\": \"glcbt-64_xR2mVqk8ZtYw1fHs3Lp9\" }\n"
	"  ],\n"
	"  \"dependencies\": [\n"
	"    { \"id\": 8810, \"name\": \"build\", \"token\": \"glcbt-64_xR2mVqk8ZtYw1fHs3Lp9\",\n"
	"      \"artifacts_file\": { \"filename\": \"artifacts.zip\", \"size\": 13631488 } }\n"
	"  ],\n"
	"  \"features\": {\n"
	"    \"trace_sections\": true,\n"
	"    \"failure_reasons\": [\"unknown_failure\", \"script_failure\", \"api_failure\", \"stuck_or_timeout_failure\",\n"
	"      \"runner_system_failure\", \"missing_dependency_failure\", \"runner_unsupported\", \"stale_schedule\",\n"
	"      \"job_execution_timeout\", \"archived_failure\", \"unmet_prerequisites\", \"scheduler_failure\",\n"
	"      \"data_integrity_failure\", \"forward_deployment_failure\", \"user_blocked\", \"project_deleted\",\n"
	"      \"ci_quota_exceeded\", \"pipeline_loop_detected\", \"no_matching_runner\", \"trace_size_exceeded\",\n"
	"      \"builds_disabled\", \"environment_creation_failure\", \"deployment_rejected\",\n"
	"      \"failed_outdated_deployment_job\", \"runner_configuration_error\",\n"
	"      \"runner_external_dependency_failure\", \"runner_interrupted\"]\n"
	"  }\n"
	"}\n"
	;

/* 2026-10-16T13:25:59Z */
#define EXPIRY	((time_t)1792157159)

/* The names of protocol.md 4.2, typed out again rather than shared. */
static const char *const feature_names[] = {
	"variables", "image", "services", "artifacts", "cache",
	"fallback_cache_keys", "shared", "upload_multiple_artifacts",
	"upload_raw_artifacts", "session", "terminal", "refspecs", "masking",
	"proxy", "raw_variables", "artifacts_exclude", "multi_build_steps",
	"trace_reset", "trace_checksum", "trace_size", "vault_secrets",
	"cancelable", "return_exit_code", "service_variables",
	"service_multiple_aliases", "image_executor_opts",
	"service_executor_opts", "cancel_gracefully", "native_steps_integration",
	"two_phase_job_commit", "job_inputs",
};

static const struct api_label labels[] = {
	{ "team", "build" },
	{ "zone", "eu" },
	{ "team", "release" },	/* a later duplicate overrides */
};

static struct api_info
make_info(void)
{
	struct api_info	info;

	memset(&info, 0, sizeof info);
	info.name = "gitlab-runner";
	info.version = "19.4.0";
	info.revision = "d79f3e7b";
	info.platform = "linux";
	info.architecture = "amd64";
	info.executor = "shell";
	info.shell = "bash";
	info.features.variables = true;
	info.features.trace_checksum = true;
	info.features.two_phase_job_commit = true;
	info.features.job_inputs = true;
	info.labels = labels;
	info.n_labels = 3;
	return info;
}

static cJSON *
reparse(const char *text)
{
	cJSON	*o;

	assert_non_null(text);
	if ((o = cJSON_Parse(text)) == NULL || !cJSON_IsObject(o))
		fail_msg("builder output is not a JSON object: %s", text);
	return o;
}

static const cJSON *
get(const cJSON *o, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(o, key);
}

static void
assert_str_member(const cJSON *o, const char *key, const char *want)
{
	const cJSON	*v = get(o, key);

	if (!cJSON_IsString(v))
		fail_msg("%s: not a string", key);
	assert_string_equal(v->valuestring, want);
}

static void
assert_bool_member(const cJSON *o, const char *key, bool want)
{
	const cJSON	*v = get(o, key);

	if (!cJSON_IsBool(v))
		fail_msg("%s: not a boolean", key);
	assert_int_equal(cJSON_IsTrue(v), want);
}

static void
assert_absent(const cJSON *o, const char *key)
{
	if (get(o, key) != NULL)
		fail_msg("%s should be omitted", key);
}

static int
count_members(const cJSON *o)
{
	return cJSON_GetArraySize(o);
}

static struct api_job *
job_ok(const char *text)
{
	struct api_job	*job = NULL;
	char		*err = NULL;

	if (json_parse_job(text, strlen(text), &job, &err) != 0)
		fail_msg("parse failed: %s\n%s", err, text);
	assert_null(err);
	assert_non_null(job);
	return job;
}

/* The error for a body that must be refused; the caller frees it. */
static char *
job_err_len(const char *text, size_t len)
{
	struct api_job	*job = (struct api_job *)1;
	char		*err = NULL;

	if (json_parse_job(text, len, &job, &err) == 0)
		fail_msg("parsed but should not: %.*s", (int)len, text);
	assert_null(job);
	assert_non_null(err);
	/* One line, always. */
	assert_null(strchr(err, '\n'));
	return err;
}

static void
assert_job_err(const char *text, const char *want)
{
	char	*err = job_err_len(text, strlen(text));

	if (strcmp(err, want) != 0)
		fail_msg("for %s\n  got  \"%s\"\n  want \"%s\"", text, err, want);
	free(err);
}

/* ---- Builders. ---- */

static void
test_info_object(void **state)
{
	struct api_info	 info = make_info();
	cJSON		*o;
	const cJSON	*i, *f, *l;
	char		*text;
	size_t		 k;

	(void)state;
	text = json_job_request(&info, "glrt-t1_x", "s_0123456789ab", "6a5c");
	o = reparse(text);
	i = get(o, "info");
	assert_true(cJSON_IsObject(i));
	assert_str_member(i, "name", "gitlab-runner");
	assert_str_member(i, "version", "19.4.0");
	assert_str_member(i, "revision", "d79f3e7b");
	assert_str_member(i, "platform", "linux");
	assert_str_member(i, "architecture", "amd64");
	assert_str_member(i, "executor", "shell");
	assert_str_member(i, "shell", "bash");

	f = get(i, "features");
	assert_true(cJSON_IsObject(f));
	assert_int_equal(count_members(f), 31);
	for (k = 0; k < sizeof feature_names / sizeof feature_names[0]; k++) {
		if (!cJSON_IsBool(get(f, feature_names[k])))
			fail_msg("feature %s missing", feature_names[k]);
	}
	assert_bool_member(f, "variables", true);
	assert_bool_member(f, "image", false);
	assert_bool_member(f, "trace_checksum", true);
	assert_bool_member(f, "two_phase_job_commit", true);
	assert_bool_member(f, "job_inputs", true);
	assert_bool_member(f, "cancel_gracefully", false);

	assert_int_equal(count_members(get(i, "config")), 1);
	assert_str_member(get(i, "config"), "gpus", "");

	l = get(i, "labels");
	assert_int_equal(count_members(l), 2);
	assert_str_member(l, "team", "release");
	assert_str_member(l, "zone", "eu");

	assert_str_member(o, "token", "glrt-t1_x");
	assert_str_member(o, "system_id", "s_0123456789ab");
	assert_str_member(o, "last_update", "6a5c");
	assert_int_equal(count_members(o), 4);
	cJSON_Delete(o);
	free(text);
}

static void
test_info_omissions(void **state)
{
	struct api_info	 info = make_info();
	cJSON		*o;
	const cJSON	*i;
	char		*text;

	(void)state;
	info.executor = "";
	info.shell = NULL;
	info.revision = "";
	info.n_labels = 0;
	text = json_job_request(&info, "glrt-t1_x", "", NULL);
	o = reparse(text);
	i = get(o, "info");
	assert_absent(i, "executor");
	assert_absent(i, "shell");
	assert_absent(i, "revision");
	assert_absent(i, "labels");
	assert_non_null(get(i, "features"));
	assert_str_member(get(i, "config"), "gpus", "");
	assert_absent(o, "system_id");
	assert_absent(o, "last_update");
	assert_str_member(o, "token", "glrt-t1_x");
	cJSON_Delete(o);
	free(text);
}

static void
test_register_request(void **state)
{
	struct api_info			 info = make_info();
	struct api_register_params	 p;
	cJSON				*o;
	char				*text;

	(void)state;
	info.executor = info.shell = NULL;
	memset(&p, 0, sizeof p);
	p.description = "my-runner";
	p.maintenance_note = "optional text";
	p.tag_list = "docker,linux";
	p.run_untagged = false;
	p.locked = true;
	p.access_level = "not_protected";
	p.maximum_timeout = 3600;
	p.paused = false;
	p.info = &info;
	text = json_register_request(&p, "GR1348941xxx");
	o = reparse(text);
	assert_str_member(o, "description", "my-runner");
	assert_str_member(o, "maintenance_note", "optional text");
	assert_str_member(o, "tag_list", "docker,linux");
	assert_bool_member(o, "run_untagged", false);
	assert_bool_member(o, "locked", true);
	assert_str_member(o, "access_level", "not_protected");
	assert_true(cJSON_IsNumber(get(o, "maximum_timeout")));
	assert_int_equal(get(o, "maximum_timeout")->valueint, 3600);
	assert_non_null(strstr(text, "\"maximum_timeout\":3600,"));
	assert_bool_member(o, "paused", false);
	assert_str_member(o, "token", "GR1348941xxx");
	assert_absent(get(o, "info"), "executor");
	assert_int_equal(count_members(o), 10);
	cJSON_Delete(o);
	free(text);

	/* Empty optional fields are left out; the three booleans never are. */
	memset(&p, 0, sizeof p);
	p.description = "";
	p.access_level = "";
	p.run_untagged = true;
	p.info = &info;
	text = json_register_request(&p, "GR1348941xxx");
	o = reparse(text);
	assert_absent(o, "description");
	assert_absent(o, "maintenance_note");
	assert_absent(o, "tag_list");
	assert_absent(o, "access_level");
	assert_absent(o, "maximum_timeout");
	assert_bool_member(o, "run_untagged", true);
	assert_bool_member(o, "locked", false);
	assert_bool_member(o, "paused", false);
	assert_int_equal(count_members(o), 5);
	cJSON_Delete(o);
	free(text);
}

static void
test_int64_exact(void **state)
{
	struct api_register_params	 p;
	struct api_job_update		 u;
	char				*text;

	(void)state;
	memset(&p, 0, sizeof p);
	/* 2^53 + 1: a double would print 9007199254740992. */
	p.maximum_timeout = 9007199254740993LL;
	text = json_register_request(&p, "t");
	assert_non_null(strstr(text, "\"maximum_timeout\":9007199254740993,"));
	free(text);
	p.maximum_timeout = INT64_MIN;
	text = json_register_request(&p, "t");
	assert_non_null(strstr(text, "\"maximum_timeout\":-9223372036854775808,"));
	free(text);

	memset(&u, 0, sizeof u);
	u.state = "running";
	u.has_output = true;
	u.bytesize = UINT64_MAX;
	text = json_job_update(NULL, "job", &u);
	assert_non_null(strstr(text, "\"bytesize\":18446744073709551615}"));
	free(text);
}

static void
test_verify_and_token_requests(void **state)
{
	struct api_info	 info = make_info();
	cJSON		*o;
	char		*text;

	(void)state;
	text = json_verify_request(&info, "glrt-abc", "s_0123456789ab");
	o = reparse(text);
	assert_true(cJSON_IsObject(get(o, "info")));
	assert_str_member(get(o, "info"), "executor", "shell");
	assert_str_member(o, "token", "glrt-abc");
	assert_str_member(o, "system_id", "s_0123456789ab");
	assert_int_equal(count_members(o), 3);
	cJSON_Delete(o);
	free(text);

	text = json_verify_request(&info, "glrt-abc", "");
	o = reparse(text);
	assert_absent(o, "system_id");
	cJSON_Delete(o);
	free(text);

	text = json_token_request("glrt-abc", "s_0123456789ab");
	assert_string_equal(text,
	    "{\"token\":\"glrt-abc\",\"system_id\":\"s_0123456789ab\"}");
	free(text);
	text = json_token_request("legacy", NULL);
	assert_string_equal(text, "{\"token\":\"legacy\"}");
	free(text);
	/* Escaping is cJSON's: quotes and control bytes stay inside the string. */
	text = json_token_request("a\"b\n", NULL);
	o = reparse(text);
	assert_str_member(o, "token", "a\"b\n");
	cJSON_Delete(o);
	free(text);
}

static void
test_job_update(void **state)
{
	struct api_info		 info = make_info();
	struct api_job_update	 u;
	cJSON			*o;
	const cJSON		*out;
	char			*text;

	(void)state;
	/* The first ack after pickup: no log yet. */
	memset(&u, 0, sizeof u);
	u.state = "running";
	u.failure_reason = "";
	text = json_job_update(&info, "glcbt-64_x", &u);
	o = reparse(text);
	assert_true(cJSON_IsObject(get(o, "info")));
	assert_str_member(o, "token", "glcbt-64_x");
	assert_str_member(o, "state", "running");
	assert_absent(o, "failure_reason");
	assert_absent(o, "checksum");
	assert_absent(o, "exit_code");
	out = get(o, "output");
	assert_true(cJSON_IsObject(out));
	assert_int_equal(count_members(out), 0);
	assert_non_null(strstr(text, "\"output\":{}"));
	cJSON_Delete(o);
	free(text);

	/* protocol.md 5.1's example. */
	u.state = "failed";
	u.failure_reason = "script_failure";
	u.has_output = true;
	u.checksum = 0x0d7cf601;
	u.bytesize = 51;
	u.exit_code = 2;
	text = json_job_update(&info, "glcbt-64_x", &u);
	o = reparse(text);
	assert_str_member(o, "state", "failed");
	assert_str_member(o, "failure_reason", "script_failure");
	assert_str_member(o, "checksum", "crc32:0d7cf601");
	out = get(o, "output");
	assert_str_member(out, "checksum", "crc32:0d7cf601");
	assert_non_null(strstr(text, "\"bytesize\":51"));
	assert_int_equal(count_members(out), 2);
	assert_non_null(strstr(text, "\"exit_code\":2"));
	assert_int_equal(count_members(o), 7);
	cJSON_Delete(o);
	free(text);

	/* An empty log: checksum of nothing, bytesize omitted as Go does. */
	u.state = "success";
	u.failure_reason = NULL;
	u.checksum = 0;
	u.bytesize = 0;
	u.exit_code = -1;
	text = json_job_update(NULL, "glcbt-64_x", &u);
	o = reparse(text);
	assert_absent(o, "info");
	assert_absent(o, "failure_reason");
	assert_str_member(o, "checksum", "crc32:00000000");
	assert_str_member(get(o, "output"), "checksum", "crc32:00000000");
	assert_absent(get(o, "output"), "bytesize");
	assert_non_null(strstr(text, "\"exit_code\":-1"));
	cJSON_Delete(o);
	free(text);
}

/* ---- The job payload. ---- */

static void
test_parse_example(void **state)
{
	struct api_job	*job;
	size_t		 i;

	(void)state;
	job = job_ok(example_job);
	assert_int_equal(job->id, 8812);
	assert_string_equal(job->token, "glcbt-64_xR2mVqk8ZtYw1fHs3Lp9");
	assert_true(job->allow_git_fetch);

	assert_int_equal(job->job_info.id, 8812);
	assert_string_equal(job->job_info.name, "unit-tests");
	assert_string_equal(job->job_info.stage, "test");
	assert_int_equal(job->job_info.project_id, 42);
	assert_string_equal(job->job_info.project_name, "widget");
	assert_string_equal(job->job_info.project_full_path, "acme/widget");
	assert_int_equal(job->job_info.namespace_id, 7);
	assert_int_equal(job->job_info.root_namespace_id, 7);
	assert_int_equal(job->job_info.organization_id, 1);
	assert_int_equal(job->job_info.user_id, 3);
	assert_true(fabs(job->job_info.time_in_queue_seconds - 1.27) < 1e-9);
	assert_string_equal(
	    job->job_info.project_jobs_running_on_instance_runners_count, "0");
	assert_null(job->job_info.instance_id);
	assert_int_equal(job->job_info.queue_size, 0);

	assert_string_equal(job->git_info.repo_url,
	    "https://gitlab-ci-token:glcbt-64_xR2mVqk8ZtYw1fHs3Lp9@gitlab.example.com/acme/widget.git");
	assert_string_equal(job->git_info.ref, "main");
	assert_string_equal(job->git_info.sha,
	    "9f3c1a6e2b7d4c80a1e5f6b7c8d9e0f1a2b3c4d5");
	assert_string_equal(job->git_info.before_sha,
	    "0000000000000000000000000000000000000000");
	assert_string_equal(job->git_info.ref_type, "branch");
	assert_int_equal(job->git_info.refspecs.n, 2);
	assert_string_equal(job->git_info.refspecs.v[1],
	    "+refs/heads/main:refs/remotes/origin/main");
	assert_null(job->git_info.refspecs.v[2]);
	assert_int_equal(job->git_info.depth, 20);
	assert_string_equal(job->git_info.repo_object_format, "sha1");
	assert_int_equal(job->git_info.protected_, 1);

	assert_int_equal(job->runner_info.timeout, 3600);
	assert_null(job->runner_info.runner_session_url);
	assert_null(job->runner_info.uuid);

	assert_int_equal(job->n_variables, 22);
	assert_string_equal(job->variables[0].key, "CI");
	assert_string_equal(job->variables[0].value, "true");
	assert_true(job->variables[0].public_);
	assert_false(job->variables[0].masked);
	assert_string_equal(job->variables[9].key, "CI_JOB_TOKEN");
	assert_false(job->variables[9].public_);
	assert_true(job->variables[9].masked);
	assert_string_equal(job->variables[19].key, "DEPLOY_KEY");
	assert_string_equal(job->variables[19].value,
	    "-----BEGIN OPENSSH PRIVATE KEY-----\n...");
	assert_true(job->variables[19].file);
	assert_false(job->variables[18].file);
	assert_string_equal(job->variables[21].key, "LITERAL");
	assert_string_equal(job->variables[21].value, "$NOT_EXPANDED");
	assert_true(job->variables[21].raw);
	assert_false(job->variables[20].raw);

	assert_int_equal(job->n_steps, 2);
	assert_string_equal(job->steps[0].name, "script");
	assert_int_equal(job->steps[0].script.n, 2);
	assert_string_equal(job->steps[0].script.v[0], "make deps");
	assert_string_equal(job->steps[0].script.v[1], "make test");
	assert_int_equal(job->steps[0].timeout, 3600);
	assert_string_equal(job->steps[0].when, "on_success");
	assert_false(job->steps[0].allow_failure);
	assert_string_equal(job->steps[1].name, "after_script");
	assert_string_equal(job->steps[1].when, "always");
	assert_true(job->steps[1].allow_failure);

	assert_int_equal(job->n_hooks, 1);
	assert_string_equal(job->hooks[0].name, "pre_get_sources_script");
	assert_int_equal(job->hooks[0].script.n, 1);

	assert_false(job->image.present);
	assert_null(job->image.name);
	assert_int_equal(job->n_services, 0);
	assert_null(job->services);

	assert_int_equal(job->n_artifacts, 2);
	assert_string_equal(job->artifacts[0].name, "test-output");
	assert_string_equal(job->artifacts[0].paths.v[0], "out/");
	assert_string_equal(job->artifacts[0].exclude.v[0], "out/tmp/**");
	assert_string_equal(job->artifacts[0].expire_in, "1 week");
	assert_string_equal(job->artifacts[0].artifact_type, "archive");
	assert_string_equal(job->artifacts[0].artifact_format, "zip");
	assert_null(job->artifacts[1].expire_in);
	assert_int_equal(job->artifacts[1].exclude.n, 0);
	assert_string_equal(job->artifacts[1].artifact_format, "gzip");

	assert_int_equal(job->n_caches, 1);
	assert_string_equal(job->caches[0].key, "deps-main-protected");
	assert_string_equal(job->caches[0].policy, "pull-push");
	assert_string_equal(job->caches[0].paths.v[0], "vendor/");
	assert_string_equal(job->caches[0].when, "on_success");
	assert_string_equal(job->caches[0].fallback_keys.v[0],
	    "deps-default-protected");

	assert_int_equal(job->n_credentials, 1);
	assert_string_equal(job->credentials[0].type, "registry");
	assert_string_equal(job->credentials[0].url,
	    "registry.gitlab.example.com");
	assert_string_equal(job->credentials[0].username, "gitlab-ci-token");
	assert_string_equal(job->credentials[0].password,
	    "glcbt-64_xR2mVqk8ZtYw1fHs3Lp9");

	assert_int_equal(job->n_dependencies, 1);
	assert_int_equal(job->dependencies[0].id, 8810);
	assert_string_equal(job->dependencies[0].name, "build");
	assert_string_equal(job->dependencies[0].artifacts_filename,
	    "artifacts.zip");
	assert_int_equal(job->dependencies[0].artifacts_size, 13631488);

	assert_true(job->features.trace_sections);
	assert_int_equal(job->features.failure_reasons.n, 27);
	assert_string_equal(job->features.failure_reasons.v[0],
	    "unknown_failure");
	assert_string_equal(job->features.failure_reasons.v[26],
	    "runner_interrupted");
	assert_int_equal(job->features.token_mask_prefixes.n, 0);

	assert_int_equal(job->n_secrets, 0);
	assert_int_equal(job->n_inputs, 0);
	assert_null(job->run);
	assert_null(job->policy_options);
	for (i = 0; i < job->n_variables; i++)
		assert_non_null(job->variables[i].key);
	api_job_free(job);
}

static void
test_parse_defaults(void **state)
{
	struct api_job	*job;

	(void)state;
	job = job_ok("{\"id\":1,\"token\":\"t\",\"unknown\":{\"x\":[1,2]},"
	    "\"variables\":[{\"key\":\"A\",\"value\":\"b\"},"
	    "{\"key\":\"B\",\"public\":null,\"masked\":null}],"
	    "\"secrets\":{\"DB\":{\"vault\":{\"path\":\"x\"}}},"
	    "\"git_info\":{\"ref\":\"main\"}}");
	assert_int_equal(job->n_variables, 2);
	assert_true(job->variables[0].public_);
	assert_false(job->variables[0].file);
	assert_false(job->variables[0].masked);
	assert_false(job->variables[0].raw);
	assert_true(job->variables[1].public_);
	assert_null(job->variables[1].value);
	assert_int_equal(job->git_info.protected_, -1);
	assert_int_equal(job->n_secrets, 1);
	assert_string_equal(job->secrets[0].name, "DB");
	assert_true(job->secrets[0].file);
	assert_string_equal(job->secrets[0].provider, "vault");
	assert_string_equal(job->secrets[0].json, "{\"path\":\"x\"}");
	assert_false(job->image.present);
	assert_false(job->allow_git_fetch);
	assert_null(job->job_info.name);
	assert_int_equal(job->runner_info.timeout, 0);
	api_job_free(job);

	job = job_ok("{\"id\":1,\"token\":\"t\",\"git_info\":{\"protected\":null}}");
	assert_int_equal(job->git_info.protected_, -1);
	api_job_free(job);
	job = job_ok("{\"id\":1,\"token\":\"t\",\"git_info\":{\"protected\":false}}");
	assert_int_equal(job->git_info.protected_, 0);
	api_job_free(job);
	job = job_ok("{\"id\":1,\"token\":\"t\",\"git_info\":null,\"image\":null,"
	    "\"services\":null,\"variables\":null,\"features\":null}");
	assert_int_equal(job->git_info.protected_, -1);
	assert_int_equal(job->n_variables, 0);
	api_job_free(job);
}

static void
test_parse_image_and_services(void **state)
{
	struct api_job		*job;
	const struct api_image	*img, *svc;

	(void)state;
	job = job_ok("{\"id\":5,\"token\":\"t\","
	    "\"image\":{\"name\":\"alpine:3\",\"alias\":\"a\","
	    "\"entrypoint\":[\"/bin/sh\",\"-c\"],\"command\":[\"run\"],"
	    "\"ports\":[{\"number\":8080,\"protocol\":\"http\",\"name\":\"web\"}],"
	    "\"variables\":[{\"key\":\"K\",\"value\":\"V\",\"public\":false}],"
	    "\"pull_policy\":\"if-not-present\","
	    "\"executor_opts\":{\"docker\":{\"platform\":\"amd64\",\"user\":1000,"
	    "\"blammo\":1},\"powpow\":{},\"kubernetes\":{\"user\":\"1000:1000\","
	    "\"x\":null}}},"
	    "\"services\":[{\"name\":\"postgres\",\"alias\":\"db\","
	    "\"pull_policy\":[\"always\",\"never\"]},"
	    "{\"name\":\"redis\",\"executor_opts\":{\"docker\":{\"user\":\"root\"},"
	    "\"kubernetes\":null}}]}");
	img = &job->image;
	assert_true(img->present);
	assert_string_equal(img->name, "alpine:3");
	assert_string_equal(img->alias, "a");
	assert_int_equal(img->entrypoint.n, 2);
	assert_string_equal(img->entrypoint.v[1], "-c");
	assert_int_equal(img->command.n, 1);
	assert_int_equal(img->n_ports, 1);
	assert_int_equal(img->ports[0].number, 8080);
	assert_string_equal(img->ports[0].protocol, "http");
	assert_string_equal(img->ports[0].name, "web");
	assert_int_equal(img->n_variables, 1);
	assert_false(img->variables[0].public_);
	assert_int_equal(img->pull_policy.n, 1);
	assert_string_equal(img->pull_policy.v[0], "if-not-present");
	assert_string_equal(img->docker_platform, "amd64");
	assert_string_equal(img->docker_user, "1000");
	assert_string_equal(img->kubernetes_user, "1000:1000");
	assert_int_equal(img->unsupported_options.n, 3);
	assert_string_equal(img->unsupported_options.v[0], "docker.blammo");
	assert_string_equal(img->unsupported_options.v[1], "powpow");
	assert_string_equal(img->unsupported_options.v[2], "kubernetes.x");

	assert_int_equal(job->n_services, 2);
	svc = &job->services[0];
	assert_true(svc->present);
	assert_string_equal(svc->name, "postgres");
	assert_string_equal(svc->alias, "db");
	assert_int_equal(svc->pull_policy.n, 2);
	assert_string_equal(svc->pull_policy.v[1], "never");
	assert_int_equal(svc->unsupported_options.n, 0);
	svc = &job->services[1];
	assert_string_equal(svc->docker_user, "root");
	assert_null(svc->kubernetes_user);
	assert_int_equal(svc->unsupported_options.n, 0);
	api_job_free(job);
}

static void
test_parse_secrets_inputs_run(void **state)
{
	struct api_job	*job;

	(void)state;
	job = job_ok("{\"id\":5,\"token\":\"t\","
	    "\"secrets\":{\"A\":{\"file\":false,\"gcp_secret_manager\":"
	    "{\"name\":\"n\",\"version\":\"2\"}},"
	    "\"B\":{\"vault\":null,\"azure_key_vault\":{\"name\":\"k\"},"
	    "\"vault2\":{}},\"C\":{}},"
	    "\"inputs\":[{\"key\":\"env\",\"value\":{\"type\":\"string\","
	    "\"content\":\"prod\",\"sensitive\":true}},"
	    "{\"key\":\"n\",\"value\":{\"type\":\"array\",\"content\":[1,\"x\"]}},"
	    "{\"key\":\"none\"}],"
	    "\"run\":\"[{\\\"name\\\":\\\"s\\\"}]\","
	    "\"policy_options\":{\"execution_policy_job\":true,"
	    "\"policy_name\":\"p\"}}");
	assert_int_equal(job->n_secrets, 3);
	assert_string_equal(job->secrets[0].name, "A");
	assert_false(job->secrets[0].file);
	assert_string_equal(job->secrets[0].provider, "gcp_secret_manager");
	assert_string_equal(job->secrets[0].json,
	    "{\"name\":\"n\",\"version\":\"2\"}");
	assert_string_equal(job->secrets[1].provider, "azure_key_vault");
	assert_string_equal(job->secrets[1].json, "{\"name\":\"k\"}");
	assert_true(job->secrets[1].file);
	assert_string_equal(job->secrets[2].name, "C");
	assert_null(job->secrets[2].provider);
	assert_null(job->secrets[2].json);

	assert_int_equal(job->n_inputs, 3);
	assert_string_equal(job->inputs[0].key, "env");
	assert_string_equal(job->inputs[0].type, "string");
	assert_string_equal(job->inputs[0].json, "\"prod\"");
	assert_true(job->inputs[0].sensitive);
	assert_string_equal(job->inputs[1].json, "[1,\"x\"]");
	assert_false(job->inputs[1].sensitive);
	assert_null(job->inputs[2].json);
	assert_null(job->inputs[2].type);

	/* run as GitLab sends it: a string holding JSON, kept as it is. */
	assert_string_equal(job->run, "[{\"name\":\"s\"}]");
	assert_string_equal(job->policy_options,
	    "{\"execution_policy_job\":true,\"policy_name\":\"p\"}");
	api_job_free(job);

	job = job_ok("{\"id\":5,\"token\":\"t\",\"run\":[{\"name\":\"s\"}]}");
	assert_string_equal(job->run, "[{\"name\":\"s\"}]");
	assert_true(job->run_steps);
	api_job_free(job);
}

/* Whether run asks for steps: what the job must fail on (runner_unsupported). */
static void
test_parse_run_steps(void **state)
{
	static const struct {
		const char	*run;		/* the member's JSON; NULL: absent */
		bool		 steps;
	} t[] = {
		{ NULL, false },
		{ "null", false },
		{ "\"\"", false },
		{ "\"[]\"", false },
		{ "[]", false },
		{ "\" [ ] \"", false },
		{ "\"[{\\\"name\\\":\\\"hello\\\",\\\"script\\\":\\\"echo hi\\\"}]\"", true },
		{ "[{\"name\":\"hello\",\"func\":\"registry.example.com/f:1\"}]", true },
		{ "\"not json\"", true },
		{ "\"{\\\"name\\\":\\\"s\\\"}\"", true },
	};
	struct api_job *job;
	char *body;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		body = t[i].run == NULL ? xstrdup("{\"id\":5,\"token\":\"t\"}") :
		    xasprintf("{\"id\":5,\"token\":\"t\",\"run\":%s}", t[i].run);
		job = job_ok(body);
		if (job->run_steps != t[i].steps)
			fail_msg("run %s: run_steps %d", t[i].run ? t[i].run : "(absent)",
			    job->run_steps);
		api_job_free(job);
		free(body);
	}
}

static void
test_parse_type_errors(void **state)
{
	static const struct {
		const char	*json;
		const char	*err;
	} cases[] = {
		{ "{\"id\":1,\"token\":\"t\",\"variables\":[{},{},{},{\"key\":5}]}",
		  "job payload: variables[3].key must be a string, not a number" },
		{ "{\"id\":\"1\",\"token\":\"t\"}",
		  "job payload: id must be an integer, not a string" },
		{ "{\"id\":1.5,\"token\":\"t\"}",
		  "job payload: id must be an integer" },
		{ "{\"id\":1e30,\"token\":\"t\"}",
		  "job payload: id is out of range" },
		{ "{\"id\":1e400,\"token\":\"t\"}",
		  "job payload: id must be an integer" },
		{ "{\"id\":true,\"token\":\"t\"}",
		  "job payload: id must be an integer, not a boolean" },
		{ "{\"id\":1,\"token\":7}",
		  "job payload: token must be a string, not a number" },
		{ "{\"id\":1,\"token\":\"t\",\"allow_git_fetch\":\"true\"}",
		  "job payload: allow_git_fetch must be a boolean, not a string" },
		{ "{\"id\":1,\"token\":\"t\",\"job_info\":[]}",
		  "job payload: job_info must be an object, not an array" },
		{ "{\"id\":1,\"token\":\"t\",\"job_info\":{\"time_in_queue_seconds\":\"1\"}}",
		  "job payload: job_info.time_in_queue_seconds must be a number, not a string" },
		{ "{\"id\":1,\"token\":\"t\",\"job_info\":{\"project_jobs_running_on_instance_runners_count\":0}}",
		  "job payload: job_info.project_jobs_running_on_instance_runners_count must be a string, not a number" },
		{ "{\"id\":1,\"token\":\"t\",\"git_info\":{\"protected\":\"yes\"}}",
		  "job payload: git_info.protected must be a boolean, not a string" },
		{ "{\"id\":1,\"token\":\"t\",\"git_info\":{\"refspecs\":[\"a\",{}]}}",
		  "job payload: git_info.refspecs[1] must be a string, not an object" },
		{ "{\"id\":1,\"token\":\"t\",\"runner_info\":{\"timeout\":true}}",
		  "job payload: runner_info.timeout must be an integer, not a boolean" },
		{ "{\"id\":1,\"token\":\"t\",\"variables\":[{\"key\":\"A\",\"public\":null,\"masked\":[]}]}",
		  "job payload: variables[0].masked must be a boolean, not an array" },
		{ "{\"id\":1,\"token\":\"t\",\"variables\":{}}",
		  "job payload: variables must be an array, not an object" },
		{ "{\"id\":1,\"token\":\"t\",\"variables\":[null]}",
		  "job payload: variables[0] must be an object, not null" },
		{ "{\"id\":1,\"token\":\"t\",\"steps\":[{\"script\":[\"a\",null]}]}",
		  "job payload: steps[0].script[1] must be a string, not null" },
		{ "{\"id\":1,\"token\":\"t\",\"steps\":[1]}",
		  "job payload: steps[0] must be an object, not a number" },
		{ "{\"id\":1,\"token\":\"t\",\"steps\":[{\"timeout\":0.5}]}",
		  "job payload: steps[0].timeout must be an integer" },
		{ "{\"id\":1,\"token\":\"t\",\"hooks\":[{\"script\":\"x\"}]}",
		  "job payload: hooks[0].script must be an array, not a string" },
		{ "{\"id\":1,\"token\":\"t\",\"image\":3}",
		  "job payload: image must be an object, not a number" },
		{ "{\"id\":1,\"token\":\"t\",\"image\":{\"ports\":[{\"number\":\"80\"}]}}",
		  "job payload: image.ports[0].number must be an integer, not a string" },
		{ "{\"id\":1,\"token\":\"t\",\"image\":{\"variables\":[{\"key\":{}}]}}",
		  "job payload: image.variables[0].key must be a string, not an object" },
		{ "{\"id\":1,\"token\":\"t\",\"image\":{\"executor_opts\":[]}}",
		  "job payload: image.executor_opts must be an object, not an array" },
		{ "{\"id\":1,\"token\":\"t\",\"image\":{\"executor_opts\":{\"docker\":\"x\"}}}",
		  "job payload: image.executor_opts.docker must be an object, not a string" },
		{ "{\"id\":1,\"token\":\"t\",\"image\":{\"executor_opts\":{\"docker\":{\"user\":true}}}}",
		  "job payload: image.executor_opts.docker.user must be a string or an integer, not a boolean" },
		{ "{\"id\":1,\"token\":\"t\",\"image\":{\"executor_opts\":{\"kubernetes\":{\"user\":1.5}}}}",
		  "job payload: image.executor_opts.kubernetes.user must be an integer" },
		{ "{\"id\":1,\"token\":\"t\",\"services\":[{},{\"pull_policy\":5}]}",
		  "job payload: services[1].pull_policy must be a string or an array of strings, not a number" },
		{ "{\"id\":1,\"token\":\"t\",\"services\":[{\"pull_policy\":[\"a\",1]}]}",
		  "job payload: services[0].pull_policy[1] must be a string, not a number" },
		{ "{\"id\":1,\"token\":\"t\",\"artifacts\":[{\"untracked\":0}]}",
		  "job payload: artifacts[0].untracked must be a boolean, not a number" },
		{ "{\"id\":1,\"token\":\"t\",\"cache\":[{\"fallback_keys\":[1]}]}",
		  "job payload: cache[0].fallback_keys[0] must be a string, not a number" },
		{ "{\"id\":1,\"token\":\"t\",\"credentials\":[{\"password\":false}]}",
		  "job payload: credentials[0].password must be a string, not a boolean" },
		{ "{\"id\":1,\"token\":\"t\",\"dependencies\":[{\"artifacts_file\":{\"size\":\"big\"}}]}",
		  "job payload: dependencies[0].artifacts_file.size must be an integer, not a string" },
		{ "{\"id\":1,\"token\":\"t\",\"dependencies\":[{\"artifacts_file\":\"a.zip\"}]}",
		  "job payload: dependencies[0].artifacts_file must be an object, not a string" },
		{ "{\"id\":1,\"token\":\"t\",\"features\":{\"failure_reasons\":\"x\"}}",
		  "job payload: features.failure_reasons must be an array, not a string" },
		{ "{\"id\":1,\"token\":\"t\",\"features\":{\"trace_sections\":1}}",
		  "job payload: features.trace_sections must be a boolean, not a number" },
		{ "{\"id\":1,\"token\":\"t\",\"secrets\":[]}",
		  "job payload: secrets must be an object, not an array" },
		{ "{\"id\":1,\"token\":\"t\",\"secrets\":{\"DB\":true}}",
		  "job payload: secrets.DB must be an object, not a boolean" },
		{ "{\"id\":1,\"token\":\"t\",\"secrets\":{\"DB\":{\"vault\":{},\"file\":\"no\"}}}",
		  "job payload: secrets.DB.file must be a boolean, not a string" },
		{ "{\"id\":1,\"token\":\"t\",\"secrets\":{\"a\\nb\":5}}",
		  "job payload: secrets.a?b must be an object, not a number" },
		{ "{\"id\":1,\"token\":\"t\",\"inputs\":[{\"key\":\"a\",\"value\":{\"sensitive\":1}}]}",
		  "job payload: inputs[0].value.sensitive must be a boolean, not a number" },
		{ "{\"id\":1,\"token\":\"t\",\"inputs\":[{\"value\":[]}]}",
		  "job payload: inputs[0].value must be an object, not an array" },
		/* The first error wins. */
		{ "{\"token\":\"t\",\"variables\":5,\"steps\":6}",
		  "job payload: variables must be an array, not a number" },
		/* Required fields. */
		{ "{\"token\":\"t\"}", "job payload: id is missing" },
		{ "{\"id\":null,\"token\":\"t\"}", "job payload: id is missing" },
		{ "{\"id\":0,\"token\":\"t\"}", "job payload: id must be positive" },
		{ "{\"id\":-4,\"token\":\"t\"}", "job payload: id must be positive" },
		{ "{\"id\":1}", "job payload: token is missing" },
		{ "{\"id\":1,\"token\":null}", "job payload: token is missing" },
		{ "{\"id\":1,\"token\":\"\"}", "job payload: token is empty" },
		/* Not an object, not JSON. */
		{ "[]", "job payload is not a JSON object" },
		{ "42", "job payload is not a JSON object" },
		{ "null", "job payload is not a JSON object" },
		{ "\"x\"", "job payload is not a JSON object" },
		{ "", "job payload is empty" },
		{ "{\"id\": 1,}", "job payload: not valid JSON near byte 9" },
		{ "{\"id\":1,\"token\":\"t\"} x", "job payload: not valid JSON near byte 21" },
		{ "{\"id\":1,\"token\":\"t\"}{}", "job payload: not valid JSON near byte 20" },
		{ "nope", "job payload: not valid JSON near byte 0" },
	};
	size_t	i;

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
		assert_job_err(cases[i].json, cases[i].err);
}

/* Names from the server are cut short in messages. */
static void
test_parse_long_key_in_error(void **state)
{
	char	 name[201], *body, *err;

	(void)state;
	memset(name, 'n', 200);
	name[200] = '\0';
	body = xasprintf("{\"id\":1,\"token\":\"t\",\"secrets\":{\"%s\":1}}",
	    name);
	err = job_err_len(body, strlen(body));
	assert_non_null(strstr(err, "secrets.nnnn"));
	assert_non_null(strstr(err, "n... must be an object, not a number"));
	assert_true(strlen(err) < 150);
	free(err);
	free(body);
}

/* Whitespace around the value is fine; what cJSON allows before it too. */
static void
test_parse_whitespace_and_trailing(void **state)
{
	struct api_job	*job;

	(void)state;
	job = job_ok(" \r\n\t{\"id\":1,\"token\":\"t\"} \n\t\r ");
	api_job_free(job);
}

static void
test_truncated_prefixes(void **state)
{
	size_t	 len, n;
	char	*buf, *err;

	(void)state;
	/* Every prefix that stops short of the closing brace. */
	len = (size_t)(strrchr(example_job, '}') - example_job);
	for (n = 0; n <= len; n++) {
		/* Exactly n bytes on the heap: ASan sees any read past them. */
		buf = xmalloc(n == 0 ? 1 : n);
		memcpy(buf, example_job, n);
		err = job_err_len(buf, n);
		free(err);
		free(buf);
	}
}

/* A small deterministic generator: the same garbage on every run. */
static uint32_t
next_rand(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static void
try_everything(const char *buf, size_t len)
{
	struct api_job		*job = NULL;
	struct api_runner_token	 tok;
	char			*err = NULL, *url = NULL, *msg;

	if (json_parse_job(buf, len, &job, &err) == 0) {
		assert_null(err);
		api_job_free(job);
	} else {
		assert_null(job);
		assert_non_null(err);
		free(err);
	}
	err = NULL;
	if (json_parse_runner_token(buf, len, &tok, &err) == 0)
		api_runner_token_release(&tok);
	else {
		assert_null(tok.token);
		free(err);
	}
	err = NULL;
	if (json_parse_discovery(buf, len, &url, &err) == 0)
		free(url);
	else {
		assert_null(url);
		free(err);
	}
	msg = json_error_message(buf, len);
	free(msg);
}

static void
test_garbage(void **state)
{
	static const char	 alphabet[] = "{}[]\":,0123456789.eE-+ \\utrfalsn";
	uint32_t		 seed = 0x9e3779b9;
	size_t			 len = strlen(example_job), i, n, k;
	char			*buf;

	(void)state;
	/* Random bytes and random JSON-ish text. */
	for (i = 0; i < 3000; i++) {
		n = next_rand(&seed) % 300;
		buf = xmalloc(n + 1);
		for (k = 0; k < n; k++) {
			if (i % 2)
				buf[k] = (char)next_rand(&seed);
			else
				buf[k] = alphabet[next_rand(&seed) %
				    (sizeof alphabet - 1)];
		}
		try_everything(buf, n);
		free(buf);
	}
	/* The real payload with a few bytes changed: deeper paths get hit. */
	for (i = 0; i < 3000; i++) {
		buf = xmemdup(example_job, len);
		for (k = 0; k < 1 + next_rand(&seed) % 4; k++) {
			buf[next_rand(&seed) % len] = (i % 3) ?
			    alphabet[next_rand(&seed) % (sizeof alphabet - 1)] :
			    (char)next_rand(&seed);
		}
		try_everything(buf, len);
		free(buf);
	}
	/* And the intact payload through every parser. */
	try_everything(example_job, len);
}

static void
test_huge_string(void **state)
{
	const size_t	 big = 10 * 1024 * 1024;
	struct api_job	*job;
	char		*body;
	size_t		 off;

	(void)state;
	body = xmalloc(big + 128);
	off = (size_t)sprintf(body, "{\"id\":1,\"token\":\"t\",\"variables\":"
	    "[{\"key\":\"BIG\",\"value\":\"");
	memset(body + off, 'x', big);
	off += big;
	strcpy(body + off, "\"}]}");
	job = job_ok(body);
	assert_int_equal(strlen(job->variables[0].value), big);
	api_job_free(job);
	free(body);
}

static void
test_nul_bytes(void **state)
{
	static const char	 raw_in_string[] =
	    "{\"id\":1,\"token\":\"t\",\"variables\":[{\"key\":\"A\",\"value\":\"a\0b\"}]}";
	static const char	 raw_outside[] = "{\"id\":1,\0\"token\":\"t\"}";
	static const char	 raw_after[] = "{\"id\":1,\"token\":\"t\"}\0junk";
	struct api_job		*job;
	char			*err;

	(void)state;
	/* An escaped NUL: cJSON ends the C string there; no crash is the point. */
	job = job_ok("{\"id\":1,\"token\":\"t\",\"variables\":"
	    "[{\"key\":\"A\",\"value\":\"a\\u0000b\"}]}");
	assert_string_equal(job->variables[0].key, "A");
	assert_non_null(job->variables[0].value);
	api_job_free(job);

	/* A raw NUL is not JSON anywhere: a value cut at it must not run. */
	err = job_err_len(raw_in_string, sizeof raw_in_string - 1);
	assert_string_equal(err, "job payload: not valid JSON near byte 54");
	free(err);
	err = job_err_len(raw_outside, sizeof raw_outside - 1);
	assert_string_equal(err, "job payload: not valid JSON near byte 8");
	free(err);
	err = job_err_len(raw_after, sizeof raw_after - 1);
	assert_string_equal(err, "job payload: not valid JSON near byte 20");
	free(err);
	/* The length counts the terminating NUL: the length wins. */
	err = job_err_len("{\"id\":1,\"token\":\"t\"}", 21);
	assert_string_equal(err, "job payload: not valid JSON near byte 20");
	free(err);
}

static void
test_nesting(void **state)
{
	const size_t	 deep = 100000, ok = 500;
	struct api_job	*job;
	char		*body, *err;
	size_t		 off, i;

	(void)state;
	/* Past cJSON's nesting limit: refused, and no stack exhaustion. */
	body = xmalloc(deep + 64);
	off = (size_t)sprintf(body, "{\"id\":1,\"token\":\"t\",\"x\":");
	memset(body + off, '[', deep);
	body[off + deep] = '\0';
	err = job_err_len(body, strlen(body));
	assert_non_null(strstr(err, "not valid JSON near byte"));
	free(err);
	free(body);

	/* Deep but allowed, in a member that is kept as text. */
	body = xmalloc(2 * ok + 64);
	off = (size_t)sprintf(body, "{\"id\":1,\"token\":\"t\",\"policy_options\":");
	for (i = 0; i < ok; i++)
		body[off++] = '[';
	for (i = 0; i < ok; i++)
		body[off++] = ']';
	strcpy(body + off, "}");
	job = job_ok(body);
	assert_int_equal(strlen(job->policy_options), 2 * ok);
	api_job_free(job);
	free(body);
}

static void
test_big_numbers(void **state)
{
	struct api_job	*job;

	(void)state;
	job = job_ok("{\"id\":4611686018427387904,\"token\":\"t\","
	    "\"job_info\":{\"project_id\":-9223372036854775808}}");
	assert_true(job->id == INT64_C(4611686018427387904));
	assert_true(job->job_info.project_id == INT64_MIN);
	api_job_free(job);
	/* 2^63 does not fit. */
	assert_job_err("{\"id\":9223372036854775808,\"token\":\"t\"}",
	    "job payload: id is out of range");
	job = job_ok("{\"id\":1e3,\"token\":\"t\"}");
	assert_int_equal(job->id, 1000);
	api_job_free(job);
	job = job_ok("{\"id\":2.0,\"token\":\"t\"}");
	assert_int_equal(job->id, 2);
	api_job_free(job);
}

/*
 * Members given twice (cJSON keeps both): the last one wins, as in Go's
 * decoder, a later null keeps the earlier value, and nothing may leak.
 */
static void
test_duplicate_members(void **state)
{
	struct api_job	*job;

	(void)state;
	job = job_ok("{\"id\":1,\"id\":7,\"token\":\"a\",\"token\":\"b\","
	    "\"job_info\":{\"name\":\"first\",\"name\":\"last\",\"stage\":\"s\","
	    "\"stage\":null},"
	    "\"image\":{\"executor_opts\":{\"docker\":{\"platform\":\"x\","
	    "\"platform\":\"y\",\"user\":\"u\",\"user\":2}}}}");
	assert_int_equal(job->id, 7);
	assert_string_equal(job->token, "b");
	assert_string_equal(job->job_info.name, "last");
	assert_string_equal(job->job_info.stage, "s");
	assert_string_equal(job->image.docker_platform, "y");
	assert_string_equal(job->image.docker_user, "2");
	api_job_free(job);
}

static void
test_free_null(void **state)
{
	struct api_runner_token	 t;

	(void)state;
	api_job_free(NULL);
	api_runner_token_release(NULL);
	memset(&t, 0, sizeof t);
	api_runner_token_release(&t);
	t.token = xstrdup("x");
	t.id = 3;
	api_runner_token_release(&t);
	assert_null(t.token);
	assert_int_equal(t.id, 0);
}

/* ---- Tokens, discovery, errors. ---- */

static void
token_ok(const char *body, struct api_runner_token *t)
{
	char	*err = NULL;

	if (json_parse_runner_token(body, strlen(body), t, &err) != 0)
		fail_msg("token parse failed: %s\n%s", err, body);
	assert_null(err);
}

static void
assert_token_err(const char *body, const char *want)
{
	struct api_runner_token	 t;
	char			*err = NULL;

	t.token = (char *)1;
	assert_int_equal(json_parse_runner_token(body, strlen(body), &t, &err),
	    -1);
	assert_null(t.token);
	assert_false(t.expires);
	assert_non_null(err);
	if (strcmp(err, want) != 0)
		fail_msg("for %s\n  got  \"%s\"\n  want \"%s\"", body, err, want);
	free(err);
}

static void
test_runner_token(void **state)
{
	static const char *const same_instant[] = {
		"2026-10-16T13:25:59Z",
		"2026-10-16T13:25:59.123456Z",
		"2026-10-16T13:25:59.5z",
		"2026-10-16t13:25:59Z",
		"2026-10-16T15:25:59+02:00",
		"2026-10-16T08:55:59-04:30",
		"2026-10-17T00:25:59.000+11:00",
	};
	struct api_runner_token	 t;
	char			*body;
	size_t			 i;

	(void)state;
	for (i = 0; i < sizeof same_instant / sizeof same_instant[0]; i++) {
		body = xasprintf("{\"id\":12345,\"token\":\"xyz\","
		    "\"token_expires_at\":\"%s\"}", same_instant[i]);
		token_ok(body, &t);
		assert_int_equal(t.id, 12345);
		assert_string_equal(t.token, "xyz");
		if (!t.expires || t.expires_at != EXPIRY)
			fail_msg("%s: got %lld", same_instant[i],
			    (long long)t.expires_at);
		api_runner_token_release(&t);
		free(body);
	}

	token_ok("{\"id\":1,\"token\":\"glrt-x\",\"token_expires_at\":null}", &t);
	assert_false(t.expires);
	assert_string_equal(t.token, "glrt-x");
	api_runner_token_release(&t);
	token_ok("{\"token\":\"glrt-x\"}", &t);
	assert_int_equal(t.id, 0);
	assert_false(t.expires);
	api_runner_token_release(&t);
	token_ok("{\"id\":1,\"token_expires_at\":\"0001-01-01T00:00:00Z\"}", &t);
	assert_false(t.expires);
	assert_null(t.token);
	api_runner_token_release(&t);
	token_ok("{}", &t);
	assert_int_equal(t.id, 0);
	assert_null(t.token);
	api_runner_token_release(&t);
	/* Leap day. */
	token_ok("{\"token_expires_at\":\"2028-02-29T00:00:00Z\"}", &t);
	assert_true(t.expires);
	assert_int_equal(t.expires_at, 1835395200);
	api_runner_token_release(&t);

	assert_token_err("{\"token\":\"x\",\"token_expires_at\":\"tomorrow\"}",
	    "token answer: token_expires_at is not an RFC 3339 time");
	assert_token_err("{\"token_expires_at\":\"2026-10-16T13:25:59\"}",
	    "token answer: token_expires_at is not an RFC 3339 time");
	assert_token_err("{\"token_expires_at\":\"2026-02-30T00:00:00Z\"}",
	    "token answer: token_expires_at is not an RFC 3339 time");
	assert_token_err("{\"token_expires_at\":\"2027-02-29T00:00:00Z\"}",
	    "token answer: token_expires_at is not an RFC 3339 time");
	assert_token_err("{\"token_expires_at\":\"2026-10-16T24:00:00Z\"}",
	    "token answer: token_expires_at is not an RFC 3339 time");
	assert_token_err("{\"token_expires_at\":\"2026-10-16T13:25:59.Z\"}",
	    "token answer: token_expires_at is not an RFC 3339 time");
	assert_token_err("{\"token_expires_at\":\"2026-10-16T13:25:59+0200\"}",
	    "token answer: token_expires_at is not an RFC 3339 time");
	assert_token_err("{\"token_expires_at\":\"2026-10-16T13:25:59Zjunk\"}",
	    "token answer: token_expires_at is not an RFC 3339 time");
	assert_token_err("{\"token_expires_at\":\"\"}",
	    "token answer: token_expires_at is not an RFC 3339 time");
	assert_token_err("{\"token\":\"x\",\"token_expires_at\":1792157159}",
	    "token answer: token_expires_at must be a string, not a number");
	assert_token_err("{\"id\":\"12\",\"token\":\"x\"}",
	    "token answer: id must be an integer, not a string");
	assert_token_err("{\"token\":[\"x\"]}",
	    "token answer: token must be a string, not an array");
	assert_token_err("200", "token answer is not a JSON object");
	assert_token_err("<html>", "token answer: not valid JSON near byte 0");
}

static void
test_discovery(void **state)
{
	char	*url = NULL, *err = NULL;
	const char *body =
	    "{\"server_url\":\"wss://gitlab.example.com/-/kubernetes-agent/\"}";

	(void)state;
	assert_int_equal(json_parse_discovery(body, strlen(body), &url, &err), 0);
	assert_null(err);
	assert_string_equal(url, "wss://gitlab.example.com/-/kubernetes-agent/");
	free(url);

	body = "{}";
	assert_int_equal(json_parse_discovery(body, strlen(body), &url, &err), -1);
	assert_null(url);
	assert_string_equal(err, "discovery answer: server_url is missing");
	free(err);
	body = "{\"server_url\":5}";
	assert_int_equal(json_parse_discovery(body, strlen(body), &url, &err), -1);
	assert_null(url);
	assert_string_equal(err,
	    "discovery answer: server_url must be a string, not a number");
	free(err);
	body = "{\"server_url\":\"\"}";
	assert_int_equal(json_parse_discovery(body, strlen(body), &url, &err), -1);
	assert_null(url);
	assert_string_equal(err, "discovery answer: server_url is empty");
	free(err);
	body = "[\"grpc://x\"]";
	assert_int_equal(json_parse_discovery(body, strlen(body), &url, &err), -1);
	assert_string_equal(err, "discovery answer is not a JSON object");
	free(err);
}

static void
assert_message(const char *body, const char *want)
{
	char	*got = json_error_message(body, strlen(body));

	if (want == NULL) {
		if (got != NULL)
			fail_msg("for %s: expected NULL, got \"%s\"", body, got);
		return;
	}
	if (got == NULL)
		fail_msg("for %s: got NULL", body);
	if (strcmp(got, want) != 0)
		fail_msg("for %s\n  got  \"%s\"\n  want \"%s\"", body, got, want);
	free(got);
}

static void
test_error_message(void **state)
{
	char	*body, *got, *long_text;

	(void)state;
	assert_message("{\"message\":{\"runner_projects.base\":[\"Maximum number "
	    "of ci registered project runners (3) exceeded\"]}}",
	    "runner_projects.base: Maximum number of ci registered project "
	    "runners (3) exceeded");
	assert_message("{\"message\":{\"tags\":[\"x\",\"y\"],\"base\":[\"z\"]}}",
	    "base: z, tags: x; y");
	assert_message("{\"message\":\"403 Forbidden\"}", "403 Forbidden");
	assert_message("{\"message\":[\"e1\",\"e2\"]}", "e1; e2");
	assert_message("{\"message\":{\"f\":\"plain\"}}", "f: plain");
	assert_message("{\"message\":\"line1\\nline2\"}", "line1 line2");
	assert_message("{\"message\":404}", "404");
	assert_message("{\"error\":\"404 Not Found\"}", "404 Not Found");
	assert_message("{\"error\":\"invalid_token\",\"error_description\":"
	    "\"Token was revoked\"}", "invalid_token: Token was revoked");
	assert_message("{\"error_description\":\"only this\"}", "only this");
	assert_message("{\"message\":\"m\",\"error\":\"e\"}", "m");
	assert_message("not json", NULL);
	assert_message("200", NULL);
	assert_message("[]", NULL);
	assert_message("{}", NULL);
	assert_message("{\"other\":1}", NULL);
	assert_message("{\"message\":null}", NULL);
	assert_message("{\"message\":{}}", NULL);
	assert_message("{\"message\":\"\"}", NULL);
	assert_message("", NULL);
	assert_null(json_error_message(NULL, 0));

	/* A log line, not a dump: cut, on a character boundary. */
	long_text = xmalloc(5001);
	memset(long_text, 'a', 5000);
	long_text[5000] = '\0';
	memcpy(long_text + 1020, "\xc3\xa9", 2);
	body = xasprintf("{\"message\":\"%s\"}", long_text);
	got = json_error_message(body, strlen(body));
	assert_non_null(got);
	assert_int_equal(strlen(got), 1020 + 3);
	assert_string_equal(got + 1020, "...");
	free(got);
	free(body);
	free(long_text);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_info_object),
		cmocka_unit_test(test_info_omissions),
		cmocka_unit_test(test_register_request),
		cmocka_unit_test(test_int64_exact),
		cmocka_unit_test(test_verify_and_token_requests),
		cmocka_unit_test(test_job_update),
		cmocka_unit_test(test_parse_example),
		cmocka_unit_test(test_parse_defaults),
		cmocka_unit_test(test_parse_image_and_services),
		cmocka_unit_test(test_parse_secrets_inputs_run),
		cmocka_unit_test(test_parse_run_steps),
		cmocka_unit_test(test_parse_type_errors),
		cmocka_unit_test(test_parse_long_key_in_error),
		cmocka_unit_test(test_parse_whitespace_and_trailing),
		cmocka_unit_test(test_truncated_prefixes),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_huge_string),
		cmocka_unit_test(test_nul_bytes),
		cmocka_unit_test(test_nesting),
		cmocka_unit_test(test_big_numbers),
		cmocka_unit_test(test_duplicate_members),
		cmocka_unit_test(test_free_null),
		cmocka_unit_test(test_runner_token),
		cmocka_unit_test(test_discovery),
		cmocka_unit_test(test_error_message),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

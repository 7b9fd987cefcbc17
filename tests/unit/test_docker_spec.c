/*
 * The docker executor's pure parts (executors/docker/spec.c) against
 * gitlab-runner's own behaviour: each table names the upstream test (or
 * source) its cases come from; where this runner differs on purpose, the
 * case says so.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>

#include "executors/docker/settings.h"
#include "executors/docker/spec.h"
#include "lib/strv.h"
#include "lib/xmalloc.h"

#define NITEMS(a)	(sizeof(a) / sizeof((a)[0]))
#define P		DOCKER_LABEL_PREFIX

/* ---- helpers ---- */

/* A strv of a NULL-terminated list. */
static void
strv_of(struct strv *sv, const char *const *v)
{
	for (; v != NULL && *v != NULL; v++)
		strv_push(sv, *v);
}

static void
assert_strv(const struct strv *got, const char *const *want)
{
	size_t n = 0;

	for (; want[n] != NULL; n++) {
		if (n >= got->n)
			fail_msg("only %zu entries, \"%s\" missing", got->n, want[n]);
		assert_string_equal(got->v[n], want[n]);
	}
	assert_int_equal(got->n, n);
}

static const cJSON *
item(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (v == NULL)
		fail_msg("no \"%s\"", key);
	return v;
}

static void
assert_absent(const cJSON *o, const char *key)
{
	if (cJSON_GetObjectItemCaseSensitive(o, key) != NULL)
		fail_msg("\"%s\" should not be there", key);
}

static const char *
str(const cJSON *o, const char *key)
{
	const cJSON *v = item(o, key);

	if (!cJSON_IsString(v))
		fail_msg("\"%s\" is not a string", key);
	return v->valuestring;
}

static double
num(const cJSON *o, const char *key)
{
	const cJSON *v = item(o, key);

	if (!cJSON_IsNumber(v))
		fail_msg("\"%s\" is not a number", key);
	return v->valuedouble;
}

static bool
flag(const cJSON *o, const char *key)
{
	const cJSON *v = item(o, key);

	if (!cJSON_IsBool(v))
		fail_msg("\"%s\" is not a bool", key);
	return cJSON_IsTrue(v);
}

/* A JSON array of strings, exactly. */
static void
assert_list(const cJSON *o, const char *key, const char *const *want)
{
	const cJSON *a = item(o, key), *e;
	size_t n = 0;

	assert_true(cJSON_IsArray(a));
	cJSON_ArrayForEach(e, a) {
		if (want[n] == NULL)
			fail_msg("\"%s\": more than %zu entries", key, n);
		assert_true(cJSON_IsString(e));
		assert_string_equal(e->valuestring, want[n]);
		n++;
	}
	if (want[n] != NULL)
		fail_msg("\"%s\": \"%s\" missing", key, want[n]);
}

/* A JSON object of strings, exactly: want is key, value, ..., NULL. */
static void
assert_map(const cJSON *o, const char *key, const char *const *want)
{
	const cJSON *m = item(o, key);
	size_t n = 0;

	assert_true(cJSON_IsObject(m));
	for (; want[2 * n] != NULL; n++)
		assert_string_equal(str(m, want[2 * n]), want[2 * n + 1]);
	assert_int_equal(cJSON_GetArraySize(m), n);
}

static cJSON *
body(const struct ctr_spec *spec, const struct docker_settings *s, const char *api)
{
	char *error = (char *)"unset", *text;
	cJSON *o;

	text = docker_create_body(spec, s, api, &error);
	if (text == NULL)
		fail_msg("no body: %s", error);
	assert_null(error);
	o = cJSON_Parse(text);
	assert_non_null(o);
	free(text);
	return o;
}

/* docker_create_body's refusal of s, by its message. */
static void
assert_refused(const struct ctr_spec *spec, const struct docker_settings *s, const char *want)
{
	char *error = NULL, *text;

	text = docker_create_body(spec, s, "1.44", &error);
	assert_null(text);
	assert_non_null(error);
	assert_string_equal(error, want);
	free(error);
}

/* ---- service names and aliases ---- */

#define DIGEST "@sha256:123456789012345678901234567890123456789012345678901234567890abcd"

/*
 * helpers/container/services/test/test.go's Services, as TestSplitNameAndVersion
 * and TestServiceFromNamedImage read it: the description, its alias (the
 * container name part: Service with '/' as "__") and its alternative ('/'
 * as '-', only when it differs).
 */
static const struct {
	const char	*description;
	const char	*alias;
	const char	*alternative;
} services[] = {
	{ "service", "service", NULL },
	{ "service:version", "service", NULL },
	{ "namespace/service", "namespace__service", "namespace-service" },
	{ "namespace/service:version", "namespace__service", "namespace-service" },
	{ "domain.tld/service", "domain.tld__service", "domain.tld-service" },
	{ "domain.tld/service:version", "domain.tld__service", "domain.tld-service" },
	{ "domain.tld/namespace/service", "domain.tld__namespace__service",
	    "domain.tld-namespace-service" },
	{ "domain.tld/namespace/service:version", "domain.tld__namespace__service",
	    "domain.tld-namespace-service" },
	{ "domain.tld:8080/service", "domain.tld__service", "domain.tld-service" },
	{ "domain.tld:8080/service:version", "domain.tld__service", "domain.tld-service" },
	{ "domain.tld:8080/namespace/service", "domain.tld__namespace__service",
	    "domain.tld-namespace-service" },
	{ "domain.tld:8080/namespace/service:version", "domain.tld__namespace__service",
	    "domain.tld-namespace-service" },
	{ "subdomain.domain.tld:8080/service", "subdomain.domain.tld__service",
	    "subdomain.domain.tld-service" },
	{ "subdomain.domain.tld:8080/service:version", "subdomain.domain.tld__service",
	    "subdomain.domain.tld-service" },
	{ "subdomain.domain.tld:8080/namespace/service",
	    "subdomain.domain.tld__namespace__service",
	    "subdomain.domain.tld-namespace-service" },
	{ "subdomain.domain.tld:8080/namespace/service:version",
	    "subdomain.domain.tld__namespace__service",
	    "subdomain.domain.tld-namespace-service" },
	{ "service" DIGEST, "service", NULL },
	{ "namespace/service" DIGEST, "namespace__service", "namespace-service" },
	{ "domain.tld/service" DIGEST, "domain.tld__service", "domain.tld-service" },
	{ "domain.tld/namespace/service" DIGEST, "domain.tld__namespace__service",
	    "domain.tld-namespace-service" },
	{ "domain.tld:8080/service" DIGEST, "domain.tld__service", "domain.tld-service" },
	{ "domain.tld:8080/namespace/service" DIGEST, "domain.tld__namespace__service",
	    "domain.tld-namespace-service" },
	{ "subdomain.domain.tld:8080/service" DIGEST, "subdomain.domain.tld__service",
	    "subdomain.domain.tld-service" },
	/* Not in the table: a tag and a digest (reference.ReferenceRegexp: name, tag, digest). */
	{ "domain.tld:8080/namespace/service:version" DIGEST, "domain.tld__namespace__service",
	    "domain.tld-namespace-service" },
};

static void
test_service_names(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < NITEMS(services); i++) {
		const char *want[] = { services[i].alias, services[i].alternative, NULL };
		struct strv got = { 0 };
		char *part = docker_service_container_part(services[i].description);

		assert_string_equal(part, services[i].alias);
		docker_service_aliases(&got, services[i].description, NULL);
		assert_strv(&got, want);
		free(part);
		strv_release(&got);
	}
}

/* The same table's Service and Version: the labels of a service container. */
static void
test_service_split(void **state)
{
	static const struct {
		const char	*description, *service, *version;
	} t[] = {
		{ "service", "service", "latest" },
		{ "service:version", "service", "version" },
		{ "namespace/service", "namespace/service", "latest" },
		{ "domain.tld/namespace/service:version", "domain.tld/namespace/service", "version" },
		{ "domain.tld:8080/service", "domain.tld/service", "latest" },
		{ "subdomain.domain.tld:8080/namespace/service:version",
		    "subdomain.domain.tld/namespace/service", "version" },
		{ "service" DIGEST, "service", DIGEST },
		{ "domain.tld:8080/namespace/service" DIGEST, "domain.tld/namespace/service", DIGEST },
		/* A tag and a digest: the tag (reference.ReferenceRegexp's second group). */
		{ "domain.tld:8080/service:version" DIGEST, "domain.tld/service", "version" },
	};
	char *service, *version;
	size_t i;

	(void)state;
	for (i = 0; i < NITEMS(t); i++) {
		docker_service_split(t[i].description, &service, &version);
		assert_string_equal(service, t[i].service);
		assert_string_equal(version, t[i].version);
		free(service);
		free(version);
	}
}

/* TestSplitNameAndVersionEmpty: no service, so no alias. */
static void
test_service_empty(void **state)
{
	struct strv got = { 0 };

	(void)state;
	docker_service_aliases(&got, "", NULL);
	assert_int_equal(got.n, 0);
	docker_service_aliases(&got, "", "");
	assert_int_equal(got.n, 0);
}

/*
 * The job's aliases after the image's (createFromServiceDefinition), split
 * as Image.Aliases(): strings.Fields once ',' is a space (TestExpandContainerOptions:
 * "db, pg" is db and pg; TestService_ToImageDefinition: "alias-1 alias-2").
 */
static void
test_service_user_aliases(void **state)
{
	static const struct {
		const char	*image;
		const char	*aliases;
		const char	*want[8];
	} t[] = {
		{ "postgres:latest", "db, pg", { "postgres", "db", "pg" } },
		{ "redis:latest", "cache", { "redis", "cache" } },
		{ "name", "alias-1 alias-2", { "name", "alias-1", "alias-2" } },
		{ "ns/svc:1", ",a,,b  c,", { "ns__svc", "ns-svc", "a", "b", "c" } },
		{ "ns/svc:1", "a\tb\nc", { "ns__svc", "ns-svc", "a", "b", "c" } },
		{ "ns/svc:1", "   ", { "ns__svc", "ns-svc" } },
		/*
		 * Ours: a repeat is dropped.  gitlab-runner keeps it in the list
		 * and skips it when it links ("alias is already in use").
		 */
		{ "postgres:15", "postgres,db,db", { "postgres", "db" } },
		{ "ns/svc", "ns-svc", { "ns__svc", "ns-svc" } },
	};
	size_t i;

	(void)state;
	for (i = 0; i < NITEMS(t); i++) {
		struct strv got = { 0 };

		docker_service_aliases(&got, t[i].image, t[i].aliases);
		assert_strv(&got, t[i].want);
		strv_release(&got);
	}
}

/* ---- labels ---- */

/* internal/labels/labels_test.go's TestLabels. */
static void
test_labels(void **state)
{
	static const char *const extra_v[] = { P "other.label1=1", P "other.label2=2", NULL };
	static const char *const want[] = {
		P "job.id=12345",
		P "job.url=https://gitlab.example.com/namespace/project/-/jobs/12345",
		P "job.sha=sha",
		P "job.before_sha=before-sha",
		P "job.ref=ref",
		P "job.timeout=2h0m0s",
		P "project.id=123456",
		P "project.runner_id=456",
		P "pipeline.id=",
		P "runner.id=test-toke",
		P "runner.local_id=123",
		P "runner.system_id=some-system-ID",
		P "managed=true",
		RUNNER_LABEL_SYSTEM_ID "=some-system-ID",	/* ours, for the sweep */
		RUNNER_LABEL_JOB_ID "=12345",
		P "type=build",
		P "other.label1=1",
		P "other.label2=2",
		NULL,
	};
	struct label_input in = {
		.job_id = 12345,
		.job_url = "https://gitlab.example.com/namespace/project/-/jobs/12345",
		.sha = "sha",
		.before_sha = "before-sha",
		.ref = "ref",
		.timeout_s = 7200,
		.project_id = 123456,
		.concurrent_project_id = 456,
		.runner_short = "test-toke",
		.runner_id = 123,
		.system_id = "some-system-ID",
	};
	struct strv extra = { 0 }, got = { 0 };

	(void)state;
	strv_of(&extra, extra_v);
	docker_labels(&got, &in, CTR_BUILD, &extra);
	assert_strv(&got, want);
	strv_release(&got);
	strv_release(&extra);
}

/* TestLabels_pipelineIDSupport (the payload's ID; the variable is the caller's), and the types. */
static void
test_labels_pipeline_and_type(void **state)
{
	static const struct {
		int		 type;
		const char	*label;
	} types[] = {
		{ CTR_BUILD, P "type=build" },
		{ CTR_HELPER, P "type=predefined" },
		{ CTR_SERVICE, P "type=service" },
		{ CTR_WAIT, P "type=wait" },		/* labelWaitType */
		{ CTR_CACHE_INIT, P "type=cache-init" },	/* the permission container */
	};
	struct label_input in = { .job_id = 1, .pipeline_id = 987654321, .timeout_s = 3600 };
	struct strv got = { 0 };
	size_t i;

	(void)state;
	docker_labels(&got, &in, -1, NULL);
	assert_string_equal(got.v[8], P "pipeline.id=987654321");
	assert_string_equal(got.v[5], P "job.timeout=1h0m0s");
	assert_int_equal(got.n, 15);	/* no type */
	strv_release(&got);
	for (i = 0; i < NITEMS(types); i++) {
		docker_labels(&got, &in, types[i].type, NULL);
		assert_string_equal(got.v[got.n - 1], types[i].label);
		strv_release(&got);
	}
}

/* Go's time.Duration.String() of the job timeout. */
static void
test_labels_timeout(void **state)
{
	static const struct {
		int64_t		 s;
		const char	*want;
	} t[] = {
		{ 7200, P "job.timeout=2h0m0s" },
		{ 5400, P "job.timeout=1h30m0s" },
		{ 3661, P "job.timeout=1h1m1s" },
		{ 90, P "job.timeout=1m30s" },
		{ 60, P "job.timeout=1m0s" },
		{ 45, P "job.timeout=45s" },
		{ 0, P "job.timeout=0s" },
		{ 360000, P "job.timeout=100h0m0s" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < NITEMS(t); i++) {
		struct label_input in = { .timeout_s = t[i].s };
		struct strv got = { 0 };

		docker_labels(&got, &in, -1, NULL);
		assert_string_equal(got.v[5], t[i].want);
		strv_release(&got);
	}
}

/* ---- names ---- */

/* common/build_test.go's TestProjectUniqueName (with ShortenToken's 9), and helpers/dns's limit. */
static void
test_project_name(void **state)
{
	static const struct {
		const char	*shortened;
		int64_t		 project;
		int		 concurrent;
		const char	*want;
	} t[] = {
		{ "Ze_n8E6en", 1234567890, 0, "runner-zen8e6en-project-1234567890-concurrent-0" },
		{ "xYzWabc-I", 1234567890, 0, "runner-xyzwabc-i-project-1234567890-concurrent-0" },
		/* services_test.go's token abcdef1234567890 */
		{ "abcdef123", 0, 0, "runner-abcdef123-project-0-concurrent-0" },
		/* TestMakeRFC1123Compatible: [^-a-z0-9] dropped, 63 at most */
		{ "tOk3_?ofT", 1, 2, "runner-tok3oft-project-1-concurrent-2" },
		{ "abcdefghi", 1234567890123456789, 2147483647,
		    "runner-abcdefghi-project-1234567890123456789-concurrent-2147483" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < NITEMS(t); i++) {
		char *got = docker_project_name(t[i].shortened, t[i].project, t[i].concurrent);

		assert_string_equal(got, t[i].want);
		assert_true(strlen(got) <= 63);
		free(got);
	}
}

/* ProjectUniqueShortName, the FF_NETWORK_PER_BUILD network (GetNetworkName). */
static void
test_network_name(void **state)
{
	static const struct {
		const char	*shortened;
		int64_t		 project, job;
		int		 concurrent;
		const char	*want;
	} t[] = {
		{ "Ze_n8E6en", 1234, 987654321, 0, "runner-zen8e6en-1234-0-987654321" },
		{ "xYzWabc-I", 1, 2, 3, "runner-xyzwabc-i-1-3-2" },
		{ "abcdefghi", 1234567890123456789, 1234567890123456789, 2147483647,
		    "runner-abcdefghi-1234567890123456789-2147483647-123456789012345" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < NITEMS(t); i++) {
		char *got = docker_network_name(t[i].shortened, t[i].project, t[i].concurrent,
		    t[i].job);

		assert_string_equal(got, t[i].want);
		free(got);
	}
}

/*
 * getProjectUniqRandomizedName: the project name, '-' and GenerateRandomUUID(8)
 * (16 hex), once per job (services_test.go matches "<project>-[^-]+-<part>-0").
 */
static void
test_job_prefix(void **state)
{
	const char *project = "runner-abcdef123-project-0-concurrent-0";
	char *a = docker_job_prefix(project), *b = docker_job_prefix(project);
	size_t n = strlen(project), i;

	(void)state;
	assert_int_equal(strlen(a), n + 17);
	assert_memory_equal(a, project, n);
	assert_int_equal(a[n], '-');
	for (i = n + 1; a[i] != '\0'; i++)
		assert_non_null(strchr("0123456789abcdef", a[i]));
	assert_string_not_equal(a, b);	/* random: a collision is 2^-64 */
	free(a);
	free(b);
}

/* internal/volumes/manager_test.go (TestDefaultManager_CreateUserVolumes_CacheVolume_*): md5 of the path. */
static void
test_cache_volume_name(void **state)
{
	static const struct {
		const char	*unique;
		const char	*path;
		bool		 protected_ref;
		const char	*want;
	} t[] = {
		{ "uniq", "/volume", false, "uniq-cache-14331bf18c8e434c4b3f48a8c5cc79aa" },
		{ "uniq", "/builds/project/volume", false,
		    "uniq-cache-f69aef9fb01e88e6213362a04877452d" },
		{ "temporary", "volume", false, "temporary-cache-210ab9e731c9c36c2c38db15c28a8d1c" },
		{ "some-unique-name", "/some/base/path/some/volume", true,
		    "some-unique-name-cache-7ee4ee58453a23f50e3e88641d9e4690-protected" },
		{ "some-temporary", "/some/base/path/some-volume", true,
		    "some-temporary-cache-804b0f6b0d757899a37145f9d7f3848e-protected" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < NITEMS(t); i++) {
		char *got = docker_cache_volume_name(t[i].unique, t[i].path, t[i].protected_ref);

		assert_string_equal(got, t[i].want);
		free(got);
	}
}

/* ---- pull policies ---- */

struct policy_case {
	const char	*name;
	const char	*job[5];
	const char	*runner[5];
	const char	*allowed[5];
	const char	*want[5];	/* or */
	const char	*error;
};

static const struct policy_case policy_cases[] = {
	/* helpers/pull_policies/pull_policies_test.go, Test_ComputeEffectivePullPolicies */
	{ "identical policies", { "always", "never", "if-not-present" }, { 0 },
	    { "always", "never", "if-not-present" }, { "always", "never", "if-not-present" }, NULL },
	{ "repeated pull policies", { "always", "always", "if-not-present", "if-not-present" },
	    { 0 }, { "always", "if-not-present" },
	    { "always", "always", "if-not-present", "if-not-present" }, NULL },
	{ "empty intersection", { "always" }, { 0 }, { "if-not-present" }, { 0 },
	    "pull_policy ([always]) defined in GitLab pipeline config is not one of the "
	    "allowed_pull_policies ([if-not-present])" },
	{ "non-empty intersection", { "always", "never" }, { 0 }, { "never", "if-not-present" },
	    { "never" }, NULL },
	/* Test_GetPullPolicySource: the source the message names */
	{ "executor config only", { 0 }, { "always", "never" }, { "if-not-present" }, { 0 },
	    "pull_policy ([always never]) defined in Runner config is not one of the "
	    "allowed_pull_policies ([if-not-present])" },
	{ "neither/default", { 0 }, { 0 }, { "never" }, { 0 },
	    "pull_policy ([always]) defined in Runner config (default) is not one of the "
	    "allowed_pull_policies ([never])" },
	/* internal/pull/manager_test.go, Test_manager_getPullPolicies */
	{ "gitlab-ci.yaml only", { "if-not-present" }, { 0 }, { "if-not-present" },
	    { "if-not-present" }, NULL },
	{ "config.toml only", { 0 }, { "if-not-present" }, { 0 }, { "if-not-present" }, NULL },
	{ "both (then allowed: the runner's)", { "if-not-present" }, { "never" }, { 0 }, { 0 },
	    "pull_policy ([if-not-present]) defined in GitLab pipeline config is not one of the "
	    "allowed_pull_policies ([never])" },
	{ "not configured", { 0 }, { 0 }, { 0 }, { "always" }, NULL },
	/* manager_test.go, TestPullPolicy* */
	{ "WhenIfNotPresentIsSet", { 0 }, { "if-not-present" }, { 0 }, { "if-not-present" }, NULL },
	{ "PassedAsIfNotPresentForExistingAndConfigAlways", { "if-not-present" }, { "always" },
	    { "always", "if-not-present" }, { "if-not-present" }, NULL },
	{ "PassedAsIfNotPresentButNotAllowedDefault", { "if-not-present" }, { 0 }, { 0 }, { 0 },
	    "pull_policy ([if-not-present]) defined in GitLab pipeline config is not one of the "
	    "allowed_pull_policies ([always])" },
	{ "PassedAsIfNotPresentButNotAllowed", { "if-not-present" }, { 0 }, { "never" }, { 0 },
	    "pull_policy ([if-not-present]) defined in GitLab pipeline config is not one of the "
	    "allowed_pull_policies ([never])" },
	{ "WhenConfigIsNotAllowed", { 0 }, { "never", "if-not-present" }, { "always" }, { 0 },
	    "pull_policy ([never if-not-present]) defined in Runner config is not one of the "
	    "allowed_pull_policies ([always])" },
	{ "WhenConfigIsAllowed", { 0 }, { "never" }, { "if-not-present", "never" }, { "never" }, NULL },
	{ "WhenConfigPullPolicyIsInvalid", { 0 }, { "invalid" }, { "always" }, { 0 },
	    "unsupported pull_policy config: \"invalid\"" },
	{ "WhenConfigAllowedPullPoliciesIsInvalid", { 0 }, { "always" }, { "invalid" }, { 0 },
	    "unsupported allowed_pull_policies config: \"invalid\"" },
	/* The job's list is not checked (getPullPolicies): what is not allowed is left out. */
	{ "job's unknown left out", { "sometimes", "always" }, { 0 }, { 0 }, { "always" }, NULL },
	{ "job's unknown only", { "sometimes" }, { 0 }, { 0 }, { 0 },
	    "pull_policy ([sometimes]) defined in GitLab pipeline config is not one of the "
	    "allowed_pull_policies ([always])" },
	/* GetPullPolicies is not asked when the job has its own and allowed is set. */
	{ "runner's invalid unused", { "never" }, { "invalid" }, { "never" }, { "never" }, NULL },
};

static void
test_pull_policies(void **state)
{
	size_t i, k;

	(void)state;
	for (i = 0; i < NITEMS(policy_cases); i++) {
		const struct policy_case *c = &policy_cases[i];
		struct docker_settings s = { 0 };
		struct strv job = { 0 };
		enum pull_policy out[16];
		size_t n = 99;
		char *error = NULL;
		int rc;

		strv_of(&job, c->job);
		strv_of(&s.pull_policy, c->runner);
		strv_of(&s.allowed_pull_policies, c->allowed);
		rc = docker_pull_policies(&job, &s, out, &n, &error);
		if (c->error != NULL) {
			if (rc != -1)
				fail_msg("%s: no error", c->name);
			assert_non_null(error);
			assert_string_equal(error, c->error);
			assert_int_equal(n, 0);
			free(error);
		} else {
			if (rc != 0)
				fail_msg("%s: %s", c->name, error);
			assert_null(error);
			for (k = 0; c->want[k] != NULL; k++) {
				assert_true(k < n);
				assert_string_equal(pull_policy_name(out[k]), c->want[k]);
			}
			if (n != k)
				fail_msg("%s: %zu policies, not %zu", c->name, n, k);
		}
		strv_release(&job);
		docker_settings_release(&s);
	}
	/* No job list at all is the same as an empty one. */
	{
		struct docker_settings s = { 0 };
		enum pull_policy out[16];
		size_t n;
		char *error = NULL;

		assert_int_equal(docker_pull_policies(NULL, &s, out, &n, &error), 0);
		assert_int_equal(n, 1);
		assert_int_equal(out[0], PULL_ALWAYS);
	}
}

/* ---- allowed images ---- */

struct glob_case {
	const char	*pattern;
	const char	*name;
	bool		 match;
};

/* common/allowed_images_test.go's allowedImageTestCases (one pattern each). */
static const struct glob_case allowed_images[] = {
	{ "alpine", "alpine", true },
	{ "ubuntu", "alpine", false },
	{ "*", "library/ruby", false },
	{ "**/*", "library/ruby", true },
	{ "**/*:*", "library/ruby", false },
	{ "*/*", "library/ruby", true },
	{ "*/*:*", "library/ruby", false },
	{ "*", "library/ruby:2.1", false },
	{ "**/*", "library/ruby:2.1", true },
	{ "**/*:*", "library/ruby:2.1", true },
	{ "*/*", "library/ruby:2.1", true },
	{ "*/*:*", "library/ruby:2.1", true },
	{ "*", "my.registry.tld/group/subgroup/ruby", false },
	{ "my.registry.tld/**/*", "my.registry.tld/group/subgroup/ruby", true },
	{ "my.registry.tld/*/*", "my.registry.tld/group/subgroup/ruby", false },
	{ "my.registry.tld/*/*/*", "my.registry.tld/group/subgroup/ruby", true },
	{ "*", "my.registry.tld/group/subgroup/ruby:2.1", false },
	{ "my.registry.tld/**/*:*", "my.registry.tld/group/subgroup/ruby:2.1", true },
	{ "my.registry.tld/*/*/*:*", "my.registry.tld/group/subgroup/ruby:2.1", true },
	{ "my.registry.tld/*/*:*", "my.registry.tld/group/subgroup/ruby:2.1", false },
	{ "*", "my.registry.tld/library/ruby", false },
	{ "my.registry.tld/**/*", "my.registry.tld/library/ruby", true },
	{ "my.registry.tld/*/*", "my.registry.tld/library/ruby", true },
	{ "*", "my.registry.tld/library/ruby:2.1", false },
	{ "my.registry.tld/**/*:*", "my.registry.tld/library/ruby:2.1", true },
	{ "my.registry.tld/*/*:*", "my.registry.tld/library/ruby:2.1", true },
	{ "*", "my.registry.tld/ruby", false },
	{ "*", "my.registry.tld/ruby:2.1", false },
	{ "*", "ruby", true },
	{ "**/*", "ruby", true },
	{ "*", "ruby:2.1", true },
	{ "**/*", "ruby:2.1", true },
	{ "*", "ruby:latest", true },
	{ "**/*", "ruby:latest", true },
	/* executors/docker/docker_test.go's testAllowedImages, beyond the above */
	{ "*/*:*", "library/ruby:3.3", true },
	{ "my.registry.tld/*/*:*", "my.registry.tld/library/ruby:3.3", true },
	{ "my.registry.tld/**/*", "my.registry.tld/group/subgroup/ruby", true },
	{ "my.registry.tld/*/*:*", "my.registry.tld/group/subgroup/ruby:3.3", false },
	/* registry ports: ':' is an ordinary character */
	{ "registry.local:5000/**", "registry.local:5000/ns/img:1", true },
	{ "registry.local:5000/*", "registry.local:5000/ns/img:1", false },
	{ "registry.local:*/*:*", "registry.local:5000/img:1", true },
	{ "*:5000/**", "registry.local:5000/img", true },
	{ "registry.local/**", "registry.local:5000/img", false },
};

/* testAllowedPrivilegedJob (docker_test.go): allowed_privileged_images against "alpine". */
static const struct {
	bool		 privileged;
	const char	*allowed[3];
} privileged_cases[] = {
	{ true, { 0 } },
	{ true, { "*" } },
	{ false, { "*:*" } },
	{ false, { "*/*" } },
	{ false, { "*/*:*" } },
	{ true, { "**/*" } },
	{ false, { "**/*:*" } },
	{ true, { "alpine" } },
	{ false, { "debian" } },
	{ true, { "alpi*" } },
	{ true, { "*alpi*" } },
	{ true, { "debian", "alpine" } },
	{ true, { "debian", "*" } },
};

/*
 * doublestar v4's own matchTests (doublestar_test.go), the pure Match ones
 * with ASCII names: "**" only as a whole segment, classes, alternatives,
 * escapes, malformed patterns.
 */
static const struct glob_case doublestar[] = {
	{ "", "", true },
	{ "*", "", true },
	{ "*", "/", false },
	{ "/*", "/", true },
	{ "/*", "/debug/", false },
	{ "/*", "//", false },
	{ "abc", "abc", true },
	{ "*", "abc", true },
	{ "*c", "abc", true },
	{ "*/", "a/", true },
	{ "a*", "a", true },
	{ "a*", "abc", true },
	{ "a*", "ab/c", false },
	{ "a*/b", "abc/b", true },
	{ "a*/b", "a/c/b", false },
	{ "a*/c/", "a/b", false },
	{ "a*b*c*d*e*", "axbxcxdxe", true },
	{ "a*b*c*d*e*/f", "axbxcxdxe/f", true },
	{ "a*b*c*d*e*/f", "axbxcxdxexxx/f", true },
	{ "a*b*c*d*e*/f", "axbxcxdxe/xxx/f", false },
	{ "a*b*c*d*e*/f", "axbxcxdxexxx/fff", false },
	{ "a*b?c*x", "abxbbxdbxebxczzx", true },
	{ "a*b?c*x", "abxbbxdbxebxczzy", false },
	{ "ab[c]", "abc", true },
	{ "ab[b-d]", "abc", true },
	{ "ab[e-g]", "abc", false },
	{ "ab[^c]", "abc", false },
	{ "ab[^b-d]", "abc", false },
	{ "ab[^e-g]", "abc", true },
	{ "a\\*b", "ab", false },
	{ "a?b", "a/b", false },
	{ "a*b", "a/b", false },
	{ "[\\]a]", "]", true },
	{ "[\\-]", "-", true },
	{ "[x\\-]", "x", true },
	{ "[x\\-]", "-", true },
	{ "[x\\-]", "z", false },
	{ "[\\-x]", "x", true },
	{ "[\\-x]", "-", true },
	{ "[\\-x]", "a", false },
	{ "[]a]", "]", false },
	{ "[-]", "-", true },
	{ "[x-]", "x", true },
	{ "[x-]", "-", true },
	{ "[x-]", "z", false },
	{ "[-x]", "x", true },
	{ "[-x]", "-", true },
	{ "[-x]", "a", false },
	{ "[a-b-d]", "a", true },
	{ "[a-b-d]", "b", true },
	{ "[a-b-d]", "-", true },
	{ "[a-b-d]", "c", false },
	{ "[a-b-x]", "x", true },
	{ "\\", "a", false },
	{ "[", "a", false },
	{ "[^", "a", false },
	{ "[^bc", "a", false },
	{ "a[", "a", false },
	{ "a[", "ab", false },
	{ "ad[", "ab", false },
	{ "*x", "xxx", true },
	{ "[abc]", "b", true },
	{ "[abc123]", "1", true },
	{ "[a-z0-9]", "1", true },
	{ "**", "", true },
	{ "a/**", "a", true },
	{ "a/**/", "a", true },
	{ "a/**", "a/", true },
	{ "a/**/", "a/", true },
	{ "a/**", "a/b", true },
	{ "a/**", "a/b/c", true },
	{ "**/c", "c", true },
	{ "**/c", "b/c", true },
	{ "**/c", "a/b/c", true },
	{ "**/c", "a/b", false },
	{ "**/c", "abcd", false },
	{ "**/c", "a/abc", false },
	{ "a/**/b", "a/b", true },
	{ "a/**/c", "a/b/c", true },
	{ "a/**/d", "a/b/c/d", true },
	{ "a/\\**", "a/b/c", false },
	{ "a/\\[*\\]", "a/bc", false },
	{ "a/b/c", "a/b//c", false },
	{ "a/", "a", false },
	{ "ab{c,d}", "abc", true },
	{ "ab{c,d,*}", "abcde", true },
	{ "ab{c,d}[", "abcd", false },
	{ "a{,bc}", "a", true },
	{ "a{,bc}", "abc", true },
	{ "a/{b/c,c/b}", "a/b/c", true },
	{ "a/{b/c,c/b}", "a/c/b", true },
	{ "a/a*{b,c}", "a/abc", true },
	{ "{a/{b,c},abc}", "a/b", true },
	{ "{a/{b,c},abc}", "a/c", true },
	{ "{a/{b,c},abc}", "abc", true },
	{ "{a/{b,c},abc}", "a/b/c", false },
	{ "{a/ab*}", "a/abc", true },
	{ "{a/*}", "a/b", true },
	{ "{a/abc}", "a/abc", true },
	{ "{a/b,a/c}", "a/c", true },
	{ "abc/**", "abc/b", true },
	{ "**/abc", "abc", true },
	{ "abc**", "abc/b", false },
	{ "**/{a,b}", "a/b", true },
	{ "a/*/*/d", "a/b/c/d", true },
	{ "e/**", "e/**", true },
	{ "e/**", "e/[", true },
	{ "e/**", "e/{", true },
	{ "e/**", "e/\\", true },
	{ "e/?", "e/?", true },
	{ "e/?", "e/}", true },
	{ "e/\\[", "e/[", true },
	{ "e/[", "e/[", false },
	{ "e/]", "e/]", true },
	{ "e/\\]", "e/]", true },
	{ "e/\\{", "e/{", true },
	{ "e/\\}", "e/}", true },
	{ "e/[\\*\\?]", "e/*", true },
	{ "e/[\\*\\?]", "e/?", true },
	{ "e/[\\*\\?]", "e/**", false },
	{ "e/[\\*\\?]?", "e/**", true },
	{ "e/{\\*,\\?}", "e/*", true },
	{ "e/{\\*,\\?}", "e/?", true },
	{ "e/\\*", "e/*", true },
	{ "e/\\?", "e/?", true },
	{ "e/\\?", "e/**", false },
	{ "*\\}", "}", true },
	{ "case-sensitive/fi*", "case-sensitive/file", true },
	{ "case-sensitive/FI*", "case-sensitive/file", false },
	/* Match's own comment: a mid-pattern "**" is a single star */
	{ "path/to/**.txt", "path/to/a.txt", true },
	{ "path/to/**.txt", "path/to/a/b.txt", false },
	{ "reg/**img", "reg/ns/img", false },
};

static void
assert_globs(const struct glob_case *t, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (docker_glob_match(t[i].pattern, t[i].name) != t[i].match)
			fail_msg("\"%s\" %s \"%s\"", t[i].pattern,
			    t[i].match ? "must match" : "must not match", t[i].name);
}

static void
test_glob_allowed_images(void **state)
{
	(void)state;
	assert_globs(allowed_images, NITEMS(allowed_images));
}

static void
test_glob_doublestar(void **state)
{
	(void)state;
	assert_globs(doublestar, NITEMS(doublestar));
}

/* VerifyAllowedImage and isInAllowedPrivilegedImages: any of the list; an empty list allows all. */
static void
test_allowed(void **state)
{
	struct strv list = { 0 };
	size_t i;

	(void)state;
	for (i = 0; i < NITEMS(privileged_cases); i++) {
		strv_of(&list, privileged_cases[i].allowed);
		if (docker_allowed(&list, "alpine") != privileged_cases[i].privileged)
			fail_msg("case %zu: \"alpine\" %s", i, privileged_cases[i].privileged ?
			    "must be allowed" : "must not be allowed");
		strv_release(&list);
	}
	assert_true(docker_allowed(NULL, "anything/at:all"));
	/* {image: "alpine", allowedImages: []string{}}: allowed */
	assert_true(docker_allowed(&list, "alpine"));
}

/* ---- image references ---- */

/*
 * What POST /images/create gets: the Docker client's ImagePull sends
 * fromImage = reference.Name() and tag = getAPITagFromNamedRef (the digest,
 * else the tag, else "latest": manager_test pulls "not-existing:latest").
 */
static void
test_image_split(void **state)
{
	static const char *const t[][3] = {
		{ "not-existing", "not-existing", "latest" },
		{ "alpine:3.19", "alpine", "3.19" },
		{ "library/alpine", "library/alpine", "latest" },
		{ "registry.domain.tld:5005/image/name:version", "registry.domain.tld:5005/image/name",
		    "version" },
		{ "registry.gitlab.tld:1234/image/name", "registry.gitlab.tld:1234/image/name",
		    "latest" },
		{ "localhost:5000/img", "localhost:5000/img", "latest" },
		{ "service" DIGEST, "service", DIGEST + 1 },
		{ "localhost:5000/ns/svc" DIGEST, "localhost:5000/ns/svc", DIGEST + 1 },
		{ "localhost:5000/ns/svc:1.2" DIGEST, "localhost:5000/ns/svc", DIGEST + 1 },
	};
	size_t i;

	(void)state;
	for (i = 0; i < NITEMS(t); i++) {
		char *repo, *tag;

		docker_image_split(t[i][0], &repo, &tag);
		assert_string_equal(repo, t[i][1]);
		assert_string_equal(tag, t[i][2]);
		free(repo);
		free(tag);
	}
}

/* ---- sizes ---- */

#define KiB	1024LL
#define MiB	(1024 * KiB)
#define GiB	(1024 * MiB)
#define TiB	(1024 * GiB)
#define PiB	(1024 * TiB)

/* go-units v0.5.0's TestRAMInBytes (gitlab-runner's getMemoryBytes), then docker_test.go's settings. */
static void
test_ram_bytes(void **state)
{
	static const struct {
		const char	*s;
		int64_t		 want;
	} t[] = {
		{ "32", 32 },
		{ "32b", 32 },
		{ "32B", 32 },
		{ "32k", 32 * KiB },
		{ "32K", 32 * KiB },
		{ "32kb", 32 * KiB },
		{ "32Kb", 32 * KiB },
		{ "32Kib", 32 * KiB },
		{ "32KIB", 32 * KiB },
		{ "32Mb", 32 * MiB },
		{ "32Gb", 32 * GiB },
		{ "32Tb", 32 * TiB },
		{ "32Pb", 32 * PiB },
		{ "32PB", 32 * PiB },
		{ "32P", 32 * PiB },
		{ "32.3", 32 },
		{ "32.3 mb", 33869004 },	/* int64(32.3 * MiB) */
		{ "0.3MB", 314572 },		/* int64(0.3 * MiB) */
		{ "", -1 },
		{ "hello", -1 },
		{ "-32", -1 },
		{ " 32 ", -1 },
		{ "32m b", -1 },
		{ "32bm", -1 },
		/* TestDockerMemorySetting and friends */
		{ "42m", 44040192 },
		{ "2g", 2147483648 },
		{ "64m", 67108864 },
		/* parseSize: the number up to the last digit, '.' or space */
		{ "1.5g", 1610612736 },
		{ ".5g", 536870912 },
		{ "5.g", 5 * GiB },
		{ "+1k", 1024 },
		{ "1e3", 1000 },
		{ "1e3k", 1000 * KiB },
		{ "32 ", 32 },
		{ "32 b", 32 },
		{ "0", 0 },
		{ "12x", -1 },
		{ "32ki", -1 },
		{ "32ib", -1 },
		{ "32kbb", -1 },
		{ "32  m", -1 },
		{ "1,5g", -1 },
		{ "g", -1 },
		{ "16384p", -1 },	/* over int64 */
	};
	size_t i;

	(void)state;
	for (i = 0; i < NITEMS(t); i++)
		if (docker_ram_bytes(t[i].s) != t[i].want)
			fail_msg("\"%s\": %lld, not %lld", t[i].s, (long long)docker_ram_bytes(t[i].s),
			    (long long)t[i].want);
	assert_int_equal(docker_ram_bytes(NULL), -1);
}

/* docker_test.go's TestDockerCPUSSetting: big.Rat times 1e9, truncated. */
static void
test_nano_cpus(void **state)
{
	static const struct {
		const char	*s;
		int64_t		 want;
	} t[] = {
		{ "0.5", 500000000 },
		{ "0.25", 250000000 },
		{ "1/3", 333333333 },
		{ "1/8", 125000000 },
		{ "0.0001", 100000 },
		/* big.Rat.SetString's forms */
		{ "1.5", 1500000000 },
		{ "2", 2000000000 },
		{ "+1.5", 1500000000 },
		{ ".5", 500000000 },
		{ "2e-1", 200000000 },
		{ "1.5E1", 15000000000 },
		{ "2/3", 666666666 },		/* truncated, not rounded */
		{ "0.0000000015", 1 },
		{ "1e-10", 0 },
		{ "0", 0 },			/* GetNanoCPUs: 0, no limit */
		{ "abc", -1 },
		{ "", -1 },
		{ " 1", -1 },
		{ "1 ", -1 },
		{ "1/0", -1 },
		{ "1.5/2", -1 },
		{ "1/", -1 },
		{ "1.2.3", -1 },
		{ "99999999999", -1 },		/* over int64 in nanos */
		/* Ours: a negative value is refused here, not by the engine. */
		{ "-1", -1 },
	};
	size_t i;

	(void)state;
	for (i = 0; i < NITEMS(t); i++)
		if (docker_nano_cpus(t[i].s) != t[i].want)
			fail_msg("\"%s\": %lld, not %lld", t[i].s, (long long)docker_nano_cpus(t[i].s),
			    (long long)t[i].want);
	assert_int_equal(docker_nano_cpus(NULL), -1);
}

/* ---- container create bodies ---- */

/* The labels of TestDockerServiceContainerConfigIncludesDockerLabels' build. */
static void
default_labels(struct strv *out, enum ctr_type t, const struct strv *extra)
{
	struct label_input in = { .job_url = "/-/jobs/0", .timeout_s = 7200, .sha = "",
		.before_sha = "", .ref = "", .runner_short = "", .system_id = "" };

	docker_labels(out, &in, (int)t, extra);
}

#define DEFAULT_LABELS \
	P "job.before_sha", "", \
	P "job.id", "0", \
	P "job.ref", "", \
	P "job.sha", "", \
	P "job.timeout", "2h0m0s", \
	P "job.url", "/-/jobs/0", \
	P "managed", "true", \
	P "pipeline.id", "", \
	P "project.id", "0", \
	P "project.runner_id", "0", \
	P "runner.id", "", \
	P "runner.local_id", "0", \
	P "runner.system_id", "", \
	RUNNER_LABEL_SYSTEM_ID, "", \
	RUNNER_LABEL_JOB_ID, "0"

/*
 * createContainerConfig and createHostConfig for the build container, with
 * every job setting (docker_test.go's Test*Setting for each).
 */
static void
test_create_build(void **state)
{
	static const char *const cmd_v[] = { "sh", "-c", "script", NULL };
	static const char *const entry_v[] = { "/entry", NULL };
	static const char *const env_v[] = { "CI=true", "A=b=c", NULL };
	static const char *const binds_v[] = { "vol-builds:/builds", "/cache:/cache:ro", NULL };
	static const char *const links_v[] = { "postgres:172.17.0.3", NULL };
	struct strv cmd = { 0 }, entry = { 0 }, env = { 0 }, labels = { 0 }, binds = { 0 },
	    links = { 0 };
	struct docker_settings s = { 0 };
	const cJSON *hc, *a, *d;
	cJSON *o;

	(void)state;
	strv_of(&cmd, cmd_v);
	strv_of(&entry, entry_v);
	strv_of(&env, env_v);
	strv_of(&binds, binds_v);
	strv_of(&links, links_v);
	default_labels(&labels, CTR_BUILD, NULL);
	s.memory = xstrdup("42m");
	s.memory_swap = xstrdup("2g");
	s.memory_reservation = xstrdup("64m");
	s.cpus = xstrdup("1/3");
	s.cpuset_cpus = xstrdup("1-3,5");
	s.cpuset_mems = xstrdup("1-3,5");
	s.cpu_shares = 512;
	s.cgroup_parent = xstrdup("test-docker-cgroup");
	s.runtime = xstrdup("runc");
	s.userns_mode = xstrdup("host");
	s.pid_mode = xstrdup("host");
	s.ipcmode = xstrdup("shareable");
	s.volume_driver = xstrdup("local");
	s.shm_size = 268435456;
	s.oom_kill_disable = true;
	s.oom_score_adjust = -500;
	strv_push(&s.cap_add, "NET_ADMIN");
	strv_push(&s.cap_drop, "ALL");
	strv_push(&s.security_opt, "no-new-privileges");
	strv_push(&s.services_security_opt, "apparmor=unconfined");
	strv_push(&s.devices, "/dev/kvm");
	strv_push(&s.devices, "/dev/kvm:/devices/kvm");
	strv_push(&s.devices, "/dev/kvm:/devices/kvm:r");
	strv_push(&s.device_cgroup_rules, "c 1:3 mr");
	strv_push(&s.group_add, "docker");
	strv_push(&s.dns, "2001:db8::1");	/* TestDNSServerAddrs */
	strv_push(&s.dns, "192.0.2.1");
	strv_push(&s.dns_search, "example.com");
	strv_push(&s.extra_hosts, "gitlab.local:10.0.0.1");
	strv_push(&s.links, "other:alias");
	strv_push(&s.volumes_from, "data");
	strv_push(&s.sysctls, "net.ipv4.ip_forward=1");
	strv_push(&s.tmpfs, "/tmpfs=rw,noexec");
	strv_push(&s.services_tmpfs, "/svc=rw");
	strv_push(&s.ulimit, "nofile=1024:2048");
	strv_push(&s.ulimit, "nproc=512");
	strv_push(&s.log_options, "env=CI_JOB_ID,CI_JOB_NAME,CI_PROJECT_ID");
	strv_push(&s.container_labels, "my.custom.label=my.custom.value");
	s.service_memory = xstrdup("12x");	/* the services', not read for the build */

	o = body(&(struct ctr_spec){
		.type = CTR_BUILD,
		.image = "sha256:abc",
		.hostname = "runner-abcdef123-project-0-concurrent-0",
		.user = "www",
		.cmd = &cmd,
		.entrypoint = &entry,
		.env = &env,
		.labels = &labels,
		.binds = &binds,
		.extra_hosts = &links,
		.network_mode = "bridge",
		.stdin_stage = true,
		.init = true,
		.privileged = true,
	}, &s, "1.43");
	assert_string_equal(str(o, "Image"), "sha256:abc");
	assert_string_equal(str(o, "Hostname"), "runner-abcdef123-project-0-concurrent-0");
	assert_string_equal(str(o, "User"), "www");
	assert_list(o, "Cmd", cmd_v);
	assert_list(o, "Entrypoint", entry_v);
	assert_list(o, "Env", env_v);
	/* TestDockerContainerLabelsSetting: the config's as they are, no prefixed copy. */
	assert_map(o, "Labels", (const char *const[]){ DEFAULT_LABELS, P "type", "build",
	    "my.custom.label", "my.custom.value", NULL });
	assert_false(flag(o, "Tty"));
	assert_true(flag(o, "AttachStdin"));
	assert_true(flag(o, "AttachStdout"));
	assert_true(flag(o, "AttachStderr"));
	assert_true(flag(o, "OpenStdin"));
	assert_true(flag(o, "StdinOnce"));
	assert_absent(o, "MacAddress");
	assert_absent(o, "NetworkingConfig");

	hc = item(o, "HostConfig");
	assert_list(hc, "Binds", binds_v);
	/* append(ExtraHosts, e.links...) */
	assert_list(hc, "ExtraHosts", (const char *const[]){ "gitlab.local:10.0.0.1",
	    "postgres:172.17.0.3", NULL });
	assert_string_equal(str(hc, "NetworkMode"), "bridge");
	assert_true(flag(hc, "Privileged"));
	assert_true(flag(hc, "Init"));
	assert_map(hc, "RestartPolicy", (const char *const[]){ "Name", "no", NULL });
	a = item(hc, "LogConfig");
	assert_string_equal(str(a, "Type"), "json-file");
	assert_map(a, "Config", (const char *const[]){ "env", "CI_JOB_ID,CI_JOB_NAME,CI_PROJECT_ID",
	    NULL });
	assert_int_equal(num(hc, "Memory"), 44040192);
	assert_int_equal(num(hc, "MemorySwap"), 2147483648);
	assert_int_equal(num(hc, "MemoryReservation"), 67108864);
	assert_int_equal(num(hc, "NanoCpus"), 333333333);
	assert_string_equal(str(hc, "CpusetCpus"), "1-3,5");
	assert_string_equal(str(hc, "CpusetMems"), "1-3,5");
	assert_int_equal(num(hc, "CpuShares"), 512);
	assert_string_equal(str(hc, "CgroupParent"), "test-docker-cgroup");
	assert_list(hc, "CapAdd", (const char *const[]){ "NET_ADMIN", NULL });
	assert_list(hc, "CapDrop", (const char *const[]){ "ALL", NULL });
	assert_list(hc, "SecurityOpt", (const char *const[]){ "no-new-privileges", NULL });
	assert_list(hc, "Dns", (const char *const[]){ "2001:db8::1", "192.0.2.1", NULL });
	assert_list(hc, "DnsSearch", (const char *const[]){ "example.com", NULL });
	assert_list(hc, "DeviceCgroupRules", (const char *const[]){ "c 1:3 mr", NULL });
	assert_list(hc, "GroupAdd", (const char *const[]){ "docker", NULL });
	assert_list(hc, "Links", (const char *const[]){ "other:alias", NULL });
	assert_list(hc, "VolumesFrom", (const char *const[]){ "data", NULL });
	assert_string_equal(str(hc, "VolumeDriver"), "local");
	assert_string_equal(str(hc, "Runtime"), "runc");
	assert_string_equal(str(hc, "UsernsMode"), "host");
	assert_string_equal(str(hc, "PidMode"), "host");		/* TestDockerPIDMode */
	assert_string_equal(str(hc, "IpcMode"), "shareable");
	assert_true(flag(hc, "OomKillDisable"));
	assert_int_equal(num(hc, "OomScoreAdj"), -500);
	assert_int_equal(num(hc, "ShmSize"), 268435456);
	assert_map(hc, "Sysctls", (const char *const[]){ "net.ipv4.ip_forward", "1", NULL });
	assert_map(hc, "Tmpfs", (const char *const[]){ "/tmpfs", "rw,noexec", NULL });
	/* TestParseDeviceString{One,Two,Three} */
	a = item(hc, "Devices");
	assert_int_equal(cJSON_GetArraySize(a), 3);
	d = cJSON_GetArrayItem(a, 0);
	assert_string_equal(str(d, "PathOnHost"), "/dev/kvm");
	assert_string_equal(str(d, "PathInContainer"), "/dev/kvm");
	assert_string_equal(str(d, "CgroupPermissions"), "rwm");
	d = cJSON_GetArrayItem(a, 1);
	assert_string_equal(str(d, "PathInContainer"), "/devices/kvm");
	assert_string_equal(str(d, "CgroupPermissions"), "rwm");
	d = cJSON_GetArrayItem(a, 2);
	assert_string_equal(str(d, "PathOnHost"), "/dev/kvm");
	assert_string_equal(str(d, "PathInContainer"), "/devices/kvm");
	assert_string_equal(str(d, "CgroupPermissions"), "r");
	/* TestDockerUlimitSetting: "1024:2048", and "1024" for both */
	a = item(hc, "Ulimits");
	assert_int_equal(cJSON_GetArraySize(a), 2);
	d = cJSON_GetArrayItem(a, 0);
	assert_string_equal(str(d, "Name"), "nofile");
	assert_int_equal(num(d, "Soft"), 1024);
	assert_int_equal(num(d, "Hard"), 2048);
	d = cJSON_GetArrayItem(a, 1);
	assert_string_equal(str(d, "Name"), "nproc");
	assert_int_equal(num(d, "Soft"), 512);
	assert_int_equal(num(d, "Hard"), 512);
	cJSON_Delete(o);

	strv_release(&cmd);
	strv_release(&entry);
	strv_release(&env);
	strv_release(&labels);
	strv_release(&binds);
	strv_release(&links);
	docker_settings_release(&s);
}

/*
 * The same host config for the helper (createHostConfig(false, ...)): the
 * limits and devices too, but no PidMode (TestDockerPIDMode), no User
 * (TestDockerUserSetting); a bare default: json-file, no limits at all.
 */
static void
test_create_helper(void **state)
{
	static const char *const entry_v[] = { "", NULL };
	struct strv entry = { 0 }, labels = { 0 };
	struct docker_settings s = { 0 };
	const cJSON *hc;
	cJSON *o;

	(void)state;
	strv_of(&entry, entry_v);
	default_labels(&labels, CTR_HELPER, NULL);
	s.memory = xstrdup("42m");
	s.pid_mode = xstrdup("host");
	s.user = xstrdup("www");
	strv_push(&s.cap_add, "NET_ADMIN");
	strv_push(&s.devices, "/dev/kvm");
	strv_push(&s.sysctls, "net.ipv4.ip_forward=1");
	o = body(&(struct ctr_spec){
		.type = CTR_HELPER,
		.image = "sha256:helper",
		.entrypoint = &entry,
		.labels = &labels,
		.stdin_stage = true,
	}, &s, "1.44");
	assert_list(o, "Entrypoint", entry_v);	/* [""]: the image's is off */
	assert_absent(o, "User");
	assert_absent(o, "Cmd");
	assert_map(o, "Labels", (const char *const[]){ DEFAULT_LABELS, P "type", "predefined",
	    NULL });
	hc = item(o, "HostConfig");
	assert_int_equal(num(hc, "Memory"), 44040192);
	assert_list(hc, "CapAdd", (const char *const[]){ "NET_ADMIN", NULL });
	assert_non_null(item(hc, "Devices"));
	assert_non_null(item(hc, "Sysctls"));
	assert_absent(hc, "PidMode");
	assert_absent(hc, "Init");
	assert_false(flag(hc, "Privileged"));
	assert_absent(o, "NetworkingConfig");
	cJSON_Delete(o);
	docker_settings_release(&s);

	/* No settings: what every container has, and nothing else. */
	memset(&s, 0, sizeof(s));
	o = body(&(struct ctr_spec){ .type = CTR_HELPER, .image = "sha256:helper",
	    .labels = &labels }, &s, "1.41");
	hc = item(o, "HostConfig");
	assert_int_equal(cJSON_GetArraySize(hc), 3);
	assert_false(flag(hc, "Privileged"));
	assert_map(hc, "RestartPolicy", (const char *const[]){ "Name", "no", NULL });
	assert_map(hc, "LogConfig", (const char *const[]){ "Type", "json-file", NULL });
	assert_absent(o, "AttachStdin");
	assert_absent(o, "OpenStdin");
	assert_absent(o, "Entrypoint");
	assert_absent(o, "Hostname");
	cJSON_Delete(o);

	strv_release(&entry);
	strv_release(&labels);
}

/*
 * createServiceContainerConfig and createHostConfigForService
 * (TestDockerServiceSettings, TestDockerServiceContainerConfigIncludesDockerLabels,
 * TestDockerServicesTmpfsSetting, ...): the service_* limits, not the job's.
 */
static void
test_create_service(void **state)
{
	static const char *const cmd_v[] = { "/bin/sh", NULL };
	static const char *const env_v[] = { "POSTGRES_PASSWORD=x", NULL };
	static const char *const extra_v[] = { P "service=postgres", P "service.version=15-alpine",
		NULL };
	static const char *const aliases_v[] = { "postgres", "db", NULL };
	struct strv cmd = { 0 }, env = { 0 }, extra = { 0 }, labels = { 0 }, aliases = { 0 };
	struct docker_settings s = { 0 };
	const cJSON *hc, *ep;
	cJSON *o;

	(void)state;
	strv_of(&cmd, cmd_v);
	strv_of(&env, env_v);
	strv_of(&extra, extra_v);
	strv_of(&aliases, aliases_v);
	default_labels(&labels, CTR_SERVICE, &extra);
	s.service_memory = xstrdup("42m");
	s.service_memory_reservation = xstrdup("64m");
	s.service_memory_swap = xstrdup("2g");
	s.service_cpus = xstrdup("0.0001");
	s.service_cpuset_cpus = xstrdup("1-3,5");
	s.service_cpu_shares = 256;
	s.memory = xstrdup("12x");	/* the job's, not read for a service */
	s.cpus = xstrdup("abc");
	s.cgroup_parent = xstrdup("job-cgroup");
	s.pid_mode = xstrdup("host");
	s.runtime = xstrdup("runc");
	s.userns_mode = xstrdup("host");
	s.shm_size = 1024;
	strv_push(&s.cap_add, "NET_ADMIN");
	strv_push(&s.security_opt, "no-new-privileges");
	strv_push(&s.services_security_opt, "apparmor=unconfined");
	strv_push(&s.devices, "/dev/kvm");
	strv_push(&s.sysctls, "net.ipv4.ip_forward=1");
	strv_push(&s.tmpfs, "/tmpfs=rw");
	strv_push(&s.services_tmpfs, "/tmpfs=rw,noexec");
	strv_push(&s.ulimit, "nofile=1024");
	strv_push(&s.dns, "192.0.2.1");
	strv_push(&s.dns_search, "example.com");
	strv_push(&s.extra_hosts, "gitlab.local:10.0.0.1");
	strv_push(&s.links, "other:alias");
	strv_push(&s.container_labels, "my.custom.dockerConfigLabel=dockerConfigLabelValue");
	o = body(&(struct ctr_spec){
		.type = CTR_SERVICE,
		.image = "sha256:pg",
		.cmd = &cmd,
		.env = &env,
		.labels = &labels,
		.aliases = &aliases,
		.network_mode = "runner-net",
		.privileged = false,
	}, &s, "1.43");
	assert_string_equal(str(o, "Image"), "sha256:pg");
	assert_list(o, "Cmd", cmd_v);
	assert_list(o, "Env", env_v);
	assert_absent(o, "Entrypoint");
	assert_absent(o, "Hostname");
	assert_absent(o, "User");
	assert_absent(o, "AttachStdin");
	assert_absent(o, "OpenStdin");
	assert_absent(o, "StdinOnce");
	/* The config's labels twice: as they are, and prefixed (issue 39048). */
	assert_map(o, "Labels", (const char *const[]){ DEFAULT_LABELS,
	    P "service", "postgres", P "service.version", "15-alpine", P "type", "service",
	    "my.custom.dockerConfigLabel", "dockerConfigLabelValue",
	    P "my.custom.dockerConfigLabel", "dockerConfigLabelValue", NULL });
	hc = item(o, "HostConfig");
	assert_int_equal(num(hc, "Memory"), 44040192);
	assert_int_equal(num(hc, "MemoryReservation"), 67108864);
	assert_int_equal(num(hc, "MemorySwap"), 2147483648);
	assert_int_equal(num(hc, "NanoCpus"), 100000);
	assert_string_equal(str(hc, "CpusetCpus"), "1-3,5");
	assert_int_equal(num(hc, "CpuShares"), 256);
	assert_list(hc, "SecurityOpt", (const char *const[]){ "apparmor=unconfined", NULL });
	assert_map(hc, "Tmpfs", (const char *const[]){ "/tmpfs", "rw,noexec", NULL });
	assert_list(hc, "Dns", (const char *const[]){ "192.0.2.1", NULL });
	assert_list(hc, "DnsSearch", (const char *const[]){ "example.com", NULL });
	assert_list(hc, "ExtraHosts", (const char *const[]){ "gitlab.local:10.0.0.1", NULL });
	assert_string_equal(str(hc, "Runtime"), "runc");
	assert_string_equal(str(hc, "UsernsMode"), "host");
	assert_string_equal(str(hc, "NetworkMode"), "runner-net");
	assert_int_equal(num(hc, "ShmSize"), 1024);
	assert_false(flag(hc, "Privileged"));
	assert_map(hc, "LogConfig", (const char *const[]){ "Type", "json-file", NULL });
	assert_absent(hc, "CgroupParent");	/* service_cgroup_parent is not a key here */
	assert_absent(hc, "CapAdd");
	assert_absent(hc, "PidMode");
	assert_absent(hc, "Devices");
	assert_absent(hc, "Sysctls");
	assert_absent(hc, "Ulimits");
	assert_absent(hc, "Links");
	assert_absent(hc, "Init");
	/* networkConfigLegacy: the aliases on the user-defined network. */
	ep = item(item(item(o, "NetworkingConfig"), "EndpointsConfig"), "runner-net");
	assert_list(ep, "Aliases", aliases_v);
	assert_absent(ep, "MacAddress");
	cJSON_Delete(o);

	strv_release(&cmd);
	strv_release(&env);
	strv_release(&extra);
	strv_release(&labels);
	strv_release(&aliases);
	docker_settings_release(&s);
}

/* container_labels win over gitlab-runner's (prepareContainerLabels), never over ours. */
static void
test_create_container_labels(void **state)
{
	struct strv labels = { 0 };
	struct docker_settings s = { 0 };
	const cJSON *l;
	cJSON *o;

	(void)state;
	default_labels(&labels, CTR_BUILD, NULL);
	strv_push(&s.container_labels, P "job.ref=mine");
	strv_push(&s.container_labels, RUNNER_LABEL_SYSTEM_ID "=not-the-sweep's");
	strv_push(&s.container_labels, "Case=upper");
	strv_push(&s.container_labels, "case=lower");
	strv_push(&s.container_labels, "eq=a=b");
	o = body(&(struct ctr_spec){ .type = CTR_BUILD, .image = "i", .labels = &labels }, &s,
	    "1.44");
	l = item(o, "Labels");
	assert_string_equal(str(l, P "job.ref"), "mine");
	assert_string_equal(str(l, RUNNER_LABEL_SYSTEM_ID), "");
	assert_string_equal(str(l, "Case"), "upper");	/* labels are case sensitive */
	assert_string_equal(str(l, "case"), "lower");
	assert_string_equal(str(l, "eq"), "a=b");
	assert_absent(l, P "Case");
	cJSON_Delete(o);

	/* The health check: labeler.Labels only (createConfigForServiceHealthCheckContainer). */
	o = body(&(struct ctr_spec){ .type = CTR_WAIT, .image = "i", .labels = &labels }, &s,
	    "1.44");
	assert_absent(item(o, "Labels"), "Case");
	cJSON_Delete(o);
	strv_release(&labels);
	docker_settings_release(&s);
}

/*
 * The health check's host config (createHostConfigForServiceHealthCheck):
 * restart policy, network, log config; none of the limits.
 */
static void
test_create_wait(void **state)
{
	static const char *const cmd_v[] = { "/opt/runner/bin/runner", "health-check", NULL };
	struct strv cmd = { 0 };
	struct docker_settings s = { 0 };
	const cJSON *hc;
	cJSON *o;

	(void)state;
	strv_of(&cmd, cmd_v);
	s.memory = xstrdup("12x");
	s.service_memory = xstrdup("12x");
	strv_push(&s.dns, "not-an-ip");
	strv_push(&s.cap_add, "NET_ADMIN");
	o = body(&(struct ctr_spec){ .type = CTR_WAIT, .image = "sha256:helper", .cmd = &cmd,
	    .network_mode = "container:abc" }, &s, "1.44");
	assert_list(o, "Cmd", cmd_v);
	hc = item(o, "HostConfig");
	assert_string_equal(str(hc, "NetworkMode"), "container:abc");
	assert_map(hc, "RestartPolicy", (const char *const[]){ "Name", "no", NULL });
	assert_map(hc, "LogConfig", (const char *const[]){ "Type", "json-file", NULL });
	assert_absent(hc, "Memory");
	assert_absent(hc, "Dns");
	assert_absent(hc, "CapAdd");
	assert_absent(o, "NetworkingConfig");
	cJSON_Delete(o);
	strv_release(&cmd);
	docker_settings_release(&s);
}

/*
 * networkConfig: from API 1.44 the MAC address is the endpoint's, on the
 * network mode (or "default"), with the aliases on a user-defined one; before,
 * the aliases only.  Ours, on purpose: the MAC is the build container's only,
 * and below 1.44 it is the top-level MacAddress, as gitlab-runner before its
 * moby API types set it (19.4 warns that it cannot).
 */
static void
test_create_network_and_mac(void **state)
{
	static const char *const aliases_v[] = { "build", "runner-x-build", NULL };
	struct strv aliases = { 0 };
	struct docker_settings s = { 0 };
	const cJSON *eps, *ep;
	cJSON *o;

	(void)state;
	strv_of(&aliases, aliases_v);
	s.mac_address = xstrdup("92:d0:c6:0a:29:33");

	/* 1.44, user-defined: MAC and aliases on the endpoint. */
	o = body(&(struct ctr_spec){ .type = CTR_BUILD, .image = "i", .aliases = &aliases,
	    .network_mode = "runner-net" }, &s, "1.44");
	assert_absent(o, "MacAddress");
	eps = item(item(o, "NetworkingConfig"), "EndpointsConfig");
	assert_int_equal(cJSON_GetArraySize(eps), 1);
	ep = item(eps, "runner-net");
	assert_string_equal(str(ep, "MacAddress"), "92:d0:c6:0a:29:33");
	assert_list(ep, "Aliases", aliases_v);
	cJSON_Delete(o);

	/* 1.44, no network mode: docker's default network, no aliases. */
	o = body(&(struct ctr_spec){ .type = CTR_BUILD, .image = "i", .aliases = &aliases }, &s,
	    "1.47");
	ep = item(item(item(o, "NetworkingConfig"), "EndpointsConfig"), "default");
	assert_string_equal(str(ep, "MacAddress"), "92:d0:c6:0a:29:33");
	assert_absent(ep, "Aliases");
	assert_absent(item(o, "HostConfig"), "NetworkMode");
	cJSON_Delete(o);

	/* 1.44, host: the MAC on it (TestDockerCommand_MacAddressConfig), no aliases. */
	o = body(&(struct ctr_spec){ .type = CTR_BUILD, .image = "i", .aliases = &aliases,
	    .network_mode = "host" }, &s, "1.44");
	ep = item(item(item(o, "NetworkingConfig"), "EndpointsConfig"), "host");
	assert_string_equal(str(ep, "MacAddress"), "92:d0:c6:0a:29:33");
	assert_absent(ep, "Aliases");
	cJSON_Delete(o);

	/* 1.43: aliases on the endpoint, the MAC top-level (ours). */
	o = body(&(struct ctr_spec){ .type = CTR_BUILD, .image = "i", .aliases = &aliases,
	    .network_mode = "runner-net" }, &s, "1.43");
	assert_string_equal(str(o, "MacAddress"), "92:d0:c6:0a:29:33");
	ep = item(item(item(o, "NetworkingConfig"), "EndpointsConfig"), "runner-net");
	assert_list(ep, "Aliases", aliases_v);
	assert_absent(ep, "MacAddress");
	cJSON_Delete(o);

	/* 1.43, not user-defined: no networking config at all. */
	o = body(&(struct ctr_spec){ .type = CTR_BUILD, .image = "i", .aliases = &aliases,
	    .network_mode = "bridge" }, &s, "1.43");
	assert_absent(o, "NetworkingConfig");
	assert_string_equal(str(o, "MacAddress"), "92:d0:c6:0a:29:33");
	cJSON_Delete(o);

	/* Ours: not on the helper, nor on a service. */
	o = body(&(struct ctr_spec){ .type = CTR_HELPER, .image = "i",
	    .network_mode = "none" }, &s, "1.44");
	assert_absent(o, "NetworkingConfig");
	assert_absent(o, "MacAddress");
	cJSON_Delete(o);
	o = body(&(struct ctr_spec){ .type = CTR_SERVICE, .image = "i", .aliases = &aliases,
	    .network_mode = "runner-net" }, &s, "1.44");
	ep = item(item(item(o, "NetworkingConfig"), "EndpointsConfig"), "runner-net");
	assert_absent(ep, "MacAddress");
	assert_list(ep, "Aliases", aliases_v);
	cJSON_Delete(o);

	/* Settings' network_mode when the spec names none. */
	s.network_mode = xstrdup("runner-net");
	o = body(&(struct ctr_spec){ .type = CTR_SERVICE, .image = "i", .aliases = &aliases },
	    &s, "1.43");
	assert_string_equal(str(item(o, "HostConfig"), "NetworkMode"), "runner-net");
	assert_non_null(item(item(item(o, "NetworkingConfig"), "EndpointsConfig"), "runner-net"));
	cJSON_Delete(o);

	strv_release(&aliases);
	docker_settings_release(&s);
}

/* A setting the engine's form cannot take: the body is refused, naming the key. */
static void
test_create_refused(void **state)
{
	struct docker_settings s = { 0 };
	const struct ctr_spec build = { .type = CTR_BUILD, .image = "i" };
	const struct ctr_spec service = { .type = CTR_SERVICE, .image = "i" };

	(void)state;
	s.memory = xstrdup("12x");
	assert_refused(&build, &s, "runners.docker.memory: \"12x\" is not a size (like 512m or 2g)");
	docker_settings_release(&s);

	s.memory_swap = xstrdup("2q");
	assert_refused(&build, &s,
	    "runners.docker.memory_swap: \"2q\" is not a size (like 512m or 2g)");
	docker_settings_release(&s);

	s.service_memory = xstrdup("12x");
	assert_refused(&service, &s,
	    "runners.docker.service_memory: \"12x\" is not a size (like 512m or 2g)");
	docker_settings_release(&s);

	/* GetNanoCPUs: "failed to parse abc as a rational number" */
	s.cpus = xstrdup("abc");
	assert_refused(&build, &s,
	    "runners.docker.cpus: \"abc\" is not a number of CPUs (like 1.5)");
	docker_settings_release(&s);

	s.service_cpus = xstrdup("abc");
	assert_refused(&service, &s,
	    "runners.docker.service_cpus: \"abc\" is not a number of CPUs (like 1.5)");
	docker_settings_release(&s);

	/* TestDockerCreateHostConfigWithInvalidDNS, ...ForServiceWithInvalidDNS */
	strv_push(&s.dns, "192.0.2.1");
	strv_push(&s.dns, "not-an-ip");
	assert_refused(&build, &s,
	    "runners.docker.dns: invalid DNS server address \"not-an-ip\"");
	assert_refused(&service, &s,
	    "runners.docker.dns: invalid DNS server address \"not-an-ip\"");
	docker_settings_release(&s);

	/* TestParseDeviceStringFour: too many colons */
	strv_push(&s.devices, "/dev/kvm:/devices/kvm:r:oops");
	assert_refused(&build, &s, "runners.docker.devices: \"/dev/kvm:/devices/kvm:r:oops\" "
	    "is not host[:container[:rwm]]");
	docker_settings_release(&s);

	/* TestDockerUlimitSetting: "invalid limit value" */
	strv_push(&s.ulimit, "nofile=a");
	assert_refused(&build, &s,
	    "runners.docker.ulimit: \"nofile=a\" is not name = \"soft[:hard]\"");
	docker_settings_release(&s);

	/* TestDockerConfigGetLogConfig: "invalid key" */
	strv_push(&s.log_options, "foo=bar");
	assert_refused(&build, &s,
	    "runners.docker.log_options: \"foo=bar\": only env and labels may be set");
	docker_settings_release(&s);

	/* TestDockerIsolationWithIncorrectValue: Linux knows no isolation */
	s.isolation = xstrdup("hyperv");
	assert_refused(&build, &s,
	    "runners.docker.isolation = \"hyperv\" is for Windows containers");
	docker_settings_release(&s);

	strv_push(&s.container_labels, "novalue");
	assert_refused(&build, &s,
	    "runners.docker.container_labels: \"novalue\" is not key=value");
	docker_settings_release(&s);

	s.gpus = xstrdup("device=0");
	assert_refused(&build, &s,
	    "runners.docker.gpus: \"device=0\": only \"all\" or a count is understood");
	docker_settings_release(&s);
}

/* ---- networks ---- */

/*
 * internal/networks/manager.go's Create: the labeler's labels, EnableIPv6,
 * Options with the MTU only when set (TestCreateNetworkWithCustomMTU); no
 * Driver.  CheckDuplicate is the one the Docker client adds below 1.44.
 */
static void
test_network_body(void **state)
{
	static const char *const labels_v[] = { P "job.id=7", P "managed=true", "no-equals",
		"k=a=b", NULL };
	struct strv labels = { 0 };
	char *got;

	(void)state;
	strv_of(&labels, labels_v);
	got = docker_network_body("runner-abcdef123-1-0-7", &labels, false, 0);
	assert_string_equal(got, "{\"Name\":\"runner-abcdef123-1-0-7\",\"CheckDuplicate\":true,"
	    "\"EnableIPv6\":false,\"Labels\":{\"" P "job.id\":\"7\",\"" P "managed\":\"true\","
	    "\"k\":\"a=b\"}}");
	free(got);
	got = docker_network_body("n", &labels, true, 1402);
	assert_string_equal(got, "{\"Name\":\"n\",\"CheckDuplicate\":true,\"EnableIPv6\":true,"
	    "\"Labels\":{\"" P "job.id\":\"7\",\"" P "managed\":\"true\",\"k\":\"a=b\"},"
	    "\"Options\":{\"com.docker.network.driver.mtu\":\"1402\"}}");
	free(got);
	got = docker_network_body("n", NULL, false, -1);
	assert_string_equal(got, "{\"Name\":\"n\",\"CheckDuplicate\":true,\"EnableIPv6\":false,"
	    "\"Labels\":{}}");
	free(got);
	strv_release(&labels);
}

/* ---- the shell ---- */

/* shells/bash.go's BashDetectShellScript, "$@" replaced by "" or "-l" (bashDetectScript). */
static void
test_detect_shell(void **state)
{
	static const char *const shells[] = {
		"/usr/local/bin/bash", "/usr/bin/bash", "/bin/bash",
		"/usr/local/bin/sh", "/usr/bin/sh", "/bin/sh", "/busybox/sh",
	};
	static const char script[] =
	    "if [ -x /usr/local/bin/bash ]; then\n"
	    "\texec /usr/local/bin/bash $@\n"
	    "elif [ -x /usr/bin/bash ]; then\n"
	    "\texec /usr/bin/bash $@\n"
	    "elif [ -x /bin/bash ]; then\n"
	    "\texec /bin/bash $@\n"
	    "elif [ -x /usr/local/bin/sh ]; then\n"
	    "\texec /usr/local/bin/sh $@\n"
	    "elif [ -x /usr/bin/sh ]; then\n"
	    "\texec /usr/bin/sh $@\n"
	    "elif [ -x /bin/sh ]; then\n"
	    "\texec /bin/sh $@\n"
	    "elif [ -x /busybox/sh ]; then\n"
	    "\texec /busybox/sh $@\n"
	    "else\n"
	    "\techo shell not found\n"
	    "\texit 1\n"
	    "fi\n"
	    "\n";
	struct strv got = { 0 };
	char want[sizeof(script) + 64], *w;
	const char *p;
	int login;
	size_t i;

	(void)state;
	for (login = 0; login <= 1; login++) {
		/* strings.ReplaceAll(BashDetectShellScript, "$@", args) */
		for (p = script, w = want; *p; p++) {
			if (p[0] == '$' && p[1] == '@') {
				if (login)
					w = stpcpy(w, "-l");
				p++;
			} else
				*w++ = *p;
		}
		*w = '\0';
		docker_detect_shell_cmd(&got, login);
		assert_int_equal(got.n, 3);
		assert_string_equal(got.v[0], "sh");
		assert_string_equal(got.v[1], "-c");
		assert_string_equal(got.v[2], want);
		strv_release(&got);
	}
	/* Byte for byte, the plain one's first line keeps its space. */
	docker_detect_shell_cmd(&got, false);
	p = "if [ -x /usr/local/bin/bash ]; then\n\texec /usr/local/bin/bash \n";
	assert_int_equal(strncmp(got.v[2], p, strlen(p)), 0);
	for (i = 0; i < NITEMS(shells); i++)
		assert_non_null(strstr(got.v[2], shells[i]));
	strv_release(&got);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_service_names),
		cmocka_unit_test(test_service_split),
		cmocka_unit_test(test_service_empty),
		cmocka_unit_test(test_service_user_aliases),
		cmocka_unit_test(test_labels),
		cmocka_unit_test(test_labels_pipeline_and_type),
		cmocka_unit_test(test_labels_timeout),
		cmocka_unit_test(test_project_name),
		cmocka_unit_test(test_network_name),
		cmocka_unit_test(test_job_prefix),
		cmocka_unit_test(test_cache_volume_name),
		cmocka_unit_test(test_pull_policies),
		cmocka_unit_test(test_glob_allowed_images),
		cmocka_unit_test(test_glob_doublestar),
		cmocka_unit_test(test_allowed),
		cmocka_unit_test(test_image_split),
		cmocka_unit_test(test_ram_bytes),
		cmocka_unit_test(test_nano_cpus),
		cmocka_unit_test(test_create_build),
		cmocka_unit_test(test_create_helper),
		cmocka_unit_test(test_create_service),
		cmocka_unit_test(test_create_container_labels),
		cmocka_unit_test(test_create_wait),
		cmocka_unit_test(test_create_network_and_mac),
		cmocka_unit_test(test_create_refused),
		cmocka_unit_test(test_network_body),
		cmocka_unit_test(test_detect_shell),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

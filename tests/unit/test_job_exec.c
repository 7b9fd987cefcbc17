/* What a job tells an executor with a job part (runner/job_exec.c). */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/xmalloc.h"
#include "runner/config.h"
#include "runner/job.h"
#include "runner/job_exec.h"
#include "runner/vars.h"

/* gitlab-runner's TestProjectRealUniqueName table (common/build_test.go). */
static void
test_unique_name(void **state)
{
	static const char token[] = "some-random-token-and-we-sure-don't-run-it-through-the-shortener";
	static const struct {
		const char	*token, *system_id;
		int64_t		 project_id;
		int		 project_runner_id;
		const char	*want;
	} t[] = {
		{ "", "", 0, 0, "runner-f1969ebde09ffbae93df68a9aec385a8" },
		{ token, "", 0, 0, "runner-f563c42913906cc3c0c50d55b005ce86" },
		{ token, "some-system-ID", 0, 0, "runner-576923f59d7b85f6258fe7e56d254ce0" },
		{ token, "some-system-ID", 42, 0, "runner-896339b5ef9bebb3cbb72960ea8e89bb" },
		{ token, "some-system-ID", 42, 4242, "runner-9d75c021c38f7957cb372857766d74b4" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char *got = job_exec_unique_name(t[i].token, t[i].system_id, t[i].project_id,
		    t[i].project_runner_id);

		assert_string_equal(got, t[i].want);
		free(got);
	}
}

static bool
has(const struct strv *sv, const char *s)
{
	for (size_t i = 0; i < sv->n; i++)
		if (strcmp(sv->v[i], s) == 0)
			return true;
	return false;
}

static bool
has_key(const struct strv *sv, const char *key)
{
	size_t n = strlen(key);

	for (size_t i = 0; i < sv->n; i++)
		if (strncmp(sv->v[i], key, n) == 0 && sv->v[i][n] == '=')
			return true;
	return false;
}

static void
test_spec(void **state)
{
	struct api_variable vars[] = {
		{ .key = "TAG", .value = "1.36", .public_ = true },
		{ .key = "DB_PASSWORD", .value = "s3cret", .public_ = false, .masked = true },
		{ .key = "GIT_STRATEGY", .value = "fetch", .public_ = true },
		{ .key = "FF_NETWORK_PER_BUILD", .value = "true", .public_ = true },
	};
	struct api_variable svc_vars[] = {
		{ .key = "POSTGRES_DB", .value = "db-$TAG", .public_ = true },
		{ .key = "RAW", .value = "$TAG", .public_ = true, .raw = true },
	};
	struct api_image services[1];
	struct api_job job;
	struct job_vars_input in;
	struct job_settings set;
	struct runner_config rc;
	struct job_prep prep;
	struct job_exec x;
	char *error = NULL;

	(void)state;
	memset(&job, 0, sizeof(job));
	memset(services, 0, sizeof(services));
	memset(&rc, 0, sizeof(rc));
	rc.custom_build_dir_enabled = -1;
	job.id = 991;
	job.variables = vars;
	job.n_variables = 4;
	job.job_info.project_id = 42;
	job.job_info.pipeline_id = 7;
	job.job_info.project_full_path = "acme/widget";
	job.git_info.sha = "0123abcd";
	job.git_info.ref = "main";
	job.git_info.protected_ = 1;
	job.image.present = true;
	job.image.name = "busybox:$TAG";
	strv_push(&job.image.entrypoint, "");
	services[0].present = true;
	services[0].name = "postgres:$TAG";
	services[0].alias = "db, pg  main";
	services[0].variables = svc_vars;
	services[0].n_variables = 2;
	job.services = services;
	job.n_services = 1;

	memset(&in, 0, sizeof(in));
	in.short_token = "t3_AbCdEf";
	in.builds_dir = "/builds";
	in.concurrent_project_id = 2;
	in.rc = &rc;
	in.shared_env = false;
	assert_int_equal(job_prepare(&prep, &job, &in, &error), 0);

	memset(&set, 0, sizeof(set));
	set.short_token = "t3_AbCdEf";
	set.system_id = "some-system-ID";
	set.builds_dir = "/builds";
	set.concurrent_project_id = 2;
	job_exec_make(&x, &(struct job_exec_input){
		.payload = &job, .prep = &prep, .set = &set, .runner_token = "tok",
		.runner_id = 12, .work_dir = "/var/lib/runner/executor", .stop_grace_ms = 5000,
	});
	assert_int_equal(x.spec.job_id, 991);
	assert_int_equal(x.spec.runner_id, 12);
	assert_string_equal(x.spec.project_dir, "/builds/acme/widget");
	assert_true(x.spec.reuse_builds);
	assert_true(x.spec.protected_ref);
	assert_true(x.spec.network_per_build);
	assert_false(x.spec.use_init);
	assert_string_equal(x.spec.image.name, "busybox:1.36");
	assert_non_null(x.spec.image.entrypoint);
	assert_string_equal(x.spec.image.entrypoint->v[0], "");
	assert_null(x.spec.image.command);
	assert_int_equal(x.spec.n_services, 1);
	assert_string_equal(x.spec.services[0].name, "postgres:1.36");
	assert_int_equal(x.spec.services[0].aliases->n, 3);
	assert_string_equal(x.spec.services[0].aliases->v[0], "db");
	assert_string_equal(x.spec.services[0].aliases->v[1], "pg");
	assert_string_equal(x.spec.services[0].aliases->v[2], "main");
	assert_true(has(x.spec.services[0].variables, "POSTGRES_DB=db-1.36"));
	assert_true(has(x.spec.services[0].variables, "RAW=$TAG"));
	/* Every variable goes to the job's containers; the private ones to no service. */
	assert_true(has(x.spec.env, "DB_PASSWORD=s3cret"));
	assert_false(has_key(x.spec.service_env, "DB_PASSWORD"));
	assert_true(has(x.spec.service_env, "TAG=1.36"));
	assert_true(has(x.spec.service_env, "CI_DISPOSABLE_ENVIRONMENT=true"));
	{
		char *want = job_exec_unique_name("tok", "some-system-ID", 42, 2);

		assert_string_equal(x.spec.unique_name, want);
		free(want);
	}
	assert_string_equal(x.spec.work_dir, "/var/lib/runner/executor");
	job_exec_release(&x);
	job_prep_release(&prep);
	strv_release(&job.image.entrypoint);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unique_name),
		cmocka_unit_test(test_spec),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Cache keys and the transfer lists of a job (runner/transfers.c). */
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
#include "runner/transfers.h"
#include "runner/vars.h"

#define V(k, val)	{ .key = k, .value = val, .public_ = true }

static void
test_sanitize(void **state)
{
	static const struct {
		const char	*in;
		const char	*out;	/* NULL: refused */
	} t[] = {
		{ "build/main", "build/main" },
		{ "plain", "plain" },
		{ "../../etc/passwd", "etc/passwd" },
		{ "a/../../b", "b" },
		{ "%2e%2e/%2E%2E/x", "x" },
		{ "a%2Fb%2fc", "a/b/c" },
		{ "a\\b", "a/b" },
		{ "./a//b/./", "a/b" },
		{ "key  ", "key" },
		{ "a/b \t/  ", "a/b" },
		{ " lead", " lead" },
		{ "in side/x", "in side/x" },
		{ "", NULL },
		{ "..", NULL },
		{ "/", NULL },
		{ "%2e%2e", NULL },
		{ "  ", NULL },
		{ "a/..", NULL },
	};
	size_t i;
	char *s;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		s = cache_key_sanitize(t[i].in);
		if (t[i].out == NULL) {
			if (s != NULL)
				fail_msg("\"%s\" gave \"%s\", want refused", t[i].in, s);
		} else {
			if (s == NULL || strcmp(s, t[i].out) != 0)
				fail_msg("\"%s\" gave \"%s\", want \"%s\"", t[i].in,
				    s != NULL ? s : "(refused)", t[i].out);
		}
		free(s);
	}
}

struct fixture {
	struct api_job		 job;
	struct job_vars		 vars;
	struct transfers	 t;
	struct api_cache	 caches[4];
	struct api_artifact	 artifacts[2];
	struct api_dependency	 deps[3];
};

static void
build(struct fixture *f, struct api_variable *pv, size_t n, bool hash)
{
	struct job_vars_input in;
	struct transfers_input ti = { .cache_dir = "/c", .hash_keys = hash };

	f->job.variables = pv;
	f->job.n_variables = n;
	f->job.runner_info.timeout = 3600;
	f->job.job_info.name = "rspec";
	f->job.job_info.project_full_path = "group/../proj";
	f->job.job_info.project_id = 7;
	f->job.git_info.ref = "main";
	memset(&in, 0, sizeof(in));
	in.short_token = "t";
	in.builds_dir = "/b";
	in.project_dir = "/b/p";
	in.tmp_dir = "/b/p.tmp";
	job_vars_build(&f->vars, &f->job, &in);
	transfers_make(&f->t, &f->job, &f->vars, &ti);
}

static void
release(struct fixture *f)
{
	size_t i;

	transfers_release(&f->t);
	job_vars_release(&f->vars);
	for (i = 0; i < 4; i++)
		strv_release(&f->caches[i].fallback_keys);
}

static void
test_cache_keys(void **state)
{
	struct api_variable pv[] = {
		V("BRANCH", "feature/x"),
		V("CACHE_FALLBACK_KEY", "shared"),
	};
	struct fixture f;
	const struct script_cache *c;

	(void)state;
	memset(&f, 0, sizeof(f));
	/* 0: default key; 1: expanded key with fallbacks; 2: empty after sanitising. */
	f.caches[1].key = "deps-$BRANCH/../x ";
	strv_push(&f.caches[1].fallback_keys, "deps-$CI_DEFAULT_BRANCH");
	strv_push(&f.caches[1].fallback_keys, "$UNSET");
	strv_push(&f.caches[1].fallback_keys, "fb-${BRANCH}");
	f.caches[1].policy = "pull";
	f.caches[2].key = "%2e%2e";
	f.caches[2].policy = "$NOPE";
	f.caches[3].key = "k";
	f.caches[3].policy = "sometimes";
	f.job.caches = f.caches;
	f.job.n_caches = 4;
	build(&f, pv, 2, false);
	assert_int_equal(f.t.n_caches, 4);

	c = &f.t.caches[0];
	assert_int_equal(c->n_keys, 2);
	assert_string_equal(c->keys[0].key, "rspec/main");
	/* A ".." in the project path gives "project-<id>", as for the builds dir. */
	assert_string_equal(c->keys[0].file, "/c/project-7/rspec/main/cache.zip");
	assert_string_equal(c->keys[1].key, "shared");
	assert_true(c->pull && c->push);
	assert_string_equal(c->when, "on_success");
	assert_int_equal(c->warnings.n, 0);

	c = &f.t.caches[1];
	assert_string_equal(c->keys[0].key, "deps-feature/x");
	assert_int_equal(c->warnings.n, 1);
	assert_string_equal(c->warnings.v[0],
	    "cache key \"deps-feature/x/../x \" sanitized to \"deps-feature/x\"");
	/* "$UNSET" expands to "" and is dropped; CI_DEFAULT_BRANCH is unset here. */
	assert_int_equal(c->n_keys, 4);
	assert_string_equal(c->keys[1].key, "deps-");
	assert_string_equal(c->keys[2].key, "fb-feature/x");
	assert_string_equal(c->keys[3].key, "shared");
	assert_true(c->pull && !c->push);

	c = &f.t.caches[2];
	assert_int_equal(c->n_keys, 0);
	assert_string_equal(c->shown_key, "%2e%2e");
	/* An empty expanded policy is the default. */
	assert_true(c->pull && c->push);

	c = &f.t.caches[3];
	assert_false(c->pull || c->push);
	assert_string_equal(c->warnings.v[c->warnings.n - 1],
	    "unknown cache policy \"sometimes\": the cache is neither restored nor saved");
	release(&f);
}

static void
test_fallback_protected(void **state)
{
	struct api_variable pv[] = { V("CACHE_FALLBACK_KEY", "main-protected. ") };
	struct fixture f;

	(void)state;
	memset(&f, 0, sizeof(f));
	f.job.caches = f.caches;
	f.job.n_caches = 1;
	build(&f, pv, 1, true);
	assert_int_equal(f.t.caches[0].n_keys, 1);
	/* FF_HASH_CACHE_KEYS: the directory is the key's SHA-256 (of "rspec/main"). */
	assert_string_equal(f.t.caches[0].keys[0].file, "/c/project-7/"
	    "75967352976ca26564335068cc412ad9ba61259887f37f11af59e67c55aa6e36/cache.zip");
	assert_int_equal(f.t.caches[0].warnings.n, 1);
	assert_string_equal(f.t.caches[0].warnings.v[0],
	    "CACHE_FALLBACK_KEY \"main-protected. \" not allowed to end in \"-protected\"");
	release(&f);
}

static void
test_artifacts_and_dependencies(void **state)
{
	struct fixture f;

	(void)state;
	memset(&f, 0, sizeof(f));
	f.artifacts[0].name = "bin";
	f.artifacts[0].artifact_format = "zip";
	f.artifacts[1].artifact_type = "junit";
	f.job.artifacts = f.artifacts;
	f.job.n_artifacts = 2;
	f.deps[0] = (struct api_dependency){ .id = 1, .name = "a", .token = "t1",
	    .artifacts_filename = "artifacts.zip" };
	f.deps[1] = (struct api_dependency){ .id = 2, .name = "b", .token = "t2" };
	f.deps[2] = (struct api_dependency){ .id = 3, .name = "c", .token = "t3",
	    .artifacts_filename = "" };
	f.job.dependencies = f.deps;
	f.job.n_dependencies = 3;
	build(&f, NULL, 0, false);
	assert_int_equal(f.t.n_artifacts, 2);
	assert_string_equal(f.t.artifacts[0].name, "bin");
	assert_string_equal(f.t.artifacts[1].type, "junit");
	/* Only dependencies with a file are downloaded. */
	assert_int_equal(f.t.n_dependencies, 1);
	assert_int_equal(f.t.dependencies[0].id, 1);
	assert_string_equal(f.t.dependencies[0].token, "t1");
	release(&f);
}

/*
 * The paths, excludes and names are expanded with the job's variables,
 * as gitlab-runner's cache-archiver and artifacts-uploader expand theirs
 * (issue 16): a file variable gives its path, a '$' before no name stays.
 */
static void
test_paths_expanded(void **state)
{
	struct api_variable pv[] = {
		V("VENDOR", "vendor"),
		V("OUT", "build/out"),
		{ .key = "KEYFILE", .value = "secret", .file = true },
	};
	struct fixture f;
	const struct script_cache *c;
	const struct script_artifact *a;

	(void)state;
	memset(&f, 0, sizeof(f));
	strv_push(&f.caches[0].paths, "$VENDOR/bundle");
	strv_push(&f.caches[0].paths, "${CI_PROJECT_DIR}/.npm");
	strv_push(&f.caches[0].paths, "plain/$/x");
	strv_push(&f.caches[0].paths, "$UNSET");
	f.caches[0].key = "deps-$VENDOR";
	f.job.caches = f.caches;
	f.job.n_caches = 1;
	strv_push(&f.artifacts[0].paths, "$OUT/*.bin");
	strv_push(&f.artifacts[0].paths, "$KEYFILE");
	strv_push(&f.artifacts[0].exclude, "${OUT}/*.tmp");
	f.artifacts[0].name = "bin-$VENDOR";
	f.job.artifacts = f.artifacts;
	f.job.n_artifacts = 1;
	build(&f, pv, sizeof(pv) / sizeof(pv[0]), false);

	c = &f.t.caches[0];
	assert_string_equal(c->keys[0].key, "deps-vendor");
	assert_int_equal(c->paths.n, 4);
	assert_string_equal(c->paths.v[0], "vendor/bundle");
	assert_string_equal(c->paths.v[1], "/b/p/.npm");
	assert_string_equal(c->paths.v[2], "plain/$/x");
	assert_string_equal(c->paths.v[3], "");
	a = &f.t.artifacts[0];
	assert_int_equal(a->paths.n, 2);
	assert_string_equal(a->paths.v[0], "build/out/*.bin");
	assert_string_equal(a->paths.v[1], "/b/p.tmp/KEYFILE");
	assert_int_equal(a->exclude.n, 1);
	assert_string_equal(a->exclude.v[0], "build/out/*.tmp");
	assert_string_equal(a->name, "bin-vendor");
	release(&f);
	strv_release(&f.caches[0].paths);
	strv_release(&f.artifacts[0].paths);
	strv_release(&f.artifacts[0].exclude);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sanitize),
		cmocka_unit_test(test_cache_keys),
		cmocka_unit_test(test_fallback_protected),
		cmocka_unit_test(test_artifacts_and_dependencies),
		cmocka_unit_test(test_paths_expanded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

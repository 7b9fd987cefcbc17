/*
 * Registry credentials: Docker's formats (executors/docker/auth.c) and
 * which source wins (runner/registry_auth.c), with the cases of
 * gitlab-runner's helpers/docker/auth/auth_test.go.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "executors/docker/auth.h"
#include "lib/base64.h"
#include "lib/xmalloc.h"
#include "runner/registry_auth.h"

static void
test_base64_both_alphabets(void **state)
{
	static const unsigned char bytes[] = { 0xfb, 0xff, 0xfe, 'a' };
	char *s, *back;
	size_t n;

	(void)state;
	s = base64_encode(bytes, sizeof(bytes), false);
	assert_string_equal(s, "+//+YQ==");
	assert_int_equal(base64_decode(s, strlen(s), &back, &n), 0);
	assert_int_equal(n, sizeof(bytes));
	assert_memory_equal(back, bytes, n);
	free(s);
	free(back);
	s = base64_encode(bytes, sizeof(bytes), true);
	assert_string_equal(s, "-__-YQ==");
	assert_int_equal(base64_decode("-__-YQ", 6, &back, &n), 0);	/* unpadded */
	assert_memory_equal(back, bytes, n);
	free(s);
	free(back);
	assert_int_equal(base64_decode("a", 1, &back, &n), -1);
	assert_int_equal(base64_decode("ab$d", 4, &back, &n), -1);
}

/* TestConvertToRegistryPath. */
static void
test_registry_path_of_a_server(void **state)
{
	static const char *const t[][2] = {
		{ "my.hostname", "my.hostname" },
		{ "my.hostname/with/path", "my.hostname/with/path" },
		{ "my.HOSTNAME/With/Path/CASE", "my.hostname/With/Path/CASE" },
		{ "my.hostname/with/tag/image:latest", "my.hostname/with/tag/image" },
		{ "my.hostname:5000/with/tag/image:latest", "my.hostname:5000/with/tag/image" },
		{ "http://index.docker.io/v1/", "docker.io" },
		{ "https://index.docker.io/v1/", "docker.io" },
		{ "HTTP://INDEX.DOCKER.IO/V1/", "docker.io" },
		{ "HTTPS://INDEX.DOCKER.IO/V1/blibb", "docker.io" },
		{ "https://my.hostname/v1/something", "my.hostname" },
		{ "127.0.0.1:5000", "127.0.0.1:5000" },
		{ "registry.local/", "registry.local" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char *got = docker_registry_path(t[i][0]);

		assert_string_equal(got, t[i][1]);
		free(got);
	}
}

static void
test_registry_path_of_an_image(void **state)
{
	static const char *const t[][2] = {
		{ "alpine", "docker.io/alpine" },
		{ "alpine:3.19", "docker.io/alpine" },
		{ "library/alpine:3", "docker.io/library/alpine" },
		{ "index.docker.io/library/alpine", "docker.io/library/alpine" },
		{ "localhost/img:1", "localhost/img" },
		{ "LocalHost:5000/img", "localhost:5000/img" },
		{ "127.0.0.1:5000/runner-test/runtime:1", "127.0.0.1:5000/runner-test/runtime" },
		{ "Registry.Domain.tld:5005/image/name:version", "registry.domain.tld:5005/image/name" },
		{ "registry.local/ns/img@sha256:abcd", "registry.local/ns/img" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char *got = docker_image_path(t[i][0]);

		assert_string_equal(got, t[i][1]);
		free(got);
	}
}

/* base64 of "user:pass", as config.json writes "auth". */
static char *
auth_of(const char *user, const char *pass)
{
	char *plain = xasprintf("%s:%s", user, pass), *out;

	out = base64_encode(plain, strlen(plain), false);
	free(plain);
	return out;
}

static char *
config_json(const char *const (*entries)[3], size_t n)
{
	char *out = xstrdup("{\"auths\":{"), *next, *auth;
	size_t i;

	for (i = 0; i < n; i++) {
		auth = auth_of(entries[i][1], entries[i][2]);
		next = xasprintf("%s%s\"%s\":{\"auth\":\"%s\"}", out, i ? "," : "", entries[i][0],
		    auth);
		free(auth);
		free(out);
		out = next;
	}
	next = xasprintf("%s}}", out);
	free(out);
	return next;
}

static void
test_config_credentials(void **state)
{
	static const char *const e[][3] = {
		{ "registry.local", "u1", "p:1" },	/* a ':' in the password stays there */
		{ "https://index.docker.io/v1/", "hub", "hubpass" },
	};
	struct docker_credentials c;
	char *text = config_json(e, 2), *cause = NULL;

	(void)state;
	assert_int_equal(docker_config_credentials(text, strlen(text), &c, &cause), 0);
	assert_int_equal(c.n, 2);
	assert_false(c.helpers);
	/* Sorted by server name, as the CLI's map is read. */
	assert_string_equal(c.v[0].server, "https://index.docker.io/v1/");
	assert_string_equal(c.v[1].server, "registry.local");
	assert_string_equal(c.v[1].username, "u1");
	assert_string_equal(c.v[1].password, "p:1");
	docker_credentials_release(&c);
	free(text);

	assert_int_equal(docker_config_credentials("[]", 2, &c, &cause), -1);
	assert_string_equal(cause, "not a JSON object");
	free(cause);
	text = xstrdup("{\"auths\":{\"h\":{\"auth\":\"bm9jb2xvbg==\"}}}");	/* "nocolon" */
	assert_int_equal(docker_config_credentials(text, strlen(text), &c, &cause), -1);
	assert_string_equal(cause, "auths.\"h\".auth is not base64 of user:password");
	free(cause);
	free(text);
	text = xstrdup("{\"credsStore\":\"desktop\"}");
	assert_int_equal(docker_config_credentials(text, strlen(text), &c, &cause), 0);
	assert_true(c.helpers);
	assert_int_equal(c.n, 0);
	docker_credentials_release(&c);
	free(text);
}

/* What the engine gets: URL-safe base64 of Go's AuthConfig JSON and a newline. */
static void
test_registry_auth_value(void **state)
{
	struct docker_credential c = { .server = "127.0.0.1:5000", .username = "ci",
		.password = "s3cr3t?>" };
	char *v = docker_registry_auth_value(&c), *json;
	size_t n;

	(void)state;
	assert_null(strchr(v, '+'));
	assert_null(strchr(v, '/'));
	assert_int_equal(base64_decode(v, strlen(v), &json, &n), 0);
	assert_string_equal(json, "{\"username\":\"ci\",\"password\":\"s3cr3t?>\","
	    "\"serveraddress\":\"127.0.0.1:5000\"}\n");
	free(json);
	free(v);
}

/* The user, from an X-Registry-Auth value. */
static char *
user_of(const char *value)
{
	char *json, *u, *end;
	size_t n;

	assert_int_equal(base64_decode(value, strlen(value), &json, &n), 0);
	u = strstr(json, "\"username\":\"") + strlen("\"username\":\"");
	end = strchr(u, '"');
	u = xasprintf("%.*s", (int)(end - u), u);
	free(json);
	return u;
}

/* The image's credentials: user and source, or NULL. */
static const struct exec_registry_auth *
for_image(const struct registry_auths *a, const char *image)
{
	const char **paths = xcalloc(a->n + 1, sizeof(*paths));
	ssize_t k;
	size_t i;

	for (i = 0; i < a->n; i++)
		paths[i] = a->v[i].path;
	k = docker_auth_match(paths, a->n, image);
	free(paths);
	return k >= 0 ? &a->v[k] : NULL;
}

static void
assert_user(const struct registry_auths *a, const char *image, const char *user,
    const char *source)
{
	const struct exec_registry_auth *e = for_image(a, image);
	char *got;

	assert_non_null(e);
	got = user_of(e->value);
	assert_string_equal(got, user);
	assert_string_equal(e->source, source);
	free(got);
}

/* TestCredsForImagesWithDifferentPaths. */
static void
test_the_most_specific_path_and_the_first_source_win(void **state)
{
	static const char *const e[][3] = {
		{ "registry.local", "test_user_1", "test_password_1" },
		{ "registry.local/ns", "test_user_2", "test_password_2" },
		{ "registry.local/ns/some/image", "test_user_3", "test_password_3" },
	};
	struct api_credential creds[] = {
		{ .type = "registry", .url = "registry.local/ns", .username = "job-cred-user",
		  .password = "job-cred-pass" },
		{ .type = "registry", .url = "registry.local/ns/blipp", .username = "job-blipp",
		  .password = "job-cred-pass" },
		{ .type = "other", .url = "registry.other", .username = "nope", .password = "x" },
	};
	struct registry_auths a;
	struct strv warnings = { 0 };
	char *text = config_json(e, 3);

	(void)state;
	registry_auths_make(&a, &(struct registry_auth_input){
		.docker_auth_config = text, .credentials = creds, .n_credentials = 3 }, &warnings);
	assert_int_equal(warnings.n, 0);
	assert_int_equal(a.n, 4);	/* registry.local/ns from the payload is dropped */
	assert_user(&a, "registry.local/foo/image:3", "test_user_1", REGISTRY_SOURCE_VARIABLE);
	assert_user(&a, "registry.local/ns/image:5", "test_user_2", REGISTRY_SOURCE_VARIABLE);
	assert_user(&a, "registry.local/ns/some/image:l", "test_user_3", REGISTRY_SOURCE_VARIABLE);
	assert_null(for_image(&a, "no_auth_configured/image:l"));
	assert_user(&a, "registry.local/ns/blipp/image:foo", "job-blipp", REGISTRY_SOURCE_PAYLOAD);
	assert_null(for_image(&a, "registry.other/x"));
	registry_auths_release(&a);
	free(text);
}

/* A source that cannot be read is said once and skipped; the next ones count. */
static void
test_a_bad_source_is_a_warning(void **state)
{
	static const char *const home[][3] = { { "registry.local", "from_home", "p" } };
	struct registry_auths a;
	struct strv warnings = { 0 };
	char *text = config_json(home, 1);

	(void)state;
	registry_auths_make(&a, &(struct registry_auth_input){
		.docker_auth_config = "{not json", .home_config = text,
		.home_config_path = "/root/.docker/config.json" }, &warnings);
	assert_int_equal(warnings.n, 1);
	assert_string_equal(warnings.v[0], "Failed to resolve credentials from "
	    "$DOCKER_AUTH_CONFIG: not a JSON object. Credentials from this source will not "
	    "be used.");
	assert_user(&a, "registry.local/img", "from_home", "/root/.docker/config.json");
	registry_auths_release(&a);
	strv_release(&warnings);
	free(text);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_base64_both_alphabets),
		cmocka_unit_test(test_registry_path_of_a_server),
		cmocka_unit_test(test_registry_path_of_an_image),
		cmocka_unit_test(test_config_credentials),
		cmocka_unit_test(test_registry_auth_value),
		cmocka_unit_test(test_the_most_specific_path_and_the_first_source_win),
		cmocka_unit_test(test_a_bad_source_is_a_warning),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

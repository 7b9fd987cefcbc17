/*
 * The pure parts of the Engine API client (executors/docker/engine.c): the
 * version pick, the host parsing, endpoint labels, error messages, query
 * escaping and the JSON-lines splitter.  The file is included, so its
 * static functions are tested as they are (the library's engine.o is then
 * not linked: every symbol it has is defined here).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "executors/docker/engine.c"

static void
assert_pick(const char *server, const char *server_min, const char *want)
{
	char out[VERSION_SIZE], *why;

	assert_int_equal(version_pick(server, server_min, out, sizeof(out), &why), 0);
	assert_null(why);
	assert_string_equal(out, want);
}

static char *
assert_refused(const char *server, const char *server_min)
{
	char out[VERSION_SIZE], *why;

	assert_int_equal(version_pick(server, server_min, out, sizeof(out), &why), -1);
	assert_non_null(why);
	assert_null(strchr(why, '\n'));
	return why;
}

static void
test_version_pick(void **state)
{
	char *why;

	(void)state;
	/* Debian 12's 20.10: exactly our oldest. */
	assert_pick("1.41", NULL, "1.41");
	assert_pick("1.41", "1.12", "1.41");
	assert_pick("1.44", NULL, "1.44");
	/* Newer than we know: ours, the newest both speak. */
	assert_pick("1.52", "1.44", ENGINE_API_MAX);
	assert_pick("2.0", NULL, ENGINE_API_MAX);
	/* Minor versions compare as numbers, not strings. */
	assert_pick("1.100", NULL, ENGINE_API_MAX);

	why = assert_refused("1.40", NULL);
	assert_non_null(strstr(why, "1.40"));
	assert_non_null(strstr(why, "older than " ENGINE_API_MIN));
	free(why);
	why = assert_refused("1.9", NULL);	/* 1.9 < 1.41 */
	free(why);
	/* A server whose minimum is past our newest (a future Docker). */
	why = assert_refused("1.60", "1.50");
	assert_non_null(strstr(why, "needs API version 1.50"));
	assert_non_null(strstr(why, ENGINE_API_MAX));
	free(why);
	why = assert_refused(NULL, NULL);
	free(why);
	why = assert_refused("", NULL);
	free(why);
	why = assert_refused("1.41a", NULL);
	free(why);
	why = assert_refused("v1.41", NULL);
	free(why);
}

static void
test_host_unix(void **state)
{
	struct host_spec h;
	char *cause;

	(void)state;
	assert_int_equal(host_parse("unix:///run/x.sock", false, NULL, &h, &cause), 0);
	assert_string_equal(h.address, "unix:///run/x.sock");
	assert_string_equal(h.unix_path, "/run/x.sock");
	assert_string_equal(h.base_url, "http://docker");
	assert_null(h.ca_file);
	host_spec_free(&h);

	assert_int_equal(host_parse(NULL, false, NULL, &h, &cause), 0);
	assert_string_equal(h.unix_path, "/var/run/docker.sock");
	assert_string_equal(h.address, "unix:///var/run/docker.sock");
	host_spec_free(&h);

	assert_int_equal(host_parse("unix://relative.sock", false, NULL, &h, &cause), -1);
	assert_non_null(strstr(cause, "unix://relative.sock"));
	free(cause);
}

static void
test_host_tcp(void **state)
{
	struct host_spec h;
	char *cause;

	(void)state;
	assert_int_equal(host_parse("tcp://10.0.0.5:2375", false, NULL, &h, &cause), 0);
	assert_null(h.unix_path);
	assert_string_equal(h.base_url, "http://10.0.0.5:2375");
	assert_false(h.tls_verify);
	host_spec_free(&h);

	assert_int_equal(host_parse("tcp://docker.example:2376/", true, "/certs", &h, &cause),
	    0);
	assert_string_equal(h.base_url, "https://docker.example:2376");
	assert_true(h.tls_verify);
	assert_string_equal(h.ca_file, "/certs/ca.pem");
	assert_string_equal(h.cert_file, "/certs/cert.pem");
	assert_string_equal(h.key_file, "/certs/key.pem");
	host_spec_free(&h);

	/* The CLI's default ports. */
	assert_int_equal(host_parse("tcp://d", false, NULL, &h, &cause), 0);
	assert_string_equal(h.base_url, "http://d:2375");
	host_spec_free(&h);
	assert_int_equal(host_parse("tcp://d", true, "/c", &h, &cause), 0);
	assert_string_equal(h.base_url, "https://d:2376");
	host_spec_free(&h);

	assert_int_equal(host_parse("tcp://", false, NULL, &h, &cause), -1);
	free(cause);
	assert_int_equal(host_parse("tcp://u@h:1", false, NULL, &h, &cause), -1);
	free(cause);
	assert_int_equal(host_parse("tcp://h:1/base", false, NULL, &h, &cause), -1);
	free(cause);
	assert_int_equal(host_parse("tcp://h:1", true, "", &h, &cause), -1);
	assert_non_null(strstr(cause, "certificate"));
	free(cause);
}

static void
test_host_refused(void **state)
{
	static const char *const hosts[] = { "npipe:////./pipe/docker_engine",
	    "ssh://me@build-host", "http://h:2375", "/var/run/docker.sock", NULL };
	struct host_spec h;
	char *cause;
	int i;

	(void)state;
	for (i = 0; hosts[i] != NULL; i++) {
		assert_int_equal(host_parse(hosts[i], false, NULL, &h, &cause), -1);
		assert_non_null(strstr(cause, hosts[i]));
		assert_null(strchr(cause, '\n'));
		free(cause);
	}
}

static void
test_engine_new_env(void **state)
{
	struct engine_config cfg = { 0 };
	uv_loop_t loop;
	struct engine *e;
	char *cause = NULL;

	(void)state;
	uv_loop_init(&loop);
	cfg.loop = &loop;
	setenv("DOCKER_HOST", "tcp://envhost:1234", 1);
	setenv("DOCKER_TLS_VERIFY", "1", 1);
	setenv("DOCKER_CERT_PATH", "/env/certs", 1);
	e = engine_new(&cfg, &cause);
	assert_non_null(e);
	assert_string_equal(engine_address(e), "tcp://envhost:1234");
	assert_string_equal(engine_endpoint(e)->base_url, "https://envhost:1234");
	assert_string_equal(engine_endpoint(e)->ca_file, "/env/certs/ca.pem");
	assert_null(engine_api_version(e));
	assert_true(engine_api_at_least(e, "1.41"));
	assert_false(engine_api_at_least(e, "1.44"));
	assert_ptr_equal(engine_loop(e), &loop);
	engine_close(e);

	/* A configured host: the environment's TLS switch does not apply. */
	cfg.host = "tcp://conf:2375";
	e = engine_new(&cfg, &cause);
	assert_non_null(e);
	assert_string_equal(engine_endpoint(e)->base_url, "http://conf:2375");
	assert_false(engine_endpoint(e)->tls_verify);
	engine_close(e);

	cfg.host = "ssh://x";
	assert_null(engine_new(&cfg, &cause));
	assert_non_null(strstr(cause, "ssh://x"));
	free(cause);
	unsetenv("DOCKER_HOST");
	unsetenv("DOCKER_TLS_VERIFY");
	unsetenv("DOCKER_CERT_PATH");
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
}

static void
assert_label(const char *path, const char *want)
{
	char out[96];

	endpoint_label(path, out, sizeof(out));
	assert_string_equal(out, want);
}

static void
test_endpoint_label(void **state)
{
	(void)state;
	assert_label("/containers/create?name=runner-x", "docker:/containers/create");
	assert_label("/containers/8b5520734efb/start", "docker:/containers/{id}/start");
	assert_label("/containers/8b5520734efb?force=1&v=1", "docker:/containers/{id}");
	assert_label("/containers/json?all=1", "docker:/containers/json");
	assert_label("/exec/abc/start", "docker:/exec/{id}/start");
	assert_label("/images/create?fromImage=x", "docker:/images/create");
	assert_label("/images/registry.example/group/img:1/json", "docker:/images/{name}/json");
	assert_label("/images/alpine", "docker:/images/{name}");
	assert_label("/volumes/runner-cache-1", "docker:/volumes/{id}");
	assert_label("/_ping", "docker:/_ping");
}

static void
test_error_message(void **state)
{
	char *m;

	(void)state;
	m = error_message(404, "{\"message\":\"No such container: x\"}\n", 35);
	assert_string_equal(m, "No such container: x");
	free(m);
	m = error_message(502, "Bad Gateway\nmore", 16);
	assert_string_equal(m, "HTTP 502: Bad Gateway");
	free(m);
	m = error_message(500, "", 0);
	assert_string_equal(m, "HTTP 500");
	free(m);
}

static void
test_query_escape(void **state)
{
	char *s;

	(void)state;
	s = engine_query_escape("{\"label\":[\"com.gitlab.gitlab-runner.managed=true\"]}");
	assert_string_equal(s, "%7B%22label%22%3A%5B%22com.gitlab.gitlab-runner.managed"
	    "%3Dtrue%22%5D%7D");
	free(s);
	s = engine_query_escape("a b/c~_.-");
	assert_string_equal(s, "a%20b%2Fc~_.-");
	free(s);
	s = engine_query_escape("");
	assert_string_equal(s, "");
	free(s);
}

struct lines_seen {
	char	 all[512];
	int	 n;
};

static void
on_line(const char *s, size_t n, void *arg)
{
	struct lines_seen *seen = arg;
	size_t len = strlen(seen->all);

	snprintf(seen->all + len, sizeof(seen->all) - len, "[%.*s]", (int)n, s);
	seen->n++;
}

static void
test_lines_any_split(void **state)
{
	const char *in = "{\"status\":\"a\"}\n{\"status\":\"b\"}\r\n\n{\"error\":\"c\"}";
	size_t len = strlen(in), cut, cut2;

	(void)state;
	for (cut = 0; cut <= len; cut++)
		for (cut2 = cut; cut2 <= len; cut2++) {
			struct engine_lines l = { 0 };
			struct lines_seen seen = { 0 };

			engine_lines_feed(&l, in, cut, on_line, &seen);
			engine_lines_feed(&l, in + cut, cut2 - cut, on_line, &seen);
			engine_lines_feed(&l, in + cut2, len - cut2, on_line, &seen);
			engine_lines_end(&l, on_line, &seen);
			assert_string_equal(seen.all, "[{\"status\":\"a\"}][{\"status\":\"b\"}]"
			    "[{\"error\":\"c\"}]");
			assert_int_equal(seen.n, 3);
			assert_null(l.buf);
		}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version_pick),
		cmocka_unit_test(test_host_unix),
		cmocka_unit_test(test_host_tcp),
		cmocka_unit_test(test_host_refused),
		cmocka_unit_test(test_engine_new_env),
		cmocka_unit_test(test_endpoint_label),
		cmocka_unit_test(test_error_message),
		cmocka_unit_test(test_query_escape),
		cmocka_unit_test(test_lines_any_split),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The redirect decision (api/redirect.c): origins, tokens, bodies, no network. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "api/redirect.h"

#define GITLAB	"https://gitlab.example.com/api/v4/jobs/7/artifacts?artifact_format=zip"

static struct redirect_input
base(long status, const char *location)
{
	struct redirect_input in;

	memset(&in, 0, sizeof(in));
	in.status = status;
	in.method = "POST";
	in.url = GITLAB;
	in.location = location;
	in.has_body = true;
	in.max_hops = 10;
	return in;
}

static bool
same(const char *a, const char *b)
{
	struct url_origin x, y;

	assert_int_equal(url_origin_parse(a, &x), 0);
	assert_int_equal(url_origin_parse(b, &y), 0);
	return url_origin_same(&x, &y);
}

static void
test_origin_is_scheme_host_and_port(void **state)
{
	(void)state;
	assert_true(same("https://GitLab.Example.com/a", "https://gitlab.example.com:443/b?c"));
	assert_true(same("http://h/", "HTTP://h:80"));
	assert_true(same("http://h:/x", "http://h"));
	assert_true(same("https://user:pw@h/x", "https://h"));
	assert_true(same("http://[::1]:8080/", "http://[::1]:8080?q"));
	assert_false(same("https://h/", "http://h/"));
	assert_false(same("http://h/", "http://h:8080/"));
	assert_false(same("http://h:443/", "https://h/"));
	assert_false(same("http://127.0.0.1:8000/", "http://127.0.0.1:8001/"));
	assert_false(same("http://h/", "http://h.evil/"));
	assert_false(same("http://evil@h/", "http://h@evil/"));
	assert_false(same("http://[::1]/", "http://[::2]/"));
}

static void
test_bad_origins(void **state)
{
	static const char *const bad[] = {
		"ftp://h/", "h/x", "http:///x", "http://:80/", "http://h:0/", "http://h:65536/",
		"http://h:8x/", "http://[::1/", "http://[::1]x/", "file:///etc/passwd", "",
		"http://h\tx/",
	};
	struct url_origin o;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(url_origin_parse(bad[i], &o), -1);
	assert_int_equal(url_origin_parse(NULL, &o), -1);
}

static void
test_origin_text_has_no_credentials_path_or_query(void **state)
{
	struct url_origin o;
	char text[ORIGIN_TEXT_MAX];

	(void)state;
	assert_int_equal(url_origin_parse("https://u:secret@H:8443/p?token=t#f", &o), 0);
	url_origin_format(&o, text, sizeof(text));
	assert_string_equal(text, "https://h:8443");
	assert_int_equal(url_origin_parse("http://[FE80::1]/x", &o), 0);
	url_origin_format(&o, text, sizeof(text));
	assert_string_equal(text, "http://[fe80::1]:80");
}

static void
test_token_headers(void **state)
{
	(void)state;
	assert_true(token_header("Job-Token: abc"));
	assert_true(token_header("runner-token:abc"));
	assert_true(token_header("PRIVATE-TOKEN: x"));
	assert_true(token_header("Authorization: Bearer x"));
	assert_true(token_header("Job-Token"));
	assert_false(token_header("Job-Tokens: x"));
	assert_false(token_header("Content-Type: application/json"));
	assert_false(token_header("X-Request-Id: 00"));
}

static void
test_resolve(void **state)
{
	static const struct { const char *base, *loc, *want; } cases[] = {
		{ "http://h:1/a/b?q", "https://o/x?y#f", "https://o/x?y" },
		{ "https://h:1/a/b?q", "//o:2/x", "https://o:2/x" },
		{ "http://u@h:1/a/b?q", "/x?y", "http://u@h:1/x?y" },
		{ "http://h:1/a/b?q", "?z", "http://h:1/a/b?z" },
		{ "http://h:1/a/b?q", "c", "http://h:1/a/c" },
		{ "http://h:1", "c", "http://h:1/c" },
		{ "http://h/a/b#f", "#g", "http://h/a/b" },
	};
	size_t i;
	char *url;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		url = redirect_resolve(cases[i].base, cases[i].loc);
		assert_non_null(url);
		assert_string_equal(url, cases[i].want);
		free(url);
	}
	assert_null(redirect_resolve("http://h/", "/a b"));
	assert_null(redirect_resolve("http://h/", "/a\r\nX-Evil: 1"));
	assert_null(redirect_resolve("ftp://h/", "/a"));
}

static void
test_not_redirects(void **state)
{
	static const long statuses[] = { 200, 201, 300, 304, 305, 306, 309, 400, 500 };
	struct redirect_decision d;
	struct redirect_input in;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
		in = base(statuses[i], "https://gitlab.example.com/x");
		redirect_decide(&in, &d);
		assert_int_equal(d.action, REDIRECT_NONE);
		assert_null(d.url);
	}
	in = base(307, NULL);
	redirect_decide(&in, &d);
	assert_int_equal(d.action, REDIRECT_NONE);
	in = base(307, "");
	redirect_decide(&in, &d);
	assert_int_equal(d.action, REDIRECT_NONE);
}

static void
test_same_origin_keeps_tokens_and_body(void **state)
{
	static const long statuses[] = { 301, 302, 307, 308 };
	struct redirect_decision d;
	struct redirect_input in;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
		in = base(statuses[i], "/redirected/api/v4/jobs/7/artifacts?artifact_format=zip");
		in.body_has_token = true;
		redirect_decide(&in, &d);
		assert_int_equal(d.action, REDIRECT_FOLLOW);
		assert_string_equal(d.url, "https://gitlab.example.com/redirected/api/v4/jobs/7/"
		    "artifacts?artifact_format=zip");
		assert_string_equal(d.method, "POST");
		assert_true(d.same_origin && d.keep_tokens && d.keep_body);
		assert_string_equal(d.from, "https://gitlab.example.com:443");
		assert_string_equal(d.to, "https://gitlab.example.com:443");
		redirect_decision_release(&d);
		assert_null(d.url);
	}
}

static void
test_another_origin_drops_tokens(void **state)
{
	static const long statuses[] = { 301, 302, 303, 307, 308 };
	static const char *const elsewhere[] = {
		"https://storage.example.com/bucket/x?X-Amz-Signature=s",
		"https://gitlab.example.com:8443/x",
		"//gitlab.example.com.evil/x",
	};
	struct redirect_decision d;
	struct redirect_input in;
	size_t i, j;

	(void)state;
	for (i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++)
		for (j = 0; j < sizeof(elsewhere) / sizeof(elsewhere[0]); j++) {
			in = base(statuses[i], elsewhere[j]);
			redirect_decide(&in, &d);
			assert_int_equal(d.action, REDIRECT_FOLLOW);
			assert_false(d.same_origin);
			assert_false(d.keep_tokens);
			assert_string_equal(d.from, "https://gitlab.example.com:443");
			assert_true(strncmp(d.to, "https://", 8) == 0);
			redirect_decision_release(&d);
		}
}

static void
test_caller_may_keep_tokens_from_the_same_origin_too(void **state)
{
	struct redirect_decision d;
	struct redirect_input in = base(302, "/storage/k/artifacts.zip?X-Amz-Signature=s");

	(void)state;
	in.method = "GET";
	in.has_body = false;
	in.never_keep_tokens = true;
	redirect_decide(&in, &d);
	assert_int_equal(d.action, REDIRECT_FOLLOW);
	assert_true(d.same_origin);
	assert_false(d.keep_tokens);
	redirect_decision_release(&d);
}

static void
test_303_is_a_get_without_body(void **state)
{
	struct redirect_decision d;
	struct redirect_input in = base(303, "https://elsewhere.example.com/done");

	(void)state;
	in.method = "PUT";
	in.body_has_token = true;	/* not sent, so not refused */
	redirect_decide(&in, &d);
	assert_int_equal(d.action, REDIRECT_FOLLOW);
	assert_string_equal(d.method, "GET");
	assert_false(d.keep_body);
	redirect_decision_release(&d);
	in.method = "HEAD";
	in.has_body = false;
	redirect_decide(&in, &d);
	assert_string_equal(d.method, "HEAD");
	redirect_decision_release(&d);
}

static void
test_a_token_body_never_goes_to_another_origin(void **state)
{
	static const long statuses[] = { 301, 302, 307, 308 };
	struct redirect_decision d;
	struct redirect_input in;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
		in = base(statuses[i], "http://gitlab.example.com:443/api/v4/jobs/request");
		in.url = "http://gitlab.example.com/api/v4/jobs/request";
		in.body_has_token = true;
		redirect_decide(&in, &d);
		assert_int_equal(d.action, REDIRECT_REFUSE);
		assert_null(d.url);
		assert_non_null(strstr(d.why_not, "body carries a token"));
		assert_string_equal(d.to, "http://gitlab.example.com:443");
	}
}

static void
test_never_https_to_http(void **state)
{
	struct redirect_decision d;
	struct redirect_input in = base(307, "http://gitlab.example.com/api/v4/jobs/7/artifacts");

	(void)state;
	in.has_body = false;
	redirect_decide(&in, &d);
	assert_int_equal(d.action, REDIRECT_REFUSE);
	assert_null(d.url);
	assert_non_null(strstr(d.why_not, "https to plain http"));
	assert_string_equal(d.from, "https://gitlab.example.com:443");
	assert_string_equal(d.to, "http://gitlab.example.com:80");
	/* The other way is a change of origin like any other. */
	in.url = "http://gitlab.example.com/x";
	in.location = "https://gitlab.example.com/x";
	redirect_decide(&in, &d);
	assert_int_equal(d.action, REDIRECT_FOLLOW);
	assert_false(d.keep_tokens);
	redirect_decision_release(&d);
}

static void
test_bad_locations_and_too_many_hops(void **state)
{
	static const char *const bad[] = {
		"ftp://h/x", "file:///etc/passwd", "javascript:alert(1)", "http://h:99999/",
		"/a b", "https://",
	};
	struct redirect_decision d;
	struct redirect_input in;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		in = base(302, bad[i]);
		redirect_decide(&in, &d);
		assert_int_equal(d.action, REDIRECT_REFUSE);
		assert_null(d.url);
		assert_non_null(strstr(d.why_not, "not an http or https URL"));
	}
	in = base(307, "/x");
	in.hops = 9;
	redirect_decide(&in, &d);
	assert_int_equal(d.action, REDIRECT_FOLLOW);
	redirect_decision_release(&d);
	in.hops = 10;
	redirect_decide(&in, &d);
	assert_int_equal(d.action, REDIRECT_REFUSE);
	assert_string_equal(d.why_not, "too many redirects");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_origin_is_scheme_host_and_port),
		cmocka_unit_test(test_bad_origins),
		cmocka_unit_test(test_origin_text_has_no_credentials_path_or_query),
		cmocka_unit_test(test_token_headers),
		cmocka_unit_test(test_resolve),
		cmocka_unit_test(test_not_redirects),
		cmocka_unit_test(test_same_origin_keeps_tokens_and_body),
		cmocka_unit_test(test_another_origin_drops_tokens),
		cmocka_unit_test(test_caller_may_keep_tokens_from_the_same_origin_too),
		cmocka_unit_test(test_303_is_a_get_without_body),
		cmocka_unit_test(test_a_token_body_never_goes_to_another_origin),
		cmocka_unit_test(test_never_https_to_http),
		cmocka_unit_test(test_bad_locations_and_too_many_hops),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The redaction of server text quoted in log lines (api/redact.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/redact.h"

/* A job payload as GitLab sends it, shortened; the secrets are distinctive. */
static const char payload[] =
    "{\"id\":1000,\"token\":\"jobTokenZq81x\",\"allow_git_fetch\":true,"
    "\"job_info\":{\"name\":\"build\",\"stage\":\"test\",\"project_id\":7},"
    "\"git_info\":{\"repo_url\":\"http://gitlab-ci-token:jobTokenZq81x@127.0.0.1:8080/g/p.git\","
    "\"ref\":\"main\",\"sha\":\"0123abcd\"},"
    "\"variables\":["
    "{\"key\":\"CI_JOB_TOKEN\",\"value\":\"jobTokenZq81x\",\"public\":false,\"masked\":true},"
    "{\"key\":\"PUBLIC_ONE\",\"value\":\"plainSight42\",\"public\":true,\"masked\":false},"
    "{\"key\":\"DEPLOY_KEY\",\"value\":\"hiddenVal77k\",\"public\":false,\"masked\":true},"
    "{\"key\":\"UNKNOWN\",\"value\":\"unsaidVal3q\",\"public\":false},"
    "{\"key\":\"PAT\",\"value\":\"glpat-patSecret9w\",\"public\":true,\"masked\":false}],"
    "\"credentials\":[{\"type\":\"registry\",\"url\":\"127.0.0.1:5000\","
    "\"username\":\"gitlab-ci-token\",\"password\":\"regPass55v\"}],"
    "\"steps\":[{\"name\":\"script\",\"script\":[\"echo hi\"]}]}";

static const char *const secrets[] = {
	"jobTokenZq81x", "hiddenVal77k", "unsaidVal3q", "patSecret9w", "regPass55v", NULL
};

/* No five bytes in a row of any secret are in s. */
static void
assert_no_secret(const char *s, const char *what)
{
	char piece[6];
	size_t k, i;

	for (k = 0; secrets[k] != NULL; k++) {
		for (i = 0; i + 5 <= strlen(secrets[k]); i++) {
			memcpy(piece, secrets[k] + i, 5);
			piece[5] = '\0';
			if (strstr(s, piece) != NULL)
				fail_msg("%s: \"%s\" of %s in: %s", what, piece, secrets[k], s);
		}
	}
}

static char *
redact_text(const char *s, size_t len, size_t max)
{
	struct buf b;

	buf_init(&b, BUF_UNLIMITED);
	redact_excerpt(&b, s, len, max);
	return buf_detach(&b, NULL);
}

static char *
redact(const char *s)
{
	return redact_text(s, strlen(s), SIZE_MAX);
}

static void
test_whole_payload(void **state)
{
	char *out = redact(payload);

	(void)state;
	assert_no_secret(out, "whole payload");
	/* What is not secret stays readable. */
	assert_non_null(strstr(out, "\"value\":\"plainSight42\""));
	assert_non_null(strstr(out, "\"key\":\"CI_JOB_TOKEN\""));
	assert_non_null(strstr(out, "\"token\":\"[REDACTED]\""));
	assert_non_null(strstr(out, "http://gitlab-ci-token:[REDACTED]@127.0.0.1:8080/g/p.git"));
	assert_non_null(strstr(out, "\"username\":\"gitlab-ci-token\""));
	assert_non_null(strstr(out, "\"value\":\"glpat-[REDACTED]\""));
	assert_non_null(strstr(out, "\"allow_git_fetch\":true"));
	free(out);
}

/* A payload cut at any byte, as a cut-short 201 is: nothing leaks. */
static void
test_payload_cut_anywhere(void **state)
{
	char what[32];
	size_t len;

	(void)state;
	for (len = 0; len <= strlen(payload); len++) {
		char *out = redact_text(payload, len, SIZE_MAX);

		snprintf(what, sizeof(what), "cut at %zu", len);
		assert_no_secret(out, what);
		free(out);
	}
}

/* The same payload as JSON in a string, as HTML, with escaped slashes. */
static void
test_payload_quoted_in_other_text(void **state)
{
	struct buf esc, html;
	const char *p;
	char *out;

	(void)state;
	buf_init(&esc, BUF_UNLIMITED);
	buf_init(&html, BUF_UNLIMITED);
	buf_puts(&esc, "{\"message\":\"bad request: ");
	buf_puts(&html, "<html><body><h1>502 Bad Gateway</h1><pre>");
	for (p = payload; *p != '\0'; p++) {
		if (*p == '"') {
			buf_puts(&esc, "\\\"");
			buf_puts(&html, "&quot;");
		} else if (*p == '/') {
			buf_puts(&esc, "\\/");
			buf_putc(&html, '/');
		} else {
			buf_putc(&esc, *p);
			buf_putc(&html, *p);
		}
	}
	buf_puts(&esc, "\"}");
	buf_puts(&html, "</pre></body></html>");

	out = redact(esc.ptr);
	assert_no_secret(out, "escaped in JSON");
	assert_non_null(strstr(out, "plainSight42"));
	free(out);
	out = redact(html.ptr);
	assert_no_secret(out, "HTML-escaped");
	assert_non_null(strstr(out, "plainSight42"));
	free(out);
	buf_release(&esc);
	buf_release(&html);
}

static void
test_headers_queries_and_prefixes(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "Job-Token: jobTokenZq81x\r\nHost: h", "Job-Token: [REDACTED]\\x0d\\nHost: h" },
		{ "PRIVATE-TOKEN:regPass55v", "PRIVATE-TOKEN:[REDACTED]" },
		{ "Authorization: Bearer regPass55v\n", "Authorization: [REDACTED]\\n" },
		{ "GET /a?private_token=regPass55v&x=1", "GET /a?private_token=[REDACTED]&x=1" },
		{ "/o/a.zip?X-Amz-Credential=AK%2F1&X-Amz-Signature=regPass55v",
		  "/o/a.zip?X-Amz-Credential=[REDACTED]&X-Amz-Signature=[REDACTED]" },
		{ "runner glrt-t1_patSecret9w is gone", "runner glrt-[REDACTED] is gone" },
		{ "cookie _gitlab_session=patSecret9w;", "cookie _gitlab_session=[REDACTED];" },
		{ "https://oauth2:patSecret9w@h/x and ssh://patSecret9w@h",
		  "https://oauth2:[REDACTED]@h/x and ssh://[REDACTED]@h" },
		{ "{'password': 'regPass55v'}", "{'password': '[REDACTED]'}" },
		{ "{\"runner_token\":\"patSecret9w\",\"token_expires_at\":null}",
		  "{\"runner_token\":\"[REDACTED]\",\"token_expires_at\":null}" },
		{ "{\"token\":null,\"password\":false}", "{\"token\":null,\"password\":false}" },
		{ "{\"message\":{\"token\":[\"is invalid\"]}}", "{\"message\":{\"token\":[\"is invalid\"]}}" },
		{ "{\"value\":\"hiddenVal77k\",\"masked\":\"false\"}",
		  "{\"value\":\"hiddenVal77k\",\"masked\":\"false\"}" },
		{ "{\"masked\":false,\"value\":\"hiddenVal77k\"}",
		  "{\"masked\":false,\"value\":\"[REDACTED]\"}" },
		{ "{\"value\":\"hiddenVal77k\",\"x\":{\"masked\":false}}",
		  "{\"value\":\"[REDACTED]\",\"x\":{\"masked\":false}}" },
		{ "{\"value\":\"a\\\"b regPass55v\",\"k\":1}", "{\"value\":\"[REDACTED]\",\"k\":1}" },
		{ "no secrets, 404 Not Found", "no secrets, 404 Not Found" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *out = redact(cases[i].in);

		if (strcmp(out, cases[i].out) != 0)
			fail_msg("case %zu: \"%s\" gave \"%s\", not \"%s\"", i, cases[i].in, out,
			    cases[i].out);
		free(out);
	}
}

static void
test_names(void **state)
{
	static const char *const secret[] = {
		"token", "Job-Token", "RUNNER_TOKEN", "private-token", "password",
		"db_password", "Authorization", "x-amz-signature", "client_secret", NULL
	};
	static const char *const plain[] = {
		"key", "tokens", "token_expires_at", "username", "name", "masked", "", NULL
	};
	size_t i;

	(void)state;
	for (i = 0; secret[i] != NULL; i++)
		assert_true(redact_name_is_secret(secret[i], strlen(secret[i])));
	for (i = 0; plain[i] != NULL; i++)
		assert_false(redact_name_is_secret(plain[i], strlen(plain[i])));
}

/* The cut is made after the redaction: a secret across it stays hidden. */
static void
test_excerpt_is_cut_after_redaction(void **state)
{
	struct buf b;
	char text[64];

	(void)state;
	snprintf(text, sizeof(text), "{\"token\":\"%s\"}", "jobTokenZq81x");
	buf_init(&b, BUF_UNLIMITED);
	redact_excerpt(&b, text, strlen(text), 14);
	assert_string_equal(b.ptr, "{\"token\":\"[REDACTED]... (25 bytes)");
	buf_reset(&b);
	redact_excerpt(&b, "a\tb\nc", 5, 512);
	assert_string_equal(b.ptr, "a\\x09b\\nc");
	buf_reset(&b);
	redact_excerpt(&b, "", 0, 512);
	assert_string_equal(b.ptr, "");
	buf_release(&b);
}

/* A copy keeps every byte but the secrets: JSON stays JSON. */
static void
test_copy_keeps_the_text(void **state)
{
	static const char in[] = "{\n \"message\": {\"token\": [\"glrt-patSecret9w is bad\"]},\n"
	    " \"password\": \"regPass55v\"\n}";
	size_t len;
	char *out = redact_copy(in, strlen(in), &len);

	(void)state;
	assert_string_equal(out, "{\n \"message\": {\"token\": [\"glrt-[REDACTED] is bad\"]},\n"
	    " \"password\": \"[REDACTED]\"\n}");
	assert_int_equal(len, strlen(out));
	free(out);
	out = redact_copy("", 0, &len);
	assert_string_equal(out, "");
	free(out);
}

/* Text made of nothing but names and separators, and one cut quote. */
static void
test_hostile_text(void **state)
{
	size_t n = 1 << 20, i;
	char *s = malloc(n + 1), *out;

	(void)state;
	assert_non_null(s);
	for (i = 0; i < n; i++)
		s[i] = "token:value=\"&quot;"[i % 19];
	s[n] = '\0';
	out = redact_text(s, n, 512);
	assert_non_null(strstr(out, "(1048576 bytes)"));
	free(out);
	free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_payload),
		cmocka_unit_test(test_payload_cut_anywhere),
		cmocka_unit_test(test_payload_quoted_in_other_text),
		cmocka_unit_test(test_headers_queries_and_prefixes),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_excerpt_is_cut_after_redaction),
		cmocka_unit_test(test_copy_keeps_the_text),
		cmocka_unit_test(test_hostile_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

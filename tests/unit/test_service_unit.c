/*
 * Unit tests for the unit text `runner install` writes: with the packaged
 * flags it is packaging/systemd/runner.service byte for byte; other flags
 * change exactly the ExecStart, condition and ReadWritePaths lines (plus
 * User= for --init-user); words are quoted as systemd splits them; paths
 * and names a unit cannot hold are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runner/commands.h"

#define PACKAGED	"packaging/systemd/runner.service"

static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *s;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	s = malloc((size_t)n + 1);
	assert_non_null(s);
	assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
	s[n] = '\0';
	fclose(f);
	return s;
}

/* The line of text that starts with key, without its newline (static buffer). */
static const char *
line_of(const char *text, const char *key)
{
	static char line[1024];
	const char *p = text, *eol;

	for (; *p != '\0'; p = eol + 1) {
		eol = strchr(p, '\n');
		assert_non_null(eol);
		if (strncmp(p, key, strlen(key)) == 0) {
			snprintf(line, sizeof(line), "%.*s", (int)(eol - p), p);
			return line;
		}
	}
	return NULL;
}

static void
test_packaged_flags_give_the_packaged_unit(void **state)
{
	struct service_unit u = {
		.binary = "/usr/bin/runner", .working_dir = "/home/gitlab-runner",
		.config = "/etc/gitlab-runner/config.toml", .user = "gitlab-runner",
	};
	char *want = slurp(PACKAGED), *cause = NULL, *got;

	(void)state;
	got = service_unit_text(&u, &cause);
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
	free(want);
}

static void
test_other_flags(void **state)
{
	struct service_unit u = {
		.binary = "/opt/ci tools/runner", .working_dir = "/srv/builds",
		.config = "/srv/ci/conf/config.toml", .init_user = "ci",
	};
	char *packaged = slurp(PACKAGED), *cause = NULL, *got;
	size_t got_lines = 0, packaged_lines = 0;
	const char *p;

	(void)state;
	got = service_unit_text(&u, &cause);
	assert_non_null(got);
	assert_string_equal(line_of(got, "ExecStart="), "ExecStart=\"/opt/ci tools/runner\" run "
	    "--working-directory /srv/builds --config /srv/ci/conf/config.toml");
	assert_string_equal(line_of(got, "User="), "User=ci");
	assert_string_equal(line_of(got, "ConditionFileIsExecutable="),
	    "ConditionFileIsExecutable=/opt/ci tools/runner");
	assert_string_equal(line_of(got, "ReadWritePaths="), "ReadWritePaths=-/srv/ci/conf");
	/* Everything else as packaged: one line more (User=), same settings. */
	for (p = got; *p; p++)
		got_lines += *p == '\n';
	for (p = packaged; *p; p++)
		packaged_lines += *p == '\n';
	assert_int_equal(got_lines, packaged_lines + 1);
	assert_string_equal(line_of(got, "KillSignal="), "KillSignal=SIGQUIT");
	assert_string_equal(line_of(got, "KillMode="), "KillMode=mixed");
	assert_string_equal(line_of(got, "Type="), "Type=notify");
	assert_null(line_of(packaged, "User="));
	free(got);

	/* install --syslog: the daemon logs to syslog too, under the unit's name. */
	u.syslog_name = "ci-runner";
	got = service_unit_text(&u, &cause);
	assert_non_null(got);
	assert_string_equal(line_of(got, "ExecStart="), "ExecStart=\"/opt/ci tools/runner\" run "
	    "--working-directory /srv/builds --config /srv/ci/conf/config.toml "
	    "--syslog --service ci-runner");
	free(got);
	free(packaged);
}

static void
check_quote(const char *word, const char *want)
{
	char *q = service_exec_quote(word);

	assert_string_equal(q, want);
	free(q);
}

static void
test_exec_quoting(void **state)
{
	(void)state;
	check_quote("/usr/bin/runner", "/usr/bin/runner");
	check_quote("/a b", "\"/a b\"");
	check_quote("", "\"\"");
	check_quote("/cost$HOME", "/cost$$HOME");
	check_quote("/50%n", "/50%%n");
	check_quote("a\"b\\c", "\"a\\\"b\\\\c\"");
	check_quote("it's", "\"it's\"");
	check_quote("x;y", "\"x;y\"");
	check_quote("/a b/$x%y", "\"/a b/$$x%%y\"");
}

static void
test_refused(void **state)
{
	struct service_unit u = {
		.binary = "/usr/bin/runner", .working_dir = "relative",
		.config = "/etc/gitlab-runner/config.toml", .user = "gitlab-runner",
	};
	char *cause = NULL;

	(void)state;
	assert_null(service_unit_text(&u, &cause));
	assert_non_null(strstr(cause, "relative"));
	free(cause);
	cause = NULL;
	u.working_dir = "/home/a\nExecStartPre=/bin/evil";
	assert_null(service_unit_text(&u, &cause));
	free(cause);
	cause = NULL;
	u.working_dir = "/home/gitlab-runner";
	u.user = "root\nUser=x";
	assert_null(service_unit_text(&u, &cause));
	assert_non_null(strstr(cause, "not a user name"));
	free(cause);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_packaged_flags_give_the_packaged_unit),
		cmocka_unit_test(test_other_flags),
		cmocka_unit_test(test_exec_quoting),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

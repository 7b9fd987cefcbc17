/* Commands as tables: the one option parser (lib/cli.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/cli.h"
#include "lib/strv.h"

struct t_opts {
	const char	*config;
	const char	*name;
	const char	*url;
	bool		 quiet;
	bool		 locked;
	int64_t		 limit;
	int64_t		 id;
	uint64_t	 timeout_ms;
	struct strv	 env;
	struct cli_given given;
};

#define TO(f)	offsetof(struct t_opts, f)

static const struct cli_option t_options[] = {
	CLI_OPT("config", 'c', CLI_STRING, "T_CONFIG_FILE", TO(config), "FILE", "config file"),
	CLI_OPT("name", 0, CLI_STRING, "T_RUNNER_NAME", TO(name), "NAME", "the runner's name"),
	CLI_OPT("description", 0, CLI_STRING, NULL, TO(name), "NAME", "the same as --name"),
	CLI_OPT("url", 'u', CLI_STRING, "T_CI_SERVER_URL", TO(url), "URL", "GitLab"),
	CLI_OPT("non-interactive", 'n', CLI_BOOL, "T_NON_INTERACTIVE", TO(quiet), NULL,
	    "ask nothing"),
	CLI_OPT("locked", 0, CLI_BOOL, "T_LOCKED", TO(locked), NULL, "lock it", .def = "true"),
	CLI_OPT("limit", 0, CLI_INT, "T_LIMIT", TO(limit), "N", "at most N jobs"),
	CLI_OPT("id", 'i', CLI_INT, NULL, TO(id), "ID", "the runner id", .min = 1,
	    .max = INT64_MAX, .what = "a runner id"),
	CLI_OPT("timeout", 0, CLI_DURATION, NULL, TO(timeout_ms), "DURATION", "how long",
	    .def = "1h"),
	CLI_OPT("env", 0, CLI_STRINGS, NULL, TO(env), "VAR=VALUE", "one variable"),
	CLI_OPT("syslog", 0, CLI_IGNORED_BOOL, NULL, 0, NULL, "gitlab-runner's"),
	CLI_OPT("service", 0, CLI_IGNORED_VALUE, NULL, 0, "NAME", "gitlab-runner's"),
	CLI_END,
};

static int
t_run(const struct cli_command *cmd, void *opts)
{
	(void)cmd;
	return ((struct t_opts *)opts)->quiet ? 7 : 0;
}

static const struct cli_command t_cmd = {
	.name = "tcmd",
	.summary = "A command for the tests",
	.usage = "runner tcmd [-c FILE]",
	.options = t_options,
	.opts_size = sizeof(struct t_opts),
	.given = offsetof(struct t_opts, given),
	.run = t_run,
};

static char err_text[4096];

/* Parse the NULL-terminated words (the command name first), stderr kept in err_text. */
static int
parse(struct t_opts *o, ...)
{
	char *argv[32], tmpl[] = "/tmp/test_cli_XXXXXX";
	va_list ap;
	int argc = 0, saved, fd, rc;
	ssize_t n;

	va_start(ap, o);
	while ((argv[argc] = va_arg(ap, char *)) != NULL)
		argc++;
	va_end(ap);
	memset(o, 0, sizeof(*o));
	fflush(stderr);
	fd = mkstemp(tmpl);
	assert_true(fd >= 0);
	unlink(tmpl);
	saved = dup(2);
	dup2(fd, 2);
	rc = cli_parse(&t_cmd, argc, argv, o);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, err_text, sizeof(err_text) - 1, 0);
	err_text[n > 0 ? n : 0] = '\0';
	close(fd);
	return rc;
}

/* The words are refused with this one line, then the usage. */
#define REFUSED(message, ...) do {					\
	struct t_opts o_;						\
									\
	assert_int_equal(parse(&o_, "tcmd", __VA_ARGS__, NULL), -1);	\
	assert_string_equal(err_text, "runner: tcmd: " message "\n"	\
	    "usage: runner tcmd [-c FILE]\n");				\
} while (0)

static void
clear_env(void)
{
	unsetenv("T_CONFIG_FILE");
	unsetenv("T_RUNNER_NAME");
	unsetenv("T_CI_SERVER_URL");
	unsetenv("T_NON_INTERACTIVE");
	unsetenv("T_LOCKED");
	unsetenv("T_LIMIT");
}

static void
test_forms_of_values(void **state)
{
	struct t_opts o;

	(void)state;
	clear_env();
	assert_int_equal(parse(&o, "tcmd", "--config", "a.toml", "--url=http://x", "--limit",
	    "-3", NULL), 0);
	assert_string_equal(o.config, "a.toml");
	assert_string_equal(o.url, "http://x");
	assert_true(o.limit == -3);
	assert_string_equal(err_text, "");
	/* Short forms: -x VALUE, -xVALUE, and bools clustered in front. */
	assert_int_equal(parse(&o, "tcmd", "-cb.toml", "-u", "http://y", NULL), 0);
	assert_string_equal(o.config, "b.toml");
	assert_string_equal(o.url, "http://y");
	assert_int_equal(parse(&o, "tcmd", "-nc", "c.toml", NULL), 0);
	assert_true(o.quiet);
	assert_string_equal(o.config, "c.toml");
	/* The next word is the value, even when it looks like a flag (as getopt). */
	assert_int_equal(parse(&o, "tcmd", "--url", "--limit", NULL), 0);
	assert_string_equal(o.url, "--limit");
	/* An empty value is a value. */
	assert_int_equal(parse(&o, "tcmd", "--url=", NULL), 0);
	assert_string_equal(o.url, "");
	/* The last one given wins; the repeated kind gathers them all. */
	assert_int_equal(parse(&o, "tcmd", "-c", "1", "-c", "2", "--env", "A=1", "--env=B=2",
	    NULL), 0);
	assert_string_equal(o.config, "2");
	assert_int_equal(o.env.n, 2);
	assert_string_equal(o.env.v[0], "A=1");
	assert_string_equal(o.env.v[1], "B=2");
	assert_null(o.env.v[2]);
	cli_release(&t_cmd, &o);
}

static void
test_bools_and_defaults(void **state)
{
	struct t_opts o;

	(void)state;
	clear_env();
	assert_int_equal(parse(&o, "tcmd", NULL), 0);
	assert_false(o.quiet);
	assert_true(o.locked);			/* its default */
	assert_true(o.timeout_ms == 3600000);	/* "1h" */
	assert_false(cli_given(&t_cmd, &o, "locked"));
	assert_int_equal(parse(&o, "tcmd", "--locked=false", "--non-interactive",
	    "--timeout", "90s", NULL), 0);
	assert_false(o.locked);
	assert_true(o.quiet);
	assert_true(o.timeout_ms == 90000);
	assert_true(cli_given(&t_cmd, &o, "locked"));
	assert_false(cli_given(&t_cmd, &o, "limit"));
	/* Go's strconv.ParseBool words. */
	assert_int_equal(parse(&o, "tcmd", "--locked=F", "--non-interactive=1", NULL), 0);
	assert_false(o.locked);
	assert_true(o.quiet);
	/* A bool does not take the next word: that is an argument. */
	REFUSED("unexpected argument 'false'", "--locked", "false");
}

static void
test_environment_fills_what_the_command_line_did_not(void **state)
{
	struct t_opts o;

	(void)state;
	clear_env();
	setenv("T_CI_SERVER_URL", "http://from-env", 1);
	setenv("T_LIMIT", "4", 1);
	setenv("T_LOCKED", "false", 1);
	setenv("T_CONFIG_FILE", "", 1);		/* empty: not set */
	assert_int_equal(parse(&o, "tcmd", NULL), 0);
	assert_string_equal(o.url, "http://from-env");
	assert_true(o.limit == 4);
	assert_false(o.locked);			/* the environment beats the default */
	assert_null(o.config);
	assert_true(cli_given(&t_cmd, &o, "url"));
	assert_false(cli_given(&t_cmd, &o, "config"));
	/* The command line wins. */
	assert_int_equal(parse(&o, "tcmd", "--url", "http://flag", "--limit=9", NULL), 0);
	assert_string_equal(o.url, "http://flag");
	assert_true(o.limit == 9);
	/* A field the command line set through another name takes no variable. */
	setenv("T_RUNNER_NAME", "env-name", 1);
	assert_int_equal(parse(&o, "tcmd", "--description", "flag-name", NULL), 0);
	assert_string_equal(o.name, "flag-name");
	assert_int_equal(parse(&o, "tcmd", NULL), 0);
	assert_string_equal(o.name, "env-name");
	/* A bad value names the variable. */
	setenv("T_LIMIT", "many", 1);
	assert_int_equal(parse(&o, "tcmd", NULL), -1);
	assert_string_equal(err_text, "runner: tcmd: $T_LIMIT: \"many\" is not a whole number\n"
	    "usage: runner tcmd [-c FILE]\n");
	clear_env();
}

static void
test_errors_are_one_line_and_the_usage(void **state)
{
	struct t_opts o;

	(void)state;
	clear_env();
	REFUSED("unknown flag '--frob'", "--frob");
	REFUSED("unknown flag '-x'", "-x");
	/* No abbreviations: gitlab-runner has none, and a new flag would break them. */
	REFUSED("unknown flag '--conf'", "--conf", "x");
	REFUSED("-c needs a value", "-c");
	REFUSED("--config needs a value", "--config");
	REFUSED("--limit: \"12x\" is not a whole number", "--limit", "12x");
	/* Go takes no blanks around a number; strtoll would skip them. */
	REFUSED("--limit: \" 12\" is not a whole number", "--limit", " 12");
	REFUSED("--id: \"0\" is not a runner id", "-i", "0");
	REFUSED("--timeout: \"soon\" is not a duration", "--timeout", "soon");
	assert_int_equal(parse(&o, "tcmd", "--timeout", "0s", NULL), -1);
	REFUSED("--locked: \"maybe\" is not true or false", "--locked=maybe");
	REFUSED("unexpected argument 'stray'", "stray");
	/* "--" ends the options: what follows is an argument. */
	REFUSED("unexpected argument '--url'", "--", "--url");
	assert_int_equal(parse(&o, "tcmd", "--", NULL), 0);
	/* The first error is the one told, as the words come. */
	assert_int_equal(parse(&o, "tcmd", "--frob", "--help", NULL), -1);
}

static void
test_ignored_options_are_accepted(void **state)
{
	struct t_opts o;

	(void)state;
	clear_env();
	assert_int_equal(parse(&o, "tcmd", "--syslog", "--service", "x", "--service=y",
	    NULL), 0);
	assert_string_equal(err_text, "");
}

static void
test_help_comes_from_the_table(void **state)
{
	struct t_opts o;
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int saved;

	(void)state;
	clear_env();
	f = open_memstream(&text, &len);
	cli_help(&t_cmd, f);
	fclose(f);
	assert_non_null(strstr(text, "usage: runner tcmd [-c FILE]\n\n"
	    "A command for the tests\n\nOptions:\n"));
	assert_non_null(strstr(text, "\n  -c, --config FILE             config file "
	    "[$T_CONFIG_FILE]\n"));
	assert_non_null(strstr(text, "\n      --locked                  lock it "
	    "(default: true) [$T_LOCKED]\n"));
	assert_non_null(strstr(text, "\n  -h, --help                    show this help\n"));
	free(text);
	/* --help and -h print it and say so; nothing goes to stderr. */
	fflush(stdout);
	saved = dup(1);
	assert_true(freopen("/dev/null", "w", stdout) != NULL);
	assert_int_equal(parse(&o, "tcmd", "--help", NULL), 1);
	assert_int_equal(parse(&o, "tcmd", "-nh", NULL), 1);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	assert_string_equal(err_text, "");
}

static void
test_run_maps_the_outcome_to_exit_codes(void **state)
{
	char *bad[] = { "tcmd", "--frob", NULL }, *ok[] = { "tcmd", "-n", NULL };
	int saved = dup(2), fd = open("/dev/null", O_WRONLY);

	(void)state;
	clear_env();
	fflush(stderr);
	dup2(fd, 2);
	assert_int_equal(cli_run(&t_cmd, 2, bad), 2);
	dup2(saved, 2);
	close(saved);
	close(fd);
	assert_int_equal(cli_run(&t_cmd, 2, ok), 7);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forms_of_values),
		cmocka_unit_test(test_bools_and_defaults),
		cmocka_unit_test(test_environment_fills_what_the_command_line_did_not),
		cmocka_unit_test(test_errors_are_one_line_and_the_usage),
		cmocka_unit_test(test_ignored_options_are_accepted),
		cmocka_unit_test(test_help_comes_from_the_table),
		cmocka_unit_test(test_run_maps_the_outcome_to_exit_codes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* config.toml: reading, defaults, problems, and saving (runner/config.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/log.h"
#include "lib/xmalloc.h"
#include "runner/config.h"

struct fixture {
	char	dir[64];
	char	*path;
};

static int
setup(void **state)
{
	struct fixture *f = xcalloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_config.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->path = xasprintf("%s/config.toml", f->dir);
	/* Warnings would clutter the test output; they are tested by pytest. */
	log_set_level(LOG_LEVEL_ERROR);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	char *cmd = xasprintf("rm -rf '%s'", f->dir);

	assert_int_equal(system(cmd), 0);
	free(cmd);
	free(f->path);
	free(f);
	return 0;
}

static void
write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	fputs(text, fp);
	assert_int_equal(fclose(fp), 0);
}

static char *
read_text(const char *path)
{
	struct buf b;
	char chunk[4096];
	size_t n;
	FILE *fp = fopen(path, "r");

	assert_non_null(fp);
	buf_init(&b, BUF_UNLIMITED);
	while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0)
		buf_append(&b, chunk, n);
	fclose(fp);
	return buf_detach(&b, NULL);
}

static void
load_ok(struct fixture *f, const char *text, struct config *cfg)
{
	char *cause = NULL;

	write_file(f->path, text);
	if (config_load(cfg, f->path, 0, &cause) != 0)
		fail_msg("config_load: %s", cause);
}

static char *
load_fails(struct fixture *f, const char *text)
{
	struct config cfg;
	char *cause = NULL;

	write_file(f->path, text);
	assert_int_equal(config_load(&cfg, f->path, 0, &cause), -1);
	assert_non_null(cause);
	assert_null(cfg.doc);
	return cause;
}

static void
test_defaults(void **state)
{
	struct fixture *f = *state;
	struct config cfg;
	struct runner_config *rc;

	load_ok(f, "[[runners]]\nurl = \"https://gitlab.example.com\"\n"
	    "token = \"glrt-abc\"\nexecutor = \"shell\"\n", &cfg);
	assert_true(cfg.exists);
	/* gitlab-runner's NewConfig(): no key means 1 (an explicit 0 is refused by run). */
	assert_int_equal(cfg.concurrent, 1);
	assert_int_equal(cfg.check_interval, 3);
	assert_int_equal(cfg.shutdown_timeout, 30);
	assert_int_equal(cfg.connection_max_age_ms, 15 * 60 * 1000);
	assert_int_equal(cfg.session_timeout, 1800);
	assert_string_equal(cfg.log_level, "");
	assert_string_equal(cfg.listen_address, "");
	assert_int_equal(cfg.n_runners, 1);
	rc = &cfg.runners[0];
	assert_null(rc->problem);
	assert_int_equal(rc->line, 1);
	assert_string_equal(rc->name, "");
	assert_string_equal(rc->shell, "bash");
	assert_string_equal(rc->builds_dir, "");
	assert_string_equal(rc->cache.type, "");
	assert_string_equal(rc->custom.run_exec, "");
	assert_int_equal(rc->output_limit, 4096);
	assert_int_equal(rc->request_concurrency, 1);
	assert_int_equal(rc->unhealthy_requests_limit, 3);
	assert_int_equal(rc->unhealthy_interval_ms, 3600 * 1000);
	assert_int_equal(rc->job_status_final_update_retry_limit, 10);
	assert_int_equal(rc->strict_check_interval, -1);
	assert_int_equal(rc->custom_build_dir_enabled, -1);
	assert_int_equal(rc->prepare_timeout_ms, -1);
	assert_int_equal(rc->custom.graceful_kill_timeout, 600);
	assert_false(rc->token_obtained_at.set);
	assert_true(config_feature_flag(rc, "FF_TIMESTAMPS"));
	assert_false(config_feature_flag(rc, "FF_SCRIPT_SECTIONS"));
	assert_false(config_feature_flag(rc, "FF_NO_SUCH_FLAG"));
	config_release(&cfg);
}

static void
test_values_are_read(void **state)
{
	struct fixture *f = *state;
	struct config cfg;
	struct runner_config *rc;

	load_ok(f,
	    "concurrent = 8\ncheck_interval = 10\nlog_level = \"warn\"\n"
	    "connection_max_age = \"1m30s\"\nshutdown_timeout = 5\n"
	    "[labels]\nzone = \"eu\"\n"
	    "[session_server]\nsession_timeout = 60\n"
	    "[[runners]]\nname = \"one\"\nurl = \"https://g/\"\nid = 7\n"
	    "token = \"glrt-x\"\ntoken_obtained_at = 2026-08-21T10:00:00Z\n"
	    "token_expires_at = 0001-01-01T00:00:00Z\nexecutor = \"shell\"\n"
	    "shell = \"sh\"\nlimit = 2\nrequest_concurrency = 3\n"
	    "environment = [\"A=1\", \"B=two words\"]\n"
	    "unhealthy_interval = 5000000000\nprepare_timeout = \"2m\"\n"
	    "strict_check_interval = true\n"
	    "[runners.custom_build_dir]\nenabled = true\n"
	    "[runners.feature_flags]\nFF_TIMESTAMPS = false\n"
	    "[runners.cache]\nType = \"s3\"\nShared = true\n"
	    "[runners.custom]\nrun_exec = \"/bin/run\"\nrun_args = [\"-v\", \"x\"]\n"
	    "cleanup_exec_timeout = 9\n", &cfg);
	assert_int_equal(cfg.concurrent, 8);
	assert_int_equal(cfg.check_interval, 10);
	assert_string_equal(cfg.log_level, "warn");
	assert_int_equal(cfg.connection_max_age_ms, 90 * 1000);
	assert_int_equal(cfg.shutdown_timeout, 5);
	assert_int_equal(cfg.n_labels, 1);
	assert_string_equal(cfg.labels[0].name, "zone");
	assert_string_equal(cfg.labels[0].value, "eu");
	assert_int_equal(cfg.session_timeout, 60);
	rc = &cfg.runners[0];
	assert_null(rc->problem);
	assert_int_equal(rc->line, 10);
	assert_string_equal(rc->name, "one");
	assert_int_equal(rc->id, 7);
	assert_true(rc->token_obtained_at.set);
	assert_int_equal(rc->token_obtained_at.at.year, 2026);
	assert_int_equal(rc->token_obtained_at.at.hour, 10);
	assert_true(rc->token_expires_at.set);
	assert_int_equal(rc->token_expires_at.at.year, 1);
	assert_string_equal(rc->shell, "sh");
	assert_int_equal(rc->limit, 2);
	assert_int_equal(rc->request_concurrency, 3);
	assert_int_equal(rc->environment.n, 2);
	assert_string_equal(rc->environment.v[1], "B=two words");
	assert_null(rc->environment.v[2]);
	assert_int_equal(rc->unhealthy_interval_ms, 5000);
	assert_int_equal(rc->prepare_timeout_ms, 120000);
	assert_int_equal(rc->strict_check_interval, 1);
	assert_int_equal(rc->custom_build_dir_enabled, 1);
	assert_false(config_feature_flag(rc, "FF_TIMESTAMPS"));
	assert_string_equal(rc->cache.type, "s3");
	assert_true(rc->cache.shared);
	assert_string_equal(rc->custom.run_exec, "/bin/run");
	assert_int_equal(rc->custom.run_args.n, 2);
	assert_string_equal(rc->custom.run_args.v[0], "-v");
	assert_int_equal(rc->custom.cleanup_exec_timeout, 9);
	config_release(&cfg);
}

static void
test_type_errors_fail_the_load(void **state)
{
	struct fixture *f = *state;
	char *cause, *want;

	cause = load_fails(f, "concurrent = \"4\"\n");
	want = xasprintf("%s:1:14: concurrent must be an integer, not a string", f->path);
	assert_string_equal(cause, want);
	free(want);
	free(cause);

	cause = load_fails(f, "[[runners]]\nenvironment = [\"A=1\", 2]\n");
	assert_non_null(strstr(cause, ":2:23: runners[0].environment[1] must be a string, not an integer"));
	free(cause);

	cause = load_fails(f, "[[runners]]\n[runners.feature_flags]\nFF_TIMESTAMPS = \"yes\"\n");
	assert_non_null(strstr(cause, "runners[0].feature_flags.FF_TIMESTAMPS must be a boolean"));
	free(cause);

	cause = load_fails(f, "connection_max_age = \"soon\"\n");
	assert_non_null(strstr(cause, "connection_max_age: \"soon\" is not a duration"));
	free(cause);

	cause = load_fails(f, "[[runners]]\ntoken_obtained_at = \"yesterday\"\n");
	assert_non_null(strstr(cause, "runners[0].token_obtained_at must be a date-time, not a string"));
	free(cause);

	cause = load_fails(f, "[[runners]]\n[runners.docker]\n[[runners]]\ndocker = 1\n");
	assert_non_null(strstr(cause, "runners[1].docker must be a table, not an integer"));
	free(cause);

	cause = load_fails(f, "log_level = \"loud\"\n");
	assert_non_null(strstr(cause, ":1:13: log_level \"loud\" is not one of"));
	free(cause);

	cause = load_fails(f, "runners = 3\n");
	assert_non_null(strstr(cause, "runners must be an array, not an integer"));
	free(cause);

	cause = load_fails(f, "[runners]\nname = \"x\"\n");
	assert_non_null(strstr(cause, ":1:1: [runners] is a table"));
	free(cause);

	cause = load_fails(f, "[[runners]]\nname = \"a\\u0000b\"\n");
	assert_non_null(strstr(cause, "runners[0].name must not contain a NUL character"));
	free(cause);
}

static void
test_syntax_error_names_line_and_column(void **state)
{
	struct fixture *f = *state;
	char *cause = load_fails(f, "a = 1\nb = [1,\n");

	assert_non_null(strstr(cause, f->path));
	assert_non_null(strstr(cause, ":2:5: unterminated array"));
	free(cause);
}

static void
test_entry_problems_do_not_fail_the_load(void **state)
{
	struct fixture *f = *state;
	struct config cfg;

	load_ok(f,
	    "[[runners]]\nurl = \"ftp://x\"\ntoken = \"t\"\nexecutor = \"shell\"\n"
	    "[[runners]]\nurl = \"https://x\"\ntoken = \"t\"\nexecutor = \"kubernetes\"\n"
	    "[[runners]]\nurl = \"https://x\"\ntoken = \"t\"\nexecutor = \"shell\"\nlimit = -2\n"
	    "[[runners]]\nurl = \"https://x\"\nexecutor = \"shell\"\n"
	    "[[runners]]\nurl = \"https://\"\ntoken = \"t\"\nexecutor = \"shell\"\n"
	    "[[runners]]\nurl = \"https://x\"\ntoken = \"t\"\n"
	    "[[runners]]\nurl = \"HTTPS://x\"\ntoken = \"t\"\nexecutor = \"shell\"\nshell = \"sh\"\n",
	    &cfg);
	assert_int_equal(cfg.n_runners, 7);
	assert_string_equal(cfg.runners[0].problem,
	    "url is not an http:// or https:// URL (url = \"ftp://x\")");
	assert_string_equal(cfg.runners[1].problem,
	    "executor \"kubernetes\" is not supported by this build (supported: shell, docker)");
	assert_string_equal(cfg.runners[2].problem,
	    "limit is -2; it must be 0 (no limit) or more");
	assert_string_equal(cfg.runners[3].problem,
	    "token is not set; register the runner or set token");
	assert_string_equal(cfg.runners[4].problem, "url has no host (url = \"https://\")");
	assert_string_equal(cfg.runners[5].problem, "executor is not set");
	assert_null(cfg.runners[6].problem);
	config_release(&cfg);
}

static void
test_env_expansion(void **state)
{
	struct fixture *f = *state;
	struct config cfg;
	char *s;

	(void)f;
	setenv("TEST_CFG_HOST", "gitlab.local", 1);
	setenv("TEST_CFG_TOKEN", "glrt-from-env", 1);
	unsetenv("TEST_CFG_UNSET");
	s = config_expand_env("https://$TEST_CFG_HOST/${TEST_CFG_HOST}/$TEST_CFG_UNSET/$/$1x/${TEST_CFG_UNSET}end");
	assert_string_equal(s, "https://gitlab.local/gitlab.local//$/$1x/end");
	free(s);

	load_ok(f, "[[runners]]\nurl = \"https://${TEST_CFG_HOST}\"\n"
	    "token = \"$TEST_CFG_TOKEN\"\nexecutor = \"shell\"\n", &cfg);
	assert_string_equal(cfg.runners[0].url, "https://gitlab.local");
	assert_string_equal(cfg.runners[0].token, "glrt-from-env");
	assert_null(cfg.runners[0].problem);
	config_release(&cfg);
}

static void
test_missing_file(void **state)
{
	struct fixture *f = *state;
	struct config cfg;
	char *cause = NULL;

	assert_int_equal(config_load(&cfg, f->path, 0, &cause), -1);
	assert_non_null(strstr(cause, "cannot read: No such file or directory"));
	free(cause);
	assert_int_equal(config_load(&cfg, f->path, CONFIG_ALLOW_MISSING, &cause), 0);
	assert_false(cfg.exists);
	assert_int_equal(cfg.n_runners, 0);
	assert_non_null(cfg.doc);
	config_release(&cfg);
}

static void
test_default_path(void **state)
{
	char *p;

	(void)state;
	setenv("CONFIG_FILE", "/somewhere/config.toml", 1);
	p = config_default_path();
	assert_string_equal(p, "/somewhere/config.toml");
	free(p);
	unsetenv("CONFIG_FILE");
	p = config_default_path();
	if (geteuid() == 0)
		assert_string_equal(p, "/etc/gitlab-runner/config.toml");
	else
		assert_non_null(strstr(p, "/.gitlab-runner/config.toml"));
	free(p);
}

static const char keep_everything[] =
    "concurrent = 2\n"
    "# a comment\n"
    "unknown_global = [1, 2.5, \"x\"]\n"
    "[session_server]\n  session_timeout = 1800\n"
    "[[runners]]\n  name = \"a\"\n  url = \"https://x\"\n  token = \"glrt-secret-token\"\n"
    "  token_obtained_at = 2026-08-21T10:00:00.123Z\n"
    "  token_expires_at = 0001-01-01T00:00:00Z\n  executor = \"shell\"\n"
    "  buids_dir = \"/typo\"\n"
    "  [runners.docker]\n    image = \"ruby:3\"\n    volumes = [\"/cache\"]\n"
    "    [[runners.docker.services]]\n      name = \"postgres\"\n"
    "  [runners.cache]\n    [runners.cache.s3]\n    [runners.cache.gcs]\n"
    "[[runners]]\n  name = \"b\"\n  url = \"https://y\"\n  token = \"t2\"\n"
    "  executor = \"shell\"\n"
    "[mystery.table]\n  answer = 42\n";

static void
test_save_keeps_everything(void **state)
{
	struct fixture *f = *state;
	struct config cfg, again;
	struct stat st;
	char *cause = NULL, *text;

	load_ok(f, keep_everything, &cfg);
	assert_int_equal(chmod(f->path, 0644), 0);
	assert_int_equal(config_save(&cfg, &cause), 0);
	assert_int_equal(stat(f->path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	assert_int_equal(config_load(&again, f->path, 0, &cause), 0);
	assert_true(toml_equal(cfg.doc, again.doc));
	assert_int_equal(again.n_runners, 2);
	text = read_text(f->path);
	assert_non_null(strstr(text, "  buids_dir = \"/typo\"\n"));
	assert_non_null(strstr(text, "\n  [mystery.table]\n    answer = 42\n"));
	assert_non_null(strstr(text, "    [[runners.docker.services]]\n      name = \"postgres\"\n"));
	assert_non_null(strstr(text, "  token_obtained_at = 2026-08-21T10:00:00.123Z\n"));
	assert_non_null(strstr(text, "    [runners.cache.gcs]\n"));
	free(text);
	config_release(&again);
	config_release(&cfg);
}

/* Names in dir other than config.toml: temporary files left behind. */
static int
stray_files(const char *dir)
{
	struct dirent *de;
	DIR *d = opendir(dir);
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
		    strcmp(de->d_name, "config.toml") != 0)
			n++;
	closedir(d);
	return n;
}

/*
 * A write that fails half-way (the file size limit stands in for a full
 * disk) must leave the old file as it was and no temporary file behind.
 */
static void
test_failed_save_leaves_old_file(void **state)
{
	struct fixture *f = *state;
	struct config cfg;
	char *before, *after, *cause = NULL;
	int status;
	pid_t pid;

	load_ok(f, keep_everything, &cfg);
	before = read_text(f->path);
	pid = fork();
	assert_true(pid != -1);
	if (pid == 0) {
		struct rlimit rl = { 100, 100 };

		signal(SIGXFSZ, SIG_IGN);
		setrlimit(RLIMIT_FSIZE, &rl);
		if (config_save(&cfg, &cause) == 0)
			_exit(1);
		_exit(strstr(cause, "File too large") != NULL ? 0 : 2);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	after = read_text(f->path);
	assert_string_equal(before, after);
	assert_int_equal(stray_files(f->dir), 0);
	free(before);
	free(after);
	config_release(&cfg);
}

static void
test_unwritable_value_leaves_old_file(void **state)
{
	struct fixture *f = *state;
	struct config cfg;
	char *before, *after, *cause = NULL;

	load_ok(f, keep_everything, &cfg);
	before = read_text(f->path);
	toml_table_set(cfg.runners[0].table, "name", 4,
	    toml_new_string("bad\xff\xfe", 5));
	assert_int_equal(config_save(&cfg, &cause), -1);
	assert_non_null(strstr(cause, "not valid UTF-8"));
	free(cause);
	after = read_text(f->path);
	assert_string_equal(before, after);
	assert_int_equal(stray_files(f->dir), 0);
	free(before);
	free(after);
	config_release(&cfg);
}

static void
test_save_creates_directory_and_file(void **state)
{
	struct fixture *f = *state;
	struct config cfg, again;
	struct stat st;
	char *cause = NULL, *path, *dir;

	path = xasprintf("%s/new/deeper/config.toml", f->dir);
	assert_int_equal(config_load(&cfg, path, CONFIG_ALLOW_MISSING, &cause), 0);
	toml_table_set(cfg.doc, "concurrent", 10, toml_new_integer(1));
	assert_int_equal(config_save(&cfg, &cause), 0);
	dir = config_dir(&cfg);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(config_load(&again, path, 0, &cause), 0);
	assert_int_equal(again.concurrent, 1);
	config_release(&again);
	config_release(&cfg);
	free(dir);
	free(path);
}

static void
test_save_through_symlink_updates_target(void **state)
{
	struct fixture *f = *state;
	struct config cfg;
	struct stat st;
	char *cause = NULL, *real, *text;

	real = xasprintf("%s/real.toml", f->dir);
	write_file(real, "concurrent = 1\n");
	assert_int_equal(symlink(real, f->path), 0);
	assert_int_equal(config_load(&cfg, f->path, 0, &cause), 0);
	toml_table_set(cfg.doc, "concurrent", 10, toml_new_integer(5));
	assert_int_equal(config_save(&cfg, &cause), 0);
	assert_int_equal(lstat(f->path, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	text = read_text(real);
	assert_string_equal(text, "concurrent = 5\n");
	free(text);
	free(real);
	config_release(&cfg);
}

static void
test_remote_cache_type_is_named(void **state)
{
	struct fixture *f = *state;
	struct config cfg;
	char *why;

	load_ok(f, "[[runners]]\nname = \"a\"\nurl = \"https://gitlab.example.com\"\n"
	    "token = \"glrt-x\"\nexecutor = \"shell\"\n[runners.cache]\nType = \"gcs\"\n"
	    "[[runners]]\nname = \"b\"\nurl = \"https://gitlab.example.com\"\n"
	    "token = \"glrt-y\"\nexecutor = \"shell\"\n", &cfg);
	assert_int_equal(cfg.n_runners, 2);
	why = config_cache_unsupported(&cfg.runners[0]);
	assert_string_equal(why, "cache Type \"gcs\": not supported by this build (no remote "
	    "cache: caches stay on this machine)");
	free(why);
	assert_null(config_cache_unsupported(&cfg.runners[1]));
	/* The entry runs all the same. */
	assert_null(cfg.runners[0].problem);
	config_release(&cfg);
}


/* [runners.docker] with gitlab-runner's keys and shapes (common/config.go DockerConfig). */
static void
test_docker_section(void **state)
{
	struct fixture *f = *state;
	const struct docker_settings *d;
	struct config cfg;
	char *cause;

	load_ok(f,
	    "[[runners]]\nurl = \"https://x\"\ntoken = \"t\"\nexecutor = \"docker\"\n"
	    "[runners.docker]\n"
	    "host = \"unix:///run/d.sock\"\nimage = \"alpine:3\"\nprivileged = true\n"
	    "pull_policy = \"if-not-present\"\n"
	    "allowed_pull_policies = [\"always\", \"never\"]\n"
	    "volumes = [\"/cache\", \"/h:/c:ro\"]\nshm_size = 300000\n"
	    "services_limit = 2\nservices_privileged = false\nwait_for_services_timeout = -1\n"
	    "memory = \"128m\"\ncpus = \"1.5\"\nnetwork_mode = \"host\"\n"
	    "tmpfs = { \"/scratch\" = \"rw,size=64m\" }\n"
	    "service_gpus = \"all\"\n"
	    "[runners.docker.sysctls]\n\"net.ipv4.ip_forward\" = \"1\"\n"
	    "[[runners.docker.services]]\nname = \"redis:7\"\nalias = \"cache, kv\"\n"
	    "command = [\"redis-server\", \"--save\", \"\"]\nenvironment = [\"A=1\"]\n"
	    "[[runners.docker.services]]\nname = \"postgres\"\nentrypoint = [\"/e\"]\n",
	    &cfg);
	assert_int_equal(cfg.n_runners, 1);
	assert_null(cfg.runners[0].problem);
	d = &cfg.runners[0].docker;
	assert_string_equal(d->host, "unix:///run/d.sock");
	assert_string_equal(d->image, "alpine:3");
	assert_true(d->privileged);
	assert_int_equal(d->pull_policy.n, 1);
	assert_string_equal(d->pull_policy.v[0], "if-not-present");
	assert_int_equal(d->allowed_pull_policies.n, 2);
	assert_string_equal(d->allowed_pull_policies.v[1], "never");
	assert_int_equal(d->volumes.n, 2);
	assert_int_equal(d->shm_size, 300000);
	assert_int_equal(d->services_limit, 2);
	assert_int_equal(d->services_privileged, 0);
	assert_int_equal(d->wait_for_services_timeout, -1);
	assert_string_equal(d->memory, "128m");
	assert_int_equal(d->tmpfs.n, 1);
	assert_string_equal(d->tmpfs.v[0], "/scratch=rw,size=64m");
	assert_string_equal(d->sysctls.v[0], "net.ipv4.ip_forward=1");
	assert_int_equal(d->n_services, 2);
	assert_string_equal(d->services[0].name, "redis:7");
	assert_string_equal(d->services[0].alias, "cache, kv");
	assert_int_equal(d->services[0].command.n, 3);
	assert_string_equal(d->services[0].command.v[2], "");
	assert_string_equal(d->services[0].environment.v[0], "A=1");
	assert_null(d->services[1].alias);
	assert_string_equal(d->services[1].entrypoint.v[0], "/e");
	config_release(&cfg);

	/* Unset: gitlab-runner's defaults. */
	load_ok(f, "[[runners]]\nurl = \"https://x\"\ntoken = \"t\"\nexecutor = \"docker\"\n", &cfg);
	d = &cfg.runners[0].docker;
	assert_int_equal(d->services_limit, -1);
	assert_int_equal(d->services_privileged, -1);
	assert_int_equal(d->pull_policy.n, 0);
	assert_int_equal(d->n_services, 0);
	config_release(&cfg);

	cause = load_fails(f, "[[runners]]\n[runners.docker]\npull_policy = 3\n");
	assert_non_null(strstr(cause, "runners[0].docker.pull_policy must be a string or an "
	    "array of strings, not an integer"));
	free(cause);
	cause = load_fails(f, "[[runners]]\n[runners.docker]\nsysctls = { a = 1 }\n");
	assert_non_null(strstr(cause, "runners[0].docker.sysctls.a must be a string"));
	free(cause);
	cause = load_fails(f, "[[runners]]\n[[runners.docker.services]]\nalias = \"x\"\n");
	assert_non_null(strstr(cause, "runners[0].docker.services[0] has no name"));
	free(cause);
	cause = load_fails(f, "[[runners]]\n[runners.docker]\nservices = [\"redis\"]\n");
	assert_non_null(strstr(cause, "runners[0].docker.services[0] must be a table"));
	free(cause);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_values_are_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_type_errors_fail_the_load, setup, teardown),
		cmocka_unit_test_setup_teardown(test_syntax_error_names_line_and_column, setup, teardown),
		cmocka_unit_test_setup_teardown(test_entry_problems_do_not_fail_the_load, setup, teardown),
		cmocka_unit_test_setup_teardown(test_env_expansion, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_file, setup, teardown),
		cmocka_unit_test(test_default_path),
		cmocka_unit_test_setup_teardown(test_save_keeps_everything, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_save_leaves_old_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unwritable_value_leaves_old_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_save_creates_directory_and_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_save_through_symlink_updates_target, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remote_cache_type_is_named, setup, teardown),
		cmocka_unit_test_setup_teardown(test_docker_section, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

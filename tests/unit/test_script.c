/*
 * Unit tests for the stage script generator.  Text is compared byte for
 * byte with golden files (tests/unit/golden/script_<shell>_<stage>.sh;
 * UPDATE_GOLDEN=1 rewrites them so a change shows up as a reviewable
 * diff).  Behaviour is checked by running the scripts: each one is fed on
 * stdin to /bin/bash and to /bin/sh, as the shell executor does, and the
 * test looks at what it wrote and at its exit status.  Values and results
 * travel through files, not through the log lines, so what is compared is
 * exactly the bytes a variable held.  git runs against a bare repository
 * made here, with HOME and the system config out of the way.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/buf.h"
#include "lib/xmalloc.h"
#include "runner/script.h"

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))
#define GOLDEN_DIR	"tests/unit/golden"

static const char *const shells[] = { "bash", "sh" };

static char	*root;		/* mkdtemp: everything a test writes */

/* Helpers. */

static char *
read_file(const char *path, size_t *lenp)
{
	struct buf b;
	char tmp[4096];
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY)) == -1)
		return (NULL);
	buf_init(&b, BUF_UNLIMITED);
	while ((n = read(fd, tmp, sizeof(tmp))) > 0)
		buf_append(&b, tmp, (size_t)n);
	close(fd);
	return (buf_detach(&b, lenp));
}

static void
write_file(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static int
exists(const char *path)
{
	struct stat st;

	return (lstat(path, &st) == 0);
}

/* Whether dir/name exists. */
static int
exists_in(const char *dir, const char *name)
{
	char *p = xasprintf("%s/%s", dir, name);
	int yes = exists(p);

	free(p);
	return yes;
}

/* Runs text with /bin/<shell> reading it on stdin in cwd; the exit status. */
static int
run_shell(const char *shell, const char *text, const char *cwd)
{
	char *path, *bin;
	pid_t pid;
	int status, fd;

	path = xasprintf("%s/script.in", root);
	write_file(path, text, strlen(text));
	bin = xasprintf("/bin/%s", shell);
	pid = fork();
	assert_true(pid != -1);
	if (pid == 0) {
		if ((fd = open(path, O_RDONLY)) == -1 || dup2(fd, 0) == -1 ||
		    chdir(cwd) == -1)
			_exit(127);
		/* The log lines are not what is checked: keep them quiet. */
		if ((fd = open("/dev/null", O_WRONLY)) == -1 || dup2(fd, 1) == -1)
			_exit(127);
		if (getenv("SCRIPT_TEST_VERBOSE") == NULL && dup2(fd, 2) == -1)
			_exit(127);
		execl(bin, shell, (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	free(path);
	free(bin);
	assert_true(WIFEXITED(status));
	return (WEXITSTATUS(status));
}

static int
run_stage(const struct script_job *j, enum script_stage st, const char *cwd)
{
	char *s = script_stage(j, st);
	int rc;

	assert_non_null(s);
	rc = run_shell(j->shell, s, cwd);
	free(s);
	return (rc);
}

static char *
cmd_output(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Output of a helper shell command, trailing newline dropped. */
static char *
cmd_output(const char *fmt, ...)
{
	va_list ap;
	char *cmd, *line = NULL;
	size_t cap = 0;
	ssize_t n;
	FILE *p;

	va_start(ap, fmt);
	assert_true(vasprintf(&cmd, fmt, ap) != -1);
	va_end(ap);
	p = popen(cmd, "r");
	assert_non_null(p);
	n = getline(&line, &cap, p);
	assert_int_equal(pclose(p), 0);
	free(cmd);
	if (n <= 0) {
		free(line);
		return (xstrdup(""));
	}
	if (line[n - 1] == '\n')
		line[n - 1] = '\0';
	return (line);
}

/* The checkout in dir is at sha. */
static void
assert_head(const char *dir, const char *sha)
{
	char *head = cmd_output("git -C '%s' rev-parse HEAD", dir);

	assert_string_equal(head, sha);
	free(head);
}

static void
sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
sh(const char *fmt, ...)
{
	va_list ap;
	char *cmd;

	va_start(ap, fmt);
	assert_true(vasprintf(&cmd, fmt, ap) != -1);
	va_end(ap);
	assert_int_equal(system(cmd), 0);
	free(cmd);
}

static int
setup_root(void **state)
{
	char tmpl[] = "/tmp/test_script.XXXXXX";

	(void)state;
	if (mkdtemp(tmpl) == NULL)
		return (-1);
	root = xstrdup(tmpl);
	/* git in the scripts and in the helpers sees no user or system config. */
	setenv("HOME", root, 1);
	setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
	setenv("GIT_AUTHOR_NAME", "t", 1);
	setenv("GIT_AUTHOR_EMAIL", "t@example.com", 1);
	setenv("GIT_COMMITTER_NAME", "t", 1);
	setenv("GIT_COMMITTER_EMAIL", "t@example.com", 1);
	return (0);
}

static int
teardown_root(void **state)
{
	char *cmd;

	(void)state;
	cmd = xasprintf("rm -rf '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", root);
	free(cmd);
	free(root);
	return (0);
}

/* A fresh directory under root for one run: root/<name>. */
static char *
subdir(const char *name)
{
	char *d = xasprintf("%s/%s", root, name);

	sh("rm -rf '%s' && mkdir -p '%s'", d, d);
	return (d);
}

/* The fixed job of the golden files. */

static const char *const golden_refspecs[] = {
	"+refs/heads/main:refs/remotes/origin/main",
	"+refs/tags/*:refs/tags/*",
};
static const char *const golden_pre[] = { "echo pre 'hook'" };
static const char *const golden_post[] = { "echo post" };
static const char *const golden_cmds[] = {
	"echo \"hello $CI_JOB_ID\"",
	"if true; then\n  echo multi\nfi",
	"",
	"printf '%s\\n' 'it''s' `id -u` $(pwd)",
};
static const struct script_var golden_vars[] = {
	{ "CI_JOB_ID", "42", false },
	{ "CI_PROJECT_DIR", "/builds/t3_abc/0/acme/widget", false },
	{ "NASTY", "a'b\"c $(x) `y` \\n\n%s", false },
	{ "bad key;rm", "never", false },
	{ "CA_FILE", "-----BEGIN-----\nx\n", true },
	{ "EMPTY", "", false },
};

static const char *const golden_cache_paths[] = { "vendor/", "node_modules/**/*.js" };
static const char *const golden_cache_warn[] = { "cache key \"a/../b\" sanitized to \"b\"" };
static const struct script_cache_key golden_keys[] = {
	{ "b", "/cache/acme/widget/b/cache.zip" },
	{ "main-fallback", "/cache/acme/widget/main-fallback/cache.zip" },
	{ "it's", "/cache/acme/widget/it's/cache.zip" },
};
static const struct script_cache golden_caches[] = {
	{ golden_keys, 3, "a/../b", { golden_cache_warn, 1 },
	    { golden_cache_paths, 2 }, false, true, true, "on_success" },
	{ golden_keys + 2, 1, "it's", { NULL, 0 }, { NULL, 0 }, true, true, false, "always" },
	{ golden_keys + 1, 1, "pushed", { NULL, 0 }, { golden_cache_paths, 1 }, false,
	    false, true, "on_failure" },
	{ NULL, 0, "", { NULL, 0 }, { golden_cache_paths, 1 }, false, true, true, "always" },
	{ golden_keys, 1, "no files", { NULL, 0 }, { NULL, 0 }, false, true, true, "always" },
};
static const char *const golden_art_paths[] = { "out/", "$(evil)" };
static const char *const golden_art_excl[] = { "out/**/*.o" };
static const char *const golden_report[] = { "junit.xml" };
static const struct script_artifact golden_artifacts[] = {
	{ { golden_art_paths, 2 }, { golden_art_excl, 1 }, true, "my 'bin'", "on_success",
	    "zip", "archive", "1 week" },
	{ { golden_report, 1 }, { NULL, 0 }, false, "", "always", "gzip", "junit", "" },
	{ { golden_report, 1 }, { NULL, 0 }, false, NULL, "on_failure", "", "", NULL },
	{ { NULL, 0 }, { NULL, 0 }, false, "nothing", "always", "", "", "" },
};
static const struct script_dependency golden_deps[] = {
	{ 7, "build 'x'", "dep-token-1" },
	{ 8, "test", "dep-token-2" },
};

static void
golden_transfers(struct script_job *j)
{
	j->runner_command = "/usr/local/bin/run ner";
	j->server_url = "https://gitlab.example.com/";
	j->job_id = 42;
	j->cache_request_timeout = 10;
	j->artifact_download_attempts = 3;
	j->caches = golden_caches;
	j->n_caches = NELEM(golden_caches);
	j->artifacts = golden_artifacts;
	j->n_artifacts = NELEM(golden_artifacts);
	j->dependencies = golden_deps;
	j->n_dependencies = NELEM(golden_deps);
}

static void
golden_job(struct script_job *j, const char *shell)
{
	memset(j, 0, sizeof(*j));
	j->shell = shell;
	j->builds_dir = "/builds";
	j->project_dir = "/builds/t3_abc/0/acme/widget";
	j->tmp_dir = "/builds/t3_abc/0/acme/widget.tmp";
	j->vars = golden_vars;
	j->n_vars = NELEM(golden_vars);
	j->script_sections = true;
	j->exit_code_check = true;
	j->git_strategy = "fetch";
	j->repo_url = "https://gitlab-ci-token:secret@gitlab.example.com/acme/widget.git";
	j->remote_url = "https://gitlab.example.com/acme/widget.git";
	j->server_host = "https://gitlab.example.com";
	j->git_urls_without_tokens = true;
	j->sha = "0123456789abcdef0123456789abcdef01234567";
	j->ref = "main";
	j->refspecs.v = golden_refspecs;
	j->refspecs.n = NELEM(golden_refspecs);
	j->depth = 20;
	j->checkout = true;
	j->clean_flags = "-ffdx";
	j->fetch_flags = "--prune --quiet";
	j->clone_flags = "";
	j->submodule_strategy = "recursive";
	j->submodule_paths = "sub1 ':(exclude)sub2'";
	j->submodule_update_flags = "--remote";
	j->submodule_depth = 1;
	j->get_sources_attempts = 2;
	j->user_agent = "gitlab-runner 17.0.0 linux/amd64";
	j->ca_file = "/builds/t3_abc/0/acme/widget.tmp/CA_FILE";
	j->pre_get_sources.v = golden_pre;
	j->pre_get_sources.n = NELEM(golden_pre);
	j->post_get_sources.v = golden_post;
	j->post_get_sources.n = NELEM(golden_post);
	j->step_name = "script";
	j->commands.v = golden_cmds;
	j->commands.n = NELEM(golden_cmds);
	j->pre_build_script = "echo pre-build";
	j->post_build_script = "echo post-build";
	golden_transfers(j);
}

static void
check_golden(const char *name, const char *text)
{
	char *path, *want;
	size_t len;

	path = xasprintf("%s/script_%s.sh", GOLDEN_DIR, name);
	if (getenv("UPDATE_GOLDEN") != NULL &&
	    strcmp(getenv("UPDATE_GOLDEN"), "1") == 0) {
		mkdir(GOLDEN_DIR, 0755);
		write_file(path, text, strlen(text));
	}
	want = read_file(path, &len);
	if (want == NULL)
		fail_msg("missing %s (run with UPDATE_GOLDEN=1)", path);
	if (strcmp(want, text) != 0)
		fail_msg("%s differs (UPDATE_GOLDEN=1 rewrites it; review the diff)",
		    path);
	free(want);
	free(path);
}

static void
test_golden(void **state)
{
	static const enum script_stage stages[] = { SCRIPT_PREPARE,
	    SCRIPT_GET_SOURCES, SCRIPT_RESTORE_CACHE, SCRIPT_DOWNLOAD_ARTIFACTS,
	    SCRIPT_STEP, SCRIPT_AFTER_SCRIPT, SCRIPT_ARCHIVE_CACHE,
	    SCRIPT_UPLOAD_ARTIFACTS, SCRIPT_CLEANUP };
	static const char *const strategies[] = { "clone", "none", "empty" };
	struct script_job j;
	char stage[64], *name, *s;
	size_t i, k;
	int f;

	(void)state;
	for (k = 0; k < NELEM(shells); k++) {
		golden_job(&j, shells[k]);
		for (i = 0; i < NELEM(stages); i++) {
			for (f = 0; f < 2; f++) {
				j.on_failure = f;
				if (f == 1 && stages[i] != SCRIPT_ARCHIVE_CACHE &&
				    stages[i] != SCRIPT_UPLOAD_ARTIFACTS)
					continue;
				s = script_stage(&j, stages[i]);
				script_stage_name(&j, stages[i], stage, sizeof(stage));
				assert_non_null(s);
				name = xasprintf("%s_%s", shells[k], stage);
				check_golden(name, s);
				free(name);
				free(s);
			}
			j.on_failure = false;
		}
		/* A job without caches, artifacts or dependencies skips those stages. */
		j.n_caches = j.n_artifacts = j.n_dependencies = 0;
		for (i = 0; i < NELEM(stages); i++)
			if (stages[i] == SCRIPT_RESTORE_CACHE ||
			    stages[i] == SCRIPT_DOWNLOAD_ARTIFACTS ||
			    stages[i] == SCRIPT_ARCHIVE_CACHE ||
			    stages[i] == SCRIPT_UPLOAD_ARTIFACTS)
				assert_null(script_stage(&j, stages[i]));
		golden_job(&j, shells[k]);
		for (i = 0; i < NELEM(strategies); i++) {
			j.git_strategy = strategies[i];
			j.depth = 0;
			j.get_sources_attempts = 1;
			/* none and empty skip checkout and submodules whatever is set. */
			j.checkout = i != 0;
			j.submodule_strategy = i != 0 ? "recursive" : "none";
			j.ca_file = "";
			s = script_stage(&j, SCRIPT_GET_SOURCES);
			name = xasprintf("%s_get_sources_%s", shells[k],
			    strategies[i]);
			check_golden(name, s);
			free(name);
			free(s);
		}
		/* FF_ENABLE_JOB_CLEANUP with fetch and recursive submodules. */
		golden_job(&j, shells[k]);
		j.job_cleanup = true;
		s = script_stage(&j, SCRIPT_CLEANUP);
		name = xasprintf("%s_cleanup_file_variables_job_cleanup", shells[k]);
		check_golden(name, s);
		free(name);
		free(s);
		/* FF_GIT_URLS_WITHOUT_TOKENS false: the old insteadOf config. */
		golden_job(&j, shells[k]);
		j.git_urls_without_tokens = false;
		s = script_stage(&j, SCRIPT_GET_SOURCES);
		name = xasprintf("%s_get_sources_urls_with_tokens", shells[k]);
		check_golden(name, s);
		free(name);
		free(s);
		golden_job(&j, shells[k]);
		j.script_sections = false;
		j.exit_code_check = false;
		j.debug_trace = true;
		s = script_stage(&j, SCRIPT_STEP);
		name = xasprintf("%s_step_script_plain", shells[k]);
		check_golden(name, s);
		free(name);
		free(s);
	}
}

static void
test_quote(void **state)
{
	static const struct {
		const char	*in;
		const char	*out;
	} t[] = {
		{ "", "''" },
		{ "abc", "'abc'" },
		{ "a'b", "'a'\\''b'" },
		{ "'", "''\\'''" },
		{ "$(x) `y` \"z\"\n", "'$(x) `y` \"z\"\n'" },
		{ "\xff\xfe", "'\xff\xfe'" },
	};
	struct buf b;
	size_t i;

	(void)state;
	buf_init(&b, BUF_UNLIMITED);
	for (i = 0; i < NELEM(t); i++) {
		buf_reset(&b);
		script_quote(&b, t[i].in);
		assert_string_equal(b.ptr, t[i].out);
	}
	buf_release(&b);
}

static void
test_stage_names(void **state)
{
	static const struct {
		enum script_stage	 st;
		bool			 on_failure;
		const char		*name;
	} t[] = {
		{ SCRIPT_PREPARE, false, "prepare_script" },
		{ SCRIPT_GET_SOURCES, false, "get_sources" },
		{ SCRIPT_RESTORE_CACHE, false, "restore_cache" },
		{ SCRIPT_DOWNLOAD_ARTIFACTS, false, "download_artifacts" },
		{ SCRIPT_STEP, false, "step_release" },
		{ SCRIPT_AFTER_SCRIPT, false, "after_script" },
		{ SCRIPT_ARCHIVE_CACHE, false, "archive_cache" },
		{ SCRIPT_ARCHIVE_CACHE, true, "archive_cache_on_failure" },
		{ SCRIPT_UPLOAD_ARTIFACTS, false, "upload_artifacts_on_success" },
		{ SCRIPT_UPLOAD_ARTIFACTS, true, "upload_artifacts_on_failure" },
		{ SCRIPT_CLEANUP, false, "cleanup_file_variables" },
	};
	struct script_job j;
	char out[64];
	size_t i;

	(void)state;
	golden_job(&j, "bash");
	j.step_name = "release";
	for (i = 0; i < NELEM(t); i++) {
		j.on_failure = t[i].on_failure;
		assert_string_equal(script_stage_name(&j, t[i].st, out,
		    sizeof(out)), t[i].name);
	}
	assert_string_equal(script_stage_name(&j, SCRIPT_STEP, out, 4), "ste");
}

/* A job in root/<name> that runs commands in its project dir. */
static void
run_job(struct script_job *j, const char *shell, const char *name)
{
	char *base = subdir(name);

	memset(j, 0, sizeof(*j));
	j->shell = shell;
	j->builds_dir = base;
	j->project_dir = xasprintf("%s/project", base);
	j->tmp_dir = xasprintf("%s/project.tmp", base);
	j->git_strategy = "none";
	j->repo_url = j->remote_url = j->server_host = j->sha = j->ref = "";
	j->clean_flags = "-ffdx";
	j->fetch_flags = "--prune --quiet";
	j->clone_flags = j->submodule_strategy = j->submodule_paths = "";
	j->submodule_update_flags = j->user_agent = j->ca_file = "";
	j->checkout = true;
	j->get_sources_attempts = 1;
	j->step_name = "script";
	j->pre_build_script = j->post_build_script = "";
	sh("mkdir -p '%s'", j->project_dir);
}

static void
free_job(struct script_job *j)
{
	free((char *)j->project_dir);
	free((char *)j->tmp_dir);
	free((char *)j->builds_dir);
}

/* Values that must arrive byte for byte. */
static const char *const nasty[] = {
	"",
	"plain",
	"it's",
	"'",
	"''\\''",
	"$(touch pwned)",
	"`touch pwned`",
	"$HOME ${HOME} $1 $@ $$",
	"a\nb\n\nc\n",
	"\"double\" \\back\\slash\\",
	"%s %n %% \\033[31m",
	"\xff\xfe\x80 bytes",
	"tab\there ; & | < > * ? [a] ~ #",
	"-n",
	" leading and trailing ",
};

static void
test_quoting_run(void **state)
{
	struct script_var vars[NELEM(nasty) * 2];
	const char *cmds[1];
	struct script_job j;
	struct buf cmd, want;
	char *keys[NELEM(nasty) * 2], *res, *got, *path;
	size_t i, k, len;

	(void)state;
	for (k = 0; k < NELEM(shells); k++) {
		run_job(&j, shells[k], "quote");
		buf_init(&cmd, BUF_UNLIMITED);
		buf_init(&want, BUF_UNLIMITED);
		res = xasprintf("%s/result", j.builds_dir);
		buf_puts(&cmd, "printf '%s\\0'");
		for (i = 0; i < NELEM(nasty); i++) {
			keys[2 * i] = xasprintf("V%zu", i);
			keys[2 * i + 1] = xasprintf("F%zu", i);
			vars[2 * i] = (struct script_var){ keys[2 * i], nasty[i],
			    false };
			vars[2 * i + 1] = (struct script_var){ keys[2 * i + 1],
			    nasty[i], true };
			buf_printf(&cmd, " \"$V%zu\" \"$(cat \"$F%zu\"; echo x)\"",
			    i, i);
			buf_append(&want, nasty[i], strlen(nasty[i]) + 1);
			buf_append(&want, nasty[i], strlen(nasty[i]));
			buf_append(&want, "x", 2);
		}
		buf_printf(&cmd, " > '%s'", res);
		cmds[0] = cmd.ptr;
		j.vars = vars;
		j.n_vars = NELEM(vars);
		j.commands.v = cmds;
		j.commands.n = 1;
		assert_int_equal(run_stage(&j, SCRIPT_STEP, root), 0);
		got = read_file(res, &len);
		assert_non_null(got);
		assert_int_equal(len, want.len);
		assert_memory_equal(got, want.ptr, len);
		free(got);
		path = xasprintf("%s/project/pwned", j.builds_dir);
		assert_false(exists(path));
		free(path);
		for (i = 0; i < NELEM(keys); i++)
			free(keys[i]);
		free(res);
		buf_release(&cmd);
		buf_release(&want);
		free_job(&j);
	}
}

static void
test_bad_key(void **state)
{
	static const struct script_var vars[] = {
		{ "OK", "1", false },
		{ "A;touch pwned;B", "x", false },
		{ "1X", "x", true },
		{ "A B", "x", false },
		{ "", "x", false },
		{ "É", "x", false },
	};
	struct script_job j;
	char *s;

	(void)state;
	golden_job(&j, "bash");
	j.vars = vars;
	j.n_vars = NELEM(vars);
	s = script_stage(&j, SCRIPT_STEP);
	assert_non_null(strstr(s, "export OK='\\''1'\\''"));
	assert_null(strstr(s, "pwned"));
	assert_null(strstr(s, "1X"));
	assert_null(strstr(s, "A B"));
	assert_non_null(strstr(s, "# variable 1 skipped"));
	assert_non_null(strstr(s, "# variable 5 skipped"));
	free(s);
}

static void
test_gitlab_env_and_files(void **state)
{
	static const char *const step_cmds[] = {
		"echo FOO=bar >> \"$GITLAB_ENV\"",
		"printf 'BAZ=with space\\n' >> \"$GITLAB_ENV\"",
		"printf 'LAST=nonl' >> \"$GITLAB_ENV\"",
	};
	struct script_var vars[2];
	const char *after[1];
	struct script_job j;
	struct stat st;
	char *res, *got, *fpath, *cmd;
	size_t k, len;

	(void)state;
	for (k = 0; k < NELEM(shells); k++) {
		run_job(&j, shells[k], "env");
		vars[0] = (struct script_var){ "SECRET_FILE", "line1\nline2 'q'", true };
		vars[1] = (struct script_var){ "PLAIN", "p", false };
		j.vars = vars;
		j.n_vars = 2;
		res = xasprintf("%s/result", j.builds_dir);
		fpath = xasprintf("%s/SECRET_FILE", j.tmp_dir);

		assert_int_equal(run_stage(&j, SCRIPT_PREPARE, root), 0);
		j.commands.v = step_cmds;
		j.commands.n = NELEM(step_cmds);
		assert_int_equal(run_stage(&j, SCRIPT_STEP, root), 0);

		/* The file variable: 0600, exact bytes, the variable its path. */
		assert_int_equal(stat(fpath, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0600);
		got = read_file(fpath, &len);
		assert_int_equal(len, strlen(vars[0].value));
		assert_memory_equal(got, vars[0].value, len);
		free(got);

		cmd = xasprintf("printf '%%s|%%s|%%s|%%s|%%s' \"$FOO\" \"$BAZ\" "
		    "\"$LAST\" \"$SECRET_FILE\" \"$PWD\" > '%s'", res);
		after[0] = cmd;
		j.commands.v = after;
		j.commands.n = 1;
		assert_int_equal(run_stage(&j, SCRIPT_AFTER_SCRIPT, root), 0);
		got = read_file(res, NULL);
		free(cmd);
		cmd = xasprintf("bar|with space|nonl|%s|%s", fpath, j.project_dir);
		assert_string_equal(got, cmd);
		free(got);
		free(cmd);

		/* cleanup removes the file variable and the env file. */
		assert_int_equal(run_stage(&j, SCRIPT_CLEANUP, root), 0);
		assert_false(exists(fpath));
		cmd = xasprintf("%s/gitlab_runner_env", j.tmp_dir);
		assert_false(exists(cmd));
		free(cmd);
		/* and succeeds with nothing left to remove */
		assert_int_equal(run_stage(&j, SCRIPT_CLEANUP, root), 0);

		/* prepare empties GITLAB_ENV for the next job. */
		j.commands.v = step_cmds;
		j.commands.n = 1;
		assert_int_equal(run_stage(&j, SCRIPT_STEP, root), 0);
		assert_int_equal(run_stage(&j, SCRIPT_PREPARE, root), 0);
		cmd = xasprintf("%s/gitlab_runner_env", j.tmp_dir);
		assert_false(exists(cmd));
		free(cmd);

		free(res);
		free(fpath);
		free_job(&j);
	}
}

static void
test_errexit(void **state)
{
	const char *cmds[3];
	struct script_job j;
	char *marker, *touch;
	size_t k;
	int check;

	(void)state;
	for (k = 0; k < NELEM(shells); k++) {
		for (check = 0; check < 2; check++) {
			run_job(&j, shells[k], "errexit");
			marker = xasprintf("%s/marker", j.builds_dir);
			touch = xasprintf("touch '%s'", marker);
			cmds[0] = "true";
			cmds[1] = "sh -c 'exit 7'";
			cmds[2] = touch;
			j.commands.v = cmds;
			j.commands.n = 3;
			j.exit_code_check = check;
			assert_int_equal(run_stage(&j, SCRIPT_STEP, root), 7);
			assert_false(exists(marker));
			/* a failing pipeline too, where pipefail exists */
			cmds[1] = "false | true";
			j.commands.n = 2;
			assert_int_equal(run_stage(&j, SCRIPT_STEP, root),
			    strcmp(shells[k], "bash") == 0 ? 1 : 0);
			/* stdin is closed for user commands */
			cmds[1] = "cat";
			cmds[2] = touch;
			j.commands.n = 3;
			assert_int_equal(run_stage(&j, SCRIPT_STEP, root), 0);
			assert_true(exists(marker));
			free(marker);
			free(touch);
			free_job(&j);
		}
	}
}

static void
test_sources_none_empty(void **state)
{
	struct script_job j;
	char *keep;
	size_t k;

	(void)state;
	for (k = 0; k < NELEM(shells); k++) {
		run_job(&j, shells[k], "none");
		keep = xasprintf("%s/keep", j.project_dir);
		write_file(keep, "k", 1);
		j.git_strategy = "none";
		assert_int_equal(run_stage(&j, SCRIPT_GET_SOURCES, root), 0);
		assert_true(exists(keep));
		j.git_strategy = "empty";
		assert_int_equal(run_stage(&j, SCRIPT_GET_SOURCES, root), 0);
		assert_false(exists(keep));
		assert_true(exists(j.project_dir));
		sh("rm -rf '%s'", j.project_dir);
		j.git_strategy = "none";
		assert_int_equal(run_stage(&j, SCRIPT_GET_SOURCES, root), 0);
		assert_true(exists(j.project_dir));
		j.git_strategy = "bogus";
		assert_int_equal(run_stage(&j, SCRIPT_GET_SOURCES, root), 1);
		free(keep);
		free_job(&j);
	}
}

/* Where needle is in hay, after from; NULL when it is not. */
static const char *
after(const char *hay, const char *from, const char *needle)
{
	return (from == NULL ? NULL : strstr(from > hay ? from : hay, needle));
}

/*
 * gitlab-runner's writeGetSourcesScript table (shells/abstract_test.go,
 * "strategy none" and "strategy empty"): with GIT_CHECKOUT and a submodule
 * strategy set, none and empty still say they skip both, in this order,
 * run no hook and ask the credential helpers to forget the token.
 */
static void
test_sources_none_empty_notices(void **state)
{
	static const struct {
		const char	*strategy;
		const char	*notice;
	} t[] = {
		{ "none", "'Skipping Git repository setup'" },
		{ "empty", "'Skipping Git repository setup and creating an empty build directory'" },
	};
	struct script_job j;
	const char *p;
	char *s;
	size_t i;

	(void)state;
	for (i = 0; i < NELEM(t); i++) {
		golden_job(&j, "bash");
		j.git_strategy = t[i].strategy;
		j.checkout = true;
		j.submodule_strategy = "recursive";
		s = script_stage(&j, SCRIPT_GET_SOURCES);
		p = after(s, s, t[i].notice);
		p = after(s, p, "'\\''Skipping Git checkout'\\''");
		p = after(s, p, "'\\''Skipping Git submodules setup'\\''");
		p = after(s, p, "git credential reject");
		assert_non_null(p);
		assert_null(strstr(s, "echo pre"));
		assert_null(strstr(s, "echo post"));
		assert_null(strstr(s, "git submodule"));
		assert_null(strstr(s, "checkout -f"));
		free(s);
	}
}

/*
 * FF_ENABLE_JOB_CLEANUP, gitlab-runner's writeCleanupBuildDirectoryScript
 * table (shells/abstract_test.go): clone and empty remove the project
 * directory, fetch cleans and resets the checkout (GIT_CLEAN_FLAGS), none
 * leaves it; without the flag nothing of the project goes.
 */
static void
test_job_cleanup(void **state)
{
	static const struct {
		const char	*strategy;
		bool		 flag;
		bool		 kept;		/* the project dir is still there */
	} t[] = {
		{ "clone", false, true },
		{ "clone", true, false },
		{ "empty", true, false },
		{ "none", true, true },
		{ "fetch", false, true },
	};
	struct script_job j;
	char *s, *file, *tracked;
	size_t i, k;

	(void)state;
	for (k = 0; k < NELEM(shells); k++) {
		for (i = 0; i < NELEM(t); i++) {
			run_job(&j, shells[k], "cleanup");
			file = xasprintf("%s/left-over", j.project_dir);
			write_file(file, "x", 1);
			j.git_strategy = t[i].strategy;
			j.job_cleanup = t[i].flag;
			assert_int_equal(run_stage(&j, SCRIPT_CLEANUP, root), 0);
			assert_int_equal(exists(j.project_dir), t[i].kept);
			assert_int_equal(exists(file), t[i].kept);
			s = script_stage(&j, SCRIPT_CLEANUP);
			assert_int_equal(strstr(s, "Skipping build directory cleanup step") != NULL,
			    t[i].flag && strcmp(t[i].strategy, "none") == 0);
			free(s);
			free(file);
			free_job(&j);
		}

		/* fetch: untracked files go, tracked ones are reset, .git stays. */
		run_job(&j, shells[k], "cleanup-fetch");
		tracked = xasprintf("%s/tracked", j.project_dir);
		file = xasprintf("%s/untracked", j.project_dir);
		sh("cd '%s' && git init -q && echo one > tracked && git add tracked && "
		    "git commit -q -m one && echo changed > tracked && echo x > untracked",
		    j.project_dir);
		j.git_strategy = "fetch";
		j.job_cleanup = true;
		assert_int_equal(run_stage(&j, SCRIPT_CLEANUP, root), 0);
		assert_false(exists(file));
		s = read_file(tracked, NULL);
		assert_string_equal(s, "one\n");
		free(s);
		assert_true(exists_in(j.project_dir, ".git"));
		free(tracked);
		free(file);
		free_job(&j);

		/*
		 * fetch whose get_sources never made .git: a repository above
		 * the builds directory is not git clean's to find.
		 */
		run_job(&j, shells[k], "cleanup-nogit");
		sh("cd '%s' && git init -q", j.builds_dir);
		file = xasprintf("%s/untracked", j.project_dir);
		write_file(file, "x", 1);
		j.git_strategy = "fetch";
		j.job_cleanup = true;
		assert_int_equal(run_stage(&j, SCRIPT_CLEANUP, root), 0);
		assert_true(exists(file));
		free(file);
		free_job(&j);
	}
}

/* A bare repository: commit 1 tagged v1, commit 2 on main. */
static void
make_origin(char **sha1, char **sha2)
{
	char *d = subdir("origin");

	sh("cd '%s' && git init -q --bare -b main origin.git && "
	    "git init -q -b main work && cd work && "
	    "echo one > a && git add a && git commit -q -m one && git tag v1 && "
	    "echo two > b && git add b && git commit -q -m two && "
	    "git push -q ../origin.git main v1", d);
	*sha1 = cmd_output("git -C '%s/work' rev-parse v1", d);
	*sha2 = cmd_output("git -C '%s/work' rev-parse main", d);
	free(d);
}

static void
test_sources_git(void **state)
{
	static const char *const rs_main[] = {
		"+refs/heads/main:refs/remotes/origin/main",
	};
	static const char *const rs_tag[] = { "+refs/tags/v1:refs/tags/v1" };
	struct script_job j;
	char *sha1, *sha2, *repo, *p, *cfg, *ext;
	struct stat st;
	size_t k;

	(void)state;
	make_origin(&sha1, &sha2);
	repo = xasprintf("file://%s/origin/origin.git", root);
	for (k = 0; k < NELEM(shells); k++) {
		run_job(&j, shells[k], "git");
		sh("rmdir '%s'", j.project_dir);
		j.git_strategy = "fetch";
		j.repo_url = repo;
		/* Reached only through the ext config's insteadOf (the flag is false). */
		j.remote_url = "file:///nonexistent/remote/origin.git";
		j.server_host = "http://127.0.0.1:9";
		j.sha = sha2;
		j.ref = "main";
		j.refspecs.v = rs_main;
		j.refspecs.n = 1;
		j.depth = 1;
		j.user_agent = "gitlab-runner test";
		j.get_sources_attempts = 2;

		assert_int_equal(run_stage(&j, SCRIPT_GET_SOURCES, root), 0);
		assert_head(j.project_dir, sha2);
		assert_true(exists_in(j.project_dir, ".git/shallow"));
		cfg = xasprintf("%s/.git/config", j.project_dir);
		p = read_file(cfg, NULL);
		assert_null(strstr(p, repo));
		assert_non_null(strstr(p, "file:///nonexistent/remote/origin.git"));
		free(p);
		ext = xasprintf("%s/.gitlab-runner.ext.conf", j.tmp_dir);
		p = read_file(ext, NULL);
		assert_non_null(p);
		assert_non_null(strstr(p, repo));
		assert_non_null(strstr(p, "insteadOf = \"file:///nonexistent/remote/origin.git\""));
		free(p);
		assert_int_equal(stat(ext, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0600);

		/* fetch again, a tag, full depth: same clone, cleaned, unshallowed */
		sh("touch '%s/.git/marker' '%s/untracked'", j.project_dir,
		    j.project_dir);
		j.sha = sha1;
		j.ref = "v1";
		j.refspecs.v = rs_tag;
		j.depth = 0;
		assert_int_equal(run_stage(&j, SCRIPT_GET_SOURCES, root), 0);
		assert_head(j.project_dir, sha1);
		assert_true(exists_in(j.project_dir, ".git/marker"));
		assert_false(exists_in(j.project_dir, "untracked"));
		assert_false(exists_in(j.project_dir, ".git/shallow"));
		assert_false(exists_in(j.project_dir, "b"));

		/* clean_flags none keeps untracked files; no checkout keeps HEAD */
		sh("touch '%s/untracked'", j.project_dir);
		j.clean_flags = "none";
		j.checkout = false;
		j.sha = sha2;
		assert_int_equal(run_stage(&j, SCRIPT_GET_SOURCES, root), 0);
		assert_head(j.project_dir, sha1);
		assert_true(exists_in(j.project_dir, "untracked"));

		/* clone starts fresh */
		j.git_strategy = "clone";
		j.checkout = true;
		j.clean_flags = "-ffdx";
		j.refspecs.v = rs_main;
		j.depth = 1;
		assert_int_equal(run_stage(&j, SCRIPT_GET_SOURCES, root), 0);
		assert_head(j.project_dir, sha2);
		assert_false(exists_in(j.project_dir, ".git/marker"));

		/* a fetch that cannot succeed fails the stage after its attempts */
		j.repo_url = "file:///nonexistent/really/origin.git";
		j.git_strategy = "fetch";
		assert_int_not_equal(run_stage(&j, SCRIPT_GET_SOURCES, root), 0);
		j.repo_url = repo;

		/* cleanup removes the ext config */
		assert_int_equal(run_stage(&j, SCRIPT_CLEANUP, root), 0);
		assert_false(exists(ext));
		free(ext);
		free(cfg);
		free_job(&j);
	}
	free(repo);
	free(sha1);
	free(sha2);
}

/*
 * What git gets for url from a credential fill with the ext config and
 * CI_JOB_TOKEN=token in its environment; a user's own helper comes first,
 * as one in ~/.gitconfig would.
 */
static char *
credential_fill(const char *ext, const char *token, const char *url)
{
	char *out = xasprintf("%s/fill.out", root), *text;

	sh("printf 'url=%%s\\n' '%s' | CI_JOB_TOKEN='%s' GIT_TERMINAL_PROMPT=0 "
	    "git -c credential.helper='!f(){ echo username=u; echo password=from-user-helper; }; f' "
	    "-c include.path='%s' credential fill > '%s' 2>/dev/null || true",
	    url, token, ext, out);
	text = read_file(out, NULL);
	assert_non_null(text);
	free(out);
	return (text);
}

/*
 * FF_GIT_URLS_WITHOUT_TOKENS: no insteadOf, no token in the ext config;
 * git's credential fill answers gitlab-ci-token and CI_JOB_TOKEN for the
 * server's host only, ahead of the user's own helpers.
 */
static void
test_sources_token_helper(void **state)
{
	static const char *const rs_main[] = {
		"+refs/heads/main:refs/remotes/origin/main",
	};
	struct script_job j;
	char *sha1, *sha2, *origin, *ext, *p;
	size_t k;

	(void)state;
	make_origin(&sha1, &sha2);
	origin = xasprintf("file://%s/origin/origin.git", root);
	for (k = 0; k < NELEM(shells); k++) {
		run_job(&j, shells[k], "helper");
		sh("rmdir '%s'", j.project_dir);
		j.git_strategy = "clone";
		j.git_urls_without_tokens = true;
		/* The credentialed URL is never used: the fetch goes to origin. */
		j.repo_url = "file:///nonexistent/gitlab-ci-token:secret@/origin.git";
		j.remote_url = origin;
		j.server_host = "http://gitlab.example.com:8080";
		j.sha = sha2;
		j.ref = "main";
		j.refspecs.v = rs_main;
		j.refspecs.n = 1;
		assert_int_equal(run_stage(&j, SCRIPT_GET_SOURCES, root), 0);
		assert_head(j.project_dir, sha2);

		ext = xasprintf("%s/.gitlab-runner.ext.conf", j.tmp_dir);
		p = read_file(ext, NULL);
		assert_non_null(p);
		assert_null(strstr(p, "insteadOf"));
		assert_null(strstr(p, "secret"));
		free(p);

		p = credential_fill(ext, "tok-1",
		    "http://gitlab.example.com:8080/acme/widget.git");
		assert_non_null(strstr(p, "username=gitlab-ci-token\n"));
		assert_non_null(strstr(p, "password=tok-1\n"));
		assert_null(strstr(p, "from-user-helper"));
		free(p);
		/* Another host, or the same host on another port: never the token. */
		p = credential_fill(ext, "tok-1", "http://elsewhere.example/lib.git");
		assert_null(strstr(p, "tok-1"));
		assert_non_null(strstr(p, "password=from-user-helper\n"));
		free(p);
		p = credential_fill(ext, "tok-1", "http://gitlab.example.com:9090/x.git");
		assert_null(strstr(p, "tok-1"));
		free(p);
		free(ext);
		free_job(&j);
	}
	free(origin);
	free(sha1);
	free(sha2);
}

/* Submodules: sync, update --init with paths and depth, then clean. */
/* A stage's text with the eval wrapper's quoting undone ('\'' back to '). */
static char *
unwrapped(char *text)
{
	char *r, *w;

	for (r = w = text; *r != '\0'; ) {
		if (strncmp(r, "'\\''", 4) == 0) {
			*w++ = '\'';
			r += 4;
		} else
			*w++ = *r++;
	}
	*w = '\0';
	return text;
}

/*
 * FF_USE_GIT_NATIVE_CLONE: git clone of the ref, GIT_CLONE_EXTRA_FLAGS
 * last; init and fetch when git is older than 2.49 (clone --revision).
 */
static void
test_sources_native_clone(void **state)
{
	static const char *const rs_main[] = {
		"+refs/heads/main:refs/remotes/origin/main",
	};
	struct script_job j;
	char *sha1, *sha2, *text;
	size_t k;

	(void)state;
	make_origin(&sha1, &sha2);
	for (k = 0; k < NELEM(shells); k++) {
		run_job(&j, shells[k], "native");
		j.git_strategy = "clone";
		j.native_clone = true;
		j.repo_url = j.remote_url = "file:///nonexistent/origin.git";
		j.server_host = "";
		j.sha = sha1;
		j.ref = "main";
		j.refspecs.v = rs_main;
		j.refspecs.n = 1;
		j.depth = 3;
		j.clone_flags = "--no-tags --single-branch";
		text = unwrapped(script_stage(&j, SCRIPT_GET_SOURCES));
		assert_non_null(strstr(text, "| sort -V -C; then\n"));
		assert_non_null(strstr(text, " clone --no-checkout 'file:///nonexistent/origin.git' "));
		assert_non_null(strstr(text,
		    " --depth 3 --branch 'main' '--no-tags' '--single-branch'\n"));
		assert_non_null(strstr(text, "Cloning repository for main with git depth set to 3..."));
		assert_non_null(strstr(text, "\nelse\ngit init -q --template "));
		free(text);

		j.ref = "refs/merge-requests/1/head";
		j.depth = 0;
		j.clone_flags = "";
		text = unwrapped(script_stage(&j, SCRIPT_GET_SOURCES));
		assert_non_null(strstr(text, " --revision 'refs/merge-requests/1/head'\n"));
		assert_non_null(strstr(text, "Cloning repository for refs/merge-requests/1/head..."));
		free(text);

		/* Off: no git clone at all. */
		j.native_clone = false;
		text = script_stage(&j, SCRIPT_GET_SOURCES);
		assert_null(strstr(text, " clone --no-checkout "));
		free(text);
		free_job(&j);
	}
	free(sha1);
	free(sha2);
}

static void
test_sources_submodules(void **state)
{
	static const char *const rs_main[] = {
		"+refs/heads/main:refs/remotes/origin/main",
	};
	struct script_job j;
	char *d, *repo, *sha;
	size_t k;

	(void)state;
	d = subdir("sm");
	/* git 2.38.1+ refuses file:// submodules unless told otherwise. */
	sh("git config --global protocol.file.allow always");
	sh("cd '%s' && git init -q --bare -b main sub.git && "
	    "git init -q -b main s && cd s && echo s > s && git add s && "
	    "git commit -q -m s && git push -q ../sub.git main && cd .. && "
	    "git init -q --bare -b main sup.git && git init -q -b main w && "
	    "cd w && git submodule add -q 'file://%s/sub.git' sub && "
	    "git commit -q -m sup && git push -q ../sup.git main", d, d);
	sha = cmd_output("git -C '%s/w' rev-parse HEAD", d);
	repo = xasprintf("file://%s/sup.git", d);
	for (k = 0; k < NELEM(shells); k++) {
		run_job(&j, shells[k], "smjob");
		j.git_strategy = "clone";
		j.repo_url = j.remote_url = repo;
		j.sha = sha;
		j.ref = "main";
		j.refspecs.v = rs_main;
		j.refspecs.n = 1;
		j.submodule_strategy = k == 0 ? "normal" : "recursive";
		j.submodule_paths = "sub";
		j.submodule_depth = 1;
		assert_int_equal(run_stage(&j, SCRIPT_GET_SOURCES, root), 0);
		assert_true(exists_in(j.project_dir, "sub/s"));
		/* a second fetch cleans untracked files inside the submodule */
		j.git_strategy = "fetch";
		sh("touch '%s/sub/untracked'", j.project_dir);
		assert_int_equal(run_stage(&j, SCRIPT_GET_SOURCES, root), 0);
		assert_false(exists_in(j.project_dir, "sub/untracked"));
		free_job(&j);
	}
	free(repo);
	free(sha);
	free(d);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quote),
		cmocka_unit_test(test_stage_names),
		cmocka_unit_test(test_golden),
		cmocka_unit_test(test_bad_key),
		cmocka_unit_test(test_quoting_run),
		cmocka_unit_test(test_gitlab_env_and_files),
		cmocka_unit_test(test_errexit),
		cmocka_unit_test(test_sources_none_empty),
		cmocka_unit_test(test_sources_none_empty_notices),
		cmocka_unit_test(test_job_cleanup),
		cmocka_unit_test(test_sources_git),
		cmocka_unit_test(test_sources_token_helper),
		cmocka_unit_test(test_sources_native_clone),
		cmocka_unit_test(test_sources_submodules),
	};

	return (cmocka_run_group_tests(tests, setup_root, teardown_root));
}

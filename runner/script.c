/*
 * Stage scripts: the text each stage of a job runs, a pure function of
 * struct script_job and the stage (no clock, environment or host name; what
 * must be known at run time, the host and the section timestamps, the
 * script asks the shell for).
 *
 * The shape is gitlab-runner's (shells/bash.go, shells/abstract.go,
 * protocol.md 9.2).  The wrapper sets the shell options and then runs the
 * stage body as
 *
 *	( trap 'exit 1' TERM; eval '<body>' ) < /dev/null
 *
 * The shell reads the whole eval line before it runs any of it, so a user
 * command that reads stdin can neither eat the rest of the script nor hang
 * on it (stdin is /dev/null); the TERM trap makes a cancelled stage exit 1
 * without bash dumping the script; errexit, inherited by the subshell,
 * ends the stage with the status of the first failing command.
 *
 * bash and sh get the same text: every construct used (case on "$(set -o)"
 * for pipefail, printf with octal escapes, $((...)), set --) means the same
 * in both.  Runner messages go through printf with a fixed format and the
 * text as an argument, so a ref name or a command holding % or \ prints as
 * it is.
 *
 * Paths should be absolute (job.c makes them so); a relative one is taken
 * relative to the shell's starting directory, "$PWD"/'<path>', as
 * gitlab-runner's Absolute() does.  Every other value is single-quoted by
 * script_quote().
 *
 * Cache and artifact stages are written by script_transfer.c; like every
 * stage with nothing to do they return NULL (skipped without a section, as
 * gitlab-runner's ErrSkipBuildStage).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "lib/xmalloc.h"
#include "runner/script.h"
#include "runner/script_int.h"

#define ENV_FILE	"gitlab_runner_env"
#define EXT_CONF	".gitlab-runner.ext.conf"
/* git runs it through sh with "get", "store" or "erase" as $1. */
#define TOKEN_HELPER	"!f(){ if [ \"$1\" = get ]; then " \
			"echo \"password=${CI_JOB_TOKEN}\"; fi; }; f"
#define TEMPLATE_DIR	"git-template"

#define EXIT_CODE_CHECK	"_runner_exit_code=$?; if [ $_runner_exit_code -ne 0 ]; " \
			"then exit $_runner_exit_code; fi\n"

void
script_quote(struct buf *out, const char *s)
{
	buf_putc(out, '\'');
	for (; *s != '\0'; s++) {
		if (*s == '\'')
			buf_puts(out, "'\\''");
		else
			buf_putc(out, *s);
	}
	buf_putc(out, '\'');
}

static int
empty(const char *s)
{
	return (s == NULL || *s == '\0');
}

/* A name the shell accepts after export: [A-Za-z_][A-Za-z0-9_]*. */
static int
valid_key(const char *k)
{
	const char *p;

	if (k == NULL || !((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') ||
	    *k == '_'))
		return (0);
	for (p = k + 1; *p != '\0'; p++) {
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || *p == '_'))
			return (0);
	}
	return (1);
}

/* A path word: dir[/name], made absolute against the starting $PWD. */
static void
path_word(struct buf *b, const char *dir, const char *name)
{
	struct buf p;

	buf_init(&p, BUF_UNLIMITED);
	buf_puts(&p, dir);
	if (name != NULL) {
		if (p.len > 0 && p.ptr[p.len - 1] != '/')
			buf_putc(&p, '/');
		buf_puts(&p, name);
	}
	if (p.ptr[0] != '/')
		buf_puts(b, "\"$PWD\"/");
	script_quote(b, p.ptr);
	buf_release(&p);
}

static void
say(struct buf *b, const char *fmt, const char *text)
{
	buf_puts(b, fmt);
	script_quote(b, text);
	buf_putc(b, '\n');
}

/* Each whitespace-separated word of s, quoted, each after a space. */
static void
words(struct buf *b, const char *s)
{
	const char *p = s, *start;
	char *w;

	while (*p != '\0') {
		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (*p == '\0')
			break;
		start = p;
		while (*p != '\0' && *p != ' ' && *p != '\t' && *p != '\n')
			p++;
		w = xmemdup(start, (size_t)(p - start));
		buf_putc(b, ' ');
		script_quote(b, w);
		free(w);
	}
}

/*
 * The variable exports every stage but prepare begins with.  With
 * paths_only (cleanup) file variables are exported as their paths and
 * their files are left as they are.
 */
static void
write_exports(struct buf *b, const struct script_job *j, int paths_only)
{
	const struct script_var *v;
	size_t i;
	int made_tmp = 0;

	for (i = 0; i < j->n_vars; i++) {
		v = &j->vars[i];
		if (!valid_key(v->key)) {
			/* The name itself may be what is dangerous: never echo it. */
			buf_printf(b, "# variable %zu skipped: its name is not a "
			    "valid shell variable name\n", i);
			continue;
		}
		if (!v->file) {
			buf_printf(b, "export %s=", v->key);
			script_quote(b, v->value != NULL ? v->value : "");
			buf_putc(b, '\n');
			continue;
		}
		if (!paths_only) {
			if (!made_tmp) {
				buf_puts(b, "mkdir -p ");
				path_word(b, j->tmp_dir, NULL);
				buf_putc(b, '\n');
				made_tmp = 1;
			}
			/*
			 * umask in a subshell: the file is created 0600 and
			 * the user's commands keep their umask; rm first so
			 * an older file's wider mode does not survive.
			 */
			buf_puts(b, "(umask 077 && rm -f ");
			path_word(b, j->tmp_dir, v->key);
			buf_puts(b, " && printf '%s' ");
			script_quote(b, v->value != NULL ? v->value : "");
			buf_puts(b, " > ");
			path_word(b, j->tmp_dir, v->key);
			buf_puts(b, ")\n");
		}
		buf_printf(b, "export %s=", v->key);
		path_word(b, j->tmp_dir, v->key);
		buf_putc(b, '\n');
	}

	/* GITLAB_ENV: KEY=VALUE lines one stage appends reach the next. */
	buf_puts(b, "export GITLAB_ENV=");
	path_word(b, j->tmp_dir, ENV_FILE);
	buf_puts(b, "\nmkdir -p ");
	path_word(b, j->tmp_dir, NULL);
	buf_puts(b, "\ntouch \"$GITLAB_ENV\"\n");
	buf_puts(b, "while IFS= read -r _runner_env_line || "
	    "[ -n \"$_runner_env_line\" ]; do\n"
	    "  case \"$_runner_env_line\" in *=*) export \"$_runner_env_line\";; esac\n"
	    "done < \"$GITLAB_ENV\"\n"
	    "unset _runner_env_line\n");
}

static void
write_cd(struct buf *b, const struct script_job *j)
{
	buf_puts(b, "cd ");
	path_word(b, j->project_dir, NULL);
	buf_putc(b, '\n');
}

/*
 * One user command as gitlab-runner writes it: echoed in green (the first
 * line of a multi-line command, or a collapsed section around it), then
 * the command itself.
 */
static void
write_command(struct buf *b, const struct script_job *j, const char *prefix,
    int *n, const char *cmd)
{
	const char *s = cmd, *e, *nl;
	char *t, *first;
	struct buf name;
	int section;

	/* Trimmed as gitlab-runner trims. */
	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' ||
	    e[-1] == '\r'))
		e--;
	t = xmemdup(s, (size_t)(e - s));
	nl = strchr(t, '\n');
	section = nl != NULL && j->script_sections;

	buf_init(&name, BUF_UNLIMITED);
	buf_printf(&name, "section_%s_%d", prefix, (*n)++);
	if (*t == '\0')
		buf_puts(b, "echo\n");
	else if (section) {
		buf_puts(b, "printf 'section_start:%s:%s[hide_duration=true,"
		    "collapsed=true]\\r\\033[0K\\033[32;1m$ %s\\033[0;m\\n' "
		    "\"$(date +%s)\" ");
		script_quote(b, name.ptr);
		buf_putc(b, ' ');
		script_quote(b, t);
		buf_putc(b, '\n');
	} else if (nl != NULL) {
		first = xmemdup(t, (size_t)(nl - t));
		buf_puts(b, "printf '\\033[32;1m$ %s # collapsed multi-line "
		    "command\\033[0;m\\n' ");
		script_quote(b, first);
		buf_putc(b, '\n');
		free(first);
	} else {
		buf_puts(b, "printf '\\033[32;1m$ %s\\033[0;m\\n' ");
		script_quote(b, t);
		buf_putc(b, '\n');
	}
	buf_puts(b, t);
	buf_putc(b, '\n');
	if (j->exit_code_check)
		buf_puts(b, EXIT_CODE_CHECK);
	if (section) {
		buf_puts(b, "printf 'section_end:%s:%s\\r\\033[0K\\n' "
		    "\"$(date +%s)\" ");
		script_quote(b, name.ptr);
		buf_putc(b, '\n');
	}
	buf_release(&name);
	free(t);
}

static void
write_commands(struct buf *b, const struct script_job *j, const char *prefix,
    int *n, const struct script_lines *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		write_command(b, j, prefix, n, l->v[i]);
}

/*
 * A value for a git config file: subsection names take \\ and \" only
 * (no newline at all), values also \n and \t.
 */
static void
gitcfg_escape(struct buf *b, const char *s)
{
	for (; *s != '\0'; s++) {
		switch (*s) {
		case '\\':
			buf_puts(b, "\\\\");
			break;
		case '"':
			buf_puts(b, "\\\"");
			break;
		case '\n':
			buf_puts(b, "\\n");
			break;
		case '\t':
			buf_puts(b, "\\t");
			break;
		default:
			buf_putc(b, *s);
		}
	}
}

static void
write_credential_reject(struct buf *b, const struct script_job *j)
{
	if (empty(j->server_host))
		return;
	buf_puts(b, "printf 'url=%s\\nusername=gitlab-ci-token\\n' ");
	script_quote(b, j->server_host);
	buf_puts(b, " | git credential reject 2>/dev/null || true\n");
}

/*
 * "scheme://authority/" of a URL, or NULL when it has no authority (file:///).
 * The slash keeps the prefix from matching https://host.evil.example/.
 */
static char *
url_base(const char *url)
{
	const char *p = strstr(url, "://"), *e;

	if (p == NULL || p[3] == '/' || p[3] == '\0')
		return (NULL);
	e = strchr(p + 3, '/');
	if (e == NULL)
		return (xasprintf("%s/", url));
	return (xmemdup(url, (size_t)(e - url) + 1));
}

static void
insteadof(struct buf *c, const char *to, const char *from)
{
	buf_puts(c, "[url \"");
	gitcfg_escape(c, to);
	buf_puts(c, "\"]\n\tinsteadOf = \"");
	gitcfg_escape(c, from);
	buf_puts(c, "\"\n");
}

/*
 * FF_GIT_URLS_WITHOUT_TOKENS: git asks a helper for the password instead of
 * being handed a URL with it, because git passes the URL it fetches on to
 * git-remote-http and fetch-pack as arguments, which every local user can
 * read.  The helper is a shell function that echoes "$CI_JOB_TOKEN" from
 * its environment (echo is a builtin: no argv holds the token, and neither
 * does this file).  Scoped to the server's scheme://host[:port], so a
 * submodule on another host is never sent the token; the empty helper
 * first drops the user's own helpers for that host, so none of them stores
 * the token.  git-lfs asks git credential too, so it gets the same answer.
 */
static void
credential_helper(struct buf *c, const char *server_host)
{
	buf_puts(c, "[credential \"");
	gitcfg_escape(c, server_host);
	buf_puts(c, "\"]\n\thelper = \"\"\n\thelper = \"");
	gitcfg_escape(c, TOKEN_HELPER);
	buf_puts(c, "\"\n\tusername = \"gitlab-ci-token\"\n");
}

/*
 * The old way, with the flag false: the credentialed URL as insteadOf of
 * the plain one, and the same for the server's base URL so that submodules
 * on the same server (relative URLs included) get the credentials too.
 */
static void
token_insteadof(struct buf *c, const struct script_job *j)
{
	char *to, *from;

	insteadof(c, j->repo_url, j->remote_url);
	to = url_base(j->repo_url);
	from = url_base(j->remote_url);
	if (to != NULL && from != NULL && strcmp(to, from) != 0)
		insteadof(c, to, from);
	free(to);
	free(from);
}

/*
 * The external git config: how git gets the job token, and the CA file.
 * Written by printf, a builtin, so the insteadOf URLs are in no process's
 * argv; 0600 through umask in a subshell.
 */
static void
write_ext_conf(struct buf *b, const struct script_job *j)
{
	struct buf c;

	buf_init(&c, BUF_UNLIMITED);
	if (!j->git_urls_without_tokens)
		token_insteadof(&c, j);
	else if (!empty(j->server_host))
		credential_helper(&c, j->server_host);
	if (!empty(j->ca_file) && !empty(j->server_host) &&
	    strchr(j->server_host, '\n') == NULL) {
		buf_puts(&c, "[http \"");
		gitcfg_escape(&c, j->server_host);
		buf_puts(&c, "\"]\n\tsslCAInfo = \"");
		gitcfg_escape(&c, j->ca_file);
		buf_puts(&c, "\"\n");
	}
	buf_puts(b, "(umask 077 && rm -f \"$GLR_EXT_GIT_CONFIG_PATH\" && "
	    "printf '%s' ");
	script_quote(b, c.ptr);
	buf_puts(b, " > \"$GLR_EXT_GIT_CONFIG_PATH\")\n");
	buf_release(&c);
}

static void
write_fetch(struct buf *b, const struct script_job *j)
{
	struct buf cmd;
	size_t i;
	int attempts = j->get_sources_attempts;

	buf_init(&cmd, BUF_UNLIMITED);
	buf_puts(&cmd, "git -c include.path=\"$GLR_EXT_GIT_CONFIG_PATH\"");
	if (!empty(j->user_agent)) {
		char *ua = xasprintf("http.userAgent=%s", j->user_agent);

		buf_puts(&cmd, " -c ");
		script_quote(&cmd, ua);
		free(ua);
	}
	buf_puts(&cmd, " fetch origin --no-recurse-submodules");
	for (i = 0; i < j->refspecs.n; i++) {
		buf_putc(&cmd, ' ');
		script_quote(&cmd, j->refspecs.v[i]);
	}
	if (j->depth > 0)
		buf_printf(&cmd, " --depth %lld", (long long)j->depth);
	words(&cmd, j->fetch_flags != NULL ? j->fetch_flags : "");
	if (j->depth <= 0)
		buf_puts(&cmd, " \"$@\"");

	if (j->depth > 0) {
		char *m = xasprintf("Fetching changes with git depth set to %lld...",
		    (long long)j->depth);
		say(b, FMT_NOTICE, m);
		free(m);
	} else {
		say(b, FMT_NOTICE, "Fetching changes...");
		/* A full fetch into a shallow clone must unshallow it. */
		buf_puts(b, "if [ -f .git/shallow ]; then set -- --unshallow; "
		    "else set --; fi\n");
	}
	if (attempts <= 1) {
		buf_puts(b, cmd.ptr);
		buf_putc(b, '\n');
	} else {
		if (attempts > 10)
			attempts = 10;
		buf_puts(b, "_runner_attempt=1\nuntil ");
		buf_puts(b, cmd.ptr);
		buf_puts(b, "; do\n  _runner_exit_code=$?\n");
		buf_printf(b, "  if [ \"$_runner_attempt\" -ge %d ]; then "
		    "exit $_runner_exit_code; fi\n", attempts);
		buf_puts(b, "  _runner_attempt=$((_runner_attempt + 1))\n  ");
		say(b, FMT_WARNING, "Fetch failed, retrying...");
		buf_puts(b, "done\n");
	}
	buf_release(&cmd);
}

/* git clone of the ref, GIT_CLONE_EXTRA_FLAGS last so they can override. */
static void
write_native_clone(struct buf *b, const struct script_job *j)
{
	char *m;

	if (j->depth > 0)
		m = xasprintf("Cloning repository for %s with git depth set to %lld...",
		    j->ref, (long long)j->depth);
	else if (!empty(j->ref))
		m = xasprintf("Cloning repository for %s...", j->ref);
	else
		m = xstrdup("Cloning repository...");
	say(b, FMT_NOTICE, m);
	free(m);
	buf_puts(b, "git -c include.path=\"$GLR_EXT_GIT_CONFIG_PATH\"");
	if (!empty(j->user_agent)) {
		char *ua = xasprintf("http.userAgent=%s", j->user_agent);

		buf_puts(b, " -c ");
		script_quote(b, ua);
		free(ua);
	}
	buf_puts(b, " clone --no-checkout ");
	script_quote(b, j->remote_url);
	buf_putc(b, ' ');
	path_word(b, j->project_dir, NULL);
	buf_puts(b, " --template ");
	path_word(b, j->tmp_dir, TEMPLATE_DIR);
	if (j->depth > 0)
		buf_printf(b, " --depth %lld", (long long)j->depth);
	if (strncmp(j->ref, "refs/", 5) == 0) {
		buf_puts(b, " --revision ");
		script_quote(b, j->ref);
	} else if (!empty(j->ref)) {
		buf_puts(b, " --branch ");
		script_quote(b, j->ref);
	}
	words(b, j->clone_flags != NULL ? j->clone_flags : "");
	buf_putc(b, '\n');
	write_cd(b, j);
}

static void
write_submodules(struct buf *b, const struct script_job *j)
{
	const char *st = j->submodule_strategy;
	int recursive;
	struct buf m, inner;

	if (empty(st) || strcmp(st, "none") == 0) {
		say(b, FMT_NOTICE, "Skipping Git submodules setup");
		return;
	}
	recursive = strcmp(st, "recursive") == 0;
	if (!recursive && strcmp(st, "normal") != 0) {
		say(b, FMT_ERROR, "Unknown GIT_SUBMODULE_STRATEGY");
		buf_puts(b, "exit 1\n");
		return;
	}
	buf_init(&m, BUF_UNLIMITED);
	buf_printf(&m, "Updating/initializing submodules%s",
	    recursive ? " recursively" : "");
	if (j->submodule_depth > 0)
		buf_printf(&m, " with git depth set to %lld",
		    (long long)j->submodule_depth);
	buf_puts(&m, "...");
	say(b, FMT_NOTICE, m.ptr);
	buf_release(&m);

	buf_printf(b, "git submodule sync%s", recursive ? " --recursive" : "");
	if (!empty(j->submodule_paths)) {
		buf_puts(b, " --");
		words(b, j->submodule_paths);
	}
	buf_putc(b, '\n');
	/* The ext config through -c: it reaches the submodules' fetches. */
	buf_printf(b, "git -c include.path=\"$GLR_EXT_GIT_CONFIG_PATH\" "
	    "submodule update --init%s", recursive ? " --recursive" : "");
	if (j->submodule_depth > 0)
		buf_printf(b, " --depth %lld", (long long)j->submodule_depth);
	words(b, j->submodule_update_flags != NULL ?
	    j->submodule_update_flags : "");
	if (!empty(j->submodule_paths)) {
		buf_puts(b, " --");
		words(b, j->submodule_paths);
	}
	buf_putc(b, '\n');
	if (!empty(j->clean_flags) && strcmp(j->clean_flags, "none") != 0) {
		/* foreach hands its command to a shell: quote the words for it. */
		buf_init(&inner, BUF_UNLIMITED);
		buf_puts(&inner, "git clean");
		words(&inner, j->clean_flags);
		buf_printf(b, "git submodule foreach%s ",
		    recursive ? " --recursive" : "");
		script_quote(b, inner.ptr);
		buf_putc(b, '\n');
		buf_release(&inner);
	}
}

/*
 * GIT_STRATEGY none or empty: no git, but the same notices as a fetch
 * says, because gitlab-runner turns GIT_CHECKOUT and the submodule
 * strategy off for these two (GetGitCheckout, GetSubmoduleStrategy) and
 * still asks a credential helper to forget the token.  The hooks do not
 * run.
 */
static void
no_repository(struct buf *b, const struct script_job *j, int empty_dir)
{
	if (empty_dir) {
		say(b, FMT_NOTICE, "Skipping Git repository setup and creating "
		    "an empty build directory");
		buf_puts(b, "rm -rf ");
		path_word(b, j->project_dir, NULL);
		buf_putc(b, '\n');
	} else
		say(b, FMT_NOTICE, "Skipping Git repository setup");
	buf_puts(b, "mkdir -p ");
	path_word(b, j->project_dir, NULL);
	buf_putc(b, '\n');
	say(b, FMT_NOTICE, "Skipping Git checkout");
	say(b, FMT_NOTICE, "Skipping Git submodules setup");
	write_credential_reject(b, j);
}

static int
get_sources(struct buf *b, const struct script_job *j)
{
	const char *st = j->git_strategy;
	int clone, n = 0;
	char *sha8;

	write_exports(b, j, 0);
	buf_puts(b, "export GIT_TERMINAL_PROMPT=0\nexport GCM_INTERACTIVE=Never\n");

	if (strcmp(st, "none") == 0 || strcmp(st, "empty") == 0) {
		no_repository(b, j, strcmp(st, "empty") == 0);
		return (0);
	}
	clone = strcmp(st, "clone") == 0;
	if (!clone && strcmp(st, "fetch") != 0)
		return (-1);
	/* A newline cannot be written into a git config subsection name. */
	if (strchr(j->repo_url, '\n') != NULL ||
	    strchr(j->remote_url, '\n') != NULL) {
		say(b, FMT_ERROR, "The repository URL holds a newline");
		buf_puts(b, "exit 1\n");
		return (0);
	}

	buf_puts(b, "export GLR_EXT_GIT_CONFIG_PATH=");
	path_word(b, j->tmp_dir, EXT_CONF);
	buf_putc(b, '\n');
	write_commands(b, j, "pre_clone_script", &n, &j->pre_get_sources);

	if (clone) {
		buf_puts(b, "rm -rf ");
		path_word(b, j->project_dir, NULL);
		buf_putc(b, '\n');
	} else {
		/* Left by a job killed in the middle of a git command. */
		static const char *const locks[] = { "index.lock",
		    "shallow.lock", "HEAD.lock", "hooks/post-checkout",
		    "config.lock" };
		struct buf g;
		size_t i;

		buf_init(&g, BUF_UNLIMITED);
		buf_puts(&g, j->project_dir);
		buf_puts(&g, "/.git");
		buf_puts(b, "rm -f");
		for (i = 0; i < sizeof(locks) / sizeof(locks[0]); i++) {
			buf_putc(b, ' ');
			path_word(b, g.ptr, locks[i]);
		}
		buf_puts(b, "\nif [ -d ");
		path_word(b, g.ptr, "refs");
		buf_puts(b, " ]; then find ");
		path_word(b, g.ptr, "refs");
		buf_puts(b, " -name '*.lock' -type f -exec rm -f {} +; fi\n");
		buf_release(&g);
	}

	/* The template: git init copies its config into a new .git. */
	buf_puts(b, "rm -rf ");
	path_word(b, j->tmp_dir, TEMPLATE_DIR);
	buf_puts(b, "\nmkdir -p ");
	path_word(b, j->tmp_dir, TEMPLATE_DIR);
	buf_putc(b, '\n');
	{
		static const char *const cfg[][2] = {
			{ "init.defaultBranch", "none" },
			{ "fetch.recurseSubmodules", "false" },
			{ "credential.interactive", "never" },
			{ "gc.autoDetach", "false" },
		};
		size_t i;

		for (i = 0; i < sizeof(cfg) / sizeof(cfg[0]); i++) {
			buf_puts(b, "git config --file ");
			path_word(b, j->tmp_dir, TEMPLATE_DIR "/config");
			buf_printf(b, " %s %s\n", cfg[i][0], cfg[i][1]);
		}
		buf_puts(b, "git config --file ");
		path_word(b, j->tmp_dir, TEMPLATE_DIR "/config");
		buf_puts(b, " include.path \"$GLR_EXT_GIT_CONFIG_PATH\"\n");
	}
	write_ext_conf(b, j);

	/*
	 * FF_USE_GIT_NATIVE_CLONE: git clone --revision needs git 2.49;
	 * older gits take the init and fetch path, as in gitlab-runner.
	 */
	if (clone && j->native_clone) {
		buf_puts(b, "if printf '%s\\n' 2.49 \"$(git version | cut -d ' ' -f 3)\" | "
		    "sort -V -C; then\n");
		write_native_clone(b, j);
		buf_puts(b, "else\n");
	}
	buf_puts(b, "git init -q --template ");
	path_word(b, j->tmp_dir, TEMPLATE_DIR);
	buf_putc(b, ' ');
	path_word(b, j->project_dir, NULL);
	buf_putc(b, '\n');
	write_cd(b, j);
	buf_puts(b, "if git remote add origin ");
	script_quote(b, j->remote_url);
	buf_puts(b, " >/dev/null 2>&1; then\n  ");
	say(b, FMT_NOTICE, "Created fresh repository.");
	buf_puts(b, "else\n  git remote set-url origin ");
	script_quote(b, j->remote_url);
	buf_puts(b, "\nfi\n");

	write_fetch(b, j);
	if (clone && j->native_clone)
		buf_puts(b, "fi\n");

	if (j->checkout) {
		char *m;

		sha8 = xmemdup(j->sha, strnlen(j->sha, 8));
		m = xasprintf("Checking out %s as detached HEAD (ref is %s)...",
		    sha8, j->ref);
		say(b, FMT_NOTICE, m);
		free(m);
		free(sha8);
		buf_puts(b, "git -c submodule.recurse=false checkout -f -q ");
		script_quote(b, j->sha);
		buf_putc(b, '\n');
		if (!empty(j->clean_flags) && strcmp(j->clean_flags, "none") != 0) {
			buf_puts(b, "git clean");
			words(b, j->clean_flags);
			buf_putc(b, '\n');
		}
	} else
		say(b, FMT_NOTICE, "Skipping Git checkout");

	write_submodules(b, j);
	write_commands(b, j, "post_clone_script", &n, &j->post_get_sources);
	write_credential_reject(b, j);
	return (0);
}

static void
step(struct buf *b, const struct script_job *j)
{
	char *prefix;
	int n = 0;

	write_exports(b, j, 0);
	write_cd(b, j);
	prefix = xasprintf("%s_step", j->step_name);
	if (!empty(j->pre_build_script))
		write_command(b, j, prefix, &n, j->pre_build_script);
	write_commands(b, j, prefix, &n, &j->commands);
	if (!empty(j->post_build_script))
		write_command(b, j, prefix, &n, j->post_build_script);
	free(prefix);
}

/*
 * FF_ENABLE_JOB_CLEANUP, as gitlab-runner's writeCleanupBuildDirectoryScript:
 * a clone or an empty directory goes; a fetch checkout is cleaned and reset
 * so the next job's fetch starts from the commit; with none the directory
 * is the user's, not the runner's, and stays.  The fetch commands run only
 * where the job's .git is: without it (get_sources failed before git init)
 * git would find and clean a repository above the builds directory.
 */
static void
clean_project(struct buf *b, const struct script_job *j)
{
	const char *st = j->submodule_strategy;
	int subs = !empty(st) && (strcmp(st, "normal") == 0 || strcmp(st, "recursive") == 0);
	const char *foreach = !empty(st) && strcmp(st, "recursive") == 0 ?
	    "git submodule foreach --recursive " : "git submodule foreach ";
	int clean = !empty(j->clean_flags) && strcmp(j->clean_flags, "none") != 0;
	struct buf inner;

	if (strcmp(j->git_strategy, "none") == 0) {
		say(b, FMT_NOTICE, "Skipping build directory cleanup step");
		return;
	}
	if (strcmp(j->git_strategy, "fetch") != 0) {
		buf_puts(b, "rm -rf ");
		path_word(b, j->project_dir, NULL);
		buf_putc(b, '\n');
		return;
	}
	buf_puts(b, "if [ -d ");
	path_word(b, j->project_dir, ".git");
	buf_puts(b, " ]; then\n");
	write_cd(b, j);
	buf_init(&inner, BUF_UNLIMITED);
	buf_puts(&inner, "git clean");
	words(&inner, clean ? j->clean_flags : "");
	if (clean) {
		buf_puts(b, inner.ptr);
		buf_putc(b, '\n');
	}
	buf_puts(b, "git reset --hard\n");
	if (subs) {
		/* foreach hands its command to a shell: quote the words for it. */
		if (clean) {
			buf_puts(b, foreach);
			script_quote(b, inner.ptr);
			buf_putc(b, '\n');
		}
		buf_puts(b, foreach);
		script_quote(b, "git reset --hard");
		buf_putc(b, '\n');
	}
	buf_puts(b, "fi\n");
	buf_release(&inner);
}

/*
 * gitlab-runner's writeCleanupScript: forget the token, remove what the
 * runner left in the tmp dir and the file variables, then the project
 * directory itself if FF_ENABLE_JOB_CLEANUP asks.
 */
static void
cleanup(struct buf *b, const struct script_job *j)
{
	size_t i;

	write_credential_reject(b, j);
	buf_puts(b, "rm -f ");
	path_word(b, j->tmp_dir, ENV_FILE);
	buf_putc(b, ' ');
	path_word(b, j->tmp_dir, "masking.db");
	buf_putc(b, ' ');
	path_word(b, j->tmp_dir, EXT_CONF);
	buf_putc(b, '\n');
	for (i = 0; i < j->n_vars; i++) {
		if (!j->vars[i].file || !valid_key(j->vars[i].key))
			continue;
		buf_puts(b, "rm -f ");
		path_word(b, j->tmp_dir, j->vars[i].key);
		buf_putc(b, '\n');
	}
	if (j->job_cleanup)
		clean_project(b, j);
}

static int
transfer(struct buf *b, const struct script_job *j, enum script_stage stage)
{
	switch (stage) {
	case SCRIPT_RESTORE_CACHE:
		return (script_restore_cache(b, j));
	case SCRIPT_DOWNLOAD_ARTIFACTS:
		return (script_download_artifacts(b, j));
	case SCRIPT_ARCHIVE_CACHE:
		return (script_archive_cache(b, j));
	case SCRIPT_UPLOAD_ARTIFACTS:
		return (script_upload_artifacts(b, j));
	default:
		return (0);
	}
}

void
script_say(struct buf *b, const char *fmt, const char *text)
{
	say(b, fmt, text);
}

void
script_prologue(struct buf *b, const struct script_job *j)
{
	write_exports(b, j, 0);
	write_cd(b, j);
}

char *
script_stage(const struct script_job *j, enum script_stage stage)
{
	struct buf body, out;
	int n = 0;

	buf_init(&body, BUF_UNLIMITED);
	switch (stage) {
	case SCRIPT_PREPARE:
		buf_puts(&body, "echo \"Running on $(hostname)...\"\nrm -f ");
		path_word(&body, j->tmp_dir, ENV_FILE);
		buf_putc(&body, ' ');
		path_word(&body, j->tmp_dir, "masking.db");
		buf_putc(&body, '\n');
		break;
	case SCRIPT_GET_SOURCES:
		if (get_sources(&body, j) == -1) {
			buf_reset(&body);
			say(&body, FMT_ERROR, "Unknown GIT_STRATEGY");
			buf_puts(&body, "exit 1\n");
		}
		break;
	case SCRIPT_RESTORE_CACHE:
	case SCRIPT_DOWNLOAD_ARTIFACTS:
	case SCRIPT_ARCHIVE_CACHE:
	case SCRIPT_UPLOAD_ARTIFACTS:
		if (transfer(&body, j, stage) == 0) {
			buf_release(&body);
			return (NULL);
		}
		break;
	case SCRIPT_STEP:
		step(&body, j);
		break;
	case SCRIPT_AFTER_SCRIPT:
		if (j->commands.n == 0) {
			buf_release(&body);
			return (NULL);
		}
		write_exports(&body, j, 0);
		write_cd(&body, j);
		say(&body, FMT_NOTICE, "Running after script...");
		write_commands(&body, j, "after_script_step", &n, &j->commands);
		break;
	case SCRIPT_CLEANUP:
		cleanup(&body, j);
		break;
	default:
		buf_release(&body);
		return (NULL);
	}

	buf_init(&out, BUF_UNLIMITED);
	buf_puts(&out, "trap 'exit 1' TERM\n\n");
	if (j->debug_trace)
		buf_puts(&out, "set -o xtrace\n");
	buf_puts(&out, "case \"$(set -o)\" in *pipefail*) set -o pipefail;; esac\n"
	    "set -o errexit\nset +o noclobber\n");
	buf_puts(&out, "( trap 'exit 1' TERM; eval ");
	script_quote(&out, body.ptr);
	buf_puts(&out, " ) < /dev/null\nexit 0\n");
	buf_release(&body);
	return (buf_detach(&out, NULL));
}

const char *
script_stage_name(const struct script_job *j, enum script_stage stage,
    char *out, size_t size)
{
	static const char *const names[] = {
		[SCRIPT_PREPARE] = "prepare_script",
		[SCRIPT_GET_SOURCES] = "get_sources",
		[SCRIPT_RESTORE_CACHE] = "restore_cache",
		[SCRIPT_DOWNLOAD_ARTIFACTS] = "download_artifacts",
		[SCRIPT_STEP] = NULL,
		[SCRIPT_AFTER_SCRIPT] = "after_script",
		[SCRIPT_ARCHIVE_CACHE] = NULL,
		[SCRIPT_UPLOAD_ARTIFACTS] = NULL,
		[SCRIPT_CLEANUP] = "cleanup_file_variables",
	};

	if (size == 0)
		return (out);
	switch (stage) {
	case SCRIPT_STEP:
		snprintf(out, size, "step_%s", j->step_name);
		break;
	case SCRIPT_ARCHIVE_CACHE:
		snprintf(out, size, "%s", j->on_failure ?
		    "archive_cache_on_failure" : "archive_cache");
		break;
	case SCRIPT_UPLOAD_ARTIFACTS:
		snprintf(out, size, "%s", j->on_failure ?
		    "upload_artifacts_on_failure" : "upload_artifacts_on_success");
		break;
	default:
		if ((size_t)stage < sizeof(names) / sizeof(names[0]) &&
		    names[stage] != NULL)
			snprintf(out, size, "%s", names[stage]);
		else
			snprintf(out, size, "unknown");
	}
	return (out);
}

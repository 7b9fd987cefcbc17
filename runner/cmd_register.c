/*
 * `runner register`: bind this machine to a GitLab runner and write its
 * [[runners]] entry into config.toml (protocol.md 2).
 *
 * Two flows, chosen by the token as gitlab-runner chooses: an
 * authentication token (glrt-..., made in GitLab's UI) is only verified
 * (POST /runners/verify); a legacy registration token creates the runner
 * (POST /runners).  Nothing is written until GitLab has said yes, and a
 * runner created by the legacy flow is deleted again if the command fails
 * or is interrupted afterwards, unless --leave-runner.
 *
 * Flags are gitlab-runner's, with the same environment variables; on a
 * terminal, missing answers are asked for.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "lib/buf.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/xmalloc.h"
#include "runner/toml.h"
#include "runner/commands.h"
#include "runner/config.h"
#include "runner/info.h"
#include "runner/register_flags.h"
#include "runner/system_id.h"

struct reg_opts {
	const char	*config;
	bool		 non_interactive;
	const char	*registration_token;
	const char	*template_config;
	/* Legacy registration only: GitLab keeps these for glrt- runners. */
	const char	*tag_list;
	bool		 run_untagged;
	bool		 locked;
	const char	*access_level;
	int64_t		 maximum_timeout;
	bool		 paused;
	const char	*maintenance_note;
	bool		 leave_runner;
	/* The config.toml keys, one a row of register_flags.def. */
	struct reg_value v[REG_N];
	struct cli_given given;
};

#define RO(f)	offsetof(struct reg_opts, f)
#define LEGACY	" (legacy registration only)"

/* How each type of row is parsed: the option type, its field, its value's name. */
#define REG_CLI_STRING		CLI_STRING, s, "VALUE"
#define REG_CLI_BOOL		CLI_BOOL, b, NULL
#define REG_CLI_INT		CLI_INT, i, "N"
#define REG_CLI_FLOAT		CLI_STRING, s, "NUMBER"
#define REG_CLI_DURATION	CLI_STRING, s, "DURATION"
#define REG_CLI_STRINGS		CLI_STRINGS, v, "VALUE"
#define REG_CLI_INTS		CLI_STRINGS, v, "N"
#define REG_CLI_MAP		CLI_STRINGS, v, "KEY:VALUE"
#define REG_CLI_MAP_BOOL	CLI_STRINGS, v, "KEY:BOOL"
#define REG_CLI_MAP_INT		CLI_STRINGS, v, "KEY:N"
#define REG_OPT_(flag, sh, env, id, help, cli, field, arg) \
	CLI_OPT(flag, sh, cli, env, RO(v[REG_##id].field), arg, help),
#define REG_OPT(...)		REG_OPT_(__VA_ARGS__)

/*
 * gitlab-runner's flags, with its environment variables and defaults:
 * register's own, then one per row of register_flags.def.
 */
static const struct cli_option register_options[] = {
	CMD_OPT_CONFIG(struct reg_opts, config),
	CLI_OPT("non-interactive", 'n', CLI_BOOL, "REGISTER_NON_INTERACTIVE",
	    RO(non_interactive), NULL, "ask nothing, also on a terminal"),
	CLI_OPT("registration-token", 'r', CLI_STRING, "REGISTRATION_TOKEN",
	    RO(registration_token), "TOKEN", "a legacy registration token"),
	CLI_OPT("name", 0, CLI_STRING, NULL, RO(v[REG_DESCRIPTION].s), "NAME",
	    "the same as --description (default: the host name)"),
	CLI_OPT("template-config", 0, CLI_STRING, "TEMPLATE_CONFIG_FILE", RO(template_config),
	    "FILE", "a config.toml with one [[runners]] entry: what the flags do not give"),
	CLI_OPT("tag-list", 0, CLI_STRING, "RUNNER_TAG_LIST", RO(tag_list), "TAGS",
	    "comma-separated tags" LEGACY),
	CLI_OPT("run-untagged", 0, CLI_BOOL, "REGISTER_RUN_UNTAGGED", RO(run_untagged), NULL,
	    "take untagged jobs too" LEGACY),
	CLI_OPT("locked", 0, CLI_BOOL, "REGISTER_LOCKED", RO(locked), NULL,
	    "lock the runner to its projects" LEGACY, .def = "true"),
	CLI_OPT("access-level", 0, CLI_STRING, "REGISTER_ACCESS_LEVEL", RO(access_level),
	    "LEVEL", "not_protected or ref_protected" LEGACY),
	CLI_OPT("maximum-timeout", 0, CLI_INT, "REGISTER_MAXIMUM_TIMEOUT",
	    RO(maximum_timeout), "SECONDS", "the longest a job may run" LEGACY),
	CLI_OPT("paused", 0, CLI_BOOL, "REGISTER_PAUSED", RO(paused), NULL,
	    "register it paused" LEGACY),
	CLI_OPT("maintenance-note", 0, CLI_STRING, "REGISTER_MAINTENANCE_NOTE",
	    RO(maintenance_note), "TEXT", "a note for the admins" LEGACY),
	CLI_OPT("leave-runner", 0, CLI_BOOL, "REGISTER_LEAVE_RUNNER", RO(leave_runner), NULL,
	    "keep a legacy runner in GitLab when registering fails afterwards"),
#define REG_FLAG(id, flag, sh, env, path, type, zero, help) \
	REG_OPT(flag, sh, env, id, help, REG_CLI_##type)
#define REG_KEY(id, path, type)
#include "runner/register_flags.def"
	CLI_END,
};

/*
 * Ask on the terminal, as gitlab-runner's askOnce: the question, then the
 * answer up to the end of the line, trimmed.  The answer is kept in
 * answers; NULL at the end of input.
 */
static const char *
ask_line(struct strv *answers, const char *question)
{
	char line[4096];
	size_t n;

	printf("%s\n", question);
	fflush(stdout);
	if (fgets(line, sizeof(line), stdin) == NULL)
		return NULL;
	n = strlen(line);
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
		line[--n] = '\0';
	strv_push(answers, line);
	return answers->v[answers->n - 1];
}

/* Ask for a value the flags did not give (only then). */
static const char *
ask(struct strv *answers, const char *question, const char *current)
{
	if (current != NULL && *current != '\0')
		return current;
	return ask_line(answers, question);
}

struct reg_state {
	struct api_session	*session;
	enum api_result		 result;
	char			*message;
	struct api_runner_token	 token;
	bool			 done;
};

static void
on_token(enum api_result result, const struct api_answer *answer,
    struct api_runner_token *token, void *data)
{
	struct reg_state *st = data;

	st->result = result;
	st->message = xstrdup(answer->message);
	if (token != NULL) {
		st->token = *token;
		/* Take the strings: api releases what is left in *token. */
		token->token = NULL;
	}
	st->done = true;
	st->session->pending--;
}

static void
on_unregistered(enum api_result result, const struct api_answer *answer, void *data)
{
	struct api_session *s = data;

	if (result == API_OK)
		log_info("the runner registered by this command was deleted from GitLab again");
	else
		log_error("could not delete the runner this command registered (%s): "
		    "delete it in GitLab by hand", answer->message);
	s->pending--;
}

/* Undo a legacy registration: the runner exists in GitLab but nowhere else. */
static void
unregister_created(struct api_session *s, const char *url, const struct reg_opts *o,
    const char *token)
{
	struct api_creds creds = {
		.url = url, .token = token, .tls_ca_file = o->v[REG_TLS_CA_FILE].s,
		.tls_cert_file = o->v[REG_TLS_CERT_FILE].s, .tls_key_file = o->v[REG_TLS_KEY_FILE].s,
	};

	if (o->leave_runner) {
		log_warnx("--leave-runner: the runner stays registered in GitLab");
		return;
	}
	s->pending++;
	api_unregister(s->api, &creds, on_unregistered, s);
	api_session_wait(s);
}

static void
set_string(struct toml_value *t, const char *key, const char *value)
{
	toml_table_set(t, key, strlen(key), toml_new_string(value, strlen(value)));
}

static struct toml_value *
new_section(struct toml_value *parent, const char *key)
{
	struct toml_value *t = toml_new_table(TOML_TABLE_HEADER);

	toml_table_set(parent, key, strlen(key), t);
	return t;
}

/* A new file starts with gitlab-runner's globals. */
static void
add_defaults(struct config *cfg)
{
	struct toml_value *doc = cfg->doc;

	toml_table_set(doc, "concurrent", 10, toml_new_integer(1));
	toml_table_set(doc, "check_interval", 14, toml_new_integer(0));
	set_string(doc, "connection_max_age", "15m0s");
	toml_table_set(doc, "shutdown_timeout", 16, toml_new_integer(0));
	toml_table_set(new_section(doc, "session_server"), "session_timeout", 15,
	    toml_new_integer(1800));
}

static bool
is_auth_token(const char *t)
{
	return t != NULL && strncmp(t, "glrt-", 5) == 0;
}

/* Flags that only mean something to the legacy flow, given explicitly. */
static const char *
legacy_only_flag(const struct cli_command *cmd, const struct reg_opts *o)
{
	static const char *const names[] = { "tag-list", "run-untagged", "locked",
	    "access-level", "maximum-timeout", "paused", "maintenance-note" };
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (cli_given(cmd, o, names[i]))
			return names[i];
	return NULL;
}

/*
 * --template-config: a config.toml read as any (configTemplate.MergeTo);
 * its one [[runners]] entry, or NULL with *cause set.
 */
static const struct toml_value *
load_template(const char *file, struct config *tcfg, char **cause)
{
	const struct toml_value *runners;
	char *why = NULL;

	if (config_load(tcfg, file, CONFIG_QUIET, &why) != 0) {
		*cause = xasprintf("couldn't load configuration template file: %s", why);
		free(why);
		return NULL;
	}
	runners = toml_get(tcfg->doc, "runners");
	if (runners == NULL || runners->type != TOML_ARRAY || runners->u.array.len != 1 ||
	    runners->u.array.items[0]->type != TOML_TABLE) {
		*cause = xasprintf("%s: configuration template must contain exactly one "
		    "[[runners]] entry", file);
		return NULL;
	}
	return runners->u.array.items[0];
}

/*
 * The executor, asked for until it is one of gitlab-runner's names
 * (askExecutor).  Without a terminal a wrong or missing one is an error.
 */
static const char *
choose_executor(struct reg_opts *o, bool interactive, struct strv *answers)
{
	const char *e = o->v[REG_EXECUTOR].s;
	char question[256];

	snprintf(question, sizeof(question), "Enter an executor: %s:", reg_executor_names);
	for (;;) {
		if (e != NULL && *e != '\0' && reg_executor_known(e))
			return e;
		if (!interactive) {
			if (e == NULL || *e == '\0')
				log_error("register: the executor is needed: give --executor "
				    "shell (or run on a terminal to be asked)");
			else
				log_error("register: Invalid executor specified: \"%s\" (one of: "
				    "%s)", e, reg_executor_names);
			return NULL;
		}
		if (e != NULL && *e != '\0')
			log_error("Invalid executor specified");
		if ((e = ask_line(answers, question)) == NULL)
			return NULL;
	}
}

/* One value an executor needs (gitlab-runner's ask with a prompt). */
static bool
need(struct reg_opts *o, enum reg_id id, bool interactive, struct strv *answers,
    const char *question, bool optional)
{
	struct reg_value *v = &o->v[id];
	const char *a;

	if (v->s != NULL && *v->s != '\0')
		return true;
	if (!interactive) {
		if (optional)
			return true;
		log_error("register: --%s is needed for the %s executor", reg_rows[id].flag,
		    o->v[REG_EXECUTOR].s);
		return false;
	}
	do {
		if ((a = ask_line(answers, question)) == NULL)
			return false;
	} while (*a == '\0' && !optional);
	if (*a != '\0') {
		v->s = a;
		v->given = true;
	}
	return true;
}

/* Has --docker-volumes a volume ending in dir (askDocker, askDockerWindows)? */
static bool
has_volume(const struct reg_value *v, const char *dir, bool windows)
{
	const char *p;
	size_t i;

	for (i = 0; i < v->v.n; i++) {
		p = strrchr(v->v.v[i], ':');
		if (windows ? strstr(v->v.v[i], dir) != NULL :
		    strcmp(p != NULL ? p + 1 : v->v.v[i], dir) == 0)
			return true;
	}
	return false;
}

/* What each executor asks for, in gitlab-runner's order (askExecutorOptions). */
static bool
executor_options(struct reg_opts *o, bool interactive, struct strv *answers)
{
	const char *e = o->v[REG_EXECUTOR].s;
	bool windows = strcmp(e, "docker-windows") == 0;
	struct reg_value *vol = &o->v[REG_DOCKER_VOLUMES];

	if (windows && (o->v[REG_SHELL].s == NULL || *o->v[REG_SHELL].s == '\0')) {
		o->v[REG_SHELL].s = "pwsh";
		o->v[REG_SHELL].given = true;
	}
	if (strncmp(e, "docker", 6) == 0) {
		if (!need(o, REG_DOCKER_IMAGE, interactive, answers, windows ?
		    "Enter the default Docker image (for example, "
		    "mcr.microsoft.com/windows/servercore:1809):" :
		    "Enter the default Docker image (for example, ruby:3.3):", false))
			return false;
		if (windows ? !has_volume(vol, "c:\\cache", true) :
		    !has_volume(vol, "/cache", false) && !o->v[REG_DOCKER_DISABLE_CACHE].b) {
			strv_push(&vol->v, windows ? "c:\\cache" : "/cache");
			vol->given = true;
		}
		return true;
	}
	if (strcmp(e, "parallels") == 0 && !need(o, REG_PARALLELS_BASE_NAME, interactive,
	    answers, "Enter the Parallels VM (for example, my-vm):", false))
		return false;
	if (strcmp(e, "virtualbox") == 0 && !need(o, REG_VIRTUALBOX_BASE_NAME, interactive,
	    answers, "Enter the VirtualBox VM (for example, my-vm):", false))
		return false;
	if ((strcmp(e, "ssh") == 0 || strcmp(e, "parallels") == 0) &&
	    (!need(o, REG_SSH_HOST, interactive, answers,
	    "Enter the SSH server address (for example, my.server.com):", false) ||
	    !need(o, REG_SSH_PORT, interactive, answers,
	    "Enter the SSH server port (for example, 22):", true)))
		return false;
	if ((strcmp(e, "ssh") == 0 || strcmp(e, "virtualbox") == 0) &&
	    (!need(o, REG_SSH_USER, interactive, answers,
	    "Enter the SSH user (for example, root):", false) ||
	    !need(o, REG_SSH_PASSWORD, interactive, answers,
	    "Enter the SSH password (for example, docker.io):", true) ||
	    !need(o, REG_SSH_IDENTITY_FILE, interactive, answers,
	    "Enter the path to the SSH identity file (for example, /home/user/.ssh/id_rsa):",
	    true)))
		return false;
	return true;
}

/* Mark the rows given on the command line or in the environment. */
static void
mark_given(const struct cli_command *cmd, struct reg_opts *o)
{
	size_t i;

	for (i = 0; i < REG_N; i++)
		if (reg_rows[i].flag != NULL)
			o->v[i].given = cli_given(cmd, o, reg_rows[i].flag);
	if (cli_given(cmd, o, "name"))
		o->v[REG_DESCRIPTION].given = true;
}

static void
set_value(struct reg_opts *o, enum reg_id id, const char *s)
{
	o->v[id].s = s;
	o->v[id].given = true;
}

static int
register_run(const struct cli_command *cmd, void *opts)
{
	struct reg_opts *o = opts;
	struct config cfg;
	struct api_session s;
	struct reg_state st;
	struct runner_info ri;
	struct api_creds creds = { 0 };
	struct api_register_params params;
	struct toml_value *runners, *entry;
	struct config tcfg;
	const struct toml_value *tmpl = NULL;
	struct strv answers = { 0 };
	char *path = NULL, *cause = NULL, *dir = NULL, *system_id = NULL;
	char hostname[256] = "";
	const char *url, *token, *name, *executor, *bad;
	bool legacy, interactive, created = false;
	size_t i;
	int rc = 1;

	memset(&st, 0, sizeof(st));
	memset(&tcfg, 0, sizeof(tcfg));
	mark_given(cmd, o);
	path = cmd_config_path(o->config);
	if (config_load(&cfg, path, CONFIG_ALLOW_MISSING, &cause) != 0) {
		log_error("%s", cause);
		goto out_nocfg;
	}
	if (o->access_level != NULL && *o->access_level != '\0' &&
	    strcmp(o->access_level, "not_protected") != 0 &&
	    strcmp(o->access_level, "ref_protected") != 0) {
		log_error("register: --access-level \"%s\" is not valid: not_protected or "
		    "ref_protected", o->access_level);
		goto out;
	}
	if (reg_values_check(o->v, &cause) != 0) {
		rc = cli_usage_error(cmd, "register: %s", cause);
		goto out;
	}
	if (o->template_config != NULL && *o->template_config != '\0') {
		log_info("Merging configuration from template file \"%s\"", o->template_config);
		if ((tmpl = load_template(o->template_config, &tcfg, &cause)) == NULL) {
			log_error("register: %s", cause);
			goto out;
		}
	}

	interactive = !o->non_interactive && isatty(STDIN_FILENO);
	token = o->v[REG_TOKEN].s != NULL && *o->v[REG_TOKEN].s ? o->v[REG_TOKEN].s :
	    o->registration_token;
	if (interactive) {
		url = ask(&answers, "Enter the GitLab instance URL (for example, "
		    "https://gitlab.com/):", o->v[REG_URL].s);
		token = ask(&answers, "Enter the registration token:", token);
	} else
		url = o->v[REG_URL].s;
	if (url == NULL || *url == '\0' || token == NULL || *token == '\0') {
		log_error("register: %s is needed: give it as a flag%s",
		    url == NULL || *url == '\0' ? "the GitLab URL (--url)" :
		    "a token (--token glrt-... or --registration-token)",
		    interactive ? "" : " (or run on a terminal to be asked)");
		goto out;
	}
	log_secret_add(token);
	legacy = !is_auth_token(token) && (o->v[REG_TOKEN].s == NULL || *o->v[REG_TOKEN].s == '\0');

	if (is_auth_token(token) && (bad = legacy_only_flag(cmd, o)) != NULL) {
		if (o->registration_token != NULL && strcmp(token, o->registration_token) == 0)
			log_warnx("an authentication token was given with --registration-token: "
			    "--%s and the other server-side settings are ignored; set them on "
			    "the runner in GitLab", bad);
		else {
			log_error("register: --%s cannot be used with an authentication token "
			    "(glrt-...): GitLab keeps that setting; set it on the runner in "
			    "GitLab and try again without it", bad);
			goto out;
		}
	}
	if (gethostname(hostname, sizeof(hostname) - 1) != 0)
		snprintf(hostname, sizeof(hostname), "runner");
	name = o->v[REG_DESCRIPTION].s;
	/* Without a terminal, all is known now: refuse before GitLab hears of it. */
	if (!interactive && (choose_executor(o, false, &answers) == NULL ||
	    !executor_options(o, false, &answers)))
		goto out;
	if (legacy && interactive) {
		/* gitlab-runner's order: description, tags, maintenance note. */
		name = ask(&answers, "Enter a description for the runner:", name);
		o->tag_list = ask(&answers, "Enter tags for the runner (comma-separated):",
		    o->tag_list);
		o->maintenance_note = ask(&answers, "Enter optional maintenance note for the "
		    "runner:", o->maintenance_note);
		if (name == NULL || o->tag_list == NULL || o->maintenance_note == NULL)
			goto out;
	}
	if (name == NULL || *name == '\0')
		name = hostname;
	executor = o->v[REG_EXECUTOR].s;
	if (o->v[REG_SHELL].s != NULL && *o->v[REG_SHELL].s &&
	    !config_shell_supported(o->v[REG_SHELL].s))
		log_warnx("shell \"%s\" is not supported by this build (supported: bash, sh)",
		    o->v[REG_SHELL].s);

	dir = config_dir(&cfg);
	cmd_session_open(&s, &cfg);
	st.session = &s;
	creds.url = url;
	creds.token = token;
	creds.tls_ca_file = o->v[REG_TLS_CA_FILE].s;
	creds.tls_cert_file = o->v[REG_TLS_CERT_FILE].s;
	creds.tls_key_file = o->v[REG_TLS_KEY_FILE].s;
	runner_info_init(&ri, &cfg, NULL, false);
	ri.info.executor = executor;
	ri.info.shell = o->v[REG_SHELL].s;

	if (legacy) {
		log_warnx("registration tokens are deprecated by GitLab: create the runner in "
		    "GitLab and register it with --token glrt-...");
		memset(&params, 0, sizeof(params));
		params.description = name;
		params.maintenance_note = o->maintenance_note;
		params.tag_list = o->tag_list;
		params.run_untagged = o->run_untagged || o->tag_list == NULL || *o->tag_list == '\0';
		params.locked = o->locked;
		params.access_level = o->access_level;
		params.maximum_timeout = o->maximum_timeout;
		params.paused = o->paused;
		params.info = &ri.info;
		s.pending++;
		api_register(s.api, &creds, &params, on_token, &st);
		api_session_wait(&s);
		if (st.result == API_OK && (st.token.token == NULL || *st.token.token == '\0')) {
			st.result = API_FAILED;
			free(st.message);
			st.message = xstrdup("GitLab's answer has no token");
		}
		created = st.result == API_OK;
	} else {
		system_id = system_id_load(dir);
		if (!is_auth_token(token))
			log_info("a token that is not an authentication token was given: "
			    "verifying it (use -r to register with a registration token)");
		s.pending++;
		api_verify(s.api, &creds, &ri.info, system_id, on_token, &st);
		api_session_wait(&s);
		if (st.result == API_OK && is_auth_token(token) && st.token.id == 0) {
			st.result = API_FAILED;
			free(st.message);
			st.message = xstrdup("GitLab did not say which runner this token belongs to");
		}
	}

	if (st.result != API_OK) {
		log_error("register: %s %s: %s%s", legacy ? "registering the runner with" :
		    "verifying the token with", url, st.message,
		    st.result == API_FORBIDDEN ? (legacy ?
		    " (check the registration token)" :
		    " (the token is wrong, expired or revoked: create the runner again in GitLab)") :
		    st.result == API_GONE ? " (this GitLab no longer accepts registration "
		    "tokens: create the runner in GitLab and use --token glrt-...)" : "");
		goto out_session;
	}
	if (!s.interrupted && interactive) {
		/* After GitLab said yes, as gitlab-runner asks: the name, the executor. */
		if (!legacy) {
			name = ask(&answers, "Enter a name for the runner. This is stored only "
			    "in the local config.toml file:", o->v[REG_DESCRIPTION].s);
			if (name != NULL && *name == '\0')
				name = hostname;
		}
		if (name == NULL || (executor = choose_executor(o, true, &answers)) == NULL ||
		    (set_value(o, REG_EXECUTOR, executor), !executor_options(o, true, &answers))) {
			log_error("register: no answer; nothing was written");
			if (created)
				unregister_created(&s, url, o, st.token.token);
			goto out_session;
		}
	}
	if (s.interrupted) {
		log_error("register: interrupted; nothing was written");
		if (created)
			unregister_created(&s, url, o, st.token.token);
		rc = 130;
		goto out_session;
	}
	if (!config_executor_supported(executor))
		log_warnx("executor \"%s\" is not supported by this build (supported: shell): "
		    "the runner is registered, but `run` will skip it", executor);

	/* Write: keep the file as it was, add one entry. */
	for (i = 0; i < cfg.n_runners; i++)
		if (strcmp(cfg.runners[i].token, legacy ? st.token.token : token) == 0)
			log_warnx("a runner with this token is already in %s (%s)", path,
			    cfg.runners[i].name);
	if (!cfg.exists)
		add_defaults(&cfg);
	if ((runners = toml_get(cfg.doc, "runners")) == NULL) {
		runners = toml_new_array();
		runners->u.array.of_tables = true;
		toml_table_set(cfg.doc, "runners", 7, runners);
	}
	set_value(o, REG_DESCRIPTION, name);
	set_value(o, REG_URL, url);
	set_value(o, REG_TOKEN, legacy ? st.token.token : token);
	o->v[REG_K_ID].i = st.token.id;
	o->v[REG_K_ID].given = true;
	o->v[REG_K_TOKEN_OBTAINED_AT].i = clock_wall();
	o->v[REG_K_TOKEN_OBTAINED_AT].given = true;
	o->v[REG_K_TOKEN_EXPIRES_AT].i = st.token.expires_at;
	o->v[REG_K_TOKEN_EXPIRES_AT].given = st.token.expires;
	entry = reg_entry_build(o->v, executor, tmpl);
	toml_array_push(runners, entry);
	if (config_save(&cfg, &cause) != 0) {
		log_error("register: %s; the file was left as it was", cause);
		if (created)
			unregister_created(&s, url, o, st.token.token);
		goto out_session;
	}
	if (cfg.exists && cfg.concurrent < o->v[REG_LIMIT].i)
		log_warnx("the runner's limit (%" PRId64 ") is larger than the global "
		    "concurrent (%" PRId64 "), which takes precedence", o->v[REG_LIMIT].i,
		    cfg.concurrent);
	if (cfg.exists && cfg.concurrent < o->v[REG_REQUEST_CONCURRENCY].i)
		log_warnx("the runner's request_concurrency (%" PRId64 ") is larger than the "
		    "global concurrent (%" PRId64 "), which takes precedence",
		    o->v[REG_REQUEST_CONCURRENCY].i, cfg.concurrent);
	log_info("Runner registered successfully. Feel free to start it, but if it's "
	    "running already the config should be automatically reloaded!");
	log_info("Configuration (with the authentication token) was saved in \"%s\"", path);
	rc = 0;

out_session:
	runner_info_release(&ri);
	api_session_close(&s);
out:
	config_release(&tcfg);
	config_release(&cfg);
out_nocfg:
	api_runner_token_release(&st.token);
	strv_release(&answers);
	free(st.message);
	free(system_id);
	free(dir);
	free(path);
	free(cause);
	return rc;
}

const struct cli_command cmd_register_entry = {
	.name = "register",
	.summary = "Register a runner with GitLab and save it in config.toml",
	.usage = "runner register [-n] [-c FILE] --url URL (--token TOKEN | "
	    "--registration-token TOKEN) --executor EXECUTOR [OPTIONS]",
	.help = "Register a runner with GitLab and save it in config.toml.\nFlags are "
	    "gitlab-runner's; each also reads the environment variable gitlab-runner reads.",
	.options = register_options,
	.opts_size = sizeof(struct reg_opts),
	.given = offsetof(struct reg_opts, given),
	.run = register_run,
};

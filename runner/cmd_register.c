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
#include "runner/commands.h"
#include "runner/config.h"
#include "runner/info.h"
#include "runner/system_id.h"

struct reg_opts {
	const char	*config;
	bool		 non_interactive;
	const char	*url;
	const char	*token;
	const char	*registration_token;
	const char	*name;
	const char	*executor;
	const char	*shell;
	const char	*builds_dir;
	const char	*cache_dir;
	const char	*clone_url;
	struct strv	 env;
	int64_t		 limit;
	int64_t		 output_limit;
	int64_t		 request_concurrency;
	const char	*pre_get_sources_script;
	const char	*post_get_sources_script;
	const char	*pre_build_script;
	const char	*post_build_script;
	bool		 debug_trace_disabled;
	const char	*tls_ca_file;
	const char	*tls_cert_file;
	const char	*tls_key_file;
	/* Legacy registration only: GitLab keeps these for glrt- runners. */
	const char	*tag_list;
	bool		 run_untagged;
	bool		 locked;
	const char	*access_level;
	int64_t		 maximum_timeout;
	bool		 paused;
	const char	*maintenance_note;
	bool		 leave_runner;
	const char	*custom_config_exec;
	const char	*custom_prepare_exec;
	const char	*custom_run_exec;
	const char	*custom_cleanup_exec;
	bool		 custom_build_dir_enabled;
	struct cli_given given;
};

#define RO(f)	offsetof(struct reg_opts, f)
#define LEGACY	" (legacy registration only)"

/* gitlab-runner's flags, with its environment variables and defaults. */
static const struct cli_option register_options[] = {
	CMD_OPT_CONFIG(struct reg_opts, config),
	CLI_OPT("non-interactive", 'n', CLI_BOOL, "REGISTER_NON_INTERACTIVE",
	    RO(non_interactive), NULL, "ask nothing, also on a terminal"),
	CLI_OPT("url", 'u', CLI_STRING, "CI_SERVER_URL", RO(url), "URL",
	    "the GitLab instance URL"),
	CLI_OPT("token", 't', CLI_STRING, "CI_SERVER_TOKEN", RO(token), "TOKEN",
	    "the runner's authentication token (glrt-...)"),
	CLI_OPT("registration-token", 'r', CLI_STRING, "REGISTRATION_TOKEN",
	    RO(registration_token), "TOKEN", "a legacy registration token"),
	CLI_OPT("name", 0, CLI_STRING, "RUNNER_NAME", RO(name), "NAME",
	    "the runner's name (default: the host name)"),
	CLI_OPT("description", 0, CLI_STRING, NULL, RO(name), "NAME", "the same as --name"),
	CLI_OPT("executor", 0, CLI_STRING, "RUNNER_EXECUTOR", RO(executor), "EXECUTOR",
	    "how jobs run: shell"),
	CLI_OPT("shell", 0, CLI_STRING, "RUNNER_SHELL", RO(shell), "SHELL", "bash or sh"),
	CLI_OPT("builds-dir", 0, CLI_STRING, "RUNNER_BUILDS_DIR", RO(builds_dir), "DIR",
	    "where builds go"),
	CLI_OPT("cache-dir", 0, CLI_STRING, "RUNNER_CACHE_DIR", RO(cache_dir), "DIR",
	    "where caches go"),
	CLI_OPT("clone-url", 0, CLI_STRING, "CLONE_URL", RO(clone_url), "URL",
	    "clone from this URL instead of GitLab's"),
	CLI_OPT("env", 0, CLI_STRINGS, NULL, RO(env), "NAME=VALUE",
	    "a variable for every job (repeat for more)"),
	CLI_OPT("limit", 0, CLI_INT, "RUNNER_LIMIT", RO(limit), "N",
	    "at most N jobs at once (0: no limit)"),
	CLI_OPT("output-limit", 0, CLI_INT, "RUNNER_OUTPUT_LIMIT", RO(output_limit), "KB",
	    "the most job log to send"),
	CLI_OPT("request-concurrency", 0, CLI_INT, "RUNNER_REQUEST_CONCURRENCY",
	    RO(request_concurrency), "N", "job requests in flight at once"),
	CLI_OPT("pre-get-sources-script", 0, CLI_STRING, "RUNNER_PRE_GET_SOURCES_SCRIPT",
	    RO(pre_get_sources_script), "SCRIPT", "run before the sources are fetched"),
	CLI_OPT("post-get-sources-script", 0, CLI_STRING, "RUNNER_POST_GET_SOURCES_SCRIPT",
	    RO(post_get_sources_script), "SCRIPT", "run after the sources are fetched"),
	CLI_OPT("pre-build-script", 0, CLI_STRING, "RUNNER_PRE_BUILD_SCRIPT",
	    RO(pre_build_script), "SCRIPT", "run before the job's script"),
	CLI_OPT("post-build-script", 0, CLI_STRING, "RUNNER_POST_BUILD_SCRIPT",
	    RO(post_build_script), "SCRIPT", "run after the job's script"),
	CLI_OPT("debug-trace-disabled", 0, CLI_BOOL, "RUNNER_DEBUG_TRACE_DISABLED",
	    RO(debug_trace_disabled), NULL, "refuse CI_DEBUG_TRACE"),
	CLI_OPT("tls-ca-file", 0, CLI_STRING, "CI_SERVER_TLS_CA_FILE", RO(tls_ca_file),
	    "FILE", "the CA certificates GitLab's certificate is checked against"),
	CLI_OPT("tls-cert-file", 0, CLI_STRING, "CI_SERVER_TLS_CERT_FILE", RO(tls_cert_file),
	    "FILE", "a client certificate for GitLab"),
	CLI_OPT("tls-key-file", 0, CLI_STRING, "CI_SERVER_TLS_KEY_FILE", RO(tls_key_file),
	    "FILE", "its private key"),
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
	CLI_OPT("custom-config-exec", 0, CLI_STRING, "CUSTOM_CONFIG_EXEC",
	    RO(custom_config_exec), "PATH", "custom executor: config stage"),
	CLI_OPT("custom-prepare-exec", 0, CLI_STRING, "CUSTOM_PREPARE_EXEC",
	    RO(custom_prepare_exec), "PATH", "custom executor: prepare stage"),
	CLI_OPT("custom-run-exec", 0, CLI_STRING, "CUSTOM_RUN_EXEC", RO(custom_run_exec),
	    "PATH", "custom executor: run stage"),
	CLI_OPT("custom-cleanup-exec", 0, CLI_STRING, "CUSTOM_CLEANUP_EXEC",
	    RO(custom_cleanup_exec), "PATH", "custom executor: cleanup stage"),
	CLI_OPT("custom_build_dir-enabled", 0, CLI_BOOL, "CUSTOM_BUILD_DIR_ENABLED",
	    RO(custom_build_dir_enabled), NULL, "let jobs choose their build directory"),
	CLI_END,
};

/* Ask on the terminal for a value the flags did not give. */
static const char *
ask(const char *question, const char *current, char **owned)
{
	char line[4096];
	size_t n;

	if (current != NULL && *current != '\0')
		return current;
	printf("%s\n", question);
	fflush(stdout);
	if (fgets(line, sizeof(line), stdin) == NULL)
		return NULL;
	n = strlen(line);
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
		line[--n] = '\0';
	free(*owned);
	*owned = xstrdup(line);
	return *owned;
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
		.url = url, .token = token, .tls_ca_file = o->tls_ca_file,
		.tls_cert_file = o->tls_cert_file, .tls_key_file = o->tls_key_file,
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

/* The [[runners]] entry, laid out as gitlab-runner writes it (protocol.md 2.7). */
static struct toml_value *
build_entry(const struct cli_command *cmd, const struct reg_opts *o, const char *name,
    const char *url,
    const char *token, const struct api_runner_token *got)
{
	struct toml_value *t = toml_new_table(TOML_TABLE_HEADER), *cache, *s3, *arr;
	size_t i;

	set_string(t, "name", name);
	set_string(t, "url", url);
	toml_table_set(t, "id", 2, toml_new_integer(got->id));
	set_string(t, "token", token);
	config_set_time(t, "token_obtained_at", clock_wall(), true);
	config_set_time(t, "token_expires_at", got->expires_at, got->expires);
	if (o->tls_ca_file != NULL && *o->tls_ca_file)
		set_string(t, "tls-ca-file", o->tls_ca_file);
	if (o->tls_cert_file != NULL && *o->tls_cert_file)
		set_string(t, "tls-cert-file", o->tls_cert_file);
	if (o->tls_key_file != NULL && *o->tls_key_file)
		set_string(t, "tls-key-file", o->tls_key_file);
	set_string(t, "executor", o->executor);
	if (o->shell != NULL && *o->shell)
		set_string(t, "shell", o->shell);
	if (o->builds_dir != NULL && *o->builds_dir)
		set_string(t, "builds_dir", o->builds_dir);
	if (o->cache_dir != NULL && *o->cache_dir)
		set_string(t, "cache_dir", o->cache_dir);
	if (o->clone_url != NULL && *o->clone_url)
		set_string(t, "clone_url", o->clone_url);
	if (o->env.n > 0) {
		arr = toml_new_array();
		for (i = 0; i < o->env.n; i++)
			toml_array_push(arr, toml_new_string(o->env.v[i], strlen(o->env.v[i])));
		toml_table_set(t, "environment", 11, arr);
	}
	if (o->limit != 0)
		toml_table_set(t, "limit", 5, toml_new_integer(o->limit));
	if (o->output_limit != 0)
		toml_table_set(t, "output_limit", 12, toml_new_integer(o->output_limit));
	if (o->request_concurrency != 0)
		toml_table_set(t, "request_concurrency", 19,
		    toml_new_integer(o->request_concurrency));
	if (o->pre_get_sources_script != NULL && *o->pre_get_sources_script)
		set_string(t, "pre_get_sources_script", o->pre_get_sources_script);
	if (o->post_get_sources_script != NULL && *o->post_get_sources_script)
		set_string(t, "post_get_sources_script", o->post_get_sources_script);
	if (o->pre_build_script != NULL && *o->pre_build_script)
		set_string(t, "pre_build_script", o->pre_build_script);
	if (o->post_build_script != NULL && *o->post_build_script)
		set_string(t, "post_build_script", o->post_build_script);
	if (o->debug_trace_disabled)
		toml_table_set(t, "debug_trace_disabled", 20, toml_new_bool(true));
	if (cli_given(cmd, o, "custom_build_dir-enabled"))
		toml_table_set(new_section(t, "custom_build_dir"), "enabled", 7,
		    toml_new_bool(o->custom_build_dir_enabled));
	cache = new_section(t, "cache");
	toml_table_set(cache, "MaxUploadedArchiveSize", 22, toml_new_integer(0));
	s3 = new_section(cache, "s3");
	toml_table_set(s3, "AssumeRoleMaxConcurrency", 24, toml_new_integer(0));
	new_section(cache, "gcs");
	new_section(cache, "azure");
	if (strcmp(o->executor, "custom") == 0) {
		struct toml_value *c = new_section(t, "custom");

		set_string(c, "config_exec", o->custom_config_exec ? o->custom_config_exec : "");
		set_string(c, "prepare_exec", o->custom_prepare_exec ? o->custom_prepare_exec : "");
		set_string(c, "run_exec", o->custom_run_exec ? o->custom_run_exec : "");
		set_string(c, "cleanup_exec", o->custom_cleanup_exec ? o->custom_cleanup_exec : "");
	}
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
	char *path = NULL, *cause = NULL, *dir = NULL, *system_id = NULL;
	char *ask_url = NULL, *ask_token = NULL, *ask_name = NULL, *ask_exec = NULL;
	char hostname[256] = "";
	const char *url, *token, *name, *executor, *bad;
	bool legacy, interactive, created = false;
	size_t i;
	int rc;

	memset(&st, 0, sizeof(st));
	path = cmd_config_path(o->config);
	if (config_load(&cfg, path, CONFIG_ALLOW_MISSING, &cause) != 0) {
		log_error("%s", cause);
		rc = 1;
		goto out_nocfg;
	}

	interactive = !o->non_interactive && isatty(STDIN_FILENO);
	token = o->token != NULL && *o->token ? o->token : o->registration_token;
	if (interactive) {
		url = ask("Enter the GitLab instance URL (for example, https://gitlab.com/):",
		    o->url, &ask_url);
		token = ask("Enter the registration token:", token, &ask_token);
	} else
		url = o->url;
	if (url == NULL || *url == '\0' || token == NULL || *token == '\0') {
		log_error("register: %s is needed: give it as a flag%s",
		    url == NULL || *url == '\0' ? "the GitLab URL (--url)" :
		    "a token (--token glrt-... or --registration-token)",
		    interactive ? "" : " (or run on a terminal to be asked)");
		rc = 1;
		goto out;
	}
	log_secret_add(token);
	legacy = !is_auth_token(token) && (o->token == NULL || *o->token == '\0');

	if (is_auth_token(token) && (bad = legacy_only_flag(cmd, o)) != NULL) {
		if (o->registration_token != NULL && strcmp(token, o->registration_token) == 0)
			log_warnx("an authentication token was given with --registration-token: "
			    "--%s and the other server-side settings are ignored; set them on "
			    "the runner in GitLab", bad);
		else {
			log_error("register: --%s cannot be used with an authentication token "
			    "(glrt-...): GitLab keeps that setting; set it on the runner in "
			    "GitLab and try again without it", bad);
			rc = 1;
			goto out;
		}
	}
	if (gethostname(hostname, sizeof(hostname) - 1) != 0)
		snprintf(hostname, sizeof(hostname), "runner");
	name = o->name;
	executor = o->executor;
	if (interactive) {
		name = ask(legacy ? "Enter a description for the runner:" :
		    "Enter a name for the runner. This is stored only in the local config.toml file:",
		    name, &ask_name);
		if (name != NULL && *name == '\0')
			name = hostname;
		executor = ask("Enter an executor: shell", executor, &ask_exec);
	}
	if (name == NULL || *name == '\0')
		name = hostname;
	if (executor == NULL || *executor == '\0') {
		log_error("register: the executor is needed: give --executor shell%s",
		    interactive ? "" : " (or run on a terminal to be asked)");
		rc = 1;
		goto out;
	}
	o->executor = executor;
	if (!config_executor_supported(executor))
		log_warnx("executor \"%s\" is not supported by this build (supported: shell): "
		    "the runner is registered, but `run` will skip it", executor);
	if (o->shell != NULL && *o->shell && !config_shell_supported(o->shell))
		log_warnx("shell \"%s\" is not supported by this build (supported: bash, sh)",
		    o->shell);

	dir = config_dir(&cfg);
	cmd_session_open(&s, &cfg);
	st.session = &s;
	creds.url = url;
	creds.token = token;
	creds.tls_ca_file = o->tls_ca_file;
	creds.tls_cert_file = o->tls_cert_file;
	creds.tls_key_file = o->tls_key_file;
	runner_info_init(&ri, &cfg, NULL, false);
	ri.info.executor = executor;
	ri.info.shell = o->shell;

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
		rc = 1;
		goto out_session;
	}
	if (s.interrupted) {
		log_error("register: interrupted; nothing was written");
		if (created)
			unregister_created(&s, url, o, st.token.token);
		rc = 130;
		goto out_session;
	}

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
	entry = build_entry(cmd, o, name, url, legacy ? st.token.token : token, &st.token);
	toml_array_push(runners, entry);
	if (config_save(&cfg, &cause) != 0) {
		log_error("register: %s; the file was left as it was", cause);
		if (created)
			unregister_created(&s, url, o, st.token.token);
		rc = 1;
		goto out_session;
	}
	if (cfg.exists && cfg.concurrent < o->limit)
		log_warnx("the runner's limit (%" PRId64 ") is larger than the global "
		    "concurrent (%" PRId64 "), which takes precedence", o->limit, cfg.concurrent);
	if (cfg.exists && cfg.concurrent < o->request_concurrency)
		log_warnx("the runner's request_concurrency (%" PRId64 ") is larger than the "
		    "global concurrent (%" PRId64 "), which takes precedence",
		    o->request_concurrency, cfg.concurrent);
	log_info("Runner registered successfully. Feel free to start it, but if it's "
	    "running already the config should be automatically reloaded!");
	log_info("Configuration (with the authentication token) was saved in \"%s\"", path);
	rc = 0;

out_session:
	runner_info_release(&ri);
	api_session_close(&s);
out:
	config_release(&cfg);
out_nocfg:
	api_runner_token_release(&st.token);
	free(st.message);
	free(system_id);
	free(dir);
	free(ask_url);
	free(ask_token);
	free(ask_name);
	free(ask_exec);
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

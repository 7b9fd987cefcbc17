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
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stddef.h>
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

static const char usage[] =
    "runner register [-n] [-c FILE] --url URL (--token TOKEN | --registration-token TOKEN) "
    "--executor EXECUTOR [OPTIONS]";

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
	/* Which of the above were given at all (by index in options[]). */
	bool		 given[64];
};

enum opt_kind { O_STR, O_INT, O_BOOL, O_STRV };

struct opt_spec {
	const char	*name;
	int		 short_name;
	enum opt_kind	 kind;
	const char	*env;
	size_t		 offset;
};

#define RO(f)	offsetof(struct reg_opts, f)

static const struct opt_spec options[] = {
	{ "config", 'c', O_STR, "CONFIG_FILE", RO(config) },
	{ "non-interactive", 'n', O_BOOL, "REGISTER_NON_INTERACTIVE", RO(non_interactive) },
	{ "url", 'u', O_STR, "CI_SERVER_URL", RO(url) },
	{ "token", 't', O_STR, "CI_SERVER_TOKEN", RO(token) },
	{ "registration-token", 'r', O_STR, "REGISTRATION_TOKEN", RO(registration_token) },
	{ "name", 0, O_STR, "RUNNER_NAME", RO(name) },
	{ "description", 0, O_STR, NULL, RO(name) },
	{ "executor", 0, O_STR, "RUNNER_EXECUTOR", RO(executor) },
	{ "shell", 0, O_STR, "RUNNER_SHELL", RO(shell) },
	{ "builds-dir", 0, O_STR, "RUNNER_BUILDS_DIR", RO(builds_dir) },
	{ "cache-dir", 0, O_STR, "RUNNER_CACHE_DIR", RO(cache_dir) },
	{ "clone-url", 0, O_STR, "CLONE_URL", RO(clone_url) },
	{ "env", 0, O_STRV, NULL, RO(env) },
	{ "limit", 0, O_INT, "RUNNER_LIMIT", RO(limit) },
	{ "output-limit", 0, O_INT, "RUNNER_OUTPUT_LIMIT", RO(output_limit) },
	{ "request-concurrency", 0, O_INT, "RUNNER_REQUEST_CONCURRENCY", RO(request_concurrency) },
	{ "pre-get-sources-script", 0, O_STR, "RUNNER_PRE_GET_SOURCES_SCRIPT",
	    RO(pre_get_sources_script) },
	{ "post-get-sources-script", 0, O_STR, "RUNNER_POST_GET_SOURCES_SCRIPT",
	    RO(post_get_sources_script) },
	{ "pre-build-script", 0, O_STR, "RUNNER_PRE_BUILD_SCRIPT", RO(pre_build_script) },
	{ "post-build-script", 0, O_STR, "RUNNER_POST_BUILD_SCRIPT", RO(post_build_script) },
	{ "debug-trace-disabled", 0, O_BOOL, "RUNNER_DEBUG_TRACE_DISABLED",
	    RO(debug_trace_disabled) },
	{ "tls-ca-file", 0, O_STR, "CI_SERVER_TLS_CA_FILE", RO(tls_ca_file) },
	{ "tls-cert-file", 0, O_STR, "CI_SERVER_TLS_CERT_FILE", RO(tls_cert_file) },
	{ "tls-key-file", 0, O_STR, "CI_SERVER_TLS_KEY_FILE", RO(tls_key_file) },
	{ "tag-list", 0, O_STR, "RUNNER_TAG_LIST", RO(tag_list) },
	{ "run-untagged", 0, O_BOOL, "REGISTER_RUN_UNTAGGED", RO(run_untagged) },
	{ "locked", 0, O_BOOL, "REGISTER_LOCKED", RO(locked) },
	{ "access-level", 0, O_STR, "REGISTER_ACCESS_LEVEL", RO(access_level) },
	{ "maximum-timeout", 0, O_INT, "REGISTER_MAXIMUM_TIMEOUT", RO(maximum_timeout) },
	{ "paused", 0, O_BOOL, "REGISTER_PAUSED", RO(paused) },
	{ "maintenance-note", 0, O_STR, "REGISTER_MAINTENANCE_NOTE", RO(maintenance_note) },
	{ "leave-runner", 0, O_BOOL, "REGISTER_LEAVE_RUNNER", RO(leave_runner) },
	{ "custom-config-exec", 0, O_STR, "CUSTOM_CONFIG_EXEC", RO(custom_config_exec) },
	{ "custom-prepare-exec", 0, O_STR, "CUSTOM_PREPARE_EXEC", RO(custom_prepare_exec) },
	{ "custom-run-exec", 0, O_STR, "CUSTOM_RUN_EXEC", RO(custom_run_exec) },
	{ "custom-cleanup-exec", 0, O_STR, "CUSTOM_CLEANUP_EXEC", RO(custom_cleanup_exec) },
	{ "custom_build_dir-enabled", 0, O_BOOL, "CUSTOM_BUILD_DIR_ENABLED",
	    RO(custom_build_dir_enabled) },
};

#define NOPTIONS	(sizeof(options) / sizeof(options[0]))

static int
find_option(const char *name)
{
	size_t i;

	for (i = 0; i < NOPTIONS; i++)
		if (strcmp(options[i].name, name) == 0)
			return (int)i;
	return -1;
}

static int
parse_bool(const char *s, bool *out)
{
	if (s == NULL || strcmp(s, "true") == 0 || strcmp(s, "1") == 0 ||
	    strcmp(s, "t") == 0 || strcmp(s, "TRUE") == 0 || strcmp(s, "True") == 0)
		*out = true;
	else if (strcmp(s, "false") == 0 || strcmp(s, "0") == 0 || strcmp(s, "f") == 0 ||
	    strcmp(s, "FALSE") == 0 || strcmp(s, "False") == 0)
		*out = false;
	else
		return -1;
	return 0;
}

/* Store one value; -1 with a message when it does not fit the option. */
static int
set_option(struct reg_opts *o, int idx, const char *value, const char *from)
{
	const struct opt_spec *sp = &options[idx];
	char *field = (char *)o + sp->offset, *end;
	long long n;

	switch (sp->kind) {
	case O_STR:
		*(const char **)field = value;
		break;
	case O_STRV:
		strv_push((struct strv *)field, value);
		break;
	case O_INT:
		errno = 0;
		n = strtoll(value, &end, 10);
		if (errno != 0 || end == value || *end != '\0') {
			cmd_usage_error(usage, "register: %s: \"%s\" is not a whole number",
			    from, value);
			return -1;
		}
		*(int64_t *)field = n;
		break;
	case O_BOOL:
		if (parse_bool(value, (bool *)field) != 0) {
			cmd_usage_error(usage, "register: %s: \"%s\" is not true or false",
			    from, value);
			return -1;
		}
		break;
	}
	o->given[idx] = true;
	return 0;
}

static int
parse_options(struct reg_opts *o, int argc, char **argv)
{
	struct option longopts[NOPTIONS + 2];
	char shortopts[64] = "+:h", flag[96];
	size_t i;
	int ch, idx;

	memset(longopts, 0, sizeof(longopts));
	for (i = 0; i < NOPTIONS; i++) {
		longopts[i].name = options[i].name;
		/* Booleans take --flag or --flag=false, as Go's flag package does. */
		longopts[i].has_arg = options[i].kind == O_BOOL ? optional_argument :
		    required_argument;
		longopts[i].val = 256 + (int)i;
		if (options[i].short_name != 0) {
			size_t n = strlen(shortopts);

			shortopts[n] = (char)options[i].short_name;
			shortopts[n + 1] = options[i].kind == O_BOOL ? '\0' : ':';
			shortopts[n + 2] = '\0';
		}
	}
	longopts[NOPTIONS] = (struct option){ "help", no_argument, NULL, 'h' };

	o->locked = true;	/* gitlab-runner's defaults */
	opterr = 0;
	optind = 1;
	while ((ch = cmd_getopt(argc, argv, shortopts, longopts, "register", usage)) != -1) {
		if (ch == 'h') {
			printf("usage: %s\n\nRegister a runner with GitLab and save it in "
			    "config.toml.\nFlags are gitlab-runner's; each also reads the "
			    "environment variable gitlab-runner reads.\n\nOptions:\n", usage);
			for (i = 0; i < NOPTIONS; i++)
				printf("  --%-26s%s%s\n", options[i].name,
				    options[i].env ? "$" : "", options[i].env ? options[i].env : "");
			return 1;
		}
		if (ch == CMD_BAD_FLAG)
			return -1;
		if (ch >= 256)
			idx = ch - 256;
		else {
			for (idx = 0; idx < (int)NOPTIONS; idx++)
				if (options[idx].short_name == ch)
					break;
		}
		snprintf(flag, sizeof(flag), "--%s", options[idx].name);
		if (set_option(o, idx, optarg != NULL ? optarg :
		    options[idx].kind == O_BOOL ? "true" : "", flag) != 0)
			return -1;
	}
	if (cmd_no_arguments(argc, argv, "register", usage) != 0)
		return -1;

	/* The environment fills what the command line did not give. */
	for (i = 0; i < NOPTIONS; i++) {
		const char *v;

		if (o->given[i] || options[i].env == NULL ||
		    (v = getenv(options[i].env)) == NULL || *v == '\0')
			continue;
		/* --name and --description share a field: the first one given wins. */
		if (strcmp(options[i].name, "name") == 0 && o->given[find_option("description")])
			continue;
		snprintf(flag, sizeof(flag), "$%s", options[i].env);
		if (set_option(o, (int)i, v, flag) != 0)
			return -1;
	}
	return 0;
}

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
build_entry(const struct reg_opts *o, const char *name, const char *url,
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
	if (o->given[find_option("custom_build_dir-enabled")])
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
legacy_only_flag(const struct reg_opts *o)
{
	static const char *const names[] = { "tag-list", "run-untagged", "locked",
	    "access-level", "maximum-timeout", "paused", "maintenance-note" };
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (o->given[find_option(names[i])])
			return names[i];
	return NULL;
}

int
cmd_register(int argc, char **argv)
{
	struct reg_opts o;
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

	memset(&o, 0, sizeof(o));
	memset(&st, 0, sizeof(st));
	if ((rc = parse_options(&o, argc, argv)) != 0) {
		strv_release(&o.env);
		return rc > 0 ? 0 : 2;
	}
	path = cmd_config_path(o.config);
	if (config_load(&cfg, path, CONFIG_ALLOW_MISSING, &cause) != 0) {
		log_error("%s", cause);
		rc = 1;
		goto out_nocfg;
	}

	interactive = !o.non_interactive && isatty(STDIN_FILENO);
	token = o.token != NULL && *o.token ? o.token : o.registration_token;
	if (interactive) {
		url = ask("Enter the GitLab instance URL (for example, https://gitlab.com/):",
		    o.url, &ask_url);
		token = ask("Enter the registration token:", token, &ask_token);
	} else
		url = o.url;
	if (url == NULL || *url == '\0' || token == NULL || *token == '\0') {
		log_error("register: %s is needed: give it as a flag%s",
		    url == NULL || *url == '\0' ? "the GitLab URL (--url)" :
		    "a token (--token glrt-... or --registration-token)",
		    interactive ? "" : " (or run on a terminal to be asked)");
		rc = 1;
		goto out;
	}
	log_secret_add(token);
	legacy = !is_auth_token(token) && (o.token == NULL || *o.token == '\0');

	if (is_auth_token(token) && (bad = legacy_only_flag(&o)) != NULL) {
		if (o.registration_token != NULL && strcmp(token, o.registration_token) == 0)
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
	name = o.name;
	executor = o.executor;
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
	o.executor = executor;
	if (!config_executor_supported(executor))
		log_warnx("executor \"%s\" is not supported by this build (supported: shell): "
		    "the runner is registered, but `run` will skip it", executor);
	if (o.shell != NULL && *o.shell && !config_shell_supported(o.shell))
		log_warnx("shell \"%s\" is not supported by this build (supported: bash, sh)",
		    o.shell);

	dir = config_dir(&cfg);
	cmd_session_open(&s, &cfg);
	st.session = &s;
	creds.url = url;
	creds.token = token;
	creds.tls_ca_file = o.tls_ca_file;
	creds.tls_cert_file = o.tls_cert_file;
	creds.tls_key_file = o.tls_key_file;
	runner_info_init(&ri, &cfg, NULL, false);
	ri.info.executor = executor;
	ri.info.shell = o.shell;

	if (legacy) {
		log_warnx("registration tokens are deprecated by GitLab: create the runner in "
		    "GitLab and register it with --token glrt-...");
		memset(&params, 0, sizeof(params));
		params.description = name;
		params.maintenance_note = o.maintenance_note;
		params.tag_list = o.tag_list;
		params.run_untagged = o.run_untagged || o.tag_list == NULL || *o.tag_list == '\0';
		params.locked = o.locked;
		params.access_level = o.access_level;
		params.maximum_timeout = o.maximum_timeout;
		params.paused = o.paused;
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
			unregister_created(&s, url, &o, st.token.token);
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
	entry = build_entry(&o, name, url, legacy ? st.token.token : token, &st.token);
	toml_array_push(runners, entry);
	if (config_save(&cfg, &cause) != 0) {
		log_error("register: %s; the file was left as it was", cause);
		if (created)
			unregister_created(&s, url, &o, st.token.token);
		rc = 1;
		goto out_session;
	}
	if (cfg.exists && cfg.concurrent < o.limit)
		log_warnx("the runner's limit (%" PRId64 ") is larger than the global "
		    "concurrent (%" PRId64 "), which takes precedence", o.limit, cfg.concurrent);
	if (cfg.exists && cfg.concurrent < o.request_concurrency)
		log_warnx("the runner's request_concurrency (%" PRId64 ") is larger than the "
		    "global concurrent (%" PRId64 "), which takes precedence",
		    o.request_concurrency, cfg.concurrent);
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
	strv_release(&o.env);
	return rc;
}

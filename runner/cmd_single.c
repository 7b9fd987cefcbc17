/*
 * `runner run-single`: one runner from the command line, for ephemeral or
 * autoscaled hosts (and tests): it asks for jobs, runs up to --max-builds
 * of them (or until --wait-timeout passes without one), sends their
 * reports, and exits.  Under the flags it is the same daemon as `run`, on
 * a config built in memory: gitlab-runner's run-single takes the flags of
 * a [[runners]] entry (common.RunnerConfig), or with -r NAME the entry of
 * that name in config.toml instead of them.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/strconv.h"
#include "lib/strv.h"
#include "lib/xmalloc.h"
#include "runner/commands.h"
#include "runner/config.h"
#include "runner/daemon.h"
#include "runner/toml.h"

struct single_opts {
	const char	*config;
	const char	*runner;
	int64_t		 wait_timeout;
	int64_t		 max_builds;
	int64_t		 shutdown_timeout;
	const char	*state_dir;
	const char	*workdir;

	/* The entry's keys (entry_keys below says which is which). */
	const char	*name;
	const char	*url;
	const char	*token;
	const char	*tls_ca_file;
	const char	*tls_cert_file;
	const char	*tls_key_file;
	const char	*executor;
	const char	*shell;
	const char	*builds_dir;
	const char	*cache_dir;
	const char	*clone_url;
	struct strv	 env;
	int64_t		 limit;
	int64_t		 output_limit;
	int64_t		 request_concurrency;
	bool		 strict_check_interval;
	int64_t		 unhealthy_requests_limit;
	const char	*unhealthy_interval;
	int64_t		 final_update_retry_limit;
	const char	*pre_get_sources_script;
	const char	*post_get_sources_script;
	const char	*pre_build_script;
	const char	*post_build_script;
	const char	*prepare_timeout;
	const char	*get_sources_timeout;
	bool		 debug_trace_disabled;
	bool		 safe_directory_checkout;
	bool		 clean_git_config;
	bool		 custom_build_dir_enabled;
	struct strv	 feature_flags;
	const char	*cache_type;
	const char	*cache_path;
	bool		 cache_shared;
	int64_t		 cache_max_size;

	struct cli_given given;
};

#define SO(f)	offsetof(struct single_opts, f)
#define NUM	.min = 0, .max = INT_MAX, .what = "a number"

/* gitlab-runner's names and environment variables, RunnerConfig's first. */
static const struct cli_option single_options[] = {
	CMD_OPT_CONFIG(struct single_opts, config),
	CLI_OPT("runner", 'r', CLI_STRING, NULL, SO(runner), "NAME",
	    "take the [[runners]] entry of this name from the config file instead of the flags"),
	CLI_OPT("wait-timeout", 0, CLI_INT, NULL, SO(wait_timeout), "SECONDS",
	    "exit when no job came for this long (0: never)", NUM),
	CLI_OPT("max-builds", 0, CLI_INT, NULL, SO(max_builds), "N",
	    "exit after N jobs (0: never)", NUM),
	CLI_OPT("shutdown-timeout", 0, CLI_INT, NULL, SO(shutdown_timeout), "SECONDS",
	    "how long a stop waits for the jobs before leaving them (default: 30)", NUM),
	CLI_OPT("description", 0, CLI_STRING, "RUNNER_NAME", SO(name), "NAME",
	    "the runner's name (default: the host name)"),
	CLI_OPT("name", 0, CLI_STRING, NULL, SO(name), "NAME", "the same as --description"),
	CLI_OPT("url", 'u', CLI_STRING, "CI_SERVER_URL", SO(url), "URL", "GitLab's URL"),
	CLI_OPT("token", 't', CLI_STRING, "CI_SERVER_TOKEN", SO(token), "TOKEN",
	    "the runner's authentication token"),
	CLI_OPT("tls-ca-file", 0, CLI_STRING, "CI_SERVER_TLS_CA_FILE", SO(tls_ca_file), "FILE",
	    "the CA certificates GitLab's certificate is checked against"),
	CLI_OPT("tls-cert-file", 0, CLI_STRING, "CI_SERVER_TLS_CERT_FILE", SO(tls_cert_file),
	    "FILE", "a client certificate for GitLab"),
	CLI_OPT("tls-key-file", 0, CLI_STRING, "CI_SERVER_TLS_KEY_FILE", SO(tls_key_file),
	    "FILE", "its private key"),
	CLI_OPT("limit", 0, CLI_INT, "RUNNER_LIMIT", SO(limit), "N",
	    "the most jobs at once (0: no limit)", NUM),
	CLI_OPT("output-limit", 0, CLI_INT, "RUNNER_OUTPUT_LIMIT", SO(output_limit), "KB",
	    "the most job log to send", NUM),
	CLI_OPT("request-concurrency", 0, CLI_INT, "RUNNER_REQUEST_CONCURRENCY",
	    SO(request_concurrency), "N", "job requests at once", NUM),
	CLI_OPT("strict-check-interval", 0, CLI_BOOL, "RUNNER_STRICT_CHECK_INTERVAL",
	    SO(strict_check_interval), NULL, "wait check_interval after a job too"),
	CLI_OPT("unhealthy-requests-limit", 0, CLI_INT, "RUNNER_UNHEALTHY_REQUESTS_LIMIT",
	    SO(unhealthy_requests_limit), "N", "failed job requests before a pause", NUM),
	CLI_OPT("unhealthy-interval", 0, CLI_STRING, NULL, SO(unhealthy_interval), "DURATION",
	    "how long that pause is (\"1h30m\")"),
	CLI_OPT("job-status-final-update-retry-limit", 0, CLI_INT,
	    "RUNNER_job_status_final_update_retry_limit", SO(final_update_retry_limit), "N",
	    "attempts at the final report", NUM),
	CLI_OPT("executor", 0, CLI_STRING, "RUNNER_EXECUTOR", SO(executor), "EXECUTOR",
	    "how jobs run", .def = "shell"),
	CLI_OPT("builds-dir", 0, CLI_STRING, "RUNNER_BUILDS_DIR", SO(builds_dir), "DIR",
	    "where builds are stored"),
	CLI_OPT("cache-dir", 0, CLI_STRING, "RUNNER_CACHE_DIR", SO(cache_dir), "DIR",
	    "where the build cache is stored"),
	CLI_OPT("clone-url", 0, CLI_STRING, "CLONE_URL", SO(clone_url), "URL",
	    "the URL jobs clone from instead of GitLab's"),
	CLI_OPT("env", 0, CLI_STRINGS, "RUNNER_ENV", SO(env), "KEY=VALUE",
	    "a variable for the jobs (repeat for more)"),
	CLI_OPT("pre-get-sources-script", 0, CLI_STRING, "RUNNER_PRE_GET_SOURCES_SCRIPT",
	    SO(pre_get_sources_script), "SCRIPT", "run before the sources are fetched"),
	CLI_OPT("post-get-sources-script", 0, CLI_STRING, "RUNNER_POST_GET_SOURCES_SCRIPT",
	    SO(post_get_sources_script), "SCRIPT", "run after the sources are fetched"),
	CLI_OPT("pre-build-script", 0, CLI_STRING, "RUNNER_PRE_BUILD_SCRIPT",
	    SO(pre_build_script), "SCRIPT", "run before the job's script"),
	CLI_OPT("post-build-script", 0, CLI_STRING, "RUNNER_POST_BUILD_SCRIPT",
	    SO(post_build_script), "SCRIPT", "run after the job's script"),
	CLI_OPT("prepare-timeout", 0, CLI_STRING, "RUNNER_PREPARE_TIMEOUT", SO(prepare_timeout),
	    "DURATION", "the prepare stage's timeout"),
	CLI_OPT("get-sources-timeout", 0, CLI_STRING, "RUNNER_GET_SOURCES_TIMEOUT",
	    SO(get_sources_timeout), "DURATION", "the get_sources stage's timeout"),
	CLI_OPT("debug-trace-disabled", 0, CLI_BOOL, "RUNNER_DEBUG_TRACE_DISABLED",
	    SO(debug_trace_disabled), NULL, "refuse CI_DEBUG_TRACE"),
	CLI_OPT("safe-directory-checkout", 0, CLI_BOOL, "RUNNER_SAFE_DIRECTORY_CHECKOUT",
	    SO(safe_directory_checkout), NULL, "git safe.directory for the build directory"),
	CLI_OPT("clean-git-config", 0, CLI_BOOL, "RUNNER_CLEAN_GIT_CONFIG",
	    SO(clean_git_config), NULL, "clean the git config before and after the job"),
	CLI_OPT("shell", 0, CLI_STRING, "RUNNER_SHELL", SO(shell), "SHELL", "bash or sh"),
	CLI_OPT("custom_build_dir-enabled", 0, CLI_BOOL, "CUSTOM_BUILD_DIR_ENABLED",
	    SO(custom_build_dir_enabled), NULL, "let jobs choose their build directory"),
	CLI_OPT("feature-flags", 0, CLI_STRINGS, "FEATURE_FLAGS", SO(feature_flags),
	    "FF_NAME:BOOL", "a feature flag (repeat for more)"),
	CLI_OPT("cache-type", 0, CLI_STRING, "CACHE_TYPE", SO(cache_type), "TYPE",
	    "the cache's kind (none here: the local cache)"),
	CLI_OPT("cache-path", 0, CLI_STRING, "CACHE_PATH", SO(cache_path), "PATH",
	    "the path prepended to the cache's URL"),
	CLI_OPT("cache-shared", 0, CLI_BOOL, "CACHE_SHARED", SO(cache_shared), NULL,
	    "share the cache between runners"),
	CLI_OPT("cache-max_uploaded_archive_size", 0, CLI_INT,
	    "CACHE_MAXIMUM_UPLOADED_ARCHIVE_SIZE", SO(cache_max_size), "BYTES",
	    "the largest cache archive uploaded", .min = 0, .max = INT64_MAX,
	    .what = "a number"),
	/* This runner's own. */
	CLI_OPT("state-dir", 0, CLI_STRING, NULL, SO(state_dir), "DIR",
	    "the journal of unsent reports"),
	CLI_OPT("working-directory", 'd', CLI_STRING, NULL, SO(workdir), "DIR",
	    "change to DIR first"),
	CLI_END,
};

/*
 * Where each entry flag goes in the [[runners]] entry: "section.Key" for
 * a sub-table.  A flag not given leaves its key out, so the config's
 * default holds; the loader checks the values as it checks config.toml's.
 */
static const struct {
	const char	*flag;
	const char	*key;
} entry_keys[] = {
	{ "description", "name" },
	{ "url", "url" },
	{ "token", "token" },
	{ "tls-ca-file", "tls-ca-file" },
	{ "tls-cert-file", "tls-cert-file" },
	{ "tls-key-file", "tls-key-file" },
	{ "limit", "limit" },
	{ "output-limit", "output_limit" },
	{ "request-concurrency", "request_concurrency" },
	{ "strict-check-interval", "strict_check_interval" },
	{ "unhealthy-requests-limit", "unhealthy_requests_limit" },
	{ "unhealthy-interval", "unhealthy_interval" },
	{ "job-status-final-update-retry-limit", "job_status_final_update_retry_limit" },
	{ "executor", "executor" },
	{ "builds-dir", "builds_dir" },
	{ "cache-dir", "cache_dir" },
	{ "clone-url", "clone_url" },
	{ "env", "environment" },
	{ "pre-get-sources-script", "pre_get_sources_script" },
	{ "post-get-sources-script", "post_get_sources_script" },
	{ "pre-build-script", "pre_build_script" },
	{ "post-build-script", "post_build_script" },
	{ "prepare-timeout", "prepare_timeout" },
	{ "get-sources-timeout", "get_sources_timeout" },
	{ "debug-trace-disabled", "debug_trace_disabled" },
	{ "safe-directory-checkout", "safe_directory_checkout" },
	{ "clean-git-config", "clean_git_config" },
	{ "shell", "shell" },
	{ "custom_build_dir-enabled", "custom_build_dir.enabled" },
	{ "feature-flags", "feature_flags" },
	{ "cache-type", "cache.Type" },
	{ "cache-path", "cache.Path" },
	{ "cache-shared", "cache.Shared" },
	{ "cache-max_uploaded_archive_size", "cache.MaxUploadedArchiveSize" },
};

static const struct cli_option *
find_option(const char *name)
{
	const struct cli_option *o;

	for (o = single_options; o->name != NULL; o++)
		if (strcmp(o->name, name) == 0)
			return o;
	fatalx("run-single: no option --%s", name);
}

/* "FF_X:true" (go-flags' map syntax) or "FF_X=true" into [feature_flags]. */
static int
put_feature_flags(struct toml_value *table, const struct strv *flags)
{
	const char *sep;
	size_t i;
	bool on;

	for (i = 0; i < flags->n; i++) {
		sep = strpbrk(flags->v[i], ":=");
		if (sep == NULL || sep == flags->v[i] || strconv_parse_bool(sep + 1, &on) != 0) {
			log_error("run-single: --feature-flags: \"%s\" is not FF_NAME:true or "
			    "FF_NAME:false", flags->v[i]);
			return -1;
		}
		toml_table_set(table, flags->v[i], (size_t)(sep - flags->v[i]),
		    toml_new_bool(on));
	}
	return 0;
}

/* The value of one given flag, as config.toml would hold it. */
static struct toml_value *
flag_value(const struct cli_option *o, const struct single_opts *f, const char *key)
{
	const char *field = (const char *)f + o->offset;
	const struct strv *sv;
	struct toml_value *v;
	size_t i;

	switch (o->type) {
	case CLI_STRING:
		return toml_new_string(*(const char *const *)field,
		    strlen(*(const char *const *)field));
	case CLI_INT:
		return toml_new_integer(*(const int64_t *)field);
	case CLI_BOOL:
		return toml_new_bool(*(const bool *)field);
	case CLI_STRINGS:
		sv = (const struct strv *)field;
		if (strcmp(key, "feature_flags") == 0) {
			v = toml_new_table(TOML_TABLE_HEADER);
			if (put_feature_flags(v, sv) != 0) {
				toml_free(v);
				return NULL;
			}
			return v;
		}
		v = toml_new_array();
		for (i = 0; i < sv->n; i++)
			toml_array_push(v, toml_new_string(sv->v[i], strlen(sv->v[i])));
		return v;
	default:
		fatalx("run-single: --%s has no config key type", o->name);
	}
}

/* The [[runners]] entry of the flags; NULL (logged) for a value that cannot be. */
static struct toml_value *
entry_from_flags(const struct cli_command *cmd, const struct single_opts *f)
{
	struct toml_value *entry = toml_new_table(TOML_TABLE_HEADER), *v, *sub;
	const struct cli_option *o;
	const char *dot, *key;
	char host[256];
	size_t i;

	for (i = 0; i < sizeof(entry_keys) / sizeof(entry_keys[0]); i++) {
		o = find_option(entry_keys[i].flag);
		/* --name shares --description's field; --executor has a default. */
		if (!cli_given(cmd, f, o->name) && o->def == NULL &&
		    !(o->offset == SO(name) && cli_given(cmd, f, "name")))
			continue;
		if ((v = flag_value(o, f, entry_keys[i].key)) == NULL) {
			toml_free(entry);
			return NULL;
		}
		key = entry_keys[i].key;
		if ((dot = strchr(key, '.')) == NULL) {
			toml_table_set(entry, key, strlen(key), v);
			continue;
		}
		if ((sub = toml_getn(entry, key, (size_t)(dot - key))) == NULL) {
			sub = toml_new_table(TOML_TABLE_HEADER);
			toml_table_set(entry, key, (size_t)(dot - key), sub);
		}
		toml_table_set(sub, dot + 1, strlen(dot + 1), v);
	}
	if (toml_get(entry, "name") == NULL) {
		if (gethostname(host, sizeof(host) - 1) != 0)
			snprintf(host, sizeof(host), "run-single");
		host[sizeof(host) - 1] = '\0';
		toml_table_set(entry, "name", 4, toml_new_string(host, strlen(host)));
	}
	return entry;
}

/*
 * -r NAME: the entry of that name, as config.toml has it; as in
 * gitlab-runner, it replaces the entry flags.  NULL (logged) if the file
 * cannot be read or has no such entry.
 */
static struct toml_value *
entry_from_config(const struct single_opts *f, char **path)
{
	struct toml_value *entry = NULL;
	struct config cfg;
	size_t i;

	if (cmd_load_config(&cfg, f->config, 0) != 0)
		return NULL;
	for (i = 0; i < cfg.n_runners; i++)
		if (strcmp(cfg.runners[i].name, f->runner) == 0 && cfg.runners[i].table != NULL) {
			entry = toml_clone(cfg.runners[i].table);
			break;
		}
	if (entry == NULL)
		log_error("run-single: could not find a runner with the name '%s' in %s",
		    f->runner, cfg.path);
	else
		*path = xstrdup(cfg.path);
	config_release(&cfg);
	return entry;
}

static int
single_run(const struct cli_command *cmd, void *opts)
{
	const struct single_opts *f = opts;
	struct run_options o = { .state_dir = f->state_dir, .max_builds = (unsigned)f->max_builds,
	    .wait_timeout_s = (unsigned)f->wait_timeout };
	struct toml_value *doc, *runners, *entry, *v;
	struct config cfg;
	char *cause = NULL, *path = NULL;
	int rc;

	if (f->workdir != NULL && chdir(f->workdir) != 0) {
		log_error("run-single: cannot use %s as working directory: %s", f->workdir,
		    strerror(errno));
		return 1;
	}
	if (f->runner != NULL && *f->runner != '\0')
		entry = entry_from_config(f, &path);
	else
		entry = entry_from_flags(cmd, f);
	if (entry == NULL)
		return 1;
	/* gitlab-runner's HandleArgs: these three or nothing. */
	if ((v = toml_get(entry, "url")) == NULL || v->type != TOML_STRING || *v->u.s.ptr == '\0' ||
	    (v = toml_get(entry, "token")) == NULL || v->type != TOML_STRING ||
	    *v->u.s.ptr == '\0') {
		toml_free(entry);
		free(path);
		return cli_usage_error(cmd, "run-single: --url and --token are needed");
	}

	doc = toml_new_table(TOML_TABLE_HEADER);
	toml_table_set(doc, "concurrent", 10, toml_new_integer(1));
	if (f->shutdown_timeout > 0)
		toml_table_set(doc, "shutdown_timeout", 16, toml_new_integer(f->shutdown_timeout));
	runners = toml_new_array();
	runners->u.array.of_tables = true;
	toml_array_push(runners, entry);
	toml_table_set(doc, "runners", 7, runners);
	rc = config_load_doc(&cfg, path != NULL ? path : "./run-single", doc, CONFIG_QUIET,
	    &cause);
	free(path);
	if (rc != 0) {
		log_error("run-single: %s", cause);
		free(cause);
		return 1;
	}
	if (cfg.runners[0].problem != NULL) {
		log_error("run-single: the runner %s", cfg.runners[0].problem);
		config_release(&cfg);
		return 1;
	}
	rc = daemon_run(&o, &cfg);
	config_release(&cfg);
	return rc;
}

const struct cli_command cmd_run_single_entry = {
	.name = "run-single",
	.summary = "Run one runner given by flags, for N jobs",
	.usage = "runner run-single (--url URL --token TOKEN [OPTIONS] | -c FILE -r NAME) "
	    "[--max-builds N] [--wait-timeout SECONDS]",
	.help = "Run one runner given by flags (or, with -r NAME, the entry of that name in "
	    "config.toml), without the rest of config.toml; with --max-builds N, exit after N "
	    "jobs; with --wait-timeout SECONDS, exit when no job came for that long.",
	.options = single_options,
	.opts_size = sizeof(struct single_opts),
	.given = offsetof(struct single_opts, given),
	.run = single_run,
};

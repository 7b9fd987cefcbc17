/*
 * What every command does the same way: report a usage error in one line
 * followed by the command's usage, find config.toml, and drive a few
 * GitLab calls on a private loop.
 */
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner/commands.h"
#include "runner/config.h"
#include "runner/log.h"
#include "runner/metrics.h"
#include "runner/xmalloc.h"

bool cmd_log_level_given;
bool cmd_log_format_given;

int
cmd_usage_error(const char *usage, const char *fmt, ...)
{
	va_list ap;

	fputs("runner: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: %s\n", usage);
	return 2;
}

int
cmd_load_config(struct config *cfg, const char *flag_value, int flags)
{
	char *path = cmd_config_path(flag_value), *cause = NULL;
	int rc = config_load(cfg, path, flags, &cause);

	if (rc != 0) {
		log_error("%s", cause);
		free(cause);
	}
	free(path);
	return rc;
}

int
cmd_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts,
    const char *cmd, const char *usage)
{
	int ch = getopt_long(argc, argv, shortopts, longopts, NULL);

	if (ch == ':') {
		cmd_usage_error(usage, "%s: %s needs a value", cmd, argv[optind - 1]);
		return CMD_BAD_FLAG;
	}
	if (ch == '?') {
		cmd_usage_error(usage, "%s: unknown flag '%s'", cmd, argv[optind - 1]);
		return CMD_BAD_FLAG;
	}
	return ch;
}

int
cmd_no_arguments(int argc, char **argv, const char *cmd, const char *usage)
{
	if (optind < argc)
		return cmd_usage_error(usage, "%s: unexpected argument '%s'", cmd, argv[optind]);
	return 0;
}

char *
cmd_config_path(const char *flag_value)
{
	if (flag_value != NULL && *flag_value != '\0')
		return xstrdup(flag_value);
	return config_default_path();
}

static void
on_sigint(uv_signal_t *sig, int signum)
{
	struct cmd_session *s = sig->data;

	(void)signum;
	if (s->interrupted) {
		fprintf(stderr, "runner: interrupted again, exiting now\n");
		_exit(130);
	}
	s->interrupted = true;
	log_warnx("interrupted: finishing what was started (press Ctrl-C again to quit at once)");
}

void
cmd_session_open(struct cmd_session *s, const struct config *cfg)
{
	struct api_config ac = { 0 };
	/* The helper commands have no config.toml: no certs/ dir, no max age. */
	char *dir = cfg != NULL ? config_dir(cfg) : NULL;

	memset(s, 0, sizeof(*s));
	if (uv_loop_init(&s->loop) != 0)
		fatalx("cannot create an event loop");
	ac.loop = &s->loop;
	ac.config_dir = dir;
	ac.connection_max_age_ms = cfg != NULL ? (uint64_t)cfg->connection_max_age_ms : 0;
	s->api = api_new(&ac);
	free(dir);
	uv_signal_init(&s->loop, &s->sigint);
	s->sigint.data = s;
	uv_signal_start(&s->sigint, on_sigint, SIGINT);
	/* The signal watcher alone must not keep cmd_session_wait() running. */
	uv_unref((uv_handle_t *)&s->sigint);
}

void
cmd_session_wait(struct cmd_session *s)
{
	while (s->pending > 0)
		uv_run(&s->loop, UV_RUN_ONCE);
}

void
cmd_session_close(struct cmd_session *s)
{
	api_close(s->api);
	uv_close((uv_handle_t *)&s->sigint, NULL);
	uv_run(&s->loop, UV_RUN_DEFAULT);
	if (uv_loop_close(&s->loop) != 0)
		log_warnx("event loop closed with handles still open");
	/* The HTTP layer counted into the process's metrics: nothing serves them here. */
	metrics_reset();
}

char *
cmd_runner_label(const struct config *cfg, const struct runner_config *rc)
{
	return xasprintf("runner \"%s\" (%s:%d)", rc->name, cfg->path, rc->line);
}

void
cmd_creds(const struct runner_config *rc, struct api_creds *creds)
{
	creds->url = rc->url;
	creds->token = rc->token;
	creds->tls_ca_file = rc->tls_ca_file;
	creds->tls_cert_file = rc->tls_cert_file;
	creds->tls_key_file = rc->tls_key_file;
}

int
cmd_select_runners(const struct config *cfg, const struct cmd_select *sel, bool *chosen)
{
	size_t i;
	int n = 0;

	for (i = 0; i < cfg->n_runners; i++) {
		const struct runner_config *rc = &cfg->runners[i];
		bool match = sel->all;

		if (sel->name != NULL && *sel->name)
			match = strcmp(rc->name, sel->name) == 0;
		else if (sel->url != NULL && *sel->url)
			match = strcmp(rc->url, sel->url) == 0 &&
			    (sel->token == NULL || !*sel->token || strcmp(rc->token, sel->token) == 0) &&
			    (sel->id == 0 || rc->id == sel->id);
		else if (sel->token != NULL && *sel->token)
			match = strcmp(rc->token, sel->token) == 0;
		chosen[i] = match;
		n += match;
	}
	if (n == 0 && sel->name != NULL && *sel->name) {
		log_error("no runner named \"%s\" in %s", sel->name, cfg->path);
		return -1;
	}
	return n;
}

void
cmd_remove_runners(struct config *cfg, const bool *remove)
{
	struct toml_value *runners = toml_get(cfg->doc, "runners");
	size_t i;

	if (runners == NULL || runners->type != TOML_ARRAY)
		return;
	/* From the end, so the indexes of the others stay right. */
	for (i = cfg->n_runners; i > 0; i--)
		if (remove[i - 1] && cfg->runners[i - 1].index < runners->u.array.len) {
			toml_array_remove(runners, cfg->runners[i - 1].index);
			cfg->runners[i - 1].table = NULL;
		}
	/* gitlab-runner writes no runners key at all when there are none. */
	if (runners->u.array.len == 0)
		toml_table_remove(cfg->doc, "runners", 7);
}

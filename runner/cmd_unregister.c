/*
 * `runner unregister`: tell GitLab this machine no longer serves a runner,
 * then drop the entry from config.toml; only when GitLab said yes, so a
 * failed call never leaves a runner that exists in GitLab but nowhere here.
 *
 * A runner made in GitLab (glrt- token) outlives its machines: only this
 * machine's runner manager is removed (DELETE /runners/managers).  A
 * legacy runner is deleted (DELETE /runners).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "lib/log.h"
#include "lib/xmalloc.h"
#include "runner/commands.h"
#include "runner/config.h"
#include "runner/system_id.h"

static const char usage[] =
    "runner unregister [-c FILE] (-n NAME | [-u URL] -t TOKEN | --all-runners)";

struct unreg_one {
	struct api_session	*session;
	char			*label;
	bool			 ok;
};

static void
on_unregistered(enum api_result result, const struct api_answer *answer, void *data)
{
	struct unreg_one *u = data;

	if (result == API_OK) {
		log_info("Unregistering runner from GitLab succeeded: %s", u->label);
		u->ok = true;
	} else
		log_error("%s: unregistering failed (%s)%s; it stays in the config", u->label,
		    answer->message, result == API_FORBIDDEN ?
		    ": GitLab does not know the token (already deleted, expired or revoked?)" : "");
	u->session->pending--;
}

static void
start(struct api_session *s, const struct api_creds *creds, const char *system_id,
    struct unreg_one *u)
{
	s->pending++;
	u->session = s;
	if (strncmp(creds->token, "glrt-", 5) == 0)
		api_unregister_manager(s->api, creds, system_id, on_unregistered, u);
	else
		api_unregister(s->api, creds, on_unregistered, u);
}

int
cmd_unregister(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "name", required_argument, NULL, 'n' },
		{ "url", required_argument, NULL, 'u' },
		{ "token", required_argument, NULL, 't' },
		{ "all-runners", no_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cmd_select sel = { 0 };
	struct api_session s;
	struct config cfg;
	struct unreg_one *us, flag_one = { 0 };
	struct api_creds creds;
	const char *config_flag = NULL;
	char *cause = NULL, *dir, *system_id;
	bool *chosen, *done;
	size_t i, removed = 0;
	int ch, n, rc = 0;

	opterr = 0;
	optind = 1;
	while ((ch = cmd_getopt(argc, argv, "+:c:n:u:t:h", longopts, "unregister",
	    usage)) != -1) {
		switch (ch) {
		case 'c': config_flag = optarg; break;
		case 'n': sel.name = optarg; break;
		case 'u': sel.url = optarg; break;
		case 't': sel.token = optarg; break;
		case 'a': sel.all = true; break;
		case 'h':
			printf("usage: %s\n\nUnregister runners from GitLab and remove them "
			    "from config.toml.\n", usage);
			return 0;
		default:
			return 2;
		}
	}
	if (cmd_no_arguments(argc, argv, "unregister", usage) != 0)
		return 2;
	/* As gitlab-runner: --name, --token (with or without --url), or all. */
	if (!sel.all && (sel.name == NULL || !*sel.name) &&
	    (sel.token == NULL || !*sel.token))
		return cmd_usage_error(usage, "unregister: say which runner: --name, "
		    "--token (and --url), or --all-runners");
	if (sel.token != NULL)
		log_secret_add(sel.token);

	if (cmd_load_config(&cfg, config_flag, CONFIG_ALLOW_MISSING) != 0)
		return 1;
	chosen = xcalloc(cfg.n_runners + 1, sizeof(bool));
	done = xcalloc(cfg.n_runners + 1, sizeof(bool));
	us = xcalloc(cfg.n_runners + 1, sizeof(*us));
	if ((n = cmd_select_runners(&cfg, &sel, chosen)) < 0) {
		rc = 1;
		goto out;
	}
	/* --name with --token: the entry must have both (RunnerByNameAndToken). */
	if (!sel.all && sel.name != NULL && *sel.name && sel.token != NULL && *sel.token)
		for (i = 0; i < cfg.n_runners; i++)
			if (chosen[i] && strcmp(cfg.runners[i].token, sel.token) != 0) {
				chosen[i] = false;
				n--;
			}
	if (n == 0 && !sel.all && ((sel.name != NULL && *sel.name) ||
	    sel.url == NULL || !*sel.url)) {
		char tok[LOG_TOKEN_SIZE];

		if (sel.name != NULL && *sel.name)
			log_error("no runner named \"%s\" with the token %s in %s", sel.name,
			    log_token(sel.token, tok), cfg.path);
		else
			log_error("no runner with the token %s in %s (give --url too to "
			    "unregister it from GitLab anyway)", log_token(sel.token, tok), cfg.path);
		rc = 1;
		goto out;
	}
	if (sel.all)
		log_warnx("Unregistering all runners");
	dir = config_dir(&cfg);
	system_id = system_id_load(dir);
	free(dir);
	cmd_session_open(&s, &cfg);
	if (n == 0 && !sel.all && sel.url != NULL && *sel.url && sel.token != NULL) {
		/* Not in the config: still unregister what the flags name. */
		memset(&creds, 0, sizeof(creds));
		creds.url = sel.url;
		creds.token = sel.token;
		flag_one.label = xasprintf("runner at %s", sel.url);
		start(&s, &creds, system_id, &flag_one);
	}
	for (i = 0; i < cfg.n_runners; i++) {
		if (!chosen[i])
			continue;
		us[i].label = cmd_runner_label(&cfg, &cfg.runners[i]);
		runner_config_creds(&cfg.runners[i], &creds);
		start(&s, &creds, system_id, &us[i]);
	}
	api_session_wait(&s);
	if (flag_one.label != NULL && !flag_one.ok)
		rc = 1;
	for (i = 0; i < cfg.n_runners; i++) {
		if (!chosen[i])
			continue;
		if (us[i].ok) {
			done[i] = true;
			removed++;
		} else
			rc = 1;
	}
	if (removed > 0) {
		cmd_remove_runners(&cfg, done);
		if (config_save(&cfg, &cause) != 0) {
			log_error("%s", cause);
			rc = 1;
		} else
			log_info("Updated %s", cfg.path);
	}
	api_session_close(&s);
	free(system_id);
	for (i = 0; i < cfg.n_runners; i++)
		free(us[i].label);
	free(flag_one.label);
out:
	free(us);
	free(done);
	free(chosen);
	config_release(&cfg);
	free(cause);
	return rc;
}

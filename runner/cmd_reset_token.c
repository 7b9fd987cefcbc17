/*
 * `runner reset-token`: rotate a runner's authentication token and save
 * the new one.  With the current token (POST /runners/reset_authentication_
 * token, token in the body only), or, when the old token is already lost
 * or expired, with a personal access token (--pat: the one request that
 * ever carries Private-Token).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/xmalloc.h"
#include "runner/commands.h"
#include "runner/config.h"

static const char usage[] =
    "runner reset-token [-c FILE] (-n NAME | -u URL -i ID | --all-runners) [--pat TOKEN]";

struct reset_one {
	struct api_session		*session;
	const struct config		*cfg;
	struct runner_config		*rc;
	bool				 ok;
};

static void
on_reset(enum api_result result, const struct api_answer *answer,
    struct api_runner_token *token, void *data)
{
	struct reset_one *r = data;
	char *label = cmd_runner_label(r->cfg, r->rc);

	if (result == API_OK && token != NULL && token->token != NULL && *token->token) {
		toml_table_set(r->rc->table, "token", 5,
		    toml_new_string(token->token, strlen(token->token)));
		config_set_time(r->rc->table, "token_obtained_at", clock_wall(), true);
		config_set_time(r->rc->table, "token_expires_at", token->expires_at, token->expires);
		log_info("Resetting runner authentication token... succeeded: %s", label);
		r->ok = true;
	} else if (result == API_OK)
		log_error("%s: resetting the token failed: GitLab's answer has no token", label);
	else
		log_error("%s: resetting the token failed (%s)%s", label, answer->message,
		    result == API_FORBIDDEN || result == API_UNAUTHORIZED ?
		    " (check used token)" : "");
	free(label);
	r->session->pending--;
}

int
cmd_reset_token(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "name", required_argument, NULL, 'n' },
		{ "url", required_argument, NULL, 'u' },
		{ "id", required_argument, NULL, 'i' },
		{ "all-runners", no_argument, NULL, 'a' },
		{ "pat", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cmd_select sel = { 0 };
	struct api_session s;
	struct config cfg;
	struct reset_one *rs;
	struct api_creds creds;
	const char *config_flag = NULL, *pat = NULL;
	char *cause = NULL, *end, *label, *dir;
	bool *chosen;
	size_t i, changed = 0;
	int ch, n, rc = 0;

	opterr = 0;
	optind = 1;
	while ((ch = cmd_getopt(argc, argv, "+:c:n:u:i:h", longopts, "reset-token",
	    usage)) != -1) {
		switch (ch) {
		case 'c': config_flag = optarg; break;
		case 'n': sel.name = optarg; break;
		case 'u': sel.url = optarg; break;
		case 'i':
			errno = 0;
			sel.id = strtoll(optarg, &end, 10);
			if (errno != 0 || *end != '\0' || sel.id <= 0)
				return cmd_usage_error(usage, "reset-token: --id \"%s\" is not a "
				    "runner id", optarg);
			break;
		case 'a': sel.all = true; break;
		case 'p': pat = optarg; break;
		case 'h':
			printf("usage: %s\n\nRotate runner authentication tokens and save the "
			    "new ones in config.toml.\n  --pat TOKEN  use a personal access "
			    "token instead of the runner's current token\n", usage);
			return 0;
		default:
			return 2;
		}
	}
	if (cmd_no_arguments(argc, argv, "reset-token", usage) != 0)
		return 2;
	if (!sel.all && (sel.name == NULL || !*sel.name) &&
	    (sel.url == NULL || !*sel.url || sel.id == 0))
		return cmd_usage_error(usage, "reset-token: say which runner: --name, "
		    "--url with --id, or --all-runners");
	if (pat != NULL)
		log_secret_add(pat);

	if (cmd_load_config(&cfg, config_flag, 0) != 0)
		return 1;
	chosen = xcalloc(cfg.n_runners + 1, sizeof(bool));
	rs = xcalloc(cfg.n_runners + 1, sizeof(*rs));
	if ((n = cmd_select_runners(&cfg, &sel, chosen)) <= 0) {
		if (n == 0)
			log_error("no runner in %s matches", cfg.path);
		rc = 1;
		goto out;
	}
	/*
	 * GitLab forgets the old token as it hands out the new one: if the new
	 * one cannot be saved, the runner is left with no working token.  So
	 * refuse before asking when the file cannot be replaced.
	 */
	dir = config_dir(&cfg);
	if (access(dir, W_OK) != 0) {
		log_error("%s: cannot save a new token there (%s): nothing was reset", cfg.path,
		    strerror(errno));
		free(dir);
		rc = 1;
		goto out;
	}
	free(dir);
	cmd_session_open(&s, &cfg);
	for (i = 0; i < cfg.n_runners; i++) {
		struct runner_config *r = &cfg.runners[i];

		if (!chosen[i])
			continue;
		rs[i].session = &s;
		rs[i].cfg = &cfg;
		rs[i].rc = r;
		runner_config_creds(r, &creds);
		if (pat != NULL && r->id == 0) {
			label = cmd_runner_label(&cfg, r);
			log_error("%s has no id in the config, which --pat needs: "
			    "register it again", label);
			free(label);
			rc = 1;
			continue;
		}
		s.pending++;
		if (pat != NULL)
			api_reset_token_pat(s.api, &creds, r->id, pat, on_reset, &rs[i]);
		else
			api_reset_token(s.api, &creds, on_reset, &rs[i]);
	}
	api_session_wait(&s);
	for (i = 0; i < cfg.n_runners; i++) {
		if (!chosen[i] || rs[i].session == NULL)
			continue;
		if (rs[i].ok)
			changed++;
		else
			rc = 1;
	}
	if (changed > 0) {
		if (config_save(&cfg, &cause) != 0) {
			log_error("%s: the new token%s could not be saved: %s", cfg.path,
			    changed == 1 ? "" : "s", cause);
			rc = 1;
		} else
			log_info("Updated %s", cfg.path);
	}
	api_session_close(&s);
out:
	free(rs);
	free(chosen);
	config_release(&cfg);
	free(cause);
	return rc;
}

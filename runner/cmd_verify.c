/*
 * `runner verify`: ask GitLab whether each runner's token is still good
 * (POST /runners/verify), all entries at once.  --delete removes from
 * config.toml the entries GitLab no longer knows.
 *
 * An expired or revoked token is the usual reason a runner silently stops
 * taking jobs, so the message names the entry and says what to do.
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
#include "runner/info.h"
#include "runner/system_id.h"

static const char usage[] =
    "runner verify [-c FILE] [--delete] [-n NAME | -u URL -t TOKEN]";

struct verify_one {
	struct api_session	*session;
	const struct config	*cfg;
	const struct runner_config *rc;
	struct runner_info	 info;
	enum api_result		 result;
	bool			 ok;
};

static bool
is_auth_token(const char *t)
{
	return strncmp(t, "glrt-", 5) == 0;
}

static void
on_verified(enum api_result result, const struct api_answer *answer,
    struct api_runner_token *token, void *data)
{
	struct verify_one *v = data;
	char *label = cmd_runner_label(v->cfg, v->rc);

	(void)token;
	v->result = result;
	if (result == API_OK) {
		log_info("Verifying runner... is %s: %s",
		    is_auth_token(v->rc->token) ? "valid" : "alive", label);
		v->ok = true;
	} else if (result == API_FORBIDDEN)
		log_error("%s: the token is not valid (%s): it has expired or been revoked, "
		    "or the runner was deleted in GitLab. Register it again (runner register), "
		    "or rotate its token (runner reset-token --pat)", label, answer->message);
	else
		log_error("%s: verifying failed: %s", label, answer->message);
	free(label);
	v->session->pending--;
}

int
cmd_verify(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "name", required_argument, NULL, 'n' },
		{ "url", required_argument, NULL, 'u' },
		{ "token", required_argument, NULL, 't' },
		{ "delete", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cmd_select sel = { .all = true };
	struct api_session s;
	struct config cfg;
	struct verify_one *vs;
	struct api_creds creds;
	const char *config_flag = NULL;
	char *cause = NULL, *dir, *system_id, *label;
	bool del = false, *chosen, *gone;
	size_t i, removed = 0;
	int ch, n, rc = 0;

	opterr = 0;
	optind = 1;
	while ((ch = cmd_getopt(argc, argv, "+:c:n:u:t:h", longopts, "verify",
	    usage)) != -1) {
		switch (ch) {
		case 'c': config_flag = optarg; break;
		case 'n': sel.name = optarg; break;
		case 'u': sel.url = optarg; break;
		case 't': sel.token = optarg; break;
		case 'd': del = true; break;
		case 'h':
			printf("usage: %s\n\nCheck every runner's token with GitLab.\n"
			    "  --delete   remove the runners GitLab no longer knows\n", usage);
			return 0;
		default:
			return 2;
		}
	}
	if (cmd_no_arguments(argc, argv, "verify", usage) != 0)
		return 2;

	if (cmd_load_config(&cfg, config_flag, 0) != 0)
		return 1;
	chosen = xcalloc(cfg.n_runners + 1, sizeof(bool));
	gone = xcalloc(cfg.n_runners + 1, sizeof(bool));
	vs = xcalloc(cfg.n_runners + 1, sizeof(*vs));
	if ((n = cmd_select_runners(&cfg, &sel, chosen)) < 0) {
		rc = 1;
		goto out;
	}
	if (n == 0)
		log_warnx("no runner in %s to verify", cfg.path);

	dir = config_dir(&cfg);
	system_id = system_id_load(dir);
	free(dir);
	cmd_session_open(&s, &cfg);
	for (i = 0; i < cfg.n_runners; i++) {
		const struct runner_config *r = &cfg.runners[i];

		if (!chosen[i])
			continue;
		if (r->problem != NULL) {
			label = cmd_runner_label(&cfg, r);
			log_warnx("%s: skipped: %s", label, r->problem);
			free(label);
			rc = 1;
			continue;
		}
		vs[i].session = &s;
		vs[i].cfg = &cfg;
		vs[i].rc = r;
		runner_info_init(&vs[i].info, &cfg, r, false);
		runner_config_creds(r, &creds);
		s.pending++;
		api_verify(s.api, &creds, &vs[i].info.info, system_id, on_verified, &vs[i]);
	}
	api_session_wait(&s);
	for (i = 0; i < cfg.n_runners; i++) {
		if (!chosen[i] || vs[i].session == NULL)
			continue;
		runner_info_release(&vs[i].info);
		if (vs[i].ok)
			continue;
		if (del && vs[i].result == API_FORBIDDEN) {
			gone[i] = true;
			removed++;
		} else
			rc = 1;
	}
	if (removed > 0) {
		cmd_remove_runners(&cfg, gone);
		if (config_save(&cfg, &cause) != 0) {
			log_error("%s", cause);
			rc = 1;
		} else
			log_info("Updated %s: removed %zu runner%s GitLab no longer knows", cfg.path,
			    removed, removed == 1 ? "" : "s");
	}
	api_session_close(&s);
	free(system_id);
out:
	free(vs);
	free(gone);
	free(chosen);
	config_release(&cfg);
	free(cause);
	return rc;
}

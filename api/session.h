/*
 * A private loop and GitLab client for a command that makes a few calls
 * and waits for them: start calls with `pending` counted up, have their
 * callbacks count it down, and api_session_wait() runs the loop until it
 * is back at 0.  SIGINT sets `interrupted` (a second one exits at once),
 * so a command can finish what it started and clean up.
 */
#ifndef API_SESSION_H
#define API_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "api/api.h"

struct api_session {
	uv_loop_t	 loop;
	struct api	*api;
	uv_signal_t	 sigint;
	int		 pending;
	bool		 interrupted;
};

/*
 * config_dir: where certs/ is (NULL: none, as for the helper commands,
 * which have no config.toml); connection_max_age_ms: 0 for none.
 */
void	api_session_open(struct api_session *s, const char *config_dir,
	    uint64_t connection_max_age_ms);
void	api_session_wait(struct api_session *s);
void	api_session_close(struct api_session *s);

#endif

/*
 * A command's private loop and GitLab client; see session.h.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api/session.h"
#include "lib/log.h"
#include "lib/metrics.h"

static void
on_sigint(uv_signal_t *sig, int signum)
{
	struct api_session *s = sig->data;

	(void)signum;
	if (s->interrupted) {
		fprintf(stderr, "runner: interrupted again, exiting now\n");
		_exit(130);
	}
	s->interrupted = true;
	log_warnx("interrupted: finishing what was started (press Ctrl-C again to quit at once)");
}

void
api_session_open(struct api_session *s, const char *config_dir,
    uint64_t connection_max_age_ms)
{
	struct api_config ac = { 0 };

	memset(s, 0, sizeof(*s));
	if (uv_loop_init(&s->loop) != 0)
		fatalx("cannot create an event loop");
	ac.loop = &s->loop;
	ac.config_dir = config_dir;
	ac.connection_max_age_ms = connection_max_age_ms;
	s->api = api_new(&ac);
	uv_signal_init(&s->loop, &s->sigint);
	s->sigint.data = s;
	uv_signal_start(&s->sigint, on_sigint, SIGINT);
	/* The signal watcher alone must not keep api_session_wait() running. */
	uv_unref((uv_handle_t *)&s->sigint);
}

void
api_session_wait(struct api_session *s)
{
	while (s->pending > 0)
		uv_run(&s->loop, UV_RUN_ONCE);
}

void
api_session_close(struct api_session *s)
{
	api_close(s->api);
	uv_close((uv_handle_t *)&s->sigint, NULL);
	uv_run(&s->loop, UV_RUN_DEFAULT);
	if (uv_loop_close(&s->loop) != 0)
		log_warnx("event loop closed with handles still open");
	/* The HTTP layer counted into the process's metrics: nothing serves them here. */
	metrics_reset();
}

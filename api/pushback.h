/*
 * GitLab's pushback, per endpoint class: when an answer says "wait"
 * (429 or 503 with Retry-After or RateLimit-ResetTime), nothing more of
 * that class (method, host, path with ids as {id}) is sent until the
 * window ends; then one request goes alone, the probe, and the rest wait
 * for its answer.  Without this, 50 running jobs each wait out their own
 * Retry-After and then try again on their own: 50 requests per window
 * against a server that asked for a pause, where one would tell.
 *
 * The rules are here, without libcurl or a clock of their own, so they are
 * tested alone; api/http.c holds requests back as they say.  A "who" is
 * the caller's request, compared by address only.
 */
#ifndef API_PUSHBACK_H
#define API_PUSHBACK_H

#include <stdbool.h>
#include <stdint.h>

struct pushback_gate {
	struct pushback_gate	*next;
	char			*key;	/* "PATCH http://host:port/jobs/{id}/trace" */
	uint64_t		 until;	/* monotonic ms: closed before this */
	const void		*probe;	/* let through after the window, or NULL */
	unsigned		 users;	/* requests that hold it (pushback_gate) */
};

enum pushback_verdict {
	PUSHBACK_SEND,		/* send now */
	PUSHBACK_WAIT_WINDOW,	/* hold until *until */
	PUSHBACK_WAIT_PROBE,	/* hold until the probe is answered */
};

/*
 * The gate of key in *list, made (open) on first use, for one more user;
 * pushback_put() when done with it.  Gates nobody uses whose window is
 * over are dropped here: keys are few (ids are {id}), but a storage URL
 * can make a new one for every download.  The list owns the gates.
 */
struct pushback_gate	*pushback_gate(struct pushback_gate **list, const char *key,
			    uint64_t now);
void			 pushback_put(struct pushback_gate *g);
void			 pushback_free(struct pushback_gate *list);

/* May who send an attempt now?  The first asking after the window probes. */
enum pushback_verdict	 pushback_admit(struct pushback_gate *g, const void *who,
			    uint64_t now, uint64_t *until);

/*
 * who had an answer.  wait_until: the end of the wait the server asked
 * for (monotonic ms), or 0 when the answer asked for none.  Returns true
 * when the gate opened, so that the requests held for it go now.
 */
bool			 pushback_answered(struct pushback_gate *g, const void *who,
			    uint64_t wait_until);

/* who will send no more (done, given up, canceled); true: wake the held. */
bool			 pushback_gone(struct pushback_gate *g, const void *who);

#endif

/*
 * GitLab's pushback, per endpoint class: when an answer says "wait"
 * (429 or 503 with Retry-After or RateLimit-ResetTime), nothing more of
 * that class (method, host, path with ids as {id}) is sent until the
 * window ends; then one request goes alone, the probe, and the rest wait
 * for its answer.  Without this, 50 running jobs each wait out their own
 * Retry-After and then try again on their own: 50 requests per window
 * against a server that asked for a pause, where one would tell.
 *
 * A server that is down or drowning says no "wait" (a 502 from the load
 * balancer, a refused connection, a timeout), and it needs the pause
 * most: such a failure closes the class too, for a window of its own
 * that doubles with every probe that fails again (equal jitter, so that
 * processes spread out).  Only answers to requests sent after the gate
 * last changed count: a long poll that left before the outage and ends
 * in it says nothing about the server now.
 *
 * The rules are here, without libcurl or a clock of their own, so they are
 * tested alone; api/http.c holds requests back as they say.  A "who" is
 * the caller's request, compared by address only.
 */
#ifndef API_PUSHBACK_H
#define API_PUSHBACK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct pushback_gate {
	struct pushback_gate	*next;
	char			*key;	/* "PATCH http://host:port/jobs/{id}/trace" */
	uint64_t		 until;	/* monotonic ms: closed before this; 0: open */
	const void		*probe;	/* let through after the window, or NULL */
	unsigned		 users;	/* requests that hold it (pushback_gate) */
	uint64_t		 changed_at; /* monotonic ms it last closed or opened */
	bool			 failing; /* closed by failures, not by a server's "wait" */
	unsigned		 failed_windows; /* in a row: the next window's doubling */
	time_t			 since;	/* wall clock it closed, for logs: the caller's */
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
 * who, sent at sent_at (monotonic ms), had an answer.  wait_until: the end
 * of the wait the server asked for (monotonic ms), or 0 when the answer
 * asked for none.  Returns true when the gate opened, so that the
 * requests held for it go now.
 */
bool			 pushback_answered(struct pushback_gate *g, const void *who,
			    uint64_t sent_at, uint64_t wait_until);

enum pushback_failure {
	PUSHBACK_STALE,		/* sent before the gate last changed: no news */
	PUSHBACK_CLOSED,	/* it was open: held from now on */
	PUSHBACK_CLOSED_AGAIN,	/* the probe failed: the next, longer window */
	PUSHBACK_HELD_ALREADY,	/* closed, and this was not the probe */
};

/*
 * who, sent at sent_at, failed as a server down or overloaded fails (5xx
 * without a wait, no answer).  A window opens of backoff_delay(min_ms,
 * max_ms, windows failed in a row, rnd): min_ms / 2 .. min_ms first, then
 * doubling up to max_ms; the new end is in *until.
 */
enum pushback_failure	 pushback_failed(struct pushback_gate *g, const void *who,
			    uint64_t sent_at, uint64_t now, uint64_t min_ms, uint64_t max_ms,
			    uint32_t rnd, uint64_t *until);

/* who will send no more (done, given up, canceled); true: wake the held. */
bool			 pushback_gone(struct pushback_gate *g, const void *who);

#endif

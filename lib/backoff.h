/*
 * Exponential backoff with jitter, as a pure function: the caller passes
 * the random number, so tests need neither a clock nor a seed.
 *
 * The delay for attempt n (0-based) is base = min * 2^n, capped at max;
 * the returned value is drawn from [base / 2, base] ("equal jitter"), the
 * first one included (min 100 ms gives a first wait of 50 .. 100 ms).
 * Half of the base is kept so that a crowd of clients spreads out without
 * any of them retrying almost at once.
 */
#ifndef LIB_BACKOFF_H
#define LIB_BACKOFF_H

#include <stdint.h>

struct backoff {
	uint64_t	min_ms;
	uint64_t	max_ms;
	unsigned	attempt;	/* how many delays were handed out */
};

/* The delay in milliseconds for `attempt`, using `rnd` for the jitter. */
uint64_t	backoff_delay(uint64_t min_ms, uint64_t max_ms, unsigned attempt,
		    uint32_t rnd);

void		backoff_init(struct backoff *b, uint64_t min_ms, uint64_t max_ms);
/* backoff_delay() for the next attempt, then count it. */
uint64_t	backoff_next(struct backoff *b, uint32_t rnd);
/* Back to the first attempt (after a success). */
void		backoff_reset(struct backoff *b);

#endif

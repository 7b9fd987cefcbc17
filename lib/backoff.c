/*
 * Exponential backoff with equal jitter.  The arithmetic is kept pure (the
 * caller supplies the random number) so tests can pin both ends of the
 * jitter range.  The first wait is jittered too: with a fixed first wait,
 * clients that a rate limiter turned away together come back together,
 * and the one that got through keeps getting through (seen with nginx's
 * limit_req in the transport tests).
 */
#include <limits.h>
#include <stdint.h>

#include "lib/backoff.h"

uint64_t
backoff_delay(uint64_t min_ms, uint64_t max_ms, unsigned attempt, uint32_t rnd)
{
	uint64_t	base, half, d;

	/* A misconfigured pair (max < min) is taken as a fixed delay. */
	if (max_ms < min_ms)
		max_ms = min_ms;

	/*
	 * Double until the cap instead of shifting by attempt: a large
	 * attempt count would shift past 63 bits or overflow the product.
	 */
	base = min_ms;
	for (; attempt > 0 && base != 0 && base < max_ms; attempt--) {
		if (base > max_ms / 2) {
			base = max_ms;
			break;
		}
		base *= 2;
	}
	if (base > max_ms)
		base = max_ms;

	half = base / 2;
	/* base - half + 1 cannot be zero: base - half <= UINT64_MAX / 2 + 1. */
	d = half + (uint64_t)rnd % (base - half + 1);
	if (d > max_ms)
		d = max_ms;
	return d;
}

void
backoff_init(struct backoff *b, uint64_t min_ms, uint64_t max_ms)
{
	b->min_ms = min_ms;
	b->max_ms = max_ms;
	b->attempt = 0;
}

uint64_t
backoff_next(struct backoff *b, uint32_t rnd)
{
	uint64_t	d;

	d = backoff_delay(b->min_ms, b->max_ms, b->attempt, rnd);
	/* Past the cap further attempts change nothing; only avoid wrapping. */
	if (b->attempt < UINT_MAX)
		b->attempt++;
	return d;
}

void
backoff_reset(struct backoff *b)
{
	b->attempt = 0;
}

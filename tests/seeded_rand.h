/*
 * xorshift64* for tests and benchmarks: a fixed seed, so a failure or a
 * figure repeats run after run.  Not for anything that must be unguessable
 * (lib/rand.h is).
 */
#ifndef TESTS_SEEDED_RAND_H
#define TESTS_SEEDED_RAND_H

#include <stdint.h>

static uint64_t	seeded_rand_state = 0x9e3779b97f4a7c15ull;

static inline uint32_t
rnd(void)
{
	seeded_rand_state ^= seeded_rand_state >> 12;
	seeded_rand_state ^= seeded_rand_state << 25;
	seeded_rand_state ^= seeded_rand_state >> 27;
	return (uint32_t)((seeded_rand_state * 0x2545f4914f6cdd1dull) >> 32);
}

#endif

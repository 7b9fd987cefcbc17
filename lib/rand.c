/*
 * A fast non-cryptographic generator (xoshiro128**) seeded once per
 * process from getrandom().  The values only spread out retries and name
 * things uniquely, so a kernel call per number would be wasted.  Not
 * thread-safe and not reseeded after fork; the daemon is one thread.
 */
#include <stdint.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "lib/rand.h"

static uint32_t	rand_state[4];
static int	rand_seeded;

static uint32_t
rand_rotl(uint32_t x, int k)
{
	return (x << k) | (x >> (32 - k));
}

/* splitmix32-style mixing to spread a weak fallback seed over the state. */
static uint32_t
rand_mix(uint64_t *s)
{
	uint64_t	z;

	z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)((z ^ (z >> 31)) >> 32);
}

static void
rand_seed(void)
{
	unsigned char	*p = (unsigned char *)rand_state;
	size_t		 got = 0;
	ssize_t		 n;
	struct timespec	 ts;
	uint64_t	 s;
	int		 i;

	while (got < sizeof rand_state) {
		n = getrandom(p + got, sizeof rand_state - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got < sizeof rand_state) {
		/*
		 * No getrandom (old kernel, seccomp): time and pid still keep
		 * two runners apart, which is all jitter needs.
		 */
		clock_gettime(CLOCK_REALTIME, &ts);
		s = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		s ^= (uint64_t)getpid() << 32;
		for (i = 0; i < 4; i++)
			rand_state[i] ^= rand_mix(&s);
	}
	/* xoshiro must not start from all zeroes. */
	if ((rand_state[0] | rand_state[1] | rand_state[2] |
	    rand_state[3]) == 0)
		rand_state[0] = 1;
	rand_seeded = 1;
}

uint32_t
rand_u32(void)
{
	uint32_t	result, t;

	if (!rand_seeded)
		rand_seed();
	result = rand_rotl(rand_state[1] * 5, 7) * 9;
	t = rand_state[1] << 9;
	rand_state[2] ^= rand_state[0];
	rand_state[3] ^= rand_state[1];
	rand_state[1] ^= rand_state[2];
	rand_state[0] ^= rand_state[3];
	rand_state[2] ^= t;
	rand_state[3] = rand_rotl(rand_state[3], 11);
	return result;
}

void
rand_hex(char *out, size_t n)
{
	static const char	 digits[] = "0123456789abcdef";
	uint32_t		 r = 0;
	size_t			 i;

	for (i = 0; i < n; i++) {
		if (i % 8 == 0)
			r = rand_u32();
		out[i] = digits[r & 0xf];
		r >>= 4;
	}
	out[n] = '\0';
}

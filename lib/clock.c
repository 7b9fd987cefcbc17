/*
 * Clocks.  The monotonic clock drives every timeout so that a wall-clock
 * step (NTP, a suspended VM) neither fires nor starves them; the wall
 * clock is only formatted for people.
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "lib/clock.h"

uint64_t
clock_mono_ns(void)
{
	struct timespec	ts;

	/* Cannot fail for CLOCK_MONOTONIC on Linux with a valid pointer. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t
clock_mono_ms(void)
{
	return clock_mono_ns() / 1000000u;
}

time_t
clock_wall(void)
{
	return time(NULL);
}

void
clock_rfc3339(time_t t, char out[32])
{
	struct tm	tm;

	if (gmtime_r(&t, &tm) == NULL ||
	    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(out, 32, "1970-01-01T00:00:00Z");
}

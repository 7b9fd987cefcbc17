/*
 * Time.  Deadlines, intervals and backoff use the monotonic clock, which
 * neither jumps with NTP nor goes backwards; the wall clock is only for
 * what people read (log lines, token_obtained_at).
 */
#ifndef LIB_CLOCK_H
#define LIB_CLOCK_H

#include <stdint.h>
#include <time.h>

uint64_t	clock_mono_ns(void);
uint64_t	clock_mono_ms(void);
/* Seconds since the epoch, UTC. */
time_t		clock_wall(void);
/* Format t as RFC 3339 UTC, e.g. 2026-11-30T10:06:51Z (21 bytes with the NUL). */
void		clock_rfc3339(time_t t, char out[32]);

#endif

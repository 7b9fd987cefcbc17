/*
 * Randomness for jitter, request ids and system ids.  Seeded from the
 * kernel (getrandom), so two runners started at the same instant do not
 * back off in lockstep.  Not for keys.
 */
#ifndef LIB_RAND_H
#define LIB_RAND_H

#include <stddef.h>
#include <stdint.h>

uint32_t	rand_u32(void);
/* n random lower-case hex digits and a NUL into out (out holds n + 1). */
void		rand_hex(char *out, size_t n);

#endif

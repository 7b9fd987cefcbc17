/*
 * Byte counts for a person to read ("12.3 MiB"), as the job log shows
 * archive and transfer sizes.
 */
#ifndef LIB_SIZE_H
#define LIB_SIZE_H

#include <stddef.h>

/* bytes in binary units, one decimal above 1 KiB; truncated to fit out. */
void	size_format(unsigned long long bytes, char *out, size_t size);

#endif

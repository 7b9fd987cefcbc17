/*
 * CRC-32 (zlib's, the one GitLab's trace checksum uses), fast where the
 * CPU can multiply carry-less: every byte of a job's log is summed.
 */
#ifndef LIB_CRC32_H
#define LIB_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* As zlib's crc32(crc, p, n): crc32_update(0, NULL, 0) is the start. */
uint32_t	crc32_update(uint32_t crc, const void *p, size_t n);

#endif

/*
 * CRC-32 by folding (Gopal et al., "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ", Intel 2009): four 128-bit lanes are
 * multiplied forward by x^512 and added to the next 64 bytes, then
 * folded into one lane, to 64 bits, and reduced (Barrett).  zlib 1.2's
 * table-driven crc32() does about 1.5 GB/s and was a tenth of the log
 * path; this does several times that.  zlib does what is left over, and
 * all of it on other CPUs.
 *
 * The constants are x^k mod P(x), bit-reflected, for the reflected
 * polynomial P = 0x104c11db7: the fold distances 4*128+32 and 4*128-32
 * (k1, k2), 128+32 and 128-32 (k3, k4), 64 (k5), then P' and
 * mu = floor(x^64 / P) for the reduction.
 */
#include <stdbool.h>
#include <stdint.h>

#include <zlib.h>

#include "lib/crc32.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define CRC_FOLD	1
#include <immintrin.h>

#define FOLD_MIN	64

__attribute__((target("pclmul,sse4.1")))
static uint32_t
crc_fold(uint32_t crc, const uint8_t *p, size_t n)
{
	const __m128i	 k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);
	const __m128i	 k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
	const __m128i	 k5 = _mm_set_epi64x(0, 0x0163cd6124);
	const __m128i	 poly = _mm_set_epi64x(0x01f7011641, 0x01db710641);
	const __m128i	 low32 = _mm_setr_epi32(-1, 0, -1, 0);
	__m128i		 x0, x1, x2, x3, x4, y1, y2, y3, y4;

	/* n >= 64 and a multiple of 16; crc is inverted, as zlib keeps it. */
	x1 = _mm_loadu_si128((const __m128i *)(const void *)p);
	x2 = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
	x3 = _mm_loadu_si128((const __m128i *)(const void *)(p + 32));
	x4 = _mm_loadu_si128((const __m128i *)(const void *)(p + 48));
	x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
	p += 64;
	n -= 64;
	for (; n >= 64; p += 64, n -= 64) {
		y1 = _mm_clmulepi64_si128(x1, k1k2, 0x00);
		y2 = _mm_clmulepi64_si128(x2, k1k2, 0x00);
		y3 = _mm_clmulepi64_si128(x3, k1k2, 0x00);
		y4 = _mm_clmulepi64_si128(x4, k1k2, 0x00);
		x1 = _mm_clmulepi64_si128(x1, k1k2, 0x11);
		x2 = _mm_clmulepi64_si128(x2, k1k2, 0x11);
		x3 = _mm_clmulepi64_si128(x3, k1k2, 0x11);
		x4 = _mm_clmulepi64_si128(x4, k1k2, 0x11);
		x1 = _mm_xor_si128(_mm_xor_si128(x1, y1),
		    _mm_loadu_si128((const __m128i *)(const void *)p));
		x2 = _mm_xor_si128(_mm_xor_si128(x2, y2),
		    _mm_loadu_si128((const __m128i *)(const void *)(p + 16)));
		x3 = _mm_xor_si128(_mm_xor_si128(x3, y3),
		    _mm_loadu_si128((const __m128i *)(const void *)(p + 32)));
		x4 = _mm_xor_si128(_mm_xor_si128(x4, y4),
		    _mm_loadu_si128((const __m128i *)(const void *)(p + 48)));
	}

	/* Four lanes into one, then the 16-byte blocks left. */
	y1 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
	x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
	x1 = _mm_xor_si128(_mm_xor_si128(x1, y1), x2);
	y1 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
	x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
	x1 = _mm_xor_si128(_mm_xor_si128(x1, y1), x3);
	y1 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
	x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
	x1 = _mm_xor_si128(_mm_xor_si128(x1, y1), x4);
	for (; n >= 16; p += 16, n -= 16) {
		y1 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
		x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
		x1 = _mm_xor_si128(_mm_xor_si128(x1, y1),
		    _mm_loadu_si128((const __m128i *)(const void *)p));
	}

	/* 128 bits to 64. */
	x2 = _mm_clmulepi64_si128(x1, k3k4, 0x10);
	x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
	x2 = _mm_srli_si128(x1, 4);
	x1 = _mm_and_si128(x1, low32);
	x1 = _mm_xor_si128(_mm_clmulepi64_si128(x1, k5, 0x00), x2);

	/* Barrett reduction to 32. */
	x2 = _mm_and_si128(x1, low32);
	x2 = _mm_clmulepi64_si128(x2, poly, 0x10);
	x2 = _mm_and_si128(x2, low32);
	x2 = _mm_clmulepi64_si128(x2, poly, 0x00);
	x0 = _mm_xor_si128(x1, x2);
	return (uint32_t)_mm_extract_epi32(x0, 1);
}

static bool
crc_fold_ok(void)
{
	static int	 ok = -1;

	if (ok < 0) {
		__builtin_cpu_init();
		ok = __builtin_cpu_supports("pclmul") &&
		    __builtin_cpu_supports("sse4.1");
	}
	return ok;
}
#endif

uint32_t
crc32_update(uint32_t crc, const void *p, size_t n)
{
	const uint8_t	*b = p;
	size_t		 k;

	if (p == NULL)
		return 0;	/* zlib's start value */
#ifdef CRC_FOLD
	if (n >= FOLD_MIN && crc_fold_ok()) {
		k = n & ~(size_t)15;
		crc = ~crc_fold(~crc, b, k);
		b += k;
		n -= k;
	}
#endif
	/* zlib takes at most 4 GiB a call. */
	for (; n > 0; b += k, n -= k) {
		k = n < 0x40000000 ? n : 0x40000000;
		crc = (uint32_t)crc32(crc, b, (uInt)k);
	}
	return crc;
}

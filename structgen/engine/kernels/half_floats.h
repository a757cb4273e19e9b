/* IEEE half-precision (float16) values of a KV cache stored at two bytes per element:
 * float32 -> float16 rounded to nearest, ties to even (overflow to infinity), as torch's
 * `.to(torch.float16)` and F16C's vcvtps2ph round, and float16 -> float32, which is
 * exact. The portable conversions give F16C's bits for every finite value and infinity
 * (NaN stays NaN); the AVX2 paths use F16C, which every AVX2 CPU has. */

#ifndef STRUCTGEN_HALF_FLOATS_H
#define STRUCTGEN_HALF_FLOATS_H

#include <stdint.h>
#include <string.h>

#include "simd.h"

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff, bits;
    if (exponent == 0) { /* zero or subnormal: mantissa * 2^-24, exact in float32 */
        float magnitude = (float)mantissa * 0x1p-24f;
        memcpy(&bits, &magnitude, sizeof bits);
        bits |= sign;
    } else if (exponent == 0x1f) {
        bits = sign | 0x7f800000 | (mantissa << 13);
    } else {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    }
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static uint16_t float_to_half(float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000);
    uint32_t magnitude = bits & 0x7fffffff;
    if (magnitude > 0x7f800000) return sign | 0x7e00 | (uint16_t)((magnitude >> 13) & 0x3ff); /* NaN */
    if (magnitude >= 0x477ff000) return sign | 0x7c00; /* 65520 and up round to infinity */
    if (magnitude >= 0x38800000) /* a normal half: rebias the exponent, round the 13 bits dropped */
        return sign | (uint16_t)((magnitude - 0x38000000 + 0xfff + ((magnitude >> 13) & 1)) >> 13);
    float small;
    memcpy(&small, &magnitude, sizeof small);
    float units = small * 0x1p24f; /* exact: in [0, 1024) units of 2^-24 */
    uint32_t rounded = (uint32_t)((units + 8388608.0f) - 8388608.0f); /* to nearest, ties to even */
    return sign | (uint16_t)rounded; /* 1024 is the smallest normal half's encoding */
}

#if SIMD_HAVE_AVX2

__attribute__((target("avx2,fma,f16c"))) static void half_row_to_float_avx2(const uint16_t *src, float *dst,
                                                                            int64_t n) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + j))));
    for (; j < n; j++) dst[j] = half_to_float(src[j]);
}

__attribute__((target("avx2,fma,f16c"))) static void float_row_to_half_avx2(const float *src, uint16_t *dst,
                                                                            int64_t n) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm_storeu_si128((__m128i *)(dst + j), _mm256_cvtps_ph(_mm256_loadu_ps(src + j), _MM_FROUND_TO_NEAREST_INT));
    for (; j < n; j++) dst[j] = float_to_half(src[j]);
}

#endif

static void half_row_to_float(const uint16_t *src, float *dst, int64_t n, int portable) {
#if SIMD_HAVE_AVX2
    if (!portable && simd_use_avx2()) {
        half_row_to_float_avx2(src, dst, n);
        return;
    }
#endif
    for (int64_t j = 0; j < n; j++) dst[j] = half_to_float(src[j]);
}

static void float_row_to_half(const float *src, uint16_t *dst, int64_t n, int portable) {
#if SIMD_HAVE_AVX2
    if (!portable && simd_use_avx2()) {
        float_row_to_half_avx2(src, dst, n);
        return;
    }
#endif
    for (int64_t j = 0; j < n; j++) dst[j] = float_to_half(src[j]);
}

#endif

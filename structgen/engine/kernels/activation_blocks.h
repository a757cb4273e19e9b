/* Activation rows quantized to int8 per block of 32, as llama.cpp does before an integer
 * matmul: per block, a scale d = max|x| / 127, q = x / d rounded to nearest (ties to
 * even), and the block's sum s = d * sum(q) (which weights with a minimum need). The AVX2
 * path and the portable path give the same bits. Used by int4_rows.h and int8_rows.h. */

#ifndef STRUCTGEN_ACTIVATION_BLOCKS_H
#define STRUCTGEN_ACTIVATION_BLOCKS_H

#include <math.h>
#include <stdint.h>

#include "simd.h"

#define ACTIVATION_BLOCK 32

/* One activation block: q[32], d, s = d * sum(q). */
static void activation_blocks_quantize_block_portable(const float *x, int8_t *q, float *d, float *s) {
    float amax = 0.0f;
    for (int j = 0; j < ACTIVATION_BLOCK; j++) amax = fmaxf(amax, fabsf(x[j]));
    float scale = amax / 127.0f, inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
    int sum = 0;
    for (int j = 0; j < ACTIVATION_BLOCK; j++) {
        q[j] = (int8_t)nearbyintf(x[j] * inverse);
        sum += q[j];
    }
    *d = scale;
    *s = scale * (float)sum;
}

#if SIMD_HAVE_AVX2

__attribute__((target("avx2,fma"))) static void activation_blocks_quantize_block_avx2(const float *x, int8_t *q,
                                                                              float *d, float *s) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4], amax = _mm256_setzero_ps();
    for (int j = 0; j < 4; j++) {
        v[j] = _mm256_loadu_ps(x + 8 * j);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[j]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    float scale = _mm_cvtss_f32(m) / 127.0f, inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
    __m256i ints[4];
    for (int j = 0; j < 4; j++)
        ints[j] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[j], _mm256_set1_ps(inverse)),
                                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m256i total = _mm256_add_epi32(_mm256_add_epi32(ints[0], ints[1]), _mm256_add_epi32(ints[2], ints[3]));
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
    /* int32 -> int8 in order: packs interleave the 128-bit halves, the permute undoes it */
    __m256i words = _mm256_packs_epi32(ints[0], ints[1]), words2 = _mm256_packs_epi32(ints[2], ints[3]);
    __m256i bytes = _mm256_packs_epi16(words, words2);
    bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)q, bytes);
    *d = scale;
    *s = scale * (float)_mm_cvtsi128_si32(t);
}

#endif

/* The activations' blocks: qx [n * k], dx and sx [n * k / 32]. */
static void activation_blocks_quantize(const float *x, int8_t *qx, float *dx, float *sx, int64_t n, int64_t k,
                               int portable) {
    int64_t count = n * (k / ACTIVATION_BLOCK);
#if SIMD_HAVE_AVX2
    if (!portable && simd_use_avx2()) {
        for (int64_t b = 0; b < count; b++)
            activation_blocks_quantize_block_avx2(x + b * ACTIVATION_BLOCK, qx + b * ACTIVATION_BLOCK, dx + b, sx + b);
        return;
    }
#endif
    for (int64_t b = 0; b < count; b++)
        activation_blocks_quantize_block_portable(x + b * ACTIVATION_BLOCK, qx + b * ACTIVATION_BLOCK, dx + b, sx + b);
}

#endif

/* The exponential of the engine's C kernels (SiLU, softmax), eight at a time on AVX2 and
 * one at a time on the portable path, with the same operations and roundings in both, so
 * the two give the same bits: e^x = 2^n * e^r with n = floor(x * log2(e) + 1/2) and
 * r = x - n * ln(2) (ln(2) split in two so that n * its high part is exact), and e^r by
 * its Taylor series to r^7 / 7! (|r| <= ln(2) / 2: truncation error under 1e-8, below
 * float32's step; results within 1.5 float32 steps of exact). x is clamped to [-87, 88],
 * where 2^n stays a normal float: below -87 the result is e^-87 (~1.6e-38), not 0. */

#ifndef STRUCTGEN_VECTOR_EXP_H
#define STRUCTGEN_VECTOR_EXP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "simd.h"

#define VECTOR_EXP_LOW -87.0f
#define VECTOR_EXP_HIGH 88.0f
#define VECTOR_EXP_LOG2E 1.44269504088896341f
#define VECTOR_EXP_LN2_HIGH 0.693359375f /* few bits: n * this is exact */
#define VECTOR_EXP_LN2_LOW -2.12194440e-4f
/* 1/7!, 1/6!, ..., 1/1!, 1/0! */
static const float vector_exp_taylor[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};

static float vector_exp_portable(float x) {
    x = fminf(fmaxf(x, VECTOR_EXP_LOW), VECTOR_EXP_HIGH);
    float n = floorf(x * VECTOR_EXP_LOG2E + 0.5f);
    float r = fmaf(n, -VECTOR_EXP_LN2_HIGH, x);
    r = fmaf(n, -VECTOR_EXP_LN2_LOW, r);
    float p = vector_exp_taylor[0];
    for (int j = 1; j < 8; j++) p = fmaf(p, r, vector_exp_taylor[j]);
    int32_t bits = ((int32_t)n + 127) << 23;
    float two_to_n;
    memcpy(&two_to_n, &bits, sizeof two_to_n);
    return p * two_to_n;
}

#if SIMD_HAVE_AVX2

__attribute__((target("avx2,fma"))) static inline __m256 vector_exp_avx2(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(VECTOR_EXP_LOW)), _mm256_set1_ps(VECTOR_EXP_HIGH));
    __m256 n = _mm256_floor_ps(
        _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(VECTOR_EXP_LOG2E)), _mm256_set1_ps(0.5f)));
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-VECTOR_EXP_LN2_HIGH), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-VECTOR_EXP_LN2_LOW), r);
    __m256 p = _mm256_set1_ps(vector_exp_taylor[0]);
    for (int j = 1; j < 8; j++) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(vector_exp_taylor[j]));
    __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

#endif

#endif

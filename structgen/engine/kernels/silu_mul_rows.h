/* The SiLU-gated activation of a Llama MLP on float32 rows: out = silu(gate) * up, for
 * rows [gate | up] of 2 * width, with silu(g) = g / (1 + e^-g) rounded before the
 * product.
 *
 * The exponential is computed here, eight at a time on AVX2 and one at a time on the
 * portable path, with the same operations and roundings in both, so the two give the
 * same bits: e^x = 2^n * e^r with n = floor(x * log2(e) + 1/2) and r = x - n * ln(2)
 * (ln(2) split in two so that n * its high part is exact), and e^r by its Taylor series
 * to r^7 / 7! (|r| <= ln(2) / 2: truncation error under 1e-8, below float32's step).
 * x is clamped to [-87, 88], where 2^n stays a normal float: for g < -88, silu(g) is
 * then g * e^-88 (|silu| < 1e-36 for |g| < 100) where it is ~0, and g itself for g > 87. */

#ifndef STRUCTGEN_SILU_MUL_ROWS_H
#define STRUCTGEN_SILU_MUL_ROWS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "simd.h"

#define SILU_EXP_LOW -87.0f
#define SILU_EXP_HIGH 88.0f
#define SILU_LOG2E 1.44269504088896341f
#define SILU_LN2_HIGH 0.693359375f /* few bits: n * this is exact */
#define SILU_LN2_LOW -2.12194440e-4f
/* 1/7!, 1/6!, ..., 1/1!, 1/0! */
static const float silu_taylor[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};

static float silu_exp_portable(float x) {
    x = fminf(fmaxf(x, SILU_EXP_LOW), SILU_EXP_HIGH);
    float n = floorf(x * SILU_LOG2E + 0.5f);
    float r = fmaf(n, -SILU_LN2_HIGH, x);
    r = fmaf(n, -SILU_LN2_LOW, r);
    float p = silu_taylor[0];
    for (int j = 1; j < 8; j++) p = fmaf(p, r, silu_taylor[j]);
    int32_t bits = ((int32_t)n + 127) << 23;
    float two_to_n;
    memcpy(&two_to_n, &bits, sizeof two_to_n);
    return p * two_to_n;
}

static void silu_mul_portable(const float *gate, const float *up, float *dst, int64_t width) {
    for (int64_t j = 0; j < width; j++) {
        float activated = gate[j] / (1.0f + silu_exp_portable(0.0f - gate[j]));
        dst[j] = activated * up[j];
    }
}

#if SIMD_HAVE_AVX2

__attribute__((target("avx2,fma"))) static inline __m256 silu_exp_avx2(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(SILU_EXP_LOW)), _mm256_set1_ps(SILU_EXP_HIGH));
    __m256 n = _mm256_floor_ps(_mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(SILU_LOG2E)), _mm256_set1_ps(0.5f)));
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-SILU_LN2_HIGH), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-SILU_LN2_LOW), r);
    __m256 p = _mm256_set1_ps(silu_taylor[0]);
    for (int j = 1; j < 8; j++) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(silu_taylor[j]));
    __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

__attribute__((target("avx2,fma"))) static void silu_mul_avx2(const float *gate, const float *up, float *dst,
                                                              int64_t width) {
    int64_t j = 0;
    for (; j + 8 <= width; j += 8) {
        __m256 g = _mm256_loadu_ps(gate + j);
        __m256 e = silu_exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g));
        __m256 activated = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
        _mm256_storeu_ps(dst + j, _mm256_mul_ps(activated, _mm256_loadu_ps(up + j)));
    }
    silu_mul_portable(gate + j, up + j, dst + j, width - j);
}

#endif

/* out [n, width] from gate_up [n, 2 * width]; rows split over the OpenMP threads when many. */
static void silu_mul_rows(const float *gate_up, float *out, int64_t n, int64_t width, int portable) {
#pragma omp parallel for schedule(static) if (n * width >= 65536)
    for (int64_t i = 0; i < n; i++) {
        const float *gate = gate_up + i * 2 * width, *up = gate + width;
#if SIMD_HAVE_AVX2
        if (!portable && simd_use_avx2()) {
            silu_mul_avx2(gate, up, out + i * width, width);
            continue;
        }
#endif
        silu_mul_portable(gate, up, out + i * width, width);
    }
}

#endif

/* The SiLU-gated activation of a Llama MLP on float32 rows: out = silu(gate) * up, for
 * rows [gate | up] of 2 * width, with silu(g) = g / (1 + e^-g) rounded before the
 * product. The exponential is vector_exp.h's: for g < -87, silu(g) is then g * e^-87 (|silu| <
 * 1e-36 for |g| < 100) where it is ~0, and g itself for g > 87. */

#ifndef STRUCTGEN_SILU_MUL_ROWS_H
#define STRUCTGEN_SILU_MUL_ROWS_H

#include <stdint.h>

#include "simd.h"
#include "vector_exp.h"

static void silu_mul_portable(const float *gate, const float *up, float *dst, int64_t width) {
    for (int64_t j = 0; j < width; j++) {
        float activated = gate[j] / (1.0f + vector_exp_portable(0.0f - gate[j]));
        dst[j] = activated * up[j];
    }
}

#if SIMD_HAVE_AVX2

__attribute__((target("avx2,fma"))) static void silu_mul_avx2(const float *gate, const float *up, float *dst,
                                                              int64_t width) {
    int64_t j = 0;
    for (; j + 8 <= width; j += 8) {
        __m256 g = _mm256_loadu_ps(gate + j);
        __m256 e = vector_exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g));
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

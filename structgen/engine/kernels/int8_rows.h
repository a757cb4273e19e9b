/* Rows of a matrix of int8 weights in blocks of 32 with a float scale each (GGUF's
 * Q8_0 layout, w = q * scale), times float32 activations, into float32 outputs.
 *
 * One row's dot product with one activation row is always computed in the same order:
 * per block, eight lanes of two partial sums (products of weights 0-7 and 8-15, then
 * 16-23 and 24-31 fused onto them), their sum times the block's scale fused into a
 * lane total, and the eight lane totals added pairwise. The AVX2 path and the portable
 * path do exactly these roundings (fmaf where the vector code fuses), so a logit does
 * not depend on the CPU's features, on the other rows of the batch, or on which range of
 * weight rows a call covers. */

#ifndef STRUCTGEN_INT8_ROWS_H
#define STRUCTGEN_INT8_ROWS_H

#include <math.h>
#include <stdint.h>

#include "simd.h"

#define INT8_ROWS_BLOCK 32
#define INT8_ROWS_GROUP 4 /* activation rows sharing one widening of the weights (AVX2) */
#define INT8_ROWS_CHUNK 64 /* weight rows per thread's task */

static void int8_rows_portable(const int8_t *q, const float *scale, const float *x, float *out,
                               int64_t begin, int64_t end, int64_t k, int64_t n, int64_t ldo) {
    int64_t blocks = k / INT8_ROWS_BLOCK;
    for (int64_t v = begin; v < end; v++) {
        const int8_t *qv = q + v * k;
        const float *sv = scale + v * blocks;
        for (int64_t i = 0; i < n; i++) {
            const float *xi = x + i * k;
            float lane_total[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int64_t b = 0; b < blocks; b++) {
                const int8_t *qb = qv + b * INT8_ROWS_BLOCK;
                const float *xb = xi + b * INT8_ROWS_BLOCK;
                for (int l = 0; l < 8; l++) {
                    float a0 = (float)qb[l] * xb[l];
                    float a1 = (float)qb[8 + l] * xb[8 + l];
                    a0 = fmaf((float)qb[16 + l], xb[16 + l], a0);
                    a1 = fmaf((float)qb[24 + l], xb[24 + l], a1);
                    lane_total[l] = fmaf(a0 + a1, sv[b], lane_total[l]);
                }
            }
            out[i * ldo + v] = simd_lane_sum_portable(lane_total);
        }
    }
}

#if SIMD_HAVE_AVX2

__attribute__((target("avx2,fma"))) static inline __m256 int8_rows_widen(const int8_t *q) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)q)));
}

/* One block's contribution to one activation row's lane totals (w0..w3: the widened weights). */
__attribute__((target("avx2,fma"))) static inline __m256 int8_rows_block(__m256 w0, __m256 w1, __m256 w2,
                                                                         __m256 w3, const float *xb,
                                                                         __m256 block_scale, __m256 total) {
    __m256 a0 = _mm256_mul_ps(w0, _mm256_loadu_ps(xb));
    __m256 a1 = _mm256_mul_ps(w1, _mm256_loadu_ps(xb + 8));
    a0 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xb + 16), a0);
    a1 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xb + 24), a1);
    return _mm256_fmadd_ps(_mm256_add_ps(a0, a1), block_scale, total);
}

__attribute__((target("avx2,fma"))) static void int8_rows_avx2(const int8_t *q, const float *scale,
                                                               const float *x, float *out, int64_t begin,
                                                               int64_t end, int64_t k, int64_t n, int64_t ldo) {
    int64_t blocks = k / INT8_ROWS_BLOCK;
    for (int64_t v = begin; v < end; v++) {
        const int8_t *qv = q + v * k;
        const float *sv = scale + v * blocks;
        int64_t i = 0;
        for (; i + INT8_ROWS_GROUP <= n; i += INT8_ROWS_GROUP) {
            __m256 total[INT8_ROWS_GROUP];
            for (int r = 0; r < INT8_ROWS_GROUP; r++) total[r] = _mm256_setzero_ps();
            for (int64_t b = 0; b < blocks; b++) {
                const int8_t *qb = qv + b * INT8_ROWS_BLOCK;
                __m256 w0 = int8_rows_widen(qb), w1 = int8_rows_widen(qb + 8);
                __m256 w2 = int8_rows_widen(qb + 16), w3 = int8_rows_widen(qb + 24);
                __m256 block_scale = _mm256_set1_ps(sv[b]);
                for (int r = 0; r < INT8_ROWS_GROUP; r++)
                    total[r] = int8_rows_block(w0, w1, w2, w3, x + (i + r) * k + b * INT8_ROWS_BLOCK,
                                               block_scale, total[r]);
            }
            for (int r = 0; r < INT8_ROWS_GROUP; r++) out[(i + r) * ldo + v] = simd_lane_sum(total[r]);
        }
        for (; i < n; i++) {
            __m256 total = _mm256_setzero_ps();
            for (int64_t b = 0; b < blocks; b++) {
                const int8_t *qb = qv + b * INT8_ROWS_BLOCK;
                total = int8_rows_block(int8_rows_widen(qb), int8_rows_widen(qb + 8), int8_rows_widen(qb + 16),
                                        int8_rows_widen(qb + 24), x + i * k + b * INT8_ROWS_BLOCK,
                                        _mm256_set1_ps(sv[b]), total);
            }
            out[i * ldo + v] = simd_lane_sum(total);
        }
    }
}

#endif

static void int8_rows_range(const int8_t *q, const float *scale, const float *x, float *out, int64_t begin,
                            int64_t end, int64_t k, int64_t n, int64_t ldo, int portable) {
#if SIMD_HAVE_AVX2
    if (!portable && simd_use_avx2()) {
        int8_rows_avx2(q, scale, x, out, begin, end, k, n, ldo);
        return;
    }
#endif
    int8_rows_portable(q, scale, x, out, begin, end, k, n, ldo);
}

/* out[i, v] for v in [begin, end) and every activation row i < n (out's row stride: ldo),
 * over the OpenMP threads (torch's own pool, where the extension is built with OpenMP),
 * each taking whole chunks of rows. */
static void int8_rows(const int8_t *q, const float *scale, const float *x, float *out, int64_t begin,
                      int64_t end, int64_t k, int64_t n, int64_t ldo, int portable) {
    int64_t chunks = (end - begin + INT8_ROWS_CHUNK - 1) / INT8_ROWS_CHUNK;
#pragma omp parallel for schedule(guided)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t first = begin + c * INT8_ROWS_CHUNK, last = first + INT8_ROWS_CHUNK < end ? first + INT8_ROWS_CHUNK : end;
        int8_rows_range(q, scale, x, out, first, last, k, n, ldo, portable);
    }
}

#endif

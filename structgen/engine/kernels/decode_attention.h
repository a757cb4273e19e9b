/* Decode attention on CPU: each sequence's one new query token, every head, over its
 * float32 paged KV cache [blocks, block_size, kv_heads, dim], read in place through its
 * block table (grouped-query heads share their KV head). One call does a step's decodes.
 *
 * Per (sequence, head): scores = scale * q.k over the sequence's positions, the largest
 * subtracted, exp, their sum, and the exp-weighted sum of the values divided by it.
 * Dot products and the weighted sum go in eight lanes in one fixed order, reduced
 * pairwise (simd.h), on the AVX2 path and the portable one alike, so a row
 * does not depend on the CPU's features or on the other sequences of the step. */

#ifndef STRUCTGEN_DECODE_ATTENTION_H
#define STRUCTGEN_DECODE_ATTENTION_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "simd.h"

static float decode_dot_portable(const float *a, const float *b, int64_t dim) {
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t j = 0; j < dim; j += 8)
        for (int l = 0; l < 8; l++) lane[l] = fmaf(a[j + l], b[j + l], lane[l]);
    return simd_lane_sum_portable(lane);
}

static void decode_axpy_portable(float weight, const float *v, float *acc, int64_t dim) {
    for (int64_t j = 0; j < dim; j++) acc[j] = fmaf(weight, v[j], acc[j]);
}

#if SIMD_HAVE_AVX2

__attribute__((target("avx2,fma"))) static float decode_dot_avx2(const float *a, const float *b, int64_t dim) {
    __m256 t = _mm256_setzero_ps();
    for (int64_t j = 0; j < dim; j += 8) t = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), t);
    return simd_lane_sum(t);
}

__attribute__((target("avx2,fma"))) static void decode_axpy_avx2(float weight, const float *v, float *acc,
                                                                 int64_t dim) {
    __m256 w = _mm256_set1_ps(weight);
    for (int64_t j = 0; j < dim; j += 8)
        _mm256_storeu_ps(acc + j, _mm256_fmadd_ps(w, _mm256_loadu_ps(v + j), _mm256_loadu_ps(acc + j)));
}

#endif

/* out [n, heads, dim]; query likewise; block_tables [n, table_width]; dim a multiple of 8.
 * Returns 0, or -1 when scratch memory could not be had. */
static int decode_attention(const float *query, const float *k_cache, const float *v_cache,
                            const int32_t *block_tables, int64_t table_width, const int32_t *seq_lens,
                            float *out, int64_t n, int64_t heads, int64_t kv_heads, int64_t dim,
                            int64_t block_size, float scale, int portable) {
    float (*dot)(const float *, const float *, int64_t) = decode_dot_portable;
    void (*axpy)(float, const float *, float *, int64_t) = decode_axpy_portable;
#if SIMD_HAVE_AVX2
    if (!portable && simd_use_avx2()) {
        dot = decode_dot_avx2;
        axpy = decode_axpy_avx2;
    }
#endif
    int64_t longest = 0;
    for (int64_t s = 0; s < n; s++) longest = seq_lens[s] > longest ? seq_lens[s] : longest;
    float *scores = malloc(sizeof(float) * (size_t)(longest > 0 ? longest : 1));
    if (!scores) return -1;
    int64_t group = heads / kv_heads, row = kv_heads * dim, block_stride = block_size * row;
    for (int64_t s = 0; s < n; s++) {
        const int32_t *table = block_tables + s * table_width;
        int64_t length = seq_lens[s];
        for (int64_t h = 0; h < heads; h++) {
            const float *q = query + (s * heads + h) * dim;
            float *acc = out + (s * heads + h) * dim;
            int64_t head_offset = (h / group) * dim;
            for (int64_t j = 0; j < dim; j++) acc[j] = 0;
            if (length == 0) continue;
            float largest = -INFINITY;
            for (int64_t p = 0; p < length; p++) {
                const float *k = k_cache + table[p / block_size] * block_stride + (p % block_size) * row + head_offset;
                scores[p] = dot(q, k, dim) * scale;
                largest = scores[p] > largest ? scores[p] : largest;
            }
            float total = 0;
            for (int64_t p = 0; p < length; p++) {
                scores[p] = expf(scores[p] - largest);
                total += scores[p];
            }
            for (int64_t p = 0; p < length; p++) {
                const float *v = v_cache + table[p / block_size] * block_stride + (p % block_size) * row + head_offset;
                axpy(scores[p], v, acc, dim);
            }
            float inverse = 1.0f / total;
            for (int64_t j = 0; j < dim; j++) acc[j] *= inverse;
        }
    }
    free(scores);
    return 0;
}

#endif

/* Attention of query rows over a paged KV cache on CPU: each row is one new
 * token of some sequence -- a decode, or one token of a prompt chunk or a jump-forward
 * span -- and attends to the first seq_lens[row] positions of its sequence's cache
 * [blocks, block_size, kv_heads, dim], read in place through the row's block table. The
 * new tokens' keys and values must be in the cache already; a prompt token's length is
 * its position + 1, which makes the attention causal.
 *
 * Per (row, head): scores = scale * q.k over the positions, the largest subtracted, exp
 * (vector_exp.h), their sum, and the exp-weighted sum of the values divided by it. Dot products and the
 * weighted sum go in eight lanes in one fixed order, reduced pairwise (simd.h), on the
 * AVX2 path and the portable one alike, so a row's result depends neither on the CPU's
 * features nor on the other rows of the call, their number or the thread count: a prompt
 * gives the same bits prefilled alone, in chunks or beside other sequences.
 *
 * On AVX2, four positions' scores are computed at once and a head size of 64 keeps its
 * weighted sum in registers: each is still the same chain of operations per output.
 * A float16 cache's values are converted to float32 (exactly) as they are loaded, so
 * both caches share the arithmetic. (row, KV head) pairs are split over OpenMP threads. */

#ifndef STRUCTGEN_ATTENTION_ROWS_H
#define STRUCTGEN_ATTENTION_ROWS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "half_floats.h"
#include "simd.h"
#include "vector_exp.h"

/* Positions x heads below which one thread does the call (a parallel region costs a few
 * microseconds; a decode at batch 1 is about that much work). */
#define ATTENTION_ROWS_MIN_PARALLEL 4096
/* Positions whose key or value rows (8 KB of float32 at head size 64) every query head of
 * their KV head uses before the next ones are read. */
#define ATTENTION_ROWS_SPAN 32

/* Asks for the rows of positions [first, first + span) ahead of their use: a sequence's
 * positions lie in blocks spread over the cache, each row a few cache lines at a stride of
 * kv_heads rows, which the hardware's prefetchers do not run ahead of. (30 layers of 64
 * rows x 250 positions, read from memory: float16 51.5 ms against 60.3 without; float32
 * unchanged, 63.0 against 63.6.) */
static inline void attention_rows_prefetch(const void *const *rows, int64_t first, int64_t length,
                                           int64_t row_bytes) {
    int64_t end = first + ATTENTION_ROWS_SPAN < length ? first + ATTENTION_ROWS_SPAN : length;
    for (int64_t p = first; p < end; p++)
        for (int64_t byte = 0; byte < row_bytes; byte += 64) __builtin_prefetch((const char *)rows[p] + byte, 0, 3);
}

static float attention_dot_portable(const float *a, const float *b, int64_t dim) {
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t j = 0; j < dim; j += 8)
        for (int l = 0; l < 8; l++) lane[l] = fmaf(a[j + l], b[j + l], lane[l]);
    return simd_lane_sum_portable(lane);
}

static void attention_axpy_portable(float weight, const float *v, float *acc, int64_t dim) {
    for (int64_t j = 0; j < dim; j++) acc[j] = fmaf(weight, v[j], acc[j]);
}

#if SIMD_HAVE_AVX2

/* Eight values of a key or value row from j, float32, or float16 converted (exactly). */
__attribute__((target("avx2,fma,f16c"))) static inline __m256 attention_load8(const void *row, int64_t j, int half) {
    return half ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + j)))
                : _mm256_loadu_ps((const float *)row + j);
}

__attribute__((target("avx2,fma,f16c"))) static float attention_dot_avx2(const float *q, const void *k, int64_t dim,
                                                                         int half) {
    __m256 t = _mm256_setzero_ps();
    for (int64_t j = 0; j < dim; j += 8) t = _mm256_fmadd_ps(_mm256_loadu_ps(q + j), attention_load8(k, j, half), t);
    return simd_lane_sum(t);
}

/* scores[p] for four positions at once: four independent chains, each the one above. */
__attribute__((target("avx2,fma,f16c"))) static void attention_dot4_avx2(const float *q, const void *const k[4],
                                                                         int64_t dim, float scale, float *scores,
                                                                         int half) {
    __m256 t0 = _mm256_setzero_ps(), t1 = t0, t2 = t0, t3 = t0;
    for (int64_t j = 0; j < dim; j += 8) {
        __m256 x = _mm256_loadu_ps(q + j);
        t0 = _mm256_fmadd_ps(x, attention_load8(k[0], j, half), t0);
        t1 = _mm256_fmadd_ps(x, attention_load8(k[1], j, half), t1);
        t2 = _mm256_fmadd_ps(x, attention_load8(k[2], j, half), t2);
        t3 = _mm256_fmadd_ps(x, attention_load8(k[3], j, half), t3);
    }
    scores[0] = simd_lane_sum(t0) * scale;
    scores[1] = simd_lane_sum(t1) * scale;
    scores[2] = simd_lane_sum(t2) * scale;
    scores[3] = simd_lane_sum(t3) * scale;
}

__attribute__((target("avx2,fma,f16c"))) static void attention_axpy_avx2(float weight, const void *v, float *acc,
                                                                         int64_t dim, int half) {
    __m256 w = _mm256_set1_ps(weight);
    for (int64_t j = 0; j < dim; j += 8)
        _mm256_storeu_ps(acc + j, _mm256_fmadd_ps(w, attention_load8(v, j, half), _mm256_loadu_ps(acc + j)));
}

/* acc[0..64) += sum over p of weights[p] * values[p], in order of p, kept in registers. */
__attribute__((target("avx2,fma,f16c"))) static void attention_weighted_sum64_avx2(const float *weights,
                                                                                   const void *const *values,
                                                                                   int64_t length, float *acc,
                                                                                   int half) {
    __m256 a0 = _mm256_loadu_ps(acc), a1 = _mm256_loadu_ps(acc + 8), a2 = _mm256_loadu_ps(acc + 16);
    __m256 a3 = _mm256_loadu_ps(acc + 24), a4 = _mm256_loadu_ps(acc + 32), a5 = _mm256_loadu_ps(acc + 40);
    __m256 a6 = _mm256_loadu_ps(acc + 48), a7 = _mm256_loadu_ps(acc + 56);
    for (int64_t p = 0; p < length; p++) {
        __m256 w = _mm256_set1_ps(weights[p]);
        const void *v = values[p];
        a0 = _mm256_fmadd_ps(w, attention_load8(v, 0, half), a0);
        a1 = _mm256_fmadd_ps(w, attention_load8(v, 8, half), a1);
        a2 = _mm256_fmadd_ps(w, attention_load8(v, 16, half), a2);
        a3 = _mm256_fmadd_ps(w, attention_load8(v, 24, half), a3);
        a4 = _mm256_fmadd_ps(w, attention_load8(v, 32, half), a4);
        a5 = _mm256_fmadd_ps(w, attention_load8(v, 40, half), a5);
        a6 = _mm256_fmadd_ps(w, attention_load8(v, 48, half), a6);
        a7 = _mm256_fmadd_ps(w, attention_load8(v, 56, half), a7);
    }
    _mm256_storeu_ps(acc, a0), _mm256_storeu_ps(acc + 8, a1), _mm256_storeu_ps(acc + 16, a2);
    _mm256_storeu_ps(acc + 24, a3), _mm256_storeu_ps(acc + 32, a4), _mm256_storeu_ps(acc + 40, a5);
    _mm256_storeu_ps(acc + 48, a6), _mm256_storeu_ps(acc + 56, a7);
}

#endif

typedef struct {
    const void *k_cache, *v_cache; /* float, or uint16_t float16 bits where kv_half */
    int64_t heads, kv_heads, dim, block_size;
    float scale;
    int avx2, portable, kv_half;
} attention_rows_shape;

/* Where a call's thread keeps one (row, KV head)'s scores, group * (longest + 1) floats
 * (each head's scores, then their total), the addresses of its key and value rows, and
 * on the portable path with a float16 cache, those rows in float32 (2 * longest * dim
 * floats). */
typedef struct {
    float *scores;
    const void **keys, **values;
    float *converted;
} attention_rows_scratch;

/* keys[p], values[p]: where position p's key and value rows are, in the cache (float32,
 * or float16 read by the AVX2 path) or converted to float32 for the portable path. */
static void attention_rows_locate(const attention_rows_shape *a, const int32_t *table, int64_t length,
                                  int64_t kv_head, const attention_rows_scratch *scratch) {
    int64_t dim = a->dim, row = a->kv_heads * dim, block_stride = a->block_size * row;
    for (int64_t p = 0; p < length; p++) {
        int64_t offset = table[p / a->block_size] * block_stride + (p % a->block_size) * row + kv_head * dim;
        if (!a->kv_half) {
            scratch->keys[p] = (const float *)a->k_cache + offset;
            scratch->values[p] = (const float *)a->v_cache + offset;
            continue;
        }
        if (a->avx2) {
            scratch->keys[p] = (const uint16_t *)a->k_cache + offset;
            scratch->values[p] = (const uint16_t *)a->v_cache + offset;
            continue;
        }
        float *key = scratch->converted + 2 * p * dim, *value = key + dim;
        half_row_to_float((const uint16_t *)a->k_cache + offset, key, dim, a->portable);
        half_row_to_float((const uint16_t *)a->v_cache + offset, value, dim, a->portable);
        scratch->keys[p] = key;
        scratch->values[p] = value;
    }
}

static void attention_rows_scores(const attention_rows_shape *a, const float *q, const void *const *keys,
                                  int64_t length, float *scores) {
    int64_t p = 0;
#if SIMD_HAVE_AVX2
    if (a->avx2) {
        for (; p + 4 <= length; p += 4) attention_dot4_avx2(q, keys + p, a->dim, a->scale, scores + p, a->kv_half);
        for (; p < length; p++) scores[p] = attention_dot_avx2(q, keys[p], a->dim, a->kv_half) * a->scale;
        return;
    }
#endif
    for (; p < length; p++) scores[p] = attention_dot_portable(q, keys[p], a->dim) * a->scale;
}

#if SIMD_HAVE_AVX2
/* attention_rows_softmax_weights' whole blocks of eight; returns how many it did. */
__attribute__((target("avx2,fma"))) static int64_t attention_exp_blocks_avx2(float *scores, int64_t length,
                                                                             float largest, float lane[8]) {
    __m256 shift = _mm256_set1_ps(largest), total = _mm256_setzero_ps();
    int64_t p = 0;
    for (; p + 8 <= length; p += 8) {
        __m256 e = vector_exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(scores + p), shift));
        _mm256_storeu_ps(scores + p, e);
        total = _mm256_add_ps(total, e);
    }
    _mm256_storeu_ps(lane, total);
    return p;
}
#endif

/* scores[0..length) -> e^(score - the largest) (vector_exp.h); returns their sum, taken
 * in eight lanes (position p in lane p % 8) added as simd.h adds them. */
static float attention_rows_softmax_weights(const attention_rows_shape *a, float *scores, int64_t length) {
    float largest = -INFINITY, lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t p = 0; p < length; p++) largest = scores[p] > largest ? scores[p] : largest;
    int64_t p = 0;
#if SIMD_HAVE_AVX2
    if (a->avx2) p = attention_exp_blocks_avx2(scores, length, largest, lane);
#endif
    for (; p < length; p++) {
        scores[p] = vector_exp_portable(scores[p] - largest);
        lane[p % 8] += scores[p];
    }
    return simd_lane_sum_portable(lane);
}

static void attention_rows_weighted_sum(const attention_rows_shape *a, const float *weights,
                                        const void *const *values, int64_t length, float *acc) {
#if SIMD_HAVE_AVX2
    if (a->avx2 && a->dim == 64) {
        attention_weighted_sum64_avx2(weights, values, length, acc, a->kv_half);
        return;
    }
    if (a->avx2) {
        for (int64_t p = 0; p < length; p++) attention_axpy_avx2(weights[p], values[p], acc, a->dim, a->kv_half);
        return;
    }
#endif
    for (int64_t p = 0; p < length; p++) attention_axpy_portable(weights[p], values[p], acc, a->dim);
}

/* One row's query heads of one KV head over `length` positions of its block table. The
 * positions go in spans whose key (then value) rows stay in L1 while every query head
 * uses them; each output is still the same chain of operations over the positions. */
static void attention_rows_group(const attention_rows_shape *a, const float *query, const int32_t *table,
                                 int64_t length, int64_t kv_head, const attention_rows_scratch *scratch,
                                 float *out) {
    int64_t dim = a->dim, group = a->heads / a->kv_heads, stride = length + 1;
    const float *q = query + kv_head * group * dim;
    float *acc = out + kv_head * group * dim;
    for (int64_t j = 0; j < group * dim; j++) acc[j] = 0;
    if (length == 0) return;
    attention_rows_locate(a, table, length, kv_head, scratch);
    int64_t row_bytes = dim * (a->kv_half ? 2 : 4);
    attention_rows_prefetch(scratch->keys, 0, length, row_bytes);
    for (int64_t first = 0; first < length; first += ATTENTION_ROWS_SPAN) {
        int64_t span = length - first < ATTENTION_ROWS_SPAN ? length - first : ATTENTION_ROWS_SPAN;
        attention_rows_prefetch(scratch->keys, first + ATTENTION_ROWS_SPAN, length, row_bytes);
        for (int64_t g = 0; g < group; g++)
            attention_rows_scores(a, q + g * dim, scratch->keys + first, span, scratch->scores + g * stride + first);
    }
    attention_rows_prefetch(scratch->values, 0, length, row_bytes);
    for (int64_t g = 0; g < group; g++)
        scratch->scores[g * stride + length] = attention_rows_softmax_weights(a, scratch->scores + g * stride, length);
    for (int64_t first = 0; first < length; first += ATTENTION_ROWS_SPAN) {
        int64_t span = length - first < ATTENTION_ROWS_SPAN ? length - first : ATTENTION_ROWS_SPAN;
        attention_rows_prefetch(scratch->values, first + ATTENTION_ROWS_SPAN, length, row_bytes);
        for (int64_t g = 0; g < group; g++)
            attention_rows_weighted_sum(a, scratch->scores + g * stride + first, scratch->values + first, span,
                                        acc + g * dim);
    }
    for (int64_t g = 0; g < group; g++) {
        float inverse = 1.0f / scratch->scores[g * stride + length];
        for (int64_t j = 0; j < dim; j++) acc[g * dim + j] *= inverse;
    }
}

/* out [n, heads, dim]; query likewise; block_tables [n, table_width], one per row;
 * seq_lens [n], the positions each row attends to; dim a multiple of 8; the caches
 * float16 where kv_half. Returns 0, or -1 when scratch memory could not be had. */
static int attention_rows(const float *query, const void *k_cache, const void *v_cache,
                          const int32_t *block_tables, int64_t table_width, const int32_t *seq_lens, float *out,
                          int64_t n, int64_t heads, int64_t kv_heads, int64_t dim, int64_t block_size, float scale,
                          int kv_half, int portable) {
    attention_rows_shape a = {k_cache, v_cache, heads, kv_heads, dim, block_size, scale, 0, portable, kv_half};
#if SIMD_HAVE_AVX2
    a.avx2 = !portable && simd_use_avx2();
#endif
    int64_t longest = 0, positions = 0;
    for (int64_t r = 0; r < n; r++) {
        longest = seq_lens[r] > longest ? seq_lens[r] : longest;
        positions += seq_lens[r];
    }
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    int64_t floats = (heads / kv_heads) * (longest + 1);
    int64_t converted = kv_half && !a.avx2 ? 2 * longest * dim : 0;
    float *scores = malloc(sizeof(float) * (size_t)(threads * (floats + converted)));
    const void **rows = malloc(sizeof(void *) * (size_t)(threads * 2 * (longest + 1)));
    if (!scores || !rows) {
        free(scores), free(rows);
        return -1;
    }
    int64_t items = n * kv_heads;
    int parallel = positions * heads >= ATTENTION_ROWS_MIN_PARALLEL;
    (void)parallel;
#pragma omp parallel for schedule(dynamic) num_threads(threads) if (parallel)
    for (int64_t item = 0; item < items; item++) {
        int thread = 0;
#ifdef _OPENMP
        thread = omp_get_thread_num();
#endif
        attention_rows_scratch scratch = {scores + thread * floats, rows + thread * 2 * (longest + 1),
                                          rows + thread * 2 * (longest + 1) + (longest + 1),
                                          scores + threads * floats + thread * converted};
        int64_t r = item / kv_heads;
        attention_rows_group(&a, query + r * heads * dim, block_tables + r * table_width, seq_lens[r],
                             item % kv_heads, &scratch, out + r * heads * dim);
    }
    free(scores);
    free(rows);
    return 0;
}

#endif

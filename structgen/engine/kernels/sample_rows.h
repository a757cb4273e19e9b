/* Random sampling of one token per row of float32 logits, at a temperature, with no
 * other filter: token i weighs w_i = e^((l_i - max) / t) (vector_exp.h; 0 where l_i is
 * -inf, a masked token), and the row's uniform u picks the first token whose cumulative
 * weight exceeds u times the row's total.
 *
 * The weights are summed in float64 per chunk of SAMPLE_ROWS_CHUNK tokens (in eight
 * lanes), and the chunks' sums in turn; the search walks the chunks' sums, then the
 * tokens of the chunk where the target falls, one by one. A token of zero weight is
 * never picked: should rounding carry the target past a chunk's last token of positive
 * weight, that token is the pick. The AVX2 path and the portable path compute the same
 * weights and sums, so a row's pick depends neither on the CPU's features nor on the
 * other rows. Rows go over the OpenMP threads. */

#ifndef STRUCTGEN_SAMPLE_ROWS_H
#define STRUCTGEN_SAMPLE_ROWS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "simd.h"
#include "vector_exp.h"

#define SAMPLE_ROWS_CHUNK 256

/* The sum of a chunk's weights in float64, in eight lanes (token i in lane i % 8 of its
 * chunk) added pairwise at the end: the AVX2 path adds in the same order. */
static double sample_rows_chunk_sum_portable(const float *weights, int64_t count) {
    double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < count; i++) lane[i % 8] += (double)weights[i];
    return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

/* weights[0..vocab) of one row. */
static void sample_rows_weights_portable(const float *logits, int64_t vocab, float largest, float temperature,
                                         float *weights) {
    for (int64_t i = 0; i < vocab; i++)
        weights[i] = logits[i] == -INFINITY ? 0.0f : vector_exp_portable((logits[i] - largest) / temperature);
}

#if SIMD_HAVE_AVX2
/* sample_rows_chunk_sum_portable's sum: lanes 0-3 and 4-7 in two vectors of doubles. */
__attribute__((target("avx2,fma"))) static double sample_rows_chunk_sum_avx2(const float *weights, int64_t count) {
    __m256d low = _mm256_setzero_pd(), high = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m256 w = _mm256_loadu_ps(weights + i);
        low = _mm256_add_pd(low, _mm256_cvtps_pd(_mm256_castps256_ps128(w)));
        high = _mm256_add_pd(high, _mm256_cvtps_pd(_mm256_extractf128_ps(w, 1)));
    }
    double lane[8];
    _mm256_storeu_pd(lane, low);
    _mm256_storeu_pd(lane + 4, high);
    for (; i < count; i++) lane[i % 8] += (double)weights[i];
    return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

/* The same weights, eight at a time. */
__attribute__((target("avx2,fma"))) static void sample_rows_weights_avx2(const float *logits, int64_t vocab,
                                                                        float largest, float temperature,
                                                                        float *weights) {
    const __m256 shift = _mm256_set1_ps(largest), t = _mm256_set1_ps(temperature);
    const __m256 minus_infinity = _mm256_set1_ps(-INFINITY);
    int64_t whole = vocab - vocab % 8;
    for (int64_t i = 0; i < whole; i += 8) {
        __m256 l = _mm256_loadu_ps(logits + i);
        __m256 w = vector_exp_avx2(_mm256_div_ps(_mm256_sub_ps(l, shift), t));
        _mm256_storeu_ps(weights + i, _mm256_andnot_ps(_mm256_cmp_ps(l, minus_infinity, _CMP_EQ_OQ), w));
    }
    for (int64_t i = whole; i < vocab; i++)
        weights[i] = logits[i] == -INFINITY ? 0.0f : vector_exp_portable((logits[i] - largest) / temperature);
}
#endif

/* A row's weights and its chunks' sums; returns the row's total. */
static double sample_rows_weigh(const float *logits, int64_t vocab, float largest, float temperature, float *weights,
                                double *chunk_sums, int avx2) {
#if SIMD_HAVE_AVX2
    if (avx2) sample_rows_weights_avx2(logits, vocab, largest, temperature, weights);
    else
#endif
        sample_rows_weights_portable(logits, vocab, largest, temperature, weights);
    double total = 0.0;
    for (int64_t first = 0, c = 0; first < vocab; first += SAMPLE_ROWS_CHUNK, c++) {
        int64_t count = vocab - first < SAMPLE_ROWS_CHUNK ? vocab - first : SAMPLE_ROWS_CHUNK;
#if SIMD_HAVE_AVX2
        if (avx2) chunk_sums[c] = sample_rows_chunk_sum_avx2(weights + first, count);
        else
#endif
            chunk_sums[c] = sample_rows_chunk_sum_portable(weights + first, count);
        total += chunk_sums[c];
    }
    return total;
}

/* The token where u * total falls (see above); -1 when the row has no positive weight. */
static int64_t sample_rows_pick(const float *weights, const double *chunk_sums, int64_t vocab, double total,
                                double u) {
    double target = u * total, before = 0.0;
    int64_t chunks = (vocab + SAMPLE_ROWS_CHUNK - 1) / SAMPLE_ROWS_CHUNK, c = 0;
    while (c < chunks - 1 && before + chunk_sums[c] <= target) before += chunk_sums[c++];
    int64_t last_positive = -1;
    for (; c < chunks; c++) {
        int64_t first = c * SAMPLE_ROWS_CHUNK, end = first + SAMPLE_ROWS_CHUNK < vocab ? first + SAMPLE_ROWS_CHUNK : vocab;
        double running = before;
        for (int64_t i = first; i < end; i++) {
            if (weights[i] <= 0.0f) continue;
            running += (double)weights[i];
            last_positive = i;
            if (running > target) return i;
        }
        if (last_positive >= 0) return last_positive;
        before += chunk_sums[c];
    }
    return last_positive;
}

/* Each row's largest logit and the first token holding it (NaN and that NaN's token where
 * the row has one), as torch's max over a row gives them. Exact: both paths agree. */
static void sample_rows_largest_portable(const float *row, int64_t vocab, float *largest, int64_t *token) {
    float best = row[0];
    int64_t at = 0;
    for (int64_t i = 0; i < vocab; i++) {
        if (row[i] != row[i]) {
            *largest = row[i], *token = i;
            return;
        }
        if (row[i] > best) best = row[i], at = i;
    }
    *largest = best, *token = at;
}

#if SIMD_HAVE_AVX2
__attribute__((target("avx2,fma"))) static void sample_rows_largest_avx2(const float *row, int64_t vocab,
                                                                        float *largest, int64_t *token) {
    __m256 best = _mm256_set1_ps(-INFINITY), unordered = _mm256_setzero_ps();
    int64_t whole = vocab - vocab % 8;
    for (int64_t i = 0; i < whole; i += 8) {
        __m256 l = _mm256_loadu_ps(row + i);
        unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(l, l, _CMP_UNORD_Q));
        best = _mm256_max_ps(best, l);
    }
    float lanes[8], top = -INFINITY;
    _mm256_storeu_ps(lanes, best);
    for (int l = 0; l < 8; l++) top = lanes[l] > top ? lanes[l] : top;
    for (int64_t i = whole; i < vocab; i++) top = row[i] > top ? row[i] : top;
    int nan = _mm256_movemask_ps(unordered) != 0;
    for (int64_t i = whole; i < vocab; i++) nan |= row[i] != row[i];
    if (nan) {
        sample_rows_largest_portable(row, vocab, largest, token);
        return;
    }
    __m256 wanted = _mm256_set1_ps(top);
    for (int64_t i = 0; i < whole; i += 8) {
        int hits = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(row + i), wanted, _CMP_EQ_OQ));
        if (hits) {
            *largest = top, *token = i + __builtin_ctz((unsigned)hits);
            return;
        }
    }
    for (int64_t i = whole; i < vocab; i++)
        if (row[i] == top) {
            *largest = top, *token = i;
            return;
        }
    *largest = top, *token = 0; /* every logit -inf: torch gives the first */
}
#endif

/* largest[r], tokens[r] for n rows of logits [n, vocab] (row stride ld). */
static void largest_rows(const float *logits, int64_t n, int64_t vocab, int64_t ld, float *largest, int64_t *tokens,
                         int portable) {
    int avx2 = 0;
#if SIMD_HAVE_AVX2
    avx2 = !portable && simd_use_avx2();
#endif
#pragma omp parallel for schedule(static) if (n > 1)
    for (int64_t r = 0; r < n; r++) {
#if SIMD_HAVE_AVX2
        if (avx2) {
            sample_rows_largest_avx2(logits + r * ld, vocab, largest + r, tokens + r);
            continue;
        }
#endif
        sample_rows_largest_portable(logits + r * ld, vocab, largest + r, tokens + r);
    }
    (void)avx2;
}

/* tokens[r] for n rows of logits [n, vocab] (row stride ld), each with its largest logit
 * (finite), temperature (> 0) and uniform in [0, 1). Returns -1 when scratch memory could
 * not be had. */
static int sample_rows(const float *logits, int64_t n, int64_t vocab, int64_t ld, const float *largest,
                       const float *temperature, const double *uniforms, int64_t *tokens, int portable) {
    int avx2 = 0;
#if SIMD_HAVE_AVX2
    avx2 = !portable && simd_use_avx2();
#endif
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    int64_t chunks = (vocab + SAMPLE_ROWS_CHUNK - 1) / SAMPLE_ROWS_CHUNK;
    float *weights = malloc(sizeof(float) * (size_t)(threads * vocab));
    double *chunk_sums = malloc(sizeof(double) * (size_t)(threads * chunks));
    if (!weights || !chunk_sums) {
        free(weights), free(chunk_sums);
        return -1;
    }
#pragma omp parallel for schedule(static) num_threads(threads) if (n > 1)
    for (int64_t r = 0; r < n; r++) {
        int thread = 0;
#ifdef _OPENMP
        thread = omp_get_thread_num();
#endif
        float *row_weights = weights + thread * vocab;
        double *row_chunks = chunk_sums + thread * chunks;
        double total = sample_rows_weigh(logits + r * ld, vocab, largest[r], temperature[r], row_weights, row_chunks,
                                         avx2);
        tokens[r] = sample_rows_pick(row_weights, row_chunks, vocab, total, uniforms[r]);
    }
    free(weights);
    free(chunk_sums);
    return 0;
}

#endif

/* Rows of a matrix of 4-bit weights in blocks of 32 with a float scale and minimum each
 * (w = q * scale + minimum, q in 0..15: GGUF's Q4_1, and Q4_0 and Q4_K as decoded),
 * times float32 activations, into float32.
 *
 * The activations are first quantized, per row and block of 32, to int8 with a scale
 * d = max|x| / 127 (q = x / d rounded to nearest, ties to even) and the block's sum
 * s = d * sum(q), as llama.cpp does for these formats. A block's dot product is then
 * exact in integers, and  w . x ~= scale * d * sum(qw * qx) + minimum * s.
 *
 * Packing: blocks go in pairs (a row has an even number of them), 32 bytes per pair:
 * byte j holds weight j of the first block in its low nibble and weight j of the second
 * in its high one, so that one AND gives the first block's 32 weights in order and a
 * shift and an AND the second's.
 *
 * One row's result is always computed in the same order: each block's integer products
 * summed (exact), that sum times the block's scale * d fused into lane b % 8 of a total
 * (block b), the minimum * s terms likewise into a second total, each total's eight lanes
 * added pairwise (simd.h), and the two added. The AVX2 path and
 * the portable path do exactly these roundings, so a result does not depend on the CPU's
 * features, on the other rows of the batch, or on which range of weight rows a call or a
 * thread covers. */

#ifndef STRUCTGEN_INT4_ROWS_H
#define STRUCTGEN_INT4_ROWS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "simd.h"

#define INT4_ROWS_BLOCK 32
#define INT4_ROWS_PAIR 32 /* bytes per pair of blocks of weights */
#define INT4_ROWS_GROUP 4   /* activation rows sharing one unpacking of the weights (AVX2) */
#define INT4_ROWS_MIN_PARALLEL 4096 /* fewer block products than this: one thread */
#define INT4_ROWS_CHUNK 16          /* weight rows per thread's task: each thread's writes stay apart */
#define INT4_ROWS_TILE 64           /* activation rows per pass over the weights */

/* One activation block: q[32], d, s = d * sum(q). */
static void int4_rows_quantize_block_portable(const float *x, int8_t *q, float *d, float *s) {
    float amax = 0.0f;
    for (int j = 0; j < INT4_ROWS_BLOCK; j++) amax = fmaxf(amax, fabsf(x[j]));
    float scale = amax / 127.0f, inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
    int sum = 0;
    for (int j = 0; j < INT4_ROWS_BLOCK; j++) {
        q[j] = (int8_t)nearbyintf(x[j] * inverse);
        sum += q[j];
    }
    *d = scale;
    *s = scale * (float)sum;
}

/* Block b's products of one weight row (`packed`: the row's pairs) and one activation
 * block, summed (exact). */
static int32_t int4_rows_block_portable(const uint8_t *packed, int64_t b, const int8_t *qx) {
    const uint8_t *pair = packed + (b / 2) * INT4_ROWS_PAIR;
    int shift = b % 2 ? 4 : 0;
    int32_t sum = 0;
    for (int j = 0; j < INT4_ROWS_BLOCK; j++) sum += ((pair[j] >> shift) & 0x0F) * qx[j];
    return sum;
}

static void int4_rows_portable(const uint8_t *packed, const float *scale, const float *minimum,
                               const int8_t *qx, const float *dx, const float *sx, float *out,
                               int64_t begin, int64_t end, int64_t k, int64_t n, int64_t ldo) {
    int64_t blocks = k / INT4_ROWS_BLOCK;
    for (int64_t v = begin; v < end; v++) {
        for (int64_t i = 0; i < n; i++) {
            float lane_total[8] = {0, 0, 0, 0, 0, 0, 0, 0}, lane_min[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int64_t b = 0; b < blocks; b++) {
                int64_t wb = v * blocks + b, xb = i * blocks + b;
                int32_t sum = int4_rows_block_portable(packed + v * blocks * INT4_ROWS_BLOCK / 2, b,
                                                       qx + xb * INT4_ROWS_BLOCK);
                lane_total[b % 8] = fmaf((float)sum, scale[wb] * dx[xb], lane_total[b % 8]);
                lane_min[b % 8] = fmaf(minimum[wb], sx[xb], lane_min[b % 8]);
            }
            out[i * ldo + v] = simd_lane_sum_portable(lane_total) + simd_lane_sum_portable(lane_min);
        }
    }
}

#if SIMD_HAVE_AVX2

__attribute__((target("avx2,fma"))) static void int4_rows_quantize_block_avx2(const float *x, int8_t *q,
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

/* The weights of blocks b..b+count-1 (b even, count even, at most 8), as unsigned bytes in order. */
__attribute__((target("avx2,fma"))) static inline void int4_rows_unpack(const uint8_t *row, int64_t b, int count,
                                                                        __m256i weights[8]) {
    const __m256i low_mask = _mm256_set1_epi8(0x0F);
    for (int j = 0; j < count; j += 2) {
        __m256i pair = _mm256_loadu_si256((const __m256i *)(row + (b + j) / 2 * INT4_ROWS_PAIR));
        weights[j] = _mm256_and_si256(pair, low_mask);
        weights[j + 1] = _mm256_and_si256(_mm256_srli_epi16(pair, 4), low_mask);
    }
}

/* One block's 32 products, in eight int32 lanes of four. */
__attribute__((target("avx2,fma"))) static inline __m256i int4_rows_products(__m256i weights, const int8_t *qx) {
    __m256i pairs = _mm256_maddubs_epi16(weights, _mm256_loadu_si256((const __m256i *)qx));
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

/* Eight int32 vectors reduced to one: lane j = the sum of p[j]'s lanes (exact). */
__attribute__((target("avx2,fma"))) static inline __m256i int4_rows_reduce(const __m256i p[8]) {
    /* hadd within 128-bit halves, then the halves added */
    __m256i first = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    __m256i second = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(first, second, 0x20),
                            _mm256_permute2x128_si256(first, second, 0x31));
}

/* The first `count` of eight floats (the rest 0). */
__attribute__((target("avx2,fma"))) static inline __m256 int4_rows_load(const float *p, int count) {
    if (count == 8) return _mm256_loadu_ps(p);
    __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(count), index));
}

/* One activation row's blocks b..b+count-1 against the unpacked weights, fused into its totals. */
__attribute__((target("avx2,fma"), always_inline)) static inline void int4_rows_chunk(const __m256i weights[8], __m256 block_scale,
                                                                       __m256 block_min, const int8_t *qx,
                                                                       const float *dx, const float *sx, int count,
                                                                       __m256 *total, __m256 *min_total) {
    __m256i p[8];
    for (int j = 0; j < 8; j++)
        p[j] = j < count ? int4_rows_products(weights[j], qx + j * INT4_ROWS_BLOCK) : _mm256_setzero_si256();
    __m256 sums = _mm256_cvtepi32_ps(int4_rows_reduce(p));
    *total = _mm256_fmadd_ps(sums, _mm256_mul_ps(block_scale, int4_rows_load(dx, count)), *total);
    *min_total = _mm256_fmadd_ps(block_min, int4_rows_load(sx, count), *min_total);
}

/* Weight row v against activation rows [i, i + rows), rows <= INT4_ROWS_GROUP (inlined at
 * each call, so that a constant row count keeps the totals in registers). */
__attribute__((target("avx2,fma"), always_inline)) static inline void int4_rows_group_avx2(
    const uint8_t *packed, const float *scale, const float *minimum, const int8_t *qx, const float *dx,
    const float *sx, float *out, int64_t v, int64_t i, int rows, int64_t blocks, int64_t ldo) {
    const uint8_t *row = packed + v * blocks * INT4_ROWS_BLOCK / 2;
    const float *sv = scale + v * blocks, *mv = minimum + v * blocks;
    __m256i weights[8];
    __m256 total[INT4_ROWS_GROUP], min_total[INT4_ROWS_GROUP];
    for (int r = 0; r < rows; r++) total[r] = min_total[r] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= blocks; b += 8) {
        int4_rows_unpack(row, b, 8, weights);
        __m256 block_scale = _mm256_loadu_ps(sv + b), block_min = _mm256_loadu_ps(mv + b);
        for (int r = 0; r < rows; r++) {
            int64_t xb = (i + r) * blocks + b;
            int4_rows_chunk(weights, block_scale, block_min, qx + xb * INT4_ROWS_BLOCK, dx + xb, sx + xb, 8,
                            &total[r], &min_total[r]);
        }
    }
    if (b < blocks) {
        int count = (int)(blocks - b);
        int4_rows_unpack(row, b, count, weights);
        __m256 block_scale = int4_rows_load(sv + b, count), block_min = int4_rows_load(mv + b, count);
        for (int r = 0; r < rows; r++) {
            int64_t xb = (i + r) * blocks + b;
            int4_rows_chunk(weights, block_scale, block_min, qx + xb * INT4_ROWS_BLOCK, dx + xb, sx + xb, count,
                            &total[r], &min_total[r]);
        }
    }
    for (int r = 0; r < rows; r++) out[(i + r) * ldo + v] = simd_lane_sum(total[r]) + simd_lane_sum(min_total[r]);
}

__attribute__((target("avx2,fma"))) static void int4_rows_avx2(const uint8_t *packed, const float *scale,
                                                               const float *minimum, const int8_t *qx,
                                                               const float *dx, const float *sx, float *out,
                                                               int64_t begin, int64_t end, int64_t k, int64_t n,
                                                               int64_t ldo) {
    int64_t blocks = k / INT4_ROWS_BLOCK;
    for (int64_t v = begin; v < end; v++) {
        int64_t i = 0;
        if (n == 1) { /* a constant row count lets the compiler keep the group in registers */
            int4_rows_group_avx2(packed, scale, minimum, qx, dx, sx, out, v, 0, 1, blocks, ldo);
            continue;
        }
        for (; i + INT4_ROWS_GROUP <= n; i += INT4_ROWS_GROUP)
            int4_rows_group_avx2(packed, scale, minimum, qx, dx, sx, out, v, i, INT4_ROWS_GROUP, blocks, ldo);
        if (i < n) int4_rows_group_avx2(packed, scale, minimum, qx, dx, sx, out, v, i, (int)(n - i), blocks, ldo);
    }
}

#endif

/* The activations' blocks: qx [n * k], dx and sx [n * k / 32]. */
static void int4_rows_quantize(const float *x, int8_t *qx, float *dx, float *sx, int64_t n, int64_t k,
                               int portable) {
    int64_t count = n * (k / INT4_ROWS_BLOCK);
#if SIMD_HAVE_AVX2
    if (!portable && simd_use_avx2()) {
        for (int64_t b = 0; b < count; b++)
            int4_rows_quantize_block_avx2(x + b * INT4_ROWS_BLOCK, qx + b * INT4_ROWS_BLOCK, dx + b, sx + b);
        return;
    }
#endif
    for (int64_t b = 0; b < count; b++)
        int4_rows_quantize_block_portable(x + b * INT4_ROWS_BLOCK, qx + b * INT4_ROWS_BLOCK, dx + b, sx + b);
}

static void int4_rows_range(const uint8_t *packed, const float *scale, const float *minimum, const int8_t *qx,
                            const float *dx, const float *sx, float *out, int64_t begin, int64_t end, int64_t k,
                            int64_t n, int64_t ldo, int portable) {
#if SIMD_HAVE_AVX2
    if (!portable && simd_use_avx2()) {
        int4_rows_avx2(packed, scale, minimum, qx, dx, sx, out, begin, end, k, n, ldo);
        return;
    }
#endif
    int4_rows_portable(packed, scale, minimum, qx, dx, sx, out, begin, end, k, n, ldo);
}

/* out [n, rows] = x [n, k] @ w [rows, k].T, over the OpenMP threads (torch's own pool,
 * where the extension is built with OpenMP) when the product is large enough. The
 * activation rows go in tiles that stay in a core's cache while every weight row passes
 * them (without tiles a long prefill re-read all its activations from memory per row).
 * Returns -1 when the activations' scratch cannot be allocated. */
static int int4_rows(const uint8_t *packed, const float *scale, const float *minimum, const float *x, float *out,
                     int64_t rows, int64_t k, int64_t n, int portable) {
    int64_t blocks = k / INT4_ROWS_BLOCK;
    int8_t *qx = (int8_t *)malloc((size_t)(n * k) + 2 * sizeof(float) * (size_t)(n * blocks));
    if (qx == NULL) return -1;
    float *dx = (float *)(qx + n * k), *sx = dx + n * blocks;
    int4_rows_quantize(x, qx, dx, sx, n, k, portable);
    int64_t chunks = (rows + INT4_ROWS_CHUNK - 1) / INT4_ROWS_CHUNK;
    for (int64_t first = 0; first < n; first += INT4_ROWS_TILE) {
        int64_t tile = n - first < INT4_ROWS_TILE ? n - first : INT4_ROWS_TILE;
        int parallel = tile * blocks * rows >= INT4_ROWS_MIN_PARALLEL;
#pragma omp parallel for schedule(static) if (parallel)
        for (int64_t c = 0; c < chunks; c++) {
            int64_t begin = c * INT4_ROWS_CHUNK, end = begin + INT4_ROWS_CHUNK < rows ? begin + INT4_ROWS_CHUNK : rows;
            int4_rows_range(packed, scale, minimum, qx + first * k, dx + first * blocks, sx + first * blocks,
                            out + first * rows, begin, end, k, tile, rows, portable);
        }
    }
    free(qx);
    return 0;
}

#endif

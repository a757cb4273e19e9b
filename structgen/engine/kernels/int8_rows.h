/* Rows of a matrix of int8 weights in blocks of 32 with a float scale each (GGUF's Q8_0
 * layout, w = q * scale), or with a scale per half block of 16 (`halves` = 2: GGUF's Q6_K
 * and Q3_K, whose values less their offsets are exact in int8), and optionally a float
 * minimum per block of 32 (w = q * scale + minimum: GGUF's Q5_1 and Q5_K, their 5-bit
 * values as they are), times float32 activations, into float32.
 *
 * The activations are first quantized, per row and block of 32, to int8 with a scale d
 * and a sum s (activation_blocks.h), as llama.cpp does for Q8_0. A block's dot product
 * is then exact in integers, and  w . x ~= scale * d * sum(qw * qx) + minimum * s.
 *
 * Layout: the weight rows go in groups of 8, interleaved so that one vector instruction
 * multiplies four weights of each of the 8 rows by the same four activations. For group
 * g and block b, 256 bytes: in the m-th 32 (m = 0..7), bytes 4j..4j+3 hold row j's
 * weights 4m..4m+3. The scales of a group's block are 8 floats in row order (with two
 * scales, the first half's 8, then the second's), and so are its minimums. A group past
 * the last row is padded with zero weights; its rows are never written out.
 *
 * One output is always computed in the same order: for each block in turn, the integer
 * sum of each of its parts (the block, or its halves) times (scale * d) fused into a
 * running total, then, with minimums, minimum * s fused into it. The AVX2 path and
 * the portable path do exactly these roundings, so a result does not depend on the CPU's
 * features, on the other rows of the batch, or on which range of weight rows a call or a
 * thread covers. */

#ifndef STRUCTGEN_INT8_ROWS_H
#define STRUCTGEN_INT8_ROWS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "activation_blocks.h"
#include "simd.h"

#define INT8_ROWS_BLOCK 32
#define INT8_ROWS_GROUP_ROWS 8    /* weight rows interleaved together */
#define INT8_ROWS_GROUP_BYTES 256 /* one block of a group: 8 rows * 32 weights */
#define INT8_ROWS_X_ROWS 4        /* activation rows sharing one load of the weights (AVX2) */
#define INT8_ROWS_MIN_PARALLEL 4096 /* fewer block products than this: one thread */
#define INT8_ROWS_CHUNK 8         /* groups of weight rows per thread's task */
#define INT8_ROWS_TILE 64         /* activation rows per pass over the weights */

/* Weight row j of a group's block (`group_block`: its 256 bytes) times activations
 * [first, last) of one block, summed (exact). */
static int32_t int8_rows_block_portable(const int8_t *group_block, int j, const int8_t *qx, int first, int last) {
    int32_t sum = 0;
    for (int e = first; e < last; e++) sum += group_block[32 * (e / 4) + 4 * j + e % 4] * qx[e];
    return sum;
}

/* Groups [begin, end) of weight rows against n activation rows (out's row stride: ldo;
 * only rows below `rows` are written). A block's scales: `halves` (1 or 2) runs of 8,
 * one per row of the group; each part of the block is added to the total in turn, then
 * the block's minimum times the activations' sum (where `minimum` is not NULL). */
static void int8_rows_portable(const int8_t *packed, const float *scale, const float *minimum, const int8_t *qx,
                               const float *dx, const float *sx, float *out, int64_t begin, int64_t end,
                               int64_t rows, int64_t k, int64_t n, int64_t ldo, int halves) {
    int64_t blocks = k / INT8_ROWS_BLOCK;
    int part = INT8_ROWS_BLOCK / halves;
    for (int64_t g = begin; g < end; g++)
        for (int64_t i = 0; i < n; i++)
            for (int j = 0; j < INT8_ROWS_GROUP_ROWS && g * INT8_ROWS_GROUP_ROWS + j < rows; j++) {
                float total = 0.0f;
                for (int64_t b = 0; b < blocks; b++) {
                    int64_t wb = g * blocks + b, xb = i * blocks + b;
                    for (int h = 0; h < halves; h++) {
                        int32_t sum = int8_rows_block_portable(packed + wb * INT8_ROWS_GROUP_BYTES, j,
                                                               qx + xb * INT8_ROWS_BLOCK, h * part, (h + 1) * part);
                        total = fmaf((float)sum, scale[(wb * halves + h) * INT8_ROWS_GROUP_ROWS + j] * dx[xb], total);
                    }
                    if (minimum) total = fmaf(minimum[wb * INT8_ROWS_GROUP_ROWS + j], sx[xb], total);
                }
                out[i * ldo + g * INT8_ROWS_GROUP_ROWS + j] = total;
            }
}

#if SIMD_HAVE_AVX2

/* Group g against activation rows [i, i + count), count <= INT8_ROWS_X_ROWS (inlined at
 * each call, so that a constant count keeps the sums in registers). maddubs multiplies
 * unsigned by signed bytes: |w| times x with w's sign, two products per 16-bit lane (at
 * most 2 * 128 * 127, no overflow), widened to 32 bits before the next pair is added. */
__attribute__((target("avx2,fma"), always_inline)) static inline void int8_rows_group_avx2(
    const int8_t *packed, const float *scale, const float *minimum, const int8_t *qx, const float *dx,
    const float *sx, float *out, int64_t g, int64_t i, int count, int64_t rows, int64_t blocks, int64_t ldo,
    int halves) {
    const __m256i ones = _mm256_set1_epi16(1);
    const int steps = 8 / halves; /* 32-byte loads per part: the m-th holds weights 4m..4m+3 */
    __m256 total[INT8_ROWS_X_ROWS];
    for (int r = 0; r < count; r++) total[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; b++) {
        int64_t wb = g * blocks + b;
        const int8_t *group_block = packed + wb * INT8_ROWS_GROUP_BYTES;
        for (int h = 0; h < halves; h++) {
            __m256i sums[INT8_ROWS_X_ROWS];
            for (int r = 0; r < count; r++) sums[r] = _mm256_setzero_si256();
            for (int m = h * steps; m < (h + 1) * steps; m++) {
                __m256i w = _mm256_loadu_si256((const __m256i *)(group_block + 32 * m));
                __m256i magnitude = _mm256_sign_epi8(w, w);
                for (int r = 0; r < count; r++) {
                    int32_t four;
                    memcpy(&four, qx + ((i + r) * blocks + b) * INT8_ROWS_BLOCK + 4 * m, sizeof four);
                    __m256i signed_x = _mm256_sign_epi8(_mm256_set1_epi32(four), w);
                    __m256i pairs = _mm256_maddubs_epi16(magnitude, signed_x);
                    sums[r] = _mm256_add_epi32(sums[r], _mm256_madd_epi16(pairs, ones));
                }
            }
            __m256 part_scale = _mm256_loadu_ps(scale + (wb * halves + h) * INT8_ROWS_GROUP_ROWS);
            for (int r = 0; r < count; r++) {
                __m256 scaled = _mm256_mul_ps(part_scale, _mm256_set1_ps(dx[(i + r) * blocks + b]));
                total[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[r]), scaled, total[r]);
            }
        }
        if (minimum) {
            __m256 block_min = _mm256_loadu_ps(minimum + wb * INT8_ROWS_GROUP_ROWS);
            for (int r = 0; r < count; r++)
                total[r] = _mm256_fmadd_ps(block_min, _mm256_set1_ps(sx[(i + r) * blocks + b]), total[r]);
        }
    }
    int64_t first = g * INT8_ROWS_GROUP_ROWS, valid = rows - first < INT8_ROWS_GROUP_ROWS ? rows - first : INT8_ROWS_GROUP_ROWS;
    for (int r = 0; r < count; r++) {
        if (valid == INT8_ROWS_GROUP_ROWS) {
            _mm256_storeu_ps(out + (i + r) * ldo + first, total[r]);
        } else {
            float lanes[INT8_ROWS_GROUP_ROWS];
            _mm256_storeu_ps(lanes, total[r]);
            memcpy(out + (i + r) * ldo + first, lanes, sizeof(float) * (size_t)valid);
        }
    }
}

__attribute__((target("avx2,fma"))) static void int8_rows_avx2(const int8_t *packed, const float *scale,
                                                               const float *minimum, const int8_t *qx,
                                                               const float *dx, const float *sx, float *out,
                                                               int64_t begin, int64_t end, int64_t rows, int64_t k,
                                                               int64_t n, int64_t ldo, int halves) {
    int64_t blocks = k / INT8_ROWS_BLOCK;
    for (int64_t g = begin; g < end; g++) {
        int64_t i = 0; /* constant row counts and halves: the compiler keeps each call's sums in registers */
        if (halves == 1) {
            for (; i + INT8_ROWS_X_ROWS <= n; i += INT8_ROWS_X_ROWS)
                int8_rows_group_avx2(packed, scale, minimum, qx, dx, sx, out, g, i, INT8_ROWS_X_ROWS, rows, blocks,
                                     ldo, 1);
            for (; i < n; i++)
                int8_rows_group_avx2(packed, scale, minimum, qx, dx, sx, out, g, i, 1, rows, blocks, ldo, 1);
        } else {
            for (; i + INT8_ROWS_X_ROWS <= n; i += INT8_ROWS_X_ROWS)
                int8_rows_group_avx2(packed, scale, minimum, qx, dx, sx, out, g, i, INT8_ROWS_X_ROWS, rows, blocks,
                                     ldo, 2);
            for (; i < n; i++)
                int8_rows_group_avx2(packed, scale, minimum, qx, dx, sx, out, g, i, 1, rows, blocks, ldo, 2);
        }
    }
}

#endif

static void int8_rows_range(const int8_t *packed, const float *scale, const float *minimum, const int8_t *qx,
                            const float *dx, const float *sx, float *out, int64_t begin, int64_t end, int64_t rows,
                            int64_t k, int64_t n, int64_t ldo, int portable, int halves) {
#if SIMD_HAVE_AVX2
    if (!portable && simd_use_avx2()) {
        int8_rows_avx2(packed, scale, minimum, qx, dx, sx, out, begin, end, rows, k, n, ldo, halves);
        return;
    }
#endif
    int8_rows_portable(packed, scale, minimum, qx, dx, sx, out, begin, end, rows, k, n, ldo, halves);
}

/* out [n, rows] = x [n, k] @ w [rows, k].T (`halves`: scales per block, 1 or 2;
 * `minimum`: a minimum per block, or NULL for none; out's rows `ldo` floats apart), over
 * the OpenMP threads (torch's own pool, where the extension is built with OpenMP) when the
 * product is large enough, each taking whole chunks of groups. The activation rows go in tiles that stay in a core's
 * cache while every weight row passes them; within a tile a group's weights stay in L1
 * while its activation rows pass them. Returns -1 when the activations' scratch cannot
 * be allocated. */
static int int8_rows(const int8_t *packed, const float *scale, const float *minimum, const float *x, float *out,
                     int64_t rows, int64_t k, int64_t n, int64_t ldo, int portable, int halves) {
    int64_t blocks = k / INT8_ROWS_BLOCK;
    int8_t *qx = (int8_t *)malloc((size_t)(n * k) + 2 * sizeof(float) * (size_t)(n * blocks));
    if (qx == NULL) return -1;
    float *dx = (float *)(qx + n * k), *sx = dx + n * blocks;
    activation_blocks_quantize(x, qx, dx, sx, n, k, portable);
    int64_t groups = (rows + INT8_ROWS_GROUP_ROWS - 1) / INT8_ROWS_GROUP_ROWS;
    int64_t chunks = (groups + INT8_ROWS_CHUNK - 1) / INT8_ROWS_CHUNK;
    for (int64_t first = 0; first < n; first += INT8_ROWS_TILE) {
        int64_t tile = n - first < INT8_ROWS_TILE ? n - first : INT8_ROWS_TILE;
        int parallel = tile * blocks * rows >= INT8_ROWS_MIN_PARALLEL;
#pragma omp parallel for schedule(guided) if (parallel)
        for (int64_t c = 0; c < chunks; c++) {
            int64_t begin = c * INT8_ROWS_CHUNK, end = begin + INT8_ROWS_CHUNK < groups ? begin + INT8_ROWS_CHUNK : groups;
            int8_rows_range(packed, scale, minimum, qx + first * k, dx + first * blocks, sx + first * blocks,
                            out + first * ldo, begin, end, rows, k, tile, ldo, portable, halves);
        }
    }
    free(qx);
    return 0;
}

#endif

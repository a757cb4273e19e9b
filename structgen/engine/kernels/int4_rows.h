/* Rows of a matrix of 4-bit weights in blocks of 32 with a float scale and minimum each
 * (w = q * scale + minimum, q in 0..15: GGUF's Q4_1, and Q4_0 and Q4_K as decoded),
 * times float32 activations, into float32.
 *
 * The activations are first quantized, per row and block of 32, to int8 with a scale
 * d = max|x| / 127 (q = x / d rounded to nearest, ties to even) and the block's sum
 * s = d * sum(q), as llama.cpp does for these formats. A block's dot product is then
 * exact in integers, and  w . x ~= scale * d * sum(qw * qx) + minimum * s.
 *
 * Layout: the weight rows go in groups of 8, interleaved so that one vector instruction
 * multiplies four weights of each of the 8 rows by the same four activations. For group
 * g and block b, 128 bytes: in the m-th 32 (m = 0..3), bytes 4j..4j+3 hold row j's
 * weights 8m..8m+3 in their low nibbles and 8m+4..8m+7 in their high ones. The scales
 * and minimums of a group's block are 8 floats in row order. With this layout a block's
 * products for 8 rows sum in 16-bit lanes (at most 8 * 2 * 15 * 127, no overflow) and
 * end in one lane per row: no horizontal sums.
 *
 * One output is always computed in the same order: for each block in turn, its integer
 * sum times (scale * d) fused into a running total, then minimum * s fused into it. The
 * AVX2 path and the portable path do exactly these roundings, so a result does not
 * depend on the CPU's features, on the other rows of the batch, or on which range of
 * weight rows a call or a thread covers. */

#ifndef STRUCTGEN_INT4_ROWS_H
#define STRUCTGEN_INT4_ROWS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "activation_blocks.h"
#include "simd.h"

#define INT4_ROWS_BLOCK 32
#define INT4_ROWS_GROUP_ROWS 8   /* weight rows interleaved together */
#define INT4_ROWS_GROUP_BYTES 128 /* one block of a group: 8 rows * 32 weights / 2 */
#define INT4_ROWS_X_ROWS 4       /* activation rows sharing one unpacking of the weights (AVX2) */
#define INT4_ROWS_MIN_PARALLEL 4096 /* fewer block products than this: one thread */
#define INT4_ROWS_CHUNK 2        /* groups of weight rows per thread's task */
#define INT4_ROWS_TILE 64        /* activation rows per pass over the weights */

/* Weight row j of a group's block (`group_block`: its 128 bytes) times one activation
 * block, summed (exact). */
static int32_t int4_rows_block_portable(const uint8_t *group_block, int j, const int8_t *qx) {
    int32_t sum = 0;
    for (int e = 0; e < INT4_ROWS_BLOCK; e++) {
        int m = e / 8, t = e % 4, high = (e % 8) >= 4;
        uint8_t byte = group_block[32 * m + 4 * j + t];
        sum += (high ? byte >> 4 : byte & 0x0F) * qx[e];
    }
    return sum;
}

/* Groups [begin, end) of weight rows against n activation rows (out's row stride: ldo). */
static void int4_rows_portable(const uint8_t *packed, const float *scale, const float *minimum,
                               const int8_t *qx, const float *dx, const float *sx, float *out,
                               int64_t begin, int64_t end, int64_t k, int64_t n, int64_t ldo) {
    int64_t blocks = k / INT4_ROWS_BLOCK;
    for (int64_t g = begin; g < end; g++)
        for (int64_t i = 0; i < n; i++)
            for (int j = 0; j < INT4_ROWS_GROUP_ROWS; j++) {
                float total = 0.0f;
                for (int64_t b = 0; b < blocks; b++) {
                    int64_t wb = g * blocks + b, xb = i * blocks + b;
                    int32_t sum = int4_rows_block_portable(packed + wb * INT4_ROWS_GROUP_BYTES, j,
                                                           qx + xb * INT4_ROWS_BLOCK);
                    total = fmaf((float)sum, scale[wb * INT4_ROWS_GROUP_ROWS + j] * dx[xb], total);
                    total = fmaf(minimum[wb * INT4_ROWS_GROUP_ROWS + j], sx[xb], total);
                }
                out[i * ldo + g * INT4_ROWS_GROUP_ROWS + j] = total;
            }
}

#if SIMD_HAVE_AVX2

/* A group's block, unpacked: w[2m] = the low nibbles of its m-th 32 bytes (weights
 * 8m..8m+3 of each row), w[2m + 1] the high ones (8m+4..8m+7). */
__attribute__((target("avx2,fma"), always_inline)) static inline void int4_rows_unpack(const uint8_t *group_block,
                                                                                       __m256i w[8]) {
    const __m256i low_mask = _mm256_set1_epi8(0x0F);
    for (int m = 0; m < 4; m++) {
        __m256i bytes = _mm256_loadu_si256((const __m256i *)(group_block + 32 * m));
        w[2 * m] = _mm256_and_si256(bytes, low_mask);
        w[2 * m + 1] = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low_mask);
    }
}

/* The 8 rows' sums with one activation block: lane j = row j's (exact). */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256i int4_rows_sums(const __m256i w[8],
                                                                                      const int8_t *qx) {
    __m256i pairs = _mm256_setzero_si256();
    for (int q = 0; q < 8; q++) {
        int32_t four;
        memcpy(&four, qx + 4 * q, sizeof four);
        pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(w[q], _mm256_set1_epi32(four)));
    }
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

/* Group g against activation rows [i, i + rows), rows <= INT4_ROWS_X_ROWS (inlined at each
 * call, so that a constant row count keeps the totals in registers). */
__attribute__((target("avx2,fma"), always_inline)) static inline void int4_rows_group_avx2(
    const uint8_t *packed, const float *scale, const float *minimum, const int8_t *qx, const float *dx,
    const float *sx, float *out, int64_t g, int64_t i, int rows, int64_t blocks, int64_t ldo) {
    __m256i w[8];
    __m256 total[INT4_ROWS_X_ROWS];
    for (int r = 0; r < rows; r++) total[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; b++) {
        int64_t wb = g * blocks + b;
        int4_rows_unpack(packed + wb * INT4_ROWS_GROUP_BYTES, w);
        const float *group_scale = scale + wb * INT4_ROWS_GROUP_ROWS, *group_min = minimum + wb * INT4_ROWS_GROUP_ROWS;
        __m256 block_scale = _mm256_loadu_ps(group_scale), block_min = _mm256_loadu_ps(group_min);
        for (int r = 0; r < rows; r++) {
            int64_t xb = (i + r) * blocks + b;
            __m256 sums = _mm256_cvtepi32_ps(int4_rows_sums(w, qx + xb * INT4_ROWS_BLOCK));
            total[r] = _mm256_fmadd_ps(sums, _mm256_mul_ps(block_scale, _mm256_set1_ps(dx[xb])), total[r]);
            total[r] = _mm256_fmadd_ps(block_min, _mm256_set1_ps(sx[xb]), total[r]);
        }
    }
    for (int r = 0; r < rows; r++) _mm256_storeu_ps(out + (i + r) * ldo + g * INT4_ROWS_GROUP_ROWS, total[r]);
}

__attribute__((target("avx2,fma"))) static void int4_rows_avx2(const uint8_t *packed, const float *scale,
                                                               const float *minimum, const int8_t *qx,
                                                               const float *dx, const float *sx, float *out,
                                                               int64_t begin, int64_t end, int64_t k, int64_t n,
                                                               int64_t ldo) {
    int64_t blocks = k / INT4_ROWS_BLOCK;
    for (int64_t g = begin; g < end; g++) {
        int64_t i = 0; /* constant row counts: the compiler keeps each call's totals in registers */
        for (; i + INT4_ROWS_X_ROWS <= n; i += INT4_ROWS_X_ROWS)
            int4_rows_group_avx2(packed, scale, minimum, qx, dx, sx, out, g, i, INT4_ROWS_X_ROWS, blocks, ldo);
        for (; i < n; i++) int4_rows_group_avx2(packed, scale, minimum, qx, dx, sx, out, g, i, 1, blocks, ldo);
    }
}

#endif

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

/* out [n, rows] = x [n, k] @ w [rows, k].T (rows a multiple of 8; out's rows `ldo`
 * floats apart, so that several layers may fill one output side by side), over the OpenMP
 * threads (torch's own pool, where the extension is built with OpenMP) when the product
 * is large enough. The activation rows go in tiles that stay in a core's cache while
 * every weight row passes them (without tiles a long prefill re-read all its activations
 * from memory per row). Guided scheduling: a thread that loses its core to another
 * process or to the server's own threads leaves its later chunks to the others (static
 * chunks lost 20-25% of a 16-request decode beside one busy thread, guided 0-18%; dynamic
 * chunks of one broke the rows' memory streams, 30% slower at one request). Returns -1
 * when the activations' scratch cannot be allocated. */
static int int4_rows(const uint8_t *packed, const float *scale, const float *minimum, const float *x, float *out,
                     int64_t rows, int64_t k, int64_t n, int64_t ldo, int portable) {
    int64_t blocks = k / INT4_ROWS_BLOCK;
    int8_t *qx = (int8_t *)malloc((size_t)(n * k) + 2 * sizeof(float) * (size_t)(n * blocks));
    if (qx == NULL) return -1;
    float *dx = (float *)(qx + n * k), *sx = dx + n * blocks;
    activation_blocks_quantize(x, qx, dx, sx, n, k, portable);
    int64_t groups = rows / INT4_ROWS_GROUP_ROWS, chunks = (groups + INT4_ROWS_CHUNK - 1) / INT4_ROWS_CHUNK;
    for (int64_t first = 0; first < n; first += INT4_ROWS_TILE) {
        int64_t tile = n - first < INT4_ROWS_TILE ? n - first : INT4_ROWS_TILE;
        int parallel = tile * blocks * rows >= INT4_ROWS_MIN_PARALLEL;
#pragma omp parallel for schedule(guided) if (parallel)
        for (int64_t c = 0; c < chunks; c++) {
            int64_t begin = c * INT4_ROWS_CHUNK, end = begin + INT4_ROWS_CHUNK < groups ? begin + INT4_ROWS_CHUNK : groups;
            int4_rows_range(packed, scale, minimum, qx + first * k, dx + first * blocks, sx + first * blocks,
                            out + first * ldo, begin, end, k, tile, ldo, portable);
        }
    }
    free(qx);
    return 0;
}

#endif

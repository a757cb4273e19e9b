/* A step of every decoder layer of a Llama-family model on CPU, in one call: for each
 * layer, the RMSNorm (with the residual add), the fused q/k/v projection, RoPE, the store
 * of k and v in the paged cache, attention, the output projection, the second norm, the
 * fused gate/up projection, SiLU-gating and the down projection; then the final norm.
 * Each projection is 4-bit block weights (int4_rows.h) or 8-bit ones with a scale per block
 * or half block and, where the file has them, a minimum per block (int8_rows.h), or runs of rows
 * of either kind side by side (4-bit q and k beside an 8-bit v); the model has no biases
 * and no q/k norms. Each row is one new
 * token -- a decode, a prompt chunk's token or one of a jump-forward span -- with its own
 * block table and the number of positions it attends to (attention_rows.h), so one call
 * runs any step.
 *
 * It chains the kernels the engine's per-op path calls one by one from Python
 * (rms_norm_rows.h, int4_rows.h, int8_rows.h, rope_and_cache.h, attention_rows.h,
 * silu_mul_rows.h), on the same buffers in the same order, so its hidden states are that
 * path's, bit for bit; what it saves is the interpreter's time between them, which in a
 * decode step of a small model is as long as the arithmetic. */

#ifndef STRUCTGEN_FUSED_LAYERS_H
#define STRUCTGEN_FUSED_LAYERS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention_rows.h"
#include "int4_rows.h"
#include "int8_rows.h"
#include "rms_norm_rows.h"
#include "rope_and_cache.h"
#include "silu_mul_rows.h"

/* One layer's row of the weight table: the norms' float32 vectors (addresses), then each
 * projection in turn as FUSED_PARTS parts, runs of its rows in order: a part's packed
 * weights, scales and minimums (addresses), its bits, 4 (int4_rows.h) or 8 (int8_rows.h:
 * minimums or 0 for none), its rows, and its scales per block of 32 (8-bit: 1 or 2)
 * (numbers); a projection of fewer parts ends with a part of 0 rows. */
enum fused_layer_field { FUSED_INPUT_NORM, FUSED_POST_NORM, FUSED_FIRST_PART };
enum fused_projection { FUSED_QKV, FUSED_O, FUSED_GATE_UP, FUSED_DOWN, FUSED_PROJECTIONS };
enum fused_part_field { FUSED_PACKED, FUSED_SCALE, FUSED_MIN, FUSED_BITS, FUSED_ROWS, FUSED_HALVES, FUSED_PART_FIELDS };
#define FUSED_PARTS 3
#define FUSED_FIELDS (FUSED_FIRST_PART + FUSED_PROJECTIONS * FUSED_PARTS * FUSED_PART_FIELDS)

typedef struct {
    int64_t layers, hidden, heads, kv_heads, dim, intermediate;
    int64_t block_size, table_width, kv_half; /* kv_half: the caches hold float16 */
    double eps;
    float scale;
} fused_shape;

#define FUSED_FIELD(layer, field) ((const void *)(uintptr_t)weights[(layer) * FUSED_FIELDS + (field)])

/* out [n, rows] = x [n, k] @ the weights [rows, k].T of a layer's projection, each part
 * filling its own run of out's columns. */
static int fused_projection(const int64_t *weights, int64_t layer, int projection, const float *x, float *out,
                            int64_t rows, int64_t k, int64_t n) {
    int status = 0;
    int64_t done = 0;
    for (int part = 0; part < FUSED_PARTS; part++) {
        int at = FUSED_FIRST_PART + (projection * FUSED_PARTS + part) * FUSED_PART_FIELDS;
        const void *packed = FUSED_FIELD(layer, at + FUSED_PACKED), *scale = FUSED_FIELD(layer, at + FUSED_SCALE);
        const void *minimum = FUSED_FIELD(layer, at + FUSED_MIN);
        int64_t bits = weights[layer * FUSED_FIELDS + at + FUSED_BITS];
        int64_t part_rows = weights[layer * FUSED_FIELDS + at + FUSED_ROWS];
        int halves = (int)weights[layer * FUSED_FIELDS + at + FUSED_HALVES];
        if (part_rows == 0) break;
        if (bits == 8)
            status |= int8_rows(packed, scale, minimum, x, out + done, part_rows, k, n, rows, 0, halves);
        else
            status |= int4_rows(packed, scale, minimum, x, out + done, part_rows, k, n, rows, 0);
        done += part_rows;
    }
    return status;
}

/* out [n, hidden] = the final norm of the last layer's output, from embeddings x [n, hidden]
 * of n new tokens; caches: each layer's k and v cache addresses (float16 where
 * shape->kv_half, else float32); cos, signed_sin [n, dim];
 * slots [n]; block_tables [n, table_width] and seq_lens [n], per token (attention_rows.h).
 * Returns 0, or -1 without memory. */
static int fused_layers(const int64_t *weights, const int64_t *caches, const float *final_norm,
                        const fused_shape *shape, const float *x, const float *cos, const float *signed_sin,
                        const int64_t *slots, const int32_t *block_tables, const int32_t *seq_lens, float *out,
                        int64_t n) {
    int64_t hidden = shape->hidden, dim = shape->dim, heads = shape->heads, kv_heads = shape->kv_heads;
    int64_t q_size = heads * dim, kv_size = kv_heads * dim, qkv_width = q_size + 2 * kv_size;
    int64_t inter = shape->intermediate;
    size_t floats = (size_t)n * (size_t)(3 * hidden + qkv_width + (q_size + kv_size) + 2 * q_size + 3 * inter);
    float *scratch = malloc(sizeof(float) * floats);
    if (!scratch) return -1;
    float *residual = scratch, *h = residual + n * hidden, *delta = h + n * hidden, *qkv = delta + n * hidden;
    float *rotated = qkv + n * qkv_width, *query = rotated + n * (q_size + kv_size), *attended = query + n * q_size;
    float *gate_up = attended + n * q_size, *activated = gate_up + n * 2 * inter;
    int status = 0;
    for (int64_t layer = 0; layer < shape->layers && status == 0; layer++) {
        void *k_cache = (void *)(uintptr_t)caches[2 * layer], *v_cache = (void *)(uintptr_t)caches[2 * layer + 1];
        if (layer == 0) {
            memcpy(residual, x, sizeof(float) * (size_t)(n * hidden));
            rms_norm_rows(residual, NULL, NULL, FUSED_FIELD(layer, FUSED_INPUT_NORM), h, n, hidden, shape->eps);
        } else {
            rms_norm_rows(residual, delta, residual, FUSED_FIELD(layer, FUSED_INPUT_NORM), h, n, hidden,
                          shape->eps);
        }
        status |= fused_projection(weights, layer, FUSED_QKV, h, qkv, qkv_width, hidden, n);
        rope_rows(qkv, qkv_width, rotated, cos, signed_sin, n, heads + kv_heads, dim);
        cache_rows(rotated + q_size, q_size + kv_size, k_cache, slots, n, kv_size, shape->kv_half, 0);
        cache_rows(qkv + q_size + kv_size, qkv_width, v_cache, slots, n, kv_size, shape->kv_half, 0);
        for (int64_t t = 0; t < n; t++)
            memcpy(query + t * q_size, rotated + t * (q_size + kv_size), sizeof(float) * (size_t)q_size);
        status |= attention_rows(query, k_cache, v_cache, block_tables, shape->table_width, seq_lens, attended, n,
                                 heads, kv_heads, dim, shape->block_size, shape->scale, shape->kv_half, 0);
        status |= fused_projection(weights, layer, FUSED_O, attended, delta, hidden, q_size, n);
        rms_norm_rows(residual, delta, residual, FUSED_FIELD(layer, FUSED_POST_NORM), h, n, hidden, shape->eps);
        status |= fused_projection(weights, layer, FUSED_GATE_UP, h, gate_up, 2 * inter, hidden, n);
        silu_mul_rows(gate_up, activated, n, inter, 0);
        status |= fused_projection(weights, layer, FUSED_DOWN, activated, delta, hidden, inter, n);
    }
    if (status == 0) {
        float *total = residual;
        rms_norm_rows(residual, delta, total, final_norm, out, n, hidden, shape->eps);
    }
    free(scratch);
    return status ? -1 : 0;
}

#endif

/* Two small steps of every layer on CPU in float32, each one C call instead of several
 * torch ops: rotate-half RoPE of a step's q and k heads (`rope_rows`), and the store of
 * the new tokens' keys and values at their cache slots (`cache_rows`), in float32 or
 * rounded to float16 (half_floats.h). Both read token rows at any stride (a slice of
 * the fused qkv output), with each token's heads contiguous.
 *
 * RoPE rounds as torch's `elementwise_torch.rotate` is written: x * cos rounded, then
 * x[j + dim/2 mod dim] * signed_sin rounded and added. */

#ifndef STRUCTGEN_ROPE_AND_CACHE_H
#define STRUCTGEN_ROPE_AND_CACHE_H

#include <stdint.h>
#include <string.h>

#include "half_floats.h"

/* out [tokens, heads, dim] = rotate(x); cos, signed_sin [tokens, dim] (the sine's first half negated). */
static void rope_rows(const float *x, int64_t token_stride, float *out, const float *cos, const float *signed_sin,
                      int64_t tokens, int64_t heads, int64_t dim) {
    int64_t half = dim / 2;
    for (int64_t t = 0; t < tokens; t++) {
        const float *c = cos + t * dim, *s = signed_sin + t * dim;
        for (int64_t h = 0; h < heads; h++) {
            const float *src = x + t * token_stride + h * dim;
            float *dst = out + (t * heads + h) * dim;
            for (int64_t j = 0; j < dim; j++) {
                float straight = src[j] * c[j];
                float turned = src[j < half ? j + half : j - half] * s[j];
                dst[j] = straight + turned;
            }
        }
    }
}

/* cache row slots[t] = src row t (`width` values each), float32, or float16 where `half`;
 * a negative slot is padding, skipped. */
static void cache_rows(const float *src, int64_t token_stride, void *cache, const int64_t *slots, int64_t tokens,
                       int64_t width, int half, int portable) {
    for (int64_t t = 0; t < tokens; t++) {
        if (slots[t] < 0) continue;
        if (half)
            float_row_to_half(src + t * token_stride, (uint16_t *)cache + slots[t] * width, width, portable);
        else
            memcpy((float *)cache + slots[t] * width, src + t * token_stride, sizeof(float) * (size_t)width);
    }
}

#endif

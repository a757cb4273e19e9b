# cython: boundscheck=False, wraparound=False, initializedcheck=False
"""The engine's compiled CPU kernels, C in the headers beside this file:
- int8_rows.h: float32 activations, quantized to int8 per block of 32
  (activation_blocks.h), times int8 weights in blocks of 32 with a float32 scale each,
  into float32 (`matmul_rows`);
- int4_rows.h: the same activations times 4-bit weights in blocks of 32 with a scale
  and a minimum each, into float32 (`int4_matmul_rows`);
- rms_norm_rows.h: RMSNorm of float32 rows, with the residual add before it (`rms_norm`);
- attention_rows.h: a step's new tokens, each over its sequence's paged float32 KV cache
  (`attention_rows`);
- rope_and_cache.h: RoPE of q and k heads (`rope`) and the store of keys and values at
  their cache slots, float32 or float16 (`cache_rows`; half_floats.h converts, and
  `half_to_float` reads float16 back);
- silu_mul_rows.h: the SiLU-gated MLP activation (`silu_mul`);
- sample_rows.h: each row's largest logit and its token (`largest_rows`), and one token
  per row of logits drawn at a temperature (`sample_rows`);
- fused_layers.h: all of them chained, a step through every decoder layer of a model
  with 4-bit block projections (`fused_layers`).
Owns only the calls into C, with the GIL released. Arrays are passed as addresses: the
callers (int8_matmul.py, int4_matmul.py, norm_cpu.py, attention_torch.py, fused_step.py,
sampler.py)
check dtype, device, shape and contiguity first."""

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint16_t, uintptr_t

cdef extern from "int8_rows.h":
    int c_int8_rows "int8_rows"(const int8_t *packed, const float *scale, const float *minimum, const float *x,
                                float *out, int64_t rows, int64_t k, int64_t n, int64_t ldo, int portable,
                                int halves) nogil

cdef extern from "int4_rows.h":
    int c_int4_rows "int4_rows"(const uint8_t *packed, const float *scale, const float *minimum, const float *x,
                                float *out, int64_t rows, int64_t k, int64_t n, int64_t ldo, int portable) nogil

cdef extern from "sample_rows.h":
    int c_sample_rows "sample_rows"(const float *logits, int64_t n, int64_t vocab, int64_t ld, const float *largest,
                                    const float *temperature, const double *uniforms, int64_t *tokens,
                                    int portable) nogil
    void largest_rows(const float *logits, int64_t n, int64_t vocab, int64_t ld, float *largest, int64_t *tokens,
                      int portable) nogil

cdef extern from "rms_norm_rows.h":
    void rms_norm_rows(const float *x, const float *delta, float *total, const float *weight, float *out,
                       int64_t n, int64_t k, double eps) nogil

cdef extern from "attention_rows.h":
    int c_attention_rows "attention_rows"(
        const float *query, const void *k_cache, const void *v_cache, const int32_t *block_tables,
        int64_t table_width, const int32_t *seq_lens, float *out, int64_t n, int64_t heads, int64_t kv_heads,
        int64_t dim, int64_t block_size, float scale, int kv_half, int portable) nogil

cdef extern from "rope_and_cache.h":
    void rope_rows(const float *x, int64_t token_stride, float *out, const float *cos, const float *signed_sin,
                   int64_t tokens, int64_t heads, int64_t dim) nogil
    void c_cache_rows "cache_rows"(const float *src, int64_t token_stride, void *cache, const int64_t *slots,
                                   int64_t tokens, int64_t width, int half, int portable) nogil

cdef extern from "half_floats.h":
    void half_row_to_float(const uint16_t *src, float *dst, int64_t n, int portable) nogil

cdef extern from "silu_mul_rows.h":
    void silu_mul_rows(const float *gate_up, float *out, int64_t n, int64_t width, int portable) nogil

cdef extern from "fused_layers.h":
    ctypedef struct fused_shape:
        int64_t layers, hidden, heads, kv_heads, dim, intermediate, block_size, table_width, kv_half
        double eps
        float scale
    int FUSED_FIELDS, FUSED_PARTS, FUSED_PART_FIELDS
    int c_fused_layers "fused_layers"(
        const int64_t *weights, const int64_t *caches, const float *final_norm, const fused_shape *shape,
        const float *x, const float *cos, const float *signed_sin, const int64_t *slots, const int32_t *block_tables,
        const int32_t *seq_lens, float *out, int64_t n) nogil

LAYER_FIELDS = FUSED_FIELDS  # entries per layer in fused_layers' weight table
PROJECTION_PARTS = FUSED_PARTS  # runs of rows a projection may have, each its own block layer
PART_FIELDS = FUSED_PART_FIELDS  # entries per part: packed, scales, minimums, bits, rows, scales per block


def matmul_rows(uintptr_t packed, uintptr_t scale, uintptr_t x, uintptr_t out, int64_t rows, int64_t k, int64_t n,
                bint portable=False, int halves=1, uintptr_t minimum=0):
    """out [n, rows] = x [n, k] @ (q * scale per block of 32, or per half block with
    `halves` 2, + minimum per block of 32 unless its address is 0) [rows, k].T (packed,
    scale and minimum in int8_rows.h's layout: `int8_matmul.pack`)."""
    if halves not in (1, 2):
        raise ValueError(f"int8 block weights take 1 or 2 scales per block of 32, not {halves}")
    cdef int status
    with nogil:
        status = c_int8_rows(<const int8_t *>packed, <const float *>scale, <const float *>minimum,
                             <const float *>x, <float *>out, rows, k, n, rows, portable, halves)
    if status != 0:
        raise MemoryError("int8 matmul: no memory for the quantized activations")


def int4_matmul_rows(uintptr_t packed, uintptr_t scale, uintptr_t minimum, uintptr_t x, uintptr_t out,
                     int64_t rows, int64_t k, int64_t n, bint portable=False):
    """out [n, rows] = x [n, k] @ w [rows, k].T, w = q * scale + minimum per block of 32
    (packed, scale and minimum in int4_rows.h's layout: `int4_matmul.pack`)."""
    cdef int status
    with nogil:
        status = c_int4_rows(<const uint8_t *>packed, <const float *>scale, <const float *>minimum,
                             <const float *>x, <float *>out, rows, k, n, rows, portable)
    if status != 0:
        raise MemoryError("int4 matmul: no memory for the quantized activations")


def sample_rows(uintptr_t logits, int64_t n, int64_t vocab, int64_t ld, uintptr_t largest, uintptr_t temperature,
                uintptr_t uniforms, uintptr_t tokens, bint portable=False):
    """tokens [n] int64: per row of logits [n, vocab] (row stride ld), the token its
    uniform picks from e^((l - largest) / temperature) (sample_rows.h)."""
    cdef int status
    with nogil:
        status = c_sample_rows(<const float *>logits, n, vocab, ld, <const float *>largest,
                               <const float *>temperature, <const double *>uniforms, <int64_t *>tokens, portable)
    if status != 0:
        raise MemoryError("sampling: no memory for the weights")


def largest(uintptr_t logits, int64_t n, int64_t vocab, int64_t ld, uintptr_t largest, uintptr_t tokens,
            bint portable=False):
    """largest [n] float32 and tokens [n] int64: each row's largest logit and the first
    token holding it (NaN and its token where the row has one)."""
    with nogil:
        largest_rows(<const float *>logits, n, vocab, ld, <float *>largest, <int64_t *>tokens, portable)


def rms_norm(uintptr_t x, uintptr_t delta, uintptr_t total, uintptr_t weight, uintptr_t out, int64_t n, int64_t k,
             double eps):
    """out = rms_norm(x (+ delta, written to total)) * weight, n rows of k; delta 0: no add."""
    with nogil:
        rms_norm_rows(<const float *>x, <const float *>delta, <float *>total, <const float *>weight, <float *>out,
                      n, k, eps)


def attention_rows(uintptr_t query, uintptr_t k_cache, uintptr_t v_cache, uintptr_t block_tables,
                   int64_t table_width, uintptr_t seq_lens, uintptr_t out, int64_t n, int64_t heads,
                   int64_t kv_heads, int64_t dim, int64_t block_size, float scale, bint kv_half=False,
                   bint portable=False):
    """out [n, heads, dim]: each of n query rows over the first seq_lens[row] positions of
    its own block table's paged cache (block_tables [n, table_width]; float16 where kv_half)."""
    cdef int status
    with nogil:
        status = c_attention_rows(<const float *>query, <const void *>k_cache, <const void *>v_cache,
                                  <const int32_t *>block_tables, table_width, <const int32_t *>seq_lens,
                                  <float *>out, n, heads, kv_heads, dim, block_size, scale, kv_half, portable)
    if status != 0:
        raise MemoryError("attention rows: no memory for the scores")


def rope(uintptr_t x, int64_t token_stride, uintptr_t out, uintptr_t cos, uintptr_t signed_sin, int64_t tokens,
         int64_t heads, int64_t dim):
    """out [tokens, heads, dim] = rotate-half RoPE of x's rows (token_stride floats apart)."""
    with nogil:
        rope_rows(<const float *>x, token_stride, <float *>out, <const float *>cos, <const float *>signed_sin,
                  tokens, heads, dim)


def cache_rows(uintptr_t src, int64_t token_stride, uintptr_t cache, uintptr_t slots, int64_t tokens,
               int64_t width, bint half=False, bint portable=False):
    """Cache row slots[t] (width values, float16 where half) = src row t; negative slots skipped."""
    with nogil:
        c_cache_rows(<const float *>src, token_stride, <void *>cache, <const int64_t *>slots, tokens, width, half,
                     portable)


def silu_mul(uintptr_t gate_up, uintptr_t out, int64_t n, int64_t width, bint portable=False):
    """out [n, width] = silu(gate) * up, gate_up [n, 2 * width] = [gate | up]."""
    with nogil:
        silu_mul_rows(<const float *>gate_up, <float *>out, n, width, portable)


def fused_layers(uintptr_t weights, uintptr_t caches, uintptr_t final_norm, int64_t layers, int64_t hidden,
                 int64_t heads, int64_t kv_heads, int64_t dim, int64_t intermediate, int64_t block_size,
                 int64_t table_width, double eps, float scale, uintptr_t x, uintptr_t cos, uintptr_t signed_sin,
                 uintptr_t slots, uintptr_t block_tables, uintptr_t seq_lens, uintptr_t out, int64_t n,
                 bint kv_half=False):
    """out [n, hidden]: n new tokens (embeddings x) through every layer and the final
    norm (fused_layers.h); weights [layers, LAYER_FIELDS] and caches [layers, 2] are int64
    tables of addresses; the caches hold float16 where kv_half."""
    cdef fused_shape shape
    shape.layers, shape.hidden, shape.heads, shape.kv_heads = layers, hidden, heads, kv_heads
    shape.dim, shape.intermediate, shape.block_size, shape.table_width = dim, intermediate, block_size, table_width
    shape.eps, shape.scale, shape.kv_half = eps, scale, kv_half
    cdef int status
    with nogil:
        status = c_fused_layers(<const int64_t *>weights, <const int64_t *>caches, <const float *>final_norm, &shape,
                                <const float *>x, <const float *>cos, <const float *>signed_sin,
                                <const int64_t *>slots, <const int32_t *>block_tables, <const int32_t *>seq_lens,
                                <float *>out, n)
    if status != 0:
        raise MemoryError("fused layers: no memory for the step's buffers")


def half_to_float(uintptr_t src, uintptr_t dst, int64_t n, bint portable=False):
    """dst [n] float32 = src [n] float16 (exact; half_floats.h, as the float16 cache is read)."""
    with nogil:
        half_row_to_float(<const uint16_t *>src, <float *>dst, n, portable)

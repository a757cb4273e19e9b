"""Paged attention as Triton kernels: the GPU backend of `attention_torch`'s contract.

Owns three kernels with `attention_torch`'s signatures and layout (see its docstring):
storing new K/V at their slots (a one-byte cache's with a scale per row, rounded as
`quantized_kv` rounds), decode attention (one new token per sequence, the
query heads of one KV head together) and varlen prefill attention (flash-attention
style over the cached prefix plus the new tokens, causal). Both attention kernels
use an online softmax with fp32 accumulation.

It must not touch anything outside the kernels' arguments: no cache allocation, no
scheduling, no host-side reads of device tensors (launch uses host ints from the
metadata only, so decode steps stay CUDA-graph capturable).

On CPU the kernels run under Triton's interpreter (`TRITON_INTERPRET=1`, which must
be set before this module is imported); `available()` says whether they can run.
"""

from __future__ import annotations

import functools

import torch

from structgen.engine.kernels import quantized_kv
from structgen.engine.kernels.attention_torch import AttentionMetadata

# A backend is the whole set of a layer's kernels: the element-wise ops travel with it.
from structgen.engine.kernels.elementwise_triton import (  # noqa: F401
    add_rms_norm,
    rms_norm,
    rope_tables,
    rotate,
    silu_mul,
)

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs ship without Triton
    triton = None
    tl = None

_LOG2_E = 1.4426950408889634
# Launches read only host values fixed for a batch size (see the docstring): decode
# steps on this backend can be captured in CUDA graphs (`engine/cuda_graphs.py`).
GRAPH_CAPTURABLE = True
_MIN_DOT = 16  # tl.dot needs every dimension >= 16 on GPU


# Triton picks interpreter or compiler when a kernel is decorated, i.e. at this import.
_INTERPRETED = triton is not None and bool(triton.knobs.runtime.interpret)


def available() -> bool:
    """Whether the Triton kernels can run in this process."""
    return triton is not None and (torch.cuda.is_available() or _INTERPRETED)


def _jit(fn):
    return triton.jit(fn) if triton is not None else fn


# ---------------------------------------------------------------------------------
# Kernels


@_jit
def _write_kv_kernel(
    key_ptr, value_ptr, k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr, slot_mapping_ptr,
    stride_kt, stride_kh, stride_kd,
    stride_vt, stride_vh, stride_vd,
    stride_cb, stride_cs, stride_ch, stride_cd,
    kv_heads, head_dim,
    BLOCK_SIZE: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
    QUANTIZED: tl.constexpr, LARGEST: tl.constexpr, ROUND_TO_INT: tl.constexpr,
):
    token = tl.program_id(0)
    slot = tl.load(slot_mapping_ptr + token)
    if slot < 0:  # padding tokens carry slot -1 and write nothing
        return
    head_ids = tl.arange(0, BLOCK_H)
    heads = head_ids[:, None]
    dims = tl.arange(0, BLOCK_D)[None, :]
    mask = (heads < kv_heads) & (dims < head_dim)
    cache_offsets = ((slot // BLOCK_SIZE) * stride_cb + (slot % BLOCK_SIZE) * stride_cs
                     + heads * stride_ch + dims * stride_cd)
    key = tl.load(key_ptr + token * stride_kt + heads * stride_kh + dims * stride_kd, mask=mask, other=0.0)
    value = tl.load(value_ptr + token * stride_vt + heads * stride_vh + dims * stride_vd, mask=mask, other=0.0)
    if QUANTIZED:  # a scale per (slot, head), as quantized_kv.quantize_rows
        scale_offsets = slot * kv_heads + head_ids
        key = _quantized_rows(key, k_scale_ptr + scale_offsets, head_ids < kv_heads, LARGEST, ROUND_TO_INT)
        value = _quantized_rows(value, v_scale_ptr + scale_offsets, head_ids < kv_heads, LARGEST, ROUND_TO_INT)
        if not ROUND_TO_INT:  # fp8, stored as its bytes
            key, value = _e4m3_bytes(key), _e4m3_bytes(value)
    tl.store(k_cache_ptr + cache_offsets, key.to(k_cache_ptr.dtype.element_ty), mask=mask)
    tl.store(v_cache_ptr + cache_offsets, value.to(v_cache_ptr.dtype.element_ty), mask=mask)


@_jit
def _quantized_rows(rows, scale_ptrs, heads_valid, LARGEST: tl.constexpr, ROUND_TO_INT: tl.constexpr):
    """Rows [BLOCK_H, BLOCK_D] over their scales (stored at scale_ptrs), clamped to
    +-LARGEST and, for int8, rounded half away from zero."""
    rows = rows.to(tl.float32)
    scales = tl.max(tl.abs(rows), axis=1) / LARGEST
    tl.store(scale_ptrs, scales, mask=heads_valid)
    safe = tl.where(scales > 0, scales, 1.0)
    scaled = tl.minimum(tl.maximum(rows / safe[:, None], -LARGEST), LARGEST)
    if ROUND_TO_INT:
        rounded = tl.floor(tl.abs(scaled) + 0.5)
        scaled = tl.where(scaled < 0, -rounded, rounded)
    return scaled


@_jit
def _e4m3_bytes(scaled):
    """float32 values within +-448 -> their float8_e4m3fn bytes, rounded to nearest even
    as torch's conversion rounds. Done in integers: Triton's interpreter rounds its own
    fp8 conversions half up and without carrying into the exponent."""
    bits = scaled.to(tl.int32, bitcast=True)
    sign = (bits >> 24) & 0x80
    magnitude = bits & 0x7FFFFFFF
    # A normal e4m3 value: keep 3 of float32's 23 mantissa bits, ties to even (a carry
    # moves into the exponent), then rebias the exponent from 127 to 7.
    normal = ((magnitude + 0x7FFFF + ((magnitude >> 20) & 1)) >> 20) - ((127 - 7) << 3)
    # Below 2^-6, multiples of 2^-9: rounded to an integer by adding and taking away 2^23.
    subnormal = ((tl.abs(scaled) * 512.0 + 8388608.0) - 8388608.0).to(tl.int32)
    code = tl.where(magnitude < 0x3C800000, subnormal, normal)  # 0x3C800000 = 2^-6
    return (code | sign).to(tl.uint8)


@_jit
def _load_kv_tile(
    k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr, table_row_ptr, positions, seq_len, kv_head, kv_heads,
    dims, dims_valid,
    stride_cb, stride_cs, stride_ch, stride_cd,
    BLOCK_SIZE: tl.constexpr, QUANTIZED: tl.constexpr,
):
    """K and V [BLOCK_N, BLOCK_D] of context `positions`, gathered through the block table
    (a one-byte cache's read back as float32 times each row's scale).

    Positions past seq_len load zeros, so stale or NaN cache slots never reach the math.
    """
    in_context = positions < seq_len
    blocks = tl.load(table_row_ptr + positions // BLOCK_SIZE, mask=in_context, other=0)
    rows = blocks.to(tl.int64) * stride_cb + (positions % BLOCK_SIZE) * stride_cs + kv_head * stride_ch
    offsets = rows[:, None] + dims[None, :] * stride_cd
    mask = in_context[:, None] & dims_valid[None, :]
    keys = tl.load(k_cache_ptr + offsets, mask=mask, other=0.0)
    values = tl.load(v_cache_ptr + offsets, mask=mask, other=0.0)
    if QUANTIZED:
        scale_offsets = (blocks.to(tl.int64) * BLOCK_SIZE + positions % BLOCK_SIZE) * kv_heads + kv_head
        k_scales = tl.load(k_scale_ptr + scale_offsets, mask=in_context, other=0.0)
        v_scales = tl.load(v_scale_ptr + scale_offsets, mask=in_context, other=0.0)
        keys = keys.to(tl.float32) * k_scales[:, None]
        values = values.to(tl.float32) * v_scales[:, None]
    return keys, values


@_jit
def _online_softmax_step(
    query, keys, values, visible, row_max, row_sum, acc, qk_scale,
    DOT_PRECISION: tl.constexpr, DOT_IN_FP32: tl.constexpr,
):
    """Fold one key tile into the running (max, sum, weighted values) of each query row.

    Scores are in log2 units (qk_scale includes log2(e)) so exp2 can be used.
    """
    keys = keys.to(query.dtype)
    values = values.to(query.dtype)
    if DOT_IN_FP32:
        query = query.to(tl.float32)
        keys = keys.to(tl.float32)
        values = values.to(tl.float32)
    scores = tl.dot(query, tl.trans(keys), input_precision=DOT_PRECISION) * qk_scale
    scores = tl.where(visible, scores, float("-inf"))
    new_max = tl.maximum(row_max, tl.max(scores, axis=1))
    # A row that has seen no visible key yet keeps max -inf; subtract 0 instead to avoid NaN.
    shift = tl.where(new_max == float("-inf"), 0.0, new_max)
    rescale = tl.exp2(row_max - shift)
    probs = tl.exp2(scores - shift[:, None])
    row_sum = row_sum * rescale + tl.sum(probs, axis=1)
    acc = acc * rescale[:, None] + tl.dot(probs.to(values.dtype), values, input_precision=DOT_PRECISION)
    return new_max, row_sum, acc


@_jit
def _normalize(acc, row_sum):
    """Weighted values / softmax denominator; rows that saw no key (seq_len 0) give 0."""
    return acc / tl.where(row_sum == 0.0, 1.0, row_sum)[:, None]


@_jit
def _decode_kernel(
    query_ptr, k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr, out_ptr,
    block_tables_ptr, seq_lens_ptr, query_start_loc_ptr, qk_scale,
    stride_qt, stride_qh, stride_qd,
    stride_ot, stride_oh, stride_od,
    stride_cb, stride_cs, stride_ch, stride_cd,
    stride_table, head_dim, kv_heads,
    GROUP: tl.constexpr, BLOCK_SIZE: tl.constexpr, QUANTIZED: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    DOT_PRECISION: tl.constexpr, DOT_IN_FP32: tl.constexpr,
):
    """One program per (decode sequence, KV head): its GROUP query heads share every K/V load."""
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    token = tl.load(query_start_loc_ptr + seq)
    seq_len = tl.load(seq_lens_ptr + seq)
    table_row_ptr = block_tables_ptr + seq.to(tl.int64) * stride_table

    group_rows = tl.arange(0, BLOCK_G)
    heads = kv_head * GROUP + group_rows
    dims = tl.arange(0, BLOCK_D)
    dims_valid = dims < head_dim
    rows_mask = (group_rows < GROUP)[:, None] & dims_valid[None, :]
    query = tl.load(query_ptr + token * stride_qt + heads[:, None] * stride_qh + dims[None, :] * stride_qd,
                    mask=rows_mask, other=0.0)

    row_max = tl.full([BLOCK_G], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    for start in range(0, seq_len, BLOCK_N):
        positions = start + tl.arange(0, BLOCK_N)
        keys, values = _load_kv_tile(
            k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr, table_row_ptr, positions, seq_len, kv_head,
            kv_heads, dims, dims_valid, stride_cb, stride_cs, stride_ch, stride_cd, BLOCK_SIZE, QUANTIZED,
        )
        visible = (positions < seq_len)[None, :]
        row_max, row_sum, acc = _online_softmax_step(
            query, keys, values, visible, row_max, row_sum, acc, qk_scale, DOT_PRECISION, DOT_IN_FP32,
        )
    out = _normalize(acc, row_sum)
    tl.store(out_ptr + token * stride_ot + heads[:, None] * stride_oh + dims[None, :] * stride_od,
             out.to(out_ptr.dtype.element_ty), mask=rows_mask)


@_jit
def _prefill_kernel(
    query_ptr, k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr, out_ptr,
    block_tables_ptr, seq_lens_ptr, query_start_loc_ptr, qk_scale, first_seq,
    stride_qt, stride_qh, stride_qd,
    stride_ot, stride_oh, stride_od,
    stride_cb, stride_cs, stride_ch, stride_cd,
    stride_table, head_dim, kv_heads,
    GROUP: tl.constexpr, BLOCK_SIZE: tl.constexpr, QUANTIZED: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    DOT_PRECISION: tl.constexpr, DOT_IN_FP32: tl.constexpr,
):
    """One program per (prefill sequence, BLOCK_M new tokens, query head), causal over the context."""
    seq = first_seq + tl.program_id(0)
    first_row = tl.program_id(1) * BLOCK_M
    head = tl.program_id(2)
    token_start = tl.load(query_start_loc_ptr + seq)
    query_len = tl.load(query_start_loc_ptr + seq + 1) - token_start
    if first_row >= query_len:  # the grid is sized for the longest prefill
        return
    seq_len = tl.load(seq_lens_ptr + seq)
    prefix_len = seq_len - query_len
    kv_head = head // GROUP
    table_row_ptr = block_tables_ptr + seq.to(tl.int64) * stride_table

    rows = first_row + tl.arange(0, BLOCK_M)
    row_positions = prefix_len + rows
    dims = tl.arange(0, BLOCK_D)
    dims_valid = dims < head_dim
    rows_mask = (rows < query_len)[:, None] & dims_valid[None, :]
    tokens = token_start + rows
    query = tl.load(query_ptr + tokens[:, None] * stride_qt + head * stride_qh + dims[None, :] * stride_qd,
                    mask=rows_mask, other=0.0)

    row_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    # Keys after this tile's last row are invisible to all of its rows.
    context_end = tl.minimum(seq_len, prefix_len + first_row + BLOCK_M)
    for start in range(0, context_end, BLOCK_N):
        positions = start + tl.arange(0, BLOCK_N)
        keys, values = _load_kv_tile(
            k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr, table_row_ptr, positions, seq_len, kv_head,
            kv_heads, dims, dims_valid, stride_cb, stride_cs, stride_ch, stride_cd, BLOCK_SIZE, QUANTIZED,
        )
        visible = (positions[None, :] <= row_positions[:, None]) & (positions < seq_len)[None, :]
        row_max, row_sum, acc = _online_softmax_step(
            query, keys, values, visible, row_max, row_sum, acc, qk_scale, DOT_PRECISION, DOT_IN_FP32,
        )
    out = _normalize(acc, row_sum)
    tl.store(out_ptr + tokens[:, None] * stride_ot + head * stride_oh + dims[None, :] * stride_od,
             out.to(out_ptr.dtype.element_ty), mask=rows_mask)


# ---------------------------------------------------------------------------------
# Launchers


def write_kv_cache(
    key: torch.Tensor,  # [T, kv_heads, head_dim]
    value: torch.Tensor,
    k_cache,  # [num_blocks, block_size, kv_heads, head_dim]: a tensor or a QuantizedCache
    v_cache,
    slot_mapping: torch.Tensor,  # [T] int64; -1 = padding token, not stored
) -> None:
    """Store the new tokens' keys and values at their slots."""
    _check_cache_layout(k_cache, v_cache)
    num_tokens = slot_mapping.shape[0]
    if num_tokens == 0:
        return
    _, block_size, kv_heads, head_dim = k_cache.shape
    k_values, v_values, k_scales, v_scales = _cache_parts(k_cache, v_cache)
    if k_cache.dtype is torch.float8_e4m3fn:  # the kernel writes the bytes (_e4m3_bytes)
        k_values, v_values = k_values.view(torch.uint8), v_values.view(torch.uint8)
    largest = quantized_kv.LARGEST.get(k_cache.dtype, 0.0)
    _write_kv_kernel[(num_tokens,)](
        key, value, k_values, v_values, k_scales, v_scales, slot_mapping,
        *key.stride(), *value.stride(), *k_cache.stride(),
        kv_heads, head_dim,
        BLOCK_SIZE=block_size,
        BLOCK_H=triton.next_power_of_2(kv_heads),
        BLOCK_D=triton.next_power_of_2(head_dim),
        QUANTIZED=quantized_kv.is_quantized(k_cache), LARGEST=largest,
        ROUND_TO_INT=k_cache.dtype is torch.int8,
    )


def paged_attention(
    query: torch.Tensor,  # [T, heads, head_dim]
    k_cache,
    v_cache,
    meta: AttentionMetadata,
    scale: float,
) -> torch.Tensor:
    """Causal attention of every new token over its sequence's cached context -> [T, heads, head_dim].

    Same contract as `attention_torch.paged_attention`: the new tokens' K/V are already
    in the cache, decodes come first, heads is a multiple of kv_heads.
    """
    _check_cache_layout(k_cache, v_cache)
    heads, head_dim = query.shape[1], query.shape[2]
    kv_heads, block_size = k_cache.shape[2], k_cache.shape[1]
    if heads % kv_heads:
        raise ValueError(f"{heads} query heads are not a multiple of {kv_heads} KV heads")
    out = torch.empty_like(query)
    args = (query, *_cache_parts(k_cache, v_cache), out, meta.block_tables, meta.seq_lens,
            meta.query_start_loc, scale * _LOG2_E)
    strides = (*query.stride(), *out.stride(), *k_cache.stride(), meta.block_tables.stride(0), head_dim, kv_heads)
    group = heads // kv_heads
    quantized = quantized_kv.is_quantized(k_cache)
    num_prefills = meta.num_seqs - meta.num_decodes
    if meta.num_decodes:
        config = decode_config(group, block_size, head_dim, query.dtype)
        _decode_kernel[(meta.num_decodes, kv_heads)](*args, *strides, QUANTIZED=quantized, **config)
    if num_prefills:
        config = prefill_config(group, block_size, head_dim, query.dtype)
        grid = (num_prefills, triton.cdiv(meta.max_query_len, config["BLOCK_M"]), heads)
        _prefill_kernel[grid](*args, meta.num_decodes, *strides, QUANTIZED=quantized, **config)
    return out


def _cache_parts(k_cache, v_cache) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(K values, V values, K scales, V scales); a cache without scales passes its values
    in their place, never read (QUANTIZED is off)."""
    if quantized_kv.is_quantized(k_cache):
        return k_cache.values, v_cache.values, k_cache.scales, v_cache.scales
    return k_cache, v_cache, k_cache, v_cache


@functools.lru_cache(maxsize=64)
def decode_config(group: int, block_size: int, head_dim: int, dtype: torch.dtype) -> dict:
    """The decode kernel's compile-time parameters (untuned: no GPU was at hand)."""
    block_d = _block_d(head_dim)
    return dict(
        GROUP=group, BLOCK_SIZE=block_size,
        BLOCK_G=max(_MIN_DOT, triton.next_power_of_2(group)),
        BLOCK_N=64 if block_d <= 128 else 32,
        BLOCK_D=block_d, **_dot_options(dtype),
    )


@functools.lru_cache(maxsize=64)
def prefill_config(group: int, block_size: int, head_dim: int, dtype: torch.dtype) -> dict:
    """The prefill kernel's compile-time parameters (untuned: no GPU was at hand)."""
    block_d = _block_d(head_dim)
    return dict(
        GROUP=group, BLOCK_SIZE=block_size,
        BLOCK_M=64 if block_d <= 128 else 32,
        BLOCK_N=64 if block_d <= 64 else 32,
        BLOCK_D=block_d, **_dot_options(dtype),
    )


def _block_d(head_dim: int) -> int:
    return max(_MIN_DOT, triton.next_power_of_2(head_dim))


def _dot_options(dtype: torch.dtype) -> dict:
    """fp32 dots stay exact ("ieee", not tf32); fp16/bf16 use the backend's default.

    bf16 dots are upcast under the interpreter, which would otherwise multiply their
    raw bits as integers (Triton 3.9).
    """
    return {
        "DOT_PRECISION": "ieee" if dtype == torch.float32 else None,
        "DOT_IN_FP32": _INTERPRETED and dtype == torch.bfloat16,
    }


def _check_cache_layout(k_cache, v_cache) -> None:
    # The kernels address both caches with K's strides, and the scales as contiguous rows.
    if k_cache.shape != v_cache.shape or k_cache.stride() != v_cache.stride() or k_cache.dtype != v_cache.dtype:
        raise ValueError("k_cache and v_cache must have the same shape, strides and dtype")
    if quantized_kv.is_quantized(k_cache) and not (k_cache.scales.is_contiguous() and v_cache.scales.is_contiguous()):
        raise ValueError("a quantized cache's scales must be contiguous")

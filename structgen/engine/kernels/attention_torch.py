"""Paged attention in plain torch: the CPU backend and the oracle for the Triton kernels.

Layout (shared with `attention_triton`):
- KV cache per layer: `k_cache`, `v_cache` of shape [num_blocks, block_size, kv_heads, head_dim]
  (int8 and fp8 caches: `quantized_kv.QuantizedCache`, read back in float32).
- A step is one flat ("varlen") batch of T new tokens from B sequences, decodes first:
  sequence b owns new tokens query_start_loc[b] : query_start_loc[b+1] and, after this
  step, seq_lens[b] tokens of context (cached prefix + new tokens). Its new token i sits
  at position seq_lens[b] - query_len[b] + i and attends to context positions <= that.
- slot_mapping[t] = block * block_size + offset is where new token t's K/V is written.

On CPU, a float32 step runs in C (attention_rows.h through `cpu_kernels`): every new
token, a decode or a prompt's, over exactly its own positions, read in place. The torch
path below gathers and pads them, a dozen ops per layer that cost more than the
arithmetic of a short context; it serves the other dtypes and devices.

This module owns the math only; it never allocates cache blocks or reads requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from structgen.engine.kernels import quantized_kv
from structgen.engine.kernels.compiled import cpu_kernels  # None where not built: torch's path runs

# A backend is the whole set of a layer's kernels: the element-wise ops travel with it.
from structgen.engine.kernels.elementwise_torch import (  # noqa: F401
    add_rms_norm,
    rms_norm,
    rope_tables,
    rotate,
    silu_mul,
)

# Prefill queries are computed in tiles of this many positions, aligned to multiples of it
# from position 0, each padded to the full tile and attending to exactly the keys before
# its end. A position's attention is then the same operations on the same values whether
# its context was computed in this step, in an earlier chunk or came from the prefix
# cache: the matmuls' results for a row depend on the number of rows and keys they are
# given, and a last-bit difference here becomes a different bfloat16 rounding in the
# packed quantized layers downstream.
PREFILL_TILE = 64


@dataclass
class AttentionMetadata:
    """Everything attention needs about one step's flat batch (see module docstring)."""

    query_start_loc: torch.Tensor  # [B+1] int32, on the model's device
    seq_lens: torch.Tensor  # [B] int32, context length after this step
    block_tables: torch.Tensor  # [B, max_blocks] int32; unused entries are 0
    slot_mapping: torch.Tensor  # [T] int64
    num_decodes: int  # sequences 0..num_decodes-1 have exactly one new token
    max_query_len: int
    max_seq_len: int
    query_lens_cpu: list[int]  # host copies, for loops that must not sync the device
    seq_lens_cpu: list[int]
    # Per-step values a backend derives once and reuses in every layer.
    scratch: dict = field(default_factory=dict, repr=False)

    @property
    def num_seqs(self) -> int:
        return len(self.seq_lens_cpu)

    @classmethod
    def one_prefill(cls, tokens: int, block_size: int, device) -> "AttentionMetadata":
        """One sequence's prefill of its first `tokens` tokens into blocks 0, 1, ... of a
        cache of its own (every position's logits outside the engine's scheduler)."""
        blocks = -(-tokens // block_size)
        return cls(query_start_loc=torch.tensor([0, tokens], dtype=torch.int32, device=device),
                   seq_lens=torch.tensor([tokens], dtype=torch.int32, device=device),
                   block_tables=torch.arange(blocks, dtype=torch.int32, device=device)[None],
                   slot_mapping=torch.arange(tokens, dtype=torch.int64, device=device),
                   num_decodes=0, max_query_len=tokens, max_seq_len=tokens,
                   query_lens_cpu=[tokens], seq_lens_cpu=[tokens])


def write_kv_cache(
    key: torch.Tensor,  # [T, kv_heads, head_dim]
    value: torch.Tensor,
    k_cache: torch.Tensor,  # [num_blocks, block_size, kv_heads, head_dim]
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,  # [T] int64
) -> None:
    """Store the new tokens' keys and values at their slots."""
    if quantized_kv.is_quantized(k_cache):
        quantized_kv.write_rows(key, k_cache, slot_mapping)
        quantized_kv.write_rows(value, v_cache, slot_mapping)
        return
    if cache_rows_in_c(key, k_cache, slot_mapping) and cache_rows_in_c(value, v_cache, slot_mapping):
        width = k_cache.shape[2] * k_cache.shape[3]
        for rows, cache in ((key, k_cache), (value, v_cache)):
            cpu_kernels.cache_rows(rows.data_ptr(), rows.stride(0), cache.data_ptr(), slot_mapping.data_ptr(),
                                   rows.shape[0], width, cache.dtype is torch.float16)
        return
    kv_heads, head_dim = k_cache.shape[2], k_cache.shape[3]
    k_cache.view(-1, kv_heads, head_dim).index_copy_(0, slot_mapping, _as(key, k_cache.dtype))
    v_cache.view(-1, kv_heads, head_dim).index_copy_(0, slot_mapping, _as(value, v_cache.dtype))


def paged_attention(
    query: torch.Tensor,  # [T, heads, head_dim]
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    meta: AttentionMetadata,
    scale: float,
) -> torch.Tensor:
    """Causal attention of every new token over its sequence's cached context -> [T, heads, head_dim].

    The new tokens' K/V must already be in the cache (`write_kv_cache`). Grouped-query
    attention: heads must be a multiple of kv_heads.
    """
    if rows_in_c(query, k_cache, v_cache, meta):
        return attention_rows_c(query.contiguous(), k_cache, v_cache, meta, scale)
    out = torch.empty_like(query)
    nd = meta.num_decodes
    if nd:
        out[:nd] = _decode_attention(query[:nd], k_cache, v_cache, meta, scale)
    lo = nd
    for b in range(nd, meta.num_seqs):
        hi = lo + meta.query_lens_cpu[b]
        out[lo:hi] = _prefill_attention(query[lo:hi], k_cache, v_cache, meta, b, scale)
        lo = hi
    return out


C_CACHE_DTYPES = (torch.float32, torch.float16)  # what the C kernels read and write


def rows_in_c(query, k_cache, v_cache, meta: AttentionMetadata) -> bool:
    """Whether the C kernel takes this step: a float32 query on CPU, float32 or float16
    caches and tables as the engine allocates them, a head size of a multiple of 8."""
    tables, lengths = meta.block_tables, meta.seq_lens
    return (cpu_kernels is not None and query.is_cpu and query.dtype is torch.float32
            and k_cache.dtype in C_CACHE_DTYPES and v_cache.dtype is k_cache.dtype and k_cache.is_cpu
            and k_cache.is_contiguous() and v_cache.is_contiguous() and query.shape[-1] % 8 == 0
            and tables.dtype is torch.int32 and lengths.dtype is torch.int32 and tables.is_cpu
            and tables.is_contiguous() and lengths.is_contiguous())


def token_rows(meta: AttentionMetadata) -> tuple[torch.Tensor, torch.Tensor]:
    """Each new token's block table [T, max_blocks] and the number of positions it attends
    to [T] (its position + 1), int32: the C kernel's rows. Built once per step."""
    if "rows" not in meta.scratch:
        if meta.max_query_len == 1:  # one token per sequence: the sequences' own
            meta.scratch["rows"] = (meta.block_tables, meta.seq_lens)
        else:
            query_lens = torch.tensor(meta.query_lens_cpu)
            seq_of_token = torch.repeat_interleave(torch.arange(len(query_lens)), query_lens)
            first_length = torch.tensor(meta.seq_lens_cpu) - query_lens + 1  # of each sequence's first new token
            index_in_seq = torch.arange(len(seq_of_token)) - (torch.cumsum(query_lens, 0) - query_lens)[seq_of_token]
            lengths = (first_length[seq_of_token] + index_in_seq).to(torch.int32)
            tables = meta.block_tables.index_select(0, seq_of_token.to(meta.block_tables.device))
            meta.scratch["rows"] = (tables, lengths.to(meta.seq_lens.device))
    return meta.scratch["rows"]


def attention_rows_c(query, k_cache, v_cache, meta: AttentionMetadata, scale: float,
                     portable: bool = False) -> torch.Tensor:
    """The step's new tokens (query [T, heads, dim], contiguous) in C; `portable`: the
    plain C path even where AVX2 is there (the tests compare the two)."""
    tokens, heads, dim = query.shape
    block_size, kv_heads = k_cache.shape[1], k_cache.shape[2]
    tables, lengths = token_rows(meta)
    out = torch.empty_like(query)
    cpu_kernels.attention_rows(query.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), tables.data_ptr(),
                               tables.shape[1], lengths.data_ptr(), out.data_ptr(), tokens, heads, kv_heads, dim,
                               block_size, scale, k_cache.dtype is torch.float16, portable)
    return out


def cache_rows_in_c(rows: torch.Tensor, cache: torch.Tensor, slot_mapping: torch.Tensor) -> bool:
    """Whether the C store takes these: float32 rows on CPU, each token's heads contiguous
    (any token stride), the cache float32 or float16 and contiguous, int64 slots."""
    return (cpu_kernels is not None and rows.dtype is torch.float32 and cache.dtype in C_CACHE_DTYPES
            and rows.is_cpu and cache.is_cpu and cache.is_contiguous() and rows.dim() == 3
            and rows.shape[1:] == cache.shape[2:] and rows.stride(2) == 1 and rows.stride(1) == rows.shape[2]
            and slot_mapping.dtype is torch.int64 and slot_mapping.is_contiguous()
            and slot_mapping.shape[0] == rows.shape[0])


def _as(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x in dtype; x itself when it already is (a decode step's .to calls add up)."""
    return x if x.dtype is dtype else x.to(dtype)


def _gather_blocks(cache: torch.Tensor, block_ids: torch.Tensor) -> torch.Tensor:
    """Whole cache blocks [..., nb] -> [..., nb * block_size, kv_heads, head_dim]. Copying
    whole blocks (not token rows) keeps the copy a few large memcpys."""
    if quantized_kv.is_quantized(cache):
        return quantized_kv.dequantized_blocks(cache, block_ids)
    bs, kvh, dim = cache.shape[1:]
    flat = cache.view(cache.shape[0], -1).index_select(0, block_ids.reshape(-1))
    return flat.view(*block_ids.shape[:-1], block_ids.shape[-1] * bs, kvh, dim)


def _decode_attention(query, k_cache, v_cache, meta: AttentionMetadata, scale: float):
    """One new token per sequence: all decodes in one padded SDPA call.

    Grouped-query attention without copying K/V per query head: the query heads that
    share a KV head become rows of one [group, head_dim] query against that head.
    Positions past a sequence's length are masked; they read zeros or the sequence's own
    earlier values (the block manager hands out zeroed blocks, tables pad with the
    zero null block), so nothing non-finite can leak in through the mask."""
    nd = meta.num_decodes
    block_size = k_cache.shape[1]
    if "decode" not in meta.scratch:
        lengths = meta.seq_lens_cpu[:nd]
        num_blocks = -(-max(lengths) // block_size)
        blocks = meta.block_tables[:nd, :num_blocks].long()
        mask = None  # one sequence: its context is cut to length below instead
        if nd > 1:  # an additive float mask, built once per step (a bool one is converted per call)
            positions = torch.arange(num_blocks * block_size, device=query.device)
            valid = positions[None, :] < meta.seq_lens[:nd, None]
            mask = torch.zeros(valid.shape, dtype=query.dtype, device=query.device)
            mask.masked_fill_(~valid, float("-inf"))
            mask = mask[:, None, None, :]
        meta.scratch["decode"] = (blocks, mask)
    blocks, mask = meta.scratch["decode"]
    kv_heads = k_cache.shape[2]
    keys = _gather_blocks(k_cache, blocks).transpose(1, 2)  # [nd, kvh, L, d]
    values = _gather_blocks(v_cache, blocks).transpose(1, 2)
    if mask is None:
        keys, values = keys[:, :, : meta.seq_lens_cpu[0]], values[:, :, : meta.seq_lens_cpu[0]]
    q = query.view(nd, kv_heads, -1, query.shape[-1])  # [nd, kvh, group, d]
    out = F.scaled_dot_product_attention(q, _as(keys, q.dtype), _as(values, q.dtype), attn_mask=mask, scale=scale)
    return out.reshape(query.shape)


def _prefill_attention(query, k_cache, v_cache, meta: AttentionMetadata, b: int, scale: float):
    """New tokens of sequence b over its cached prefix plus themselves, one query tile at a
    time (see `PREFILL_TILE`)."""
    q_len, seq_len = query.shape[0], meta.seq_lens_cpu[b]
    first_tile, end_tile = (seq_len - q_len) // PREFILL_TILE, -(-seq_len // PREFILL_TILE)
    end = end_tile * PREFILL_TILE
    blocks = meta.block_tables[b, : -(-seq_len // k_cache.shape[1])].long()
    keys = _keys_up_to(_as(_gather_blocks(k_cache, blocks), query.dtype), seq_len, end)  # [kvh, end, d]
    values = _keys_up_to(_as(_gather_blocks(v_cache, blocks), query.dtype), seq_len, end)
    start = first_tile * PREFILL_TILE
    padded = query.new_zeros(end - start, *query.shape[1:])
    padded[seq_len - q_len - start : seq_len - start] = query
    group = query.shape[1] // keys.shape[0]
    if group > 1:  # grouped-query attention: each KV head once per query head, for all tiles
        keys, values = keys.repeat_interleave(group, dim=0), values.repeat_interleave(group, dim=0)
    mask = _tile_mask(query.dtype, query.device)
    out = []
    for tile in range(first_tile, end_tile):
        n = (tile + 1) * PREFILL_TILE
        rows = padded[tile * PREFILL_TILE - start : n - start].transpose(0, 1)  # [heads, tile, d]
        scores = torch.matmul(rows * scale, keys[:, :n].transpose(1, 2))  # [heads, tile, n]
        scores[:, :, n - PREFILL_TILE :] += mask  # earlier keys: all visible
        out.append(torch.matmul(scores.softmax(dim=-1), values[:, :n]))
    out = torch.cat(out, dim=1).transpose(0, 1)
    return out[seq_len - q_len - start : seq_len - start]


def _keys_up_to(gathered: torch.Tensor, seq_len: int, end: int) -> torch.Tensor:
    """A sequence's first `seq_len` cached keys (or values) [L, kvh, d] as [kvh, end, d],
    zeros past `seq_len`: what a tile ending at `end` attends to, masked beyond its rows."""
    keys = gathered[:seq_len].transpose(0, 1)
    return F.pad(keys, (0, 0, 0, end - seq_len)) if end > seq_len else keys


def _tile_mask(dtype: torch.dtype, device) -> torch.Tensor:
    """The additive causal mask of a tile's rows over its own keys [tile, tile]."""
    mask = torch.full((PREFILL_TILE, PREFILL_TILE), float("-inf"), dtype=dtype, device=device)
    return mask.triu_(1)

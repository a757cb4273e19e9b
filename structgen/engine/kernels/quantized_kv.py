"""A KV cache at one byte per element (`kv_cache_dtype="int8"` or `"fp8"`), in torch.

Owns the layout and its arithmetic; the Triton kernels (`attention_triton`) follow the
same layout and the same rounding. Per layer, K and V are each a `QuantizedCache`:

- `values` [num_blocks, block_size, kv_heads, head_dim], int8 or float8_e4m3fn;
- `scales` [num_blocks, block_size, kv_heads], float32, beside the blocks: one per
  token and KV head, that row's largest magnitude over the format's largest value.

An element reads back as `values * scales`. A scale per row, set when the row is
written, needs no calibration data and follows each token's and head's own range. int8
rounds half away from zero and fp8 to nearest even. A row of zeros has scale 0 and
stores zeros.

Must not allocate caches (`engine/kv_cache.py` does) nor know about requests.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# The largest magnitude each format stores: its scale maps a row's largest onto it.
LARGEST = {torch.int8: 127.0, torch.float8_e4m3fn: 448.0}
FORMATS = tuple(LARGEST)


@dataclass(frozen=True)
class QuantizedCache:
    """One layer's keys (or values): one byte per element and a float32 scale per row."""

    values: torch.Tensor  # [num_blocks, block_size, kv_heads, head_dim]
    scales: torch.Tensor  # [num_blocks, block_size, kv_heads]

    @classmethod
    def zeros(cls, shape: tuple[int, ...], dtype: torch.dtype, device) -> "QuantizedCache":
        return cls(torch.zeros(shape, dtype=dtype, device=device),
                   torch.zeros(shape[:-1], dtype=torch.float32, device=device))

    @property
    def shape(self) -> torch.Size:
        return self.values.shape

    @property
    def dtype(self) -> torch.dtype:
        return self.values.dtype

    def stride(self) -> tuple[int, ...]:
        return self.values.stride()

    def clear_blocks(self, index: torch.Tensor) -> None:
        """Zero the blocks at `index` (int64): values and scales."""
        self.values.view(torch.uint8).index_fill_(0, index, 0)
        self.scales.index_fill_(0, index, 0)


def is_quantized(cache) -> bool:
    return isinstance(cache, QuantizedCache)


def quantize_rows(rows: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows [..., head_dim] -> (values in `dtype`, float32 scales [...])."""
    rows = rows.float()
    largest = LARGEST[dtype]
    scales = rows.abs().amax(dim=-1) / largest
    safe = torch.where(scales > 0, scales, torch.ones_like(scales))
    scaled = (rows / safe[..., None]).clamp_(-largest, largest)
    if dtype is torch.int8:
        values = (scaled.abs() + 0.5).floor_().copysign_(scaled).to(torch.int8)
    else:
        values = scaled.to(dtype)
    return values, scales


def write_rows(rows: torch.Tensor, cache: QuantizedCache, slot_mapping: torch.Tensor) -> None:
    """Store new tokens' rows [T, kv_heads, head_dim] at their slots."""
    values, scales = quantize_rows(rows, cache.dtype)
    _, _, kv_heads, head_dim = cache.shape
    slots = cache.values.view(torch.uint8).view(-1, kv_heads, head_dim)
    slots.index_copy_(0, slot_mapping, values.view(torch.uint8))
    cache.scales.view(-1, kv_heads).index_copy_(0, slot_mapping, scales)


def dequantized_blocks(cache: QuantizedCache, block_ids: torch.Tensor) -> torch.Tensor:
    """Whole blocks [..., nb] -> float32 [..., nb * block_size, kv_heads, head_dim]."""
    num_blocks, block_size, kv_heads, head_dim = cache.shape
    flat = block_ids.reshape(-1)
    values = cache.values.view(torch.uint8).view(num_blocks, -1).index_select(0, flat).view(cache.dtype)
    scales = cache.scales.view(num_blocks, -1).index_select(0, flat)
    rows = values.view(-1, kv_heads, head_dim).float() * scales.view(-1, kv_heads, 1)
    return rows.view(*block_ids.shape[:-1], block_ids.shape[-1] * block_size, kv_heads, head_dim)

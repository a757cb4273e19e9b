"""The KV cache tensors and how many blocks fit a memory budget.

Per layer, K and V are preallocated as [num_blocks, block_size, kv_heads, head_dim]
(int8 and fp8 caches as `QuantizedCache`, with a scale per row beside the blocks).
The pool is sized by a byte budget on CPU or by a fraction of GPU memory, and written once
at start so that its memory is taken up front. Owns the tensors only; `block_manager.py`
decides which blocks belong to whom.
"""

from __future__ import annotations

import torch

from structgen.engine.kernels import quantized_kv
from structgen.engine.kernels.quantized_kv import QuantizedCache
from structgen.engine.models.config import ModelConfig


# The one-byte formats (kernels/quantized_kv.py), by the names the options take.
ONE_BYTE_DTYPES = {"int8": torch.int8, "fp8": torch.float8_e4m3fn, "float8_e4m3fn": torch.float8_e4m3fn}


def block_bytes(config: ModelConfig, block_size: int, dtype: torch.dtype) -> int:
    """Bytes one block takes across all layers, K and V (a one-byte format's scales too)."""
    per_token = config.kv_bytes_per_token(torch.empty((), dtype=dtype).element_size())
    if dtype in quantized_kv.FORMATS:
        per_token += 2 * config.num_layers * config.num_kv_heads * 4  # a float32 scale per row
    return block_size * per_token


def blocks_for_budget(config: ModelConfig, block_size: int, dtype: torch.dtype, budget_bytes: int) -> int:
    return int(budget_bytes // block_bytes(config, block_size, dtype))


def gpu_budget_bytes(device: torch.device, fraction: float) -> int:
    """What is left for the KV cache if the process may use `fraction` of the GPU's memory
    (weights and everything already allocated are counted as used)."""
    free, total = torch.cuda.mem_get_info(device)
    used_by_others = total - free
    return max(0, int(total * fraction) - used_by_others - _activation_reserve(device))


def _activation_reserve(device: torch.device) -> int:
    return 1 << 30  # room for activations, logits and CUDA graphs


def allocate_kv_cache(
    config: ModelConfig, num_blocks: int, block_size: int, dtype: torch.dtype, device
) -> list[tuple[torch.Tensor | QuantizedCache, torch.Tensor | QuantizedCache]]:
    """The K and V caches of each layer, zeroed. Writing the whole pool at start commits
    its memory then (on CPU, 0.1-0.7 s per GiB on the 2-core test machine): a pool left
    unwritten takes host memory only as its blocks are first used, so a server's resident
    memory would creep up for as long as prefix caching cycles through the pool (with a
    float16 cache it rose by 0.4-0.6 GB through benchmarks/serve.py's levels), and each
    first touch would fault inside a step (1.1 s per GiB in all). The engine still clears
    each block it hands out (`ModelRunner.zero_blocks`), for the paths that read whole
    blocks."""
    shape = (num_blocks, block_size, config.num_kv_heads, config.head_dim)
    if dtype in quantized_kv.FORMATS:  # one byte per element, a scale per row (kernels/quantized_kv.py)
        return [(QuantizedCache.zeros(shape, dtype, device), QuantizedCache.zeros(shape, dtype, device))
                for _ in range(config.num_layers)]
    return [(torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device))
            for _ in range(config.num_layers)]


def clear_blocks(cache, index: torch.Tensor) -> None:
    """Zero one layer's K (or V) blocks at `index` (int64), whatever its format."""
    if quantized_kv.is_quantized(cache):
        cache.clear_blocks(index)
    else:
        cache.index_fill_(0, index, 0)

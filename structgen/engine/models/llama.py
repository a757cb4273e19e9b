"""The Llama-family forward pass over a flat batch of tokens with a paged KV cache.

One module covers Llama 2/3, SmolLM/SmolLM2 (tied embeddings), Mistral, Qwen2 (q/k/v
bias) and Qwen3 (per-head q/k RMSNorm); `ModelConfig` says which variant. The forward
takes the step's new tokens of every sequence concatenated (no padding) and a kernel
backend (`kernels.attention_torch` or `kernels.attention_triton`) that owns the cache
layout and runs attention and the element-wise ops (norms, RoPE, activation). Q/K/V and
gate/up projections are stored fused, one matmul each; a linear layer is `nn.Linear` or
one of `quantization`'s, called through its `forward`. Weights are loaded by `loader.py`;
this module owns only parameters and math.
"""

from __future__ import annotations

import math
from types import ModuleType

import torch
import torch.nn.functional as F
from torch import nn

from structgen.engine.kernels.attention_torch import AttentionMetadata
from structgen.engine.models.config import ModelConfig


def rope_inverse_frequencies(config: ModelConfig) -> torch.Tensor:
    """Per-pair rotation frequencies, with linear or Llama-3 scaling applied."""
    dim = config.head_dim
    inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    scaling = config.rope_scaling
    kind = scaling.get("rope_type")
    if kind == "linear":
        inv_freq = inv_freq / scaling["factor"]
    elif kind == "llama3":
        factor = scaling["factor"]
        low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
        old_len = scaling["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv_freq
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * inv_freq / factor + smooth * inv_freq
        inv_freq = torch.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
        is_medium = (wavelen <= old_len / low) & (wavelen >= old_len / high)
        inv_freq = torch.where(is_medium, smoothed, inv_freq)
    return inv_freq.float()


class Rotary(nn.Module):
    """Float32 cos/sin tables for every position up to max_positions (rotate-half
    layout: both halves of a row are equal); the backend's `rope_tables` reads them."""

    def __init__(self, config: ModelConfig, max_positions: int):
        super().__init__()
        inv_freq = rope_inverse_frequencies(config)
        angles = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv_freq)
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        c = config
        self.num_heads, self.num_kv_heads, self.head_dim = c.num_heads, c.num_kv_heads, c.head_dim
        self.q_size = c.num_heads * c.head_dim
        self.kv_size = c.num_kv_heads * c.head_dim
        self.qkv = nn.Linear(c.hidden_size, self.q_size + 2 * self.kv_size, bias=c.qkv_bias)
        self.o = nn.Linear(self.q_size, c.hidden_size, bias=c.o_bias)
        self.q_norm = nn.Parameter(torch.ones(c.head_dim)) if c.qk_norm else None
        self.k_norm = nn.Parameter(torch.ones(c.head_dim)) if c.qk_norm else None
        self.eps = c.rms_norm_eps
        self.scale = c.head_dim**-0.5

    def forward(self, x, rope, kv_cache, meta, backend: ModuleType):
        tokens = x.shape[0]
        qkv = self.qkv.forward(x)
        heads, kv_heads, dim = self.num_heads, self.num_kv_heads, self.head_dim
        if self.q_norm is None:
            # q and k sit side by side in qkv: rotate them as one [T, heads + kv_heads, dim] view.
            qk = backend.rotate(qkv[:, : self.q_size + self.kv_size].view(tokens, heads + kv_heads, dim), rope)
            q, k = qk[:, :heads], qk[:, heads:]
        else:
            q = backend.rms_norm(qkv[:, : self.q_size].view(tokens, heads, dim), self.q_norm, self.eps)
            k = backend.rms_norm(qkv[:, self.q_size : self.q_size + self.kv_size].view(tokens, kv_heads, dim),
                                 self.k_norm, self.eps)
            q, k = backend.rotate(q, rope), backend.rotate(k, rope)
        v = qkv[:, self.q_size + self.kv_size :].view(tokens, kv_heads, dim)
        k_cache, v_cache = kv_cache
        backend.write_kv_cache(k, v, k_cache, v_cache, meta.slot_mapping)
        out = backend.paged_attention(q, k_cache, v_cache, meta, self.scale)
        return self.o.forward(out.reshape(tokens, self.q_size))


class MLP(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.intermediate = config.intermediate_size
        self.gate_up = nn.Linear(config.hidden_size, 2 * self.intermediate, bias=config.mlp_bias)
        self.down = nn.Linear(self.intermediate, config.hidden_size, bias=config.mlp_bias)

    def forward(self, x, backend: ModuleType):
        return self.down.forward(backend.silu_mul(self.gate_up.forward(x)))


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.input_norm = nn.Parameter(torch.ones(config.hidden_size))
        self.attn = Attention(config)
        self.post_attn_norm = nn.Parameter(torch.ones(config.hidden_size))
        self.mlp = MLP(config)
        self.eps = config.rms_norm_eps

    def forward(self, x, residual, rope, kv_cache, meta, backend):
        """(this layer's output, the residual stream before it): the skip connections are
        added by the next norm (`add_rms_norm`), so that the add and the norm are one kernel
        on GPU. `x` is the previous layer's output, or the embeddings with residual None."""
        if residual is None:
            residual, h = x, backend.rms_norm(x, self.input_norm, self.eps)
        else:
            residual, h = backend.add_rms_norm(residual, x, self.input_norm, self.eps)
        # .forward directly: nn.Module.__call__'s hook handling costs more than the small
        # ops of a decode step.
        attended = self.attn.forward(h, rope, kv_cache, meta, backend)
        residual, h = backend.add_rms_norm(residual, attended, self.post_attn_norm, self.eps)
        return self.mlp.forward(h, backend), residual


class LlamaForCausalLM(nn.Module):
    """Embeddings, decoder layers, final norm and the LM head (tied or separate)."""

    def __init__(self, config: ModelConfig, max_positions: int):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_layers))
        self.norm = nn.Parameter(torch.ones(config.hidden_size))
        self.lm_head = None if config.tie_word_embeddings else nn.Linear(
            config.hidden_size, config.vocab_size, bias=False
        )
        self.rotary = Rotary(config, max_positions)

    def forward(
        self,
        input_ids: torch.Tensor,  # [T]
        positions: torch.Tensor,  # [T]
        kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
        meta: AttentionMetadata,
        backend: ModuleType,
    ) -> torch.Tensor:
        """Hidden states [T, hidden] after the final norm; K/V of the new tokens are cached."""
        x, residual = self.embed(input_ids), None
        rope = backend.rope_tables(self.rotary.cos, self.rotary.sin, positions, x.dtype)
        for layer, kv_cache in zip(self.layers, kv_caches):
            x, residual = layer.forward(x, residual, rope, kv_cache, meta, backend)
        if residual is None:  # no layers
            return backend.rms_norm(x, self.norm, self.config.rms_norm_eps)
        return backend.add_rms_norm(residual, x, self.norm, self.config.rms_norm_eps)[1]

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 logits [N, vocab] for the given hidden states."""
        if self.lm_head is None:  # tied
            return F.linear(hidden, self.embed.weight).float()
        return self.lm_head.forward(hidden).float()  # a float or a quantized layer

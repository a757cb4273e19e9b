"""The Llama-family forward pass over a flat batch of tokens with a paged KV cache.

One module covers Llama 2/3, SmolLM/SmolLM2 (tied embeddings), Mistral, Qwen2 (q/k/v
bias) and Qwen3 (per-head q/k RMSNorm); `ModelConfig` says which variant. The forward
takes the step's new tokens of every sequence concatenated (no padding) and an
attention backend (`kernels.attention_torch` or `kernels.attention_triton`) that owns
the cache layout. Q/K/V and gate/up projections are stored fused, one matmul each.
Weights are loaded by `loader.py`; this module owns only parameters and math.
"""

from __future__ import annotations

import math
from types import ModuleType

import torch
import torch.nn.functional as F
from torch import nn

from structgen.engine.kernels.attention_torch import AttentionMetadata
from structgen.engine.models.config import ModelConfig


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm computed in float32, as the reference implementations do."""
    if x.dtype == torch.float32 and weight.dtype == torch.float32:
        return F.rms_norm(x, weight.shape, weight, eps)  # one fused op
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.square().mean(-1, keepdim=True) + eps)
    return weight * x32.to(x.dtype)


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
    """cos/sin tables for every position up to max_positions (rotate-half layout)."""

    def __init__(self, config: ModelConfig, max_positions: int):
        super().__init__()
        inv_freq = rope_inverse_frequencies(config)
        angles = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv_freq)
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def tables(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and signed sin [T, 1, head_dim] for the step's positions (looked up once per
        step). The sin table's first half is negated so that rotating half of a vector
        is one `roll` (see apply_rotary)."""
        half = self.sin.shape[-1] // 2
        sin = self.sin[positions]
        sin = torch.cat([-sin[:, :half], sin[:, half:]], dim=-1)
        return self.cos[positions].unsqueeze(1).to(dtype), sin.unsqueeze(1).to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE: x*cos + [-x2, x1]*sin, written as x*cos + roll(x)*signed_sin."""
    return torch.addcmul(x * cos, x.roll(x.shape[-1] // 2, dims=-1), signed_sin)


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
        qkv = F.linear(x, self.qkv.weight, self.qkv.bias)
        heads, kv_heads, dim = self.num_heads, self.num_kv_heads, self.head_dim
        if self.q_norm is None:
            # q and k sit side by side in qkv: rotate them as one [T, heads + kv_heads, dim] view.
            qk = apply_rotary(qkv[:, : self.q_size + self.kv_size].view(tokens, heads + kv_heads, dim), *rope)
            q, k = qk[:, :heads], qk[:, heads:]
        else:
            q = rms_norm(qkv[:, : self.q_size].view(tokens, heads, dim), self.q_norm, self.eps)
            k = rms_norm(qkv[:, self.q_size : self.q_size + self.kv_size].view(tokens, kv_heads, dim),
                         self.k_norm, self.eps)
            q, k = apply_rotary(q, *rope), apply_rotary(k, *rope)
        v = qkv[:, self.q_size + self.kv_size :].view(tokens, kv_heads, dim)
        k_cache, v_cache = kv_cache
        backend.write_kv_cache(k, v, k_cache, v_cache, meta.slot_mapping)
        out = backend.paged_attention(q, k_cache, v_cache, meta, self.scale)
        return F.linear(out.reshape(tokens, self.q_size), self.o.weight, self.o.bias)


class MLP(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.intermediate = config.intermediate_size
        self.gate_up = nn.Linear(config.hidden_size, 2 * self.intermediate, bias=config.mlp_bias)
        self.down = nn.Linear(self.intermediate, config.hidden_size, bias=config.mlp_bias)

    def forward(self, x):
        gate, up = F.linear(x, self.gate_up.weight, self.gate_up.bias).split(self.intermediate, dim=-1)
        return F.linear(F.silu(gate) * up, self.down.weight, self.down.bias)


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.input_norm = nn.Parameter(torch.ones(config.hidden_size))
        self.attn = Attention(config)
        self.post_attn_norm = nn.Parameter(torch.ones(config.hidden_size))
        self.mlp = MLP(config)
        self.eps = config.rms_norm_eps

    def forward(self, x, rope, kv_cache, meta, backend):
        # .forward directly: nn.Module.__call__'s hook handling costs more than the small
        # ops of a decode step.
        x = x + self.attn.forward(rms_norm(x, self.input_norm, self.eps), rope, kv_cache, meta, backend)
        return x + self.mlp.forward(rms_norm(x, self.post_attn_norm, self.eps))


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
        x = self.embed(input_ids)
        rope = self.rotary.tables(positions, x.dtype)
        for layer, kv_cache in zip(self.layers, kv_caches):
            x = layer.forward(x, rope, kv_cache, meta, backend)
        return rms_norm(x, self.norm, self.config.rms_norm_eps)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 logits [N, vocab] for the given hidden states."""
        weight = self.embed.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(hidden, weight).float()

"""The shape of a Llama-family model, read from a Hugging Face config.

Owns the translation of the config dialects (transformers 4 `rope_theta`/`rope_scaling`,
transformers 5 `rope_parameters`, per-family defaults such as Qwen2's q/k/v bias) into
one flat `ModelConfig`. It never touches weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from structgen.errors import StructgenError

# model_type -> (q/k/v projections have a bias by default, per-head q/k RMSNorm)
SUPPORTED_TYPES = {
    "llama": (False, False),
    "mistral": (False, False),
    "qwen2": (True, False),
    "qwen3": (False, True),
}
SUPPORTED_ROPE = ("default", "linear", "llama3")


class UnsupportedModelError(StructgenError):
    """A model whose architecture or config options the engine does not implement."""


@dataclass(frozen=True)
class ModelConfig:
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    rope_scaling: dict = field(default_factory=dict)  # {"rope_type": ..., "factor": ...}
    sliding_window: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    bos_token_id: int | None = None

    @classmethod
    def from_hf(cls, hf: Any) -> ModelConfig:
        """From a transformers config object or its dict (config.json contents)."""
        d = hf if isinstance(hf, dict) else hf.to_dict()
        model_type = d.get("model_type", "")
        if model_type not in SUPPORTED_TYPES:
            archs = ", ".join(d.get("architectures") or []) or "?"
            raise UnsupportedModelError(
                f"unsupported model architecture {model_type!r} ({archs}); supported: "
                + ", ".join(sorted(SUPPORTED_TYPES))
            )
        default_bias, qk_norm = SUPPORTED_TYPES[model_type]
        heads = d["num_attention_heads"]
        attention_bias = d.get("attention_bias", default_bias)
        window = d.get("sliding_window") if d.get("use_sliding_window", True) else None
        return cls(
            model_type=model_type,
            vocab_size=d["vocab_size"],
            hidden_size=d["hidden_size"],
            intermediate_size=d["intermediate_size"],
            num_layers=d["num_hidden_layers"],
            num_heads=heads,
            num_kv_heads=d.get("num_key_value_heads") or heads,
            head_dim=d.get("head_dim") or d["hidden_size"] // heads,
            rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
            rope_theta=float(_rope(d).get("rope_theta", 10000.0)),
            max_position_embeddings=d.get("max_position_embeddings", 4096),
            tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
            qkv_bias=bool(attention_bias or default_bias),
            o_bias=bool(attention_bias) and model_type in ("llama", "qwen3"),
            mlp_bias=bool(d.get("mlp_bias", False)),
            qk_norm=qk_norm,
            rope_scaling=_rope_scaling(d),
            sliding_window=window,
            eos_token_ids=_as_tuple(d.get("eos_token_id")),
            bos_token_id=d.get("bos_token_id"),
        )

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """Bytes of K and V cache one token takes across all layers."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * dtype_bytes

    def num_parameters(self) -> int:
        h, i, layers = self.hidden_size, self.intermediate_size, self.num_layers
        q = self.num_heads * self.head_dim
        kv = self.num_kv_heads * self.head_dim
        per_layer = h * (q + 2 * kv) + q * h + 3 * h * i + 2 * h
        embed = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return layers * per_layer + embed + h


def _rope(d: dict) -> dict:
    """The rope parameters in either dialect, as one dict."""
    params = dict(d.get("rope_parameters") or {})
    scaling = d.get("rope_scaling") or {}
    params = {**scaling, **params}
    if "rope_theta" not in params and "rope_theta" in d:
        params["rope_theta"] = d["rope_theta"]
    return params


def _rope_scaling(d: dict) -> dict:
    params = _rope(d)
    kind = params.get("rope_type") or params.get("type") or "default"
    if kind not in SUPPORTED_ROPE:
        raise UnsupportedModelError(
            f"unsupported rope scaling {kind!r}; supported: {', '.join(SUPPORTED_ROPE)}"
        )
    if kind == "default":
        return {}
    keep = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
    return {"rope_type": kind, **{k: params[k] for k in keep if k in params}}


def _as_tuple(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (value,)
    return tuple(value)

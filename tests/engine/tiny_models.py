"""Tiny random-weight Llama-family checkpoints written as real Hugging Face folders.

Each is made with transformers' own model class (the reference the engine is checked
against) and saved with `save_pretrained`, so the engine loads it through the same code
path as a downloaded checkpoint. Weights are drawn with a large initializer range so
that greedy choices are far from ties.
"""

from __future__ import annotations

from pathlib import Path

import torch

BASE = dict(
    vocab_size=384, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
    rms_norm_eps=1e-5, initializer_range=0.3, bos_token_id=1, eos_token_id=2, pad_token_id=0,
)

FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(rope_theta=10000.0)),
    "llama3-rope": ("LlamaConfig", "LlamaForCausalLM", dict(rope_scaling=dict(
        rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
        original_max_position_embeddings=64), rope_theta=500000.0)),
    "smollm-tied": ("LlamaConfig", "LlamaForCausalLM", dict(tie_word_embeddings=True, head_dim=16,
                                                            num_attention_heads=6, num_key_value_heads=2,
                                                            hidden_size=96)),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(sliding_window=None)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(tie_word_embeddings=False)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(head_dim=32, tie_word_embeddings=False)),
}


def make_checkpoint(family: str, folder: Path, seed: int = 0):
    """Save a tiny random model of `family` to `folder`; returns the transformers model."""
    import transformers

    config_name, model_name, extra = FAMILIES[family]
    config = getattr(transformers, config_name)(**{**BASE, **extra})
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(config).eval()
    with torch.no_grad():  # norms away from 1 so that a missed norm weight shows
        for name, param in model.named_parameters():
            if "norm" in name:
                param.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                param.normal_(0.0, 0.3)
    model.save_pretrained(str(folder))
    return model


def hf_greedy(model, prompt: list[int], max_new_tokens: int) -> list[int]:
    """Greedy continuation by transformers `generate`, EOS ignored."""
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=max_new_tokens,
                             min_new_tokens=max_new_tokens, do_sample=False,
                             pad_token_id=0, eos_token_id=None)
    return out[0, len(prompt):].tolist()


# The SmolLM2 vocabulary (49,152 ids, so the real tokenizer fits) on a tiny random body:
# fast server tests that need real text but not a real model.
TINY_SMOLLM_SHAPE = dict(
    model_type="llama", vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=10000.0,
    max_position_embeddings=2048, tie_word_embeddings=True, eos_token_id=2, bos_token_id=1,
)


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
# A schema whose outputs have forced spans ('{"name": "', '", "age": ', ...) between short
# free parts: jump-forward tests on make_tokenized_checkpoint's model.
JUMP_SCHEMA = {"type": "object", "required": ["name", "age", "tags"], "properties": {
    "name": {"type": "string", "maxLength": 5}, "age": {"type": "integer", "maximum": 99},
    "tags": {"type": "array", "maxItems": 2, "items": {"enum": ["alpha", "beta"]}}}}


def smollm2_tokenizer_folder() -> Path | None:
    """A folder holding SmolLM2's tokenizer files: $STRUCTGEN_TOKENIZER_DIR (a GPU machine
    without the embedded model), else the embedded model's converted folder; None when
    neither is at hand."""
    import os

    if os.environ.get("STRUCTGEN_TOKENIZER_DIR"):
        return Path(os.environ["STRUCTGEN_TOKENIZER_DIR"])
    from structgen import default_model

    try:
        return default_model.gguf_as_hf_dir(default_model.default_gguf_path())
    except Exception:  # noqa: BLE001 - no embedded model installed
        return None


def make_tokenized_checkpoint(folder: Path, seed: int = 0) -> bool:
    """A tiny random llama with SmolLM2's 49,152-token vocabulary and its tokenizer files
    in `folder`: constrained decoding and jump-forward on the Triton and GPU paths, which
    the real model would make too slow there. False when no tokenizer is at hand."""
    import shutil

    import transformers

    source = smollm2_tokenizer_folder()
    if source is None:
        return False
    config = transformers.LlamaConfig(**{**BASE, "vocab_size": 49152}, rope_theta=10000.0)
    torch.manual_seed(seed)
    transformers.LlamaForCausalLM(config).save_pretrained(str(folder))
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copy(source / name, folder / name)
    return True

"""The one-call decode step on CPU (structgen.engine.cpu_decode): for a model whose
projections are all 4-bit block layers, decode-only steps run every layer in C and give
the per-op path's tokens and logprobs bit for bit, the cache included (a later step reads
what the fused one wrote); any other step or model takes the per-op path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structgen.engine import Engine, SamplingParams
from structgen.engine.cpu_decode import CpuDecode, fits_model
from structgen.engine.kernels import attention_torch
from structgen.engine.models import gguf_weights
from structgen.engine.models.quantization import Int4BlockLinear, quantize_model
from tests.engine.tiny_models import TINY_SMOLLM_SHAPE

PARAMS = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True, logprobs=5)


def native_tiny_engine(seed: int = 0) -> Engine:
    """A random model of the embedded model's architecture whose projections are random
    4-bit blocks, with the fused path built for it."""
    engine = Engine(TINY_SMOLLM_SHAPE, load_format="dummy", quantization="float", kv_cache_bytes=4 << 20)
    rng = np.random.default_rng(seed)
    stored = {}
    for name, module in engine.model.named_modules():
        if name.endswith(("attn.qkv", "attn.o", "mlp.gate_up", "mlp.down")):
            rows, cols = module.weight.shape
            scale = rng.uniform(0.005, 0.05, (rows, cols // 32)).astype(np.float32)
            stored[name] = gguf_weights.Int4Blocks(rng.integers(0, 16, (rows, cols), dtype=np.uint8), scale,
                                                   (-8 * scale + rng.normal(0, 0.01, scale.shape)).astype(np.float32))
    quantize_model(engine.model, "native", stored=stored)
    engine.runner.cpu_decode = CpuDecode.of(engine.model, engine.runner.kv_caches, engine.runner.backend)
    assert engine.runner.cpu_decode is not None
    return engine


def with_and_without_fusion(engine: Engine, prompts, params=PARAMS):
    fused = engine.generate(prompts, params)
    kept, engine.runner.cpu_decode = engine.runner.cpu_decode, None
    try:
        engine.blocks.reset_prefix_cache()
        per_op = engine.generate(prompts, params)
    finally:
        engine.runner.cpu_decode = kept
    return fused, per_op


def test_decode_steps_give_the_per_op_paths_tokens_and_logprobs_bit_for_bit():
    engine = native_tiny_engine()
    prompts = [list(range(5, 5 + n)) for n in (3, 17, 40, 9)]  # contexts of different lengths and blocks
    fused, per_op = with_and_without_fusion(engine, prompts)
    for a, b in zip(fused, per_op):
        assert a.token_ids == b.token_ids
        assert a.logprobs == b.logprobs


def test_a_fused_step_is_used_for_decodes_and_the_per_op_path_for_prefills(monkeypatch):
    engine = native_tiny_engine(seed=1)
    calls = []
    original = CpuDecode.forward

    def counted(self, input_ids, positions, meta):
        calls.append(input_ids.shape[0])
        return original(self, input_ids, positions, meta)

    monkeypatch.setattr(CpuDecode, "forward", counted)
    engine.generate([list(range(5, 25))], SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))
    assert calls == [1] * 5  # the prefill step is not fused; each of the five decodes is
    fusion = engine.runner.cpu_decode
    assert fusion.fits(np.zeros(3), 3, 3)
    assert not fusion.fits(np.zeros(5), 2, 3)  # a step with a prefill
    assert not fusion.fits(np.zeros(4), 3, 3)  # a jump-forward span


def test_the_embedded_model_decodes_fused_by_default_and_the_float_one_does_not():
    native = Engine(kv_cache_bytes=32 << 20)
    assert native.quantization == "native" and native.runner.cpu_decode is not None
    prompt = native.tokenizer.encode("The capital of France is")
    fused, per_op = with_and_without_fusion(native, [prompt], SamplingParams(max_tokens=8, temperature=0.0,
                                                                             logprobs=3))
    assert fused[0].token_ids == per_op[0].token_ids and fused[0].logprobs == per_op[0].logprobs
    assert fused[0].text.strip().startswith("Paris"), fused[0].text
    assert Engine(quantization="float", kv_cache_bytes=16 << 20).runner.cpu_decode is None


def test_models_it_cannot_run_are_left_to_the_per_op_path():
    engine = native_tiny_engine(seed=2)
    model, caches = engine.model, engine.runner.kv_caches
    assert fits_model(model, caches, attention_torch)
    assert not fits_model(model, caches, object())  # another attention backend
    assert not fits_model(model, [(k.half(), v.half()) for k, v in caches], attention_torch)
    layer = model.layers[1]
    layer.mlp.down.bias = torch.nn.Parameter(torch.zeros(model.config.hidden_size), requires_grad=False)
    assert not fits_model(model, caches, attention_torch)
    float_engine = Engine(TINY_SMOLLM_SHAPE, load_format="dummy", quantization="float", kv_cache_bytes=1 << 20)
    assert not fits_model(float_engine.model, float_engine.runner.kv_caches, attention_torch)
    assert isinstance(model.layers[0].attn.qkv, Int4BlockLinear)


@pytest.mark.parametrize("batch", [1, 6])
def test_the_cache_a_fused_step_writes_is_the_per_op_paths(batch):
    """Both engines run the same prompts from zeroed caches; afterwards every layer's
    cache holds the same bits."""
    fused_engine, per_op_engine = native_tiny_engine(seed=3), native_tiny_engine(seed=3)
    per_op_engine.runner.cpu_decode = None
    for engine in (fused_engine, per_op_engine):
        for k, v in engine.runner.kv_caches:
            k.zero_(), v.zero_()
    prompts = [list(range(7 + i, 20 + 3 * i)) for i in range(batch)]
    params = SamplingParams(max_tokens=5, temperature=0.0, ignore_eos=True)
    assert [o.token_ids for o in fused_engine.generate(prompts, params)] == \
        [o.token_ids for o in per_op_engine.generate(prompts, params)]
    for (k1, v1), (k2, v2) in zip(fused_engine.runner.kv_caches, per_op_engine.runner.kv_caches):
        assert k1.abs().sum() > 0  # the steps wrote
        assert torch.equal(k1, k2) and torch.equal(v1, v2)

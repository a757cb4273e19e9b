"""The one-call step on CPU (structgen.engine.fused_step): for a model whose projections
are all 4-bit or 8-bit block layers (a GGUF file's Q4 formats; Q3_K, Q5_0, Q5_1, Q5_K,
Q6_K, Q8_0; runs of both in one projection), every step -- prefills, decodes, both at
once -- runs every layer in C and gives the per-op path's tokens and logprobs bit for
bit, the cache included (a later step reads what the fused one wrote); a prompt's logits
do not depend on what it is batched with or how it is chunked; other models take the
per-op path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structgen.engine import Engine, SamplingParams
from structgen.engine.fused_step import FusedStep, fits_model
from structgen.engine.kernels import attention_torch
from structgen.engine.models import gguf_weights
from structgen.engine.models.quantization import Int4BlockLinear, Int8BlockLinear, SplitLinear, quantize_model
from tests.engine.tiny_models import TINY_SMOLLM_SHAPE

PARAMS = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True, logprobs=5)


def int8_blocks(rng, rows: int, cols: int, group: int, minimums: bool = False) -> gguf_weights.Int8Blocks:
    """Random 6-bit values (Q6_K's range, less its offset) with a scale per `group` weights,
    or, with `minimums`, 5-bit ones (Q5_K's, 0..31) with a minimum per 32 as well."""
    scale = rng.uniform(0.01, 0.1, (rows, cols // group)).astype(np.float32)
    if not minimums:
        return gguf_weights.Int8Blocks(rng.integers(-32, 32, (rows, cols), dtype=np.int8), scale)
    minimum = (-16 * scale + rng.normal(0, 0.01, scale.shape)).astype(np.float32)
    return gguf_weights.Int8Blocks(rng.integers(0, 32, (rows, cols), dtype=np.int8), scale, minimum)


def int4_blocks(rng, rows: int, cols: int) -> gguf_weights.Int4Blocks:
    """Random 4-bit values with a scale and a minimum per 32 weights."""
    scale = rng.uniform(0.005, 0.05, (rows, cols // 32)).astype(np.float32)
    return gguf_weights.Int4Blocks(rng.integers(0, 16, (rows, cols), dtype=np.uint8), scale,
                                   (-8 * scale + rng.normal(0, 0.01, scale.shape)).astype(np.float32))


def native_tiny_engine(seed: int = 0, mixed: bool = False, **options) -> Engine:
    """A random model of the embedded model's architecture whose projections are random
    4-bit blocks -- or, `mixed`, some 4-bit, some 8-bit with a scale per 32 (Q8_0, Q5_0),
    some with one per 16 (Q6_K), some with a minimum per 32 too (Q5_K), and one q/k/v
    projection of 4-bit q and k beside an 8-bit v (a SplitLinear), as in K-quant files --
    with the fused path built for it (`options`: more EngineConfig fields)."""
    engine = Engine(TINY_SMOLLM_SHAPE, load_format="dummy", quantization="float", kv_cache_bytes=4 << 20,
                    **options)
    rng = np.random.default_rng(seed)
    stored = {}
    for index, (name, module) in enumerate(engine.model.named_modules()):
        if name.endswith(("attn.qkv", "attn.o", "mlp.gate_up", "mlp.down")):
            rows, cols = module.weight.shape
            if mixed and name == "layers.1.attn.qkv":
                v_rows = engine.model.config.num_kv_heads * engine.model.config.head_dim
                stored[name] = gguf_weights.SplitBlocks([int4_blocks(rng, rows - v_rows, cols),
                                                         int8_blocks(rng, v_rows, cols, 16)])
                continue
            if mixed and index % 3:
                group = 16 if index % 3 == 1 else 32
                stored[name] = int8_blocks(rng, rows, cols, group, minimums=group == 32 and index % 2 == 1)
                continue
            stored[name] = int4_blocks(rng, rows, cols)
    quantize_model(engine.model, "native", stored=stored)
    engine.runner.fused_step = FusedStep.of(engine.model, engine.runner.kv_caches, engine.runner.backend)
    assert engine.runner.fused_step is not None
    return engine


def with_and_without_fusion(engine: Engine, prompts, params=PARAMS, between=lambda: None):
    """The outputs of `prompts` fused, then per-op (`between` runs in between)."""
    fused = engine.generate(prompts, params)
    between()
    kept, engine.runner.fused_step = engine.runner.fused_step, None
    try:
        engine.blocks.reset_prefix_cache()
        per_op = engine.generate(prompts, params)
    finally:
        engine.runner.fused_step = kept
    return fused, per_op


@pytest.mark.parametrize("mixed", [False, True])
def test_steps_give_the_per_op_paths_tokens_and_logprobs_bit_for_bit(mixed):
    engine = native_tiny_engine(mixed=mixed)
    kinds = {type(layer.get_submodule(name)) for layer in engine.model.layers for name in ("attn.qkv", "mlp.down")}
    assert kinds == ({Int4BlockLinear, Int8BlockLinear, SplitLinear} if mixed else {Int4BlockLinear})
    prompts = [list(range(5, 5 + n)) for n in (3, 17, 40, 9)]  # contexts of different lengths and blocks
    fused, per_op = with_and_without_fusion(engine, prompts)
    for a, b in zip(fused, per_op):
        assert a.token_ids == b.token_ids
        assert a.logprobs == b.logprobs


def run_staggered(engine: Engine, prompts: list[list[int]], params=PARAMS) -> dict[str, list]:
    """Each prompt added two steps after the one before, so that steps mix one prompt's
    prefill with the others' decodes; each request's (token ids, logprobs)."""
    finished, pending = {}, list(enumerate(prompts))
    while pending or engine.has_unfinished_requests():
        if pending:
            index, prompt = pending.pop(0)
            engine.add_request(prompt, params, request_id=f"r{index}")
        for _ in range(2):
            for out in engine.step():
                if out.finished:
                    finished[out.request_id] = (out.token_ids, out.logprobs)
    return finished


def test_a_step_mixing_prefills_and_decodes_is_one_fused_call(monkeypatch):
    engine = native_tiny_engine(seed=1)
    calls = []
    original = FusedStep.forward

    def counted(self, input_ids, positions, meta):
        calls.append((input_ids.shape[0], meta.num_decodes))
        return original(self, input_ids, positions, meta)

    monkeypatch.setattr(FusedStep, "forward", counted)
    prompts = [list(range(5, 25)), list(range(30, 41))]
    fused = run_staggered(engine, prompts, SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))
    assert calls[:3] == [(20, 0), (1, 1), (1 + 11, 1)]  # a prefill, a decode, a decode beside a prefill
    monkeypatch.setattr(FusedStep, "forward", original)
    engine.runner.fused_step, kept = None, engine.runner.fused_step
    engine.blocks.reset_prefix_cache()
    per_op = run_staggered(engine, prompts, SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))
    engine.runner.fused_step = kept
    assert fused == per_op


def test_a_prompts_logprobs_do_not_depend_on_its_batch_or_its_chunks():
    """The embedded model (its LM head is row by row too, int8_rows.h): the same prompts
    alone, staggered beside each other, and prefilled in chunks of 8 tokens give the same
    tokens and logprobs, bit for bit."""
    engine = Engine(kv_cache_bytes=32 << 20)
    prompts = [engine.tokenizer.encode(text) for text in (
        "The capital of France is", "Write a haiku about the sea, please, in English.", "1, 2, 3, 4,")]
    alone = {}
    for index, prompt in enumerate(prompts):
        engine.blocks.reset_prefix_cache()
        alone[f"r{index}"] = run_staggered(engine, [prompt])["r0"]
    engine.blocks.reset_prefix_cache()
    assert run_staggered(engine, prompts) == alone
    chunked = Engine(kv_cache_bytes=32 << 20, max_num_batched_tokens=8)
    assert run_staggered(chunked, prompts) == alone


def test_the_embedded_model_decodes_fused_by_default_and_the_float_one_does_not():
    native = Engine(kv_cache_bytes=32 << 20)
    assert native.quantization == "native" and native.runner.fused_step is not None
    prompt = native.tokenizer.encode("The capital of France is")
    fused, per_op = with_and_without_fusion(native, [prompt], SamplingParams(max_tokens=8, temperature=0.0,
                                                                             logprobs=3))
    assert fused[0].token_ids == per_op[0].token_ids and fused[0].logprobs == per_op[0].logprobs
    assert fused[0].text.strip().startswith("Paris"), fused[0].text
    assert Engine(quantization="float", kv_cache_bytes=16 << 20).runner.fused_step is None


def test_models_it_cannot_run_are_left_to_the_per_op_path():
    engine = native_tiny_engine(seed=2)
    model, caches = engine.model, engine.runner.kv_caches
    assert fits_model(model, caches, attention_torch)
    assert not fits_model(model, caches, object())  # another attention backend
    assert fits_model(model, [(k.half(), v.half()) for k, v in caches], attention_torch)
    assert not fits_model(model, [(k.bfloat16(), v.bfloat16()) for k, v in caches], attention_torch)
    layer = model.layers[1]
    layer.mlp.down.bias = torch.nn.Parameter(torch.zeros(model.config.hidden_size), requires_grad=False)
    assert not fits_model(model, caches, attention_torch)
    layer.mlp.down.bias = None
    assert fits_model(model, caches, attention_torch)
    blocks = int8_blocks(np.random.default_rng(0), *layer.mlp.down.dequantized().shape, 32)
    layer.mlp.down = Int8BlockLinear(torch.from_numpy(blocks.q), torch.from_numpy(blocks.scale))  # a scale per 32
    assert fits_model(model, caches, attention_torch)
    whole = layer.mlp.down
    layer.mlp.down = SplitLinear([whole], None)
    assert fits_model(model, caches, attention_torch)  # one part
    rows = model.config.hidden_size // 4
    quarters = [Int8BlockLinear(torch.from_numpy(blocks.q[i * rows:(i + 1) * rows]),
                                torch.from_numpy(blocks.scale[i * rows:(i + 1) * rows])) for i in range(4)]
    layer.mlp.down = SplitLinear(quarters, None)
    assert not fits_model(model, caches, attention_torch)  # more parts than the table holds
    layer.mlp.down = whole
    assert fits_model(model, caches, attention_torch)
    float_engine = Engine(TINY_SMOLLM_SHAPE, load_format="dummy", quantization="float", kv_cache_bytes=1 << 20)
    assert not fits_model(float_engine.model, float_engine.runner.kv_caches, attention_torch)
    assert isinstance(model.layers[0].attn.qkv, Int4BlockLinear)


@pytest.mark.parametrize("batch,mixed", [(1, False), (6, False), (6, True)])
def test_the_cache_a_fused_step_writes_is_the_per_op_paths(batch, mixed):
    """Both engines run the same prompts from zeroed caches; afterwards every layer's
    cache holds the same bits."""
    fused_engine, per_op_engine = native_tiny_engine(seed=3, mixed=mixed), native_tiny_engine(seed=3, mixed=mixed)
    per_op_engine.runner.fused_step = None
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


def test_a_fused_step_never_reads_a_slot_it_did_not_write():
    """Fresh blocks are not cleared when the fused step runs; with every slot of the cache
    NaN beforehand, the tokens and logprobs are still the per-op path's, which clears them."""
    engine = native_tiny_engine()
    prompts = [list(range(5, 5 + n)) for n in (3, 17, 40)]
    for k_cache, v_cache in engine.runner.kv_caches:
        k_cache.fill_(float("nan"))
        v_cache.fill_(float("nan"))

    def some_block_kept_its_nans():
        stale = engine.runner.kv_caches[0][0].isnan().flatten(1)
        assert (stale.any(1) & ~stale.all(1)).any()  # a block written in part: not cleared

    fused, per_op = with_and_without_fusion(engine, prompts, between=some_block_kept_its_nans)
    for a, b in zip(fused, per_op):
        assert a.token_ids == b.token_ids
        assert a.logprobs == b.logprobs

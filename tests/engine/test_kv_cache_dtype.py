"""A float16 KV cache (`kv_cache_dtype="float16"`):
its C store rounds as torch rounds, its reads are exact, attention over it matches the
naive reference, and an engine with it keeps its guarantees -- fused and per-op steps
agree bit for bit, a prefix-cache hit gives a cold prefill's logprobs, preemption and
jump-forward change nothing. A dtype the cache cannot take is refused by name."""

from __future__ import annotations

import json

import pytest
import torch

import structgen
from structgen.engine import Engine, SamplingParams, kv_cache
from structgen.engine.kernels import attention_torch
from structgen.engine.kernels.compiled import cpu_kernels
from structgen.engine.sampling_params import InvalidParameterError
from tests.engine.test_attention_kernels import SMOLLM2, make_batch, max_error, naive_attention
from tests.engine.test_fused_step import native_tiny_engine, with_and_without_fusion

pytestmark = pytest.mark.skipif(cpu_kernels is None, reason="the compiled CPU kernels are not built")

EDGES = [0.0, -0.0, 1.0, -2.5, 65504.0, 65519.99, 65520.0, -70000.0, 6.1e-5, 6.0e-5, 5.96e-8, 2.98e-8,
         2.99e-8, 1e-9, 0.1, 1 / 3, 1.0009765625, 1.00048828125, 1.00146484375, float("inf"), -float("inf")]


def stored(rows: torch.Tensor, portable: bool) -> torch.Tensor:
    cache = torch.zeros(rows.shape[0], rows.shape[1], dtype=torch.float16)
    slots = torch.arange(rows.shape[0], dtype=torch.int64)
    cpu_kernels.cache_rows(rows.data_ptr(), rows.stride(0), cache.data_ptr(), slots.data_ptr(), rows.shape[0],
                           rows.shape[1], True, portable)
    return cache


@pytest.mark.parametrize("portable", [False, True], ids=["avx2", "portable"])
def test_the_float16_store_rounds_as_torch_does(portable):
    """Ties to even, the subnormal range, overflow to infinity: the bits of `.to(float16)`."""
    generator = torch.Generator().manual_seed(0)
    values = torch.cat([torch.tensor(EDGES), torch.randn(4000, generator=generator) * 10.0 ** torch.randint(
        -9, 6, (4000,), generator=generator)]).to(torch.float32)
    values = values[: values.numel() // 8 * 8].reshape(-1, 8).contiguous()
    assert torch.equal(stored(values, portable).view(torch.int16), values.to(torch.float16).view(torch.int16))


@pytest.mark.parametrize("portable", [False, True], ids=["avx2", "portable"])
def test_every_float16_is_read_back_exactly(portable):
    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16).contiguous()
    out = torch.empty(every.numel(), dtype=torch.float32)
    cpu_kernels.half_to_float(every.data_ptr(), out.data_ptr(), every.numel(), portable)
    expected = every.to(torch.float32)
    finite = ~torch.isnan(expected)
    assert torch.equal(out[finite], expected[finite])
    assert torch.isnan(out[~finite]).all()


def test_attention_over_a_float16_cache_matches_naive_and_its_portable_twin():
    batch = make_batch(**SMOLLM2, block_size=16, decode_lens=[1, 16, 70], prefills=[(0, 21), (32, 7)])
    k_cache, v_cache = batch.k_cache.half(), batch.v_cache.half()
    attention_torch.write_kv_cache(batch.new_keys, batch.new_values, k_cache, v_cache, batch.meta.slot_mapping)
    assert attention_torch.rows_in_c(batch.query, k_cache, v_cache, batch.meta)
    fast = attention_torch.paged_attention(batch.query, k_cache, v_cache, batch.meta, batch.scale)
    portable = attention_torch.attention_rows_c(batch.query.contiguous(), k_cache, v_cache, batch.meta,
                                                batch.scale, portable=True)
    assert torch.equal(fast, portable)
    batch.context_keys = [k.half().float() for k in batch.context_keys]  # what the cache holds
    batch.context_values = [v.half().float() for v in batch.context_values]
    assert max_error(fast, naive_attention(batch)) < 1e-5


def test_fused_and_per_op_steps_agree_over_a_float16_cache():
    engine = native_tiny_engine(kv_cache_dtype="float16")
    assert engine.runner.kv_caches[0][0].dtype is torch.float16 and engine.runner.fused_step.kv_half
    prompts = [list(range(5, 5 + n)) for n in (3, 17, 40, 9)]
    fused, per_op = with_and_without_fusion(engine, prompts)
    assert [(o.token_ids, o.logprobs) for o in fused] == [(o.token_ids, o.logprobs) for o in per_op]


@pytest.fixture(scope="module")
def embedded():
    engine = Engine(kv_cache_bytes=48 << 20, kv_cache_dtype="float16")
    assert engine.quantization == "native" and engine.kv_dtype is torch.float16
    return engine


def test_the_default_is_float16_under_native_on_cpu_and_the_models_dtype_otherwise():
    assert Engine(kv_cache_bytes=8 << 20).kv_dtype is torch.float16  # the embedded model: native
    assert Engine(quantization="float", kv_cache_bytes=8 << 20).kv_dtype is torch.float32
    assert Engine(kv_cache_bytes=8 << 20, kv_cache_dtype="float32").kv_dtype is torch.float32


def assert_a_prefix_hit_gives_the_cold_logprobs(engine: Engine) -> None:
    prompt = engine.tokenizer.encode("The quick brown fox jumps over the lazy dog, and then it runs far " * 3)[:40]
    params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=20)
    engine.blocks.reset_prefix_cache()
    cold = engine.generate([prompt], params)[0].logprobs
    engine.blocks.reset_prefix_cache()
    engine.generate([prompt[:32]], params)
    hits = engine.blocks.prefix_hits
    assert engine.generate([prompt], params)[0].logprobs == cold
    assert engine.blocks.prefix_hits - hits == 32


def assert_preemption_changes_no_token(kv_cache_dtype: str) -> None:
    """A pool too small for six requests at once preempts some; their outputs are those of
    a pool that holds them all."""
    big = Engine(kv_cache_bytes=48 << 20, kv_cache_dtype=kv_cache_dtype)
    block_bytes = kv_cache.block_bytes(big.config, big.block_size, big.kv_dtype)
    small = Engine(kv_cache_bytes=13 * block_bytes, max_num_batched_tokens=64, kv_cache_dtype=kv_cache_dtype)
    assert small.blocks.num_blocks == 12
    prompts = [big.tokenizer.encode(f"Count from {n} upwards, one number per line:") for n in range(6)]
    params = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
    expected = [o.token_ids for o in big.generate(prompts, params)]
    assert [o.token_ids for o in small.generate(prompts, params)] == expected
    assert small.stats().num_preemptions > 0


def assert_jump_forward_keeps_the_text(engine: Engine, closed: bool = False) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                               "age": {"type": "integer"}}, "required": ["name", "age"]}
    if closed:
        schema["additionalProperties"] = False
    grammar = structgen.compile_json_schema(schema, engine.vocab)
    prompt = engine.tokenizer.encode("A person as JSON: ")
    params = SamplingParams(max_tokens=40, temperature=0.0)
    outs = []
    for jump in (False, True):
        request_id = engine.add_request(prompt, params, grammar=grammar, jump_forward=jump)
        while (done := [o for o in engine.step() if o.request_id == request_id and o.finished]) == []:
            pass
        outs.append(done[0])
    assert json.loads(outs[0].text) == json.loads(outs[1].text)
    assert outs[0].metrics.num_forced_tokens == 0 < outs[1].metrics.num_forced_tokens


def test_a_prefix_hit_over_a_float16_cache_gives_the_cold_logprobs(embedded):
    assert_a_prefix_hit_gives_the_cold_logprobs(embedded)


def test_preemption_over_a_float16_cache_changes_no_token():
    assert_preemption_changes_no_token("float16")


def test_jump_forward_over_a_float16_cache_keeps_the_text(embedded):
    assert_jump_forward_keeps_the_text(embedded)


@pytest.mark.parametrize("dtype", ["int3", 5, torch.uint8])
def test_a_kv_cache_dtype_it_cannot_take_is_refused_by_name(dtype):
    with pytest.raises(InvalidParameterError, match="kv_cache_dtype"):
        Engine(kv_cache_dtype=dtype, kv_cache_bytes=8 << 20)

"""The decode engine against transformers, on tiny random checkpoints of every supported
family and on the real SmolLM2 model: greedy ids equal `generate`'s, also with
preemption, prefix caching and chunked prefill; no KV block leaks; clear errors."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from structgen.engine.engine import Engine, PromptTooLongError
from structgen.engine.models.config import UnsupportedModelError
from structgen.engine.sampling_params import InvalidParameterError, SamplingParams
from tests.engine.tiny_models import BASE, FAMILIES, hf_greedy, make_checkpoint

GREEDY = dict(temperature=0.0, ignore_eos=True)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """family -> (folder, transformers model)"""
    made = {}
    for family in FAMILIES:
        folder = tmp_path_factory.mktemp(family)
        made[family] = (folder, make_checkpoint(family, folder))
    return made


def random_prompts(lengths, seed=0, vocab=BASE["vocab_size"]):
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(n)] for n in lengths]


def assert_all_blocks_free(engine: Engine):
    stats = engine.blocks.stats()
    assert stats.used == 0, f"{stats.used} KV blocks still referenced"
    assert not engine.has_unfinished_requests()
    assert sum(engine.blocks.ref_counts) == 0


@pytest.mark.parametrize("family", list(FAMILIES))
def test_greedy_matches_transformers_mixed_batch(checkpoints, family):
    folder, hf = checkpoints[family]
    engine = Engine(str(folder), kv_cache_bytes=8 << 20)
    prompts = random_prompts([5, 40, 17, 100, 1, 63])
    outs = engine.generate(prompts, SamplingParams(max_tokens=24, **GREEDY))
    for prompt, out in zip(prompts, outs):
        assert out.token_ids == hf_greedy(hf, prompt, 24)
        assert out.finish_reason == "length"
    assert_all_blocks_free(engine)


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_logprobs_match_transformers_within_tolerance(checkpoints, family):
    folder, hf = checkpoints[family]
    engine = Engine(str(folder), kv_cache_bytes=8 << 20)
    prompt = random_prompts([30], seed=3)[0]
    out = engine.generate([prompt], SamplingParams(max_tokens=6, logprobs=5, **GREEDY))[0]
    with torch.no_grad():
        full = torch.tensor([prompt + out.token_ids])
        ref = torch.log_softmax(hf(full).logits[0].float(), dim=-1)
    for i, lp in enumerate(out.logprobs):
        row = ref[len(prompt) - 1 + i]
        assert lp.token_id == out.token_ids[i]
        assert abs(lp.logprob - row[lp.token_id].item()) < 1e-4
        ref_top = torch.topk(row, 5)
        assert [t for t, _ in lp.top] == ref_top.indices.tolist()
        for (_, value), expected in zip(lp.top, ref_top.values.tolist()):
            assert abs(value - expected) < 1e-4


def test_preemption_with_tiny_pool_keeps_outputs_exact(checkpoints):
    folder, hf = checkpoints["llama"]
    # A budget of 12 blocks of 16 tokens, one of them the null block: the six requests
    # below cannot all stay resident.
    engine = Engine(str(folder), block_size=16,
                    kv_cache_bytes=12 * 16 * 2 * 2 * 2 * 16 * 4, max_num_batched_tokens=64)
    assert engine.blocks.num_blocks == 11
    prompts = random_prompts([30, 25, 40, 10, 33, 20], seed=5)
    outs = engine.generate(prompts, SamplingParams(max_tokens=40, **GREEDY))
    assert engine.stats().num_preemptions > 0
    for prompt, out in zip(prompts, outs):
        assert out.token_ids == hf_greedy(hf, prompt, 40)
    assert_all_blocks_free(engine)


def test_chunked_prefill_matches(checkpoints):
    folder, hf = checkpoints["qwen2"]
    engine = Engine(str(folder), kv_cache_bytes=8 << 20, max_num_batched_tokens=16)
    prompts = random_prompts([100, 7, 53], seed=9)
    outs = engine.generate(prompts, SamplingParams(max_tokens=12, **GREEDY))
    for prompt, out in zip(prompts, outs):
        assert out.token_ids == hf_greedy(hf, prompt, 12)


def test_prefix_cache_hit_gives_same_tokens(checkpoints):
    folder, hf = checkpoints["llama"]
    engine = Engine(str(folder), kv_cache_bytes=8 << 20)
    shared = random_prompts([80], seed=11)[0]
    first = engine.generate([shared + [5, 6, 7]], SamplingParams(max_tokens=10, **GREEDY))[0]
    assert first.num_cached_tokens == 0
    tails = [[9, 10], [11, 12, 13, 14, 15], []]
    outs = engine.generate([shared + t for t in tails], SamplingParams(max_tokens=10, **GREEDY))
    for tail, out in zip(tails, outs):
        assert out.num_cached_tokens == 80 if tail else out.num_cached_tokens == 64
        assert out.token_ids == hf_greedy(hf, shared + tail, 10)
    stats = engine.blocks.stats()
    assert stats.prefix_hits > 0 and 0 < stats.hit_rate < 1
    assert_all_blocks_free(engine)


def test_prefix_caching_off_never_hits(checkpoints):
    folder, _ = checkpoints["llama"]
    engine = Engine(str(folder), kv_cache_bytes=8 << 20, enable_prefix_caching=False)
    prompt = random_prompts([64], seed=2)[0]
    for _ in range(2):
        out = engine.generate([prompt], SamplingParams(max_tokens=2, **GREEDY))[0]
        assert out.num_cached_tokens == 0
    assert engine.blocks.stats().cached == 0


def test_thousand_requests_with_random_aborts_leak_nothing(checkpoints):
    folder, _ = checkpoints["llama"]
    engine = Engine(str(folder), kv_cache_bytes=40 * 16 * 2 * 2 * 2 * 16 * 4,
                    max_num_batched_tokens=128, max_num_seqs=16)
    rng = random.Random(7)
    shared = random_prompts([32], seed=1)[0]
    live: set[str] = set()
    finished = aborted = 0
    submitted = 0
    while submitted < 1000 or live:
        for _ in range(rng.randrange(0, 6)):
            if submitted < 1000:
                prompt = (shared if rng.random() < 0.5 else []) + random_prompts([rng.randrange(1, 60)], rng.random())[0]
                live.add(engine.add_request(prompt, SamplingParams(max_tokens=rng.randrange(1, 30), **GREEDY)))
                submitted += 1
        if live and rng.random() < 0.3:
            victim = rng.choice(sorted(live))
            assert engine.abort(victim)
            live.discard(victim)
            aborted += 1
        for out in engine.step():
            if out.finished:
                live.discard(out.request_id)
                finished += 1
    assert finished + aborted == 1000 and aborted > 100
    assert engine.stats().num_preemptions > 0
    assert_all_blocks_free(engine)
    assert not engine.requests


def test_abort_unknown_and_twice(checkpoints):
    folder, _ = checkpoints["llama"]
    engine = Engine(str(folder), kv_cache_bytes=8 << 20)
    rid = engine.add_request([5, 6, 7], SamplingParams(max_tokens=50))
    engine.step()
    assert engine.abort(rid)
    assert not engine.abort(rid)
    assert not engine.abort("nope")
    assert_all_blocks_free(engine)


def test_bad_requests_are_clear_errors_and_harm_nothing(checkpoints):
    folder, hf = checkpoints["llama"]
    engine = Engine(str(folder), kv_cache_bytes=64 * 16 * 2 * 2 * 2 * 16 * 4, max_model_len=512)
    good = engine.add_request([5, 6, 7, 8], SamplingParams(max_tokens=8, **GREEDY))
    with pytest.raises(InvalidParameterError, match="empty"):
        engine.add_request([], SamplingParams())
    with pytest.raises(InvalidParameterError, match="outside the vocabulary"):
        engine.add_request([5, 100000], SamplingParams())
    with pytest.raises(PromptTooLongError, match="context of 512"):
        engine.add_request([5] * 500, SamplingParams(max_tokens=20))
    with pytest.raises(InvalidParameterError, match="already in use"):
        engine.add_request([5], SamplingParams(), request_id=good)
    with pytest.raises(InvalidParameterError, match="stop"):
        engine.add_request([5], SamplingParams(stop=["x"]))  # this engine has no tokenizer
    with pytest.raises(InvalidParameterError, match="temperature"):
        SamplingParams(temperature=-1)
    with pytest.raises(InvalidParameterError, match="max_tokens"):
        SamplingParams(max_tokens=0)
    outs = []
    while engine.has_unfinished_requests():
        outs += [o for o in engine.step() if o.finished]
    assert outs[0].token_ids == hf_greedy(hf, [5, 6, 7, 8], 8)


def test_prompt_larger_than_kv_pool_is_rejected(checkpoints):
    folder, _ = checkpoints["llama"]
    engine = Engine(str(folder), kv_cache_bytes=4 * 16 * 2 * 2 * 2 * 16 * 4)
    with pytest.raises(PromptTooLongError, match="KV blocks"):
        engine.add_request([5] * 70, SamplingParams(max_tokens=1))


def test_unsupported_architecture_is_named(tmp_path):
    import json

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}))
    with pytest.raises(UnsupportedModelError, match="gpt2"):
        Engine(str(tmp_path))


def test_missing_weight_is_named(checkpoints, tmp_path):
    from safetensors.torch import load_file, save_file

    folder, _ = checkpoints["llama"]
    state = load_file(str(folder / "model.safetensors"))
    del state["model.layers.1.mlp.up_proj.weight"]
    save_file(state, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    with pytest.raises(UnsupportedModelError, match="layers.1.mlp.gate_up.weight"):
        Engine(str(tmp_path))


def test_seeded_sampling_is_reproducible_across_batches(checkpoints):
    folder, _ = checkpoints["llama"]
    engine = Engine(str(folder), kv_cache_bytes=8 << 20)
    prompt = random_prompts([12], seed=4)[0]
    seeded = SamplingParams(max_tokens=20, temperature=1.0, seed=1234, ignore_eos=True)
    alone = engine.generate([prompt], seeded)[0].token_ids
    others = random_prompts([3, 30, 9], seed=8)
    unseeded = SamplingParams(max_tokens=20, temperature=1.0, ignore_eos=True)
    outs = engine.generate(others[:2] + [prompt] + others[2:], [unseeded, unseeded, seeded, unseeded])
    assert outs[2].token_ids == alone
    different = engine.generate([prompt], SamplingParams(max_tokens=20, temperature=1.0, seed=99, ignore_eos=True))
    assert different[0].token_ids != alone


def test_dummy_weights_at_any_shape():
    engine = Engine("smollm2-135m", load_format="dummy", kv_cache_bytes=16 << 20)
    assert engine.config.num_layers == 30 and engine.tokenizer is None
    out = engine.generate([[1, 2, 3]], SamplingParams(max_tokens=5, **GREEDY))[0]
    assert len(out.token_ids) == 5 and out.text == ""


@pytest.fixture(scope="module")
def smollm2_engine():
    return Engine(kv_cache_bytes=256 << 20, quantization="float")  # transformers' float weights


@pytest.fixture(scope="module")
def smollm2_hf(smollm2_engine):
    from transformers import AutoModelForCausalLM

    from structgen import default_model

    folder = default_model.gguf_as_hf_dir(default_model.default_gguf_path())
    return AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()


def test_smollm2_greedy_matches_transformers(smollm2_engine, smollm2_hf):
    tok = smollm2_engine.tokenizer
    texts = ["The capital of France is", "def fibonacci(n):",
             "List three colors, one per line:\n" * 6, "Hi"]
    prompts = [tok.encode(t) for t in texts]
    outs = smollm2_engine.generate(prompts, SamplingParams(max_tokens=24, **GREEDY))
    for prompt, out in zip(prompts, outs):
        assert out.token_ids == hf_greedy(smollm2_hf, prompt, 24)
        assert out.text == tok.decode(out.token_ids)


def test_smollm2_stops_at_eos_and_stop_strings(smollm2_engine):
    tok = smollm2_engine.tokenizer
    chat = tok.apply_chat_template([{"role": "user", "content": "Say hello."}],
                                   tokenize=False, add_generation_prompt=True)
    prompt = tok.encode(chat)
    out = smollm2_engine.generate([prompt], SamplingParams(max_tokens=100, temperature=0))[0]
    assert out.finish_reason == "stop" and out.token_ids[-1] in smollm2_engine.eos_token_ids
    assert "<|im_end|>" not in out.text
    words = out.text.split()
    assert len(words) >= 2
    stop = words[1]
    stopped = smollm2_engine.generate([prompt], SamplingParams(max_tokens=100, temperature=0, stop=[stop]))[0]
    assert stopped.finish_reason == "stop" and stopped.stop_reason == stop
    assert stopped.text == out.text[: out.text.index(stop)]


def test_one_token_steps_flatten_like_any_step():
    """The decode-step fast path of runner.host_batch builds the same arrays as the
    general path, whatever the tables' lengths, positions and sampling chunks."""
    from types import SimpleNamespace

    from structgen.engine import runner

    rng = random.Random(0)
    for trial in range(200):
        chunks = []
        for _ in range(rng.randrange(1, 40)):
            total = rng.randrange(1, 200)
            table = rng.sample(range(1000), -(-total // 16) + rng.randrange(2))
            request = SimpleNamespace(num_computed_tokens=total - 1, all_token_ids=[rng.randrange(500) for _ in range(total)],
                                      block_table=table)
            chunks.append(SimpleNamespace(request=request, num_new_tokens=1, is_decode=True, samples=rng.random() < 0.9))
        fast, general = runner._one_token_batch(chunks, 16), runner._any_batch(chunks, 16)
        for name in ("input_ids", "positions", "slot_mapping", "query_start", "block_tables", "logits_indices"):
            a, b = getattr(fast, name), getattr(general, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), (trial, name)
        assert (fast.seq_lens, fast.query_lens, fast.num_decodes) == (general.seq_lens, general.query_lens,
                                                                     general.num_decodes)


def test_staged_graph_inputs_send_one_prefix():
    """The CUDA graphs' input buffers (cuda_graphs._StagedInputs): each named view reads
    what its host mirror held, aligned; a send copies everything before the last field
    and only the requested leading rows of it."""
    from structgen.engine.cuda_graphs import _StagedInputs

    staged = _StagedInputs(torch.device("cpu"), [
        ("ids", torch.int64, (5,)), ("lens", torch.int32, (3,)), ("tables", torch.int32, (4, 3))])
    host = staged.writable()
    host["ids"][:] = [1, 2, 3, 4, 5]
    host["lens"][:] = [7, 8, 9]
    host["tables"][:] = np.arange(12).reshape(4, 3)
    staged.send(rows_of_last=2)
    assert staged.device["ids"].tolist() == [1, 2, 3, 4, 5]
    assert staged.device["lens"].dtype == torch.int32 and staged.device["lens"].tolist() == [7, 8, 9]
    assert staged.device["tables"].tolist() == [[0, 1, 2], [3, 4, 5], [0, 0, 0], [0, 0, 0]]
    assert all(t.data_ptr() % 8 == 0 for t in staged.device.values())

"""The engine on a real GPU: compiled Triton kernels and CUDA-graph decode steps give
transformers' greedy ids, graphs and eager steps agree, and nothing leaks.

Skipped where there is no GPU (CI). The same paths run on CPU elsewhere: the kernels
interpreted (test_attention_kernels, test_logits_mask, which also run compiled here)
and the padded static-buffer decode path in test_engine_triton.
"""

from __future__ import annotations

import random

import pytest
import torch

from structgen.engine.engine import Engine
from structgen.engine.sampling_params import SamplingParams
from tests.engine.tiny_models import BASE, FAMILIES, make_checkpoint

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

GREEDY = dict(temperature=0.0, ignore_eos=True)
PROMPT_LENGTHS = [5, 40, 17, 100, 1, 63, 9, 30, 2]  # 9 sequences: decode batches get padded


def random_prompts(lengths, seed=0):
    rng = random.Random(seed)
    return [[rng.randrange(3, BASE["vocab_size"]) for _ in range(n)] for n in lengths]


def hf_greedy_on_gpu(model, prompt: list[int], max_new_tokens: int) -> list[int]:
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt], device="cuda"), max_new_tokens=max_new_tokens,
                             min_new_tokens=max_new_tokens, do_sample=False, pad_token_id=0,
                             eos_token_id=None)
    return out[0, len(prompt):].tolist()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    made = {}
    for family in FAMILIES:
        folder = tmp_path_factory.mktemp(family)
        made[family] = (folder, make_checkpoint(family, folder).to("cuda"))
    return made


def gpu_engine(folder, **options) -> Engine:
    return Engine(str(folder), device="cuda", dtype="float32", kv_cache_bytes=64 << 20, **options)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_cuda_graph_engine_matches_transformers(checkpoints, family):
    folder, hf = checkpoints[family]
    engine = gpu_engine(folder, max_num_seqs=16)
    assert engine.runner.decode_graphs is not None and engine.runner.decode_graphs.graphs
    prompts = random_prompts(PROMPT_LENGTHS)
    outs = engine.generate(prompts, SamplingParams(max_tokens=20, **GREEDY))
    for prompt, out in zip(prompts, outs):
        assert out.token_ids == hf_greedy_on_gpu(hf, prompt, 20)
    graphs = engine.runner.decode_graphs
    assert graphs.num_steps > 0 and graphs.num_padding_rows > 0
    assert engine.blocks.stats().used == 0


def test_graphs_and_eager_agree_with_preemption_and_prefix_hits(checkpoints):
    folder, _ = checkpoints["llama"]
    shared = random_prompts([40], seed=1)[0]
    prompts = [shared + p for p in random_prompts([3, 30, 0, 12, 50, 7], seed=2)]
    params = SamplingParams(max_tokens=24, **GREEDY)
    results = []
    for graphs in (True, False):
        # 14 blocks of 16 tokens: the six requests cannot all stay resident.
        engine = Engine(str(folder), device="cuda", dtype="float32", block_size=16,
                        kv_cache_bytes=15 * 16 * 2 * 2 * 2 * 16 * 4, max_num_batched_tokens=64,
                        cuda_graphs=graphs)
        engine.generate([prompts[0]], SamplingParams(max_tokens=2, **GREEDY))  # warms the prefix cache
        outs = engine.generate(prompts, params)
        stats = engine.stats()
        assert stats.blocks.used == 0 and stats.num_preemptions > 0 and stats.blocks.prefix_hits > 0
        results.append([o.token_ids for o in outs])
    assert results[0] == results[1]


def test_bf16_graph_engine_runs_sampled_requests(checkpoints):
    """bf16 (the GPU default) with temperature, seeds and logprobs: seeded requests repeat."""
    folder, _ = checkpoints["qwen3"]
    # Prefix caching off: a cached prefix changes the shapes of the second run's matmuls,
    # and with them bf16 rounding.
    engine = Engine(str(folder), device="cuda", kv_cache_bytes=64 << 20, max_num_seqs=8,
                    enable_prefix_caching=False)
    assert engine.dtype == torch.bfloat16
    prompts = random_prompts([4, 20, 60], seed=4)
    params = SamplingParams(max_tokens=16, temperature=1.0, top_p=0.9, seed=7, logprobs=2, ignore_eos=True)
    first = engine.generate(prompts, params)
    second = engine.generate(prompts, params)
    assert [o.token_ids for o in first] == [o.token_ids for o in second]
    for out in first:
        assert len(out.token_ids) == 16
        assert all(lp.top and lp.logprob <= 0 for lp in out.logprobs)


def test_jump_forward_spans_replay_span_graphs_like_eager(tmp_path):
    """Constrained requests with jump-forward beside unconstrained ones: steps with a
    forced span replay the span graphs and give eager's greedy ids."""
    import structgen
    from tests.engine.tiny_models import JUMP_SCHEMA, make_tokenized_checkpoint

    if not make_tokenized_checkpoint(tmp_path):
        pytest.skip("no SmolLM2 tokenizer at hand (set STRUCTGEN_TOKENIZER_DIR)")
    prompts = [[random.Random(n).randrange(3, 49152) for _ in range(n)] for n in (5, 23, 9, 14, 31, 2)]
    params = SamplingParams(max_tokens=48, temperature=0.0)
    results = []
    for graphs in (True, False):
        engine = Engine(str(tmp_path), device="cuda", dtype="float32", kv_cache_bytes=64 << 20,
                        max_num_seqs=8, cuda_graphs=graphs)
        grammar = structgen.compile_json_schema(JUMP_SCHEMA, engine.vocab)
        ids = [engine.add_request(p, params, grammar=grammar if i < 4 else None) for i, p in enumerate(prompts)]
        outs = {}
        while engine.has_unfinished_requests():
            outs.update((o.request_id, o) for o in engine.step() if o.finished)
        assert sum(outs[i].metrics.num_forced_tokens for i in ids) > 0
        results.append([outs[i].token_ids for i in ids])
        if graphs:
            assert engine.runner.decode_graphs.span_graphs and engine.runner.decode_graphs.num_span_steps > 0
        assert engine.blocks.stats().used == 0
    assert results[0] == results[1]

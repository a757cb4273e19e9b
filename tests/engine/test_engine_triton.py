"""The whole engine on the Triton attention kernels, run on CPU under TRITON_INTERPRET=1:
greedy outputs equal the torch backend's on a mixed batch with chunked prefill, a
cached prefix and preemption, over a float32, int8 or fp8 KV cache — also when decode steps go through the padded static
buffers that CUDA graphs replay (run eagerly here). (CI has no GPU; this is how the GPU
path is exercised.)"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

from tests.paths import REPO

SCRIPT = textwrap.dedent("""
    import random, sys, tempfile
    from pathlib import Path
    sys.path.insert(0, {repo!r})
    from tests.engine.tiny_models import make_checkpoint
    from structgen.engine import kv_cache
    from structgen.engine.engine import Engine
    from structgen.engine.sampling_params import SamplingParams

    kv_dtype = {kv_dtype!r}  # None: the model's float32
    folder = Path(tempfile.mkdtemp())
    make_checkpoint("llama", folder)
    rng = random.Random(0)
    shared = [rng.randrange(3, 384) for _ in range(40)]
    prompts = [shared + [rng.randrange(3, 384) for _ in range(n)] for n in (3, 30, 0, 12)]
    prompts += [[rng.randrange(3, 384) for _ in range(n)] for n in (1, 70)]
    params = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)
    results = {{}}
    for backend in ("torch", "triton", "triton-graph-buffers"):
        probe = Engine(str(folder), block_size=16, kv_cache_bytes=1 << 20, kv_cache_dtype=kv_dtype)
        engine = Engine(str(folder), attention_backend=backend.split("-")[0], block_size=16,
                        kv_cache_bytes=14 * kv_cache.block_bytes(probe.config, 16, probe.kv_dtype),
                        max_num_batched_tokens=48, kv_cache_dtype=kv_dtype)
        if backend == "triton-graph-buffers":  # captured sizes 1, 2, 4, 7: 3, 5 and 6 decodes are padded
            engine.runner.capture_decode_graphs(7, engine.max_model_len, capture=False)
        engine.generate([prompts[0]], SamplingParams(max_tokens=2, temperature=0.0))  # warms the prefix cache
        outs = engine.generate(prompts, params)
        stats = engine.stats()
        assert stats.blocks.used == 0
        results[backend] = ([o.token_ids for o in outs], stats.num_preemptions, stats.blocks.prefix_hits)
        if backend == "triton-graph-buffers":
            graphs = engine.runner.decode_graphs
            # Steps with a last prompt chunk beside decodes take the span buffers.
            assert graphs.num_steps > graphs.num_span_steps > 0 and graphs.num_padding_rows > 0
    print(results)
    assert results["torch"] == results["triton"] == results["triton-graph-buffers"], results
    assert results["torch"][1] > 0 and results["torch"][2] > 0
    print("OK")
""")


# Constrained requests with jump-forward beside unconstrained ones: the forced spans run as
# multi-token rows of span steps (the span graphs' static buffers, run eagerly here).
JUMP_SCRIPT = textwrap.dedent("""
    import random, sys, tempfile
    from pathlib import Path
    sys.path.insert(0, {repo!r})
    from tests.engine.tiny_models import JUMP_SCHEMA, make_tokenized_checkpoint
    import structgen
    from structgen.engine.engine import Engine
    from structgen.engine.sampling_params import SamplingParams

    folder = Path(tempfile.mkdtemp())
    if not make_tokenized_checkpoint(folder):
        print("SKIP: no SmolLM2 tokenizer at hand")
        sys.exit(0)
    rng = random.Random(0)
    prompts = [[rng.randrange(3, 49152) for _ in range(n)] for n in (5, 23, 9, 14, 31)]
    params = SamplingParams(max_tokens=48, temperature=0.0)
    results = {{}}
    for backend in ("torch", "triton-span-buffers"):
        engine = Engine(str(folder), attention_backend=backend.split("-")[0], block_size=16,
                        kv_cache_bytes=4 << 20, max_num_seqs=8)
        if backend != "torch":
            engine.runner.capture_decode_graphs(8, engine.max_model_len, capture=False)
        grammar = structgen.compile_json_schema(JUMP_SCHEMA, engine.vocab)
        ids = [engine.add_request(p, params, grammar=grammar if i < 4 else None, jump_forward=True)
               for i, p in enumerate(prompts)]
        outs = {{}}
        while engine.has_unfinished_requests():
            for out in engine.step():
                if out.finished:
                    outs[out.request_id] = out
        results[backend] = [outs[i].token_ids for i in ids]
        forced = sum(outs[i].metrics.num_forced_tokens for i in ids)
        assert forced > 0, "no span was fast-forwarded"
        for i in ids[:4]:
            assert outs[i].finish_reason in ("stop", "length"), outs[i].finish_reason
            matcher = grammar.matcher()
            assert all(matcher.accept_token(t) for t in outs[i].token_ids if t not in engine.eos_token_ids)
        if backend != "torch":
            graphs = engine.runner.decode_graphs
            assert graphs.num_span_steps > 0, "no step took the span buffers"
        assert engine.stats().blocks.used == 0
    print(results)
    assert results["torch"] == results["triton-span-buffers"], results
    print("OK")
""")


def run_interpreted(script: str, **values) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", script.format(repo=str(REPO), **values)],
        env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0 and ("OK" in proc.stdout or "SKIP" in proc.stdout), \
        proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed")
def test_jump_forward_spans_through_interpreted_span_buffers_match_torch_backend():
    out = run_interpreted(JUMP_SCRIPT)
    if "SKIP" in out:
        pytest.skip(out.strip())


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed")
@pytest.mark.parametrize("kv_dtype", [None, "int8", "fp8"])
def test_engine_on_interpreted_triton_kernels_matches_torch_backend(kv_dtype):
    """Also over a one-byte KV cache, whose bytes and scales the two backends write alike."""
    assert "OK" in run_interpreted(SCRIPT, kv_dtype=kv_dtype)

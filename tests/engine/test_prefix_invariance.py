"""A prompt's logits do not depend on whether its context came from the prefix cache:
the embedded model with its GGUF layers run as stored (`quantization="native"`, whose
packed kernels multiply in bfloat16, so a last-bit difference upstream can become a
different rounding) gives a prefix-cache hit exactly the logits of a cold prefill,
whether the hit leaves one token, two, or a longer tail."""

from __future__ import annotations

import pytest

from structgen.engine import Engine
from structgen.engine.sampling_params import SamplingParams

TEXT = "The quick brown fox jumps over the lazy dog, and then it runs far into the woods to find " * 3
PARAMS = SamplingParams(max_tokens=1, temperature=0.0, logprobs=20)


@pytest.fixture(scope="module")
def engine():
    return Engine(quantization="native", kv_cache_bytes=64 << 20)


def first_logprobs(engine, prompts):
    return [out.logprobs[0] for out in engine.generate(prompts, PARAMS)]


@pytest.mark.parametrize("cached, length", [(32, 33), (32, 34), (16, 50)])  # the hit leaves 1, 2 or 34
def test_a_prefix_cache_hit_gives_the_logprobs_of_a_cold_prefill(engine, cached, length):
    prompt = engine.tokenizer.encode(TEXT)[:length]
    engine.blocks.reset_prefix_cache()
    cold = first_logprobs(engine, [prompt])
    engine.blocks.reset_prefix_cache()
    first_logprobs(engine, [prompt[:cached]])
    hits = engine.blocks.prefix_hits
    hit = first_logprobs(engine, [prompt])
    assert engine.blocks.prefix_hits - hits == cached
    assert hit == cold


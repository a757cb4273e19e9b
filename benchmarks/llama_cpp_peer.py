"""llama.cpp as a peer of the engine on CPU, through llama-cpp-python (the `bench` extra).

Owns loading the same GGUF file the engine runs, with the same thread count, and timing
one chat request there: free text (its end-of-sequence token banned, so that it writes
exactly the tokens asked for, as `ignore_eos` makes the engine do) or constrained by a
JSON schema (llama.cpp's `response_format` with the schema, its GBNF path). Absent
package: `unavailable()` says so, and the benchmark skips this side with that note.

llama-cpp-python builds llama.cpp at install, for the machine it is built on. On these
machines its AMX matmul crashes (the sandbox does not grant the AMX tiles), so build it
with AMX off and the AVX-512 paths on:

    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON \
      -DGGML_AVX512_VBMI=ON -DGGML_AVX_VNNI=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
      -DGGML_AMX_BF16=OFF" pip install --no-deps llama-cpp-python==0.3.36 diskcache
"""

from __future__ import annotations

import time
from pathlib import Path


def unavailable() -> str | None:
    """Why llama.cpp cannot run here, or None."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return "llama-cpp-python is not installed (pip install -e '.[bench]'): the llama.cpp side is skipped"
    return None


class LlamaCpp:
    """One llama.cpp model, timed request by request."""

    def __init__(self, gguf: Path, threads: int, context: int = 2048):
        from llama_cpp import Llama

        self.model = Llama(model_path=str(gguf), n_ctx=context, n_threads=threads, n_threads_batch=threads,
                           n_batch=512, verbose=False, seed=0)
        self.eos = self.model.token_eos()

    def chat(self, prompt: str, max_tokens: int, schema: dict | None = None) -> tuple[float, int]:
        """(seconds, output tokens) of one greedy chat request, prompt processing included."""
        self.model.reset()  # no prompt cache carried over from the previous request
        options: dict = {"temperature": 0.0, "max_tokens": max_tokens, "top_k": 1}
        if schema is None:
            options["logit_bias"] = {self.eos: float("-inf")}
        else:
            options["response_format"] = {"type": "json_object", "schema": schema}
        started = time.perf_counter()
        reply = self.model.create_chat_completion(messages=[{"role": "user", "content": prompt}], **options)
        return time.perf_counter() - started, reply["usage"]["completion_tokens"]

"""llama.cpp as a peer of the engine on CPU, through llama-cpp-python (the `bench` extra).

Owns loading the same GGUF file the engine runs, with the same thread count, writing a
GGUF file in another of llama.cpp's formats (`requantized`: Q4_K_M, the most common, from
the embedded file), and timing one chat request there: free text (its end-of-sequence token banned, so that it writes
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


def requantized(source: Path, target: Path, file_type: str, threads: int = 2) -> Path:
    """`source` rewritten by llama.cpp's own quantizer as file type `file_type` (its name
    without LLAMA_FTYPE_MOSTLY_: "Q4_K_M", "Q5_0", ...) at `target`. A file already
    quantized is requantized from its dequantized weights: the formats are llama.cpp's,
    the values carry both roundings. Layers whose width the type's blocks do not divide
    get llama.cpp's fallback format (in SmolLM2-135M's Q4_K_M, Q5_0 for most)."""
    import ctypes

    import llama_cpp

    ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{file_type}", None)
    if ftype is None:
        raise ValueError(f"llama.cpp has no file type {file_type!r}")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize, params.nthread = ftype, True, threads
    target.parent.mkdir(parents=True, exist_ok=True)
    if llama_cpp.llama_model_quantize(str(source).encode(), str(target).encode(), ctypes.byref(params)) != 0:
        raise RuntimeError(f"llama.cpp could not write {source} as {file_type}")
    return target


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

"""Every option of the engine and its default, in one place: `EngineConfig`. The CLI, the
Python API, the server and the benchmarks build engines from it. Owns the options and
their checks; what each one does is the engine's and its parts' business."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from structgen.engine.models.quantization import AUTO, DEFAULT_GROUP_SIZE, check_mode
from structgen.engine.sampling_params import InvalidParameterError

CPU_MAX_NUM_SEQS, GPU_MAX_NUM_SEQS = 64, 256
CPU_MAX_BATCHED_TOKENS, GPU_MAX_BATCHED_TOKENS = 2048, 8192
DEFAULT_CPU_KV_BYTES = 1 << 30


@dataclass(frozen=True)
class EngineConfig:
    model: Any = None  # a folder, a .gguf file, a model name, or a shape for load_format="dummy"; None: SmolLM2
    tokenizer: Any = None  # None: the model's own
    load_format: str = "auto"  # "auto" or "dummy" (random weights of the model's shape)
    dtype: Any = None  # None: bfloat16 on GPU, float32 on CPU
    # the KV cache's: "float16", "bfloat16", "float32", or one byte per element and a scale per
    # row, "int8" or "fp8" (kernels/quantized_kv.py); None: float16 under native quantization
    # on CPU (half the memory per token, 1.005x float's perplexity), else the dtype above
    kv_cache_dtype: Any = None
    # weights: "int8", "int4", "fp8" (GPU), "native" (a GGUF file's 4- and 8-bit layers as
    # stored, on CPU), None / "float": the dtype above, or "auto": native for the embedded
    # model on CPU (lossless there and ~1.9x faster), float for any other model or device
    quantization: str | None = AUTO
    quantization_group_size: int = DEFAULT_GROUP_SIZE  # int4: input columns per scale and zero
    device: str | None = None  # None: cuda when there is one
    block_size: int = 16  # tokens per KV cache block
    kv_cache_bytes: int | None = None  # None: DEFAULT_CPU_KV_BYTES on CPU, gpu_memory_utilization on GPU
    gpu_memory_utilization: float = 0.85  # the share of free GPU memory the KV cache may take
    max_num_seqs: int | None = None  # sequences in a batch; None: 64 on CPU, 256 on GPU
    max_num_batched_tokens: int | None = None  # tokens in a step; None: 2048 on CPU, 8192 on GPU
    max_model_len: int | None = None  # None: the model's context
    enable_prefix_caching: bool = True
    attention_backend: str = "auto"  # "auto", "torch" or "triton"
    jump_forward: bool = True  # append the bytes a grammar forces in one prefill
    # a request whose grammar still compiles computes its prompt meanwhile, and waits (if
    # it must) only to sample its first token; False: it waits to be scheduled at all.
    # None: on GPU only -- on CPU the prompt and the compile share the cores (2 cores:
    # time to first token 1.1-1.26x longer with it, benchmarks/compile_overlap.py)
    prefill_while_compiling: bool | None = None
    overlap_masks: bool | None = None  # masks before the forward pass; None: on GPU only
    cuda_graphs: bool = True  # replay captured decode steps (GPU)
    keep_freed_memory: bool = True  # CPU: glibc keeps freed step buffers for reuse (engine.host_memory)
    seed: int = 0

    def __post_init__(self):
        _at_least("block_size", self.block_size, 1)
        check_mode(self.quantization, self.quantization_group_size)
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise InvalidParameterError("gpu_memory_utilization",
                                        f"must be in (0, 1], got {self.gpu_memory_utilization}")
        for name in ("kv_cache_bytes", "max_num_seqs", "max_num_batched_tokens", "max_model_len"):
            if getattr(self, name) is not None:
                _at_least(name, getattr(self, name), 1)

    def num_seqs(self, on_gpu: bool) -> int:
        return self.max_num_seqs or (GPU_MAX_NUM_SEQS if on_gpu else CPU_MAX_NUM_SEQS)

    def batched_tokens(self, on_gpu: bool) -> int:
        return self.max_num_batched_tokens or (GPU_MAX_BATCHED_TOKENS if on_gpu else CPU_MAX_BATCHED_TOKENS)


def _at_least(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidParameterError(name, f"must be an integer >= {minimum}, got {value!r}")

"""Steps on CPU in one C call: every decoder layer of a model whose projections are all
block layers as a GGUF file stores them (`quantization.Int4BlockLinear`: the embedded
model run natively; `Int8BlockLinear`: Q3_K, Q5_0, Q5_1, Q5_K, Q6_K and Q8_0; a
`SplitLinear` of those, as K-quant mixes give q, k and v), for any step -- decodes,
prompt chunks and jump-forward spans alike.

On a 2-core CPU the embedded model's per-op decode step spent about 40% of its time in
the interpreter and in torch's dispatch between the kernels (a few microseconds of
arithmetic per norm, ~20 us per call in situ). `fused_layers.h` runs the same kernels in
the same order on the same values, so the hidden states are the per-op path's bit for
bit (tests/engine/test_fused_step.py checks it); the embedding lookup, the LM head and
sampling stay in Python.

Owns the table of weight addresses (built once: the model must not be changed after
`FusedStep.of`) and the call; never schedules or samples.
"""

from __future__ import annotations

from types import ModuleType

import torch

from structgen.engine.kernels import attention_torch, int4_matmul, int8_matmul
from structgen.engine.models.llama import LlamaForCausalLM
from structgen.engine.models.quantization import Int4BlockLinear, Int8BlockLinear, SplitLinear

from structgen.engine.kernels.compiled import cpu_kernels  # None where not built: torch's path runs

PROJECTIONS = ("attn.qkv", "attn.o", "mlp.gate_up", "mlp.down")


class FusedStep:
    """One model's steps through `cpu_kernels.fused_layers`."""

    def __init__(self, model: LlamaForCausalLM, kv_caches: list[tuple[torch.Tensor, torch.Tensor]]):
        self.model = model
        self.config = model.config
        self.held = [layer_tensors(layer) for layer in model.layers]  # kept alive while their addresses are used
        self.weights = torch.tensor([[_table_entry(t) for t in row] for row in self.held], dtype=torch.int64)
        self.caches = torch.tensor([[k.data_ptr(), v.data_ptr()] for k, v in kv_caches], dtype=torch.int64)
        self.block_size = kv_caches[0][0].shape[1]
        self.kv_half = kv_caches[0][0].dtype is torch.float16

    @classmethod
    def of(cls, model: LlamaForCausalLM, kv_caches, backend: ModuleType) -> "FusedStep | None":
        """The fused path for this model, or None where it cannot run it."""
        if not fits_model(model, kv_caches, backend):
            return None
        return cls(model, kv_caches)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, meta) -> torch.Tensor:
        """Hidden states [n, hidden] after the final norm, as `LlamaForCausalLM.forward`
        gives them; K/V of the new tokens are cached."""
        model, c = self.model, self.config
        x = model.embed(input_ids).contiguous()
        cos, signed_sin = attention_torch.rope_tables(model.rotary.cos, model.rotary.sin, positions, x.dtype)
        tables, lengths = attention_torch.token_rows(meta)
        n = x.shape[0]
        out = torch.empty(n, c.hidden_size, dtype=torch.float32)
        cpu_kernels.fused_layers(
            self.weights.data_ptr(), self.caches.data_ptr(), model.norm.data_ptr(), len(model.layers),
            c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim, c.intermediate_size, self.block_size,
            tables.shape[1], c.rms_norm_eps, c.head_dim**-0.5, x.data_ptr(), cos.contiguous().data_ptr(),
            signed_sin.contiguous().data_ptr(), meta.slot_mapping.data_ptr(), tables.data_ptr(), lengths.data_ptr(),
            out.data_ptr(), n, self.kv_half)
        return out


def fits_model(model: LlamaForCausalLM, kv_caches, backend: ModuleType) -> bool:
    """Whether every layer is one the C step runs: float32 norms, 4-bit or 8-bit block
    projections without bias (8-bit ones with a scale per half block), no q/k norms, a
    head size of a multiple of 8, float32 or float16 caches (all of one dtype) on CPU
    behind the torch backend."""
    if cpu_kernels is None or backend is not attention_torch or not kv_caches or not len(model.layers):
        return False
    c = model.config
    cache_dtype = kv_caches[0][0].dtype
    caches_fit = cache_dtype in attention_torch.C_CACHE_DTYPES and all(
        cache.dtype is cache_dtype and cache.is_cpu and cache.is_contiguous() for pair in kv_caches for cache in pair)
    norms = [model.norm] + [norm for layer in model.layers for norm in (layer.input_norm, layer.post_attn_norm)]
    norms_fit = all(norm.dtype is torch.float32 and norm.is_cpu and norm.is_contiguous() for norm in norms)
    layers_fit = all(layer.attn.q_norm is None and all(
        _fused_projection(layer.get_submodule(name)) for name in PROJECTIONS)
        for layer in model.layers)
    return caches_fit and norms_fit and layers_fit and c.head_dim % 8 == 0


def _fused_projection(projection) -> bool:
    """Whether the C step runs this projection."""
    if isinstance(projection, SplitLinear):
        return (projection.bias is None and len(projection.parts) <= cpu_kernels.PROJECTION_PARTS
                and all(_fused_projection(part) for part in projection.parts))
    return isinstance(projection, (Int4BlockLinear, Int8BlockLinear)) and projection.bias is None


def layer_tensors(layer) -> list[torch.Tensor | int | None]:
    """One layer's row of fused_layers.h's weight table: its norms, then each projection's
    parts (one, or a SplitLinear's), each as its tensors (None for no minimums: address
    0), its bits, its rows and its scales per block, and a part of 0 rows after the last."""
    row = [layer.input_norm, layer.post_attn_norm]
    for name in PROJECTIONS:
        projection = layer.get_submodule(name)
        parts = list(projection.parts) if isinstance(projection, SplitLinear) else [projection]
        for part in parts:
            if isinstance(part, Int8BlockLinear):
                row += [part.packed, part.scale, part.minimum, 8, part.rows,
                        int8_matmul.halves_of(part.packed, part.scale)]
            else:
                row += [part.packed, part.scale, part.minimum, 4, part.packed.shape[0] * int4_matmul.GROUP_ROWS, 1]
        row += [None] * (cpu_kernels.PART_FIELDS * (cpu_kernels.PROJECTION_PARTS - len(parts)))
    assert len(row) == cpu_kernels.LAYER_FIELDS
    return row


def _table_entry(entry: torch.Tensor | int | None) -> int:
    """A weight-table entry: a tensor's address, a number as it is, None as 0."""
    if entry is None:
        return 0
    return entry if isinstance(entry, int) else entry.data_ptr()

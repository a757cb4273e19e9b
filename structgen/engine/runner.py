"""Runs one scheduled step through the model: flat batch in, logits out.

Flattens the step's chunks into one varlen batch (input ids, positions, slot mapping,
block tables, context lengths, query offsets), runs the model with the chosen attention
backend, and returns float32 logits for the last token of every chunk that samples.
Steps where every sequence samples (decodes, jump-forward spans, short last prompt
chunks) replay a captured CUDA graph when the runner has them (`cuda_graphs.py`); on
CPU, every step of a natively quantized model runs all its layers in one C call
(`fused_step.py`). Owns the device tensors of a step; never decides what runs or what
is sampled.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import torch

from structgen.engine import kv_cache
from structgen.engine.fused_step import FusedStep
from structgen.engine.kernels.attention_torch import AttentionMetadata
from structgen.engine.models.llama import LlamaForCausalLM
from structgen.engine.scheduler import ScheduledChunk


@dataclass
class HostBatch:
    """One step's flat batch as host arrays (see `attention_torch` for the layout)."""

    input_ids: np.ndarray  # [T] int64
    positions: np.ndarray  # [T] int64
    slot_mapping: np.ndarray  # [T] int64
    query_start: np.ndarray  # [B+1] int64
    seq_lens: list[int]  # [B], context length after this step
    query_lens: list[int]  # [B]
    block_tables: np.ndarray  # [B, max_blocks] int32, unused entries 0
    logits_indices: np.ndarray  # token index of every chunk that samples
    num_decodes: int  # leading decodes (`ScheduledChunk.is_decode`), one new token each

    @property
    def is_pure_decode(self) -> bool:
        """Every sequence has one new token and samples: the shape a decode graph replays."""
        return self.num_decodes == len(self.seq_lens) == len(self.logits_indices)

    @property
    def extra_tokens(self) -> int:
        """New tokens beyond one per sequence (jump-forward spans, short prompt chunks)."""
        return len(self.input_ids) - len(self.seq_lens)


class ModelRunner:
    def __init__(self, model: LlamaForCausalLM, kv_caches, block_size: int, backend: ModuleType,
                 device: torch.device):
        self.model = model
        self.kv_caches = kv_caches
        self.block_size = block_size
        self.backend = backend
        self.device = device
        self.decode_graphs = None  # a cuda_graphs.DecodeGraphs once captured
        self.fused_step = FusedStep.of(model, kv_caches, backend) if device.type == "cpu" else None

    def capture_decode_graphs(self, max_batch_size: int, max_model_len: int, capture: bool = True) -> None:
        """Replay decode-only steps of up to `max_batch_size` sequences from CUDA graphs
        (`capture=False` runs the same padded static-buffer path eagerly: the tests' CPU
        stand-in for a graph)."""
        from structgen.engine.cuda_graphs import DecodeGraphs

        max_blocks = -(-max_model_len // self.block_size)
        self.decode_graphs = DecodeGraphs(self.model, self.kv_caches, self.backend, max_batch_size,
                                          max_blocks, self.device, capture=capture)

    @torch.inference_mode()
    def zero_blocks(self, blocks: list[int]) -> None:
        """Clear blocks just handed out, so that no stale value is ever read as context:
        the torch and Triton paths read whole blocks and mask the positions past a
        sequence's length, and a stale NaN there times a zero weight is NaN. A fused step
        reads only the positions each token attends to, all written before, so with one
        there is nothing to clear (it was 3% of the engine thread serving 64 clients)."""
        if self.fused_step is not None:
            return
        index = torch.tensor(blocks, dtype=torch.int64, device=self.device)
        for k_cache, v_cache in self.kv_caches:
            kv_cache.clear_blocks(k_cache, index)
            kv_cache.clear_blocks(v_cache, index)

    @torch.inference_mode()
    def execute(self, chunks: list[ScheduledChunk]) -> torch.Tensor:
        """Logits [number of sampling chunks, vocab], in the order of `chunks`."""
        batch = host_batch(chunks, self.block_size)
        graphs = self.decode_graphs
        if graphs is not None and graphs.fits(batch):
            return graphs.run(batch)
        return self._run_eager(batch)

    def _run_eager(self, batch: HostBatch) -> torch.Tensor:
        meta = AttentionMetadata(
            query_start_loc=self._dev(batch.query_start.astype(np.int32)),
            seq_lens=self._dev(np.asarray(batch.seq_lens, dtype=np.int32)),
            block_tables=self._dev(batch.block_tables),
            slot_mapping=self._dev(batch.slot_mapping),
            num_decodes=batch.num_decodes,
            max_query_len=max(batch.query_lens),
            max_seq_len=max(batch.seq_lens),
            query_lens_cpu=batch.query_lens,
            seq_lens_cpu=batch.seq_lens,
        )
        input_ids, positions = self._dev(batch.input_ids), self._dev(batch.positions)
        if self.fused_step is not None:
            hidden = self.fused_step.forward(input_ids, positions, meta)
        else:
            hidden = self.model(input_ids, positions, self.kv_caches, meta, self.backend)
        if batch.logits_indices.size == 0:
            return hidden.new_empty((0, self.model.config.vocab_size), dtype=torch.float32)
        return self.model.compute_logits(hidden[self._dev(batch.logits_indices)])

    def _dev(self, array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(array).to(self.device, non_blocking=True)


def host_batch(chunks: list[ScheduledChunk], block_size: int) -> HostBatch:
    """Flatten the step's chunks (decodes first) into host arrays."""
    if all(c.is_decode for c in chunks):
        return _one_token_batch(chunks, block_size)
    return _any_batch(chunks, block_size)


def _any_batch(chunks: list[ScheduledChunk], bs: int) -> HostBatch:
    query_lens = [c.num_new_tokens for c in chunks]
    starts = [c.request.num_computed_tokens for c in chunks]
    seq_lens = [s + q for s, q in zip(starts, query_lens)]
    query_start = np.zeros(len(chunks) + 1, dtype=np.int64)
    np.cumsum(query_lens, out=query_start[1:])

    input_ids = np.concatenate(
        [np.asarray(c.request.all_token_ids[s:e], dtype=np.int64)
         for c, s, e in zip(chunks, starts, seq_lens)]
    )
    positions = np.concatenate([np.arange(s, e, dtype=np.int64) for s, e in zip(starts, seq_lens)])
    block_tables = _block_tables([c.request.block_table for c in chunks])
    seq_of_token = np.repeat(np.arange(len(chunks)), query_lens)
    slot_mapping = block_tables[seq_of_token, positions // bs].astype(np.int64) * bs + positions % bs
    logits_indices = np.array(
        [query_start[i + 1] - 1 for i, c in enumerate(chunks) if c.samples], dtype=np.int64
    )
    num_decodes = next((i for i, c in enumerate(chunks) if not c.is_decode), len(chunks))
    return HostBatch(input_ids, positions, slot_mapping, query_start, seq_lens, query_lens,
                     block_tables, logits_indices, num_decodes)


def _one_token_batch(chunks: list[ScheduledChunk], bs: int) -> HostBatch:
    """`host_batch` when every chunk is a decode: one array per
    field from Python lists, no numpy call per sequence. On a GPU the graph replay waits
    for this, and the general path's per-sequence calls cost ~0.5 ms at batch 64."""
    requests = [c.request for c in chunks]
    positions = [r.num_computed_tokens for r in requests]
    n = len(requests)
    input_ids = np.array([r.all_token_ids[p] for r, p in zip(requests, positions)], dtype=np.int64)
    slots = np.array([r.block_table[p // bs] * bs + p % bs for r, p in zip(requests, positions)], dtype=np.int64)
    logits_indices = np.array([i for i, c in enumerate(chunks) if c.samples], dtype=np.int64)
    return HostBatch(input_ids, np.array(positions, dtype=np.int64), slots, np.arange(n + 1, dtype=np.int64),
                     [p + 1 for p in positions], [1] * n, _block_tables([r.block_table for r in requests]),
                     logits_indices, n)


def _block_tables(tables: list[list[int]]) -> np.ndarray:
    """[B, longest table] int32, rows padded with 0, filled in one scatter."""
    lengths = np.array([len(t) for t in tables], dtype=np.int64)
    out = np.zeros((len(tables), int(lengths.max(initial=0))), dtype=np.int32)
    flat = np.fromiter(itertools.chain.from_iterable(tables), dtype=np.int32, count=int(lengths.sum()))
    rows = np.repeat(np.arange(len(tables)), lengths)
    cols = np.arange(flat.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    out[rows, cols] = flat
    return out

"""Runs one scheduled step through the model: flat batch in, logits out.

Flattens the step's chunks into one varlen batch (input ids, positions, slot mapping,
block tables, context lengths, query offsets), runs the model with the chosen attention
backend, and returns float32 logits for the last token of every chunk that samples.
Owns the device tensors of a step; never decides what runs or what is sampled.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import torch

from structgen.engine.kernels.attention_torch import AttentionMetadata
from structgen.engine.models.llama import LlamaForCausalLM
from structgen.engine.scheduler import ScheduledChunk


class ModelRunner:
    def __init__(self, model: LlamaForCausalLM, kv_caches, block_size: int, backend: ModuleType,
                 device: torch.device):
        self.model = model
        self.kv_caches = kv_caches
        self.block_size = block_size
        self.backend = backend
        self.device = device

    @torch.inference_mode()
    def zero_blocks(self, blocks: list[int]) -> None:
        """Clear blocks just handed out, so that no stale value is ever read as context."""
        index = torch.tensor(blocks, dtype=torch.int64, device=self.device)
        for k_cache, v_cache in self.kv_caches:
            k_cache.index_fill_(0, index, 0)
            v_cache.index_fill_(0, index, 0)

    @torch.inference_mode()
    def execute(self, chunks: list[ScheduledChunk]) -> torch.Tensor:
        """Logits [number of sampling chunks, vocab], in the order of `chunks`."""
        batch = self._flatten(chunks)
        hidden = self.model(batch["input_ids"], batch["positions"], self.kv_caches,
                            batch["meta"], self.backend)
        if batch["logits_indices"].numel() == 0:
            return hidden.new_empty((0, self.model.config.vocab_size), dtype=torch.float32)
        return self.model.compute_logits(hidden[batch["logits_indices"]])

    def _flatten(self, chunks: list[ScheduledChunk]) -> dict:
        bs = self.block_size
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
        max_blocks = max(len(c.request.block_table) for c in chunks)
        block_tables = np.zeros((len(chunks), max_blocks), dtype=np.int32)
        for row, chunk in enumerate(chunks):
            block_tables[row, : len(chunk.request.block_table)] = chunk.request.block_table
        seq_of_token = np.repeat(np.arange(len(chunks)), query_lens)
        slot_mapping = block_tables[seq_of_token, positions // bs].astype(np.int64) * bs + positions % bs
        logits_indices = np.array(
            [query_start[i + 1] - 1 for i, c in enumerate(chunks) if c.samples], dtype=np.int64
        )
        num_decodes = next((i for i, q in enumerate(query_lens) if q != 1), len(chunks))

        def dev(array: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(array).to(self.device, non_blocking=True)

        meta = AttentionMetadata(
            query_start_loc=dev(query_start.astype(np.int32)),
            seq_lens=dev(np.asarray(seq_lens, dtype=np.int32)),
            block_tables=dev(block_tables),
            slot_mapping=dev(slot_mapping),
            num_decodes=num_decodes,
            max_query_len=max(query_lens),
            max_seq_len=max(seq_lens),
            query_lens_cpu=query_lens,
            seq_lens_cpu=seq_lens,
        )
        return {
            "input_ids": dev(input_ids),
            "positions": dev(positions),
            "meta": meta,
            "logits_indices": dev(logits_indices),
        }

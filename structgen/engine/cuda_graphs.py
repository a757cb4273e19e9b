"""CUDA graphs for decode steps: one captured forward per batch-size bucket, replayed.

At batch 1 a decode step is hundreds of small kernel launches whose CPU cost exceeds
the GPU's work; replaying a captured graph issues them all at once. A graph reads its
inputs from fixed device buffers, so a step copies its host arrays into those buffers
(padded up to the next captured batch size) and replays. Padding rows carry slot -1
(the KV write skips them) and context length 0 (attention reads nothing for them), so
they never touch the cache. The graph ends by writing float32 logits into one static
buffer shared by every bucket.

Owns the static buffers, the graphs and their memory pool. Needs an attention backend
whose launches use only host values that are fixed for a batch size
(`attention_triton`); never schedules, samples or allocates cache blocks.
`capture=False` runs the same padded path eagerly, which is how the tests check it on
CPU (Triton interpreted) where no graph can be captured.
"""

from __future__ import annotations

import bisect
from types import ModuleType

import numpy as np
import torch

from structgen.engine.kernels.attention_torch import AttentionMetadata
from structgen.engine.models.llama import LlamaForCausalLM


def bucket_sizes(max_batch_size: int) -> list[int]:
    """Captured batch sizes: 1, 2, 4, then every multiple of 8 up to the largest."""
    sizes = [s for s in (1, 2, 4) if s < max_batch_size] + list(range(8, max_batch_size, 8))
    return sizes + [max_batch_size]


class DecodeGraphs:
    def __init__(self, model: LlamaForCausalLM, kv_caches, backend: ModuleType, max_batch_size: int,
                 max_blocks_per_seq: int, device: torch.device, capture: bool = True):
        if not getattr(backend, "GRAPH_CAPTURABLE", False):
            raise ValueError(f"{backend.__name__} cannot be captured in a CUDA graph")
        self.model, self.kv_caches, self.backend = model, kv_caches, backend
        self.sizes = bucket_sizes(max_batch_size)
        n = max_batch_size

        def buffer(*shape, dtype=torch.int64):
            return torch.zeros(shape, dtype=dtype, device=device)

        self.input_ids = buffer(n)
        self.positions = buffer(n)
        self.slot_mapping = buffer(n)
        self.seq_lens = buffer(n, dtype=torch.int32)
        self.query_start = torch.arange(n + 1, dtype=torch.int32, device=device)
        self.block_tables = buffer(n, max_blocks_per_seq, dtype=torch.int32)
        self.logits = buffer(n, model.config.vocab_size, dtype=torch.float32)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.num_steps = 0  # decode steps run through the static buffers
        self.num_padding_rows = 0  # rows those steps added to reach a captured size
        if capture:
            self._capture_all()

    @property
    def max_batch_size(self) -> int:
        return self.sizes[-1]

    def fits(self, num_seqs: int) -> bool:
        return num_seqs <= self.max_batch_size

    def run(self, batch) -> torch.Tensor:
        """Float32 logits [B, vocab] of a pure-decode `runner.HostBatch` (a view of the
        static buffer: valid until the next step)."""
        n = len(batch.seq_lens)
        size = self.sizes[bisect.bisect_left(self.sizes, n)]
        self._load(batch, size)
        self.num_steps += 1
        self.num_padding_rows += size - n
        graph = self.graphs.get(size)
        if graph is not None:
            graph.replay()
        else:
            self._forward(size)
        return self.logits[:n]

    def _load(self, batch, size: int) -> None:
        """Copy the batch into the static buffers; rows n..size become padding."""
        n = len(batch.seq_lens)
        pad = size - n
        slots = np.concatenate([batch.slot_mapping, np.full(pad, -1, dtype=np.int64)])
        lens = np.asarray(batch.seq_lens + [0] * pad, dtype=np.int32)
        _copy(self.input_ids[:size], np.concatenate([batch.input_ids, np.zeros(pad, dtype=np.int64)]))
        _copy(self.positions[:size], np.concatenate([batch.positions, np.zeros(pad, dtype=np.int64)]))
        _copy(self.slot_mapping[:size], slots)
        _copy(self.seq_lens[:size], lens)
        # Table entries past a row's length are never read (masked by its context length).
        width = batch.block_tables.shape[1]
        _copy(self.block_tables[:n, :width], batch.block_tables)

    def _forward(self, size: int) -> None:
        """What a graph of batch `size` records: the model over the static buffers."""
        meta = AttentionMetadata(
            query_start_loc=self.query_start[: size + 1],
            seq_lens=self.seq_lens[:size],
            block_tables=self.block_tables[:size],
            slot_mapping=self.slot_mapping[:size],
            num_decodes=size,
            max_query_len=1,
            max_seq_len=self.block_tables.shape[1],  # an upper bound; unread by the backend
            query_lens_cpu=[1] * size,
            seq_lens_cpu=[0] * size,  # unread by the backend; only its length counts
        )
        hidden = self.model(self.input_ids[:size], self.positions[:size], self.kv_caches, meta, self.backend)
        self.logits[:size].copy_(self.model.compute_logits(hidden))

    @torch.inference_mode()
    def _capture_all(self) -> None:
        """Capture every bucket, largest first, in one memory pool. The buffers hold
        padding only while capturing, so the warm-up runs write nothing to the cache."""
        self.slot_mapping.fill_(-1)
        self.seq_lens.zero_()
        pool = torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream()
        for size in reversed(self.sizes):
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up: Triton compiles, cuBLAS picks kernels
                self._forward(size)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                self._forward(size)
            self.graphs[size] = graph
        torch.cuda.synchronize()


def _copy(destination: torch.Tensor, source: np.ndarray) -> None:
    destination.copy_(torch.from_numpy(source), non_blocking=True)

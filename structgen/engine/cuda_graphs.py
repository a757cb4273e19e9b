"""CUDA graphs for decode steps: one captured forward per batch-size bucket, replayed.

At batch 1 a decode step is hundreds of small kernel launches whose CPU cost exceeds
the GPU's work; replaying a captured graph issues them all at once. A graph reads its
inputs from fixed device buffers, so a step writes its host arrays (padded up to the
next captured batch size) into a pinned mirror of those buffers, sends it in one copy,
and replays. Padding rows carry slot -1
(the KV write skips them) and context length 0 (attention reads nothing for them), so
they never touch the cache. The graph ends by writing float32 logits into one static
buffer shared by every bucket.

Span graphs take steps where every sequence samples but some bring several new tokens:
a jump-forward span, or the last short chunk of a prompt. Without them one such row
would send the whole batch down the eager path, at over twice the cost of a replay on an
8B model (the launches again), and jump-forward would slow a busy GPU down. They are
captured per (batch bucket, extra tokens bucket), where extra tokens = new tokens beyond
one per sequence; every row goes through the prefill kernel (causal over its cached
prefix), real tokens packed first and padding tokens (slot -1, owned by no sequence)
after them, and logits are gathered at each sequence's last token.

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


# Span graphs: extra-token buckets, and the largest batch they are captured for (beyond
# it a step is compute-bound enough that the eager path's launch cost matters little).
SPAN_EXTRA_TOKENS = (16, 64)
MAX_SPAN_BATCH = 64


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
        self.span_sizes = [s for s in self.sizes if s <= MAX_SPAN_BATCH]
        n = max_batch_size
        max_tokens = n + SPAN_EXTRA_TOKENS[-1]

        # Every per-step input is a view of one device buffer, mirrored in pinned host
        # memory: a step writes the mirror and sends it over in one copy (separate small
        # copies from pageable memory cost ~10 us of host time each).
        self.inputs = _StagedInputs(device, [
            ("input_ids", torch.int64, (max_tokens,)),
            ("positions", torch.int64, (max_tokens,)),
            ("slot_mapping", torch.int64, (max_tokens,)),
            ("logits_index", torch.int64, (n,)),  # span steps: each sequence's last token
            ("seq_lens", torch.int32, (n,)),
            ("span_query_start", torch.int32, (n + 1,)),
            ("block_tables", torch.int32, (n, max_blocks_per_seq)),  # last: rows 0..size-1 lead
        ])
        for name, tensor in self.inputs.device.items():  # self.input_ids, ...: the device views
            setattr(self, name, tensor)
        self.query_start = torch.arange(n + 1, dtype=torch.int32, device=device)  # decode: one token each
        self.logits = torch.zeros((n, model.config.vocab_size), dtype=torch.float32, device=device)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}  # decode graphs by batch size
        self.span_graphs: dict[tuple[int, int], torch.cuda.CUDAGraph] = {}  # by (batch size, extra tokens)
        self.num_steps = 0  # steps run through the static buffers
        self.num_span_steps = 0  # of which with several new tokens for some sequence
        self.num_padding_rows = 0  # rows those steps added to reach a captured size
        if capture:
            self._capture_all()

    @property
    def max_batch_size(self) -> int:
        return self.sizes[-1]

    def fits(self, batch) -> bool:
        """Whether a `runner.HostBatch` can run here: every sequence samples, and a decode
        graph, or a span graph, is large enough."""
        n = len(batch.seq_lens)
        if batch.is_pure_decode:
            return n <= self.max_batch_size
        return (len(batch.logits_indices) == n and n <= self.span_sizes[-1]
                and batch.extra_tokens <= SPAN_EXTRA_TOKENS[-1])

    def run(self, batch) -> torch.Tensor:
        """Float32 logits [B, vocab] of a batch that `fits` (a view of the static buffer:
        valid until the next step)."""
        n = len(batch.seq_lens)
        if batch.is_pure_decode:
            size, extra = self.sizes[bisect.bisect_left(self.sizes, n)], 0
        else:
            size = self.span_sizes[bisect.bisect_left(self.span_sizes, n)]
            extra = SPAN_EXTRA_TOKENS[bisect.bisect_left(SPAN_EXTRA_TOKENS, batch.extra_tokens)]
            self.num_span_steps += 1
        self._load(batch, size, extra)
        self.num_steps += 1
        self.num_padding_rows += size - n
        graph = self.span_graphs.get((size, extra)) if extra else self.graphs.get(size)
        if graph is not None:
            graph.replay()
        else:
            self._forward(size, extra)
        return self.logits[:n]

    def _load(self, batch, size: int, extra: int) -> None:
        """Copy the batch into the static buffers: rows n..size become padding sequences
        and tokens after the batch's own, up to size + extra, padding tokens."""
        n, real, tokens = len(batch.seq_lens), len(batch.input_ids), size + extra
        host = self.inputs.writable()
        _fill(host["input_ids"], batch.input_ids, tokens, 0)
        _fill(host["positions"], batch.positions, tokens, 0)
        _fill(host["slot_mapping"], batch.slot_mapping, tokens, -1)
        _fill(host["seq_lens"], batch.seq_lens, size, 0)
        if extra:  # padding sequences start and end after the last real token: no query rows
            _fill(host["span_query_start"], batch.query_start, size + 1, batch.query_start[-1])
            _fill(host["logits_index"], batch.logits_indices, size, 0)
        # Table entries past a row's length are never read (masked by its context length),
        # nor are padding rows' tables.
        host["block_tables"][:n, : batch.block_tables.shape[1]] = batch.block_tables
        self.inputs.send(rows_of_last=size)

    def _forward(self, size: int, extra: int) -> None:
        """What a graph of batch `size` (and `extra` tokens) records: the model over the
        static buffers. Decode graphs use the decode kernel; span graphs treat every row as
        a prefill of up to extra + 1 tokens."""
        tokens = size + extra
        meta = AttentionMetadata(
            query_start_loc=(self.span_query_start if extra else self.query_start)[: size + 1],
            seq_lens=self.seq_lens[:size],
            block_tables=self.block_tables[:size],
            slot_mapping=self.slot_mapping[:tokens],
            num_decodes=0 if extra else size,
            max_query_len=extra + 1,
            max_seq_len=self.block_tables.shape[1],  # an upper bound; unread by the backend
            query_lens_cpu=[1] * size,  # unread by the backend; only its length counts
            seq_lens_cpu=[0] * size,  # likewise
        )
        hidden = self.model(self.input_ids[:tokens], self.positions[:tokens], self.kv_caches, meta, self.backend)
        if extra:
            hidden = hidden[self.logits_index[:size]]
        self.logits[:size].copy_(self.model.compute_logits(hidden))

    @torch.inference_mode()
    def _capture_all(self) -> None:
        """Capture every bucket, largest first, in one memory pool. The buffers hold
        padding only while capturing, so the warm-up runs write nothing to the cache."""
        self.slot_mapping.fill_(-1)
        self.seq_lens.zero_()
        self.span_query_start.zero_()  # every span row has no query tokens
        pool = torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream()
        keys = [(size, extra) for extra in reversed(SPAN_EXTRA_TOKENS) for size in reversed(self.span_sizes)]
        for size, extra in keys + [(size, 0) for size in reversed(self.sizes)]:  # largest first
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up: Triton compiles, cuBLAS picks kernels
                self._forward(size, extra)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                self._forward(size, extra)
            if extra:
                self.span_graphs[size, extra] = graph
            else:
                self.graphs[size] = graph
        torch.cuda.synchronize()


_NUMPY_DTYPES = {torch.int64: np.int64, torch.int32: np.int32}


def _fill(destination: np.ndarray, values, length: int, padding) -> None:
    """destination[:length] = values, then padding."""
    count = len(values)
    destination[:count] = values
    destination[count:length] = padding


class _StagedInputs:
    """Named tensors packed into one device byte buffer, with a host mirror (pinned when
    the device is a GPU) of the same layout as numpy arrays. The last tensor's leading
    rows are sent with everything before it as one prefix of the buffer."""

    def __init__(self, device: torch.device, fields: list[tuple[str, torch.dtype, tuple[int, ...]]]):
        offsets, end = [], 0
        for _, dtype, shape in fields:
            offsets.append(end)
            end += -(-(dtype.itemsize * int(np.prod(shape))) // 8) * 8  # keep every field 8-aligned
        on_gpu = device.type == "cuda"
        self._device_bytes = torch.zeros(end, dtype=torch.uint8, device=device)
        self._host_bytes = torch.zeros(end, dtype=torch.uint8, pin_memory=on_gpu)
        host_array = self._host_bytes.numpy()
        self.device: dict[str, torch.Tensor] = {}
        self.host: dict[str, np.ndarray] = {}
        for (name, dtype, shape), start in zip(fields, offsets):
            size = dtype.itemsize * int(np.prod(shape))
            self.device[name] = self._device_bytes[start : start + size].view(dtype).view(shape)
            self.host[name] = host_array[start : start + size].view(_NUMPY_DTYPES[dtype]).reshape(shape)
        self._last_start, (_, last_dtype, last_shape) = offsets[-1], fields[-1]
        self._last_row_bytes = last_dtype.itemsize * int(np.prod(last_shape[1:]))
        self._sent = torch.cuda.Event() if on_gpu else None

    def writable(self) -> dict[str, np.ndarray]:
        """The host arrays, once the previous send has finished reading them."""
        if self._sent is not None:
            self._sent.synchronize()
        return self.host

    def send(self, rows_of_last: int) -> None:
        """Copy every field but the last, and the last's first `rows_of_last` rows."""
        end = self._last_start + rows_of_last * self._last_row_bytes
        self._device_bytes[:end].copy_(self._host_bytes[:end], non_blocking=True)
        if self._sent is not None:
            self._sent.record()

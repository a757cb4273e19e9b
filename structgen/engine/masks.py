"""Grammar masks for a step, computed beside the engine so that a slow one never holds
up the batch.

Owns the worker threads that compute each constrained request's allowed tokens
(`Matcher.fill_bitmask`) into a row of its own, and the rule for how long a step waits
for them. A mask is usually ready in microseconds (its grammar state's token table is
cached), but a state's first visit can take far longer: the first mask of a
20,000-value `enum` walks the vocabulary through every value's prefix (~0.4 s on
2 cores). A batch that waited for it would stop every other stream for as long.

So the engine waits for the masks of a step only `patience(forward_s)` after its forward
pass; a request whose mask is later than that sits out (the engine keeps its logits row and samples it in the
first step after its mask is ready), and the rest of the batch goes on. The kernels the
workers run release the interpreter lock, so they run beside the engine thread, at
a lower CPU priority (`background`): a late mask must not slow the forward passes either.

Must not touch the scheduler's queues, the model or the sampler: the engine does.
"""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Callable

import numpy as np
import torch

from structgen.engine.request import Request
from structgen.background import lower_this_thread

# A step waits for its masks at least this long, and up to this share of its forward
# pass (then a late request sits out a step rather than delaying all of them).
MIN_PATIENCE_S = 0.002
PATIENCE_SHARE = 0.5
# Threads that fill masks. Each slow first visit occupies one until it is done, so there
# are more than one: the fast masks of the other requests go on beside it.
MASK_WORKERS = 4


def patience(forward_s: float) -> float:
    """How long after the forward pass a step waits for its masks (forward_s: the time
    the forward call took; on a GPU it returns before the device is done, and the masks
    started before it)."""
    return max(MIN_PATIENCE_S, PATIENCE_SHARE * forward_s)


class GrammarMasks:
    """Fills masks in worker threads, one job per request and grammar state."""

    def __init__(self, words: int, workers: int = MASK_WORKERS):
        self.words = words  # int32 words of a mask row (ceil(vocab / 32))
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="structgen-masks", initializer=lower_this_thread)
        self._batch: torch.Tensor | None = None  # [rows, words] int32, pinned on GPU

    def submit(self, requests: list[Request]) -> None:
        """Start the mask of each request that has none in flight or ready. A job reads
        the matcher's current state: the request must not advance until it is done."""
        for request in requests:
            if request.mask_job is None:
                if request.mask_row is None:
                    request.mask_row = np.zeros((1, self.words), dtype=np.int32)
                request.mask_job = self._pool.submit(_fill, request)

    def wait(self, requests: list[Request], timeout_s: float) -> list[Request]:
        """Wait up to `timeout_s` for the masks of `requests`; those still not ready."""
        jobs = [r.mask_job for r in requests if not r.mask_job.done()]
        if jobs:
            wait(jobs, timeout=timeout_s)
        return [r for r in requests if not r.mask_job.done()]

    def run(self, work: Callable[[], Any]) -> Future:
        """Other grammar work that may build automaton rows (a jump-forward's forced bytes),
        in the same threads."""
        return self._pool.submit(work)

    @staticmethod
    def wait_any(jobs: list[Future], timeout_s: float) -> None:
        """Block until one of the jobs is done, or `timeout_s` has passed."""
        wait(jobs, timeout=timeout_s, return_when=FIRST_COMPLETED)

    def batch(self, requests: list[Request], pin: bool) -> torch.Tensor:
        """The ready masks of `requests` as rows of one [len, words] int32 tensor."""
        if self._batch is None or self._batch.shape[0] < len(requests):
            self._batch = torch.zeros((max(len(requests), 64), self.words), dtype=torch.int32, pin_memory=pin)
        rows = self._batch.numpy()
        for i, request in enumerate(requests):
            rows[i] = request.mask_row[0]
        return self._batch[: len(requests)]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _fill(request: Request) -> None:
    started = time.perf_counter()
    try:
        request.matcher.fill_bitmask(request.mask_row, 0)
    except Exception as exc:  # e.g. the grammar outgrew its state budget mid-decode
        request.error = f"grammar failed while decoding: {exc}"
        request.mask_row[0] = -1  # allow everything; the sampled token is discarded
    request.metrics.mask_time_s += time.perf_counter() - started

"""Work taken off the decoding step: one background thread per process (`executor`).

An automaton's next array size (`spares`) and a vocabulary's loop slices
(`token_trie.TokenTrie.loop_slice`) are made here, so that the step that first needs
them does not wait for them. One thread: the jobs are memory and tries for later steps,
and a second thread would only take a core from decoding. Owns the thread (made on first
use, made again in a forked child, where the parent's did not cross the fork). Must not
know what the jobs do.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def executor() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="structgen-offstep")
        return _executor


def _forget_executor_after_fork() -> None:
    global _executor, _executor_lock
    _executor, _executor_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_executor_after_fork)

"""Worker processes for the Python half of grammar compiles.

Owns the process pool that runs a compile's front half (`compiler.front`: the schema or
grammar to IR, its checks, its flattening into arrays, and an example output) away from
the process that decodes. Why processes: that half is pure Python, and a thread running
Python beside the engine thread starves it -- every torch operation releases the
interpreter lock and must wait to take it back (on 2 cores a busy Python thread made a
42 ms decoding step take 2.1 s). A worker sends back numpy arrays, which load in a
moment; the automaton, its masks and the cache stay in the serving process.

Workers run below the engine's CPU priority (`background`), at most `workers` at once:
further compiles queue. A worker that dies (out of memory, a crash) fails only the
compile it ran; the pool is started afresh for the next. A worker whose server is gone
exits. Must not import the engine or the server.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable

from structgen.background import lower_this_thread
from structgen.errors import GrammarTooLargeError

DEFAULT_WORKERS = 2
PARENT_CHECK_S = 1.0

_pool: ProcessPoolExecutor | None = None
_workers = 0
_pool_lock = threading.Lock()


def start(workers: int = DEFAULT_WORKERS) -> None:
    """Run compile fronts in `workers` processes from now on (started here, so that the
    first compile does not wait for them)."""
    global _pool, _workers
    if workers < 1:
        raise ValueError(f"compile workers must be at least 1, got {workers}")
    with _pool_lock:
        _stop_locked()
        _workers = workers
        _pool = _new_pool(workers)
    for future in [_pool.submit(os.getpid) for _ in range(workers)]:
        future.result()


def stop() -> None:
    """Back to compiling in the calling thread."""
    global _workers
    with _pool_lock:
        _stop_locked()
        _workers = 0


def active() -> bool:
    return _pool is not None


def worker_pids() -> list[int]:
    """The worker processes' ids (tests, monitoring)."""
    return sorted(child.pid for child in multiprocessing.active_children()) if _pool is not None else []


def run(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in a worker (both picklable); its exceptions are raised here."""
    pool = _pool
    if pool is None:
        return fn(*args)
    try:
        return pool.submit(fn, *args).result()
    except BrokenProcessPool:
        _restart(pool)
        raise GrammarTooLargeError("the compile's worker process died (out of memory?); "
                                   "the grammar is too large to compile") from None


def _new_pool(workers: int) -> ProcessPoolExecutor:
    # spawn: the serving process has threads (and torch's); forking it is not safe.
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker,
                               initargs=(os.getpid(),))


def _init_worker(server: int) -> None:
    import structgen.compiler  # noqa: F401  (imported now, not in the first compile)
    import structgen.grammar.json_schema  # noqa: F401
    from structgen.grammar.nesting import make_room_for_deep_input

    lower_this_thread()
    make_room_for_deep_input()
    threading.Thread(target=_exit_with_parent, args=(server,), daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """A worker whose server is gone (killed, or stopped before its pool) exits too."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


def _restart(broken: ProcessPoolExecutor) -> None:
    global _pool
    with _pool_lock:
        if _pool is broken:
            broken.shutdown(wait=False, cancel_futures=True)
            _pool = _new_pool(_workers)


def _stop_locked() -> None:
    global _pool
    if _pool is not None:
        _pool.shutdown(wait=False, cancel_futures=True)
        _pool = None

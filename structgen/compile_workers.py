"""Worker processes for the Python half of grammar compiles.

Owns the processes that run a compile's front half (`compiler.front`: the schema or
grammar to IR, its checks, its flattening into arrays, and an example output) away from
the process that decodes. Why processes: that half is pure Python, and a thread running
Python beside the engine thread starves it -- every torch operation releases the
interpreter lock and must wait to take it back (on 2 cores a busy Python thread made a
42 ms decoding step take 2.1 s). A worker sends back numpy arrays, which load in a
moment; the automaton, its masks and the cache stay in the serving process.

Workers run below the engine's CPU priority (`background`), one job each, at most
`workers` at once: further compiles wait for a free one. Each worker has its own pipe,
so a job touches no other: a worker that dies (out of memory, a crash) fails only the
compile it ran, and a compile cancelled while it runs (its client left) has its worker
killed, which frees the CPU at once. A worker is started afresh for the next job in
either case. A worker whose server is gone exits. Must not import the engine or the
server.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
import time
from typing import Any, Callable

from structgen import memory
from structgen.background import lower_this_thread
from structgen.errors import CompileCancelledError, GrammarTooLargeError

DEFAULT_WORKERS = 2
PARENT_CHECK_S = 1.0
CANCEL_CHECK_S = 0.05  # how often a waiting compile looks at its cancel event
RELEASE_ABOVE_BYTES = 32 << 20

_SPAWN = multiprocessing.get_context("spawn")  # the server has threads (torch's): forking it is not safe
_idle: queue.Queue | None = None  # the free workers; a None in it is a slot whose process must be started
_all: list[_Worker] = []
_warm_up: Callable[[], Any] | None = None
_pool_lock = threading.Lock()


class _Worker:
    """One spawned process and the pipe to it."""

    def __init__(self):
        self.conn, child_conn = _SPAWN.Pipe()
        self.process = _SPAWN.Process(target=_serve, args=(child_conn, os.getpid(), _warm_up), daemon=True,
                                      name="structgen-compile-worker")
        self.process.start()
        child_conn.close()

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()


def start(workers: int = DEFAULT_WORKERS, warm_up: Callable[[], Any] | None = None) -> None:
    """Run compile fronts in `workers` processes from now on (started here, so that the
    first compile does not wait for them). `warm_up` (picklable) runs once in each
    worker as it starts: the imports its jobs will need, say."""
    global _idle, _warm_up
    if workers < 1:
        raise ValueError(f"compile workers must be at least 1, got {workers}")
    with _pool_lock:
        _stop_locked()
        _warm_up = warm_up
        started = [_Worker() for _ in range(workers)]
        for worker in started:
            _call(worker, os.getpid)  # returns once the worker's imports are done
        _all.extend(started)
        _idle = queue.Queue()
        for worker in started:
            _idle.put(worker)


def stop() -> None:
    """Back to compiling in the calling thread."""
    with _pool_lock:
        _stop_locked()


def active() -> bool:
    return _idle is not None


def worker_pids() -> list[int]:
    """The live worker processes' ids (tests, monitoring)."""
    with _pool_lock:
        return sorted(w.process.pid for w in _all if w.process.is_alive())


def run(fn: Callable[..., Any], *args: Any, cancel: threading.Event | None = None) -> Any:
    """`fn(*args)` in a worker (both picklable); its exceptions are raised here. Once
    `cancel` is set, waiting stops with CompileCancelledError, and a worker running the
    job is killed."""
    idle = _idle
    if idle is None:
        return fn(*args)
    worker = _take(idle, cancel)
    try:
        worker = worker or _started()
        ok, value = _call(worker, fn, *args, cancel=cancel)
    except BaseException:  # cancelled, or the worker died: it is not used again
        _retire(worker)
        idle.put(None)  # the slot's next job starts a new process
        raise
    idle.put(worker)
    if not ok:
        raise value
    return value


def _take(idle: queue.Queue, cancel: threading.Event | None) -> _Worker | None:
    while True:
        if cancel is not None and cancel.is_set():
            raise CompileCancelledError("the compile was cancelled before a worker was free")
        try:
            return idle.get(timeout=CANCEL_CHECK_S)
        except queue.Empty:
            continue


def _started() -> _Worker:
    worker = _Worker()
    with _pool_lock:
        _all.append(worker)
    return worker


def _retire(worker: _Worker | None) -> None:
    if worker is None:
        return
    worker.stop()
    with _pool_lock:
        if worker in _all:
            _all.remove(worker)


def _call(worker: _Worker, fn: Callable[..., Any], *args: Any,
          cancel: threading.Event | None = None) -> tuple[bool, Any]:
    """(True, what `fn` returned) or (False, what it raised), from `worker`."""
    worker.conn.send((fn, args))
    while not worker.conn.poll(CANCEL_CHECK_S):
        if cancel is not None and cancel.is_set():
            raise CompileCancelledError("the compile was cancelled while it ran (its worker was stopped)")
        if not worker.process.is_alive() and not worker.conn.poll():
            break
    try:
        return worker.conn.recv()
    except (EOFError, OSError):
        raise GrammarTooLargeError("the compile's worker process died (out of memory?); "
                                   "the grammar is too large to compile") from None


def _serve(conn, server: int, warm_up: Callable[[], Any] | None) -> None:
    """A worker's life: run each job it is sent and send back (ok, result or error)."""
    _init_worker(server)
    if warm_up is not None:
        warm_up()
    resident_after_warm_up = memory.resident_bytes()
    while True:
        try:
            fn, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply = (True, fn(*args))
        except Exception as error:
            reply = (False, error)
        try:
            conn.send(reply)
        except Exception as error:  # a result or an error that does not pickle
            conn.send((False, RuntimeError(f"a compile worker could not send back its answer: {error!r}")))
        del reply
        _release_if_grown(resident_after_warm_up)


def _release_if_grown(baseline: int | None) -> None:
    """After the reply is sent: a job that built a large IR leaves its freed memory in
    the worker's heap; give it back once the worker holds RELEASE_ABOVE_BYTES more than
    after its warm-up, so that an idle worker does not sit on a past job's peak."""
    now = memory.resident_bytes()
    if baseline is not None and now is not None and now > baseline + RELEASE_ABOVE_BYTES:
        memory.release_freed_memory()


def _init_worker(server: int) -> None:
    from structgen.grammar.nesting import make_room_for_deep_input

    lower_this_thread()
    make_room_for_deep_input()
    threading.Thread(target=_exit_with_parent, args=(server,), daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """A worker whose server is gone (killed, or stopped before its workers) exits too."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


def _stop_locked() -> None:
    global _idle
    for worker in _all:
        worker.stop()
    _all.clear()
    _idle = None

"""Work beside the engine (grammar compiles, late masks): it yields the CPU to decoding.

Owns two rules. Background threads and processes run below the engine's CPU priority
(`lower_this_thread`). And while any background work is in flight (`busy`), a CPU
engine runs its forward pass on one thread fewer per task (`engine_threads`), leaving
that core to the work. Why: torch runs a CPU forward pass on every core, and its
threads wait for each other; on a 2-core machine one busy process took a 40 ms decoding
step to 253 ms at the default priority (at niceness 19 it starved compiles past their
budget), while a forward pass on one thread took 64 ms beside it as alone. Must not touch anything but thread
priorities and the count of work in flight.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Iterator

BACKGROUND = 10  # below the engine, yet not starved by a busy machine (19 timed compiles out)

_in_flight = 0
_count_lock = threading.Lock()


def lower_this_thread(niceness: int = BACKGROUND) -> None:
    """Run the calling thread (on Linux a thread has a priority of its own) at `niceness`;
    where the platform cannot, it keeps its priority."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)
    except (AttributeError, OSError):
        pass


@contextmanager
def busy() -> Iterator[None]:
    """Count a piece of background work as in flight while the block runs."""
    global _in_flight
    with _count_lock:
        _in_flight += 1
    try:
        yield
    finally:
        with _count_lock:
            _in_flight -= 1


def engine_threads(cores: int, extra: int = 0) -> int:
    """Threads for a CPU forward pass on `cores`, with the work in flight (and `extra`
    more, the engine's own late masks) each given a core, down to one."""
    return max(1, cores - _in_flight - extra)

"""CPU priority inside the Ray Serve processes structgen runs: the engine comes first.

Ray starts its worker processes at niceness 15 (`RAY_worker_niceness`), below the
raylet, the GCS and its own I/O threads at 0. An engine replica is such a worker, so its
engine thread lost its core to every busy Ray thread beside it: one replica of 1 CPU
under 8 clients waited on the run queue for 15% of the time while a quarter of the
2-core machine sat idle. So a cluster `structgen serve --replicas` starts runs its
workers at 0 (environment.py), and the application's processes put the threads that
only carry messages (Ray's own, and the event loop the HTTP app runs on) a step below
the engine's, with structgen's background work (`lower`): a step that waits delays every
sequence in the batch, a message that waits a few milliseconds delays one token of one
stream.

Which threads: those of the process before its engine started (`threads()`, taken
first). The engine's threads, torch's compute threads and structgen's own pools start
later and keep their priorities; a thread a lowered one starts later inherits the
lower priority. Owns those priorities only; never structgen's own rules for its
background work (structgen.background).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from structgen.background import BACKGROUND

# Below the engine, level with structgen's background work (its compiles). At niceness
# 5, 10 and 15 the engine thread of one replica of 1 CPU under 8 clients waited on the
# run queue 11.5%, 9% and 5.7% of the time (237, 247 and 255 tok/s); at 15 the streams
# would yield to compiles too.
PLUMBING = BACKGROUND
TASKS = Path("/proc/self/task")


def threads() -> set[int]:
    """The native ids of this process's threads now; empty where the platform does not
    list them (then `lower` changes nothing)."""
    return {int(task.name) for task in TASKS.iterdir()} if TASKS.is_dir() else set()


def lower(thread_ids: Iterable[int], niceness: int = PLUMBING) -> int:
    """Runs each thread in `thread_ids` that is still alive at `niceness`, unless it
    already runs lower. Returns how many were lowered."""
    lowered = 0
    for tid in thread_ids:
        try:
            if os.getpriority(os.PRIO_PROCESS, tid) < niceness:
                os.setpriority(os.PRIO_PROCESS, tid, niceness)
                lowered += 1
        except OSError:  # the thread ended meanwhile
            continue
    return lowered

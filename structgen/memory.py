"""Freed memory handed back to the system, on glibc.

glibc keeps what a thread frees in that thread's own arena (up to 8 per core), and keeps
freed chunks in its heaps rather than returning them. A server that compiles and evicts
many grammars from several threads then holds memory it no longer uses, and its resident
size creeps up: during the soak, `malloc_trim` gave back 460 MB of a 6.2 GB server that
kept its grammar cache at its budget. Owns `limit_arenas` (at most a few arenas, set
before the server starts its threads) and `release_freed_memory`, which a daemon thread
started by `keep_releasing` calls once the grammar cache has evicted enough, and a
compile worker after a job that left it holding much more than before (`resident_bytes`).
Elsewhere than glibc they do nothing.

Between two releases the server's resident size climbs: what evicted grammars freed
stays resident, and new grammars and each step's buffers land on pages the last release
gave back. Released every 20 s, the soak's server swung by up to 270 MB from one release
to the next (its peak of +7.3% over its size at ten minutes); released once the cache
has evicted RELEASE_AFTER_BYTES (every 3-20 s there), the spread of its resident size
(1st to 99th percentile) fell from 160-250 MB to ~120 MB in a replay of its traffic.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
import time
from typing import Callable

M_ARENA_MAX = -8  # mallopt's parameter number (malloc.h)
ARENAS = 4
# `keep_releasing` looks every RELEASE_CHECK_S, and releases once RELEASE_AFTER_BYTES have
# been freed since the last release, or anything at all RELEASE_EVERY_S after it. A
# release walks every heap (7-35 ms for the soak's 2 GB, holding each arena's lock in
# turn), and the next steps fault their freed buffers back in: at the soak's eviction
# rate (2-9 MB a second) it comes every 3-20 s, not every second.
RELEASE_CHECK_S = 1.0
RELEASE_AFTER_BYTES = 32 << 20
RELEASE_EVERY_S = 20.0
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def _glibc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None
    except OSError:
        return None


_LIBC = _glibc()


def limit_arenas(arenas: int = ARENAS) -> bool:
    """At most `arenas` malloc arenas for the threads started from now on."""
    return _LIBC is not None and bool(_LIBC.mallopt(M_ARENA_MAX, arenas))


def release_freed_memory() -> bool:
    """Return the freed parts of every arena to the system; whether any was returned."""
    return _LIBC is not None and bool(_LIBC.malloc_trim(0))


def resident_bytes() -> int | None:
    """This process's resident memory (Linux), else None."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * PAGE_BYTES
    except (OSError, ValueError, IndexError):
        return None


def keep_releasing(freed_bytes: Callable[[], int], check_s: float = RELEASE_CHECK_S,
                   after_bytes: int = RELEASE_AFTER_BYTES, every_s: float = RELEASE_EVERY_S,
                   stop: threading.Event | None = None) -> threading.Thread | None:
    """A daemon thread that releases freed memory when `freed_bytes()` (a running total,
    say of the bytes the grammar cache has evicted) has grown by `after_bytes` since the
    last release, or at all and `every_s` has passed since; it looks every `check_s`
    until `stop` is set (the server's runs as long as the process)."""
    if _LIBC is None:
        return None
    if stop is None:
        stop = threading.Event()

    def loop() -> None:
        seen, released_at = freed_bytes(), time.monotonic()
        while not stop.wait(check_s):
            now, freed = time.monotonic(), freed_bytes()
            if release_due(freed - seen, now - released_at, after_bytes, every_s):
                seen, released_at = freed, now
                release_freed_memory()

    thread = threading.Thread(target=loop, name="structgen-release-memory", daemon=True)
    thread.start()
    return thread


def release_due(freed: int, since_s: float, after_bytes: int = RELEASE_AFTER_BYTES,
                every_s: float = RELEASE_EVERY_S) -> bool:
    """Whether `freed` bytes, freed in the `since_s` since the last release, call for one."""
    return freed >= after_bytes or (freed > 0 and since_s >= every_s)

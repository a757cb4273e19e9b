"""Memory made ready ahead of an automaton's next growth, off the decoding step (`Spares`).

An automaton's arrays double when they are full, inside whichever call filled them,
and that call is most often a decoding step's mask. Most of a doubling's time is not
the copy: it is the operating system handing over the fresh pages on their first
touch. On the machines we measure on, doubling a 48 MB hash table took 100 to 200 ms
of one step (see `empty` for why so much). `Spares` has a background thread
allocate the next size of an array, and touch the pages its growth will write, once the
array is most of the way to full; the growth then takes that array and copies into
memory that is already there.

Owns the arrays made in the background (on `offstep`'s thread) until they are taken.
Must not touch an automaton's own arrays: the automaton asks for a spare (`prepare`)
and swaps it in under its own lock (`take`).
"""

from __future__ import annotations

import math
import mmap
import threading
import weakref
from concurrent.futures import Future, wait

import numpy as np

from structgen.automata import kernels, offstep

# Arrays smaller than this grow in the step: their pages cost well under a millisecond.
MIN_SPARE_BYTES = 1 << 20
# A spare is made once an array holds this share of what it holds when it must grow.
AHEAD_AT = 0.75
# ... and an automaton's hash table, earlier: it is the largest array and the last to be
# ready, since its spare waits behind the others' on the one background thread. At 0.75,
# a walk that filled a 262k-slot table in a few masks found its spare not made yet (the
# growth then filled 25 MB in the step: 20-25 ms); at 0.5 it was ready (6 ms).
HASH_AHEAD_AT = 0.5

# numpy asks the kernel for huge pages (MADV_HUGEPAGE) for every array of 4 MB or more.
# Where the kernel has none free it compacts memory inside the page fault: filling a
# fresh 48 MB array took 10 ms with huge pages at hand and 160-220 ms without, against a
# steady 40 ms on small pages (these machines: THP "madvise", defrag "madvise"). An
# automaton's arrays grow while requests decode, so those of that size are anonymous
# mappings of our own, which ask for nothing (`empty`): small pages where THP is
# "madvise", and huge pages without compaction in the fault where it is "always".
NUMPY_HUGE_PAGE_BYTES = 4 << 20


def empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An unwritten C-contiguous array: from numpy below its huge-page size, where the
    allocator hands back memory freed before (already paged in), and on an anonymous
    mapping of our own from it (see above), unmapped when the array and its views are
    gone. (Every array on a fresh mapping took TBM's p90 on MaskBench-dev up 1.26x: an
    automaton's small arrays double many times, and each doubling faulted in new pages.)"""
    count = math.prod(shape)
    nbytes = count * np.dtype(dtype).itemsize
    if nbytes < NUMPY_HUGE_PAGE_BYTES:
        return np.empty(shape, dtype=dtype)
    mapping = mmap.mmap(-1, nbytes)
    return np.frombuffer(mapping, dtype=dtype, count=count).reshape(shape)


def zeroed(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An array of zeros: a large one on fresh pages not yet touched (`empty`), which the
    kernel zeroes as they are first written."""
    array = empty(shape, dtype)
    if array.nbytes < NUMPY_HUGE_PAGE_BYTES:
        array.fill(0)
    return array


def filled(shape: tuple[int, ...], dtype, ones: bool) -> np.ndarray:
    """`empty`, every byte 0xFF (ones) or 0, written without the interpreter lock."""
    array = empty(shape, dtype)
    kernels.flat_kernels.fill_bytes(array, 0xFF if ones else 0)
    return array


def _make_if_alive(spares: "weakref.ref[Spares]", *args) -> None:
    """A queued job holds its automaton's Spares weakly: the spares of an automaton
    dropped meanwhile (a grammar evicted, a benchmark's next schema) are not made, and
    do not hold up those of the automata still decoding."""
    alive = spares()
    if alive is not None:
        alive.make(*args)


class Spares:
    """The spare arrays of one automaton, by name (one per array it grows).

    `prepare(name, shape, dtype, nbytes, ones, touched_rows)` asks for an array of that
    shape (`nbytes` in all) to be made in the background: every bit set throughout
    (`ones`: -1 in every item), or else left unwritten but for its first `touched_rows`
    rows, zeroed (the rows a growth copies into; the rest are written one by one as they
    are used, and stay unbacked until then). `take(name, shape, dtype)` hands it over
    if it is ready and of that shape. The pages are touched without the interpreter
    lock (`flat_kernels.fill_bytes`)."""

    def __init__(self) -> None:
        self._ready: dict[str, tuple[np.ndarray, int]] = {}  # name: (array, bytes touched)
        self._jobs: dict[str, Future | None] = {}  # name: the job making its spare
        self._lock = threading.Lock()

    def prepare(self, name: str, shape: tuple[int, ...], dtype, nbytes: int, ones: bool = False,
                touched_rows: int = 0) -> None:
        if nbytes < MIN_SPARE_BYTES:  # (first: this is asked after every automaton call)
            return
        with self._lock:
            ready = self._ready.get(name)
            if name in self._jobs or (ready is not None and ready[0].shape == shape):
                return
            self._ready.pop(name, None)  # made for a size the array has since passed
            self._jobs[name] = None  # asked for: its job is kept below, unless it has already run
        job = offstep.executor().submit(_make_if_alive, weakref.ref(self), name, shape, dtype, ones, touched_rows)
        with self._lock:
            if name in self._jobs and self._jobs[name] is None:
                self._jobs[name] = job

    def make(self, name: str, shape: tuple[int, ...], dtype, ones: bool, touched_rows: int) -> None:
        made = None  # (array, bytes touched) once it is whole
        try:
            array = empty(shape, dtype)
            touched = array if ones else array[:touched_rows]
            kernels.flat_kernels.fill_bytes(touched, 0xFF if ones else 0)  # the first touch, off the step
            made = (array, touched.nbytes)
        except MemoryError:
            pass  # the growth will allocate (and fail) in the step, as without spares
        finally:  # whatever happened, the name is no longer pending, and only a whole array is kept
            with self._lock:
                self._jobs.pop(name, None)
                if made is not None:
                    self._ready[name] = made

    def take(self, name: str, shape: tuple[int, ...], dtype, wait_made: bool = True) -> np.ndarray | None:
        """The spare made for `name`, if it has this shape and dtype. One still being
        made is waited for (the rest of its work is less than all of it in the step),
        unless not `wait_made`; one still queued is dropped."""
        with self._lock:
            job = self._jobs.get(name)
        if job is not None and not job.cancel():
            if not wait_made:
                return None  # (once made it is kept, and dropped when a larger size is asked for)
            wait([job])
        with self._lock:
            self._jobs.pop(name, None)
            ready = self._ready.pop(name, None)
        if ready is None or ready[0].shape != shape or ready[0].dtype != np.dtype(dtype):
            return None  # (one of another shape is dropped: the array has passed it)
        return ready[0]

    def nbytes(self) -> int:
        """Memory the spares hold: the pages they have touched."""
        with self._lock:
            return sum(touched for _, touched in self._ready.values())

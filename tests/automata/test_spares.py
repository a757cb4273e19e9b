"""Spare arrays made ahead of an automaton's growth: what `Spares` hands over, and that
growths which take them leave every mask as it was."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import structgen
from structgen.automata import flat, offstep, spares
from structgen.automata.spares import Spares
from tests.automata.test_flat import SCHEMAS, _both, _tiny_store, same_masks_on_walks


def _ready(pool: Spares, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while pool.nbytes() == 0:
        assert time.monotonic() < deadline, "the background thread made no spare"
        time.sleep(0.005)


def test_a_spare_is_made_in_the_background_and_taken_once():
    pool = Spares()
    pool.prepare("hash", (1 << 16, 6), np.int64, (1 << 16) * 48, ones=True)  # 3 MB
    _ready(pool)
    assert pool.nbytes() == (1 << 16) * 6 * 8
    assert pool.take("hash", (1 << 15, 6), np.int64) is None  # another shape: not this one
    pool.prepare("hash", (1 << 16, 6), np.int64, (1 << 16) * 48, ones=True)
    _ready(pool)
    array = pool.take("hash", (1 << 16, 6), np.int64)
    assert array.shape == (1 << 16, 6) and (array == -1).all()
    assert pool.take("hash", (1 << 16, 6), np.int64) is None and pool.nbytes() == 0


def test_a_table_spare_counts_only_the_rows_it_touched():
    pool = Spares()
    pool.prepare("table", (8192, 256), np.int32, 8192 * 1024, touched_rows=2048)  # 8 MB, 2 MB of it written
    _ready(pool)
    assert pool.nbytes() == 2048 * 256 * 4
    table = pool.take("table", (8192, 256), np.int32)
    assert table.shape == (8192, 256) and not table[:2048].any()


def test_small_arrays_get_no_spare():
    pool = Spares()
    pool.prepare("frames", (1024, 5), np.int64, 1024 * 40, ones=True)  # 40 KB: grown in the step
    time.sleep(0.05)
    assert pool.nbytes() == 0 and pool.take("frames", (1024, 5), np.int64) is None


class _AtOnce:
    """An executor that runs what it is given before `submit` returns, so that every
    growth after a `prepare` finds its spare ready."""

    def submit(self, fn, *args):
        fn(*args)


@pytest.mark.parametrize("schema", SCHEMAS[:4], ids=range(4))
def test_masks_are_right_when_growths_take_spares(monkeypatch, smollm2_vocab, schema):
    """With a store that is full at every turn and a spare made for every array, the
    growths copy into spares (the hash table drains into its own), and the masks still
    equal the Python automaton's."""
    monkeypatch.setattr(flat, "_new_store", _tiny_store)
    monkeypatch.setattr(spares, "MIN_SPARE_BYTES", 0)
    monkeypatch.setattr(offstep, "executor", lambda: _AtOnce())
    taken = []
    take = Spares.take

    def counted_take(self, name, shape, dtype, **how):
        array = take(self, name, shape, dtype, **how)
        taken.append((name, array is not None))
        return array

    monkeypatch.setattr(Spares, "take", counted_take)
    python, compiled = _both(monkeypatch, lambda: structgen.compile_json_schema(schema, smollm2_vocab, warm_s=0))
    same_masks_on_walks(python, compiled, smollm2_vocab, walks=6, steps=50)
    used = {name for name, hit in taken if hit}
    assert {f"store{flat.S_HASH}", f"store{flat.S_FRAMES}", f"store{flat.S_ITEMS}"} <= used


def test_a_spare_that_fails_to_be_made_is_asked_for_again(monkeypatch):
    """A job that raises keeps nothing and leaves nothing pending: the next growth's
    spare is made, whole."""
    from structgen.automata import kernels

    fill = kernels.flat_kernels.fill_bytes
    pool = Spares()
    monkeypatch.setattr(offstep, "executor", lambda: _AtOnce())
    monkeypatch.setattr(kernels.flat_kernels, "fill_bytes", lambda array, value: 1 / 0, raising=False)
    with pytest.raises(ZeroDivisionError):
        pool.prepare("hash", (1 << 16, 6), np.int64, (1 << 16) * 48, ones=True)
    monkeypatch.setattr(kernels.flat_kernels, "fill_bytes", fill)
    assert pool.nbytes() == 0  # the half-made array is not kept
    pool.prepare("hash", (1 << 16, 6), np.int64, (1 << 16) * 48, ones=True)
    array = pool.take("hash", (1 << 16, 6), np.int64)
    assert array is not None and (array == -1).all()


def test_the_spares_of_a_dropped_automaton_are_not_made(monkeypatch):
    """Jobs still queued for an automaton that is gone are skipped: they would hold up the
    spares of the automata still decoding."""
    import gc
    from concurrent.futures import ThreadPoolExecutor

    made = []
    make = Spares.make
    monkeypatch.setattr(Spares, "make", lambda self, *args: (made.append(args[0]), make(self, *args)))
    executor = ThreadPoolExecutor(max_workers=1)
    monkeypatch.setattr(offstep, "executor", lambda: executor)
    gate = threading.Event()
    executor.submit(gate.wait)  # holds the queue until both automata have asked
    dropped, kept = Spares(), Spares()
    dropped.prepare("dropped", (1 << 16, 6), np.int64, (1 << 16) * 48, ones=True)
    kept.prepare("kept", (1 << 16, 6), np.int64, (1 << 16) * 48, ones=True)
    del dropped
    gc.collect()
    gate.set()
    executor.shutdown(wait=True)
    assert made == ["kept"] and kept.take("kept", (1 << 16, 6), np.int64) is not None


def test_an_array_most_of_the_way_to_full_is_made_ahead_of_its_first_growth(monkeypatch, smollm2_vocab):
    """The check after each automaton call asks for an array's next size once it is
    three quarters full, so even its first growth finds a spare ready (a growth itself
    only asks for the size after its own)."""
    monkeypatch.setattr(spares, "MIN_SPARE_BYTES", 0)
    monkeypatch.setattr(offstep, "executor", lambda: _AtOnce())
    first_takes: dict[str, bool] = {}
    take = Spares.take

    def recorded_take(self, name, shape, dtype, **how):
        array = take(self, name, shape, dtype, **how)
        first_takes.setdefault(name, array is not None)
        return array

    monkeypatch.setattr(Spares, "take", recorded_take)
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string", "maxLength": 40} for i in range(12)}}
    grammar = structgen.compile_json_schema(schema, smollm2_vocab, warm_s=1.0)  # its warm-up grows the automaton
    assert first_takes and all(first_takes.values()), first_takes

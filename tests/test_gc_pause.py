"""The collector pause around compiles (`structgen.gc_pause`): off while any compile
runs, on again after the last one (across threads), left off if it was off before, and
a real compile runs with the collector off and leaves it on."""

from __future__ import annotations

import gc
import threading

import pytest

import structgen
from structgen import gc_pause
from structgen.grammar.json_schema import compiler as schema_compiler


@pytest.fixture(autouse=True)
def collector_on():
    gc.enable()
    yield
    gc.enable()


def test_nested_pauses_end_with_the_outer_one():
    with gc_pause.paused():
        assert not gc.isenabled()
        with gc_pause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_last_thread_to_finish_turns_the_collector_back_on():
    first_in, release_first = threading.Event(), threading.Event()

    def first():
        with gc_pause.paused():
            first_in.set()
            release_first.wait(10)

    thread = threading.Thread(target=first)
    thread.start()
    first_in.wait(10)
    with gc_pause.paused():
        pass
    assert not gc.isenabled()  # the first compile still runs
    release_first.set()
    thread.join(10)
    assert gc.isenabled()


def test_a_collector_off_before_stays_off():
    gc.disable()
    with gc_pause.paused():
        pass
    assert not gc.isenabled()


def test_a_schema_compiles_with_the_collector_off_and_leaves_it_on(monkeypatch, smollm2_vocab):
    seen = []
    compile_root = schema_compiler.SchemaCompiler.compile_root

    def spy(self, *args, **kwargs):
        seen.append(gc.isenabled())
        return compile_root(self, *args, **kwargs)

    monkeypatch.setattr(schema_compiler.SchemaCompiler, "compile_root", spy)
    structgen.clear_cache()
    grammar = structgen.compile_json_schema({"type": "object", "properties": {"gc": {"type": "integer"}}}, smollm2_vocab)
    assert grammar.matcher() is not None
    assert seen == [False] and gc.isenabled()

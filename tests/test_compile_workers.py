"""Compiles whose Python half runs in worker processes (structgen.compile_workers): the
grammar that comes back masks exactly as one compiled in-process, errors keep their
type and JSON pointer, and a worker that dies fails only its own compile."""

from __future__ import annotations

import os

import numpy as np
import pytest

import structgen
from structgen import background, compile_workers

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                           "tags": {"type": "array", "items": {"enum": ["a", "bb", "ccc"]}}},
          "required": ["name", "tags"]}
PREFIXES = [b"", b'{"name": "', b'{"name": "ab', b'{"name": "ab", "tags": [', b'{"name": "ab", "tags": ["bb"']


@pytest.fixture(scope="module")
def workers():
    compile_workers.start(1)
    yield
    compile_workers.stop()


def masks_along(grammar, prefixes):
    out = []
    for prefix in prefixes:
        state = grammar.dfa.walk(grammar.dfa.start, prefix)
        out.append(grammar.tokens_of(state).words.copy())
    return out


def test_a_worker_compiled_grammar_masks_as_an_in_process_one(smollm2_vocab, workers):
    structgen.clear_cache()
    sent = structgen.compile_json_schema(SCHEMA, smollm2_vocab, warm_s=0)
    assert sent.dfa.nfa is None  # it came back as arrays
    compile_workers.stop()
    structgen.clear_cache()
    try:
        local = structgen.compile_json_schema(SCHEMA, smollm2_vocab, warm_s=0)
    finally:
        compile_workers.start(1)
    assert local.dfa.nfa is not None
    for got, expected in zip(masks_along(sent, PREFIXES), masks_along(local, PREFIXES)):
        assert np.array_equal(got, expected)
    assert sent.example() == local.example()


def test_errors_cross_the_process_with_their_pointer(smollm2_vocab, workers):
    with pytest.raises(structgen.SchemaError) as caught:
        structgen.compile_json_schema({"allOf": [{"type": "string"}, {"type": "integer"}]}, smollm2_vocab)
    assert "admits no value" in str(caught.value) and str(caught.value).count("(at") == 1
    with pytest.raises(structgen.GrammarError) as caught:
        structgen.compile_grammar('start: "a" (', smollm2_vocab)
    assert caught.value.line == 1


def test_a_worker_that_dies_fails_only_its_compile(smollm2_vocab, workers):
    with pytest.raises(structgen.GrammarTooLargeError, match="worker process died"):
        compile_workers.run(os._exit, 1)
    grammar = structgen.compile_regex(r"[0-9]{2}x", smollm2_vocab)
    assert grammar.matcher().allowed_token_ids().size > 0


def test_background_work_takes_cores_from_the_forward_pass():
    assert background.engine_threads(2) == 2
    with background.busy():
        assert background.engine_threads(2) == 1
        assert background.engine_threads(16) == 15
        with background.busy():
            assert background.engine_threads(2, extra=1) == 1
    assert background.engine_threads(4, extra=1) == 3


def test_workers_exit_with_their_server(tmp_path):
    """A server killed outright leaves no compile worker behind."""
    import subprocess
    import sys
    import time

    code = ("import os, sys; from structgen import compile_workers\n"
            "if __name__ == '__main__':\n"
            "    compile_workers.start(2)\n"
            "    print(' '.join(str(p) for p in compile_workers.worker_pids()), flush=True)\n"
            "    os.kill(os.getpid(), 9)\n")
    script = tmp_path / "server.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 10 * compile_workers.PARENT_CHECK_S
    while any(map(running, pids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(map(running, pids))


def running(pid: int) -> bool:
    """A process that exists and is not a zombie (an orphan's exit status may wait for
    a container's init to collect it)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"

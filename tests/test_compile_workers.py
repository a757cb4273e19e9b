"""Compiles whose Python half runs in worker processes (structgen.compile_workers): the
grammar that comes back masks exactly as one compiled in-process, errors keep their
type and JSON pointer, and a worker that dies fails only its own compile."""

from __future__ import annotations

import os
import sys

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


def test_a_cancelled_compile_stops_its_worker_and_no_other():
    """Cancelling a running job kills the worker that runs it at once; a job running on
    the other worker meanwhile finishes as if nothing happened, and the pool carries on."""
    import threading
    import time

    compile_workers.start(2)
    try:
        before = set(compile_workers.worker_pids())
        cancel, outcome = threading.Event(), {}

        def other_job():
            compile_workers.run(time.sleep, 1.5)
            outcome["other_done"] = True

        other = threading.Thread(target=other_job)
        other.start()
        time.sleep(0.2)
        threading.Timer(0.3, cancel.set).start()
        started = time.monotonic()
        with pytest.raises(structgen.CompileCancelledError):
            compile_workers.run(time.sleep, 60, cancel=cancel)
        assert time.monotonic() - started < 3
        other.join(timeout=30)
        assert outcome.get("other_done")
        (killed,) = before - set(compile_workers.worker_pids())
        assert not running(killed)
        assert compile_workers.run(sum, [1, 2, 3]) == 6
        assert compile_workers.run(sum, [4, 5]) == 9  # on the slot whose worker was killed, started anew
        assert len(compile_workers.worker_pids()) == 2
    finally:
        compile_workers.stop()


def test_a_compile_cancelled_before_a_worker_is_free_never_runs():
    import threading
    import time

    compile_workers.start(1)
    try:
        busy = threading.Thread(target=compile_workers.run, args=(time.sleep, 1.0))
        busy.start()
        time.sleep(0.2)
        cancel = threading.Event()
        cancel.set()
        with pytest.raises(structgen.CompileCancelledError, match="before a worker was free"):
            compile_workers.run(os.getpid, cancel=cancel)
        busy.join()
        assert compile_workers.run(os.getpid) in compile_workers.worker_pids()
    finally:
        compile_workers.stop()


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


SLOW_ALTERNATIVES = 20_000


def test_a_client_that_leaves_mid_compile_cancels_it(tmp_path):
    """On the real server: a client that gives up while its slow compile runs (a pattern
    of 20,000 alternatives, which takes past its 10 s budget) has the compile cancelled,
    counted in /metrics, long before the budget; the server serves on."""
    import random
    import string
    import time

    import httpx
    from tests.server.serve_process import serve_process

    rng = random.Random(7)
    words = ("".join(rng.choices(string.ascii_lowercase, k=20)) for _ in range(SLOW_ALTERNATIVES))
    slow = {"type": "string", "pattern": "^(" + "|".join(words) + ")$"}
    body = {"max_tokens": 4, "messages": [{"role": "user", "content": "Pick."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "e", "schema": slow}}}
    with serve_process(tmp_path / "serve.log", 300) as server:
        url = server.url
        left = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url + "/v1/chat/completions", json=body, timeout=httpx.Timeout(30, read=0.5))
        while "structgen_grammar_compiles_cancelled_total 1.0" not in httpx.get(url + "/metrics").text:
            assert time.monotonic() - left < 8, "the compile was not cancelled"
            time.sleep(0.2)
        small = {**body, "response_format": {"type": "json_schema",
                                             "json_schema": {"name": "s", "schema": {"enum": ["yes", "no"]}}}}
        reply = httpx.post(url + "/v1/chat/completions", json=small, timeout=120)
        assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] in ('"yes"', '"no"')


def allocate_and_free_a_pinned_burst() -> int:
    """A job that leaves its heap full of freed chunks, pinned by small ones it keeps (as
    a large IR's build does); returns the worker's resident bytes at its peak."""
    from structgen import memory

    big, small = [], []
    for _ in range(3000):  # 64 KiB chunks, each followed by a small one kept
        big.append(bytearray(64 << 10))
        small.append(bytearray(64))
    _PINNED.append(small)
    peak = memory.resident_bytes()
    big.clear()
    return peak


_PINNED: list = []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_a_worker_gives_back_what_a_large_job_freed():
    from structgen import memory

    compile_workers.start(1)
    try:
        idle = compile_workers.run(memory.resident_bytes)
        peak = compile_workers.run(allocate_and_free_a_pinned_burst)
        after = compile_workers.run(memory.resident_bytes)
    finally:
        compile_workers.stop()
    assert peak - idle > 150 << 20  # the burst was resident
    assert after - idle < 50 << 20, (idle >> 20, peak >> 20, after >> 20)

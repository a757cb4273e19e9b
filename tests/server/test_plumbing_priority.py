"""priority.py on real threads: the threads a process had before its engine started go
to the plumbing niceness, threads started after keep theirs, none is raised, and a
thread a lowered one starts inherits the lower priority. It runs in a child process,
since a niceness once raised cannot be lowered again without privileges."""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading

import pytest

from server.ray_serve import priority

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priorities are Linux's")


def test_threads_from_before_the_engine_go_below_it_and_none_rises():
    if os.getpriority(os.PRIO_PROCESS, 0) >= priority.PLUMBING:
        pytest.skip("the tests already run at the plumbing's niceness or lower")
    child = multiprocessing.get_context("spawn").Process(target=lower_in_a_process_of_threads)
    child.start()
    child.join(60)
    assert child.exitcode == 0, "the checks failed in the child process (its traceback is above)"


def niceness(tid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, tid)


def lower_in_a_process_of_threads():
    base = niceness(threading.get_native_id())
    done = threading.Event()
    ids: dict[str, int] = {}

    def start(name: str, niceness_first: int | None = None) -> threading.Thread:
        started = threading.Event()

        def park():
            if niceness_first is not None:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness_first)
            ids[name] = threading.get_native_id()
            started.set()
            done.wait()

        thread = threading.Thread(target=park, name=name)
        thread.start()
        started.wait()
        return thread

    workers = [start("ray-io"), start("already-lower", priority.PLUMBING + 5)]
    plumbing = priority.threads()
    assert {ids["ray-io"], ids["already-lower"], threading.get_native_id()} <= plumbing
    workers.append(start("engine"))
    try:
        assert priority.lower(plumbing) == 2  # ray-io and this thread; already-lower stays
        assert niceness(ids["engine"]) == base
        assert niceness(ids["ray-io"]) == priority.PLUMBING
        assert niceness(ids["already-lower"]) == priority.PLUMBING + 5
        assert niceness(threading.get_native_id()) == priority.PLUMBING
        workers.append(start("started-by-a-lowered-thread"))
        assert niceness(ids["started-by-a-lowered-thread"]) == priority.PLUMBING
    finally:
        done.set()
        for thread in workers:
            thread.join()

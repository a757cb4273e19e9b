"""engine.host_memory: glibc's thresholds are set once per process, and the engine's
option says whether a CPU engine sets them."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

from structgen.engine import host_memory


def glibc() -> bool:
    try:
        ctypes.CDLL(None).gnu_get_libc_version  # noqa: B018
    except (OSError, AttributeError):
        return False
    return True


@pytest.mark.skipif(not glibc(), reason="the thresholds are glibc's")
def test_the_thresholds_are_accepted_and_set_once():
    assert host_memory.keep_freed_memory()
    assert host_memory.keep_freed_memory() and host_memory.freed_memory_kept()  # again: nothing to do


@pytest.mark.skipif(not glibc(), reason="the thresholds are glibc's")
def test_a_cpu_engine_sets_them_unless_told_not_to():
    script = ("import sys; from structgen.engine import Engine, host_memory; "
              "from tests.engine.tiny_models import TINY_SMOLLM_SHAPE; "
              "Engine(TINY_SMOLLM_SHAPE, load_format='dummy', device='cpu', kv_cache_bytes=1 << 20, "
              "keep_freed_memory=sys.argv[1] == 'on'); print(host_memory.freed_memory_kept())")
    for option, expected in (("on", "True"), ("off", "False")):
        done = subprocess.run([sys.executable, "-c", script, option], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().splitlines()[-1] == expected

"""Run a test class again in a subprocess with TRITON_INTERPRET=1.

Triton decides whether to interpret when a kernel is defined (module import), so the
Triton tests run in a fresh pytest process with the variable set. Shared by the kernel
test files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.paths import REPO


def assert_passes_interpreted(test_file: str, node: str = "TestTritonInterpreted") -> None:
    path = Path(test_file).resolve()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"{path}::{node}"],
        check=False, cwd=REPO, env={**os.environ, "TRITON_INTERPRET": "1"},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-4000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-2000:]

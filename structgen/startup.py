"""What a starting server is doing: one line per start-up phase, with its duration.

Owns the phase lines (`phase`) and whether they are printed (`report`, turned on by
`structgen serve`; a library user's engine starts silently). A phase prints its name
when it begins and its duration when it ends, so a slow one never looks like a hang.
Must not decide anything about the phases themselves: their owners open them.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Iterator

_report = {"on": False}


def report(on: bool = True) -> None:
    """Print the phases from now on (or not)."""
    _report["on"] = on


@contextmanager
def phase(what: str) -> Iterator[None]:
    """`structgen: WHAT ... N.N s` around the block, when reporting."""
    if not _report["on"]:
        yield
        return
    print(f"structgen: {what} ...", end="", file=sys.stderr, flush=True)
    started = time.perf_counter()
    try:
        yield
    except BaseException:
        print(" failed", file=sys.stderr, flush=True)
        raise
    print(f" {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)

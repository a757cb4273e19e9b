"""What a run records about where its figures come from: the checkout it measures
(`REPO`), a hash of structgen's sources at its start and end (`structgen_source_hash`),
and the machine (`cpu_info`).

Must not load engines or time anything.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def structgen_source_hash() -> str | None:
    """sha256 over structgen/**/*.py: a run whose sources change mid-way mixes versions
    (restarted workers import the new code)."""
    import hashlib

    root = REPO / "structgen"
    if not root.is_dir():
        return None
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode() + b"\0")
        try:
            h.update(f.read_bytes())
        except OSError:
            pass
    return h.hexdigest()[:16]


def cpu_info():
    model = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem = round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "usable_cores": usable, "memory_gib": mem,
            "platform": platform.platform(), "python": platform.python_version()}

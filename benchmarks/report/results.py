"""Reading the results files: `read_results` (any file), `suite_results` (a suite's own
file in a results folder), and the labels a file's record of its run gives:
`machine_label`, `structgen_commit`, `run_label` (one line for a plot's title).

`CONSTRAINED_GPU_FILE` names the constrained suite's second file, from a GPU machine.
Must not format tables or write either document.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from benchmarks.catalog import SUITES

CONSTRAINED_GPU_FILE = "constrained_gpu.json"  # constrained.py run on a GPU machine with --out


def read_results(path: Path) -> dict | None:
    """A results file's JSON object; None when it is missing or not a JSON object."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        print(f"{path}: not readable as JSON ({error})", file=sys.stderr)
        return None
    return data if isinstance(data, dict) else None


def suite_results(suite: str, results_dir: Path) -> dict | None:
    return read_results(Path(results_dir) / SUITES[suite].results_file)


def run_label(data: dict) -> str:
    """One short line for a plot title: model, machine, structgen commit."""
    parts = []
    model = data.get("model") or data.get("shape")
    if model:
        parts.append(" ".join(str(x) for x in (model, data.get("dtype")) if x))
    parts.append(machine_label(data, memory=False))
    commit = structgen_commit(data)
    if commit:
        parts.append(f"structgen {commit}")
    return "; ".join(filter(None, parts))


def machine_label(data: dict, memory: bool) -> str:
    """The GPU, or the CPU and its cores (maskbench/cfgbench's `machine`, the other scripts'
    `environment`), with torch's thread count where recorded."""
    env, machine = data.get("environment", {}), data.get("machine", {})
    if env.get("gpu"):
        return env["gpu"]
    if machine:
        size = f", {machine.get('memory_gib')} GiB" if memory else ""
        return f"{machine.get('cpu', 'CPU')}, {machine.get('cores', '?')} cores{size}"
    if env.get("cpu_count"):
        return ", ".join(filter(None, (env.get("machine"), f"{env['cpu_count']} cores"))) + torch_threads(env)
    return ""


def torch_threads(env: dict) -> str:
    threads = env.get("threads")
    return f", {threads} torch thread{'s' * (threads != 1)}" if threads else ""


def structgen_commit(data: dict) -> str | None:
    env = data.get("environment", {})
    if env.get("commit"):
        return env["commit"] + (" + uncommitted changes" if env.get("structgen_dirty") else "")
    version = data.get("versions", {}).get("structgen") or ""  # maskbench/cfgbench: "0.1.0 (1f6c66b)"
    found = re.search(r"\((\w+)\)", version)
    return found.group(1) if found else None

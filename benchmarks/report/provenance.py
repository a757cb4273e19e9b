"""The lines under a suite's tables in RESULTS.md: where the figures come from
(`provenance`: structgen commit, machine, versions, load, date) and the command that
reproduces them (`command`, `reproduce`, and the options of each script that records
them: `maskbench_command`, `cfgbench_command`, `engine_command`, `args_command`).

An option at its default is left out of a command, so that results written in one
checkout render the same in another (`data_option`). Must not render tables.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from benchmarks.report.results import machine_label, structgen_commit
from benchmarks.catalog import SUITES


def provenance(data: dict) -> str:
    """Where the figures come from: structgen commit, machine, versions, load, date."""
    env, machine, versions = data.get("environment", {}), data.get("machine", {}), data.get("versions", {})
    parts = [f"structgen {structgen_commit(data) or '(commit not recorded)'}"]
    parts.append(machine_label(data, memory=True))
    tools = {**{k: v for k, v in versions.items() if not k.startswith("structgen") and isinstance(v, str)},
             **{k: env[k] for k in ("python", "torch", "triton", "transformers", "xgrammar", "httpx") if env.get(k)}}
    parts.append(", ".join(f"{name} {version}" for name, version in tools.items()))
    if machine.get("loadavg_1min_start_end"):
        start, end = machine["loadavg_1min_start_end"]
        parts.append(f"load average {start:.1f} at the start, {end:.1f} at the end")
    elif env.get("load_avg") or env.get("loadavg"):
        parts.append(f"load average {(env.get('load_avg') or env['loadavg'])[0]:.1f} at the start")
    changed = versions.get("structgen_sources_changed_during_run")
    if changed and changed.get("structgen_worker_restarts"):
        parts.append("structgen's sources changed during the run and restarted workers loaded the new code: "
                     "its figures mix versions")
    elif changed:
        parts.append("structgen's sources changed during the run, but no structgen worker restarted: every "
                     "structgen figure is from the code at the start")
    if env.get("time"):
        parts.append(env["time"])
    return "Measured with " + "; ".join(filter(None, parts)) + "."


def command(script: str, options: dict) -> str:
    """`python benchmarks/SCRIPT.py --option value ...`; an option that is off (None, False,
    empty, 0) is left out, which for these scripts is also its default."""
    words = [f"python benchmarks/{script}.py"]
    for name, value in options.items():
        if value in (None, False, "", 0, [], "None", "False", "0"):  # constrained.py stores strings
            continue
        flag = "--" + name.replace("_", "-")
        if value is True or value == "True":
            words.append(flag)
        else:
            if isinstance(value, list):
                value = ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
            elif isinstance(value, float):
                value = f"{value:g}"
            value = str(value)
            if value.startswith("-"):  # e.g. --server-args "--max-num-seqs 64": one argument
                words.append(f"{flag}={shlex.quote(value)}")
            else:
                words.append(f"{flag} {shlex.quote(value)}")
    return " ".join(words)


def output_option(suite: str, file_name: str) -> dict:
    """The output option, when the results file is not the suite's usual one."""
    if file_name == SUITES[suite].results_file:
        return {}
    return {SUITES[suite].output_flag.lstrip("-"): f"benchmarks/results/{file_name}"}


def data_option(path: str) -> dict:
    """--data, unless it is the scripts' default (../shared/data/maskbench-dev).

    Compared by its last three parts: the results were written on a machine whose checkout
    lies elsewhere than the one rendering them (CI clones into a fresh directory).
    """
    return {} if Path(path).parts[-3:] == ("shared", "data", "maskbench-dev") else {"data": path}


def maskbench_command(data: dict) -> str:
    s = data["settings"]
    return command("maskbench", {
        **data_option(s["data"]), "engines": [*s["engines"], *s["skipped"]], "limit": s["limit"],
        "seed": s["seed"], "filter": s["filter"], "timeout": s["timeout_s"],
        "engine_timeouts": ",".join(f"{e}={t:g}" for e, t in s["engine_timeouts_s"].items()),
        "test_timeout": s["test_timeout_s"], "jobs": s["jobs"], "mem_limit_gb": s["mem_limit_gb"]})


def cfgbench_command(data: dict) -> str:
    s = data["settings"]
    limits = set(s["limits"].values())
    hard_timeout = re.search(r"\+ ([\d.]+) s", s["test_timeout_s"])  # recorded as text
    return command("cfgbench", {
        **data_option(s["data"]), "sections": s["sections"], "engines": [*s["engines"], *s["skipped"]],
        "quick": s["quick"], "limit": limits.pop() if len(limits) == 1 else None,
        "ttfm_repeats": s["ttfm_repeats"], "timeout": s["timeout_s"], "walk_budget": s["walk_budget_s"],
        "test_timeout": float(hard_timeout.group(1)) if hard_timeout else None, "mem_limit_gb": s["mem_limit_gb"]})


def engine_command(data: dict) -> str:
    # engine.py records no options: the scenarios and runs are read off the results.
    scenarios = [name for name in ("single", "batch", "prefix") if name in data]
    sequential = len(data.get("batch", {}).get("hf_sequential_tok_s", []))
    return command("engine", {"scenarios": scenarios, "runs": data["runs"], "sequential_runs": sequential})


def args_command(script: str, args: dict, suite: str, file_name: str, skip=("out", "output")) -> str:
    """For the scripts that store their argparse options (engine_gpu, constrained, serve)."""
    options = {k: v for k, v in args.items() if k not in skip}
    return command(script, {**options, **output_option(suite, file_name)})


def reproduce(command_line: str) -> str:
    return f"Reproduce: `{command_line}`"

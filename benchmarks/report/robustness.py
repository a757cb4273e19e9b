"""The robustness suites' RESULTS.md blocks: compiles beside decoding (`render_isolation`,
isolation.json), hostile input (`render_fuzz`, fuzz.json) and the soak (`render_soak`,
soak.json). Their README rows are start-up's headline (startup.py).

Reads only those suites' results files; must not place blocks in the documents
(documents.py does).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from benchmarks.report.formats import table
from benchmarks.report.provenance import reproduce
from benchmarks.report.results import suite_results


def render_isolation(results_dir: Path) -> list[str]:
    data = suite_results("isolation", results_dir)
    if data is None:
        return []
    gaps, queue = data["gaps"], data["queue"]
    rows = [["a stream's largest gap while a fresh 20,000-value enum compiles, over its median gap alone",
             f"{gaps['max_gap_during_compile_ms']:.0f} ms / {gaps['median_gap_alone_ms']:.0f} ms "
             f"({gaps['gap_ratio']:.2f}x)", "<= 2x"],
            ["a small fresh compile sent just after that enum: later than alone by",
             f"{queue['delay_ms']:.0f} ms ({1e3 * queue['small_alone_s']:.0f} ms alone)", "<= 100 ms"]]
    return ["`structgen serve` on the embedded model, medians of the runs:",
            table(["measure", "result", "target"], rows, numeric_from=1),
            reproduce("python benchmarks/isolation.py --runs 3")]


def render_fuzz(results_dir: Path) -> list[str]:
    data = suite_results("fuzz", results_dir)
    if data is None:
        return []
    rows = [[outcome, f"{count:,}"] for outcome, count in sorted(data["outcomes"].items())]
    problems = len(data["problems"])
    return [f"{data['inputs']:,} generated inputs in {data['minutes']:g} minutes (schemas, deep schemas, MaskBench-dev "
            f"schemas, regexes, lark and GBNF grammars, request bodies); {problems} problems "
            "(5xx, invalid output, non-OpenAI error bodies, hangs, unhealthy server):",
            table(["outcome", "inputs"], rows),
            reproduce(f"python benchmarks/fuzz.py --minutes {data['minutes']:g}")]


def render_soak(results_dir: Path) -> list[str]:
    data = suite_results("soak", results_dir)
    if data is None:
        return []
    r = data["result"]
    server_args = data.get("server_args") or ""
    options = f" --server-args {shlex.quote(server_args)}" if server_args else ""
    setup = f" (`structgen serve {server_args}`)" if server_args else ""
    return [f"{data['clients']} clients for {data['minutes']:g} minutes{setup}: {soak_summary(r)}",
            reproduce(f"python benchmarks/soak.py --minutes {data['minutes']:g} --clients {data['clients']}{options}")]


def soak_summary(r: dict) -> str:
    requests = sum(r["outcomes"].values())
    errors = sum(n for outcome, n in r["outcomes"].items() if outcome.split(": ", 1)[1].startswith("5"))
    memory = "no memory samples after the settle time"
    if r["settled_mb"] is not None:
        memory = (f"resident memory {r['settled_mb']:,.0f} MB at ten minutes, {r['end_mb']:,.0f} MB at the end "
                  f"({100 * r['growth_end']:+.1f}%), peak {100 * r['growth_peak']:+.1f}%")
    return (f"{requests:,} requests ({r['fresh_schemas']:,} fresh schemas), {errors} 5xx, "
            f"{len(r['problems'])} other problems; {memory}.")

#!/usr/bin/env python3
"""Tool-call grammars: how long the grammar of a request with N tools takes to compile
and to give its first mask, for tool_choice "required" and "auto", in structgen (the
server's grammar) and its peers xgrammar and llguidance, with the SmolLM2 tokenizer.

For each number of tools (1, 10, 50, 200) and each seed, a tool set is drawn from the
functions of MaskBench-dev's Glaive and BFCL records; every engine compiles it cold and
fills its first mask, and one valid call is walked through the grammar token by token.
Figures are medians over the seeds, in ms. Then structgen alone: 50 tools cold, the same
50 with one replaced while the compile cache keeps the first set, and that second set
cold: whether one changed tool recompiles everything.

What each engine compiles, and where a peer's language differs from ours, is said in
benchmarks/tool_bench/engines.py. Engines run one after the other in this process.

This script owns the run: its options, the engines' setup, the results file. The parts
are in benchmarks/tool_bench/ (functions, engines, measure, printing); it must not
drive an engine itself.

    python -m benchmarks.tools                  (or: structgen bench tools)
    python benchmarks/tools.py --sizes 1,10 --samples 2 --engines structgen
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.masks.provenance import cpu_info, structgen_source_hash  # noqa: E402
from benchmarks.masks.tokenizer import load_tokenizer  # noqa: E402
from benchmarks.peers import pkg_version  # noqa: E402
from benchmarks.tool_bench.engines import TOOL_ENGINES  # noqa: E402
from benchmarks.tool_bench.functions import load_functions  # noqa: E402
from benchmarks.tool_bench.measure import cold_row, reuse_row, warm_up  # noqa: E402
from benchmarks.tool_bench.printing import print_report  # noqa: E402

TOOL_CHOICES = {"required": False, "auto": True}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "maskbench-dev"),
                    help="the folder of MaskBench records (Glaiveai2K---*.json, BFCL_*.json)")
    ap.add_argument("--sizes", default="1,10,50,200", help="numbers of tools, comma-separated")
    ap.add_argument("--samples", type=int, default=5, help="tool sets per size (seeds 0..samples-1)")
    ap.add_argument("--engines", default=",".join(TOOL_ENGINES),
                    help="comma-separated, from: " + ", ".join(TOOL_ENGINES))
    ap.add_argument("--tool-choices", default=",".join(TOOL_CHOICES), help="comma-separated: required, auto")
    ap.add_argument("--reuse-size", type=int, default=50, help="tools in the one-replaced measurement; 0 = skip it")
    ap.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "tools.json"))
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    engines, choices = names(ap, args.engines, TOOL_ENGINES), names(ap, args.tool_choices, TOOL_CHOICES)
    functions = load_functions(Path(args.data))
    sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    if not functions or max(sizes + [args.reuse_size]) >= len(functions):
        ap.error(f"{len(functions)} functions in {args.data}: too few for {max(sizes + [args.reuse_size])} tools "
                 "(and one to replace)")
    started, load_start, source_hash = time.monotonic(), os.getloadavg(), structgen_source_hash()
    tokenizer, tokenizer_source = load_tokenizer()
    adapters, skipped = set_up(engines, tokenizer)
    if not adapters:
        sys.exit("no engine available")
    seeds = list(range(args.samples))
    cold, reuse = [], []
    for engine, ad in adapters.items():
        warm_up(ad, functions)
        cold += [cold_row(engine, ad, tokenizer, functions, size, TOOL_CHOICES[choice], seeds)
                 for choice in choices for size in sizes]
    if "structgen" in adapters and args.reuse_size:
        reuse = [reuse_row(adapters["structgen"], functions, args.reuse_size, TOOL_CHOICES[choice], seeds)
                 for choice in choices]
    settings = {"data": args.data, "functions": len(functions), "sizes": sizes, "samples": args.samples,
                "seeds": seeds, "tool_choices": choices, "reuse_size": args.reuse_size,
                "parallel_tool_calls": True, "tokenizer": f"SmolLM2-135M-Instruct ({tokenizer_source})",
                "vocab_size": len(tokenizer), "engines": {e: TOOL_ENGINES[e].settings() for e in adapters},
                "skipped": skipped, "order": "engines one after another in one process; a warm-up compile each"}
    machine = {**cpu_info(), "loadavg_1min_start_end": [round(load_start[0], 2), round(os.getloadavg()[0], 2)]}
    report = {"suite": "tools", "settings": settings, "machine": machine, "versions": versions(engines, source_hash),
              "wall_s": round(time.monotonic() - started, 1), "cold": cold, "reuse": reuse}
    write(report, Path(args.output))
    print_report(report)
    print(f"\nresults: {args.output}   wall time: {report['wall_s']:.0f} s")
    return 0


def names(ap: argparse.ArgumentParser, given: str, known: dict) -> list[str]:
    chosen = [name.strip() for name in given.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in known]
    if unknown:
        ap.error(f"unknown {', '.join(unknown)}; known: {', '.join(known)}")
    return chosen


def set_up(engines: list[str], tokenizer) -> tuple[dict, dict]:
    """({engine: adapter}, {engine: why it is skipped})."""
    adapters, skipped = {}, {}
    for engine in engines:
        ok, note = TOOL_ENGINES[engine].available()
        try:
            if ok:
                adapters[engine] = TOOL_ENGINES[engine](tokenizer)
        except Exception as e:  # noqa: BLE001 - an engine that cannot start is reported, not fatal
            ok, note = False, f"setup failed: {type(e).__name__}: {e}"[:500]
        if not ok:
            skipped[engine] = note
            print(f"note: skipping {engine}: {note}", file=sys.stderr)
    return adapters, skipped


def versions(engines: list[str], source_hash: str | None) -> dict:
    found = {"python": platform.python_version()}
    for dist in ("numpy", "transformers", "tokenizers"):
        found[dist] = pkg_version(dist)
    for engine in engines:
        found[engine] = TOOL_ENGINES[engine].version()
    found["structgen_sources_sha256"] = source_hash
    end_hash = structgen_source_hash()
    if end_hash != source_hash:
        found["structgen_sources_changed_during_run"] = {"sha256_end": end_hash}
    return found


def write(report: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())

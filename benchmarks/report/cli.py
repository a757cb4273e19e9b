"""`python -m benchmarks.report [--check]`: rewrite RESULTS.md and README.md's headline
blocks from the results, or only say whether either is out of date (exit 1 when it is).

Owns the options and what is printed; must not render (documents.py does).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.report.documents import RENDERERS, rendered_parts, stale, update
from benchmarks.report.layout import MARKED_BLOCK, README_MD, RESULTS_MD, TITLES
from benchmarks.catalog import RESULTS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.report",
        description="Regenerate benchmarks/RESULTS.md and README.md's headline tables from benchmark results.")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when either is out of date")
    parser.add_argument("--readme", type=Path, default=README_MD)
    parser.add_argument("--results-md", type=Path, default=RESULTS_MD)
    parser.add_argument("--results", type=Path, default=RESULTS, help="results folder")
    args = parser.parse_args(argv)
    headlines = [m["suite"] for m in MARKED_BLOCK.finditer(args.readme.read_text()) if m["kind"] == "headline"]
    if not headlines:
        print(f"{args.readme}: no <!-- headline:SUITE --> blocks", file=sys.stderr)
    for suite in dict.fromkeys([*TITLES, *headlines]):
        if suite not in RENDERERS:
            print(f"note: unknown suite {suite!r}: its block is left as written", file=sys.stderr)
        elif not rendered_parts(RENDERERS, suite, args.results):
            print(f"note: no results for {suite} in {args.results}: its blocks are left as written", file=sys.stderr)
    if args.check:
        found = stale(args.results, args.readme, args.results_md)
        if found:
            print("out of date (run python -m benchmarks.report): " + "; ".join(found))
            return 1
        print(f"{args.results_md} and {args.readme} are up to date ({', '.join(headlines) or 'no headlines'})")
        return 0
    changed = update(args.results, args.readme, args.results_md)
    print("updated: " + "; ".join(changed) if changed else "already up to date")
    return 0

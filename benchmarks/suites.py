"""`structgen bench <suite>` / `python -m benchmarks <suite>`: every benchmark behind one command.

Owns: running the suites of catalog.py one after another with the caller's extra
options, and the plots and result tables (benchmarks/RESULTS.md, README's headlines) made from their results
afterwards. Each suite's measuring code stays in its own script (maskbench.py,
engine.py, ...), which can still be run directly; this module must not measure anything
itself.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

from benchmarks.catalog import ALL_ORDER, REPO, RESULTS, SUITES


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="structgen bench",
        description="Run structgen's benchmarks; each prints markdown tables and writes JSON and PNG "
                    "plots to the results folder. Options after the suite name that this command does "
                    "not know go to the suite's script (see `structgen bench SUITE -- --help`).",
        epilog="suites:\n" + "\n".join(f"  {name:12} {s.about}" for name, s in SUITES.items())
               + "\n  all          every suite above (engine-gpu only with a GPU)",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite", choices=[*SUITES, "all"])
    parser.add_argument("--quick", action="store_true",
                        help="a few minutes per suite (small samples, one run); results go to "
                             "<results>/quick/ so the full figures are not overwritten")
    parser.add_argument("--results", type=Path, default=None,
                        help=f"results folder (default {RESULTS.relative_to(REPO)}, or its quick/ subfolder)")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument("--update-results", "--update-readme", action="store_true", dest="update_results",
                        help="rewrite benchmarks/RESULTS.md and README.md's headline tables from the results")
    return parser


def main(argv: list[str] | None = None) -> int:
    args, passthrough = _parser().parse_known_args(argv)
    if passthrough[:1] == ["--"]:
        passthrough = passthrough[1:]
    results = args.results or (RESULTS / "quick" if args.quick else RESULTS)
    results.mkdir(parents=True, exist_ok=True)
    names = _selected(args.suite)
    if args.suite == "all" and passthrough:
        print("structgen bench all: extra options go to every suite; give them to one suite instead",
              file=sys.stderr)
        return 2
    failed = []
    for name in names:
        status = run_suite(name, passthrough, quick=args.quick, results=results, plots=not args.no_plots)
        if status:
            failed.append(name)
    if args.update_results:
        from benchmarks.report import update

        updated = update(results)
        print("updated: " + "; ".join(updated) if updated else "result tables already up to date")
    if failed:
        print(f"failed suites: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def _selected(suite: str) -> list[str]:
    if suite != "all":
        return [suite]
    names = list(ALL_ORDER)
    if not _has_gpu():
        print("note: no CUDA device: skipping engine-gpu", file=sys.stderr)
        names.remove("engine-gpu")
    return names


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def run_suite(name: str, extra: list[str], *, quick: bool, results: Path, plots: bool) -> int:
    """Run one suite's script with its results file under `results`; 0 when it succeeded."""
    suite = SUITES[name]
    if suite.needs_gpu and not _has_gpu():
        print(f"{name}: needs a CUDA device; none here", file=sys.stderr)
        return 2
    argv = [*(suite.quick if quick else ()), suite.output_flag, str(results / suite.results_file), *extra]
    print(f"\n# structgen bench {name}: python benchmarks/{suite.module}.py {' '.join(argv)}\n", flush=True)
    started = time.monotonic()
    try:
        status = importlib.import_module(f"benchmarks.{suite.module}").main(argv) or 0
    except SystemExit as exit_:  # argparse errors and the scripts' sys.exit(message)
        status = exit_.code if isinstance(exit_.code, int) else 1
        if not isinstance(exit_.code, int) and exit_.code is not None:
            print(exit_.code, file=sys.stderr)
    print(f"\n{name}: {'done' if status == 0 else f'exit status {status}'} in {time.monotonic() - started:.0f} s")
    if status == 0 and plots:
        _plot(name, results)
    return status


def _plot(name: str, results: Path) -> None:
    try:
        from benchmarks.plots import plot_suite
    except ImportError as e:  # matplotlib is in the bench extra
        print(f"no plots ({e}); pip install -e '.[bench]'", file=sys.stderr)
        return
    for path in plot_suite(name, results):
        print(f"plot: {path}")


if __name__ == "__main__":
    sys.exit(main())

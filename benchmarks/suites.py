"""`structgen bench <suite>` / `python -m benchmarks <suite>`: every benchmark behind one command.

Owns: the list of suites (which script, which results file, what `--quick` means for
it), running them one after another with the caller's extra options, and the plots and
result tables (benchmarks/RESULTS.md, README's headlines) made from their results
afterwards. Each suite's measuring code stays in its own script (maskbench.py,
engine.py, ...), which can still be run directly; this module must not measure anything
itself.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"


@dataclass(frozen=True)
class Suite:
    module: str  # benchmarks.<module> has main(argv) -> exit status
    results_file: str  # what it writes under the results folder
    output_flag: str  # its option naming that file
    quick: tuple[str, ...]  # options of a run of a few minutes
    about: str
    needs_gpu: bool = False


SUITES: dict[str, Suite] = {
    "masks": Suite("maskbench", "maskbench.json", "--output",
                   ("--limit", "40", "--engine-timeouts", "outlines-core=5"),
                   "compile time and per-token mask time vs llguidance, xgrammar, outlines-core "
                   "(MaskBench-dev, or --schemas DIR for your own)"),
    "cfg": Suite("cfgbench", "cfgbench.json", "--output", ("--quick",),
                 "context-free grammars: json_object, recursive schemas, grammars/ vs peers"),
    "engine": Suite("engine", "engine.json", "--out", ("--runs", "1", "--scenarios", "single,prefix"),
                    "decode engine vs transformers generate (CPU, SmolLM2)"),
    "engine-gpu": Suite("engine_gpu", "engine_gpu.json", "--out",
                        ("--runs", "1", "--batches", "1,8", "--hf-batches", "1"),
                        "Llama-3-8B-shaped bf16 throughput, CUDA graphs, MBU (GPU only)", needs_gpu=True),
    "constrained": Suite("constrained", "constrained.json", "--out",
                         ("--scenarios", "overhead,jump", "--runs", "1", "--concurrency", "8",
                          "--length", "32", "--calls", "4"),
                         "constrained vs free decoding overhead, jump-forward savings, HF+xgrammar baseline"),
    "serve": Suite("serve", "serve.json", "--output", ("--quick",),
                   "load generator against structgen serve: TTFT/TPOT/e2e, goodput, validity (--chaos)"),
    "clients": Suite("clients", "clients.json", "--output",
                     ("--schemas", "5", "--clients", "openai.parse,instructor.TOOLS", "--baseline", ""),
                     "client libraries (openai, instructor, langchain, pydantic-ai, LiteLLM) on function "
                     "schemas: valid, cut by max_tokens, refused; against a baseline revision"),
    "fuzz": Suite("fuzz", "fuzz.json", "--output", ("--minutes", "2"),
                  "hostile schemas, regexes, grammars and bodies against structgen serve: no 5xx, hang "
                  "or invalid output (--minutes N)"),
    "isolation": Suite("isolation", "isolation.json", "--out", ("--runs", "1"),
                       "a 20,000-value enum compiling beside a stream: the stream's largest gap, and a "
                       "small compile sent behind it"),
    "soak": Suite("soak", "soak.json", "--out", ("--minutes", "3", "--settle-minutes", "1", "--clients", "8"),
                  "an hour of 32 clients: cached, fresh and hostile requests; memory after ten minutes, "
                  "no 5xx (--minutes N)"),
    "scale-out": Suite("scale_out", "scale_out.json", "--output", ("--quick",),
                       "structgen serve --replicas N on Ray Serve: overhead vs one engine, grammar-affinity "
                       "vs power-of-two routing (cache hits, TTFT), a replica killed mid-run"),
    "startup": Suite("startup", "startup.json", "--out", ("--runs", "1"),
                     "ready from a scratch clone: serve until listening (cold, warm), first reply, import, "
                     "first mask in a fresh process (--install: README's install too)"),
}
ALL_ORDER = ["masks", "cfg", "engine", "engine-gpu", "constrained", "serve", "clients", "fuzz", "isolation",
             "soak", "scale-out", "startup"]


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

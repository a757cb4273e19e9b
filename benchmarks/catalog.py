"""The catalogue of benchmark suites: each suite's script, results file, the option that
names that file, what `--quick` means for it and a line about it; and where the
repository and its results folder are.

Plain data that the runner (suites.py), the result tables (report/) and the plots read;
must not import any of them.
"""

from __future__ import annotations

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
    "tools": Suite("tools", "tools.json", "--output", ("--samples", "2"),
                   "tool-call grammars of 1 to 200 functions (tool_choice required, auto): compile and first "
                   "mask vs xgrammar, llguidance; one tool replaced with the compile cache kept"),
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
ALL_ORDER = ["masks", "cfg", "tools", "engine", "engine-gpu", "constrained", "serve", "clients", "fuzz", "isolation",
             "soak", "scale-out", "startup"]

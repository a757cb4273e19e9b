#!/usr/bin/env python3
"""Time to first token of a request whose grammar is not compiled yet, with its prompt
computed while the grammar compiles (`EngineConfig.prefill_while_compiling`, the default)
against waiting for the compile before the prompt is scheduled at all.

Owns one workload: MaskBench-dev schemas spread over their compile times, each sent as
a chat request that shows the model its schema, one at a time to an engine (the
embedded SmolLM2 on CPU by default), with the compile cache cleared first. Compiles run as `structgen serve`
runs them: in a thread, with their Python half in compile worker processes. Both
settings run in the same process on the same engine, alternating per schema; the report
gives per-schema medians over `--repeats` and the ratio of TTFTs, by compile-time band.

    python benchmarks/compile_overlap.py                 # 24 schemas, 3 repeats
    python benchmarks/compile_overlap.py --schemas 8 --repeats 1
    python benchmarks/compile_overlap.py --device cuda --model DIR --load-format dummy   # GPU
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import structgen  # noqa: E402
from structgen import compile_workers, compiler  # noqa: E402
from structgen.chat import render_chat  # noqa: E402
from structgen.engine import Engine, SamplingParams  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "maskbench-dev"
RESULTS = ROOT / "benchmarks" / "results" / "compile_overlap.json"
BANDS_MS = (0, 5, 20, 1e9)  # compile-time bands the report splits the schemas into
MAX_SHOWN_SCHEMA_CHARS = 4000  # longer schemas are not shown in the prompt


def pick_schemas(data: Path, vocab, count: int, seed: int) -> list[tuple[str, dict, float]]:
    """`count` schemas of `data` that compile, spread evenly over the compile times of a
    sample: (name, schema, compile seconds)."""
    files = sorted(data.glob("*.json"))
    random.Random(seed).shuffle(files)
    timed = []
    for path in files[: count * 6]:
        schema = json.loads(path.read_text())["schema"]
        if len(json.dumps(schema)) > MAX_SHOWN_SCHEMA_CHARS:
            continue
        structgen.clear_cache()
        started = time.perf_counter()
        try:
            structgen.compile_json_schema(schema, vocab)
        except structgen.StructgenError:
            continue
        timed.append((path.stem, schema, time.perf_counter() - started))
    timed.sort(key=lambda item: item[2])
    step = max(1, len(timed) // count)
    return timed[::step][:count]


def prompt_ids(engine, schema: dict) -> list[int]:
    system = f"Reply with one JSON document following this schema: {json.dumps(schema)}"
    text = render_chat(engine.tokenizer, "Write an example document.", system)
    return engine.tokenizer.encode(text, add_special_tokens=False)


def ttft(engine, compiles: ThreadPoolExecutor, schema: dict, prompt: list[int], overlap: bool,
         max_tokens: int) -> tuple[float, float]:
    """(seconds to the first token, seconds the compile took) of one request, cold."""
    engine.prefill_while_compiling = overlap
    structgen.clear_cache()
    arrival = time.perf_counter()
    future = compiles.submit(structgen.compile_json_schema, schema, engine.vocab)
    compile_s: list[float] = []
    future.add_done_callback(lambda _: compile_s.append(time.perf_counter() - arrival))
    request_id = engine.add_request(prompt, SamplingParams(max_tokens=max_tokens, temperature=0.0), grammar=future)
    first = None
    while engine.has_unfinished_requests():
        for out in engine.step():
            if first is None and out.request_id == request_id and out.token_ids:
                first = time.perf_counter() - arrival
    if first is None:
        raise RuntimeError(f"request {request_id} produced no token")
    return first, compile_s[0]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--schemas", type=int, default=24)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=4)
    p.add_argument("--compile-workers", type=int, default=2, help="as `structgen serve` (0: compile in the thread)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", type=Path, default=DATA, help="a folder of MaskBench files")
    p.add_argument("--model", default=None, help="EngineConfig.model (default: the embedded SmolLM2)")
    p.add_argument("--load-format", default="auto", help="EngineConfig.load_format (dummy: random weights)")
    p.add_argument("--tokenizer", default=None, help="EngineConfig.tokenizer (default: the model's)")
    p.add_argument("--device", default=None, help="EngineConfig.device (default: cuda when there is one)")
    p.add_argument("--output", type=Path, default=RESULTS)
    args = p.parse_args(argv)

    engine = Engine(args.model, load_format=args.load_format, tokenizer=args.tokenizer, device=args.device)
    if args.compile_workers:
        compiler.start_workers(args.compile_workers)
    compiler.prepare(engine.vocab)
    schemas = pick_schemas(args.data, engine.vocab, args.schemas, args.seed)
    compiles = ThreadPoolExecutor(1, thread_name_prefix="compile")
    ttft(engine, compiles, schemas[0][1], prompt_ids(engine, schemas[0][1]), True, args.max_tokens)  # warm-up
    rows = []
    for index, (name, schema, _) in enumerate(schemas):
        prompt = prompt_ids(engine, schema)
        runs: dict[bool, list] = {True: [], False: []}
        for repeat in range(args.repeats):
            order = (True, False) if (index + repeat) % 2 == 0 else (False, True)
            for overlap in order:
                runs[overlap].append(ttft(engine, compiles, schema, prompt, overlap, args.max_tokens))
        row = {"schema": name, "prompt_tokens": len(prompt),
               "compile_ms": float(np.median([c for _, c in runs[True] + runs[False]]) * 1e3),
               "ttft_overlap_ms": float(np.median([t for t, _ in runs[True]]) * 1e3),
               "ttft_wait_ms": float(np.median([t for t, _ in runs[False]]) * 1e3)}
        rows.append(row)
        print(f"{name:55} prompt {row['prompt_tokens']:5}  compile {row['compile_ms']:8.1f} ms  "
              f"TTFT {row['ttft_overlap_ms']:8.1f} vs {row['ttft_wait_ms']:8.1f} ms", flush=True)
    report(rows)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    args.output.write_text(json.dumps({"rows": rows, "device": str(engine.device), "settings": settings}, indent=1))
    if args.compile_workers:
        compile_workers.stop()
    return 0


def report(rows: list[dict]) -> None:
    print("\n| compile time | schemas | compile p50 | TTFT p50, prompt while compiling | TTFT p50, waiting "
          "| median ratio |\n|---|---:|---:|---:|---:|---:|")
    for lo, hi in zip(BANDS_MS, BANDS_MS[1:]):
        band = [r for r in rows if lo <= r["compile_ms"] < hi]
        if band:
            print(band_line(f"{lo:g}-{hi:g} ms" if hi < 1e9 else f"over {lo:g} ms", band))
    print(band_line("all", rows))


def band_line(label: str, band: list[dict]) -> str:
    ratio = np.median([r["ttft_overlap_ms"] / r["ttft_wait_ms"] for r in band])
    return (f"| {label} | {len(band)} | {np.median([r['compile_ms'] for r in band]):.1f} ms "
            f"| {np.median([r['ttft_overlap_ms'] for r in band]):.1f} ms "
            f"| {np.median([r['ttft_wait_ms'] for r in band]):.1f} ms | {ratio:.2f}x |")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""MaskBench: schema compile time and per-token mask time of structgen and its peers.

Runs every selected engine over the MaskBench-dev schemas (JSONSchemaBench) with the
SmolLM2 tokenizer, in one run, on the same schemas, tokenizer and instances:

  * compile each schema (cold: caches cleared / disabled) and fill the first mask:
    TTFM, time to first mask;
  * for every test instance: text = json.dumps(data), tokens = tokenizer.encode(text),
    fresh matcher, per token: fill the mask, check the token's bit, advance the
    matcher (one TBM sample, time between masks); at the end fill the mask once more
    (one more TBM sample), EOS must be allowed and the matcher accepting.
    A valid instance must pass through the end; an invalid one must be rejected at
    some token or at the end. The timed loop is walk.py, shared with cfgbench.py.

Each engine runs in worker processes that are killed and restarted when a schema
exceeds the per-schema timeout (peers are Rust/C++ and cannot be interrupted), or
crash. See benchmarks/README.md.

This script owns the run: its options, the schemas and their tokenized instances, the
tasks on the worker pool, and the results file. The parts are in benchmarks/masks/
(engines, tokenizer, provenance, worker, percentiles, aggregate, printing); it must not
drive an engine itself.

    python benchmarks/maskbench.py --limit 60
    python benchmarks/maskbench.py --engines llguidance,xgrammar --jobs 2
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import queue
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.masks.aggregate import aggregate  # noqa: E402
from benchmarks.masks.engines import ALL_ENGINES, ENGINES  # noqa: E402
from benchmarks.masks.printing import print_report  # noqa: E402
from benchmarks.masks.provenance import cpu_info, structgen_source_hash  # noqa: E402
from benchmarks.masks.tokenizer import load_tokenizer  # noqa: E402
from benchmarks.masks.worker import Worker  # noqa: E402
from benchmarks.peers import pkg_version  # noqa: E402


def read_schema_file(path: Path) -> tuple[object, list[tuple[bool, object]]]:
    """(schema, [(valid, instance)]) from a MaskBench record, or (schema, []) from a plain
    JSON Schema file -- a user's own schema, for which only compile and TTFM are measured."""
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a JSON file: {e}") from None
    if isinstance(record, dict) and "schema" in record and isinstance(record.get("tests", []), list) \
            and set(record) <= {"schema", "tests", "description", "meta"}:
        return record["schema"], [(bool(t["valid"]), t["data"]) for t in record.get("tests", [])]
    return record, []


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--data", "--schemas", dest="data",
                    default=str(REPO.parent / "shared" / "data" / "maskbench-dev"),
                    help="a folder of schema files, or one file: MaskBench records ({\"schema\": ..., "
                         "\"tests\": [...]}) or plain JSON Schemas (compile and first mask only)")
    ap.add_argument("--engines", default=",".join(ALL_ENGINES), help="comma-separated, from: " + ", ".join(ALL_ENGINES))
    ap.add_argument("--limit", type=int, default=0, help="number of schemas (random sample); 0 = all")
    ap.add_argument("--seed", type=int, default=0, help="seed of the schema sample and order")
    ap.add_argument("--filter", default="", help="only schema files whose name contains this (e.g. Github_hard)")
    ap.add_argument("--timeout", type=float, default=10.0, help="per-schema compile timeout (s)")
    ap.add_argument("--engine-timeouts", default="",
                    help="per-engine compile timeouts overriding --timeout, e.g. outlines-core=5,xgrammar=20")
    ap.add_argument("--test-timeout", type=float, default=60.0,
                    help="per-schema timeout of the instance walk after compile (s)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="worker processes running at once (1 = least timing noise)")
    ap.add_argument("--mem-limit-gb", type=float, default=8.0, help="address-space limit per worker; 0 = none")
    ap.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "maskbench.json"))
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)

    t_wall = time.monotonic()
    src_hash_start = structgen_source_hash()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    for e in engines:
        if e not in ENGINES:
            ap.error(f"unknown engine {e!r}; known: {', '.join(ALL_ENGINES)}")
    timeouts = {e: args.timeout for e in engines}
    for item in filter(None, (x.strip() for x in args.engine_timeouts.split(","))):
        name, _, val = item.partition("=")
        if name not in timeouts or not val:
            ap.error(f"--engine-timeouts: bad item {item!r} (engines: {', '.join(engines)})")
        timeouts[name] = float(val)
    skipped = {}
    active = []
    for e in engines:
        ok, note = ENGINES[e].available()
        if ok:
            active.append(e)
        else:
            skipped[e] = note
            print(f"note: skipping {e}: {note}", file=sys.stderr)
    if not active:
        sys.exit("no engine available")

    data = Path(args.data)
    files = [data] if data.is_file() else sorted(p for p in data.glob("*.json") if args.filter in p.name)
    if not files:
        sys.exit(f"no schema files in {data}")
    rng = random.Random(args.seed)
    rng.shuffle(files)
    if args.limit and args.limit < len(files):
        files = files[: args.limit]

    tokenizer, tok_source = load_tokenizer()
    states = {}
    for e in list(active):
        try:
            states[e] = ENGINES[e].prepare(tokenizer)
            probe = getattr(ENGINES[e], "probe", None)
            ok, note = probe(states[e]) if probe is not None else (True, "")
        except Exception as ex:
            ok, note = False, f"setup failed: {type(ex).__name__}: {ex}"[:500]
        if not ok:
            active.remove(e)
            skipped[e] = note
            print(f"note: skipping {e}: {note}", file=sys.stderr)
    if not active:
        sys.exit("no engine available")
    tok_dir = tempfile.mkdtemp(prefix="maskbench-tok-")
    tokenizer.save_pretrained(tok_dir)

    # instances, tokenized once (json.dumps defaults), shared by every engine
    schemas = []
    for p in files:
        try:
            schema, instances = read_schema_file(p)
        except ValueError as e:
            sys.exit(str(e))
        tests = [(valid, tokenizer.encode(json.dumps(data), add_special_tokens=False))
                 for valid, data in instances]
        schemas.append({"id": p.name, "schema": schema, "tests": tests})
    n_tokens_total = sum(len(t[1]) for s in schemas for t in s["tests"])

    out_path = Path(args.output)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    log_path = str(out_path.with_name(out_path.stem + "-workers.log"))
    open(log_path, "w").close()

    ctx = mp.get_context("spawn")
    jobs = max(1, args.jobs)
    # one worker process per engine (per engine and job with --jobs > 1), set up before timing
    all_workers: list[Worker] = []
    idle: dict[str, list[Worker]] = {e: [] for e in active}
    pool_lock = threading.Lock()

    def new_worker(e):
        w = Worker(e, states[e], ctx, tok_dir, args.mem_limit_gb, log_path)
        all_workers.append(w)
        return w

    for e in active:
        idle[e].append(new_worker(e))
    for w in list(all_workers):
        err = w.wait_up()
        if err is not None:
            print(f"note: {w.engine} could not be set up: {err['error']}", file=sys.stderr)

    def acquire(e):
        with pool_lock:
            if idle[e]:
                return idle[e].pop()
        w = new_worker(e)
        w.wait_up()
        return w

    def release(w):
        with pool_lock:
            idle[w.engine].append(w)

    load_start = os.getloadavg()
    if load_start[0] > 0.5 * (os.cpu_count() or 1):
        print(f"warning: load average {load_start[0]:.1f} on {os.cpu_count()} cores before starting: "
              "other processes compete for the CPU, timings will be noisy", file=sys.stderr)
    tasks: queue.Queue = queue.Queue()
    for si in range(len(schemas)):
        for e in active:
            tasks.put((si, e))
    results: dict[tuple[int, str], dict] = {}
    done_q: queue.Queue = queue.Queue()

    def slot():
        while True:
            try:
                si, e = tasks.get_nowait()
            except queue.Empty:
                return
            s = schemas[si]
            t0 = time.monotonic()
            w = acquire(e)
            try:
                r = w.run(s["schema"], s["tests"], timeouts[e], args.test_timeout)
            except Exception as ex:  # the harness itself failed on this task; keep going
                r = {"status": "init_error", "error": f"harness: {type(ex).__name__}: {ex}"}
            r["task_s"] = time.monotonic() - t0
            release(w)
            results[(si, e)] = r
            done_q.put((si, e, r["status"]))

    threads = [threading.Thread(target=slot, daemon=True) for _ in range(jobs)]
    for th in threads:
        th.start()
    total = len(schemas) * len(active)
    bar = None
    if not args.no_progress:
        from tqdm import tqdm

        bar = tqdm(total=total, unit="task", desc="maskbench", dynamic_ncols=True, mininterval=1.0)
    n_done = 0
    bad = {e: 0 for e in active}
    try:
        while n_done < total:
            try:
                si, e, st = done_q.get(timeout=1.0)
            except queue.Empty:
                if not any(th.is_alive() for th in threads) and done_q.empty():
                    break
                continue
            n_done += 1
            if st not in ("ok",):
                bad[e] += 1
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(" ".join(f"{k}:{v}" for k, v in bad.items() if v) or schemas[si]["id"][:30],
                                    refresh=False)
    except KeyboardInterrupt:
        print("\ninterrupted: reporting what finished", file=sys.stderr)
    finally:
        if bar is not None:
            bar.close()
        for w in all_workers:
            w.close()
    wall_s = time.monotonic() - t_wall

    report = aggregate(args, schemas, active, results, tokenizer)
    report["machine"] = cpu_info()
    report["machine"]["loadavg_1min_start_end"] = [round(load_start[0], 2), round(os.getloadavg()[0], 2)]
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    for dist in ("transformers", "tokenizers", "torch"):
        versions[dist] = pkg_version(dist)
    for e in engines:
        versions[e] = ENGINES[e].version() if e not in skipped else None
    src_hash_end = structgen_source_hash()
    versions["structgen_sources_sha256"] = src_hash_start
    sg_restarts = sum(w.starts - 1 for w in all_workers if w.engine.startswith("structgen"))
    if src_hash_end != src_hash_start and any(e.startswith("structgen") for e in active):
        versions["structgen_sources_changed_during_run"] = {"sha256_end": src_hash_end,
                                                            "structgen_worker_restarts": sg_restarts}
    report["versions"] = versions
    report["settings"] = {
        "data": str(data), "schemas": len(schemas), "limit": args.limit, "seed": args.seed, "filter": args.filter,
        "timeout_s": args.timeout, "engine_timeouts_s": {e: t for e, t in timeouts.items() if t != args.timeout},
        "test_timeout_s": args.test_timeout, "jobs": jobs,
        "mem_limit_gb": args.mem_limit_gb, "tokenizer": f"SmolLM2-135M-Instruct ({tok_source})",
        "vocab_size": len(tokenizer), "serialization": "json.dumps(data) (defaults: ', ' and ': ', ensure_ascii)",
        "instances": sum(len(s["tests"]) for s in schemas), "instance_tokens": n_tokens_total,
        "engines": {e: ENGINES[e].settings() for e in active}, "skipped": skipped,
        "worker_processes_started": sum(w.starts for w in all_workers), "worker_log": log_path,
        "gc": "gc.freeze() in every worker after setup",
    }
    report["wall_s"] = round(wall_s, 1)
    with open(out_path, "w") as f:
        json.dump(report, f, indent=1)
    print_report(report)
    print(f"\nresults: {out_path}   wall time: {wall_s:.0f} s")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""CFGBench: context-free grammars -- compile time and per-token mask time of structgen
and its peers (llguidance, xgrammar), a sibling of maskbench.py.

Three sections, each running every engine in the same run on the same instances, with the
SmolLM2 tokenizer (as maskbench.py loads it):

  json_object  "any JSON object": structgen compile_json_schema({"type": "object"}),
               llguidance grammar_from_json_schema({"type": "object"}), xgrammar
               compile_json_schema('{"type":"object"}', any_whitespace=False) and
               compile_builtin_json_grammar(); instances: every valid MaskBench-dev test
               instance whose data is a JSON object, text = json.dumps(data).
  recursive    the MaskBench-dev schemas that structgen compiles to recursive rules
               (schema_to_ir(schema) refers to rules other than "any JSON value"); every
               test instance, valid and invalid, as maskbench.py does.
  grammars     every grammars/*.lark file: structgen compile_grammar(lark) and (for a
               .gbnf twin) compile_grammar(gbnf, syntax="gbnf"), llguidance
               LLMatcher.grammar_from_lark(lark), xgrammar compile_grammar(gbnf twin).
               Sentences: realistic samples (tests/test_grammars.py's lists when it exists,
               built-in pools, random sentences from the grammar as a fallback) and
               corrupted/truncated variants; lark's own Earley parser labels each one
               valid or invalid, and every engine's verdict is compared with lark's.

Measurements follow maskbench.py, in the same loop (walk.py): TTFM = cold compile
(structgen.clear_cache(); xgrammar cache disabled) + new matcher + first mask; TBM = per
token, fill the mask + check the token's bit + advance the matcher (the fill alone is
reported too as "mask"); at the end one more mask, where EOS must be allowed and the
matcher accepting. Each engine runs in a worker process (MaskBench's, benchmarks/masks/
worker.py) that is killed and restarted when it exceeds the compile or walk timeout or
crashes; engines run one at a time. See benchmarks/README.md.

This script owns the run: its options, the sections in turn, and the results file and
its summary. The parts are in benchmarks/cfg/ (adapters, worker, harness, outcomes, one
module per section, the sentences of the grammars); it must not drive an engine itself.

    python benchmarks/cfgbench.py                       # all sections
    python benchmarks/cfgbench.py --quick
    python benchmarks/cfgbench.py --sections grammars --limit 20
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.cfg.adapters import CFG_ENGINES  # noqa: E402
from benchmarks.cfg.grammars import print_grammars, section_grammars  # noqa: E402
from benchmarks.cfg.harness import Harness  # noqa: E402
from benchmarks.cfg.json_object import print_json_object, section_json_object  # noqa: E402
from benchmarks.cfg.recursive import print_recursive, section_recursive  # noqa: E402
from benchmarks.masks.printing import print_engines, print_machine  # noqa: E402
from benchmarks.masks.provenance import cpu_info, structgen_source_hash  # noqa: E402
from benchmarks.masks.tokenizer import load_tokenizer  # noqa: E402
from benchmarks.peers import pkg_version  # noqa: E402

SECTIONS = ["json_object", "recursive", "grammars"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated from: " + ", ".join(SECTIONS))
    ap.add_argument("--engines", default="structgen,llguidance,xgrammar")
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "maskbench-dev"))
    ap.add_argument("--limit", type=int, default=0,
                    help="json_object: instances; recursive: schemas; grammars: valid and invalid sentences per "
                         "grammar (each); 0 = all")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: --limit 200 instances / 8 schemas / 15 sentences, 2 TTFM repeats")
    ap.add_argument("--ttfm-repeats", type=int, default=5,
                    help="cold compiles per grammar in json_object and grammars (the median is reported)")
    ap.add_argument("--timeout", type=float, default=10.0, help="compile timeout per grammar/schema and repeat (s)")
    ap.add_argument("--walk-budget", type=float, default=60.0,
                    help="per grammar/schema and engine: stop walking further instances after this many seconds "
                         "(the figures then cover the instances walked; reported as truncated)")
    ap.add_argument("--test-timeout", type=float, default=60.0,
                    help="hard walk timeout (worker killed) = walk budget + this + 200 µs per token")
    ap.add_argument("--mem-limit-gb", type=float, default=8.0)
    ap.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "cfgbench.json"))
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    sections = [x.strip() for x in args.sections.split(",") if x.strip()]
    for x in sections:
        if x not in SECTIONS:
            ap.error(f"unknown section {x!r}")
    repeats = args.ttfm_repeats
    lim = {"json_object": args.limit, "recursive": args.limit, "grammars": args.limit}
    if args.quick:
        repeats = min(repeats, 2)
        lim = {"json_object": args.limit or 200, "recursive": args.limit or 8, "grammars": args.limit or 15}

    t_wall = time.monotonic()
    src_hash_start = structgen_source_hash()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    skipped, active = {}, []
    for e in engines:
        if e not in CFG_ENGINES:
            ap.error(f"unknown engine {e!r}")
        ok, note = CFG_ENGINES[e].available()
        (active.append(e) if ok else skipped.__setitem__(e, note))
    tokenizer, tok_source = load_tokenizer()
    states = {}
    for e in list(active):
        try:
            states[e] = CFG_ENGINES[e].prepare(tokenizer)
            probe = getattr(CFG_ENGINES[e], "probe", None)
            ok, note = probe(states[e]) if probe is not None else (True, "")
        except Exception as ex:  # noqa: BLE001 - record any failure and go on
            ok, note = False, f"setup failed: {type(ex).__name__}: {ex}"[:500]
        if not ok:
            active.remove(e)
            skipped[e] = note
    for e, note in skipped.items():
        print(f"note: skipping {e}: {note}", file=sys.stderr)
    if not active:
        sys.exit("no engine available")
    if "structgen" in active and not hasattr(__import__("structgen"), "compile_grammar"):
        print("note: structgen has no compile_grammar: its grammars rows will be compile errors", file=sys.stderr)

    files = sorted(Path(args.data).glob("*.json"))
    load_start = os.getloadavg()
    h = Harness(args, tokenizer, active, states)
    report = {"sections": {}}
    section_s = {}
    try:
        json_texts = None
        if "json_object" in sections or "grammars" in sections:
            json_texts = []
            for p in files:
                for t in json.loads(p.read_text()).get("tests", []):
                    if t.get("valid") and isinstance(t.get("data"), dict):
                        json_texts.append(json.dumps(t["data"]))
        for sec in sections:
            t0 = time.monotonic()
            if sec == "json_object":
                report["sections"][sec] = section_json_object(h, files, lim[sec], repeats, args.no_progress)
            elif sec == "recursive":
                rng = random.Random(0)
                shuffled = list(files)
                rng.shuffle(shuffled)
                report["sections"][sec] = section_recursive(h, shuffled if lim[sec] else files, lim[sec],
                                                            args.no_progress)
            elif sec == "grammars":
                report["sections"][sec] = section_grammars(h, json_texts, lim[sec], repeats, args.no_progress)
            section_s[sec] = round(time.monotonic() - t0, 1)
    except KeyboardInterrupt:
        print("\ninterrupted: reporting what finished", file=sys.stderr)
    finally:
        h.close()
    wall_s = time.monotonic() - t_wall

    machine = cpu_info()
    machine["loadavg_1min_start_end"] = [round(load_start[0], 2), round(os.getloadavg()[0], 2)]
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    for dist in ("transformers", "tokenizers", "torch", "lark"):
        versions[dist] = pkg_version(dist)
    for e in engines:
        versions[e] = CFG_ENGINES[e].version() if e not in skipped else None
    src_hash_end = structgen_source_hash()
    versions["structgen_sources_sha256"] = src_hash_start
    if src_hash_end != src_hash_start:
        versions["structgen_sources_changed_during_run"] = {"sha256_end": src_hash_end,
                                                            "structgen_worker_restarts": h.restarts("structgen")}
    report.update(machine=machine, versions=versions, wall_s=round(wall_s, 1), section_s=section_s)
    report["settings"] = {
        "data": args.data, "sections": sections, "limits": lim, "quick": args.quick, "ttfm_repeats": repeats,
        "timeout_s": args.timeout, "walk_budget_s": args.walk_budget,
        "test_timeout_s": f"walk budget + {args.test_timeout:g} s + 200 µs per token",
        "mem_limit_gb": args.mem_limit_gb, "tokenizer": f"SmolLM2-135M-Instruct ({tok_source})",
        "vocab_size": len(tokenizer), "serialization": "json.dumps(data) (', ' and ': ', ensure_ascii)",
        "engines": {e: CFG_ENGINES[e].settings() for e in active}, "skipped": skipped,
        "worker_processes_started": sum(w.starts for w in h.workers.values()), "worker_log": h.log_path,
        "order": "sections in turn; within a section one engine at a time; one worker process per engine",
    }
    out_path = Path(args.output)
    with open(out_path, "w") as f:
        json.dump(report, f, indent=1, default=lambda o: o.tolist() if isinstance(o, np.ndarray) else str(o))
    print_report(report)
    print(f"\nresults: {out_path}   wall time: {wall_s:.0f} s "
          f"({', '.join(f'{k} {v:.0f} s' for k, v in section_s.items())})")


def print_report(rep):
    m, v, s = rep["machine"], rep["versions"], rep["settings"]
    print()
    print("## CFGBench")
    print()
    print_machine(m, v)
    ch = v.get("structgen_sources_changed_during_run")
    if ch:
        print(f"- note: structgen's sources changed during the run ({ch['structgen_worker_restarts']} structgen "
              "worker restarts; a restarted worker imports the new code)")
    print(f"- tokenizer: {s['tokenizer']}, vocab {s['vocab_size']:,}; JSON instances: {s['serialization']}")
    print(f"- settings: sections {', '.join(s['sections'])}; limits {s['limits']}; TTFM repeats {s['ttfm_repeats']}; "
          f"compile timeout {s['timeout_s']:g} s per compile, walk budget {s['walk_budget_s']:g} s (then "
          f"stop, report what was walked), hard walk timeout {s['test_timeout_s']}; {s['order']}")
    print_engines(s["engines"], s["skipped"])
    secs = rep["sections"]
    for name, fn in (("json_object", print_json_object), ("recursive", print_recursive),
                     ("grammars", print_grammars)):
        if name in secs:
            print()
            fn(secs[name])


if __name__ == "__main__":
    main()

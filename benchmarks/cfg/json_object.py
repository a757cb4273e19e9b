"""CFGBench section 1, `json_object`: "any JSON object" compiled by every engine (xgrammar
twice: its JSON Schema compile and its built-in JSON grammar), walked over every valid
MaskBench-dev object (`section_json_object`), and its markdown table (`print_json_object`).

Must not touch the other sections.
"""

from __future__ import annotations

import json
import random

from benchmarks.cfg.harness import Harness, progress
from benchmarks.cfg.outcomes import summarize_walk, task_record, tstats
from benchmarks.report.formats import us


def section_json_object(h: Harness, files, limit, repeats, no_progress):
    rng = random.Random(0)
    texts = []
    for p in files:
        d = json.loads(p.read_text())
        for t in d.get("tests", []):
            if t.get("valid") and isinstance(t.get("data"), dict):
                texts.append(json.dumps(t["data"]))
    rng.shuffle(texts)
    if limit:
        texts = texts[:limit]
    tests = [(True, h.encode(t)) for t in texts]
    rows = [
        ("structgen", "structgen", {"kind": "json_schema", "schema": {"type": "object"}}),
        ("llguidance", "llguidance", {"kind": "json_schema", "schema": {"type": "object"}}),
        ("xgrammar", "xgrammar json_schema(any_whitespace=False)",
         {"kind": "json_schema", "schema": {"type": "object"}, "options": {"any_whitespace": False}}),
        ("xgrammar", "xgrammar builtin JSON", {"kind": "builtin_json"}),
    ]
    rows = [r for r in rows if r[0] in h.active]
    bar = progress(len(rows), "json_object", no_progress)
    res = []
    for engine, label, spec in rows:
        if bar is not None:
            bar.set_postfix_str(label, refresh=True)
        r = h.run(engine, spec, tests, repeats)
        rec = {"engine": engine, "label": label, **task_record(r)}
        if "outcomes" in r:
            w = summarize_walk(h.tok, tests, r, texts)
            rec.update(tbm_us=tstats(r["samples_us"]), mask_us=tstats(r["fill_us"]),
                       passed=w["valid_ok"], failed=w["valid"] - w["valid_ok"], exceptions=w["exceptions"],
                       failures=w["validation_errors"][:30], mask_mismatches=r["n_mismatch"],
                       mismatch_examples=r["mismatches"])
        res.append(rec)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return {"instances": len(tests), "tokens": sum(len(t) for _, t in tests), "ttfm_repeats": repeats, "rows": res}


def print_json_object(s):
    print(f"### 1. json_object: any JSON object ({s['instances']:,} instances, {s['tokens']:,} tokens)")
    print()
    print(f"TTFM = cold compile (compile cache cleared) + first mask: median of {s['ttfm_repeats']} compiles, and the "
          "first of them; TBM = mask + bit check + advance per token; mask = fill_bitmask alone (µs).")
    print()
    print("| engine | TTFM µs | TTFM 1st | TBM p50 | p90 | p99 | max | mean | mask p50 | mask p99 | passed | failed |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in s["rows"]:
        if "tbm_us" not in r:
            t = us(r["ttfm_us"]["median"]) if "ttfm_us" in r else "–"
            print(f"| {r['label']} | {t} | | {r['status']}: {r.get('error', '')[:80]} | | | | | | | | |")
            continue
        a, b = r["tbm_us"], r["mask_us"]
        print(f"| {r['label']} | {us(r['ttfm_us']['median'])} | {us(r['ttfm_us']['runs'][0])} "
              f"| {us(a['p50'], 1)} | {us(a['p90'], 1)} "
              f"| {us(a['p99'], 1)} | {us(a['max'], 1)} | {us(a['avg'], 1)} | {us(b['p50'], 1)} "
              f"| {us(b['p99'], 1)} | {r['passed']:,} | {r['failed']:,} |")
    for r in s["rows"]:
        if r.get("truncated"):
            print(f"\n- {r['label']}: {r['truncated']}")
        if r.get("failures") or r.get("mask_mismatches"):
            print(f"\n- {r['label']}: {r.get('failed', 0)} failed, {r.get('mask_mismatches', 0)} mask/matcher mismatches")
            for f in r.get("failures", [])[:5]:
                print(f"  - test {f['test']}: at token {f['at_token']}/{f['of']} ({f['reason']}): "
                      f"...{f.get('before', '')!r} + {f.get('token', '')!r}")

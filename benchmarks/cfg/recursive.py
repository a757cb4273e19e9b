"""CFGBench section 2, `recursive`: the MaskBench-dev schemas that structgen compiles to
recursive rules (`find_recursive`), every instance walked by every engine
(`section_recursive`), and its markdown tables (`print_recursive`).

Must not touch the other sections.
"""

from __future__ import annotations

import json
import signal
import time

import numpy as np

from benchmarks.cfg.harness import Harness, progress
from benchmarks.cfg.outcomes import summarize_walk, tstats
from benchmarks.masks.percentiles import stats
from benchmarks.report.formats import us

ANY_JSON_VALUE = "any JSON value"
TTFM_Q = [50, 90]


def find_recursive(files, limit, per_schema_s=20.0):
    """Schemas whose structgen IR has rules other than "any JSON value" (as /tmp/probe/rec.py).
    schema_to_ir runs in this process under signal.alarm."""
    from structgen.grammar import ir
    from structgen.automata.languages import AUTOMATA
    from structgen.grammar.json_schema import schema_to_ir

    class _Timeout(Exception):
        pass

    def _alarm(signum, frame):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, _alarm)
    found, errors = [], {}
    try:
        for p in files:
            d = json.loads(p.read_text())
            signal.setitimer(signal.ITIMER_REAL, per_schema_s)
            try:
                node = schema_to_ir(d["schema"], languages=AUTOMATA)
                names = {r.name for r in ir.refs_in(node)} - {ANY_JSON_VALUE}
            except _Timeout:
                errors[p.name] = f"schema_to_ir exceeded {per_schema_s:g} s"
                continue
            except Exception as e:  # noqa: BLE001 - record any failure and go on
                errors[p.name] = f"{type(e).__name__}: {e}"[:200]
                continue
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            if names:
                found.append((p, d, sorted(names)))
                if limit and len(found) >= limit:
                    break
    finally:
        signal.signal(signal.SIGALRM, old)
    return found, errors


def section_recursive(h: Harness, files, limit, no_progress):
    t0 = time.monotonic()
    found, ir_errors = find_recursive(files, limit)
    scan_s = time.monotonic() - t0
    schemas = []
    for p, d, names in found:
        texts, tests = [], []
        for t in d.get("tests", []):
            text = json.dumps(t["data"])
            texts.append(text)
            tests.append((bool(t["valid"]), h.encode(text)))
        schemas.append({"id": p.name, "schema": d["schema"], "tests": tests, "texts": texts, "rules": names})
    engines = [e for e in ("structgen", "llguidance", "xgrammar") if e in h.active]
    bar = progress(len(schemas) * len(engines), "recursive", no_progress)
    per_schema = [{"id": s["id"], "rules": s["rules"][:10], "n_valid": sum(v for v, _ in s["tests"]),
                   "n_invalid": sum(not v for v, _ in s["tests"]), "engines": {}} for s in schemas]
    samples = {e: {} for e in engines}
    fills = {e: {} for e in engines}
    ttfm = {e: {} for e in engines}
    for e in engines:  # one engine at a time
        for si, s in enumerate(schemas):
            if bar is not None:
                bar.set_postfix_str(f"{e} {s['id'][:28]}", refresh=False)
            r = h.run(e, {"kind": "json_schema", "schema": s["schema"]}, s["tests"], 1)
            rec = {"status": r["status"], "task_s": round(r["task_s"], 2)}
            for k in ("error", "error_type", "truncated"):
                if k in r:
                    rec[k] = r[k]
            if "ttfm_us" in r:
                rec["ttfm_us"] = round(r["ttfm_us"][0], 1)
                rec["compile_us"] = round(r["compile_us"][0], 1)
                ttfm[e][si] = r["ttfm_us"][0]
            if "outcomes" in r:
                w = summarize_walk(h.tok, s["tests"], r, s["texts"])
                samples[e][si] = r["samples_us"]
                fills[e][si] = r["fill_us"]
                rec.update(tokens=len(r["samples_us"]),
                           tbm_avg_us=round(float(r["samples_us"].mean()), 2) if len(r["samples_us"]) else None,
                           tbm_max_us=round(float(r["samples_us"].max()), 1) if len(r["samples_us"]) else None,
                           valid_ok=w["valid_ok"], invalid_ok=w["invalid_ok"],
                           validation_errors=w["validation_errors"], invalidation_errors=w["invalidation_errors"],
                           exceptions=w["exceptions"], mask_mismatches=r["n_mismatch"],
                           mismatch_examples=r["mismatches"])
                rec["passing"] = not w["validation_errors"] and not w["invalidation_errors"]
            per_schema[si]["engines"][e] = rec
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    summary = {}
    for e in engines:
        recs = [ps["engines"][e] for ps in per_schema if e in ps["engines"]]
        walked = [r for r in recs if "valid_ok" in r]
        allsamp = np.concatenate(list(samples[e].values())) if samples[e] else np.zeros(0)
        allfill = np.concatenate(list(fills[e].values())) if fills[e] else np.zeros(0)
        summary[e] = {
            "schemas": len(recs),
            "compiled": sum(1 for r in recs if r["status"] in ("ok", "test_timeout", "test_crash")),
            "compile_errors": sum(1 for r in recs if r["status"] in ("compile_error", "compile_crash", "init_error")),
            "timeouts": sum(1 for r in recs if r["status"] in ("timeout", "test_timeout")),
            "passing_schemas": sum(1 for r in walked if r["passing"]),
            "instances": sum(r["valid_ok"] + r["invalid_ok"] + len(r["validation_errors"]) +
                             len(r["invalidation_errors"]) for r in walked),
            "instances_passed": sum(r["valid_ok"] + r["invalid_ok"] for r in walked),
            "validation_errors": sum(len(r["validation_errors"]) for r in walked),
            "invalidation_errors": sum(len(r["invalidation_errors"]) for r in walked),
            "exceptions": sum(r["exceptions"] for r in walked),
            "mask_mismatches": sum(r["mask_mismatches"] for r in walked),
            "compile_error_examples": [(ps["id"], ps["engines"][e].get("error", "")[:200]) for ps in per_schema
                                       if ps["engines"].get(e, {}).get("status") in
                                       ("compile_error", "compile_crash", "timeout", "init_error")][:60],
            "ttfm_us": stats(list(ttfm[e].values()), TTFM_Q),
            "tbm_us": tstats(allsamp),
            "mask_us": tstats(allfill),
        }
    common = [si for si in range(len(schemas)) if all(si in samples[e] for e in engines)]
    cmp = {"schemas": len(common), "engines": {}}
    for e in engines:
        sm = np.concatenate([samples[e][si] for si in common]) if common else np.zeros(0)
        cmp["engines"][e] = {"ttfm_us": stats([ttfm[e][si] for si in common], TTFM_Q), "tbm_us": tstats(sm)}
    return {"schemas_found": len(schemas), "scan_s": round(scan_s, 1), "limit": limit,
            "schema_to_ir_errors": len(ir_errors), "schema_to_ir_error_examples": dict(list(ir_errors.items())[:20]),
            "instances": sum(len(s["tests"]) for s in schemas),
            "tokens": sum(len(t) for s in schemas for _, t in s["tests"]),
            "engines": summary, "common_subset": cmp, "schemas": per_schema}


def print_recursive(s):
    print(f"### 2. recursive: {s['schemas_found']} MaskBench-dev schemas that structgen compiles to recursive rules "
          f"({s['instances']} instances, {s['tokens']:,} tokens)")
    print()
    print("TTFM over schemas (one cold compile + first mask each), TBM over all tokens, µs; "
          "instances = valid accepted + invalid rejected.")
    print()
    print("| engine | compiled | compile errors | timeouts | TTFM p50 | p90 | max | TBM p50 | p99 | mask p50 | mask p99 "
          "| passing schemas | instances passed | validation errors | invalidation errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for e, r in s["engines"].items():
        a, b, c = r["ttfm_us"], r["tbm_us"], r["mask_us"]
        print(f"| {e} | {r['compiled']}/{r['schemas']} | {r['compile_errors']} | {r['timeouts']} | {us(a['p50'])} "
              f"| {us(a['p90'])} | {us(a['max'])} | {us(b['p50'], 1)} | {us(b['p99'], 1)} | {us(c['p50'], 1)} "
              f"| {us(c['p99'], 1)} | {r['passing_schemas']} | {r['instances_passed']}/{r['instances']} "
              f"| {r['validation_errors']} | {r['invalidation_errors']} |")
    c = s["common_subset"]
    if len(c["engines"]) > 1:
        print()
        print(f"Like for like, the {c['schemas']} schemas every engine compiled and walked (µs):")
        print()
        print("| engine | TTFM p50 | p90 | max | TBM p50 | p90 | p99 | max |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for e, r in c["engines"].items():
            a, b = r["ttfm_us"], r["tbm_us"]
            print(f"| {e} | {us(a['p50'])} | {us(a['p90'])} | {us(a['max'])} | {us(b['p50'], 1)} "
                  f"| {us(b['p90'], 1)} | {us(b['p99'], 1)} | {us(b['max'], 1)} |")
    for e, r in s["engines"].items():
        lines = []
        for ps in s["schemas"]:
            rec = ps["engines"].get(e)
            if not rec:
                continue
            for ie in rec.get("invalidation_errors", []):
                lines.append(f"  - INVALIDATION {ps['id']} test {ie['test']}: {ie.get('text', '')[:150]!r}")
            for ve in rec.get("validation_errors", []):
                lines.append(f"  - validation {ps['id']} test {ve['test']}: token {ve['at_token']}/{ve['of']} "
                             f"({ve['reason']}) ...{ve.get('before', '')!r} + {ve.get('token', '')!r}")
            if rec.get("mask_mismatches"):
                lines.append(f"  - MASK MISMATCH {ps['id']}: {rec['mismatch_examples'][:3]}")
            if rec.get("truncated"):
                lines.append(f"  - {ps['id']}: {rec['truncated']}")
            if rec["status"] not in ("ok",):
                lines.append(f"  - {rec['status']} {ps['id']}: {rec.get('error', '')[:160]}")
        if lines:
            print(f"\n- {e}:")
            print("\n".join(lines[:60]) + (f"\n  - ... {len(lines) - 60} more (see the JSON)" if len(lines) > 60 else ""))

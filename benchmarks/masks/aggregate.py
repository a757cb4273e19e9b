"""MaskBench's results file, from the workers' results (`aggregate`): per schema and
engine the status, TTFM, TBM and the instances each engine got wrong; per engine the
counts and timing summaries; and the like-for-like subset every engine compiled, with
ratios to llguidance.

Must not run engines or print.
"""

from __future__ import annotations

import collections

import numpy as np

from benchmarks.masks.percentiles import stats, tbm_histogram

TTFM_Q = [50, 90, 99]
TBM_Q = [50, 90, 99, 99.9]


def aggregate(args, schemas, active, results, tokenizer):
    per_engine = {}
    per_schema = []
    samples_by = {e: {} for e in active}
    ttfm_by = {e: {} for e in active}
    for si, s in enumerate(schemas):
        row = {"id": s["id"], "n_valid": sum(1 for v, _ in s["tests"] if v),
               "n_invalid": sum(1 for v, _ in s["tests"] if not v), "engines": {}}
        for e in active:
            r = results.get((si, e))
            if r is None:
                continue
            rec = {"status": r["status"]}
            for k in ("ttfm_us", "compile_us", "task_s", "cpu_s", "error", "error_type"):
                if k in r:
                    rec[k] = round(r[k], 3) if isinstance(r[k], float) else r[k]
            if "outcomes" in r:
                samp = r["samples_ns"] / 1e3
                samples_by[e][si] = samp
                ttfm_by[e][si] = r["ttfm_us"]
                verr, ierr, exc = [], [], 0
                for ti, ((valid, toks), o) in enumerate(zip(s["tests"], r["outcomes"])):
                    exc += bool(o.get("exception"))
                    if valid and not o["accepted"]:
                        at = o["at"]
                        ctx = None
                        if at is not None:
                            ctx = {"before": tokenizer.decode(toks[max(0, at - 12):at])[-60:],
                                   "token": tokenizer.decode(toks[at:at + 1]) if at < len(toks) else "<EOS>"}
                        verr.append({"test": ti, "at_token": at, "of": len(toks), "reason": o["reason"], "context": ctx})
                    elif not valid and o["accepted"]:
                        ierr.append({"test": ti})
                rec.update(tokens=int(len(samp)), tbm_avg_us=round(float(samp.mean()), 2) if len(samp) else None,
                           tbm_max_us=round(float(samp.max()), 1) if len(samp) else None,
                           validation_errors=verr, invalidation_errors=ierr, exceptions=exc,
                           mask_mismatches=r["n_mismatch"], mismatch_examples=r["mismatches"])
                rec["passing"] = not verr and not ierr
            elif r["status"] == "test_timeout":
                ttfm_by[e][si] = r["ttfm_us"]
            row["engines"][e] = rec
        per_schema.append(row)

    for e in active:
        recs = [(si, row["engines"][e]) for si, row in enumerate(per_schema) if e in row["engines"]]
        st = lambda name: sum(1 for _, r in recs if r["status"] == name)  # noqa: E731
        ttfm = list(ttfm_by[e].values())
        allsamp = np.concatenate(list(samples_by[e].values())) if samples_by[e] else np.zeros(0)
        per_engine[e] = {
            "schemas": len(recs),
            "passing": sum(1 for _, r in recs if r.get("passing")),
            "compile_errors": st("compile_error") + st("compile_crash") + st("init_error"),
            "compile_crashes": st("compile_crash"),
            "init_errors": st("init_error"),
            "timeouts": st("timeout") + st("test_timeout"),
            "test_timeouts": st("test_timeout"),
            "test_crashes": st("test_crash"),
            "validation_errors": sum(len(r.get("validation_errors", [])) for _, r in recs),
            "invalidation_errors": sum(len(r.get("invalidation_errors", [])) for _, r in recs),
            "schemas_with_validation_errors": sum(1 for _, r in recs if r.get("validation_errors")),
            "schemas_with_invalidation_errors": sum(1 for _, r in recs if r.get("invalidation_errors")),
            "exceptions": sum(r.get("exceptions", 0) for _, r in recs),
            "compile_error_types": dict(collections.Counter(r["error_type"] for _, r in recs
                                                            if "error_type" in r).most_common()),
            "mask_mismatches": sum(r.get("mask_mismatches", 0) for _, r in recs),
            "ttfm_us": stats(ttfm, TTFM_Q),
            "tbm_us": stats(allsamp, TBM_Q),
            "tbm_hist": tbm_histogram(allsamp),
        }

    # like-for-like: schemas that every engine compiled and walked
    common = [si for si in range(len(schemas)) if all(si in samples_by[e] for e in active)]
    cmp = {"schemas": len(common), "engines": {}}
    for e in active:
        t = [ttfm_by[e][si] for si in common]
        sm = np.concatenate([samples_by[e][si] for si in common]) if common else np.zeros(0)
        cmp["engines"][e] = {"ttfm_us": stats(t, TTFM_Q), "tbm_us": stats(sm, TBM_Q)}
    ref = "llguidance" if "llguidance" in active else None
    if ref and common:
        for e in active:
            c = cmp["engines"][e]
            r = cmp["engines"][ref]
            ratios = [ttfm_by[e][si] / ttfm_by[ref][si] for si in common if ttfm_by[ref][si] > 0]
            c["ttfm_ratio_vs_llguidance_median"] = float(np.median(ratios)) if ratios else None
            c["tbm_avg_ratio_vs_llguidance"] = (c["tbm_us"]["avg"] / r["tbm_us"]["avg"]
                                                if r["tbm_us"]["avg"] else None)
    return {"engines": per_engine, "common_subset": cmp, "schemas": per_schema}

"""What a walk of instances came to: counts of valid and invalid instances passed, the
failures with their context (`summarize_walk`, `failure_record`), per-token time
summaries (`tstats`), and the start of a task's record (`task_record`).

Must not run engines or print.
"""

from __future__ import annotations

import numpy as np

from benchmarks.masks.percentiles import stats

TBM_Q = [50, 90, 99]


def failure_record(tok, valid, toks, o, text=None):
    at = o["at"]
    rec = {"valid": valid, "at_token": at, "of": len(toks), "reason": o["reason"]}
    if at is not None:
        rec["before"] = tok.decode(toks[max(0, at - 12):at])[-60:]
        rec["token"] = tok.decode(toks[at:at + 1]) if at < len(toks) else "<EOS>"
    if text is not None:
        rec["text"] = text if len(text) <= 300 else text[:300] + "..."
    return rec


def summarize_walk(tok, tests, r, texts=None):
    """Per-run outcome counts (instances) and failure records."""
    out = {"valid_ok": 0, "valid": 0, "invalid_ok": 0, "invalid": 0, "exceptions": 0,
           "validation_errors": [], "invalidation_errors": []}
    for ti, ((valid, toks), o) in enumerate(zip(tests, r.get("outcomes", []))):
        out["exceptions"] += bool(o.get("exception"))
        text = texts[ti] if texts else None
        if valid:
            out["valid"] += 1
            if o["accepted"]:
                out["valid_ok"] += 1
            else:
                out["validation_errors"].append({"test": ti, **failure_record(tok, valid, toks, o, text)})
        else:
            out["invalid"] += 1
            if not o["accepted"]:
                out["invalid_ok"] += 1
            else:
                out["invalidation_errors"].append({"test": ti, **({"text": text} if text else {})})
    return out


def tstats(a, qs=TBM_Q):
    return stats(np.asarray(a, dtype=np.float64), qs)


def task_record(r) -> dict:
    """The start of a task's record: status, time, error or truncation, and TTFM over its
    repeated compiles (the runs, their median, the compile's median)."""
    rec = {"status": r["status"], "task_s": round(r["task_s"], 2)}
    for k in ("error", "truncated"):
        if k in r:
            rec[k] = r[k]
    if "ttfm_us" in r:
        rec["ttfm_us"] = {"runs": [round(x, 1) for x in r["ttfm_us"]], "median": float(np.median(r["ttfm_us"])),
                          "compile_median": float(np.median(r["compile_us"]))}
    return rec

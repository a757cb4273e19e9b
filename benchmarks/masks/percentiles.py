"""Summaries of timing samples: percentiles (`pct`), count, mean, percentiles and maximum
(`stats`), and the log-spaced histogram of per-token times that the plots draw
(`tbm_histogram`).

Must not format numbers for printing (report.formats.us does).
"""

from __future__ import annotations

import numpy as np


def tbm_histogram(samples_us: np.ndarray) -> dict:
    """Per-token times in log-spaced bins (10 per decade, 0.1 µs to 100 s): the whole
    distribution for plots, without storing every sample."""
    edges = np.logspace(-1, 8, 91)
    clipped = np.clip(samples_us, edges[0], edges[-1] * 0.999)
    counts, _ = np.histogram(clipped, bins=edges)
    return {"edges_us": [float(f"{e:.4g}") for e in edges], "counts": counts.tolist()}


def pct(a, qs):
    if len(a) == 0:
        return [None] * len(qs)
    return [float(x) for x in np.percentile(a, qs)]


def stats(a_us, qs):
    a = np.asarray(a_us, dtype=np.float64)
    if len(a) == 0:
        return {"n": 0, "avg": None, **{f"p{q:g}": None for q in qs}, "max": None}
    return {"n": int(len(a)), "avg": float(a.mean()), **{f"p{q:g}": v for q, v in zip(qs, pct(a, qs))},
            "max": float(a.max())}

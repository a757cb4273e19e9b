"""The measuring loop MaskBench and CFGBench share, run inside an engine's worker process.

`first_mask` times a cold compile to its first mask (TTFM). `walk_instances` walks each
test instance's tokens through a fresh matcher: per token, fill the mask, check the
token's bit and advance the matcher, timed together as one TBM sample (and the fill
alone, when asked); after the last token one more fill, where EOS must be allowed and the
matcher accepting. It records every sample, each instance's outcome (accepted, or where
and why not) and the tokens where the mask and the matcher disagree.

Owns the timed regions and what they record. Knows an engine only through its adapter
(`compile`, `matcher`, `fill`, `allowed`, `advance`, `accepting`, `eos_ids`;
benchmarks/peers.py); the worker processes, timeouts and reports are the benchmarks'.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

MAX_MISMATCHES = 20  # disagreements kept with their place; all of them are counted


@dataclass
class Walk:
    samples: list[int] = field(default_factory=list)  # ns: fill + bit + advance, and each final check
    fills: list[int] = field(default_factory=list)  # ns of the fill alone (time_fill only)
    outcomes: list[dict] = field(default_factory=list)  # one per instance walked
    mismatches: list[tuple] = field(default_factory=list)  # (instance, token index, which way)
    n_mismatch: int = 0


def first_mask(ad, spec, pc=time.perf_counter_ns) -> tuple[object, int, int]:
    """Compile `spec` and fill a new matcher's first mask: (compiled, TTFM ns, compile ns)."""
    t0 = pc()
    compiled = ad.compile(spec)
    t1 = pc()
    m = ad.matcher(compiled)
    ad.fill(m)
    t2 = pc()
    return compiled, t2 - t0, t1 - t0


def walk_instances(ad, compiled, tests, time_fill: bool = False, budget_s: float | None = None) -> Walk:
    """Walk every (valid, tokens) instance of `tests`; with `budget_s`, stop starting new
    instances once that many seconds are spent (the outcomes say how many were walked)."""
    walk = Walk()
    eos_ids = ad.eos_ids
    walk0 = time.monotonic()
    for ti, (_, tokens) in enumerate(tests):
        if budget_s and time.monotonic() - walk0 > budget_s:
            break
        walk.outcomes.append(_walk_one(ad, compiled, ti, tokens, eos_ids, time_fill, walk))
    return walk


def _walk_one(ad, compiled, ti: int, tokens, eos_ids, time_fill: bool, walk: Walk) -> dict:
    """Instance `ti`'s outcome; its samples and disagreements go to `walk`."""
    res = {"accepted": False, "at": None, "reason": ""}
    try:
        m = ad.matcher(compiled)
        for i, t in enumerate(tokens):
            bit, adv = _step(ad, m, t, None, time_fill, walk)
            if bit != adv:
                _mismatch(walk, (ti, i, "mask allows, matcher rejects" if bit else "mask forbids, matcher accepts"))
            if not (bit and adv):
                res["at"] = i
                res["reason"] = "token not in mask" if not bit else "matcher rejected token"
                return res
        eos_ok, acc = _step(ad, m, None, eos_ids, time_fill, walk)
        if eos_ok and acc:
            res["accepted"] = True
        else:
            res["at"] = len(tokens)
            res["reason"] = ", ".join(x for x, bad in (("EOS not in mask", not eos_ok),
                                                      ("not accepting", not acc)) if bad)
    except BaseException as e:  # noqa: BLE001 - pyo3 panics are BaseExceptions
        res["reason"] = f"exception {type(e).__name__}: {e}"[:500]
        res["exception"] = True
    return res


def _mismatch(walk: Walk, where: tuple) -> None:
    walk.n_mismatch += 1
    if len(walk.mismatches) < MAX_MISMATCHES:
        walk.mismatches.append(where)


def _step(ad, m, t, eos_ids, time_fill: bool, walk: Walk, pc=time.perf_counter_ns) -> tuple[bool, bool]:
    """One timed sample: fill, then token `t`'s bit and advance; or, given `eos_ids`, the
    final check: fill, then whether EOS is allowed and the matcher accepting. Between the
    clock reads there is nothing but these calls and two branches; `pc` is a default
    argument so that the clock is a local name there, not a global lookup."""
    s0 = pc()
    ad.fill(m)
    sf = pc() if time_fill else s0
    if eos_ids is None:
        first, second = ad.allowed(t), ad.advance(m, t)
    else:
        first, second = any(ad.allowed(e) for e in eos_ids), ad.accepting(m)
    s1 = pc()
    walk.samples.append(s1 - s0)
    if time_fill:
        walk.fills.append(sf - s0)
    return first, second

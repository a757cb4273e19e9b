"""The tools suite's measurements, on engines already set up (benchmarks/tool_bench/engines.py).

- `cold_row`: one engine, one tool_choice, one number of tools: for each seed a tool set,
  compiled cold to its first mask (walk.py's `first_mask`: compile time, and compile +
  new matcher + first mask), then one valid call walked token by token through a new
  matcher (walk.py's `walk_instances`: every token in the mask and accepted, EOS allowed
  at the end). Medians in ms.
- `reuse_row`: structgen only: a tool set compiled cold, then the same set with one tool
  replaced compiled with the compile cache kept, against that second set compiled cold.

Owns the timed order: an untimed warm-up compile per engine, an untimed collection before
each compile, the cache cleared before each cold one. Must not print or write files.
"""

from __future__ import annotations

import gc

from benchmarks.report.formats import median
from benchmarks.tool_bench.engines import CLOSE_TAG, OPEN_TAG, ToolChoice
from benchmarks.tool_bench.functions import Function, call_text, one_replaced, tool_set
from benchmarks.walk import first_mask, walk_instances

NS_PER_MS = 1e6


def cold_row(engine: str, ad, tokenizer, functions: list[Function], size: int, auto: bool,
             seeds: list[int]) -> dict:
    compile_ms, ttfm_ms, errors, calls = [], [], [], []
    for seed in seeds:
        tools = tool_set(functions, size, seed)
        try:
            compiled, ttfm_ns, compile_ns = cold_compile(ad, ToolChoice(tools, auto))
        except Exception as e:  # noqa: BLE001 - a refused or failed compile is a result
            errors.append({"seed": seed, "error": f"{type(e).__name__}: {e}"[:500]})
            continue
        compile_ms.append(compile_ns / NS_PER_MS)
        ttfm_ms.append(ttfm_ns / NS_PER_MS)
        calls.append({"seed": seed, **valid_call(ad, compiled, tokenizer, tools)})
    return {"engine": engine, "tool_choice": mode(auto), "tools": size, "samples": len(seeds),
            "compile_ms": rounded_median(compile_ms), "ttfm_ms": rounded_median(ttfm_ms),
            "compile_samples_ms": rounded(compile_ms), "ttfm_samples_ms": rounded(ttfm_ms),
            "valid_call_accepted": sum(c["accepted"] for c in calls), "valid_calls": calls, "errors": errors}


def reuse_row(ad, functions: list[Function], size: int, auto: bool, seeds: list[int]) -> dict:
    """structgen's TTFM: `size` tools cold; the same with one replaced, cache kept; that one cold."""
    cold, kept, replaced_cold, errors = [], [], [], []
    for seed in seeds:
        tools = tool_set(functions, size, seed)
        changed = ToolChoice(one_replaced(tools, functions, seed), auto)
        try:
            first = cold_compile(ad, ToolChoice(tools, auto))[1]
            again = timed_compile(ad, changed)[1]
            alone = cold_compile(ad, changed)[1]
        except Exception as e:  # noqa: BLE001 - a failed compile is a result
            errors.append({"seed": seed, "error": f"{type(e).__name__}: {e}"[:500]})
            continue
        cold.append(first / NS_PER_MS)
        kept.append(again / NS_PER_MS)
        replaced_cold.append(alone / NS_PER_MS)
    return {"tool_choice": mode(auto), "tools": size, "samples": len(seeds),
            "cold_ttfm_ms": rounded_median(cold), "one_replaced_cache_kept_ttfm_ms": rounded_median(kept),
            "one_replaced_cold_ttfm_ms": rounded_median(replaced_cold), "cold_samples_ms": rounded(cold),
            "one_replaced_cache_kept_samples_ms": rounded(kept), "one_replaced_cold_samples_ms": rounded(replaced_cold),
            "errors": errors}


def warm_up(ad, functions: list[Function]) -> None:
    """One untimed compile of a one-tool set per tool_choice: the imports and the
    per-vocabulary tables a first compile builds are not counted in any figure."""
    for auto in (False, True):
        try:
            cold_compile(ad, ToolChoice(functions[:1], auto))
        except Exception:  # noqa: BLE001 - the timed compiles will record the error
            pass


def cold_compile(ad, choice: ToolChoice):
    """(compiled, TTFM ns, compile ns) with the engine's caches cleared first."""
    before = getattr(ad, "before_compile", None)
    if before is not None:
        before()
    return timed_compile(ad, choice)


def timed_compile(ad, choice: ToolChoice):
    source = ad.source(choice)
    gc.collect()
    return first_mask(ad, source)


def valid_call(ad, compiled, tokenizer, tools: list[Function]) -> dict:
    """One valid call walked through a new matcher: accepted, or where and why not."""
    name, origin, text = call_text(tools, OPEN_TAG, CLOSE_TAG)
    tokens = tokenizer.encode(text, add_special_tokens=False)
    outcome = walk_instances(ad, compiled, [(True, tokens)]).outcomes[0]
    return {"function": name, "arguments_from": origin, "tokens": len(tokens), **outcome}


def mode(auto: bool) -> str:
    return "auto" if auto else "required"


def rounded_median(values: list[float]) -> float | None:
    value = median(values)
    return None if value is None else round(value, 3)


def rounded(values: list[float]) -> list[float]:
    return [round(v, 3) for v in values]

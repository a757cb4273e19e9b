"""MaskBench's markdown summary on stdout (`print_report`), and what CFGBench's summary
shares: the machine and versions lines (`print_machine`) and the engines' settings
(`print_engines`), which the tools suite's summary uses too. Microseconds print as the
result tables print them (`report.formats.us`).

Reads the results file's content only; must not compute figures (aggregate does).
"""

from __future__ import annotations

from benchmarks.report.formats import us


def print_machine(m, v):
    """The machine and versions lines of a summary (MaskBench's and CFGBench's)."""
    print(f"- machine: {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable), {m['memory_gib']} GiB, "
          f"{m['platform']}, Python {m['python']}; load average {m['loadavg_1min_start_end'][0]} at start, "
          f"{m['loadavg_1min_start_end'][1]} at end")
    print("- versions: " + ", ".join(f"{k} {val}" for k, val in v.items()
                                     if val and k != "structgen_sources_changed_during_run"))


def print_engines(engines: dict, skipped: dict) -> None:
    """A line per engine with its settings, and one per engine skipped with the reason."""
    for e, st in engines.items():
        print(f"  - {e}: " + "; ".join(f"{k}: {val}" for k, val in st.items()))
    for e, note in skipped.items():
        print(f"- skipped {e}: {note}")


def print_report(rep):
    m, v, s = rep["machine"], rep["versions"], rep["settings"]
    print()
    print(f"## MaskBench-dev: {s['schemas']} schemas, {s['instances']} instances, {s['instance_tokens']:,} tokens")
    print()
    print_machine(m, v)
    ch = v.get("structgen_sources_changed_during_run")
    if ch and ch["structgen_worker_restarts"]:
        print("- WARNING: structgen's sources changed during the run and restarted structgen workers imported "
              "the new code: its figures mix versions; run again on a settled tree")
    elif ch:
        print("- note: structgen's sources changed during the run; no structgen worker restarted, so every "
              "structgen figure comes from the code as it was at the start")
    print(f"- tokenizer: {s['tokenizer']}, vocab {s['vocab_size']:,}; instances: {s['serialization']}")
    et = "".join(f", {e} {t:g} s" for e, t in s["engine_timeouts_s"].items())
    print(f"- settings: timeout {s['timeout_s']:g} s compile{et} / {s['test_timeout_s']:g} s instances per schema, "
          f"jobs {s['jobs']}, seed {s['seed']}, limit {s['limit'] or 'all'}" + (f", filter {s['filter']!r}" if s['filter'] else "")
          + (f"; {s['gc']}" if s.get("gc") else ""))
    print_engines(s["engines"], s["skipped"])
    print()
    print("| engine | schemas | passing | compile errors | timeouts | validation errors (valid rejected) "
          "| invalidation errors (invalid accepted) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for e, r in rep["engines"].items():
        print(f"| {e} | {r['schemas']} | {r['passing']} | {r['compile_errors']} | {r['timeouts']} "
              f"| {r['validation_errors']} | {r['invalidation_errors']} |")
    print()
    print("TTFM (compile + first mask) and TBM (mask + advance, per token), µs:")
    print()
    print("| engine | TTFM avg | p50 | p90 | p99 | max | TBM avg | p50 | p90 | p99 | p99.9 | max | tokens |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for e, r in rep["engines"].items():
        a, b = r["ttfm_us"], r["tbm_us"]
        print(f"| {e} | {us(a['avg'])} | {us(a['p50'])} | {us(a['p90'])} | {us(a['p99'])} | {us(a['max'])} "
              f"| {us(b['avg'], 1)} | {us(b['p50'], 1)} | {us(b['p90'], 1)} | {us(b['p99'], 1)} "
              f"| {us(b['p99.9'], 1)} | {us(b['max'], 1)} | {b['n']:,} |")
    c = rep["common_subset"]
    if len(c["engines"]) > 1:
        print()
        print(f"Like for like, on the {c['schemas']} schemas that every engine compiled (µs; ratios vs llguidance: "
              "median per-schema TTFM ratio, TBM avg ratio):")
        print()
        print("| engine | TTFM p50 | p90 | max | TBM avg | p50 | p99 | TTFM ×llg | TBM ×llg |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for e, r in c["engines"].items():
            a, b = r["ttfm_us"], r["tbm_us"]
            ra, rb = r.get("ttfm_ratio_vs_llguidance_median"), r.get("tbm_avg_ratio_vs_llguidance")
            print(f"| {e} | {us(a['p50'])} | {us(a['p90'])} | {us(a['max'])} | {us(b['avg'], 1)} "
                  f"| {us(b['p50'], 1)} | {us(b['p99'], 1)} | {us(ra, 1) if ra else '–'} "
                  f"| {us(rb, 1) if rb else '–'} |")
    notes = []
    for e, r in rep["engines"].items():
        extra = []
        if r["compile_crashes"]:
            extra.append(f"{r['compile_crashes']} compile crashes (counted as compile errors)")
        if r["init_errors"]:
            extra.append(f"{r['init_errors']} setup errors (counted as compile errors)")
        if r["test_timeouts"]:
            extra.append(f"{r['test_timeouts']} timeouts while walking instances (in timeouts)")
        if r["test_crashes"]:
            extra.append(f"{r['test_crashes']} crashes while walking instances")
        if r["exceptions"]:
            extra.append(f"{r['exceptions']} instances raised")
        if r["compile_error_types"]:
            extra.append("compile errors by type: " + ", ".join(f"{k} {n}" for k, n in
                                                                 list(r["compile_error_types"].items())[:4]))
        if r["mask_mismatches"]:
            extra.append(f"{r['mask_mismatches']} tokens where mask and matcher disagree")
        if extra:
            notes.append(f"- {e}: " + "; ".join(extra))
    if notes:
        print()
        print("\n".join(notes))

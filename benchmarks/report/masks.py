"""MaskBench (suite `masks`, maskbench.json): its RESULTS.md block (`render_masks`: outcomes,
TTFM and TBM per engine, the like-for-like subset) and its README headline
(`headline_masks`, without structgen's other settings, with the tools suite's line).

Reads only its suite's results file (and the tools suite's line, from tools.py); must
not place blocks in the documents
(documents.py does).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.report.formats import ms, table, us
from benchmarks.report.provenance import data_option, maskbench_command, provenance, reproduce
from benchmarks.report.results import machine_label, suite_results
from benchmarks.report.tools import tools_headline_line

# MaskBench rows that README's headline leaves to RESULTS.md: structgen's other settings.
HEADLINE_LEAVES_OUT = {"structgen-flexible", "structgen-warm"}


def render_masks(results_dir: Path) -> list[str]:
    data = suite_results("masks", results_dir)
    if data is None:
        return []
    s, engines = data["settings"], data["engines"]
    intro = (f"{s['schemas']:,} schemas, {s['instances']:,} instances ({s['instance_tokens']:,} tokens), "
             f"vocabulary of {s['vocab_size']:,} tokens:")
    outcomes = table(
        ["engine", "schemas", "passing", "compile errors", "timeouts", "validation errors (valid rejected)",
         "invalidation errors (invalid accepted)"],
        [[name, r["schemas"], r["passing"], r["compile_errors"], r["timeouts"], r["validation_errors"],
          r["invalidation_errors"]] for name, r in engines.items()])
    parts = [intro, outcomes, "TTFM (compile + first mask) and TBM (mask + advance, per token), µs:",
             mask_times_table(engines)]
    common = data.get("common_subset", {})
    if len(common.get("engines", {})) > 1:
        parts += [f"Like for like, on the {common['schemas']:,} schemas that every engine compiled (µs; ratios vs "
                  "llguidance: median per-schema TTFM ratio, TBM avg ratio):", common_subset_table(common["engines"])]
    return parts + [provenance(data) + f" {data['wall_s']:.0f} s. " + reproduce(maskbench_command(data))]


def mask_times_table(engines: dict) -> str:
    rows = []
    for name, r in engines.items():
        a, b = r["ttfm_us"], r["tbm_us"]
        rows.append([name, us(a["avg"]), us(a["p50"]), us(a["p90"]), us(a["p99"]), us(a["max"]),
                     us(b["avg"], 1), us(b["p50"], 1), us(b["p90"], 1), us(b["p99"], 1), us(b["p99.9"], 1),
                     us(b["max"], 1), f"{b['n']:,}"])
    return table(["engine", "TTFM avg", "p50", "p90", "p99", "max", "TBM avg", "p50", "p90", "p99", "p99.9",
                  "max", "tokens"], rows)


def common_subset_table(engines: dict) -> str:
    rows = []
    for name, r in engines.items():
        a, b = r["ttfm_us"], r["tbm_us"]
        rows.append([name, us(a["p50"]), us(a["p90"]), us(a["max"]), us(b["avg"], 1), us(b["p50"], 1),
                     us(b["p99"], 1), us(r.get("ttfm_ratio_vs_llguidance_median"), 1),
                     us(r.get("tbm_avg_ratio_vs_llguidance"), 1)])
    return table(["engine", "TTFM p50", "p90", "max", "TBM avg", "p50", "p99", "TTFM ×llg", "TBM ×llg"], rows)


def headline_masks(results_dir: Path) -> list[str]:
    data = suite_results("masks", results_dir)
    if data is None:
        return []
    s = data["settings"]
    source = "MaskBench-dev" if not data_option(s["data"]) else "of your"
    intro = (f"{s['schemas']:,} {source} schemas ({s['instances']:,} instances), {machine_label(data, memory=False)}; "
             "TTFM (compile + first mask) in ms, TBM (mask + advance, per token) in µs:")
    rows = [[name, f"{r['passing']:,}", r["invalidation_errors"], r["validation_errors"], ms(r["ttfm_us"]["p50"]),
             us(r["tbm_us"]["p50"], 1), us(r["tbm_us"]["p99"], 1)] for name, r in data["engines"].items()
            if name not in HEADLINE_LEAVES_OUT]
    tools = tools_headline_line(results_dir)
    return [(f"{tools} " if tools else "") + intro, table(["engine", "passing", "invalid accepted", "valid rejected",
                                                           "TTFM p50", "TBM p50", "TBM p99"], rows)]

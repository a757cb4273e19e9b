"""The CPU engine suite (`engine`, engine.json): structgen's engine against transformers
`generate`, as its RESULTS.md block (`render_engine`) and README headline
(`headline_engine`), one table for both (`engine_table`).

Reads only its suite's results file; must not place blocks in the documents
(documents.py does).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.report.formats import median, table, times, tok_s
from benchmarks.report.provenance import engine_command, provenance, reproduce
from benchmarks.report.results import machine_label, suite_results


def render_engine(results_dir: Path) -> list[str]:
    data = suite_results("engine", results_dir)
    if data is None:
        return []
    intro = f"{data['model']}, medians of {data['runs']} runs:"
    return [intro, engine_table(data), provenance(data) + " " + reproduce(engine_command(data))]


def engine_table(data: dict) -> str:
    rows = []
    if "single" in data:
        r = data["single"]
        rows.append(["1 request, 128 new tokens (tok/s)", tok_s(median(r["engine_tok_s"])),
                     tok_s(median(r["hf_tok_s"])), times(r["ratio"])])
    if "batch" in data:
        r = data["batch"]
        label = f"{len(r['out_lens'])} mixed requests"
        if r.get("hf_sequential_tok_s"):
            rows.append([f"{label} vs one by one (output tok/s)", tok_s(median(r["engine_tok_s"])),
                         tok_s(median(r["hf_sequential_tok_s"])), times(r["ratio_vs_sequential"])])
        rows.append([f"{label} vs padded batch (output tok/s)", tok_s(median(r["engine_tok_s"])),
                     tok_s(median(r["hf_padded_tok_s"])), times(r["ratio_vs_padded"])])
    if "prefix" in data:
        r = data["prefix"]
        rows.append(["TTFT with a cached 1,000-token prefix vs caching off (ms)",
                     f"{1000 * median(r['ttft_cached_s']):,.0f}",
                     f"{1000 * median(r['ttft_uncached_s']):,.0f} (ours, off)", times(r["ratio"])])
    return table(["scenario", "structgen", "transformers", "ratio"], rows)


def headline_engine(results_dir: Path) -> list[str]:
    data = suite_results("engine", results_dir)
    if data is None:
        return []
    return [f"{data['model']}, {machine_label(data, memory=False)}, medians of {data['runs']} runs:",
            engine_table(data)]

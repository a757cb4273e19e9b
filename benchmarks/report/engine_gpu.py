"""The GPU engine suite (`engine-gpu`, engine_gpu.json): throughput by batch with and
without CUDA graphs, and the summary line (bandwidth, MBU, ratios), as its RESULTS.md
block (`render_engine_gpu`) and README headline (`headline_engine_gpu`).

Reads only its suite's results file; must not place blocks in the documents
(documents.py does).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.report.formats import median, table, times, tok_s
from benchmarks.report.provenance import args_command, provenance, reproduce
from benchmarks.report.results import machine_label, suite_results


def render_engine_gpu(results_dir: Path) -> list[str]:
    data = suite_results("engine-gpu", results_dir)
    if data is None:
        return []
    args = data["args"]
    intro = (f"{data['shape']} shape, {data['dtype']}, dummy weights; {args['prompt_len']}-token prompts, "
             f"{args['output_len']} new tokens each, medians of {args['runs']} runs:")
    return [intro, gpu_throughput_table(data), gpu_summary(data),
            provenance(data) + " " + reproduce(args_command("engine_gpu", args, "engine-gpu", "engine_gpu.json"))]


def gpu_throughput_table(data: dict) -> str:
    def median_tok_s(kind: str, batch: str) -> str:
        runs = data.get(kind, {}).get(batch, {}).get("output_tok_s")
        return tok_s(median(runs)) if runs else "--"

    rows = []
    for batch, r in sorted(data["graphs"].items(), key=lambda item: int(item[0])):  # JSON keys are strings
        steps = [s for s in r["decode_step_s"] if s is not None]
        step = f"{1000 * median(steps):.2f} ms" if steps else "--"
        rows.append([batch, median_tok_s("graphs", batch), median_tok_s("eager", batch), median_tok_s("hf", batch),
                     step])
    return table(["batch", "structgen, CUDA graphs (output tok/s)", "structgen, eager", "transformers `generate`",
                  "decode step"], rows)


def gpu_summary(data: dict) -> str:
    summary = data["summary"]
    mbu = {"mbu_engine_step": "engine step", "mbu_graph_replay": "graph replay alone", "mbu_eager_step": "eager step"}
    parts = [f"HBM bandwidth (device-to-device copy): {data['bandwidth_bytes_s'] / 1e12:.2f} TB/s"]
    found = [f"{label} {summary[key]:.2f}" for key, label in mbu.items() if key in summary]
    if found:
        parts.append("MBU at batch 1: " + ", ".join(found))
    for prefix, label in (("graphs_vs_eager_b", "CUDA graphs vs eager"),
                          ("engine_vs_hf_b", "structgen vs transformers `generate`")):
        ratios = [f"{times(v, 1)} at batch {k[len(prefix):]}" for k, v in summary.items() if k.startswith(prefix)]
        if ratios:
            parts.append(f"{label}: " + ", ".join(ratios))
    return ". ".join(parts) + "."


def headline_engine_gpu(results_dir: Path) -> list[str]:
    data = suite_results("engine-gpu", results_dir)
    if data is None:
        return []
    args = data["args"]
    intro = (f"{data['shape']} shape, {data['dtype']}, on {machine_label(data, memory=False)}; "
             f"{args['prompt_len']}-token prompts, {args['output_len']} new tokens each:")
    return [intro, gpu_throughput_table(data), gpu_summary(data)]

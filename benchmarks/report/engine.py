"""The CPU engine suite (`engine`, engine.json): structgen's engine against transformers
`generate`, as its RESULTS.md block (`render_engine`) and README headline
(`headline_engine`), one table for both (`engine_table`); then each weight quantization
against llama.cpp on the same GGUF file (engine.json's "quantized" part,
`quantized_table`), float and native against it on that file rewritten in another of
llama.cpp's file types ("quantized_Q4_K_M", ...), and the quality guard's figures per
mode (quality.json, `quality_table`).

Reads only those two results files; must not place blocks in the documents
(documents.py does).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.report.formats import median, table, times, tok_s
from benchmarks.report.provenance import engine_command, provenance, reproduce
from benchmarks.report.results import machine_label, read_results, suite_results

QUANTIZED_COMMAND = "python benchmarks/engine.py --scenarios quantized --threads 2"
QUALITY_COMMAND = ("python benchmarks/quality.py --modes native,int8,int4 --group-sizes 32,64 "
                   "--kv-cache-dtypes float32,int8,fp8")


def render_engine(results_dir: Path) -> list[str]:
    data = suite_results("engine", results_dir)
    if data is None:
        return []
    intro = f"{data['model']}, medians of {data['runs']} runs:"
    blocks = [intro, engine_table(data), provenance(data) + " " + reproduce(engine_command(data))]
    quantized = data.get("quantized")
    if quantized:
        blocks += [f"Quantized weights against llama.cpp (llama-cpp-python) on the same GGUF file, "
                   f"{quantized['threads']} threads each, greedy chat requests of {quantized['tokens']} new tokens "
                   "(constrained: a four-property JSON schema, through llama.cpp's own GBNF path), output tok/s and "
                   "the ratio to llama.cpp:", quantized_table(quantized),
                   provenance(quantized) + " " + reproduce(QUANTIZED_COMMAND)]
    for key in sorted(k for k in data if k.startswith("quantized_")):
        part = data[key]
        blocks += [f"The same file rewritten by llama.cpp's quantizer as {part['gguf_type']} (each layer in that "
                   "type's format, or in llama.cpp's fallback where the type's blocks do not divide its width), "
                   "float and native against llama.cpp on it, output tok/s and the ratio to llama.cpp:",
                   quantized_table(part),
                   provenance(part) + " " + reproduce(f"{QUANTIZED_COMMAND} --gguf-type {part['gguf_type']}")]
    quality = read_results(Path(results_dir) / "quality.json")
    if quality:
        blocks += [f"Quality guard: each mode against the float model, on a fixed text of "
                   f"{quality['text_tokens']:,} tokens and {quality['prompts']} chat prompts of "
                   f"{quality['greedy_tokens']} greedy tokens (lossy: perplexity more than "
                   f"{100 * (quality['lossy_above'] - 1):.0f}% above float's; never a default):",
                   quality_table(quality), quality_provenance(quality) + " " + reproduce(QUALITY_COMMAND)]
    return blocks


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


def quantized_table(quantized: dict) -> str:
    """Per case, each mode's tok/s with its ratio to llama.cpp's, and llama.cpp's."""
    cases = quantized["tok_s"]
    modes = [name for name in next(iter(cases.values())) if name != "llama.cpp"]
    rows = []
    for case, by_system in cases.items():
        peer = median(by_system.get("llama.cpp", []))
        cells = [tok_s(median(by_system[mode])) + (f" ({times(median(by_system[mode]) / peer)})" if peer else "")
                 for mode in modes]
        rows.append([case, *cells, tok_s(peer)])
    rows.append(["weights (MB)", *(f"{quantized['weight_mb'][mode]:,.0f}" for mode in modes), ""])
    return table(["output tok/s", *modes, "llama.cpp"], rows)


def quality_provenance(quality: dict) -> str:
    """quality.py records its machine as one line of text, not the other scripts' fields."""
    parts = [quality.get("model"), quality.get("machine"), f"{quality.get('threads')} torch threads", quality.get("time")]
    return "Measured with " + "; ".join(str(part) for part in parts if part) + "."


def quality_table(quality: dict) -> str:
    rows = [[row["mode"], f"{row['perplexity']:.3f}", times(row["perplexity_ratio"], 3),
             f"{100 * row['top1_agreement']:.1f}%", f"{100 * row['greedy_agreement']:.1f}%",
             f"{row['weight_mb']:,.0f}", "lossy" if row["lossy"] else ""] for row in quality["rows"]]
    return table(["mode", "perplexity", "vs float", "top-1 agreement", "greedy agreement", "weights (MB)", ""], rows)


def headline_engine(results_dir: Path) -> list[str]:
    data = suite_results("engine", results_dir)
    if data is None:
        return []
    lines = [f"{data['model']}, {machine_label(data, memory=False)}, medians of {data['runs']} runs:",
             engine_table(data)]
    quantized, quality = data.get("quantized"), read_results(Path(results_dir) / "quality.json")
    if quantized and quality:
        lines += ["Weight quantization (`native`, the embedded model's default on CPU: the GGUF file's own "
                  f"layers) against llama.cpp on the same file{k_quants_clause(data)}:", quantized_table(quantized),
                  "Quality guard, each mode against float (perplexity ratio, greedy agreement): "
                  + quality_line(quality) + "."]
    return lines


def k_quants_clause(data: dict) -> str:
    """ (and on llama.cpp's own Q3_K_M, ... of it, native free: 1.09x, ...), from the
    quantized_<type> results, or "" when there are none."""
    kinds = sorted(key for key in data if key.startswith("quantized_"))
    if not kinds:
        return ""
    ratios = []
    for key in kinds:
        runs = data[key]["tok_s"]["free"]
        ratios.append(times(median(runs["native"]) / median(runs["llama.cpp"])))
    names = ", ".join(key.removeprefix("quantized_") for key in kinds)
    return f" (and on llama.cpp's own {names} of it, native free: {', '.join(ratios)})"


def quality_line(quality: dict) -> str:
    """Each mode's perplexity against float's and its greedy agreement, in one line (the
    guard's whole table is in RESULTS.md)."""
    return "; ".join(f"{row['mode']} {times(row['perplexity_ratio'], 3)}, {100 * row['greedy_agreement']:.1f}%"
                     + (" (lossy)" if row["lossy"] else "") for row in quality["rows"] if row["mode"] != "float")

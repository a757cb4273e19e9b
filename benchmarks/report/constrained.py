"""Constrained decoding (suite `constrained`: constrained.json, and constrained_gpu.json
from a GPU machine): overhead against free decoding, jump-forward, validation at
temperature 1.0 and the transformers + xgrammar baseline, as its RESULTS.md block
(`render_constrained`) and README headline (`headline_constrained`).

Reads only its suite's results files; must not place blocks in the documents
(documents.py does).
"""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks.report.formats import median, table, times, tok_s
from benchmarks.report.provenance import args_command, provenance, reproduce
from benchmarks.report.results import CONSTRAINED_GPU_FILE, machine_label, read_results, suite_results


def render_constrained(results_dir: Path) -> list[str]:
    parts = []
    data = suite_results("constrained", results_dir)
    if data is not None:
        parts += [f"{data['model']}, medians of {data['runs']} runs:", constrained_table(data),
                  provenance(data) + " " + reproduce(args_command("constrained", data["args"], "constrained",
                                                                  "constrained.json"))]
    gpu = read_results(Path(results_dir) / CONSTRAINED_GPU_FILE)
    if gpu is not None and "overhead" in gpu:
        parts += [f"On a GPU ({gpu['model']}), medians of {gpu['runs']} warm runs:", overhead_table(gpu["overhead"])]
        if "baseline" in gpu:
            parts.append(table(["measure", "result"], baseline_rows(gpu["baseline"]), numeric_from=2))
        parts.append(provenance(gpu) + " " + reproduce(args_command("constrained", gpu["args"], "constrained",
                                                                    CONSTRAINED_GPU_FILE)))
    return parts


def constrained_table(data: dict) -> str:
    rows = []
    if "overhead" in data:
        rows.append(overhead_row(data["overhead"]))
    if "jump" in data:
        rows += jump_rows(data["jump"])
    if "validate" in data:
        rows += validate_rows(data["validate"])
    if "baseline" in data:
        rows += baseline_rows(data["baseline"])
    return table(["measure", "result"], rows, numeric_from=2)


def overhead_row(r: dict) -> list[str]:
    on, off = r["constrained"], r["constrained_no_jump"]
    return [f"{r['concurrency']} concurrent requests x {r['length']} tokens, string-heavy schema vs unconstrained "
            "(warm grammar)",
            f"{times(on['ratio'])} tokens/s with jump-forward, {times(off['ratio'])} without "
            f"(cold first run {times(on['cold_ratio'])} / {times(off['cold_ratio'])})"]


def overhead_table(r: dict) -> str:
    base = median(r["unconstrained"]["tok_s"])
    rows = [[f"unconstrained, {r['concurrency']} x {r['length']} tokens", tok_s(base), "1.00x",
             tok_s(r["unconstrained"]["cold_tok_s"])]]
    for key, label in (("constrained", "string-heavy schema, jump-forward on"),
                       ("constrained_no_jump", "string-heavy schema, jump-forward off")):
        v = r[key]
        rows.append([label, tok_s(median(v["tok_s"])), times(v["ratio"], 3),
                     f"{tok_s(v['cold_tok_s'])} ({times(v['cold_ratio'])}; {v['cold_mask_s']:.1f} s of masks)"])
    return table(["decoding", "output tok/s", "vs unconstrained", "cold first run (tok/s)"], rows)


def jump_rows(r: dict) -> list[list[str]]:
    rows = []
    profile = r.get("profile")
    if profile:
        rows.append([f"profile schema, {profile['requests']} requests, batch 1: latency with jump-forward off / on",
                     f"{times(profile['latency_ratio'])} lower; forward passes {profile['steps_off']} -> "
                     f"{profile['steps_on']}"])
    calls = r.get("function_calls")
    if calls:
        sources = dict.fromkeys(re.split(r"---|_", name)[0] for name in r.get("files", []))  # Glaiveai2K---x.json
        rows.append([f"{calls['requests']} function-call schemas ({', '.join(sources)}), batch 1",
                     f"{times(calls['latency_ratio'])} lower; {100 * calls['forced_share']:.0f}% of tokens "
                     f"fast-forwarded, {100 * calls['steps_saved_share']:.0f}% of forward passes saved"])
    return rows


def validate_rows(r: dict) -> list[list[str]]:
    on, off = r["jump_on"], r["jump_off"]
    json_label = f"{r['compile']['compiled']} maskbench-dev schemas at temperature 1.0, jump-forward on / off"
    pattern_label = f"{on['pattern']['requests']} regex and choice requests, on / off"
    return [[json_label, finished(on["json"], off["json"], r["max_tokens"])],
            [pattern_label, finished(on["pattern"], off["pattern"], r["max_tokens"])]]


def finished(on: dict, off: dict, max_tokens: int) -> str:
    failures = len(on["failures"]) + len(off["failures"])
    checked = "every one validates" if on["validated"] == on["stopped"] and off["validated"] == off["stopped"] \
        else f"{on['stopped'] - on['validated']} / {off['stopped'] - off['validated']} fail validation"
    text = f"{on['stopped']} / {off['stopped']} finished, {checked}"
    if on["length"] or off["length"]:
        text += f"; {on['length']} / {off['length']} cut at {max_tokens} tokens"
    return text + (f"; {failures} failures listed in the JSON" if failures else "")


def baseline_rows(r: dict) -> list[list[str]]:
    invalid = len(r["engine_valid"]["invalid"]), len(r["hf_valid"]["invalid"])
    validity = "both all valid" if invalid == (0, 0) else f"invalid: structgen {invalid[0]}, transformers {invalid[1]}"
    rows = [[f"{len(r['files'])} function-call requests vs transformers `generate` + xgrammar logits processor "
             "(one padded batch)", f"{times(r['ratio'])} output tokens/s, {validity}"]]
    if "sequential_ratio" in r:  # results before the request-by-request baseline lack it
        rows.append([f"the same {len(r['files'])} requests vs transformers + xgrammar one request at a time",
                     f"{times(r['sequential_ratio'])} output tokens/s"])
    return rows


def headline_constrained(results_dir: Path) -> list[str]:
    rows, where = [], []
    data = suite_results("constrained", results_dir)
    if data is not None:
        where.append(f"CPU: {data['model']}, {machine_label(data, memory=False)}")
        if "overhead" in data:
            rows.append(["CPU", *overhead_row(data["overhead"])])
        calls = [row for row in jump_rows(data.get("jump", {})) if "function-call" in row[0]]
        rows += [["CPU", f"{label}: latency with jump-forward on vs off", result] for label, result in calls]
        if "validate" in data:
            rows.append(["CPU", *validate_rows(data["validate"])[0]])
        rows += [["CPU", *row] for row in baseline_rows(data["baseline"])] if "baseline" in data else []
    gpu = read_results(Path(results_dir) / CONSTRAINED_GPU_FILE)
    if gpu is not None and "overhead" in gpu:
        where.append(f"GPU: {gpu['model']} on {machine_label(gpu, memory=False)}")
        r = gpu["overhead"]
        rows.append(["GPU", f"{r['concurrency']} concurrent requests x {r['length']} tokens, string-heavy schema vs "
                            "unconstrained (warm grammar)",
                     f"{times(r['constrained']['ratio'], 3)} tokens/s with jump-forward, "
                     f"{times(r['constrained_no_jump']['ratio'], 3)} without"])
        rows += [["GPU", *row] for row in baseline_rows(gpu["baseline"])[:1]] if "baseline" in gpu else []
    if not rows:
        return []
    return ["; ".join(where) + ", medians of warm runs:", table(["", "measure", "result"], rows, numeric_from=3)]

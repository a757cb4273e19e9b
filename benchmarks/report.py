"""README.md's Performance tables, generated from the benchmark results.

Owns: the markdown between `<!-- results:SUITE -->` and `<!-- /results:SUITE -->` in
README.md (SUITE: masks, cfg, engine, engine-gpu, constrained, serve) -- each suite's
tables, a line saying which machine, versions and commit the figures come from and the
command that reproduces them, and links to the suite's PNG plots. Also the names and
captions of those PNGs (FIGURES; plots.py draws them) and the reading of the results
files, which plots.py shares.

Reads benchmarks/results/*.json; must not measure anything, and must not touch README.md
outside the markers: the prose around them is written by hand. A figure that the results
file does not hold is left out, never filled in.

    python -m benchmarks.report            # rewrite README.md's generated blocks
    python -m benchmarks.report --check    # exit 1 (and say which) when README.md is out of date
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import statistics
import sys
from pathlib import Path

from benchmarks.suites import REPO, RESULTS, SUITES

CONSTRAINED_GPU_FILE = "constrained_gpu.json"  # constrained.py run on a GPU machine with --out

# The PNGs plots.py draws for each suite: file name -> what it shows (also the README's alt text).
FIGURES: dict[str, dict[str, str]] = {
    "masks": {"masks-tbm.png": "Mask time (TBM) distribution by engine",
              "masks-ttfm.png": "Compile time to first mask (TTFM) by engine"},
    "cfg": {"cfg-tbm.png": "Per-token mask time (TBM) p50 and p99 by engine and workload"},
    "engine": {"engine-throughput.png": "structgen's engine vs transformers generate"},
    "engine-gpu": {"engine-gpu-throughput.png": "Output tokens/s vs batch size"},
    "constrained": {"constrained-overhead.png": "Constrained vs unconstrained decoding throughput",
                    "constrained-jump.png": "Jump-forward on vs off: forward passes and latency",
                    "constrained-gpu-overhead.png": "Constrained vs unconstrained decoding throughput (GPU)"},
    "serve": {"serve-throughput.png": "Server throughput vs concurrency",
              "serve-latency.png": "Server latency percentiles vs load"},
    "soak": {"soak-memory.png": "Server memory during the soak (32 clients, cached, fresh and hostile schemas)"},
}

MARKED_BLOCK = re.compile(r"(<!-- results:(?P<suite>[\w-]+) -->\n)(?P<body>.*?)(<!-- /results:(?P=suite) -->)",
                          re.DOTALL)


# -- reading results ---------------------------------------------------------------------


def read_results(path: Path) -> dict | None:
    """A results file's JSON object; None when it is missing or not a JSON object."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        print(f"{path}: not readable as JSON ({error})", file=sys.stderr)
        return None
    return data if isinstance(data, dict) else None


def suite_results(suite: str, results_dir: Path) -> dict | None:
    return read_results(Path(results_dir) / SUITES[suite].results_file)


def run_label(data: dict) -> str:
    """One short line for a plot title: model, machine, structgen commit."""
    parts = []
    model = data.get("model") or data.get("shape")
    if model:
        parts.append(" ".join(str(x) for x in (model, data.get("dtype")) if x))
    parts.append(machine_label(data, memory=False))
    commit = structgen_commit(data)
    if commit:
        parts.append(f"structgen {commit}")
    return "; ".join(filter(None, parts))


def machine_label(data: dict, memory: bool) -> str:
    """The GPU, or the CPU and its cores (maskbench/cfgbench's `machine`, the other scripts'
    `environment`), with torch's thread count where recorded."""
    env, machine = data.get("environment", {}), data.get("machine", {})
    if env.get("gpu"):
        return env["gpu"]
    if machine:
        size = f", {machine.get('memory_gib')} GiB" if memory else ""
        return f"{machine.get('cpu', 'CPU')}, {machine.get('cores', '?')} cores{size}"
    if env.get("cpu_count"):
        return ", ".join(filter(None, (env.get("machine"), f"{env['cpu_count']} cores"))) + torch_threads(env)
    return ""


def torch_threads(env: dict) -> str:
    threads = env.get("threads")
    return f", {threads} torch thread{'s' * (threads != 1)}" if threads else ""


def structgen_commit(data: dict) -> str | None:
    env = data.get("environment", {})
    if env.get("commit"):
        return env["commit"] + (" + uncommitted changes" if env.get("structgen_dirty") else "")
    version = data.get("versions", {}).get("structgen") or ""  # maskbench/cfgbench: "0.1.0 (1f6c66b)"
    found = re.search(r"\((\w+)\)", version)
    return found.group(1) if found else None


# -- number formats ----------------------------------------------------------------------


def us(value: float | None, decimals: int = 0) -> str:
    """Microseconds as maskbench.py prints them: one decimal below 10 (or when asked for,
    up to 100,000), thousands separated."""
    if value is None:
        return "–"
    if value >= 100_000 or (decimals == 0 and value >= 10):
        return f"{value:,.0f}"
    return f"{value:,.1f}"


def short(value: float | None) -> str:
    """Three or so significant figures: 2.6, 46.4, 466, 29,559."""
    if value is None:
        return "–"
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def tok_s(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def times(ratio: float | None, places: int = 2) -> str:
    return "–" if ratio is None else f"{ratio:.{places}f}x"


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def table(header: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    """A markdown table; columns from `numeric_from` on are right-aligned."""
    align = "|" + "".join("---|" if i < numeric_from else "---:|" for i in range(len(header)))
    lines = ["| " + " | ".join(str(cell) for cell in line) + " |" for line in (header, *rows)]
    return "\n".join([lines[0], align, *lines[1:]])


# -- provenance and commands -------------------------------------------------------------


def provenance(data: dict) -> str:
    """Where the figures come from: structgen commit, machine, versions, load, date."""
    env, machine, versions = data.get("environment", {}), data.get("machine", {}), data.get("versions", {})
    parts = [f"structgen {structgen_commit(data) or '(commit not recorded)'}"]
    parts.append(machine_label(data, memory=True))
    tools = {**{k: v for k, v in versions.items() if not k.startswith("structgen") and isinstance(v, str)},
             **{k: env[k] for k in ("python", "torch", "triton", "transformers", "xgrammar", "httpx") if env.get(k)}}
    parts.append(", ".join(f"{name} {version}" for name, version in tools.items()))
    if machine.get("loadavg_1min_start_end"):
        start, end = machine["loadavg_1min_start_end"]
        parts.append(f"load average {start:.1f} at the start, {end:.1f} at the end")
    elif env.get("load_avg") or env.get("loadavg"):
        parts.append(f"load average {(env.get('load_avg') or env['loadavg'])[0]:.1f} at the start")
    changed = versions.get("structgen_sources_changed_during_run")
    if changed and changed.get("structgen_worker_restarts"):
        parts.append("structgen's sources changed during the run and restarted workers loaded the new code: "
                     "its figures mix versions")
    elif changed:
        parts.append("structgen's sources changed during the run, but no structgen worker restarted: every "
                     "structgen figure is from the code at the start")
    if env.get("time"):
        parts.append(env["time"])
    return "Measured with " + "; ".join(filter(None, parts)) + "."


def command(script: str, options: dict) -> str:
    """`python benchmarks/SCRIPT.py --option value ...`; an option that is off (None, False,
    empty, 0) is left out, which for these scripts is also its default."""
    words = [f"python benchmarks/{script}.py"]
    for name, value in options.items():
        if value in (None, False, "", 0, [], "None", "False", "0"):  # constrained.py stores strings
            continue
        flag = "--" + name.replace("_", "-")
        if value is True or value == "True":
            words.append(flag)
        else:
            if isinstance(value, list):
                value = ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
            elif isinstance(value, float):
                value = f"{value:g}"
            value = str(value)
            if value.startswith("-"):  # e.g. --server-args "--max-num-seqs 64": one argument
                words.append(f"{flag}={shlex.quote(value)}")
            else:
                words.append(f"{flag} {shlex.quote(value)}")
    return " ".join(words)


def output_option(suite: str, file_name: str) -> dict:
    """The output option, when the results file is not the suite's usual one."""
    if file_name == SUITES[suite].results_file:
        return {}
    return {SUITES[suite].output_flag.lstrip("-"): f"benchmarks/results/{file_name}"}


def data_option(path: str) -> dict:
    """--data, unless it is the scripts' default (../shared/data/maskbench-dev).

    Compared by its last three parts: the results were written on a machine whose checkout
    lies elsewhere than the one rendering them (CI clones into a fresh directory).
    """
    return {} if Path(path).parts[-3:] == ("shared", "data", "maskbench-dev") else {"data": path}


def maskbench_command(data: dict) -> str:
    s = data["settings"]
    return command("maskbench", {
        **data_option(s["data"]), "engines": [*s["engines"], *s["skipped"]], "limit": s["limit"],
        "seed": s["seed"], "filter": s["filter"], "timeout": s["timeout_s"],
        "engine_timeouts": ",".join(f"{e}={t:g}" for e, t in s["engine_timeouts_s"].items()),
        "test_timeout": s["test_timeout_s"], "jobs": s["jobs"], "mem_limit_gb": s["mem_limit_gb"]})


def cfgbench_command(data: dict) -> str:
    s = data["settings"]
    limits = set(s["limits"].values())
    hard_timeout = re.search(r"\+ ([\d.]+) s", s["test_timeout_s"])  # recorded as text
    return command("cfgbench", {
        **data_option(s["data"]), "sections": s["sections"], "engines": [*s["engines"], *s["skipped"]],
        "quick": s["quick"], "limit": limits.pop() if len(limits) == 1 else None,
        "ttfm_repeats": s["ttfm_repeats"], "timeout": s["timeout_s"], "walk_budget": s["walk_budget_s"],
        "test_timeout": float(hard_timeout.group(1)) if hard_timeout else None, "mem_limit_gb": s["mem_limit_gb"]})


def engine_command(data: dict) -> str:
    # engine.py records no options: the scenarios and runs are read off the results.
    scenarios = [name for name in ("single", "batch", "prefix") if name in data]
    sequential = len(data.get("batch", {}).get("hf_sequential_tok_s", []))
    return command("engine", {"scenarios": scenarios, "runs": data["runs"], "sequential_runs": sequential})


def args_command(script: str, args: dict, suite: str, file_name: str, skip=("out", "output")) -> str:
    """For the scripts that store their argparse options (engine_gpu, constrained, serve)."""
    options = {k: v for k, v in args.items() if k not in skip}
    return command(script, {**options, **output_option(suite, file_name)})


def reproduce(command_line: str) -> str:
    return f"Reproduce: `{command_line}`"


# -- masks (maskbench.json) --------------------------------------------------------------


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


# -- cfg (cfgbench.json) -----------------------------------------------------------------


def render_cfg(results_dir: Path) -> list[str]:
    data = suite_results("cfg", results_dir)
    if data is None:
        return []
    sections = data["sections"]
    parts = []
    if "json_object" in sections:
        s = sections["json_object"]
        parts += [f"`json_object` on {s['instances']:,} valid MaskBench-dev objects ({s['tokens']:,} tokens), "
                  f"µs (TTFM: median of {s['ttfm_repeats']} cold compiles):", json_object_table(s["rows"])]
    if "recursive" in sections:
        s = sections["recursive"]
        parts += [f"Recursive schemas ({s['schemas_found']} MaskBench-dev schemas with `$ref` cycles, "
                  f"{s['instances']} instances), µs:", recursive_table(s["engines"])]
    if "grammars" in sections:
        parts += ["`grammars/` (sample sentences and near-misses, each checked against lark's Earley parser), "
                  "TBM p50 / p99 in µs:", grammars_table(sections["grammars"]["grammars"])]
    return parts + [provenance(data) + f" {data['wall_s']:.0f} s. " + reproduce(cfgbench_command(data))]


def json_object_table(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        ttfm = us(r["ttfm_us"]["median"]) if "ttfm_us" in r else "–"
        if "tbm_us" not in r:
            lines.append([r["label"], ttfm, "–", "–", "–", "–", r["status"]])
            continue
        t = r["tbm_us"]
        lines.append([r["label"], ttfm, us(t["p50"], 1), us(t["p90"], 1), us(t["p99"], 1), us(t["avg"], 1),
                      f"{r['passed']:,}/{r['passed'] + r['failed']:,}"])
    return table(["engine", "TTFM", "TBM p50", "p90", "p99", "mean", "passed"], lines)


def recursive_table(engines: dict) -> str:
    rows = []
    for name, r in engines.items():
        not_compiled = [f"{r['compile_errors']} refused"] * bool(r["compile_errors"])
        not_compiled += [f"{r['timeouts']} timed out"] * bool(r["timeouts"])
        compiled = f"{r['compiled']}" + (f" ({', '.join(not_compiled)})" if not_compiled else "")
        a, b = r["ttfm_us"], r["tbm_us"]
        rows.append([name, compiled, r["invalidation_errors"], r["validation_errors"], us(a["p50"]), us(a["p90"]),
                     us(b["p50"], 1), us(b["p99"], 1)])
    return table(["engine", "compiled", "invalid accepted", "valid rejected", "TTFM p50", "p90", "TBM p50", "p99"],
                 rows)


def grammars_table(grammars: dict) -> str:
    labels = list(dict.fromkeys(label for g in grammars.values() for label in g["engines"]))
    rows = [[name, *(grammar_cell(g, g["engines"].get(label)) for label in labels)] for name, g in grammars.items()]
    return table(["grammar", *labels], rows)


def grammar_cell(grammar: dict, r: dict | None) -> str:
    if r is None or r["status"] == "skipped":
        return "--"
    if "tbm_us" not in r:
        return r["status"]
    notes = []
    walked = r["valid"] + r["invalid"]
    if walked < grammar["sentences"]:
        notes.append(f"{walked} of {grammar['sentences']} sentences walked")
    rejected = r["valid"] - r["valid_ok"]
    if rejected:
        notes.append(f"all {rejected} valid rejected" if rejected == r["valid"] else f"{rejected} valid rejected")
    accepted = r["invalid"] - r["invalid_ok"]
    if accepted:
        notes.append(f"{accepted} invalid accepted")
    cell = f"{short(r['tbm_us']['p50'])} / {short(r['tbm_us']['p99'])}"
    return cell + (f" ({'; '.join(notes)})" if notes else "")


# -- engine (engine.json) ----------------------------------------------------------------


def render_engine(results_dir: Path) -> list[str]:
    data = suite_results("engine", results_dir)
    if data is None:
        return []
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
    intro = f"{data['model']}, medians of {data['runs']} runs:"
    return [intro, table(["scenario", "structgen", "transformers", "ratio"], rows),
            provenance(data) + " " + reproduce(engine_command(data))]


# -- engine-gpu (engine_gpu.json) --------------------------------------------------------


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


# -- constrained (constrained.json, constrained_gpu.json) --------------------------------


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


# -- serve (serve.json) ------------------------------------------------------------------


def render_serve(results_dir: Path) -> list[str]:
    data = suite_results("serve", results_dir)
    if data is None:
        return []
    settings = data["environment"]["settings"]
    intro = (f"{100 * settings['constrained_share']:.0f}% of requests constrained by a MaskBench-dev schema, "
             f"max_tokens {settings['max_tokens']}" + (", chaos on (disconnects, invalid schemas)" if settings["chaos"]
                                                       else "")
             + f"; SLO: TTFT <= {settings['slo_ttft']:g} s and TPOT <= {settings['slo_tpot']:g} s:")
    parts = [intro, serve_table(data["levels"]), serve_checks(data),
             provenance(data) + " " + reproduce(args_command("serve", settings, "serve", "serve.json"))]
    return [part for part in parts if part]


def serve_table(levels: list[dict]) -> str:
    def ms(latency: dict) -> str:
        return " / ".join("–" if latency[q] is None else f"{1000 * latency[q]:,.0f}" for q in ("p50", "p90", "p99"))

    rows = []
    for r in levels:
        share = "–" if r["slo_share"] is None else f"{100 * r['slo_share']:.0f}%"
        rows.append([r["level"], r["requests"], r["errors"],
                     f"{r['refused']} / {r.get('shed', 0)} / {r['expected_400']} / {r['disconnected']}",
                     ms(r["ttft"]), ms(r["tpot"]), ms(r["e2e"]), f"{r['req_s']:.2f}", f"{r['output_tok_s']:.1f}",
                     share, f"{r['goodput_req_s']:.2f}",
                     f"{r['constrained_valid']} / {r['constrained_invalid']} / {r['constrained_length']}"])
    return table(["level", "requests", "errors", "refused / shed / expected 400 / disconnected",
                  "TTFT p50 / p90 / p99 (ms)", "TPOT (ms)", "end to end (ms)", "req/s", "output tok/s",
                  "within SLO", "goodput (req/s)", "JSON valid / invalid / cut by length"], rows)


def serve_checks(data: dict) -> str:
    lines = []
    idle = data.get("server_after")
    if idle:
        state = "idle" if idle["idle"] else "NOT idle"
        lines.append(f"After the run the server was {state} (KV blocks used {idle['kv_blocks_used']:g} of "
                     f"{idle['kv_blocks_total']:g}, running {idle['running']:g}, waiting {idle['waiting']:g})")
    memory = data.get("memory")
    if memory:
        lines.append(f"resident memory {memory['first_mb']:,.0f} MB after the first level, {memory['last_mb']:,.0f} "
                     f"MB after the last ({'flat' if memory['flat'] else 'GROWING'})")
    overfill = data.get("overfill")
    if overfill:
        p99 = "–" if overfill["shed_p99_s"] is None else f"{1000 * overfill['shed_p99_s']:,.0f} ms"
        lines.append(f"overfill burst: {overfill['shed']} shed with 429/503 (p99 {p99}), {overfill['completed']} "
                     f"completed, {overfill['errors']} errors ({'ok' if overfill['ok'] else 'FAILED'})")
    return "; ".join(lines) + "." if lines else ""


# -- README ------------------------------------------------------------------------------

RENDERERS = {"masks": render_masks, "cfg": render_cfg, "engine": render_engine,
             "engine-gpu": render_engine_gpu, "constrained": render_constrained, "serve": render_serve}


def render(suite: str, results_dir: Path = RESULTS) -> str | None:
    """The markdown of one suite's README block, or None when its results are missing or
    of a shape this module does not know."""
    results_dir = Path(results_dir)
    try:
        parts = RENDERERS[suite](results_dir)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
        print(f"{suite}: results not rendered ({type(error).__name__}: {error})", file=sys.stderr)
        return None
    if not parts:
        return None
    links = [f"![{caption}]({link_path(results_dir / name)})" for name, caption in FIGURES[suite].items()
             if (results_dir / name).exists()]
    if links:
        parts.append(" ".join(links))
    return "\n\n".join(parts)


def link_path(path: Path) -> str:
    """A path as README.md (at the repository root) links it."""
    try:
        return path.resolve().relative_to(REPO).as_posix()
    except ValueError:
        return path.as_posix()


def updated_text(text: str, results_dir: Path) -> tuple[str, list[str]]:
    """README text with every marked block re-rendered, and the suites whose block changed.
    A block whose suite is unknown or has no results is left as it is."""
    changed = []

    def replace(match: re.Match) -> str:
        suite = match["suite"]
        body = render(suite, results_dir) if suite in RENDERERS else None
        if body is None:
            return match[0]
        new_body = "\n" + body.strip() + "\n\n"  # blank lines: markdown sees the tables as tables
        if new_body != match["body"]:
            changed.append(suite)
        return match[1] + new_body + match[4]

    return MARKED_BLOCK.sub(replace, text), changed


def update_readme(readme_path: Path, results_dir: Path = RESULTS) -> list[str]:
    """Rewrite the marked blocks of README.md from the results; the suites updated. The file
    is not written when nothing changed."""
    readme_path = Path(readme_path)
    text = readme_path.read_text()
    new_text, changed = updated_text(text, results_dir)
    if new_text != text:
        readme_path.write_text(new_text)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate README.md's Performance tables from benchmark results.")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when README.md is out of date")
    parser.add_argument("--readme", type=Path, default=REPO / "README.md")
    parser.add_argument("--results", type=Path, default=RESULTS, help="results folder")
    args = parser.parse_args(argv)
    text = args.readme.read_text()
    marked = [m["suite"] for m in MARKED_BLOCK.finditer(text)]
    if not marked:
        print(f"{args.readme}: no <!-- results:SUITE --> blocks", file=sys.stderr)
    for suite in marked:
        if suite not in RENDERERS:
            print(f"note: unknown suite {suite!r}: its block is left as written", file=sys.stderr)
        elif render(suite, args.results) is None:
            print(f"note: no results for {suite} in {args.results}: its block is left as written", file=sys.stderr)
    if args.check:
        _, stale = updated_text(text, args.results)
        if stale:
            print(f"{args.readme} is out of date for: {', '.join(stale)} (run python -m benchmarks.report)")
            return 1
        print(f"{args.readme} is up to date ({', '.join(marked) or 'no generated blocks'})")
        return 0
    updated = update_readme(args.readme, args.results)
    print(f"{args.readme}: " + (", ".join(updated) + " updated" if updated else "already up to date"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""PNG plots of the benchmark results, drawn for README.md and for anyone comparing runs.

Owns: the figures made from benchmarks/results/*.json, one set per suite (masks, cfg,
engine, engine-gpu, constrained, serve), written beside the JSON as `<suite>-<what>.png`.
Their file names and captions are listed in report.FIGURES (README.md links them), and
reading a results file is the report package's job too (report.results). Must not measure anything or change a
results file; a missing results file, or one of a shape it does not know, gives no plot
and no error.

    python -m benchmarks.plots                 # every suite
    python -m benchmarks.plots masks serve     # some of them
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from benchmarks.report import CONSTRAINED_GPU_FILE, FIGURES, read_results, run_label  # noqa: E402
from benchmarks.catalog import RESULTS, SUITES  # noqa: E402

# One colour per engine family in every figure; a family's variants (structgen-flexible,
# structgen (gbnf), ...) differ by line style or hatching.
FAMILY_COLORS = {"structgen": "tab:blue", "llguidance": "tab:orange", "xgrammar": "tab:green",
                 "outlines-core": "tab:red", "transformers": "tab:gray"}
PERCENTILE_STYLES = {"p50": "-", "p90": "--", "p99": ":"}
VARIANT_LINES = ["-", "--", ":", "-."]
VARIANT_HATCHES = ["", "//", "..", "xx", "\\\\"]
STYLE = {"figure.constrained_layout.use": True}  # room for the two-line titles; only while drawing


def family(label: str) -> str:
    """"structgen (lark)", "structgen-flexible" -> "structgen"; "xgrammar builtin JSON" -> "xgrammar"."""
    first_word = label.split(" ")[0]
    return next((name for name in FAMILY_COLORS if first_word.startswith(name)), first_word)


def color(label: str) -> str:
    return FAMILY_COLORS.get(family(label), "tab:purple")


def variants(labels: list[str]) -> dict[str, int]:
    """Each label's place among the labels of its family: 0 for the first, 1, 2, ..."""
    return {label: [other for other in labels if family(other) == family(label)].index(label) for label in labels}


def titled(figure: Figure, caption: str, data: dict, detail: str = "") -> Figure:
    subtitle = "; ".join(part for part in (run_label(data), detail) if part)
    figure.suptitle(f"{caption}\n{subtitle}", fontsize=11)
    return figure


def label_above(ax, x: float, values: list[float], text: str) -> None:
    """`text` centred at x, just above the highest of `values` (bars and run dots)."""
    ax.annotate(text, (x, max(values)), ha="center", va="bottom", xytext=(0, 5), textcoords="offset points",
                fontsize=9, fontweight="bold")
    ax.set_ylim(top=max(ax.get_ylim()[1], 1.12 * max(values)))  # room for the text (linear axes)


def run_dots(ax, x: float, runs: list[float], label: str | None = None) -> None:
    """Every run as a dot over its median bar: how much the runs spread."""
    ax.scatter([x] * len(runs), runs, s=12, color="black", zorder=3, label=label)


# -- masks: maskbench.json ---------------------------------------------------------------


def tbm_distribution(data: dict, engine: str) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """(bin edges in µs, counts, per_token) of an engine's mask times: the per-token
    histogram when the results have it, else the per-schema averages binned the same way."""
    hist = data["engines"][engine].get("tbm_hist")
    if hist:
        return np.asarray(hist["edges_us"], dtype=float), np.asarray(hist["counts"], dtype=float), True
    averages = [s["engines"][engine]["tbm_avg_us"] for s in data.get("schemas", [])
                if s["engines"].get(engine, {}).get("tbm_avg_us")]
    if not averages:
        return None
    low, high = np.floor(np.log10(min(averages))), np.ceil(np.log10(max(averages)))
    edges = np.logspace(low, high, int(10 * (high - low)) + 1)  # 10 bins a decade, as maskbench's histogram
    counts, _ = np.histogram(averages, bins=edges)
    return edges, counts.astype(float), False


def draw_mask_times(data: dict, caption: str) -> Figure | None:
    distributions = {name: tbm_distribution(data, name) for name in data["engines"]}
    distributions = {name: d for name, d in distributions.items() if d is not None and d[1].sum() > 0}
    if not distributions:
        return None
    per_token = all(d[2] for d in distributions.values())
    unit = "tokens" if per_token else "schemas"
    variant = variants(list(distributions))
    figure, (share_ax, tail_ax) = plt.subplots(1, 2, figsize=(13, 5))
    used = np.zeros(0)
    for name, (edges, counts, _) in distributions.items():
        total = counts.sum()
        label = f"{name} ({total:,.0f} {unit})"
        style = {"color": color(name), "linestyle": VARIANT_LINES[variant[name] % 4], "label": label, "linewidth": 1.5}
        share_ax.stairs(counts / total, edges, **style)
        above = 1 - np.cumsum(counts) / total  # share of samples slower than each bin's right edge
        tail_ax.step(np.r_[edges[0], edges[1:]], np.r_[1.0, np.where(above > 0, above, np.nan)], where="post", **style)
        used = np.r_[used, edges[:-1][counts > 0], edges[1:][counts > 0]]
    for ax in (share_ax, tail_ax):
        ax.set_xscale("log")
        ax.set_xlim(used.min(), used.max())
        ax.grid(True, which="major", alpha=0.3)
    what = "TBM per token (mask + advance), µs" if per_token else \
        "average TBM per schema, µs (per-token histogram not in this results file)"
    share_ax.set(xlabel=what, ylabel=f"share of {unit} per bin (10 bins a decade)")
    tail_ax.set_yscale("log")
    tail_ax.set(xlabel=what, ylabel=f"share of {unit} slower than x")
    for share, name in ((0.5, "p50"), (0.1, "p90"), (0.01, "p99"), (0.001, "p99.9")):
        tail_ax.axhline(share, color="gray", linewidth=0.6, linestyle=":")
        tail_ax.annotate(name, (1, share), xycoords=("axes fraction", "data"), xytext=(3, 0),
                         textcoords="offset points", va="center", fontsize=8, color="gray")
    share_ax.legend(fontsize=8)
    share_ax.set_title("distribution", fontsize=10)
    tail_ax.set_title("tail: where a curve crosses p99, 1% of its " + unit + " are slower", fontsize=10)
    source = "every token of the same MaskBench-dev instances" if per_token else \
        "PER-SCHEMA AVERAGES: this results file has no per-token histogram (tbm_hist)"
    return titled(figure, caption, data, source)


def draw_compile_times(data: dict, caption: str) -> Figure | None:
    schemas = data.get("schemas", [])
    if not schemas:
        return None
    variant = variants(list(data["engines"]))
    figure, ax = plt.subplots(figsize=(9, 5.5))
    for name in data["engines"]:
        ttfm = sorted(s["engines"][name]["ttfm_us"] / 1000 for s in schemas
                      if s["engines"].get(name, {}).get("ttfm_us") is not None)
        if not ttfm:
            continue
        share = np.arange(1, len(ttfm) + 1) / len(schemas)
        ax.step(ttfm, share, where="post", color=color(name), linestyle=VARIANT_LINES[variant[name] % 4], linewidth=1.5,
                label=f"{name}: {len(ttfm):,} of {len(schemas):,} compiled")
    ax.set_xscale("log")
    ax.set_ylim(0, 1)
    ax.grid(True, which="major", alpha=0.3)
    ax.set(xlabel="TTFM: compile + first mask, ms",
           ylabel=f"share of all {len(schemas):,} schemas with a first mask within x")
    ax.legend(fontsize=8, loc="upper left")
    return titled(figure, caption, data, "a curve that ends below 1: schemas refused or timed out")


# -- cfg: cfgbench.json ------------------------------------------------------------------


def cfg_workloads(data: dict) -> dict[str, dict[str, dict]]:
    """workload -> {engine label -> tbm_us stats} for every measured engine."""
    sections = data["sections"]
    workloads = {}
    if "json_object" in sections:
        workloads["json_object"] = {r["label"]: r["tbm_us"] for r in sections["json_object"]["rows"] if "tbm_us" in r}
    if "recursive" in sections:
        workloads["recursive schemas"] = {name: r["tbm_us"] for name, r in sections["recursive"]["engines"].items()
                                          if r["tbm_us"]["n"]}
    for grammar, g in sections.get("grammars", {}).get("grammars", {}).items():
        workloads[f"grammar: {grammar}"] = {label: r["tbm_us"] for label, r in g["engines"].items() if "tbm_us" in r}
    return {name: engines for name, engines in workloads.items() if engines}


def draw_cfg_mask_times(data: dict, caption: str) -> Figure | None:
    workloads = cfg_workloads(data)
    if not workloads:
        return None
    labels = list(dict.fromkeys(label for engines in workloads.values() for label in engines))
    labels.sort(key=lambda label: list(FAMILY_COLORS).index(family(label)) if family(label) in FAMILY_COLORS else 99)
    variant = variants(labels)
    figure, ax = plt.subplots(figsize=(max(10, 1.7 * len(workloads)), 5.5))
    for x, engines in enumerate(workloads.values()):
        width = 0.8 / len(engines)
        for i, (label, tbm) in enumerate(engines.items()):
            position = x - 0.4 + width * (i + 0.5)
            style = {"color": color(label), "hatch": VARIANT_HATCHES[variant[label] % 5], "edgecolor": "white"}
            ax.bar(position, tbm["p99"], width, alpha=0.35, **style)  # faded up to p99
            ax.bar(position, tbm["p50"], width, **style)  # solid up to p50
    ax.set_yscale("log")
    ax.set_xticks(range(len(workloads)), list(workloads), rotation=20, ha="right")
    ax.set_ylabel("TBM per token (mask + advance), µs")
    ax.grid(True, axis="y", which="major", alpha=0.3)
    handles = [Patch(facecolor=color(label), hatch=VARIANT_HATCHES[variant[label] % 5], edgecolor="white",
                     label=label) for label in labels]
    handles += [Patch(color="gray", label="solid: p50"), Patch(color="gray", alpha=0.35, label="faded: p99")]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return titled(figure, caption, data)


# -- engine: engine.json -----------------------------------------------------------------


def draw_engine(data: dict, caption: str) -> Figure | None:
    groups = []  # (scenario, structgen runs, transformers runs)
    if "single" in data:
        groups.append(("1 request\n(decode tok/s)", data["single"]["engine_tok_s"], data["single"]["hf_tok_s"]))
    if "batch" in data:
        batch = data["batch"]
        requests = len(batch["out_lens"])
        if batch.get("hf_sequential_tok_s"):
            groups.append((f"{requests} requests, vs\none by one (output tok/s)", batch["engine_tok_s"],
                           batch["hf_sequential_tok_s"]))
        groups.append((f"{requests} requests, vs\npadded batch (output tok/s)", batch["engine_tok_s"],
                       batch["hf_padded_tok_s"]))
    if not groups and "prefix" not in data:
        return None
    figure, (speed_ax, ttft_ax) = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [2, 1]})
    for x, (_, ours, theirs) in enumerate(groups):
        for offset, runs, who in ((-0.2, ours, "structgen"), (0.2, theirs, "transformers")):
            speed_ax.bar(x + offset, statistics.median(runs), 0.4, color=FAMILY_COLORS[who],
                         label=who if x == 0 else None)
            run_dots(speed_ax, x + offset, runs, label="one run" if x == 0 and who == "structgen" else None)
        label_above(speed_ax, x, ours + theirs, f"{statistics.median(ours) / statistics.median(theirs):.2f}x")
    speed_ax.set_xticks(range(len(groups)), [g[0] for g in groups], fontsize=9)
    speed_ax.set_ylabel("tokens/s (bar: median)")
    speed_ax.legend(fontsize=8)
    if "prefix" in data:
        prefix = data["prefix"]
        cases = {"prefix cached": prefix["ttft_cached_s"], "caching off": prefix["ttft_uncached_s"]}
        for x, runs in enumerate(cases.values()):
            runs_ms = [1000 * r for r in runs]
            ttft_ax.bar(x, statistics.median(runs_ms), 0.6, color=FAMILY_COLORS["structgen"],
                        alpha=1.0 if x == 0 else 0.5)
            label_above(ttft_ax, x, runs_ms, f"{statistics.median(runs_ms):,.0f} ms")
            run_dots(ttft_ax, x, runs_ms)
        ttft_ax.set_xticks(range(len(cases)), list(cases))
        ttft_ax.set_ylabel("time to first token, ms (1,000-token shared prefix)")
    else:
        ttft_ax.set_visible(False)
    return titled(figure, caption, data, f"medians of {data['runs']} runs")


# -- engine-gpu: engine_gpu.json ---------------------------------------------------------


def draw_engine_gpu(data: dict, caption: str) -> Figure | None:
    lines = {"structgen, CUDA graphs": data.get("graphs", {}), "structgen, eager": data.get("eager", {}),
             "transformers generate": data.get("hf", {})}
    styles = {"structgen, CUDA graphs": (FAMILY_COLORS["structgen"], "-"),
              "structgen, eager": (FAMILY_COLORS["structgen"], "--"),
              "transformers generate": (FAMILY_COLORS["transformers"], "-")}
    if not any(lines.values()):
        return None
    figure, ax = plt.subplots(figsize=(8, 5.5))
    batches = set()
    for label, by_batch in lines.items():
        points = sorted((int(batch), statistics.median(r["output_tok_s"])) for batch, r in by_batch.items())
        if points:
            line_color, line_style = styles[label]
            ax.plot(*zip(*points), line_style, marker="o", color=line_color, label=label)
            batches.update(b for b, _ in points)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sorted(batches), [str(b) for b in sorted(batches)])
    ax.minorticks_off()
    ax.grid(True, which="major", alpha=0.3)
    ax.set(xlabel="batch size (requests submitted at once)", ylabel="output tokens/s (median)")
    ax.legend(fontsize=9)
    args = data.get("args", {})
    return titled(figure, caption, data, f"{args.get('prompt_len')}-token prompts, {args.get('output_len')} new tokens")


# -- constrained: constrained.json, constrained_gpu.json ---------------------------------


def draw_overhead(data: dict, caption: str) -> Figure | None:
    overhead = data.get("overhead")
    if not overhead:
        return None
    cases = {"unconstrained": "unconstrained", "constrained": "schema, jump-forward on",
             "constrained_no_jump": "schema, jump-forward off"}
    base = statistics.median(overhead["unconstrained"]["tok_s"])
    figure, ax = plt.subplots(figsize=(8, 5.5))
    for x, key in enumerate(cases):
        runs = overhead[key]["tok_s"]
        ax.bar(x, statistics.median(runs), 0.6, color=FAMILY_COLORS["structgen"] if x else "tab:gray",
               label="warm grammar (median)" if x == 0 else None)
        label_above(ax, x, [*runs, overhead[key]["cold_tok_s"]], f"{statistics.median(runs) / base:.3f}x")
        run_dots(ax, x, runs, label="one warm run" if x == 0 else None)
        ax.scatter([x], [overhead[key]["cold_tok_s"]], marker="x", s=60, color="tab:red", zorder=3,
                   label="cold first run" if x == 0 else None)
    ax.set_xticks(range(len(cases)), list(cases.values()))
    ax.set_ylabel(f"output tokens/s, {overhead['concurrency']} requests x {overhead['length']} tokens")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return titled(figure, caption, data, "string-heavy schema; ratio = vs unconstrained")


def draw_jump(data: dict, caption: str) -> Figure | None:
    workloads = {name: data["jump"][name] for name in ("profile", "function_calls") if name in data.get("jump", {})}
    if not workloads:
        return None
    # One row per workload: their sizes differ too much to share an axis.
    figure, axes = plt.subplots(len(workloads), 2, figsize=(10, 3.6 * len(workloads)), squeeze=False)
    for (steps_ax, wall_ax), (name, r) in zip(axes, workloads.items()):
        for x, key in enumerate(("off", "on")):
            style = {"color": FAMILY_COLORS["structgen"], "alpha": 0.45 if key == "off" else 1.0}
            steps_ax.bar(x, r[f"steps_{key}"], 0.6, **style)
            wall_ax.bar(x, statistics.median(r[f"wall_{key}_s"]), 0.6, **style)
            run_dots(wall_ax, x, r[f"wall_{key}_s"])
        label_above(steps_ax, 1, [r["steps_off"], r["steps_on"]], f"{100 * r['steps_saved_share']:.0f}% fewer")
        label_above(wall_ax, 1, r["wall_off_s"] + r["wall_on_s"], f"{r['latency_ratio']:.2f}x lower")
        workload = f"{name.replace('_', ' ')}, {r['requests']} requests at batch 1"
        steps_ax.set(title=workload, ylabel="forward passes (engine steps)")
        wall_ax.set(title=workload, ylabel="wall time, all requests, s (bar: median)")
        for ax in (steps_ax, wall_ax):
            ax.set_xticks([0, 1], ["jump-forward off", "jump-forward on"])
    return titled(figure, caption, data, "the same prompts with jump-forward on and off; dots: one run each")


# -- serve: serve.json -------------------------------------------------------------------


def closed_loop_levels(data: dict) -> list[tuple[int, dict]]:
    levels = []
    for level in data["levels"]:
        found = re.fullmatch(r"concurrency (\d+)", level["level"])
        if found:
            levels.append((int(found.group(1)), level))
    return sorted(levels, key=lambda item: item[0])


def serve_detail(data: dict) -> str:
    settings = data["environment"]["settings"]
    return (f"max_tokens {settings['max_tokens']}, {100 * settings['constrained_share']:.0f}% constrained"
            + (", quick run" if settings.get("quick") else ""))


def draw_serve_throughput(data: dict, caption: str) -> Figure | None:
    levels = closed_loop_levels(data)
    if not levels:
        return None
    concurrency = [c for c, _ in levels]
    figure, (requests_ax, tokens_ax) = plt.subplots(1, 2, figsize=(12, 5))
    requests_ax.plot(concurrency, [r["req_s"] for _, r in levels], marker="o", color=FAMILY_COLORS["structgen"],
                     label="completed requests/s")
    requests_ax.plot(concurrency, [r["goodput_req_s"] for _, r in levels], marker="o", linestyle="--",
                     color=FAMILY_COLORS["structgen"], alpha=0.6, label="goodput (within the SLO)")
    tokens_ax.plot(concurrency, [r["output_tok_s"] for _, r in levels], marker="o", color=FAMILY_COLORS["structgen"])
    settings = data["environment"]["settings"]
    requests_ax.set(xlabel="concurrent clients (closed loop)", ylabel="requests/s")
    requests_ax.legend(fontsize=8, title=f"SLO: TTFT <= {settings['slo_ttft']:g} s, TPOT <= {settings['slo_tpot']:g} s",
                       title_fontsize=8)
    tokens_ax.set(xlabel="concurrent clients (closed loop)", ylabel="output tokens/s")
    for ax in (requests_ax, tokens_ax):
        ax.set_xscale("log", base=2)
        ax.set_xticks(concurrency, [str(c) for c in concurrency])
        ax.minorticks_off()
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    return titled(figure, caption, data, serve_detail(data))


def draw_serve_latency(data: dict, caption: str) -> Figure | None:
    levels = [level for level in data["levels"] if level["ttft"]["p50"] is not None]
    if not levels:
        return None
    figure, axes = plt.subplots(1, 3, figsize=(14, 4.8))
    names = {"ttft": "time to first token", "tpot": "time per output token", "e2e": "end to end"}
    positions = range(len(levels))
    for ax, (metric, title) in zip(axes, names.items()):
        for percentile, style in PERCENTILE_STYLES.items():
            values = [1000 * level[metric][percentile] if level[metric][percentile] is not None else np.nan
                      for level in levels]
            ax.plot(positions, values, style, marker="o", color=FAMILY_COLORS["structgen"], label=percentile)
        ax.set_xticks(positions, [level["level"] for level in levels], rotation=20, ha="right", fontsize=8)
        ax.set(title=title, ylabel="ms")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    return titled(figure, caption, data, serve_detail(data))


def draw_soak_memory(data: dict, caption: str) -> Figure | None:
    result = data["result"]
    if not result["memory_mb"]:
        return None
    minutes, rss, cache = zip(*((sample[0] / 60, sample[1], sample[2]) for sample in result["memory_mb"]))
    figure, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(minutes, rss, color=FAMILY_COLORS["structgen"], label="server + compile workers, resident")
    workers = [sample[3] if len(sample) > 3 else None for sample in result["memory_mb"]]
    if any(mb is not None for mb in workers):
        ax.plot(minutes, [float("nan") if mb is None else mb for mb in workers], color="tab:olive",
                label="compile workers, resident")
    if any(mb is not None for mb in cache):
        ax.plot(minutes, [float("nan") if mb is None else mb for mb in cache], color="tab:gray",
                label="grammar cache (its own count)")
    if result["settled_mb"] is not None:
        limit = result["settled_mb"] * 1.05
        ax.axhline(limit, color="tab:red", linestyle="--", linewidth=1, label="settled + 5%")
    ax.set_xlabel("minutes")
    ax.set_ylabel("MB")
    ax.set_ylim(0, max(rss) * 1.15)
    ax.legend(fontsize=8, loc="lower right")
    requests = sum(result["outcomes"].values())
    errors = sum(n for outcome, n in result["outcomes"].items() if outcome.split(": ", 1)[1].startswith("5"))
    return titled(figure, caption, data, f"{requests} requests, {errors} 5xx, {data['clients']} clients")


# -- driver ------------------------------------------------------------------------------

# file name -> (the results file it is drawn from, the function that draws it)
DRAWINGS = {
    "masks-tbm.png": (SUITES["masks"].results_file, draw_mask_times),
    "masks-ttfm.png": (SUITES["masks"].results_file, draw_compile_times),
    "cfg-tbm.png": (SUITES["cfg"].results_file, draw_cfg_mask_times),
    "engine-throughput.png": (SUITES["engine"].results_file, draw_engine),
    "engine-gpu-throughput.png": (SUITES["engine-gpu"].results_file, draw_engine_gpu),
    "constrained-overhead.png": (SUITES["constrained"].results_file, draw_overhead),
    "constrained-jump.png": (SUITES["constrained"].results_file, draw_jump),
    "constrained-gpu-overhead.png": (CONSTRAINED_GPU_FILE, draw_overhead),
    "serve-throughput.png": (SUITES["serve"].results_file, draw_serve_throughput),
    "serve-latency.png": (SUITES["serve"].results_file, draw_serve_latency),
    "soak-memory.png": (SUITES["soak"].results_file, draw_soak_memory),
}


def plot_suite(suite: str, results_dir: Path = RESULTS) -> list[Path]:
    """Draw a suite's PNGs from its results in `results_dir`, next to them; the paths written."""
    results_dir = Path(results_dir)
    written = []
    for name, caption in FIGURES.get(suite, {}).items():
        source, draw = DRAWINGS[name]
        data = read_results(results_dir / source)
        if data is None:
            continue
        try:
            with plt.rc_context(STYLE):
                figure = draw(data, caption)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:  # another shape of results
            print(f"{name}: not drawn from {source} ({type(error).__name__}: {error})", file=sys.stderr)
            plt.close("all")
            continue
        if figure is None:
            continue
        path = results_dir / name
        figure.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})  # no version: stable files
        plt.close(figure)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Draw the benchmark plots (PNG) from the results files.")
    parser.add_argument("suites", nargs="*", metavar="SUITE", help=f"some of: {', '.join(FIGURES)} (default: all)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="results folder (the PNGs go there too)")
    args = parser.parse_args(argv)
    unknown = [suite for suite in args.suites if suite not in FIGURES]
    if unknown:
        parser.error(f"unknown suite {', '.join(unknown)}; known: {', '.join(FIGURES)}")
    for suite in args.suites or FIGURES:
        for path in plot_suite(suite, args.results):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

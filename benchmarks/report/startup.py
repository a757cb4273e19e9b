"""Start-up (suite `startup`, startup.json): its RESULTS.md block (`render_startup`), and
README's headline table that it shares with the robustness suites (`headline_startup`:
start-up, isolation, fuzz and soak, one row or two each).

Reads only those suites' results files; must not place blocks in the documents
(documents.py does).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.report.formats import table
from benchmarks.report.provenance import reproduce
from benchmarks.report.results import suite_results


def render_startup(results_dir: Path) -> list[str]:
    data = suite_results("startup", results_dir)
    if data is None:
        return []
    r = data["result"]
    seconds = lambda key: "–" if r.get(key) is None else f"{r[key]:.2f} s"  # noqa: E731
    rows = [["install (README's command, fresh venv)", seconds("install_s"), "<= 240 s"],
            ["serve until listening, cold (empty caches)", seconds("listening_cold_s"), "<= 30 s"],
            ["serve until listening, warm", seconds("listening_warm_s"), "<= 8 s"],
            ["first reply after listening, cold / warm",
             f"{r['first_reply_cold_s']:.2f} s / {r['first_reply_warm_s']:.2f} s", "<= 2 s"],
            ["`import structgen` + `Vocabulary.default()`", seconds("import_and_vocabulary_s"), "<= 3 s"],
            [f"first mask of {r['schema']}: fresh process / after other schemas",
             f"{1e3 * r['first_mask_fresh_process_s']:.1f} ms / {1e3 * r['first_mask_after_others_s']:.1f} ms "
             f"({r['first_mask_ratio']:.2f}x)", "<= 2x"]]
    intro = f"A scratch clone of the checkout, every cache folder empty for the cold figures; {data['cpu_count']} cores:"
    return [intro, table(["phase", "result", "target"], rows, numeric_from=1),
            f"Measured {data['time']}. " + reproduce("python benchmarks/startup.py --install --runs 3")]


def headline_startup(results_dir: Path) -> list[str]:
    """Start-up and the robustness suites (isolation, fuzz, soak) in one table."""
    rows = []
    data = suite_results("startup", results_dir)
    if data is not None:
        r = data["result"]
        rows += [["serve until listening, cold / warm; then the first reply",
                  f"{r['listening_cold_s']:.1f} s / {r['listening_warm_s']:.1f} s; {r['first_reply_cold_s']:.1f} s"],
                 ["first mask in a fresh process vs a warm one", f"{r['first_mask_ratio']:.2f}x"]]
    data = suite_results("isolation", results_dir)
    if data is not None:
        rows += [["a stream's largest gap while a 20,000-value enum compiles", f"{data['gaps']['gap_ratio']:.2f}x its median"]]
    data = suite_results("fuzz", results_dir)
    if data is not None:
        fives = sum(n for outcome, n in data["outcomes"].items() if outcome.startswith("5"))
        rows += [[f"fuzz, {data['minutes']:g} minutes", f"{data['inputs']:,} inputs, {fives} 5xx, "
                                                        f"{len(data['problems'])} problems"]]
    data = suite_results("soak", results_dir)
    if data is not None and data["result"]["growth_peak"] is not None:
        r = data["result"]
        fives = sum(n for outcome, n in r["outcomes"].items() if outcome.split(": ", 1)[1].startswith("5"))
        rows += [[f"soak, {data['minutes']:g} minutes at {data['clients']} clients",
                  f"memory vs minute ten: {100 * r['growth_end']:+.1f}% at the end, {100 * r['growth_peak']:+.1f}% "
                  f"at peak; {fives} 5xx"]]
    return [table(["on 2 cores", "result"], rows)] if rows else []

"""CFGBench (suite `cfg`, cfgbench.json): its RESULTS.md block (`render_cfg`: the
json_object, recursive and grammars sections) and its README headline (`headline_cfg`).

Reads only its suite's results file; must not place blocks in the documents
(documents.py does).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.report.formats import short, table, us
from benchmarks.report.provenance import cfgbench_command, provenance, reproduce
from benchmarks.report.results import machine_label, suite_results


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
        s = sections["grammars"]
        parts += ["`grammars/` (sample sentences and near-misses, each checked against lark's Earley parser), "
                  f"µs: TTFM (median of {s['ttfm_repeats']} cold compiles) · TBM p50 / p99",
                  grammars_table(s["grammars"])]
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
    ttfm = us(r["ttfm_us"]["median"]) if "ttfm_us" in r else "–"
    cell = f"{ttfm} · {short(r['tbm_us']['p50'])} / {short(r['tbm_us']['p99'])}"
    return cell + (f" ({'; '.join(notes)})" if notes else "")


def headline_cfg(results_dir: Path) -> list[str]:
    data = suite_results("cfg", results_dir)
    if data is None:
        return []
    sections, parts = data["sections"], []
    if "json_object" in sections:
        s = sections["json_object"]
        machine = machine_label(data, memory=False)
        parts += [f"`json_object` on {s['instances']:,} MaskBench-dev objects, {machine}, µs:",
                  json_object_table(s["rows"])]
    if "recursive" in sections:
        s = sections["recursive"]
        counts = [f"{name} {r['compiled']} ({r['invalidation_errors']} invalid instances accepted)"
                  for name, r in s["engines"].items()]
        parts.append(f"Recursive schemas compiled, of {s['schemas_found']}: " + ", ".join(counts) + ".")
    return parts

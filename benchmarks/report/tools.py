"""Tool-call grammars (suite `tools`, tools.json): its RESULTS.md block (`render_tools`:
TTFM by number of tools and engine per tool_choice, the valid calls accepted, and one
tool replaced in a set with the compile cache kept against that set cold), its line in
README's MaskBench headline (`tools_headline_line`), and the table cells the suite's own
summary prints too (`cold_cells`, `reuse_cells`).

Reads only its suite's results file; must not place blocks in the documents
(documents.py does).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.report.formats import short, table, times
from benchmarks.report.provenance import command, data_option, provenance, reproduce
from benchmarks.report.results import suite_results

REUSE_HEADER = ["tool_choice", "tools", "cold", "one replaced, cache kept", "one replaced, cold",
                "kept / replaced cold"]


def render_tools(results_dir: Path) -> list[str]:
    data = suite_results("tools", results_dir)
    if data is None:
        return []
    s, rows = data["settings"], data["cold"]
    engines = list(dict.fromkeys(row["engine"] for row in rows))
    parts = [f"Tool sets drawn from {s['functions']:,} functions of MaskBench-dev's Glaive and BFCL records, "
             f"{s['tokenizer']}; medians over {s['samples']} tool sets per size, ms."]
    for choice in s["tool_choices"]:
        parts += [f"tool_choice `{choice}`: compile / compile + first mask (TTFM):",
                  table(["tools", *(f"{e} {what}" for e in engines for what in ("compile", "TTFM"))],
                        [cold_cells(rows, choice, size, engines) for size in s["sizes"]])]
    parts.append(accepted_line(rows))
    if data["reuse"]:
        parts += ["structgen, one tool of the set replaced: TTFM with the compile cache holding the first set "
                  "(each tool's compiled alternative is reused), against the changed set cold:",
                  table(REUSE_HEADER, [reuse_cells(row) for row in data["reuse"]])]
    return parts + [provenance(data) + f" {data['wall_s']:.0f} s. " + reproduce(tools_command(data))]


def cold_cells(rows: list[dict], choice: str, size: int, engines: list[str]) -> list[str]:
    by_engine = {row["engine"]: row for row in rows if row["tool_choice"] == choice and row["tools"] == size}
    cells = [str(size)]
    for engine in engines:
        row = by_engine.get(engine, {})
        cells += [short(row.get("compile_ms")), short(row.get("ttfm_ms"))]
    return cells


def reuse_cells(row: dict) -> list[str]:
    kept, alone = row["one_replaced_cache_kept_ttfm_ms"], row["one_replaced_cold_ttfm_ms"]
    return [row["tool_choice"], str(row["tools"]), short(row["cold_ttfm_ms"]), short(kept), short(alone),
            times(kept / alone if kept is not None and alone else None)]


def accepted_line(rows: list[dict]) -> str:
    totals: dict[str, list[int]] = {}
    for row in rows:
        total = totals.setdefault(row["engine"], [0, 0])
        total[0] += row["valid_call_accepted"]
        total[1] += len(row["valid_calls"])
    return "A valid call accepted token by token: " + ", ".join(
        f"{engine} {ok}/{n}" for engine, (ok, n) in totals.items()) + "."


def tools_command(data: dict) -> str:
    s = data["settings"]
    return command("tools", {**data_option(s["data"]), "sizes": s["sizes"], "samples": s["samples"],
                             "engines": [*s["engines"], *s["skipped"]], "tool_choices": s["tool_choices"],
                             "reuse_size": s["reuse_size"]})


def tools_headline_line(results_dir: Path) -> str | None:
    """One sentence: the largest tool set's TTFM per engine (tool_choice "required"), and
    structgen's with one tool replaced; None without results."""
    data = suite_results("tools", results_dir)
    if data is None:
        return None
    rows = [row for row in data["cold"] if row["tool_choice"] == "required"]
    size = max(row["tools"] for row in rows)
    figures = ", ".join(f"{row['engine']} {short(row['ttfm_ms'])}" for row in rows if row["tools"] == size)
    line = f"Tool calls ({size} tools, tool_choice required), TTFM in ms: {figures}"
    reuse = [row for row in data["reuse"] if row["tool_choice"] == "required"]
    if reuse:
        r = reuse[0]
        line += (f"; {r['tools']} tools with one replaced: {short(r['one_replaced_cache_kept_ttfm_ms'])} "
                 f"against {short(r['one_replaced_cold_ttfm_ms'])} cold")
    return line + "."

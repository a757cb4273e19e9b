"""The tools suite's markdown summary on stdout, from its results file's content: the
machine and versions (MaskBench's lines), per tool_choice a table of compile time and
time to first mask by number of tools and engine, the valid calls accepted, the errors,
and the reuse table (their cells are RESULTS.md's, benchmarks/report/tools.py).

Must not compute figures (measure.py does).
"""

from __future__ import annotations

from benchmarks.masks.printing import print_engines, print_machine
from benchmarks.report.formats import table
from benchmarks.report.tools import REUSE_HEADER, cold_cells, reuse_cells


def print_report(report: dict) -> None:
    settings = report["settings"]
    print("\n## Tool-call grammars: compile and first mask\n")
    print_machine(report["machine"], report["versions"])
    print(f"- tokenizer: {settings['tokenizer']}; {settings['functions']} functions from {settings['data']}; "
          f"medians over {settings['samples']} tool sets (seeds {settings['seeds']})")
    print_engines(settings["engines"], settings["skipped"])
    rows = report["cold"]
    engines = list(dict.fromkeys(row["engine"] for row in rows))
    for choice in settings["tool_choices"]:
        print(f"\ntool_choice={choice!r}: compile / compile + first mask (TTFM), ms\n")
        print(table(["tools", *(f"{e} {what}" for e in engines for what in ("compile", "TTFM"))],
                    [cold_cells(rows, choice, size, engines) for size in settings["sizes"]]))
    print_checks(rows)
    if report["reuse"]:
        print_reuse(report["reuse"])


def print_checks(rows: list[dict]) -> None:
    """How many valid calls each engine's grammars accepted, and every failure."""
    print()
    totals: dict[str, list[int]] = {}
    for row in rows:
        total = totals.setdefault(row["engine"], [0, 0])
        total[0] += row["valid_call_accepted"]
        total[1] += len(row["valid_calls"])
    print("valid call accepted token by token: "
          + ", ".join(f"{engine} {ok}/{n}" for engine, (ok, n) in totals.items()))
    for row in rows:
        where = f"{row['engine']}, {row['tool_choice']}, {row['tools']} tools"
        for call in row["valid_calls"]:
            if not call["accepted"]:
                print(f"- {where}, seed {call['seed']}: {call['function']} rejected at token {call['at']}: "
                      f"{call['reason']}")
        for error in row["errors"]:
            print(f"- {where}, seed {error['seed']}: compile error {error['error']}")


def print_reuse(reuse: list[dict]) -> None:
    print("\nstructgen, one tool replaced: compile + first mask, ms (cache kept: the first set's grammar "
          "is in the compile cache)\n")
    print(table(REUSE_HEADER, [reuse_cells(row) for row in reuse]))
    for row in reuse:
        for error in row["errors"]:
            print(f"- {row['tool_choice']}, seed {error['seed']}: compile error {error['error']}")

"""Number formats and markdown tables for every suite's renderer: microseconds (`us`),
milliseconds from microseconds (`ms`), three significant figures (`short`), tokens/s
(`tok_s`), ratios (`times`), `median`, and `table`.

Must not read results: a renderer passes in the values.
"""

from __future__ import annotations

import statistics


def us(value: float | None, decimals: int = 0) -> str:
    """Microseconds as the tables and MaskBench's summary print them: one decimal below
    10 (or when asked for, up to 100,000), thousands separated."""
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


def ms(value_us: float | None) -> str:
    return "–" if value_us is None else f"{value_us / 1000:,.1f}"

"""`ir.Graph`s built from edge lists, trimmed to the states that lie on a path from the
start to a final state (`trimmed_graph`, `trimmed_graph_ids`).

Owns: trimming and renumbering, and numbering states by key as they are met
(`StateNumbers`). Must not know schemas: every module that lowers a counted or looping
construct (arrays, objects, numbers, code-point NFAs) builds its graphs here.
"""

from __future__ import annotations

from typing import Iterable

from structgen.grammar import ir


class StateNumbers(dict):
    """Numbers the states of a graph under construction by key, in the order they are
    first asked for: `sid = StateNumbers()`, then `sid(key)`; `len(sid)` states."""

    def __call__(self, key) -> int:
        if key not in self:
            self[key] = len(self)
        return self[key]


def trimmed_graph(n: int, start: int, finals: Iterable[int],
                  edges: list[tuple[int, int, ir.Node | None]]) -> ir.Node:
    """An ir.Graph with states that cannot reach a final (or be reached) removed."""
    return trimmed_graph_ids(n, start, finals, edges)[0]


def trimmed_graph_ids(n: int, start: int, finals: Iterable[int],
                      edges: list[tuple[int, int, ir.Node | None]]) -> tuple[ir.Node, dict[int, int]]:
    """`trimmed_graph`, and the new number of each state kept."""
    edges = [e for e in edges if e[2] is None or not ir.is_nothing(e[2])]
    reach = ir.reaching([start], [(b, a) for a, b, _ in edges])  # reversed edges: reachable from start
    live = ir.reaching([f for f in finals if f in reach], [(a, b) for a, b, _ in edges if a in reach])
    if start not in live:
        return ir.NOTHING, {}
    ids = {s: k for k, s in enumerate(sorted(live))}
    new_edges = tuple((ids[a], ids[b], lab) for a, b, lab in edges if a in live and b in live)
    new_finals = tuple(sorted(ids[f] for f in set(finals) if f in live))
    if not new_edges:
        return ir.EMPTY, ids
    return ir.Graph(len(ids), ids[start], new_finals, new_edges), ids

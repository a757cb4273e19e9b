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
    finals = set(finals)
    size = max(n, start + 1, max(finals, default=-1) + 1, max((max(a, b) + 1 for a, b, _ in edges), default=0))
    live = _live_states(size, start, finals, edges)
    if not live[start]:
        return ir.NOTHING, {}
    ids = {}
    for state in range(size):
        if live[state]:
            ids[state] = len(ids)
    new_edges = tuple((ids[a], ids[b], lab) for a, b, lab in edges if live[a] and live[b])
    new_finals = tuple(sorted(ids[f] for f in finals if live[f]))
    if not new_edges:
        return ir.EMPTY, ids
    return ir.Graph(len(ids), ids[start], new_finals, new_edges), ids


def _live_states(size: int, start: int, finals: set[int], edges: list) -> list[bool]:
    """Per state 0..size-1: whether it lies on a path from `start` to a final state."""
    succ: list[list[int]] = [[] for _ in range(size)]
    pred: list[list[int]] = [[] for _ in range(size)]
    for a, b, _ in edges:
        succ[a].append(b)
        pred[b].append(a)
    reached = [False] * size
    reached[start] = True
    todo = [start]
    while todo:
        for b in succ[todo.pop()]:
            if not reached[b]:
                reached[b] = True
                todo.append(b)
    live = [False] * size
    todo = [f for f in finals if reached[f]]
    for f in todo:
        live[f] = True
    while todo:
        for a in pred[todo.pop()]:
            if reached[a] and not live[a]:
                live[a] = True
                todo.append(a)
    return live

"""Number texts that are exact decimal multiples of a step (`multipleOf` 0.01) within
the texts of a bounded number IR: `decimal_multiples_ir`.

Owns: the automaton of a decimal text's remainder modulo the step, crossed with the
bounds' automaton. Must not build automata from IR itself: the caller passes `byte_dfa`
(grammar/ never imports automata/).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Callable

from structgen.grammar import ir
from structgen.grammar.languages import ByteDFA


def decimal_multiples_ir(step: Fraction, within: ir.Node, byte_dfa: Callable[[ir.Node], ByteDFA], *,
                         max_states: int = 20_000) -> ir.Node | None:
    """Number texts without exponent whose exact decimal value is a multiple of `step`
    (> 0; its denominator divides a power of ten, as every JSON number's value does)
    and that the number IR `within` (bounds, see `number_ir`) accepts. None when the
    automaton would need more than `max_states` states.

    Reading x's digits with the point dropped gives an integer; with k the number of
    decimal places of `step` and step = M / 10**k, x is a multiple of step exactly when
    x * 10**k is an integer multiple of M: its first k fraction digits (padded with
    zeros) end that integer, any later digit is 0, and the integer is 0 modulo M. One
    state per (place in the text, remainder modulo M), crossed with `within`'s own
    automaton byte by byte (`byte_dfa(within)`, which the caller's automata build),
    gives a Graph."""
    rest = step.denominator
    for prime in (2, 5):
        while rest % prime == 0:
            rest //= prime
    if rest != 1:  # not a decimal's value: no number of places makes it whole
        return None
    places = 0
    while (step * 10**places).denominator != 1:
        places += 1
    modulus = int(step * 10**places)
    if modulus * (places + 3) > max_states:
        return None
    bounds = byte_dfa(within)
    if bounds.start < 0:
        return ir.NOTHING
    start = (_decimal_start(), bounds.start)
    index = {start: 0}
    edges: dict[tuple[int, int], list[tuple[int, int]]] = {}
    finals = []
    todo = [start]
    while todo:
        here = todo.pop()
        text_state, bound_state = here
        if _decimal_final(text_state, places, modulus) and bounds.accepting[bound_state]:
            finals.append(index[here])
        for byte in b"-.0123456789":
            after = _decimal_step(text_state, byte, places, modulus)
            bound_after = bounds.step(bound_state, byte) if after is not None else -1
            if bound_after < 0:
                continue
            there = (after, bound_after)
            if there not in index:
                if len(index) >= max_states:
                    return None
                index[there] = len(index)
                todo.append(there)
            edges.setdefault((index[here], index[there]), []).append((byte, byte))
    return _pruned_graph(len(index), finals, edges)


# The states of a decimal text being read for `decimal_multiples_ir`: (where, remainder,
# fraction digits read), where is "start", "sign" (after "-"), "zero" (integer part 0),
# "int" (in a nonzero integer part) or "frac" (after the point).
def _decimal_start() -> tuple:
    return ("start", 0, 0)


def _decimal_step(state: tuple, byte: int, places: int, modulus: int) -> tuple | None:
    where, rem, read = state
    digit = byte - 0x30 if 0x30 <= byte <= 0x39 else None
    if where in ("start", "sign"):
        if byte == 0x2D and where == "start":
            return ("sign", 0, 0)
        if digit == 0:
            return ("zero", 0, 0)
        return ("int", digit % modulus, 0) if digit else None
    if byte == 0x2E:
        return ("frac", rem, 0) if where in ("zero", "int") else None
    if digit is None or where == "zero":
        return None
    if where == "int":
        return ("int", (rem * 10 + digit) % modulus, 0)
    if read < places:
        return ("frac", (rem * 10 + digit) % modulus, read + 1)
    return state if digit == 0 else None  # past the step's places only zeros keep a multiple


def _decimal_final(state: tuple, places: int, modulus: int) -> bool:
    where, rem, read = state
    if where in ("start", "sign") or (where == "frac" and read == 0):
        return False
    return rem * 10 ** (places - read) % modulus == 0


def _pruned_graph(n: int, finals: list[int], edges: dict[tuple[int, int], list]) -> ir.Node:
    """An ir.Graph from state 0 over byte edges, keeping the states that reach a final."""
    live = ir.reaching(finals, edges)
    if 0 not in live:
        return ir.NOTHING
    kept = [(a, b, ir.byteset(ranges)) for (a, b), ranges in edges.items() if a in live and b in live]
    return ir.Graph(n, 0, tuple(finals), tuple(kept))

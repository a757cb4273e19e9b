"""The sets of NFA items that the Python automaton's states are made of.

Owns: the ACCEPT item, the bound on the items one state may hold, and the union of the
item sets that one byte reaches. `nfa.py` makes the items and `dfa.py` interns their
sets as states; both read this module, so that neither imports the other's automaton
for it. Must not know about IR nodes, tokens or the engine.
"""

from __future__ import annotations

from structgen.errors import GrammarTooLargeError

ACCEPT = ("accept",)  # the item standing for "the whole input matched"
# Parse positions one automaton state may hold. Real grammars stay in the hundreds (the
# largest over MaskBench-dev's schemas and grammars/ is 336); an ambiguous grammar
# (rules matching the same text in exponentially many ways) multiplies them with every
# byte, and each state would cost seconds, then minutes: refuse it instead.
MAX_STATE_ITEMS = 20_000


def union(targets: list) -> frozenset:
    """The items of several targets together: what one byte reaches from all of them."""
    items = frozenset().union(*targets)
    if len(items) > MAX_STATE_ITEMS:
        raise too_ambiguous()
    return items


def too_ambiguous() -> GrammarTooLargeError:
    return GrammarTooLargeError(
        f"grammar too ambiguous: one automaton state would track more than {MAX_STATE_ITEMS:,} parse "
        "positions (its rules can match the same text in too many ways); make the rules less ambiguous"
    )

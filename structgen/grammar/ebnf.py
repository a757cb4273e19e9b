"""EBNF's groups and repetitions written as plain BNF rules, for the grammar readers.

Owns `BnfRules`: the rule table a reader fills (GBNF's, lark's), with `helper`, a new rule
named after the rule it serves (`rule/kindN`: no user name has a `/`), and `repeat`,
which writes `x{low,high}` of a rule as `low` copies and then either a left-recursive
loop `L: L x | ""`, which `cfg` turns into a loop that never deepens the stack, or a
chain of optional copies. Knows nothing of either syntax, of tokens or of the engine.
"""

from __future__ import annotations

MAX_RULE_REPEAT = 2000  # a bound on a repetition of a rule (llama.cpp's limit too)


class BnfRules:
    """rules: name -> alternatives, each a list of symbols (a rule name, or a terminal's IR)."""

    def __init__(self) -> None:
        self.rules: dict[str, list[list]] = {}
        self.helpers = 0

    def helper(self, rule: str, kind: str, alternatives: list[list]) -> str:
        """A new rule with these alternatives, named after the rule it serves."""
        self.helpers += 1
        name = f"{rule}/{kind}{self.helpers}"
        self.rules[name] = alternatives
        return name

    def repeat(self, rule: str, symbol, low: int, high: int | None) -> list:
        """The symbols that stand for `symbol{low,high}` (high None: unbounded)."""
        if high is None:
            loop = self.helper(rule, "rep", [])
            self.rules[loop] = [[loop, symbol], []]
            tail = [loop]
        else:
            tail = []
            for _ in range(high - low):  # O_k: x O_(k-1) | ""
                tail = [self.helper(rule, "rep", [[symbol, *tail], []])]
        return [symbol] * low + tail

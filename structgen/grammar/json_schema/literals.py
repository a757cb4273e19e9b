"""enum and const: the values a schema lists, kept where they meet its other keywords
(`value_ok`), and every spelling of a value the style allows (`literal`, `key_literal`).

Owns: JSON values -> IR literals. A mixin of `compiler.SchemaCompiler`: it uses the
compiler's options, style, budget (`tick`, `refuse`) and the methods of the other mixins
through `self`.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

from structgen.grammar import ir
from structgen.grammar.acceptor import ir_accepts
from structgen.grammar.json_schema.keywords import canon, kind_of
from structgen.grammar.json_schema.normalized import Normalized


class Literals:
    """enum/const values and their spellings."""

    def lower_enum(self, s: Normalized, depth: int) -> ir.Node:
        kinds = s.all_kinds()
        excl = {canon(v) for v in s.not_values}
        parts = []
        for v in s.enum:
            if kind_of(v) not in kinds or canon(v) in excl:
                continue
            if isinstance(v, float) and not math.isfinite(v):
                continue
            if not self.value_ok(s, v):
                continue
            parts.append(self.literal(v, depth))
        return ir.alt(*parts)

    def value_ok(self, s: Normalized, v: Any) -> bool:
        """Whether value v (of an allowed kind, not excluded) meets s's other keywords."""
        k = kind_of(v)
        if k in ("int", "frac"):
            f = Fraction(v)
            if not s.in_bounds(f):
                return False
            for m, raw, _ in s.mults:
                if (f / m).denominator != 1:
                    return False
                try:  # what float-based validators compute, too
                    if isinstance(raw, float) or isinstance(v, float):
                        q = v / raw
                        if int(q) != q:
                            return False
                except (OverflowError, ZeroDivisionError):
                    return False
            return True
        if k == "string":
            if len(v) < s.min_len or (s.max_len is not None and len(v) > s.max_len):
                return False
            for pat, ptr in s.patterns:
                nfa = self.pattern_nfa(pat, ptr)
                if nfa is not None and not nfa.matches(v):
                    return False
            for name, ptr in s.formats:
                pat = self.format_regex(name, ptr)
                if pat is not None:
                    nfa = self.pattern_nfa(pat, ptr)
                    if nfa is not None and not nfa.matches(v):
                        return False
            return True
        if k == "array":
            if not (s.arrs or s.contains or s.unique or s.min_items or s.max_items is not None):
                return True
        elif k == "object":
            if not (s.objs or s.required or s.forbidden or s.min_props or s.max_props is not None or s.prop_names):
                return True
        else:
            return True
        # structured value with structural constraints: compile and test
        t = s.copy()
        t.enum = None
        t.not_values = []
        t.types = frozenset({k})
        node = self.twin.compile_normalized(t, 0)
        text = json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode()
        return ir_accepts(node, text)

    def literal(self, v: Any, depth: int) -> ir.Node:
        """Every spelling of value v the style allows (canonical key order)."""
        if isinstance(v, list):
            return self.style.container(depth, "[", "]", [self.literal(x, depth + 1) for x in v])
        if isinstance(v, dict):
            colon = self.style.colon(depth)
            members = [ir.seq(self.key_literal(k), colon, self.literal(x, depth + 1)) for k, x in v.items()]
            if self.options.property_order == "any" and len(members) > 1:
                return self.style.members(depth, members, [True] * len(members))
            return self.style.container(depth, "{", "}", members)
        if isinstance(v, float) and not math.isfinite(v):
            return ir.NOTHING
        spellings = {json.dumps(v), json.dumps(v, ensure_ascii=False)}
        if isinstance(v, float) and v.is_integer() and abs(v) < 1e16:
            spellings.add(str(int(v)))
        return ir.alt(*(ir.lit(t) for t in sorted(spellings)))

    @staticmethod
    def key_literal(name: str) -> ir.Node:
        if name.isascii() and name.isprintable() and '"' not in name and "\\" not in name:
            return ir.lit('"' + name + '"')  # json.dumps writes it so, with or without ensure_ascii
        spellings = sorted({json.dumps(name), json.dumps(name, ensure_ascii=False)})
        return ir.alt(*(ir.lit(t) for t in spellings))

"""Emptiness and disjointness of normalized schemas: which kinds a schema still allows,
whether it certainly rejects a value, whether two schemas share no value (cheap and
conservative: True only when proven), and what constrains a property's value.

Owns: the proofs `oneOf` and the negations rely on. Must not build IR. A mixin of
`compiler.SchemaCompiler`: it uses the compiler's options, style, budget (`tick`,
`refuse`) and the methods of the other mixins through `self`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from structgen.errors import StructgenError
from structgen.grammar.json_schema.keywords import canon, kind_of
from structgen.grammar.json_schema.normalized import Normalized, once_each, range_nonempty


class Disjointness:
    """Emptiness, rejection and disjointness proofs."""

    def conj_for(self, s: Normalized, name: str) -> list:
        """Items constraining the value of property `name` (declared or not)."""
        out: list = []
        strict = self.strict_for(s)
        if strict and not any(name in x.props for x in s.objs):
            return [(False, s.ptr, ())]  # strict: a name no `properties` declares is never allowed
        for x in s.objs:
            declared = name in x.props
            if declared:
                out += x.props[name]
            matched = False
            for pat, items, pptr in x.patterns:
                if self.pattern_matches(pat, name, pptr):
                    out += items
                    matched = True
            if not declared and not matched and x.additional is not None and not strict:
                out += x.additional
        return once_each(out) if len(out) > 1 else out

    def strict_at(self, ptr: str) -> bool:
        """Whether the subschema at `ptr` is under one of the strict pointers."""
        return any(ptr == p or ptr.startswith(p + "/") for p in self.options.strict_pointers)

    def strict_for(self, s: Normalized) -> bool:
        """Whether strict mode holds for the object `s` (everywhere, or by pointer)."""
        return self.options.strict or any(x.strict for x in s.objs)

    def kind_possible(self, s: Normalized, k: str, level: int) -> bool:
        if k in ("null", "boolean"):
            vals = [None] if k == "null" else [True, False]
            excl = {canon(v) for v in s.not_values}
            return any(canon(v) not in excl for v in vals)
        if k in ("int", "frac"):
            return range_nonempty(s.lo, s.hi, k == "int")
        if k == "string":
            return s.max_len is None or s.min_len <= s.max_len
        if k == "array":
            return s.max_items is None or s.min_items <= s.max_items
        if k == "object":
            if s.max_props is not None and (s.min_props > s.max_props or len(s.required) > s.max_props):
                return False
            if any(r in s.forbidden for r in s.required):
                return False
            if level < 2:
                for r in s.required:
                    sub = self.normalized(self.conj_for(s, r))
                    if self.is_empty(sub, level + 1):
                        return False
            return True
        return True

    def effective_kinds(self, s: Normalized, level: int = 0) -> frozenset:
        known = self.shared_kinds.get(id(s))  # s is shared, never changed: its kinds hold
        if known is None:
            return self._effective_kinds(s, level)
        got = known.get(level)
        if got is None:
            got = known[level] = self._effective_kinds(s, level)
        return got

    def _effective_kinds(self, s: Normalized, level: int) -> frozenset:
        if s.dead:
            return frozenset()
        kinds = s.all_kinds()
        if s.enum is not None:
            excl = {canon(v) for v in s.not_values}
            kinds = kinds & frozenset(kind_of(v) for v in s.enum if canon(v) not in excl)
        return frozenset(k for k in kinds if self.kind_possible(s, k, level))

    def is_empty(self, s: Normalized, level: int = 0) -> bool:
        return not self.effective_kinds(s, level)

    def definitely_rejects(self, s: Normalized, v: Any, level: int = 0) -> bool:
        """True only if `s` certainly rejects the value (cheap, conservative)."""
        k = kind_of(v)
        if k not in s.all_kinds():
            return True
        c = canon(v)
        if s.enum is not None and c not in {canon(x) for x in s.enum}:
            return True
        if c in {canon(x) for x in s.not_values}:
            return True
        if k in ("int", "frac"):
            f = Fraction(v)
            if not s.in_bounds(f):
                return True
        elif k == "string":
            if len(v) < s.min_len or (s.max_len is not None and len(v) > s.max_len):
                return True
            for pat, ptr in s.patterns:  # (never formats: validators may treat them as annotations)
                nfa = self.pattern_nfas.get(pat)
                if nfa is None and pat not in self.pattern_nfas:
                    try:
                        nfa = self.pattern_nfa(pat, ptr)
                    except StructgenError:
                        nfa = None
                if nfa and not nfa.matches(v):
                    return True
        elif k == "array":
            if len(v) < s.min_items or (s.max_items is not None and len(v) > s.max_items):
                return True
        elif k == "object":
            if any(r not in v for r in s.required) or any(f in v for f in s.forbidden):
                return True
            if len(v) < s.min_props or (s.max_props is not None and len(v) > s.max_props):
                return True
            if level < 3:
                for name, x in v.items():
                    conj = self.conj_for(s, name)
                    if conj and self.definitely_rejects(self.normalized(conj), x, level + 1):
                        return True
        return False

    def disjoint(self, a: Normalized, b: Normalized, level: int = 0) -> bool:
        """True only if no JSON value satisfies both (cheap, conservative)."""
        ka = self.effective_kinds(a)
        kb = self.effective_kinds(b)
        shared = ka & kb
        if not shared:
            return True
        if a.enum is not None and all(self.definitely_rejects(b, v) or self.definitely_rejects(a, v) for v in a.enum):
            return True
        if b.enum is not None and all(self.definitely_rejects(a, v) or self.definitely_rejects(b, v) for v in b.enum):
            return True
        for k in shared:
            if k in ("null", "boolean"):
                return False
            if k in ("int", "frac"):
                lo = max((x for x in (a.lo, b.lo) if x is not None), key=lambda t: (t[0], t[1]), default=None)
                hi = min((x for x in (a.hi, b.hi) if x is not None), key=lambda t: (t[0], not t[1]), default=None)
                if range_nonempty(lo, hi, k == "int"):
                    return False
            elif k == "string":
                mx = [m for m in (a.max_len, b.max_len) if m is not None]
                if not mx or max(a.min_len, b.min_len) <= min(mx):
                    return False
            elif k == "array":
                mx = [m for m in (a.max_items, b.max_items) if m is not None]
                if not mx or max(a.min_items, b.min_items) <= min(mx):
                    return False
            elif k == "object":
                if not self._objects_disjoint(a, b, level):
                    return False
        return True

    def _objects_disjoint(self, a: Normalized, b: Normalized, level: int) -> bool:
        if level > 3:
            return False
        for x, y in ((a, b), (b, a)):
            for r in x.required:
                if r in y.forbidden:
                    return True
                cy = self.conj_for(y, r)
                if not cy:
                    continue
                sy = self.hull(self.normalized(cy))
                if self.is_empty(sy, 1):
                    return True
                sx = self.hull(self.normalized(self.conj_for(x, r)))
                if self.disjoint(sx, sy, level + 1):
                    return True
        return False

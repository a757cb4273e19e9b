"""The negation of a subschema (`Negating.negate`), for `not`, the `else` side of `if` and
`oneOf` exclusions: normalized alternatives whose union is the complement of the
subschema, or a part of it (a subset) where not every keyword can be negated.

Owns: which keywords negate exactly and how. Must not build IR. A mixin of
`compiler.SchemaCompiler`: it uses the compiler's options, style, budget (`tick`,
`refuse`) and the methods of the other mixins through `self`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from structgen.errors import SchemaError, UnsupportedKeywordError
from structgen.grammar.json_schema.keywords import HANDLED, KINDS, UNSUPPORTED, is_number, pointer_token
from structgen.grammar.json_schema.normalized import Normalized, ObjectKeywords, synthesized

_MAX_NEGATION_ALTS = 64


class Negating:
    """not(schema) as normalized alternatives."""

    def negate(self, raw: Any, ptr: str, chain: tuple) -> tuple[list[Normalized] | None, bool]:
        """(alternatives, exact): normalized conjunctions whose union is a SUBSET of the
        complement of `raw` -- all of it (exact) where every keyword can be negated, else
        the part the negatable keywords give (sound: fewer values, never more).
        Alternatives None when nothing useful can be said."""
        alts, exact = self._negate(raw, ptr, chain)
        if alts is None or (not exact and not alts):
            return None, False
        return alts, exact

    def _negate(self, raw: Any, ptr: str, chain: tuple) -> tuple[list[Normalized] | None, bool]:
        self.tick()
        if raw is True:
            return [], True
        if raw is False:
            return [Normalized(ptr)], True
        if not isinstance(raw, dict):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(raw).__name__}", ptr)
        raw = self.resolver.effective(raw)
        self.check_values(raw, ptr)
        self.local_checks(raw, ptr)
        alts: list[Normalized] = []
        exact = True
        constrained = False

        def add(sub: tuple[list[Normalized] | None, bool]) -> None:
            nonlocal exact
            got, ok = sub
            if got is None:
                exact = False
            else:
                alts.extend(got)
                exact = exact and ok

        if "$ref" in raw:
            constrained = True
            target, tptr = self.resolver.resolve(raw["$ref"], raw, ptr + "/$ref")
            if tptr in chain:
                raise UnsupportedKeywordError(
                    "$ref", ptr + "/$ref", f"recursive reference to '#{tptr}' under 'not' is not supported"
                )
            add(self._negate(target, tptr, chain + (tptr,)))
        excl_min = raw.get("exclusiveMinimum") is True
        excl_max = raw.get("exclusiveMaximum") is True
        num = frozenset({"int", "frac"})
        for key, v in raw.items():
            kp = ptr + "/" + pointer_token(key)
            if key == "$ref" or key not in HANDLED:
                if key in UNSUPPORTED and not self.options.lenient:
                    constrained = True
                    exact = False
                continue
            constrained = True
            if key == "type":
                alts.append(synthesized(types=KINDS - self.parse_type(v, kp)))
            elif key in ("enum", "const"):
                alts.append(synthesized(not_values=[v] if key == "const" else list(v)))
            elif key == "required":
                if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                    raise SchemaError("required must be an array of strings", kp)
                for name in dict.fromkeys(v):
                    alts.append(synthesized(types=frozenset({"object"}), forbidden={name}))
            elif key == "properties":
                if not isinstance(v, dict):
                    raise SchemaError("properties must be an object", kp)
                for name, sub in v.items():
                    sp = f"{kp}/{pointer_token(name)}"
                    got, ok = self._negate(sub, sp, chain)
                    exact = exact and ok and got is not None
                    for a in got or []:
                        alts.append(
                            synthesized(
                                types=frozenset({"object"}),
                                required={name: sp},
                                objs=[ObjectKeywords({name: [(a, sp, chain)]}, [], None, sp)],
                            )
                        )
            elif key in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
                if isinstance(v, bool):
                    continue
                if not is_number(v) or (isinstance(v, float) and not math.isfinite(v)):
                    exact = False
                    continue
                f = Fraction(v)
                if key == "minimum":  # not (x >= m)  ->  x < m   (draft-04: not (x > m) -> x <= m)
                    alts.append(synthesized(types=num, hi=(f, not excl_min, v)))
                elif key == "exclusiveMinimum":
                    alts.append(synthesized(types=num, hi=(f, False, v)))
                elif key == "maximum":
                    alts.append(synthesized(types=num, lo=(f, not excl_max, v)))
                else:
                    alts.append(synthesized(types=num, lo=(f, False, v)))
            elif key in ("minLength", "minItems", "minProperties"):
                n = self.count_value(v, kp)
                if n > 0:
                    t, field = {
                        "minLength": ("string", "max_len"),
                        "minItems": ("array", "max_items"),
                        "minProperties": ("object", "max_props"),
                    }[key]
                    alts.append(synthesized(types=frozenset({t}), **{field: n - 1}))
            elif key in ("maxLength", "maxItems", "maxProperties"):
                n = self.count_value(v, kp)
                t, field = {
                    "maxLength": ("string", "min_len"),
                    "maxItems": ("array", "min_items"),
                    "maxProperties": ("object", "min_props"),
                }[key]
                alts.append(synthesized(types=frozenset({t}), **{field: n + 1}))
            elif key == "allOf":
                for i, sub in enumerate(self.schema_list(v, kp)):
                    add(self._negate(sub, f"{kp}/{i}", chain))
            elif key == "anyOf":
                acc = [Normalized(kp)]
                ok_all = True
                for i, sub in enumerate(self.schema_list(v, kp)):
                    got, ok = self._negate(sub, f"{kp}/{i}", chain)
                    if got is None:
                        acc = None
                        break
                    ok_all = ok_all and ok
                    new = []
                    for a in acc:
                        for b in got:
                            m = a.copy()
                            m.merge(b)
                            if not self.is_empty(m):
                                new.append(m)
                    acc = new
                    if len(acc) > _MAX_NEGATION_ALTS:
                        acc = acc[:_MAX_NEGATION_ALTS]  # a subset: still sound
                        ok_all = False
                add((acc, ok_all))
            elif key == "not":
                self.check_schema(v, kp)
                alts.append(self.normalize([(v, kp, chain)]))
            elif key == "if":
                then = raw.get("then", True)
                els = raw.get("else", True)
                pos = self.normalize([(v, kp, chain)])
                neg_if, ok1 = self._negate(v, kp, chain)
                neg_then, ok2 = self._negate(then, ptr + "/then", chain)
                neg_else, ok3 = self._negate(els, ptr + "/else", chain)
                exact = exact and ok1 and ok2 and ok3 and None not in (neg_if, neg_then, neg_else)
                for t in neg_then or []:
                    m = pos.copy()
                    m.merge(t)
                    alts.append(m)
                for a in neg_if or []:
                    for e in neg_else or []:
                        m = a.copy()
                        m.merge(e)
                        alts.append(m)
            elif key in ("dependentRequired", "dependencies") and isinstance(v, dict) and all(
                isinstance(d, list) for d in v.values()
            ):
                # not (a present -> b present) = a present and b absent
                for name, deps in v.items():
                    for d in deps:
                        if d != name:
                            alts.append(synthesized(types=frozenset({"object"}), required={name: kp}, forbidden={d}))
            else:
                exact = False  # pattern, format, multipleOf, items, additionalProperties, ...
            if len(alts) > _MAX_NEGATION_ALTS:
                alts = alts[:_MAX_NEGATION_ALTS]
                exact = False
        if not constrained:
            return [], True
        live = [a for a in alts if not self.is_empty(a)]
        if not live and not exact:
            return None, False
        return live, exact

"""Reading raw schemas into normalized ones (`Normalizing.normalize`, `ingest`): every
keyword of a subschema, with `$ref`, `allOf` and the checks of keyword values (the
errors and their JSON pointers are made here).

Owns: the raw schema -> `Normalized` step. Must not build IR. A mixin of
`compiler.SchemaCompiler`: it uses the compiler's options, style, budget (`tick`,
`refuse`) and the methods of the other mixins through `self`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from structgen.errors import SchemaError, UnsupportedKeywordError
from structgen.grammar.json_schema.keywords import (
    ANNOTATIONS,
    BOUNDS,
    COUNTS,
    HANDLED,
    KINDS,
    TYPE_KINDS,
    UNSUPPORTED,
    is_number,
    misspelled_keyword,
    pointer_token,
)
from structgen.grammar.json_schema.normalized import (
    MAX_COUNTS,
    MIN_COUNTS,
    ArrayKeywords,
    Disjunction,
    Normalized,
    ObjectKeywords,
    synthesized,
)

# The keywords whose values `check_values` checks.
_VALUE_CHECKED = BOUNDS | COUNTS | {"multipleOf", "pattern", "format", "type", "enum", "uniqueItems"}


class Normalizing:
    """Raw schema -> `Normalized`."""

    def normalize(self, items: list) -> Normalized:
        s = Normalized(items[0][1] if items else "")
        for raw, ptr, chain in items:
            self.ingest(s, raw, ptr, chain)
        return s

    def normalized(self, items: list) -> Normalized:
        """`normalize(items)`, made once per compile for each conjunction (the emptiness
        proofs read a property's schema before it is compiled, and again one level up).
        Shared: the caller must not change it (copy it to merge into it)."""
        key = tuple([(id(raw), ptr, chain) for raw, ptr, chain in items])
        got = self.normalized_cache.get(key)
        if got is None:
            got = self.normalized_cache[key] = (self.normalize(items), items)  # items held: their ids stay theirs
            self.shared_kinds[id(got[0])] = {}
        return got[0]

    def ingest(self, s: Normalized, raw: Any, ptr: str, chain: tuple) -> None:
        self.tick()
        if isinstance(raw, Normalized):
            s.merge(raw)
            return
        if raw is True:
            return
        if raw is False:
            s.dead = True
            return
        if not isinstance(raw, dict):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(raw).__name__}", ptr)
        raw = self.resolver.effective(raw)
        checked = id(raw) in self.values_checked
        if not checked:
            self.check_values(raw, ptr)
        o = self.options
        obj_slot = None  # keeps the members in the schema's textual order (property order)
        draft4_excl_min = raw.get("exclusiveMinimum") is True
        draft4_excl_max = raw.get("exclusiveMaximum") is True
        for key, v in raw.items():
            if key not in HANDLED and (key in ANNOTATIONS or key.startswith("x-")):
                continue
            kp = ptr + "/" + pointer_token(key)
            if key in HANDLED:
                pass
            elif key in UNSUPPORTED:
                self.refuse(key, kp, UNSUPPORTED[key])
                continue
            else:
                if o.unknown_keywords == "error":
                    raise UnsupportedKeywordError(key, kp, "unknown keyword (unknown_keywords='error')")
                meant = misspelled_keyword(key) if o.unknown_keywords == "typos" else None
                if meant is not None:
                    self.refuse(
                        key, kp, f"unknown keyword; did you mean {meant!r}? (unknown_keywords='ignore' accepts it)"
                    )
                continue
            if key == "$ref":
                target, tptr = self.resolver.resolve(v, raw, kp)
                if tptr in chain:
                    raise SchemaError(
                        f"$ref cycle through '#{tptr}' that never descends into a property or item: "
                        "it defines no value",
                        kp,
                    )
                self.ingest(s, target, tptr, chain + (tptr,))
            elif key == "type":
                s.set_types(self.parse_type(v, kp))
            elif key == "enum":
                s.set_enum(v, kp)
            elif key == "const":
                s.set_enum([v], kp)
            elif key in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
                if isinstance(v, bool) and key.startswith("exclusive"):
                    continue  # draft-04 flag, read together with minimum/maximum
                if isinstance(v, float) and math.isinf(v):
                    if (v > 0) == ("Min" in key or key == "minimum"):
                        s.set_types(KINDS - {"int", "frac"})  # e.g. minimum: inf
                    continue
                f = Fraction(v)
                if key == "minimum":
                    s.set_lo(f, draft4_excl_min, v)
                elif key == "exclusiveMinimum":
                    s.set_lo(f, True, v)
                elif key == "maximum":
                    s.set_hi(f, draft4_excl_max, v)
                else:
                    s.set_hi(f, True, v)
            elif key == "multipleOf":
                s.mults.append((Fraction(v), v, kp))
            elif key in MIN_COUNTS:
                s.at_least(MIN_COUNTS[key], self.count_value(v, kp))
            elif key in MAX_COUNTS:
                s.at_most(MAX_COUNTS[key], self.count_value(v, kp))
            elif key == "pattern":
                s.patterns.append((v, kp))
            elif key == "format":
                s.formats.append((v, kp))
            elif key in ("items", "prefixItems", "additionalItems"):
                continue  # below, together
            elif key == "uniqueItems":
                if v:
                    s.unique = s.unique or kp
            elif key == "contains":
                self.check_schema(v, kp)
                lo = raw.get("minContains", 1)
                hi = raw.get("maxContains")
                lo = self.count_value(lo, ptr + "/minContains")
                hi = None if hi is None else self.count_value(hi, ptr + "/maxContains")
                s.contains.append(([(v, kp, ())], lo, hi, kp))
            elif key in ("properties", "patternProperties", "additionalProperties"):
                if obj_slot is None:
                    obj_slot = len(s.objs)
                    s.objs.append(None)  # filled below, together
            elif key == "required":
                if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                    raise SchemaError("required must be an array of strings", kp)
                for i, name in enumerate(v):
                    s.required.setdefault(name, f"{kp}/{i}")
            elif key == "propertyNames":
                self.check_schema(v, kp)
                if v is not True:
                    s.prop_names.append((v, kp, ()))
            elif key in ("dependentRequired", "dependentSchemas", "dependencies"):
                self._dependencies(s, key, v, kp, chain)
            elif key == "allOf":
                for i, sub in enumerate(self.schema_list(v, kp)):
                    self.ingest(s, sub, f"{kp}/{i}", chain)
            elif key in ("anyOf", "oneOf"):
                subs = self.schema_list(v, kp)
                s.add_group(Disjunction(key, [[(sub, f"{kp}/{i}", chain)] for i, sub in enumerate(subs)], kp, chain))
            elif key == "not":
                self.check_schema(v, kp)
                alts, exact = self.negate(v, kp, chain)
                if alts is None:
                    self.refuse("not", kp, "cannot express the negation of this subschema")
                    continue
                self.add_alternatives(s, "not", alts, kp, chain, exact)
            elif key == "if":
                self.check_schema(v, kp)
                then = raw.get("then", True)
                els = raw.get("else", True)
                self.check_schema(then, ptr + "/then")
                self.check_schema(els, ptr + "/else")
                if then is True and els is True:
                    continue
                negated, exact = self.negate(v, kp, chain)
                if negated is None:
                    self.refuse("if", kp, "cannot express the negation of the 'if' subschema")
                    continue
                alts = [[(v, kp, chain), (then, ptr + "/then", chain)]]
                for na in negated:
                    alts.append([(na, kp, chain), (els, ptr + "/else", chain)])
                s.add_group(Disjunction("if", alts, kp, chain, exact))
        # local consistency (within one subschema)
        if not checked:
            self.local_checks(raw, ptr)
            self.values_checked[id(raw)] = raw  # held: its id is not reused while it counts
        # arrays
        if "items" in raw or "prefixItems" in raw or ("additionalItems" in raw and isinstance(raw.get("items"), list)):
            prefix: list = []
            rest = None
            items = raw.get("items")
            if "prefixItems" in raw:
                pre = self.schema_list(raw["prefixItems"], ptr + "/prefixItems")
                prefix = [[(x, f"{ptr}/prefixItems/{i}", ())] for i, x in enumerate(pre)]
                if "items" in raw:
                    if isinstance(items, list):
                        raise SchemaError("items must be a schema when prefixItems is present", ptr + "/items")
                    self.check_schema(items, ptr + "/items")
                    rest = [(items, ptr + "/items", ())]
            elif isinstance(items, list):
                prefix = [[(x, f"{ptr}/items/{i}", ())] for i, x in enumerate(items)]
                for i, x in enumerate(items):
                    self.check_schema(x, f"{ptr}/items/{i}")
                if "additionalItems" in raw:
                    self.check_schema(raw["additionalItems"], ptr + "/additionalItems")
                    rest = [(raw["additionalItems"], ptr + "/additionalItems", ())]
            elif "items" in raw:
                self.check_schema(items, ptr + "/items")
                rest = [(items, ptr + "/items", ())]
            s.arrs.append(ArrayKeywords(prefix, rest, ptr))
        # objects
        if obj_slot is not None:
            props = {name: [(sub, sp, ())] for name, sub, sp in self._schema_map(raw, "properties", ptr)}
            patterns = [(pat, [(sub, sp, ())], sp) for pat, sub, sp in self._schema_map(raw, "patternProperties", ptr)]
            additional = None
            if "additionalProperties" in raw:
                ap = raw["additionalProperties"]
                self.check_schema(ap, ptr + "/additionalProperties")
                if ap is not True:
                    additional = [(ap, ptr + "/additionalProperties", ())]
            strict = self.strict_at(ptr)
            silent = self.options.disable_additional_properties and "additionalProperties" not in raw
            s.objs[obj_slot] = ObjectKeywords(props, patterns, additional, ptr, strict, silent)

    def _schema_map(self, raw: dict, key: str, ptr: str) -> list[tuple[str, Any, str]]:
        """(name, subschema, pointer) of each member of `raw[key]`, an object of schemas."""
        members = raw.get(key, {})
        if not isinstance(members, dict):
            raise SchemaError(f"{key} must be an object", f"{ptr}/{key}")
        out = []
        for name, sub in members.items():
            sp = f"{ptr}/{key}/{pointer_token(name)}"
            self.check_schema(sub, sp)
            out.append((name, sub, sp))
        return out

    def add_alternatives(self, s: Normalized, kind: str, alts: list, ptr: str, chain: tuple,
                         exact: bool = True) -> None:
        if not alts and exact:
            s.dead = True
        elif len(alts) == 1 and exact:
            s.merge(alts[0])
        else:
            s.add_group(Disjunction(kind, [[(a, ptr, chain)] for a in alts], ptr, chain, exact))

    def _dependencies(self, s: Normalized, key: str, v: Any, kp: str, chain: tuple) -> None:
        if not isinstance(v, dict):
            raise SchemaError(f"{key} must be an object", kp)
        # names -> the properties they require: names requiring the same ones are one
        # disjunction of two branches, not one each (2^n branches once expanded)
        requiring: dict[tuple[str, ...], list[tuple[str, str]]] = {}
        for name, dep in v.items():
            dp = f"{kp}/{pointer_token(name)}"
            if isinstance(dep, list) and key != "dependentSchemas":
                if not all(isinstance(x, str) for x in dep):
                    raise SchemaError("dependency must be an array of strings", dp)
                need = tuple(dict.fromkeys(n for n in dep if n != name))
                if need:
                    requiring.setdefault(need, []).append((name, dp))
            elif key != "dependentRequired":
                self.check_schema(dep, dp)
                if dep is True:
                    continue
                absent = synthesized(types=frozenset({"object"}), forbidden={name})
                present = synthesized(required={name: dp})
                s.add_group(
                    Disjunction(key, [[(absent, dp, chain)], [(present, dp, chain), (dep, dp, chain)]], dp, chain)
                )
            else:
                raise SchemaError("dependentRequired values must be arrays of strings", dp)
        for need, names in requiring.items():
            self._required_together(s, key, need, names, chain)

    @staticmethod
    def _required_together(s: Normalized, key: str, need: tuple[str, ...], names: list[tuple[str, str]],
                           chain: tuple) -> None:
        """Each of `names` ((name, pointer)) requires every property of `need`: the object
        has all of `need`, or none of `names` (for one name: it is absent, or it and
        `need` are present, as the keyword reads). None of `names` is in `need`."""
        dp = names[0][1]
        absent = synthesized(types=frozenset({"object"}), forbidden={name for name, _ in names})
        required = need + (names[0][0],) if len(names) == 1 else need
        present = synthesized(required={n: dp for n in required})
        s.add_group(Disjunction(key, [[(absent, dp, chain)], [(present, dp, chain)]], dp, chain))

    def parse_type(self, v: Any, kp: str) -> frozenset:
        names = v if isinstance(v, list) else [v]
        if isinstance(v, list) and not v:
            raise SchemaError("type must not be an empty array", kp)
        kinds: set = set()
        for t in names:
            if not isinstance(t, str) or t not in TYPE_KINDS:
                raise SchemaError(
                    f"unknown type {t!r} (expected one of null, boolean, integer, number, string, array, object)",
                    kp,
                )
            kinds |= TYPE_KINDS[t]
        return frozenset(kinds)

    @staticmethod
    def count_value(v: Any, kp: str) -> int:
        if isinstance(v, bool) or not is_number(v) or v < 0 or (isinstance(v, float) and not v.is_integer()):
            raise SchemaError(f"{kp.rsplit('/', 1)[-1]} must be a non-negative integer, not {v!r}", kp)
        return int(v)

    @staticmethod
    def check_schema(v: Any, kp: str) -> None:
        if not isinstance(v, (dict, bool)):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(v).__name__}", kp)

    def schema_list(self, v: Any, kp: str) -> list:
        if not isinstance(v, list) or not v:
            raise SchemaError(f"{kp.rsplit('/', 1)[-1]} must be a non-empty array of schemas", kp)
        for i, x in enumerate(v):
            self.check_schema(x, f"{kp}/{i}")
        return v

    @staticmethod
    def local_checks(raw: dict, ptr: str) -> None:
        for lo_key, hi_key in (
            ("minLength", "maxLength"),
            ("minItems", "maxItems"),
            ("minProperties", "maxProperties"),
            ("minimum", "maximum"),
            ("minContains", "maxContains"),
        ):
            lo = raw.get(lo_key)
            hi = raw.get(hi_key)
            if is_number(lo) and is_number(hi) and lo > hi:
                raise SchemaError(f"{lo_key} ({lo}) is greater than {hi_key} ({hi})", f"{ptr}/{lo_key}")

    def check_values(self, raw: dict, ptr: str) -> None:
        """The keyword values a subschema must have the type and range of: checked by
        `ingest`, and by the negation (`negation`) for a subschema that is only negated (`not`, `if`),
        where a keyword may not matter to the result but is still invalid."""
        for key, v in raw.items():
            if key not in _VALUE_CHECKED:
                continue
            kp = ptr + "/" + pointer_token(key)
            if key in BOUNDS and not (isinstance(v, bool) and key.startswith("exclusive")):
                if not is_number(v) or (isinstance(v, float) and math.isnan(v)):
                    raise SchemaError(f"{key} must be a number", kp)
            elif key == "multipleOf" and (not is_number(v) or not v > 0 or (isinstance(v, float) and not math.isfinite(v))):
                raise SchemaError("multipleOf must be a number > 0", kp)
            elif key in COUNTS:
                self.count_value(v, kp)
            elif key in ("pattern", "format") and not isinstance(v, str):
                raise SchemaError(f"{key} must be a string", kp)
            elif key == "type":
                self.parse_type(v, kp)
            elif key == "enum" and (not isinstance(v, list) or not v):
                raise SchemaError("enum must be a non-empty array", kp)
            elif key == "uniqueItems" and not isinstance(v, bool):
                raise SchemaError("uniqueItems must be a boolean", kp)

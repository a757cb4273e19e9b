"""The normalized schema: what a conjunction of subschemas requires, merged keyword by
keyword (`Normalized`), with the object and array keywords of each subschema kept
apart (`ObjectKeywords`, `ArrayKeywords`) and the disjunctions not yet expanded
(`Disjunction`: anyOf, oneOf, if/then/else, dependencies, negations).

Owns: the typed form a raw schema is read into, merging two of them, and the cheap
questions on one alone (unconstrained? which kinds?). Must not read raw schemas (that is
`normalize`), resolve references or build IR. Children (property and item schemas) stay
as lists of raw items `(schema, pointer, ref_chain)` until they are compiled.
"""

from __future__ import annotations

import math
from fractions import Fraction

from structgen.grammar.json_schema.keywords import KINDS, canon

# The count keywords and the field of `Normalized` each bounds (conjoined, a lower bound
# only rises and an upper bound only falls).
MIN_COUNTS = {"minLength": "min_len", "minItems": "min_items", "minProperties": "min_props"}
MAX_COUNTS = {"maxLength": "max_len", "maxItems": "max_items", "maxProperties": "max_props"}


class ObjectKeywords:
    """The object keywords of ONE subschema (kept apart: `additionalProperties` refers
    to the `properties`/`patternProperties` of its own subschema only)."""

    __slots__ = ("props", "patterns", "additional", "ptr", "strict", "silent")

    def __init__(self, props, patterns, additional, ptr, strict=False, silent=False):
        self.props: dict[str, list] = props  # name -> conjunction of items
        self.patterns: list[tuple[str, list, str]] = patterns  # (pattern, items, pointer)
        self.additional: list | None = additional  # None = anything
        self.ptr = ptr
        self.strict = strict  # under a strict pointer: no undeclared property, whatever it says
        self.silent = silent  # no additionalProperties, and the options generate none then


class ArrayKeywords:
    """The item keywords of ONE subschema: `prefix` (prefixItems, or an array `items`),
    one conjunction per position, and `rest` for the elements after them."""

    __slots__ = ("prefix", "rest", "ptr")

    def __init__(self, prefix, rest, ptr):
        self.prefix: list[list] = prefix
        self.rest: list | None = rest  # None = anything
        self.ptr = ptr


def once_each(items: list) -> list:
    """The items of a conjunction with each schema once (A and A is A). Definitions that
    include one another (WashingtonPost's ANS traits) reach a property through several
    copies of its object, and each copy's items came again one level down: 2^depth
    copies of the same schema, normalized one by one."""
    seen: set = set()
    out = []
    for item in items:
        key = (id(item[0]), item[2])  # the schema object and the $ref chain it came by
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


class Disjunction:
    """A pending disjunction: `alts` is a list of conjunctions (lists of items)."""

    __slots__ = ("kind", "alts", "ptr", "chain", "exact", "slot")

    def __init__(self, kind, alts, ptr, chain, exact=True, slot=0):
        self.kind = kind
        self.alts = alts
        self.ptr = ptr
        self.chain = chain
        self.exact = exact  # False: the alternatives are a subset of what the keyword allows
        self.slot = slot  # where its branches' object members go in `objs` (textual order)

    def shifted(self, by: int) -> "Disjunction":
        return Disjunction(self.kind, self.alts, self.ptr, self.chain, self.exact, self.slot + by)


class Normalized:
    """A conjunction of subschemas, merged keyword by keyword. Children (property and
    item schemas) stay as lists of raw items `(schema, pointer, ref_chain)` until they
    are compiled."""

    __slots__ = (
        "dead", "types", "enum", "enum_ptr", "not_values", "lo", "hi", "mults", "min_len", "max_len",
        "patterns", "formats", "arrs", "min_items", "max_items", "contains", "unique", "objs",
        "required", "forbidden", "min_props", "max_props", "prop_names", "groups", "ptr",
    )  # fmt: skip

    def __init__(self, ptr: str = ""):
        self.dead = False
        self.types: frozenset | None = None
        self.enum: list | None = None
        self.enum_ptr = ""
        self.not_values: list = []
        self.lo: tuple | None = None  # (Fraction, exclusive, raw)
        self.hi: tuple | None = None
        self.mults: list = []  # (Fraction, raw, ptr)
        self.min_len = 0
        self.max_len: int | None = None
        self.patterns: list = []  # (pattern, ptr)
        self.formats: list = []  # (name, ptr)
        self.arrs: list[ArrayKeywords] = []
        self.min_items = 0
        self.max_items: int | None = None
        self.contains: list = []  # (items, min, max, ptr)
        self.unique: str | None = None  # pointer of a uniqueItems: true
        self.objs: list[ObjectKeywords] = []
        self.required: dict[str, str] = {}  # name -> pointer
        self.forbidden: set[str] = set()
        self.min_props = 0
        self.max_props: int | None = None
        self.prop_names: list = []  # items
        self.groups: list[Disjunction] = []
        self.ptr = ptr

    def copy(self) -> "Normalized":
        s = Normalized(self.ptr)
        for name in Normalized.__slots__:
            v = getattr(self, name)
            if isinstance(v, (list, dict, set)):
                v = v.copy()
            setattr(s, name, v)
        return s

    # -- merging

    def set_types(self, kinds: frozenset) -> None:
        self.types = kinds if self.types is None else self.types & kinds

    def set_enum(self, values: list, ptr: str) -> None:
        if self.enum is None:
            seen = set()
            out = []
            for v in values:
                c = canon(v)
                if c not in seen:
                    seen.add(c)
                    out.append(v)
            self.enum = out
            self.enum_ptr = ptr
        else:
            keep = {canon(v) for v in values}
            self.enum = [v for v in self.enum if canon(v) in keep]

    def set_lo(self, value: Fraction, excl: bool, raw) -> None:
        if self.lo is None or value > self.lo[0] or (value == self.lo[0] and excl and not self.lo[1]):
            self.lo = (value, excl, raw)

    def set_hi(self, value: Fraction, excl: bool, raw) -> None:
        if self.hi is None or value < self.hi[0] or (value == self.hi[0] and excl and not self.hi[1]):
            self.hi = (value, excl, raw)

    def at_least(self, field: str, n: int) -> None:
        """Conjoin a lower count bound: `field` (a value of MIN_COUNTS) rises to `n`."""
        setattr(self, field, max(getattr(self, field), n))

    def at_most(self, field: str, n: int) -> None:
        """Conjoin an upper count bound: `field` (a value of MAX_COUNTS) falls to `n`."""
        current = getattr(self, field)
        setattr(self, field, n if current is None else min(current, n))

    def add_group(self, g: "Disjunction") -> None:
        g.slot = len(self.objs)
        self.groups.append(g)

    def merge(self, o: "Normalized", obj_at: int | None = None) -> None:
        """Conjoin `o`; its object members go at index `obj_at` of `objs` (default: the
        end), so that properties keep the schema's textual order."""
        at = len(self.objs) if obj_at is None else obj_at
        k = len(o.objs)
        if k:
            self.objs[at:at] = o.objs
            self.groups = [g.shifted(k) if g.slot >= at and obj_at is not None else g for g in self.groups]
        self.groups += [g.shifted(at) for g in o.groups]
        self.dead = self.dead or o.dead
        if o.types is not None:
            self.set_types(o.types)
        if o.enum is not None:
            self.set_enum(o.enum, o.enum_ptr)
        self.not_values += o.not_values
        if o.lo is not None:
            self.set_lo(*o.lo)
        if o.hi is not None:
            self.set_hi(*o.hi)
        self.mults += o.mults
        self.min_len = max(self.min_len, o.min_len)
        if o.max_len is not None:
            self.max_len = o.max_len if self.max_len is None else min(self.max_len, o.max_len)
        self.patterns += o.patterns
        self.formats += o.formats
        self.arrs += o.arrs
        self.min_items = max(self.min_items, o.min_items)
        if o.max_items is not None:
            self.max_items = o.max_items if self.max_items is None else min(self.max_items, o.max_items)
        self.contains += o.contains
        self.unique = self.unique or o.unique
        for k, p in o.required.items():
            self.required.setdefault(k, p)
        self.forbidden |= o.forbidden
        self.min_props = max(self.min_props, o.min_props)
        if o.max_props is not None:
            self.max_props = o.max_props if self.max_props is None else min(self.max_props, o.max_props)
        self.prop_names += o.prop_names

    # -- queries

    def is_unconstrained(self) -> bool:
        return (
            not self.dead
            and self.types is None
            and self.enum is None
            and not self.not_values
            and self.lo is None
            and self.hi is None
            and not self.mults
            and self.min_len == 0
            and self.max_len is None
            and not self.patterns
            and not self.formats
            and not self.arrs
            and self.min_items == 0
            and self.max_items is None
            and not self.contains
            and not self.unique
            and not self.objs
            and not self.required
            and not self.forbidden
            and self.min_props == 0
            and self.max_props is None
            and not self.prop_names
            and not self.groups
        )

    def in_bounds(self, f: Fraction) -> bool:
        """Whether the number `f` meets the minimum and maximum (exclusive or not)."""
        if self.lo is not None and (f < self.lo[0] or (f == self.lo[0] and self.lo[1])):
            return False
        return self.hi is None or not (f > self.hi[0] or (f == self.hi[0] and self.hi[1]))

    def all_kinds(self) -> frozenset:
        return KINDS if self.types is None else self.types

    def merged(self, other: "Normalized") -> "Normalized":
        """A copy with `other` conjoined."""
        m = self.copy()
        m.merge(other)
        return m


def synthesized(**fields) -> Normalized:
    s = Normalized("")
    for k, v in fields.items():
        setattr(s, k, v)
    return s


def range_nonempty(lo, hi, integral: bool) -> bool:
    if integral:
        a = None
        b = None
        if lo is not None:
            a = math.floor(lo[0]) + 1 if lo[1] else math.ceil(lo[0])
        if hi is not None:
            b = math.ceil(hi[0]) - 1 if hi[1] else math.floor(hi[0])
        return a is None or b is None or a <= b
    if lo is None or hi is None:
        return True
    if lo[0] < hi[0]:
        return True
    return lo[0] == hi[0] and not lo[1] and not hi[1]

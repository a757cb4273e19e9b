"""JSON Schema -> byte-level IR (the regular path).

`schema_to_ir(schema, options)` returns an `ir.Node` whose language is the set of JSON
texts (UTF-8 bytes) that validate against the schema AND are written in the whitespace
style that `options` asks for -- or a documented SUBSET of them. It never accepts a text
the schema rejects: every keyword is either enforced exactly, enforced by a sound
over-approximation of its *complement* (i.e. we accept a subset), or refused with
`UnsupportedKeywordError(keyword, pointer)`.

Whitespace styles (`JsonOptions.whitespace`):
  "default"   exactly what `json.dumps(x)` writes (", " and ": ")
  "compact"   exactly `json.dumps(x, separators=(",", ":"))`
  "indent"    exactly `json.dumps(x, indent=N)` (also chosen by `indent=N`)
  "flexible"  any JSON whitespace between tokens, at most `max_whitespace` characters per
              run (default depends on the depth: 2 + 4 * level up to level
              FLEXIBLE_LEVELS = 10, then 42 -- indent=4 output to depth 10, indent=2 to
              20, "\\r\\n" line ends included)
No style allows whitespace before or after the top-level value. String bodies accept
every valid JSON spelling of their characters (raw UTF-8, short escapes, \\uXXXX,
surrogate pairs); literal keys and enum/const values accept the spellings of
`json.dumps(v)` and `json.dumps(v, ensure_ascii=False)` (and "1" for a float 1.0).

Documented choices (where we accept a subset of the valid texts):
  * Object properties are emitted in the schema's textual order: `properties` of each
    subschema in the order they appear (a `$ref`/`allOf`/`anyOf`/`oneOf` placed before
    `properties` contributes its properties first), then names that are only in
    `required`; undeclared properties (allowed by `additionalProperties` /
    `patternProperties`) come after all declared ones. `property_order="any"` lifts
    this: members in any order, each declared one at most once (`ir.Members`).
  * "Any JSON value" (`{}`, `true`, absent `items`/`additionalProperties`) nests without
    bound (a recursive rule; in "flexible" one copy per level up to FLEXIBLE_LEVELS,
    where its whitespace bound stops growing) except in "indent", whose whitespace
    depends on the depth: there it is bounded to `max_any_depth` levels (3 unless set;
    setting it bounds every style); deeper values are rejected.
  * Recursive `$ref` (a schema that contains itself through properties or items:
    trees, linked lists, comment threads) compiles to recursive rules in every style
    but "indent", which refuses it (its indentation would need one copy of the schema
    per depth); "flexible" writes one copy per level up to FLEXIBLE_LEVELS. A `$ref`
    cycle that never descends into a property or item defines no value and is refused.
  * `const`/`enum` objects are written with their keys in the order given in the schema
    (in any order with `property_order="any"`).
  * Numbers: `type: integer` accepts integer spellings only (not "1.0"); numbers with an
    integer `multipleOf` accept integer spellings only; a non-integer `multipleOf`
    (0.01) means exact decimal multiples, written without exponent ("19.99", "10.0";
    Python's jsonschema reading floats calls 19.99 no multiple of 0.01, read with
    Decimal it agrees: `structgen.validation`); "a number that is not an integer"
    (e.g. `oneOf: [{type: integer}, {type: number}]`) is only expressed without bounds,
    as plain decimals of at most 15 significant digits.
  * `pattern`/`format` with length bounds are intersected exactly (a product automaton)
    while that stays small; for a long `maxLength` over a big pattern, every repetition
    in the pattern is capped (the largest cap that keeps matches within maxLength).
  * `not`, the `else` side of `if`, and `oneOf` exclusions use the exact negation of a
    subschema where it can be written, otherwise the part its negatable keywords give
    (a subset); where that part leaves nothing, the keyword is refused instead.
  * `oneOf`: branches must be provably mutually exclusive; where they are not, a branch
    is strengthened (a discriminating property becomes required, or an array of
    disjoint items must be non-empty) or intersected with the others' negations;
    otherwise refused.
  * Values excluded by `not`/`if` (e.g. `not: {const: "x"}`) that cannot be expressed
    exactly next to other constraints of the same type drop that type.
  * `uniqueItems` on an array of a finite set of scalars emits the values in schema order.
  * `dependentRequired` names that no `properties` declares are emitted before the
    property that triggers them.
  * `format` is enforced (assertion), never used to prove two branches disjoint.
  * Keywords no JSON Schema draft gives a validation meaning to (vendor `x-*`, `title`,
    `javaType`, OpenAPI `nullable`/`discriminator`, ...) are annotations and ignored,
    as the spec says; see `JsonOptions.unknown_keywords` for misspellings.
Known limitation: a regular language cannot forbid duplicate undeclared keys, so
`minProperties` counted over undeclared keys may be met by a text that repeats a key.

Supported keywords: type, enum, const, boolean schemas, minLength, maxLength, pattern,
format (via `structgen.grammar.formats`), minimum, maximum, exclusiveMinimum,
exclusiveMaximum (numbers and draft-04 booleans), multipleOf, items,
prefixItems, additionalItems, minItems, maxItems, contains/minContains, uniqueItems
(limited), properties, required, additionalProperties, patternProperties,
minProperties, maxProperties, propertyNames (limited), dependentRequired,
dependentSchemas, dependencies, allOf, anyOf, oneOf (limited), not (limited),
if/then/else (limited), $ref (local, `$id`/`$anchor` inside the document), $defs,
definitions, recursive $ref (default and compact styles). Refused: unevaluatedProperties,
unevaluatedItems, $dynamicRef, $recursiveRef, remote $ref, recursion under `not`, and the
limited ones where they cannot be enforced soundly.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import re
import threading
import time
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any, Iterable
from urllib.parse import unquote, urldefrag, urljoin

from structgen.errors import (
    GrammarTooLargeError,
    RegexError,
    SchemaError,
    StructgenError,
    UnsupportedKeywordError,
)
from structgen.grammar import ir
from structgen.grammar.languages import Languages
from structgen.grammar.nesting import (
    MAX_SCHEMA_LEVELS,
    check_nesting,
    check_text_nesting,
    make_room_for_deep_input,
)

__all__ = ["JsonOptions", "schema_to_ir", "parse_schema", "canonical_key", "any_json_ir"]

# ---------------------------------------------------------------- options


@dataclass(frozen=True)
class JsonOptions:
    """How `schema_to_ir` renders and how far it goes.

    whitespace: "default" | "compact" | "flexible" | "indent" (see the module doc).
    indent: N spaces per level, exactly as `json.dumps(x, indent=N)`; implies "indent".
    strict: OpenAI strict mode: undeclared properties are never allowed (as if every
        object had `additionalProperties: false`, whatever it says).
    strict_pointers: strict mode for the subschemas at or under these JSON pointers only
        (the tools of one tool-call grammar, each with its own `strict`).
    disable_additional_properties: an object schema that declares `properties` or
        `patternProperties` and is silent on `additionalProperties` gets no undeclared
        properties (a name that no `properties`, `patternProperties` or `required` of the
        object's subschemas declares), as generation servers do by default; an explicit
        `additionalProperties` is honoured, and so is a `minProperties` above the
        declared names. It only narrows what is generated, never widens it.
    safe_integers: an integer schema open on a side gets I-JSON's bound there, so that
        |n| <= 2**53 - 1 (RFC 7493: the integers every JSON reader holds exactly), and a
        model that keeps writing digits must stop after 16. An explicit bound is kept.
    lenient: ignore keywords that cannot be enforced instead of refusing them. THIS MAY
        UNDER-CONSTRAIN: the grammar may accept texts the schema rejects.
    max_any_depth: nesting bound of "any JSON value" (None: unbounded, but 3 in indent).
    max_whitespace: bound per whitespace run in "flexible" (None: 2 + 4 * level up to
        level FLEXIBLE_LEVELS).
    max_states: budget for `ir.expanded_size` of the result (GrammarTooLargeError).
    timeout_s: compile-time budget (GrammarTooLargeError).
    unknown_keywords: what to do with keywords no JSON Schema draft defines. "typos"
        (default): refuse the ones that look like a misspelled validation keyword
        ("maxLenght", "oneof", "Required"), ignore the rest as annotations, as the spec
        says (a validator ignores them too, so no accepted text can fail validation
        because of them); "error": refuse every one; "ignore": ignore every one.
    unknown_formats: "error" (refuse a `format` we cannot check) or "ignore" (format is
        an annotation in draft 2020-12; ignoring it accepts more strings).
    property_order: "schema" (default): an object's declared properties come in the
        order the schema lists them, then its undeclared ones -- what OpenAI's strict
        mode and our peers generate, and what lets jump-forward write the next key;
        "any": members in any order (each declared one at most once), as JSON Schema
        itself allows -- for text written in another order, or to let a model follow the
        order of its prompt's examples. An object's states are then made as they are
        reached (2^n orders of n properties).
    """

    whitespace: str = "default"
    indent: int | None = None
    strict: bool = False
    strict_pointers: tuple[str, ...] = ()
    disable_additional_properties: bool = False
    safe_integers: bool = False
    lenient: bool = False
    max_any_depth: int | None = None
    max_whitespace: int | None = None
    max_states: int = 50_000_000
    timeout_s: float = 10.0
    unknown_keywords: str = "typos"
    unknown_formats: str = "error"
    property_order: str = "schema"

    def __post_init__(self) -> None:
        if self.whitespace not in ("default", "compact", "flexible", "indent"):
            raise StructgenError(
                f"unknown whitespace style {self.whitespace!r} (expected default, compact, flexible or indent)"
            )
        if self.indent is not None:
            if isinstance(self.indent, bool) or not isinstance(self.indent, int) or self.indent < 0:
                raise StructgenError(f"indent must be a non-negative integer, not {self.indent!r}")
            if self.whitespace not in ("default", "indent"):
                raise StructgenError(f"indent={self.indent} conflicts with whitespace={self.whitespace!r}")
        elif self.whitespace == "indent":
            raise StructgenError("whitespace='indent' needs indent=N")
        if self.max_whitespace is not None and self.max_whitespace < 0:
            raise StructgenError("max_whitespace must be >= 0")
        if self.max_any_depth is not None and self.max_any_depth < 0:
            raise StructgenError("max_any_depth must be >= 0")
        if self.unknown_keywords not in ("ignore", "typos", "error"):
            raise StructgenError("unknown_keywords must be 'ignore', 'typos' or 'error'")
        if self.unknown_formats not in ("ignore", "error"):
            raise StructgenError("unknown_formats must be 'ignore' or 'error'")
        if not all(isinstance(p, str) and (p == "" or p.startswith("/")) for p in self.strict_pointers):
            raise StructgenError(f"strict_pointers must be JSON pointers, not {self.strict_pointers!r}")
        if self.property_order not in ("schema", "any"):
            raise StructgenError(f"property_order must be 'schema' or 'any', not {self.property_order!r}")

    @property
    def style(self) -> str:
        return "indent" if self.indent is not None else self.whitespace


def canonical_key(schema: Any, options: JsonOptions | None = None) -> str:
    """Stable text for cache keys: the schema as compact JSON plus the options.

    Object keys are NOT sorted: property order decides the order in which the grammar
    emits properties, so two schemas that differ only in key order compile differently.
    """
    options = options or JsonOptions()
    try:
        text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise SchemaError(f"schema is not JSON-serializable: {e}", "") from None
    opts = json.dumps(asdict(options), sort_keys=True, separators=(",", ":"))
    return text + "\n" + opts


SAFE_INTEGER = 2**53 - 1  # I-JSON's largest integer (safe_integers)

# ---------------------------------------------------------------- keyword tables

_BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_COUNTS = frozenset({"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
                     "minContains", "maxContains"})

_ANNOTATIONS = frozenset(
    {
        "title", "description", "examples", "example", "default", "$comment", "$schema", "$id", "id",
        "deprecated", "readOnly", "writeOnly", "contentMediaType", "contentEncoding", "contentSchema",
        "$vocabulary", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$defs", "definitions",
        "nullable", "discriminator", "xml", "externalDocs", "markdownDescription", "enumDescriptions",
        "markdownEnumDescriptions", "errorMessage", "then", "else", "minContains", "maxContains",
    }
)  # fmt: skip
_UNSUPPORTED = {
    "unevaluatedProperties": "needs evaluation tracking across subschemas",
    "unevaluatedItems": "needs evaluation tracking across subschemas",
    "$dynamicRef": "dynamic references are not supported",
    "$recursiveRef": "recursive references are not supported",
    "divisibleBy": "draft-03 keyword",
    "disallow": "draft-03 keyword",
    "extends": "draft-03 keyword",
}
@functools.lru_cache(maxsize=4096)
def _misspelled_keyword(key: str) -> str | None:
    """The validation keyword `key` most likely misspells, if any. Keys starting with
    "_" are taken as deliberately disabled keywords (a common convention), not typos.
    Memoized: 20-40 us a key, and schemas repeat their annotation keys (a MaskBench
    schema that writes "preferredOrder" beside 62 of its objects spent ~3 ms of its
    ~20 ms compile here)."""
    if key.startswith("_") or not key:
        return None
    known = sorted(_HANDLED | set(_UNSUPPORTED))
    for word in known:
        if word.lower() == key.lower():
            return word
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.85)
    return close[0] if close else None


_HANDLED = frozenset(
    {
        "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
        "maxLength", "minLength", "pattern", "format", "items", "prefixItems", "additionalItems",
        "maxItems", "minItems", "uniqueItems", "contains", "properties", "patternProperties",
        "additionalProperties", "required", "maxProperties", "minProperties", "propertyNames",
        "dependencies", "dependentRequired", "dependentSchemas", "allOf", "anyOf", "oneOf", "not",
        "if", "$ref",
    }
)  # fmt: skip

# atomic kinds: "int" = integral numbers, "frac" = numbers with a fractional part
_KINDS = frozenset({"null", "boolean", "int", "frac", "string", "array", "object"})
_TYPE_KINDS = {
    "null": frozenset({"null"}),
    "boolean": frozenset({"boolean"}),
    "integer": frozenset({"int"}),
    "number": frozenset({"int", "frac"}),
    "string": frozenset({"string"}),
    "array": frozenset({"array"}),
    "object": frozenset({"object"}),
}
_MAX_BRANCHES = 65536
_MAX_NEGATION_ALTS = 64
_MAX_ENUMERATED_MULTIPLES = 1000
_MAX_MOD_STATES = 20_000  # states of a remainder automaton (multipleOf without an upper bound)
_PRODUCT_BUDGET = 60_000  # states of a pattern x length product before capping instead


def _esc(key: str) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def _kind_of(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "int" if math.isfinite(v) and v.is_integer() else "frac"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    raise TypeError(f"not a JSON value: {v!r}")


def _canon(v: Any):
    """Hashable key with JSON Schema equality (1 == 1.0, true != 1, key order ignored)."""
    if v is None:
        return ("n",)
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            return ("f", repr(v))
        return ("x", Fraction(v))
    if isinstance(v, str):
        return ("s", v)
    if isinstance(v, list):
        return ("a", tuple(_canon(x) for x in v))
    if isinstance(v, dict):
        return ("o", frozenset((k, _canon(x)) for k, x in v.items()))
    return ("?", repr(v))


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# ---------------------------------------------------------------- whitespace styles

_WS_BYTES = ((0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x20))
# "flexible" bounds a whitespace run by 2 + 4 * level up to this level, then by 42: from
# there the grammar no longer depends on the depth, so a recursive schema, or any value,
# closes its loop there instead of being refused or cut at a depth.
FLEXIBLE_LEVELS = 10


class _Style:
    """Separators of one whitespace style; `d` is the depth of the container."""

    def __init__(self, options: JsonOptions):
        self.mode = options.style
        self.indent = options.indent
        self.max_ws = options.max_whitespace
        # flexible whitespace grows its bound with the depth unless max_whitespace fixes it
        self.depth_dependent = self.mode == "indent" or (self.mode == "flexible" and self.max_ws is None)
        self._ws_cache: dict[int, ir.Node] = {}

    def depth_key(self, depth: int) -> int:
        """What of the depth a value's IR depends on: the depth itself for "indent",
        the level up to FLEXIBLE_LEVELS for "flexible" with its default bound, else 0."""
        if self.mode == "indent":
            return depth
        if self.depth_dependent:
            return min(depth, FLEXIBLE_LEVELS)
        return 0

    def ws(self, level: int) -> ir.Node:
        k = self.max_ws if self.max_ws is not None else 2 + 4 * min(level, FLEXIBLE_LEVELS)
        node = self._ws_cache.get(k)
        if node is None:
            node = self._ws_cache[k] = ir.rep(ir.byteset(_WS_BYTES), 0, k)
        return node

    def open(self, d: int) -> ir.Node:
        if self.mode == "indent":
            return ir.lit("\n" + " " * (self.indent * (d + 1)))
        if self.mode == "flexible":
            return self.ws(d + 1)
        return ir.EMPTY

    def close(self, d: int) -> ir.Node:
        if self.mode == "indent":
            return ir.lit("\n" + " " * (self.indent * d))
        if self.mode == "flexible":
            return self.ws(d)
        return ir.EMPTY

    def sep(self, d: int) -> ir.Node:
        if self.mode == "indent":
            return ir.lit(",\n" + " " * (self.indent * (d + 1)))
        if self.mode == "flexible":
            return ir.seq(self.ws(d + 1), ir.lit(","), self.ws(d + 1))
        if self.mode == "compact":
            return ir.lit(",")
        return ir.lit(", ")

    def colon(self, d: int) -> ir.Node:
        if self.mode == "flexible":
            return ir.seq(self.ws(d + 1), ir.lit(":"), self.ws(d + 1))
        if self.mode == "compact":
            return ir.lit(":")
        return ir.lit(": ")

    def empty(self, d: int, opener: str, closer: str) -> ir.Node:
        if self.mode == "flexible":
            return ir.seq(ir.lit(opener), self.ws(d + 1), ir.lit(closer))
        return ir.lit(opener + closer)

    def members(self, d: int, entries: list[ir.Node], required: list[bool], extra: ir.Node | None = None,
                lo: int = 0, hi: int | None = None) -> ir.Node:
        """An object whose members come in any order (`ir.Members`), brackets included."""
        close_some = ir.seq(self.close(d), ir.lit("}"))
        return ir.seq(ir.lit("{"), ir.Members(
            entries, required, extra, self.open(d), self.sep(d), self.empty(d, "", "}"), close_some, lo, hi,
        ))

    def container(self, d: int, opener: str, closer: str, elements: list[ir.Node]) -> ir.Node:
        if not elements:
            return self.empty(d, opener, closer)
        return ir.seq(ir.lit(opener), self.open(d), ir.join(elements, self.sep(d)), self.close(d), ir.lit(closer))


# ---------------------------------------------------------------- lazily imported siblings


def _cs():
    from structgen.grammar import charset

    return charset


def _rx():
    from structgen.grammar import regex

    return regex


def _format_pattern(name: str) -> str | None:
    try:
        from structgen.grammar.formats import format_pattern
    except ImportError:  # pragma: no cover - the formats module has not landed yet
        return None
    return format_pattern(name)


def _numbers():
    from structgen.grammar import numbers

    return numbers


# ---------------------------------------------------------------- IR acceptor (small inputs)


def _ir_match(node: ir.Node, data: bytes) -> bool:
    """Whether `data` is in the language of `node`: a memoized set-of-positions walk.
    Meant for short strings (property names, enum values), not whole documents."""
    memo: dict[tuple[int, int], frozenset[int]] = {}
    n = len(data)

    def ends(x: ir.Node, p: int) -> frozenset[int]:
        key = (id(x), p)
        got = memo.get(key)
        if got is not None:
            return got
        memo[key] = frozenset()  # guards against pathological epsilon cycles
        if isinstance(x, ir.Bytes):
            out = frozenset([p + len(x.data)]) if data.startswith(x.data, p) else frozenset()
        elif isinstance(x, ir.ByteSet):
            out = frozenset()
            if p < n:
                b = data[p]
                if any(lo <= b <= hi for lo, hi in x.ranges):
                    out = frozenset([p + 1])
        elif isinstance(x, ir.Concat):
            cur = {p}
            for item in x.items:
                nxt: set[int] = set()
                for q in cur:
                    nxt |= ends(item, q)
                cur = nxt
                if not cur:
                    break
            out = frozenset(cur)
        elif isinstance(x, ir.Alt):
            acc: set[int] = set()
            for item in x.items:
                acc |= ends(item, p)
            out = frozenset(acc)
        elif isinstance(x, ir.Repeat):
            cur = {p}
            for _ in range(x.min):
                nxt = set()
                for q in cur:
                    nxt |= ends(x.item, q)
                cur = nxt
                if not cur:
                    break
            result = set(cur)
            frontier = set(cur)
            count = x.min
            while frontier and (x.max is None or count < x.max):
                nxt = set()
                for q in frontier:
                    nxt |= ends(x.item, q)
                frontier = nxt - result if x.max is None else nxt
                result |= nxt
                count += 1
            out = frozenset(result)
        elif isinstance(x, ir.Graph):
            seen = {(x.start, p)}
            stack = [(x.start, p)]
            by_src: dict[int, list] = {}
            for src, dst, label in x.edges:
                by_src.setdefault(src, []).append((dst, label))
            finals = set(x.finals)
            acc = set()
            while stack:
                s, q = stack.pop()
                if s in finals:
                    acc.add(q)
                for dst, label in by_src.get(s, ()):
                    targets = [q] if label is None else ends(label, q)
                    for r in targets:
                        if (dst, r) not in seen:
                            seen.add((dst, r))
                            stack.append((dst, r))
            out = frozenset(acc)
        elif isinstance(x, ir.Members):
            seen = {(ir.Members.START, p)}
            stack = [(ir.Members.START, p)]
            acc = set()
            while stack:
                state, q = stack.pop()
                for label, nxt in x.moves(state):
                    for r in ends(label, q):
                        if nxt is None:
                            acc.add(r)
                        elif (nxt, r) not in seen:
                            seen.add((nxt, r))
                            stack.append((nxt, r))
            out = frozenset(acc)
        elif isinstance(x, ir.Stepper):
            out = ends(x.plain(), p)
        elif isinstance(x, ir.Ref):  # JSON recursion consumes a bracket before recursing
            out = ends(x.target, p) if x.target is not None else frozenset()
        else:
            raise TypeError(f"not an IR node: {x!r}")
        memo[key] = out
        return out

    return n in ends(node, 0)


# ---------------------------------------------------------------- char-level NFAs for patterns


class _CharNFA:
    """An epsilon-free NFA over code points (edges carry CharSets), built from the
    regex AST of `structgen.grammar.regex` with JSON Schema `pattern` (search)
    semantics. Used where the IR has no operator: intersecting several patterns,
    bounding lengths, testing property names, first-character sets."""

    __slots__ = ("n", "start", "finals", "edges")

    def __init__(self, n: int, start: int, finals: set[int], edges: list[list[tuple[tuple, int]]]):
        self.n = n
        self.start = start
        self.finals = finals
        self.edges = edges

    # -- construction

    @staticmethod
    def from_pattern(pattern: str, search: bool = True, cap: int | None = None, budget: int = 1_000_000) -> "_CharNFA":
        """cap=k bounds every unbounded repetition (and the search prefix/suffix) to
        at most max(min, k) iterations: a SUBSET of the pattern's language."""
        rx = _rx()
        C = _cs()
        ast = rx.parse_regex(pattern)
        chars: list[list[tuple[tuple, int]]] = []
        eps: list[list[tuple[int, str]]] = []

        def new() -> int:
            chars.append([])
            eps.append([])
            if len(chars) > budget:
                raise GrammarTooLargeError("pattern automaton too large")
            return len(chars) - 1

        def build(node, s: int) -> int:
            if isinstance(node, rx.Chars):
                e = new()
                chars[s].append((node.cs, e))
                return e
            if isinstance(node, rx.Anchor):
                e = new()
                eps[s].append((e, node.kind))
                return e
            if isinstance(node, rx.Sequence):
                cur = s
                for item in node.items:
                    cur = build(item, cur)
                return cur
            if isinstance(node, rx.Alternation):
                end = new()
                for item in node.items:
                    b = new()
                    eps[s].append((b, ""))
                    eps[build(item, b)].append((end, ""))
                return end
            if isinstance(node, rx.Quantified):
                cur = s
                for _ in range(node.min):
                    cur = build(node.item, cur)
                top = node.max
                if cap is not None:
                    top = max(node.min, cap if top is None else min(top, cap))
                if top is None:
                    hub = new()
                    eps[cur].append((hub, ""))
                    b = new()
                    eps[hub].append((b, ""))
                    eps[build(node.item, b)].append((hub, ""))
                    return hub
                end = new()
                for _ in range(top - node.min):
                    eps[cur].append((end, ""))
                    b = new()
                    eps[cur].append((b, ""))
                    cur = build(node.item, b)
                eps[cur].append((end, ""))
                return end
            raise TypeError(f"not a regex AST node: {node!r}")

        s0 = new()
        r_start = new()
        if search and cap is None:
            chars[s0].append((C.ANY_CHAR, s0))
        elif search:
            cur = s0
            for _ in range(cap):
                eps[cur].append((r_start, ""))
                nxt = new()
                chars[cur].append((C.ANY_CHAR, nxt))
                cur = nxt
            eps[cur].append((r_start, ""))
        eps[s0].append((r_start, ""))
        r_end = build(ast, r_start)
        f = new()
        if search and cap is None:
            eps[r_end].append((f, ""))
            chars[f].append((C.ANY_CHAR, f))
        elif search:
            cur = r_end
            for _ in range(cap):
                eps[cur].append((f, ""))
                nxt = new()
                chars[cur].append((C.ANY_CHAR, nxt))
                cur = nxt
            eps[cur].append((f, ""))
        else:
            eps[r_end].append((f, ""))
        return _CharNFA._eliminate(chars, eps, s0, f)

    @staticmethod
    def _eliminate(chars, eps, start: int, final: int) -> "_CharNFA":
        """Remove epsilons, resolving anchors with two flags: `started` (a character was
        consumed: '^' no longer matches) and `ended` ('$' passed: no more characters)."""
        index: dict[tuple[int, int, int], int] = {}
        order: list[tuple[int, int, int]] = []

        def sid(key) -> int:
            got = index.get(key)
            if got is None:
                got = index[key] = len(order)
                order.append(key)
            return got

        closure_cache: dict[tuple[int, int, int], list[tuple[int, int, int]]] = {}

        def closure(key):
            got = closure_cache.get(key)
            if got is not None:
                return got
            seen = {key}
            stack = [key]
            while stack:
                q, st, en = stack.pop()
                for dst, kind in eps[q]:
                    if kind == "^" and st:
                        continue
                    nk = (dst, st, 1 if kind == "$" else en)
                    if nk not in seen:
                        seen.add(nk)
                        stack.append(nk)
            closure_cache[key] = out = list(seen)
            return out

        edges: list[list[tuple[tuple, int]]] = []
        finals: set[int] = set()
        sid((start, 0, 0))
        i = 0
        while i < len(order):
            key = order[i]
            out: dict[int, list] = {}
            for q, st, en in closure(key):
                if q == final:
                    finals.add(i)
                if en:
                    continue
                for cs, dst in chars[q]:
                    out.setdefault(sid((dst, 1, 0)), []).append(cs)
            C = _cs()
            edges.append([(C.union(*css), d) for d, css in out.items()])
            i += 1
        return _CharNFA(len(order), 0, finals, edges).trim()

    def trim(self) -> "_CharNFA":
        """Keep states that are reachable and can reach a final state; renumber."""
        reach = {self.start}
        stack = [self.start]
        while stack:
            s = stack.pop()
            for _, d in self.edges[s]:
                if d not in reach:
                    reach.add(d)
                    stack.append(d)
        rev: dict[int, list[int]] = {}
        for s in reach:
            for _, d in self.edges[s]:
                rev.setdefault(d, []).append(s)
        live = {f for f in self.finals if f in reach}
        stack = list(live)
        while stack:
            d = stack.pop()
            for s in rev.get(d, ()):
                if s not in live:
                    live.add(s)
                    stack.append(s)
        if self.start not in live:
            return _CharNFA(1, 0, set(), [[]])
        ids = {s: k for k, s in enumerate(sorted(live))}
        edges = [[(cs, ids[d]) for cs, d in self.edges[s] if d in live] for s in sorted(live)]
        return _CharNFA(len(ids), ids[self.start], {ids[f] for f in live if f in self.finals}, edges)

    # -- queries

    def is_empty(self) -> bool:
        return not self.finals

    def matches(self, text: str) -> bool:
        C = _cs()
        cur = {self.start}
        for ch in text:
            cp = ord(ch)
            nxt = set()
            for s in cur:
                for cs, d in self.edges[s]:
                    if C.contains(cs, cp):
                        nxt.add(d)
            if not nxt:
                return False
            cur = nxt
        return bool(cur & self.finals)

    def first_chars(self):
        C = _cs()
        return C.union(*(cs for cs, _ in self.edges[self.start])) if self.edges[self.start] else C.NO_CHAR

    def length_range(self) -> tuple[int, int | None]:
        """Shortest and longest accepted length in code points (None = unbounded)."""
        if not self.finals:
            return (0, 0)
        dist = {self.start: 0}
        frontier = [self.start]
        shortest = 0 if self.start in self.finals else None
        d = 0
        while frontier and shortest is None:
            d += 1
            nxt = []
            for s in frontier:
                for _, t in self.edges[s]:
                    if t not in dist:
                        dist[t] = d
                        nxt.append(t)
                        if t in self.finals and shortest is None:
                            shortest = d
            frontier = nxt
        # longest: a cycle among (trimmed) states means unbounded
        color: dict[int, int] = {}
        longest: dict[int, int] = {}
        order: list[int] = []
        stack = [(self.start, 0)]
        while stack:
            s, k = stack.pop()
            if k == 0:
                if color.get(s) == 2:
                    continue
                if color.get(s) == 1:
                    continue
                color[s] = 1
                stack.append((s, 1))
                for _, t in self.edges[s]:
                    c = color.get(t)
                    if c == 1:
                        return (shortest or 0, None)
                    if c is None:
                        stack.append((t, 0))
            else:
                color[s] = 2
                order.append(s)
        for s in order:  # post-order: successors first
            best = 0 if s in self.finals else -1
            for _, t in self.edges[s]:
                if longest.get(t, -1) >= 0:
                    best = max(best, longest[t] + 1)
            longest[s] = best
        return (shortest or 0, max(longest.get(self.start, 0), 0))

    def intersect(self, other: "_CharNFA") -> "_CharNFA":
        C = _cs()
        index = {(self.start, other.start): 0}
        order = [(self.start, other.start)]
        edges: list[list[tuple[tuple, int]]] = []
        finals: set[int] = set()
        i = 0
        while i < len(order):
            a, b = order[i]
            if a in self.finals and b in other.finals:
                finals.add(i)
            out = []
            for cs1, a2 in self.edges[a]:
                for cs2, b2 in other.edges[b]:
                    cs = C.intersect(cs1, cs2)
                    if cs:
                        key = (a2, b2)
                        if key not in index:
                            index[key] = len(order)
                            order.append(key)
                        out.append((cs, index[key]))
            edges.append(out)
            i += 1
            if len(order) > 200_000:
                raise GrammarTooLargeError("intersection of string patterns is too large")
        return _CharNFA(len(order), 0, finals, edges).trim()

    def union(self, other: "_CharNFA") -> "_CharNFA":
        """Accepts what either accepts (a fresh start copying both starts' edges)."""
        off = self.n
        edges = [list(e) for e in self.edges] + [[(cs, d + off) for cs, d in e] for e in other.edges]
        start_edges = list(self.edges[self.start]) + [(cs, d + off) for cs, d in other.edges[other.start]]
        edges.append(start_edges)
        finals = set(self.finals) | {f + off for f in other.finals}
        if self.start in self.finals or other.start in other.finals:
            finals.add(self.n + other.n)
        return _CharNFA(self.n + other.n + 1, self.n + other.n, finals, edges)

    def complement(self, limit: int = 20_000) -> "_CharNFA":
        """Every string this NFA rejects: subset construction over code point atoms
        into a complete DFA (with a dead state), finals flipped."""
        C = _cs()
        top = C.MAX_CODE_POINT + 1
        start = frozenset([self.start])
        index = {start: 0}
        order = [start]
        edges: list[list] = []
        accepting: set[int] = set()
        i = 0
        while i < len(order):
            cur = order[i]
            if cur & self.finals:
                accepting.add(i)
            pairs = [(cs, d) for q in cur for cs, d in self.edges[q]]
            cuts = {0, top}
            for cs, _ in pairs:
                for lo, hi in cs:
                    cuts.add(lo)
                    cuts.add(hi + 1)
            cuts = sorted(cuts)
            groups: dict[frozenset, list] = {}
            for a, b in zip(cuts, cuts[1:]):
                tgt = frozenset(d for cs, d in pairs if C.contains(cs, a))
                groups.setdefault(tgt, []).append((a, b - 1))
            out = []
            for tgt, ranges in groups.items():
                if tgt not in index:
                    index[tgt] = len(order)
                    order.append(tgt)
                    if len(order) > limit:
                        raise GrammarTooLargeError("complement of patternProperties patterns is too large")
                out.append((C.charset(ranges), index[tgt]))
            edges.append(out)
            i += 1
        finals = {k for k in range(len(order)) if k not in accepting}
        return _CharNFA(len(order), 0, finals, edges).trim()

    @staticmethod
    def any_string() -> "_CharNFA":
        C = _cs()
        return _CharNFA(1, 0, {0}, [[(C.ANY_CHAR, 0)]])

    def to_ir(self, min_len: int = 0, max_len: int | None = None, *, max_states: int = 2_000_000, tick=None) -> ir.Node:
        """JSON string body (no quotes) of the accepted strings whose length (code
        points) is within [min_len, max_len]: a Graph, each edge one JSON char."""
        C = _cs()
        cap = max_len if max_len is not None else min_len
        if self.n * (cap + 1) > max_states:
            raise GrammarTooLargeError(
                f"string pattern with length bounds needs {self.n * (cap + 1):,} states (over {max_states:,})"
            )
        index: dict[tuple[int, int], int] = {(self.start, 0): 0}
        order = [(self.start, 0)]
        raw_edges: list[tuple[int, int, tuple]] = []
        i = 0
        while i < len(order):
            s, c = order[i]
            i += 1
            if tick is not None and not i & 1023:
                tick()
            if max_len is not None and c >= max_len:
                continue
            c2 = min(c + 1, cap)
            for cs, t in self.edges[s]:
                key = (t, c2)
                if key not in index:
                    index[key] = len(order)
                    order.append(key)
                raw_edges.append((index[(s, c)], index[key], cs))
        finals = [k for k, (s, c) in enumerate(order) if s in self.finals and c >= min_len]
        if not finals:
            return ir.NOTHING
        # merge parallel edges, then trim states that cannot reach a final
        merged: dict[tuple[int, int], list] = {}
        for a, b, cs in raw_edges:
            merged.setdefault((a, b), []).append(cs)
        live = ir.reaching(finals, merged)
        if 0 not in live:
            return ir.NOTHING
        labels: dict = {}

        def label(css: list) -> ir.Node:
            cs = css[0] if len(css) == 1 else C.union(*css)
            got = labels.get(cs)
            if got is None:
                got = labels[cs] = C.json_char_ir(cs)
            return got

        edges = [(a, b, label(css)) for (a, b), css in merged.items() if a in live and b in live]
        graph, ids = _graph_ids(len(order), 0, finals, edges)
        if max_len is not None and max_len >= COUNTED_MIN_LENGTH and isinstance(graph, ir.Graph):
            graph.counted = self._counted(order, ids, min_len, max_len, label)
        return graph

    def _counted(self, order: list[tuple[int, int]], ids: dict[int, int], min_len: int, max_len: int,
                 label) -> ir.Counted | None:
        """The ir.Counted of the graph `to_ir` built over (pattern state, count) pairs
        `order` (kept ones renumbered by `ids`). The twin counts only up to `min_len`
        (a state per (pattern state, min(count, min_len))), its labels made by `label`
        as the counted graph's were (so the same nodes)."""
        moves: list[dict[int, list]] = [{} for _ in range(self.n)]  # per state: next state -> char sets
        for s in range(self.n):
            for cs, t in self.edges[s]:
                moves[s].setdefault(t, []).append(cs)
        labelled = [[(t, label(css)) for t, css in out.items()] for out in moves]
        index = {(self.start, 0): 0}
        pairs = [(self.start, 0)]
        edges = []
        for s, k in pairs:  # (grows while it runs)
            for t, lab in labelled[s]:
                key = (t, min(k + 1, min_len))
                if key not in index:
                    index[key] = len(pairs)
                    pairs.append(key)
                edges.append((index[(s, k)], index[key], lab))
        finals = [i for i, (s, k) in enumerate(pairs) if s in self.finals and k == min_len]
        twin, twin_ids = _graph_ids(len(pairs), 0, finals, edges)
        if not isinstance(twin, ir.Graph):
            return None
        # the most characters a live twin state still needs to reach an end
        need = {f: 0 for f in twin.finals}
        back: dict[int, list[int]] = {}
        for a, b, _ in twin.edges:
            back.setdefault(b, []).append(a)
        frontier = list(twin.finals)
        while frontier:  # breadth first: each state's shortest way to an end
            reached = []
            for b in frontier:
                for a in back.get(b, ()):
                    if a not in need:
                        need[a] = need[b] + 1
                        reached.append(a)
            frontier = reached
        twin_state = [-1] * len(ids)
        count = [0] * len(ids)
        for k, new in ids.items():
            s, c = order[k]
            twin_state[new] = twin_ids.get(index.get((s, min(c, min_len)), -1), -1)
            count[new] = c
        return ir.Counted(twin, twin_state, count, max_len - max(need.values()))


# A string pattern under a maxLength of at least this many characters tells the automaton
# which of its states differ only in their count (`ir.Counted`).
COUNTED_MIN_LENGTH = 16


def _graph(n: int, start: int, finals: Iterable[int], edges: list[tuple[int, int, ir.Node | None]]) -> ir.Node:
    """An ir.Graph with states that cannot reach a final (or be reached) removed."""
    return _graph_ids(n, start, finals, edges)[0]


def _graph_ids(n: int, start: int, finals: Iterable[int],
               edges: list[tuple[int, int, ir.Node | None]]) -> tuple[ir.Node, dict[int, int]]:
    """`_graph`, and the new number of each state kept."""
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


# ---------------------------------------------------------------- normalized schemas


class _Obj:
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


class _Arr:
    __slots__ = ("prefix", "rest", "ptr")

    def __init__(self, prefix, rest, ptr):
        self.prefix: list[list] = prefix
        self.rest: list | None = rest  # None = anything
        self.ptr = ptr


def _once_each(items: list) -> list:
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


class _Group:
    """A pending disjunction: `alts` is a list of conjunctions (lists of items)."""

    __slots__ = ("kind", "alts", "ptr", "chain", "exact", "slot")

    def __init__(self, kind, alts, ptr, chain, exact=True, slot=0):
        self.kind = kind
        self.alts = alts
        self.ptr = ptr
        self.chain = chain
        self.exact = exact  # False: the alternatives are a subset of what the keyword allows
        self.slot = slot  # where its branches' object members go in `objs` (textual order)

    def shifted(self, by: int) -> "_Group":
        return _Group(self.kind, self.alts, self.ptr, self.chain, self.exact, self.slot + by)


class _S:
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
        self.arrs: list[_Arr] = []
        self.min_items = 0
        self.max_items: int | None = None
        self.contains: list = []  # (items, min, max, ptr)
        self.unique: str | None = None  # pointer of a uniqueItems: true
        self.objs: list[_Obj] = []
        self.required: dict[str, str] = {}  # name -> pointer
        self.forbidden: set[str] = set()
        self.min_props = 0
        self.max_props: int | None = None
        self.prop_names: list = []  # items
        self.groups: list[_Group] = []
        self.ptr = ptr

    def copy(self) -> "_S":
        s = _S(self.ptr)
        for name in _S.__slots__:
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
                c = _canon(v)
                if c not in seen:
                    seen.add(c)
                    out.append(v)
            self.enum = out
            self.enum_ptr = ptr
        else:
            keep = {_canon(v) for v in values}
            self.enum = [v for v in self.enum if _canon(v) in keep]

    def set_lo(self, value: Fraction, excl: bool, raw) -> None:
        if self.lo is None or value > self.lo[0] or (value == self.lo[0] and excl and not self.lo[1]):
            self.lo = (value, excl, raw)

    def set_hi(self, value: Fraction, excl: bool, raw) -> None:
        if self.hi is None or value < self.hi[0] or (value == self.hi[0] and excl and not self.hi[1]):
            self.hi = (value, excl, raw)

    def add_group(self, g: "_Group") -> None:
        g.slot = len(self.objs)
        self.groups.append(g)

    def merge(self, o: "_S", obj_at: int | None = None) -> None:
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

    def all_kinds(self) -> frozenset:
        return _KINDS if self.types is None else self.types


def _synth(**fields) -> _S:
    s = _S("")
    for k, v in fields.items():
        setattr(s, k, v)
    return s


def _range_nonempty(lo, hi, integral: bool) -> bool:
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


# ---------------------------------------------------------------- $ref resolution


_OLD_DRAFT = re.compile(r"json-schema\.org/draft-0[3-7]/schema")


class _Resolver:
    def __init__(self, root: Any):
        self.root = root
        base = ""
        if isinstance(root, dict):
            rid = root.get("$id", root.get("id"))
            if isinstance(rid, str):
                base = rid
        self.base = urldefrag(base)[0]
        self.ids: dict[str, tuple[Any, str]] = {}
        self.anchors: dict[str, tuple[Any, str]] = {}
        self.bases: dict[int, str] = {}
        # Up to draft-07 a schema with "$ref" is that reference alone: the keywords beside
        # it are ignored (draft 2019-09 made them apply too). Follow the draft the root
        # declares, as validators do; without "$schema" the latest draft applies.
        declared = root.get("$schema") if isinstance(root, dict) else None
        self.ref_hides_siblings = isinstance(declared, str) and bool(_OLD_DRAFT.search(declared))
        self._walk(root, self.base, "", top=True)

    def effective(self, raw: dict) -> dict:
        """The keywords of a schema object that take effect under the root's draft."""
        if self.ref_hides_siblings and "$ref" in raw and len(raw) > 1:
            return {"$ref": raw["$ref"]}
        return raw

    def _walk(self, node: Any, base: str, ptr: str, top: bool = False) -> None:
        stack = [(node, base, ptr, top)]
        while stack:
            node, base, ptr, top = stack.pop()
            if isinstance(node, dict):
                b = base
                nid = node.get("$id")
                if not isinstance(nid, str):
                    nid = node.get("id") if isinstance(node.get("id"), str) and "$id" not in node else None
                if isinstance(nid, str) and top:
                    nid = None  # the root's own $id is the base already
                if isinstance(nid, str):
                    full = urljoin(base, nid) if base else nid
                    doc, frag = urldefrag(full)
                    if doc and not top:
                        self.ids.setdefault(doc, (node, ptr))
                    if doc:
                        b = doc
                    if frag and not frag.startswith("/"):
                        self.anchors.setdefault(b + "#" + frag, (node, ptr))
                for key in ("$anchor", "$dynamicAnchor"):  # a plain $ref to either resolves statically
                    anchor = node.get(key)
                    if isinstance(anchor, str):
                        self.anchors.setdefault(b + "#" + anchor, (node, ptr))
                self.bases[id(node)] = b
                for k, v in node.items():
                    if k in ("enum", "const", "examples", "default", "example"):
                        continue
                    if isinstance(v, (dict, list)):
                        stack.append((v, b, ptr + "/" + _esc(k), False))
            elif isinstance(node, list):
                for i, v in enumerate(node):
                    if isinstance(v, (dict, list)):
                        stack.append((v, base, f"{ptr}/{i}", False))

    @staticmethod
    def _pointer(doc: Any, doc_ptr: str, frag: str):
        cur = doc
        ptr = doc_ptr
        for raw in frag.split("/")[1:]:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(cur, dict) and part in cur:
                cur = cur[part]
            elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
                cur = cur[int(part)]
            else:
                return None
            ptr += "/" + _esc(part)
        return cur, ptr

    def resolve(self, ref: Any, at: dict, ptr: str) -> tuple[Any, str]:
        if not isinstance(ref, str):
            raise SchemaError(f"$ref must be a string, not {type(ref).__name__}", ptr)
        base = self.bases.get(id(at), self.base)
        if ref.startswith("#"):
            doc, frag = base, ref[1:]
        else:
            try:
                full = urljoin(base, ref) if base else ref
            except ValueError:
                full = ref
            doc, frag = urldefrag(full)
        frag = unquote(frag)
        if not doc or doc == self.base:
            resource = (self.root, "")
        elif doc in self.ids:
            resource = self.ids[doc]
        else:
            raise SchemaError(
                f"$ref {ref!r} points outside this schema (remote references are not supported)", ptr
            )
        if frag == "":
            return resource
        if frag.startswith("/"):
            found = self._pointer(resource[0], resource[1], frag)
            if found is None and resource[0] is not self.root:
                found = self._pointer(self.root, "", frag)
            if found is None:
                raise SchemaError(f"$ref {ref!r} does not resolve to anything in this schema", ptr)
            return found
        found = self.anchors.get((doc or self.base) + "#" + frag) or self.anchors.get(self.base + "#" + frag)
        if found is None:
            raise SchemaError(f"$ref {ref!r}: no $anchor or $id named {frag!r} in this schema", ptr)
        return found


# ---------------------------------------------------------------- the compiler


# Any-value IRs by (style, depth key, levels); see _Compiler.any_value. Bounded for a
# server that meets ever new indent widths or whitespace bounds.
_ANY_VALUES: dict = {}
_ANY_VALUES_LOCK = threading.RLock()
_MAX_ANY_VALUES = 4096


class _Compiler:
    def __init__(self, schema: Any, options: JsonOptions, deadline: float | None = None, resolver=None,
                 languages: Languages | None = None):
        self.o = options
        self.languages = languages
        self.style = _Style(options)
        self.root = schema
        self.res = resolver or _Resolver(schema)
        self.deadline = deadline if deadline is not None else time.monotonic() + options.timeout_s
        self.cache: dict = {}
        self.in_progress: dict = {}  # value key -> Ref once the value is met again (recursion)
        self.keep: list = []
        self.body_cache: dict = {}
        self.pattern_nfas: dict = {}
        self.depth = 0
        self._ticks = 0
        self.branches = 0  # alternatives created by expanding anyOf/oneOf/if/... (budget)
        self._twin: _Compiler | None = None

    # -- budget

    def tick(self) -> None:
        self._ticks += 1
        if self._ticks & 63 == 0 and time.monotonic() > self.deadline:
            raise GrammarTooLargeError(
                f"compiling the schema exceeded its time budget ({self.o.timeout_s:g} s); "
                "simplify the schema (deeply nested anyOf/oneOf/allOf multiply)"
            )

    def refuse(self, keyword: str, ptr: str, reason: str = "") -> None:
        """Raise UnsupportedKeywordError unless lenient (then the caller ignores it)."""
        if not self.o.lenient:
            raise UnsupportedKeywordError(keyword, ptr, reason)

    @property
    def twin(self) -> "_Compiler":
        """A compact-style compiler sharing the resolver, for testing single values."""
        if self._twin is None:
            if self.o.style == "compact":
                self._twin = self
            else:
                from dataclasses import replace

                opts = replace(self.o, whitespace="compact", indent=None)
                self._twin = _Compiler(self.root, opts, self.deadline, self.res, self.languages)
        return self._twin

    # -- entry

    def compile_root(self) -> ir.Node:
        node = self.value([(self.root, "", ())], 0)
        size = ir.expanded_size(node, limit=self.o.max_states)
        if size > self.o.max_states:
            raise GrammarTooLargeError(
                f"the schema's grammar would need more than {self.o.max_states:,} states "
                "(tighten large bounds such as maxLength/maxItems, or raise max_states)"
            )
        return node

    def value(self, items: list, depth: int) -> ir.Node:
        """IR of a JSON value satisfying every item of the conjunction, at `depth`.

        A value met again while it is being compiled is a recursive schema: the inner
        use becomes an `ir.Ref` whose target is set once the outer one is built."""
        key = (tuple(id(it[0]) for it in items), self.style.depth_key(depth))
        if self.o.strict_pointers:  # one subschema object may sit both in and out of a strict part
            key += (tuple(self.strict_at(it[1]) for it in items),)
        got = self.cache.get(key)
        if got is not None:
            return got
        ptr = items[0][1] if items else ""
        if key in self.in_progress:
            ref = self.in_progress[key]
            if ref is None:
                ref = self.in_progress[key] = ir.Ref(ptr or "#")
            return ref
        self.keep.append(items)
        self.tick()
        self.depth += 1
        if self.depth > MAX_SCHEMA_LEVELS + 24:
            if self.style.mode == "indent":
                raise UnsupportedKeywordError(
                    "$ref", ptr, "schema nesting too deep: a recursive schema needs whitespace 'default', "
                    "'compact' or 'flexible' (the indentation of 'indent' depends on the depth)")
            raise SchemaError(f"the schema nests values deeper than {MAX_SCHEMA_LEVELS} levels, the limit", ptr)
        self.in_progress[key] = None
        try:
            # A new value starts a new $ref chain: a chain only detects $ref cycles that
            # never descend into a property or item.
            s = self.normalize([(raw, p, ()) for raw, p, _ in items])
            node = self.compile_s(s, depth)
        finally:
            self.depth -= 1
            ref = self.in_progress.pop(key)
        if ref is not None:
            ref.target = node
            node = ref
        self.cache[key] = node
        return node

    # ------------------------------------------------------------ normalization

    def normalize(self, items: list) -> _S:
        s = _S(items[0][1] if items else "")
        for raw, ptr, chain in items:
            self.ingest(s, raw, ptr, chain)
        return s

    def ingest(self, s: _S, raw: Any, ptr: str, chain: tuple) -> None:
        self.tick()
        if isinstance(raw, _S):
            s.merge(raw)
            return
        if raw is True:
            return
        if raw is False:
            s.dead = True
            return
        if not isinstance(raw, dict):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(raw).__name__}", ptr)
        raw = self.res.effective(raw)
        self._check_values(raw, ptr)
        o = self.o
        obj_slot = None  # keeps the members in the schema's textual order (property order)
        draft4_excl_min = raw.get("exclusiveMinimum") is True
        draft4_excl_max = raw.get("exclusiveMaximum") is True
        for key, v in raw.items():
            kp = ptr + "/" + _esc(key)
            if key in _HANDLED:
                pass
            elif key in _ANNOTATIONS or key.startswith("x-"):
                continue
            elif key in _UNSUPPORTED:
                self.refuse(key, kp, _UNSUPPORTED[key])
                continue
            else:
                if o.unknown_keywords == "error":
                    raise UnsupportedKeywordError(key, kp, "unknown keyword (unknown_keywords='error')")
                meant = _misspelled_keyword(key) if o.unknown_keywords == "typos" else None
                if meant is not None:
                    self.refuse(
                        key, kp, f"unknown keyword; did you mean {meant!r}? (unknown_keywords='ignore' accepts it)"
                    )
                continue
            if key == "$ref":
                target, tptr = self.res.resolve(v, raw, kp)
                if tptr in chain:
                    raise SchemaError(
                        f"$ref cycle through '#{tptr}' that never descends into a property or item: "
                        "it defines no value",
                        kp,
                    )
                self.ingest(s, target, tptr, chain + (tptr,))
            elif key == "type":
                s.set_types(self._parse_type(v, kp))
            elif key == "enum":
                s.set_enum(v, kp)
            elif key == "const":
                s.set_enum([v], kp)
            elif key in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
                if isinstance(v, bool) and key.startswith("exclusive"):
                    continue  # draft-04 flag, read together with minimum/maximum
                if isinstance(v, float) and math.isinf(v):
                    if (v > 0) == ("Min" in key or key == "minimum"):
                        s.set_types(_KINDS - {"int", "frac"})  # e.g. minimum: inf
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
            elif key == "minLength":
                s.min_len = max(s.min_len, self._count(v, kp))
            elif key == "maxLength":
                n = self._count(v, kp)
                s.max_len = n if s.max_len is None else min(s.max_len, n)
            elif key == "pattern":
                s.patterns.append((v, kp))
            elif key == "format":
                s.formats.append((v, kp))
            elif key in ("items", "prefixItems", "additionalItems"):
                continue  # below, together
            elif key == "minItems":
                s.min_items = max(s.min_items, self._count(v, kp))
            elif key == "maxItems":
                n = self._count(v, kp)
                s.max_items = n if s.max_items is None else min(s.max_items, n)
            elif key == "uniqueItems":
                if v:
                    s.unique = s.unique or kp
            elif key == "contains":
                self._check_schema(v, kp)
                lo = raw.get("minContains", 1)
                hi = raw.get("maxContains")
                lo = self._count(lo, ptr + "/minContains")
                hi = None if hi is None else self._count(hi, ptr + "/maxContains")
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
            elif key == "minProperties":
                s.min_props = max(s.min_props, self._count(v, kp))
            elif key == "maxProperties":
                n = self._count(v, kp)
                s.max_props = n if s.max_props is None else min(s.max_props, n)
            elif key == "propertyNames":
                self._check_schema(v, kp)
                if v is not True:
                    s.prop_names.append((v, kp, ()))
            elif key in ("dependentRequired", "dependentSchemas", "dependencies"):
                self._dependencies(s, key, v, kp, chain)
            elif key == "allOf":
                for i, sub in enumerate(self._schema_list(v, kp)):
                    self.ingest(s, sub, f"{kp}/{i}", chain)
            elif key in ("anyOf", "oneOf"):
                subs = self._schema_list(v, kp)
                s.add_group(_Group(key, [[(sub, f"{kp}/{i}", chain)] for i, sub in enumerate(subs)], kp, chain))
            elif key == "not":
                self._check_schema(v, kp)
                alts, exact = self.negate(v, kp, chain)
                if alts is None:
                    self.refuse("not", kp, "cannot express the negation of this subschema")
                    continue
                self._add_alternatives(s, "not", alts, kp, chain, exact)
            elif key == "if":
                self._check_schema(v, kp)
                then = raw.get("then", True)
                els = raw.get("else", True)
                self._check_schema(then, ptr + "/then")
                self._check_schema(els, ptr + "/else")
                if then is True and els is True:
                    continue
                negated, exact = self.negate(v, kp, chain)
                if negated is None:
                    self.refuse("if", kp, "cannot express the negation of the 'if' subschema")
                    continue
                alts = [[(v, kp, chain), (then, ptr + "/then", chain)]]
                for na in negated:
                    alts.append([(na, kp, chain), (els, ptr + "/else", chain)])
                s.add_group(_Group("if", alts, kp, chain, exact))
        # local consistency (within one subschema)
        self._local_checks(raw, ptr)
        # arrays
        if "items" in raw or "prefixItems" in raw or ("additionalItems" in raw and isinstance(raw.get("items"), list)):
            prefix: list = []
            rest = None
            items = raw.get("items")
            if "prefixItems" in raw:
                pre = self._schema_list(raw["prefixItems"], ptr + "/prefixItems")
                prefix = [[(x, f"{ptr}/prefixItems/{i}", ())] for i, x in enumerate(pre)]
                if "items" in raw:
                    if isinstance(items, list):
                        raise SchemaError("items must be a schema when prefixItems is present", ptr + "/items")
                    self._check_schema(items, ptr + "/items")
                    rest = [(items, ptr + "/items", ())]
            elif isinstance(items, list):
                prefix = [[(x, f"{ptr}/items/{i}", ())] for i, x in enumerate(items)]
                for i, x in enumerate(items):
                    self._check_schema(x, f"{ptr}/items/{i}")
                if "additionalItems" in raw:
                    self._check_schema(raw["additionalItems"], ptr + "/additionalItems")
                    rest = [(raw["additionalItems"], ptr + "/additionalItems", ())]
            elif "items" in raw:
                self._check_schema(items, ptr + "/items")
                rest = [(items, ptr + "/items", ())]
            s.arrs.append(_Arr(prefix, rest, ptr))
        # objects
        if obj_slot is not None:
            props: dict[str, list] = {}
            pv = raw.get("properties", {})
            if not isinstance(pv, dict):
                raise SchemaError("properties must be an object", ptr + "/properties")
            for name, sub in pv.items():
                sp = f"{ptr}/properties/{_esc(name)}"
                self._check_schema(sub, sp)
                props[name] = [(sub, sp, ())]
            patterns = []
            pp = raw.get("patternProperties", {})
            if not isinstance(pp, dict):
                raise SchemaError("patternProperties must be an object", ptr + "/patternProperties")
            for pat, sub in pp.items():
                sp = f"{ptr}/patternProperties/{_esc(pat)}"
                self._check_schema(sub, sp)
                patterns.append((pat, [(sub, sp, ())], sp))
            additional = None
            if "additionalProperties" in raw:
                ap = raw["additionalProperties"]
                self._check_schema(ap, ptr + "/additionalProperties")
                if ap is not True:
                    additional = [(ap, ptr + "/additionalProperties", ())]
            strict = self.strict_at(ptr)
            silent = self.o.disable_additional_properties and "additionalProperties" not in raw
            s.objs[obj_slot] = _Obj(props, patterns, additional, ptr, strict, silent)

    def _add_alternatives(self, s: _S, kind: str, alts: list, ptr: str, chain: tuple, exact: bool = True) -> None:
        if not alts and exact:
            s.dead = True
        elif len(alts) == 1 and exact:
            s.merge(alts[0])
        else:
            s.add_group(_Group(kind, [[(a, ptr, chain)] for a in alts], ptr, chain, exact))

    def _dependencies(self, s: _S, key: str, v: Any, kp: str, chain: tuple) -> None:
        if not isinstance(v, dict):
            raise SchemaError(f"{key} must be an object", kp)
        for name, dep in v.items():
            dp = f"{kp}/{_esc(name)}"
            absent = _synth(types=frozenset({"object"}), forbidden={name})
            if isinstance(dep, list) and key != "dependentSchemas":
                if not all(isinstance(x, str) for x in dep):
                    raise SchemaError("dependency must be an array of strings", dp)
                need = [n for n in dep if n != name]
                if not need:
                    continue
                present = _synth(required={n: dp for n in need + [name]})
                s.add_group(_Group(key, [[(absent, dp, chain)], [(present, dp, chain)]], dp, chain))
            elif key != "dependentRequired":
                self._check_schema(dep, dp)
                if dep is True:
                    continue
                present = _synth(required={name: dp})
                s.add_group(
                    _Group(key, [[(absent, dp, chain)], [(present, dp, chain), (dep, dp, chain)]], dp, chain)
                )
            else:
                raise SchemaError("dependentRequired values must be arrays of strings", dp)

    def _parse_type(self, v: Any, kp: str) -> frozenset:
        names = v if isinstance(v, list) else [v]
        if isinstance(v, list) and not v:
            raise SchemaError("type must not be an empty array", kp)
        kinds: set = set()
        for t in names:
            if not isinstance(t, str) or t not in _TYPE_KINDS:
                raise SchemaError(
                    f"unknown type {t!r} (expected one of null, boolean, integer, number, string, array, object)",
                    kp,
                )
            kinds |= _TYPE_KINDS[t]
        return frozenset(kinds)

    @staticmethod
    def _count(v: Any, kp: str) -> int:
        if isinstance(v, bool) or not _is_number(v) or v < 0 or (isinstance(v, float) and not v.is_integer()):
            raise SchemaError(f"{kp.rsplit('/', 1)[-1]} must be a non-negative integer, not {v!r}", kp)
        return int(v)

    @staticmethod
    def _check_schema(v: Any, kp: str) -> None:
        if not isinstance(v, (dict, bool)):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(v).__name__}", kp)

    def _schema_list(self, v: Any, kp: str) -> list:
        if not isinstance(v, list) or not v:
            raise SchemaError(f"{kp.rsplit('/', 1)[-1]} must be a non-empty array of schemas", kp)
        for i, x in enumerate(v):
            self._check_schema(x, f"{kp}/{i}")
        return v

    @staticmethod
    def _local_checks(raw: dict, ptr: str) -> None:
        for lo_key, hi_key in (
            ("minLength", "maxLength"),
            ("minItems", "maxItems"),
            ("minProperties", "maxProperties"),
            ("minimum", "maximum"),
            ("minContains", "maxContains"),
        ):
            lo = raw.get(lo_key)
            hi = raw.get(hi_key)
            if _is_number(lo) and _is_number(hi) and lo > hi:
                raise SchemaError(f"{lo_key} ({lo}) is greater than {hi_key} ({hi})", f"{ptr}/{lo_key}")

    def _check_values(self, raw: dict, ptr: str) -> None:
        """The keyword values a subschema must have the type and range of: checked by
        `ingest`, and by `_negate` for a subschema that is only negated (`not`, `if`),
        where a keyword may not matter to the result but is still invalid."""
        for key, v in raw.items():
            kp = ptr + "/" + _esc(key)
            if key in _BOUNDS and not (isinstance(v, bool) and key.startswith("exclusive")):
                if not _is_number(v) or (isinstance(v, float) and math.isnan(v)):
                    raise SchemaError(f"{key} must be a number", kp)
            elif key == "multipleOf" and (not _is_number(v) or not v > 0 or (isinstance(v, float) and not math.isfinite(v))):
                raise SchemaError("multipleOf must be a number > 0", kp)
            elif key in _COUNTS:
                self._count(v, kp)
            elif key in ("pattern", "format") and not isinstance(v, str):
                raise SchemaError(f"{key} must be a string", kp)
            elif key == "type":
                self._parse_type(v, kp)
            elif key == "enum" and (not isinstance(v, list) or not v):
                raise SchemaError("enum must be a non-empty array", kp)
            elif key == "uniqueItems" and not isinstance(v, bool):
                raise SchemaError("uniqueItems must be a boolean", kp)

    # ------------------------------------------------------------ negation

    def negate(self, raw: Any, ptr: str, chain: tuple) -> tuple[list[_S] | None, bool]:
        """(alternatives, exact): normalized conjunctions whose union is a SUBSET of the
        complement of `raw` -- all of it (exact) where every keyword can be negated, else
        the part the negatable keywords give (sound: fewer values, never more).
        Alternatives None when nothing useful can be said."""
        alts, exact = self._negate(raw, ptr, chain)
        if alts is None or (not exact and not alts):
            return None, False
        return alts, exact

    def _negate(self, raw: Any, ptr: str, chain: tuple) -> tuple[list[_S] | None, bool]:
        self.tick()
        if raw is True:
            return [], True
        if raw is False:
            return [_S(ptr)], True
        if not isinstance(raw, dict):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(raw).__name__}", ptr)
        raw = self.res.effective(raw)
        self._check_values(raw, ptr)
        self._local_checks(raw, ptr)
        alts: list[_S] = []
        exact = True
        constrained = False

        def add(sub: tuple[list[_S] | None, bool]) -> None:
            nonlocal exact
            got, ok = sub
            if got is None:
                exact = False
            else:
                alts.extend(got)
                exact = exact and ok

        if "$ref" in raw:
            constrained = True
            target, tptr = self.res.resolve(raw["$ref"], raw, ptr + "/$ref")
            if tptr in chain:
                raise UnsupportedKeywordError(
                    "$ref", ptr + "/$ref", f"recursive reference to '#{tptr}' under 'not' is not supported"
                )
            add(self._negate(target, tptr, chain + (tptr,)))
        excl_min = raw.get("exclusiveMinimum") is True
        excl_max = raw.get("exclusiveMaximum") is True
        num = frozenset({"int", "frac"})
        for key, v in raw.items():
            kp = ptr + "/" + _esc(key)
            if key == "$ref" or key not in _HANDLED:
                if key in _UNSUPPORTED and not self.o.lenient:
                    constrained = True
                    exact = False
                continue
            constrained = True
            if key == "type":
                alts.append(_synth(types=_KINDS - self._parse_type(v, kp)))
            elif key in ("enum", "const"):
                alts.append(_synth(not_values=[v] if key == "const" else list(v)))
            elif key == "required":
                if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                    raise SchemaError("required must be an array of strings", kp)
                for name in dict.fromkeys(v):
                    alts.append(_synth(types=frozenset({"object"}), forbidden={name}))
            elif key == "properties":
                if not isinstance(v, dict):
                    raise SchemaError("properties must be an object", kp)
                for name, sub in v.items():
                    sp = f"{kp}/{_esc(name)}"
                    got, ok = self._negate(sub, sp, chain)
                    exact = exact and ok and got is not None
                    for a in got or []:
                        alts.append(
                            _synth(
                                types=frozenset({"object"}),
                                required={name: sp},
                                objs=[_Obj({name: [(a, sp, chain)]}, [], None, sp)],
                            )
                        )
            elif key in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
                if isinstance(v, bool):
                    continue
                if not _is_number(v) or (isinstance(v, float) and not math.isfinite(v)):
                    exact = False
                    continue
                f = Fraction(v)
                if key == "minimum":  # not (x >= m)  ->  x < m   (draft-04: not (x > m) -> x <= m)
                    alts.append(_synth(types=num, hi=(f, not excl_min, v)))
                elif key == "exclusiveMinimum":
                    alts.append(_synth(types=num, hi=(f, False, v)))
                elif key == "maximum":
                    alts.append(_synth(types=num, lo=(f, not excl_max, v)))
                else:
                    alts.append(_synth(types=num, lo=(f, False, v)))
            elif key in ("minLength", "minItems", "minProperties"):
                n = self._count(v, kp)
                if n > 0:
                    t, field = {
                        "minLength": ("string", "max_len"),
                        "minItems": ("array", "max_items"),
                        "minProperties": ("object", "max_props"),
                    }[key]
                    alts.append(_synth(types=frozenset({t}), **{field: n - 1}))
            elif key in ("maxLength", "maxItems", "maxProperties"):
                n = self._count(v, kp)
                t, field = {
                    "maxLength": ("string", "min_len"),
                    "maxItems": ("array", "min_items"),
                    "maxProperties": ("object", "min_props"),
                }[key]
                alts.append(_synth(types=frozenset({t}), **{field: n + 1}))
            elif key == "allOf":
                for i, sub in enumerate(self._schema_list(v, kp)):
                    add(self._negate(sub, f"{kp}/{i}", chain))
            elif key == "anyOf":
                acc = [_S(kp)]
                ok_all = True
                for i, sub in enumerate(self._schema_list(v, kp)):
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
                self._check_schema(v, kp)
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
                            alts.append(_synth(types=frozenset({"object"}), required={name: kp}, forbidden={d}))
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

    # ------------------------------------------------------------ emptiness / disjointness

    def conj_for(self, s: _S, name: str) -> list:
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
        return _once_each(out) if len(out) > 1 else out

    def strict_at(self, ptr: str) -> bool:
        """Whether the subschema at `ptr` is under one of the strict pointers."""
        return any(ptr == p or ptr.startswith(p + "/") for p in self.o.strict_pointers)

    def strict_for(self, s: _S) -> bool:
        """Whether strict mode holds for the object `s` (everywhere, or by pointer)."""
        return self.o.strict or any(x.strict for x in s.objs)

    def kind_possible(self, s: _S, k: str, level: int) -> bool:
        if k in ("null", "boolean"):
            vals = [None] if k == "null" else [True, False]
            excl = {_canon(v) for v in s.not_values}
            return any(_canon(v) not in excl for v in vals)
        if k in ("int", "frac"):
            return _range_nonempty(s.lo, s.hi, k == "int")
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
                    sub = self.normalize(self.conj_for(s, r))
                    if self.is_empty(sub, level + 1):
                        return False
            return True
        return True

    def effective_kinds(self, s: _S, level: int = 0) -> frozenset:
        if s.dead:
            return frozenset()
        kinds = s.all_kinds()
        if s.enum is not None:
            excl = {_canon(v) for v in s.not_values}
            kinds = kinds & frozenset(_kind_of(v) for v in s.enum if _canon(v) not in excl)
        return frozenset(k for k in kinds if self.kind_possible(s, k, level))

    def is_empty(self, s: _S, level: int = 0) -> bool:
        return not self.effective_kinds(s, level)

    def definitely_rejects(self, s: _S, v: Any, level: int = 0) -> bool:
        """True only if `s` certainly rejects the value (cheap, conservative)."""
        k = _kind_of(v)
        if k not in s.all_kinds():
            return True
        c = _canon(v)
        if s.enum is not None and c not in {_canon(x) for x in s.enum}:
            return True
        if c in {_canon(x) for x in s.not_values}:
            return True
        if k in ("int", "frac"):
            f = Fraction(v)
            if s.lo is not None and (f < s.lo[0] or (f == s.lo[0] and s.lo[1])):
                return True
            if s.hi is not None and (f > s.hi[0] or (f == s.hi[0] and s.hi[1])):
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
                    if conj and self.definitely_rejects(self.normalize(conj), x, level + 1):
                        return True
        return False

    def disjoint(self, a: _S, b: _S, level: int = 0) -> bool:
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
                if _range_nonempty(lo, hi, k == "int"):
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

    def _objects_disjoint(self, a: _S, b: _S, level: int) -> bool:
        if level > 3:
            return False
        for x, y in ((a, b), (b, a)):
            for r in x.required:
                if r in y.forbidden:
                    return True
                cy = self.conj_for(y, r)
                if not cy:
                    continue
                sy = self._hull(self.normalize(cy))
                if self.is_empty(sy, 1):
                    return True
                sx = self._hull(self.normalize(self.conj_for(x, r)))
                if self.disjoint(sx, sy, level + 1):
                    return True
        return False

    # ------------------------------------------------------------ patterns

    def pattern_nfa(self, pattern: str, ptr: str) -> _CharNFA | None:
        """Char NFA of a pattern (search semantics); None if unusable (lenient only)."""
        got = self.pattern_nfas.get(pattern)
        if got is None:
            try:
                got = _CharNFA.from_pattern(pattern)
            except RegexError as e:
                self._bad_pattern(pattern, ptr, e)
                got = False  # lenient: unusable
            self.pattern_nfas[pattern] = got
        return got or None

    def _bad_pattern(self, pattern: str, ptr: str, e: Exception) -> None:
        import re

        keyword = "pattern"
        for k in ("patternProperties", "format", "propertyNames"):
            if f"/{k}" in ptr:
                keyword = k
        try:
            re.compile(pattern)
        except re.error:
            raise SchemaError(f"invalid regular expression {pattern!r}: {e}", ptr) from None
        self.refuse(keyword, ptr, f"regular expression not supported: {e}")

    def pattern_matches(self, pattern: str, name: str, ptr: str) -> bool:
        """Whether a patternProperties regex matches `name` (unknown -> True: apply it)."""
        nfa = self.pattern_nfa(pattern, ptr)
        return True if nfa is None else nfa.matches(name)

    # ------------------------------------------------------------ compile a normalized schema

    def compile_s(self, s: _S, depth: int) -> ir.Node:
        self.tick()
        if self.is_empty(s):
            return ir.NOTHING
        if s.groups:
            return self._expand(s, depth)
        if s.is_unconstrained():
            return self.any_value(depth, self.any_depth)
        if s.enum is not None:
            return self._enum(s, depth)
        kinds = self.effective_kinds(s)
        excl = {_canon(v) for v in s.not_values}
        parts: list[ir.Node] = []
        if "null" in kinds and _canon(None) not in excl:
            parts.append(ir.lit("null"))
        if "boolean" in kinds:
            for v, t in ((True, "true"), (False, "false")):
                if _canon(v) not in excl:
                    parts.append(ir.lit(t))
        if "int" in kinds or "frac" in kinds:
            parts.append(self._number(s, kinds))
        if "string" in kinds:
            parts.append(self._string(s))
        if "array" in kinds:
            parts.append(self._array(s, depth))
        if "object" in kinds:
            parts.append(self._object(s, depth))
        return ir.alt(*parts)

    def _expand(self, s: _S, depth: int) -> ir.Node:
        g = s.groups[0]
        base = s.copy()
        base.groups = s.groups[1:]
        branches: list[_S] = []
        if g.kind == "oneOf":
            branches = self._one_of(base, g)
        else:
            for alt_items in g.alts:
                b = base.copy()
                b.merge(self.normalize(alt_items), obj_at=g.slot)
                if not self.is_empty(b):
                    branches.append(b)
        if not g.exact and not branches and not self.is_empty(base) and not self.o.lenient:
            raise UnsupportedKeywordError(
                g.kind, g.ptr, "its subschema can only be negated in part, and that part excludes everything here"
            )
        self.branches += len(branches)
        if self.branches > _MAX_BRANCHES:
            raise GrammarTooLargeError(
                f"the schema's anyOf/oneOf/if/dependencies combinations expand to over {_MAX_BRANCHES:,} alternatives"
            )
        return ir.alt(*(self.compile_s(b, depth) for b in branches))

    def _one_of(self, base: _S, g: _Group) -> list[_S]:
        """Branch i is accepted only where no other branch can match: if branches i and
        j are not provably disjoint, branch i is strengthened (a property whose values
        differ between i and j becomes required in i), or failing that, intersected
        with the negation of branch j (a subset of it where it cannot be exact)."""
        plain: list[_S] = []
        for alt_items in g.alts:
            b = base.copy()
            b.groups = []
            for raw, ptr, chain in alt_items:
                self.ingest(b, raw, ptr, chain)
            plain.append(self._hull(b))
        live = [i for i, b in enumerate(plain) if not self.is_empty(b)]
        out: list[_S] = []
        for i in live:
            b = base.copy()
            b.merge(self.normalize(g.alts[i]), obj_at=g.slot)
            mine = plain[i]
            product = 1
            for j in live:
                if j == i or self.disjoint(mine, plain[j]):
                    continue
                strengthened = self._discriminate(mine, plain[j])
                if strengthened is not None:
                    how, name = strengthened
                    mine = mine.copy()
                    for t in (mine, b):
                        if how == "required":
                            t.required.setdefault(name, g.ptr)
                        else:
                            t.min_items = max(t.min_items, 1)
                    continue
                (raw, ptr, chain), = g.alts[j]
                neg, exact = self.negate(raw, ptr, chain)
                if neg is not None and not exact:
                    # a partial negation must leave something of branch i, else it says nothing
                    if all(self.is_empty(_merged(mine, a)) for a in neg):
                        neg = None
                if neg is None:
                    if self.o.lenient:
                        continue
                    raise UnsupportedKeywordError(
                        "oneOf",
                        g.ptr,
                        f"cannot prove branches {i} and {j} mutually exclusive (nor negate branch {j}); "
                        "use anyOf if several branches may match",
                    )
                if product * max(len(neg), 1) > 256:
                    neg = neg[:1]  # a subset of the negation: sound, keeps the size bounded
                product *= max(len(neg), 1)
                self._add_alternatives(b, "oneOf-not", neg, g.ptr, g.chain)  # checked above
            if not self.is_empty(b):
                out.append(b)
        return out

    def _discriminate(self, a: _S, b: _S):
        """A strengthening of `a` that makes it disjoint from `b`: a property to
        require ("required", name), or ("nonempty", None) for arrays whose element
        schemas are disjoint. None if no cheap one is found."""
        kinds = self.effective_kinds(a)
        if kinds == frozenset({"array"}) and self.effective_kinds(b) & kinds:
            t = a.copy()
            t.min_items = max(t.min_items, 1)
            e1 = self.normalize(self._elem_items(a, 0))
            e2 = self.normalize(self._elem_items(b, 0))
            if not self.is_empty(t) and self.disjoint(self._hull(e1), self._hull(e2)):
                return ("nonempty", None)
        if "object" not in kinds:
            return None
        names: list[str] = []
        for x in a.objs + b.objs:
            for n in x.props:
                if n not in names and n not in a.required and n not in a.forbidden:
                    names.append(n)
        for n in names[:64]:
            t = a.copy()
            t.required[n] = ""
            if not self.is_empty(t) and self.disjoint(t, b):
                return ("required", n)
        return None

    def _hull(self, s: _S, level: int = 0) -> _S:
        """`s` with its kinds narrowed to those its pending groups allow (every value
        satisfies one alternative of each group): a sound summary for disjointness."""
        if not s.groups or level > 2:
            return s
        t = s.copy()
        t.groups = []
        for g in s.groups:
            if not g.exact:
                continue  # its alternatives are a subset of the keyword's values: no summary
            kinds: frozenset = frozenset()
            for alt_items in g.alts:
                kinds |= self.effective_kinds(self._hull(self.normalize(alt_items), level + 1))
            t.set_types(kinds)
        return t

    # ------------------------------------------------------------ enum / const

    def _enum(self, s: _S, depth: int) -> ir.Node:
        kinds = s.all_kinds()
        excl = {_canon(v) for v in s.not_values}
        parts = []
        for v in s.enum:
            if _kind_of(v) not in kinds or _canon(v) in excl:
                continue
            if isinstance(v, float) and not math.isfinite(v):
                continue
            if not self.value_ok(s, v):
                continue
            parts.append(self.literal(v, depth))
        return ir.alt(*parts)

    def value_ok(self, s: _S, v: Any) -> bool:
        """Whether value v (of an allowed kind, not excluded) meets s's other keywords."""
        k = _kind_of(v)
        if k in ("int", "frac"):
            f = Fraction(v)
            if s.lo is not None and (f < s.lo[0] or (f == s.lo[0] and s.lo[1])):
                return False
            if s.hi is not None and (f > s.hi[0] or (f == s.hi[0] and s.hi[1])):
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
                pat = self._format_regex(name, ptr)
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
        node = self.twin.compile_s(t, 0)
        text = json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode()
        return _ir_match(node, text)

    def literal(self, v: Any, depth: int) -> ir.Node:
        """Every spelling of value v the style allows (canonical key order)."""
        if isinstance(v, list):
            return self.style.container(depth, "[", "]", [self.literal(x, depth + 1) for x in v])
        if isinstance(v, dict):
            colon = self.style.colon(depth)
            members = [ir.seq(self.key_literal(k), colon, self.literal(x, depth + 1)) for k, x in v.items()]
            if self.o.property_order == "any" and len(members) > 1:
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
        spellings = sorted({json.dumps(name), json.dumps(name, ensure_ascii=False)})
        return ir.alt(*(ir.lit(t) for t in spellings))

    # ------------------------------------------------------------ any value

    @property
    def any_depth(self) -> int | None:
        """Nesting bound of "any value": None (recursive, unbounded) where the style allows."""
        if self.o.max_any_depth is None and self.style.mode == "indent":
            return 3
        return self.o.max_any_depth

    def any_value(self, depth: int, levels: int | None) -> ir.Node:
        """Any JSON value: `levels` more levels of nesting, or None for a recursive rule
        (one rule serves every depth from where the style stops depending on it).

        Schema-independent, so built once per process (`_ANY_VALUES`): the same objects
        in every grammar are also flattened once (`automata.flat.SHARED`)."""
        st = self.style
        key = (st.mode, st.indent, st.max_ws, st.depth_key(depth), levels)
        got = _ANY_VALUES.get(key)
        if got is not None:
            return got
        with _ANY_VALUES_LOCK:  # one builder at a time; a value enters the table complete
            got = _ANY_VALUES.get(key)
            if got is None:
                if len(_ANY_VALUES) >= _MAX_ANY_VALUES:
                    _ANY_VALUES.clear()
                got = self._build_any_value(key, depth, levels)
            return got

    def _build_any_value(self, key: tuple, depth: int, levels: int | None) -> ir.Node:
        st = self.style
        string = self.any_string()
        parts = [ir.lit("null"), ir.lit("true"), ir.lit("false"), _numbers().number_ir(None, None, None, None), string]
        parts += [st.empty(depth, "[", "]"), st.empty(depth, "{", "}")]
        ref = None
        if levels is None and st.depth_key(depth + 1) == key[3]:
            inner = ref = ir.Ref("any JSON value")  # nesting deeper is this same rule
        elif levels is None:
            inner = self.any_value(depth + 1, None)
        elif levels > 0:
            inner = self.any_value(depth + 1, levels - 1)
        if levels is None or levels > 0:
            entry = ir.seq(string, st.colon(depth), inner)
            parts += [self.nonempty_list(depth, inner, "[", "]"), self.nonempty_list(depth, entry, "{", "}")]
        node = ir.alt(*parts)
        if ref is not None:
            ref.target = node
            node = ref
        _ANY_VALUES[key] = node
        return node

    def nonempty_list(self, depth: int, elem: ir.Node, opener: str, closer: str) -> ir.Node:
        """`[e, e, ...]` (one or more), with ONE copy of `elem` (a Graph loop), so nested
        containers do not double in size per level."""
        st = self.style
        edges = [
            (0, 1, st.open(depth)),
            (2, 1, st.sep(depth)),
            (1, 2, elem),
            (2, 3, ir.seq(st.close(depth), ir.lit(closer))),
        ]
        return ir.seq(ir.lit(opener), _graph(4, 0, [3], edges))

    def any_string(self) -> ir.Node:
        return ir.seq(ir.lit('"'), _free_string_rest())

    # ------------------------------------------------------------ numbers

    def _int_bounds(self, s: _S) -> tuple[int | None, int | None]:
        lo = hi = None
        if s.lo is not None:
            lo = math.floor(s.lo[0]) + 1 if s.lo[1] else math.ceil(s.lo[0])
        if s.hi is not None:
            hi = math.ceil(s.hi[0]) - 1 if s.hi[1] else math.floor(s.hi[0])
        return lo, hi

    def _safe_int_bounds(self, lo: int | None, hi: int | None) -> tuple[int | None, int | None]:
        """With safe_integers, a side the schema leaves open gets I-JSON's bound."""
        if self.o.safe_integers:
            if lo is None and (hi is None or hi >= -SAFE_INTEGER):
                lo = -SAFE_INTEGER
            if hi is None and lo <= SAFE_INTEGER:
                hi = SAFE_INTEGER
        return lo, hi

    def _number(self, s: _S, kinds: frozenset) -> ir.Node:
        N = _numbers()
        holes = sorted({Fraction(v) for v in s.not_values if _is_number(v) and math.isfinite(v)})
        if s.mults:
            if "int" not in kinds:
                return ir.NOTHING
            step = _common_multiple([_decimal_fraction(raw) for _, raw, _ in s.mults])
            if step.denominator != 1 and "frac" in kinds:
                return self._decimal_multiples(s, step, holes)
            # integers only: an integer multiple of p/q (in lowest terms) is one of p
            lo, hi = self._int_bounds(s)
            if step.numerator > 1:
                return self._int_multiples(lo, hi, step.numerator, [int(h) for h in holes if h.denominator == 1], s)
            return self._int_ranges(*self._safe_int_bounds(lo, hi), holes)
        if "frac" not in kinds:
            return self._int_ranges(*self._safe_int_bounds(*self._int_bounds(s)), holes)
        if "int" not in kinds:
            # "a number that is not an integer": plain decimals with a non-zero fraction
            # and at most 15 significant digits (so no reader rounds them to an integer);
            # only without bounds or exclusions (documented over-constraint otherwise)
            if s.lo is None and s.hi is None and not holes:
                return _fraction_ir()
            return ir.NOTHING
        return self._number_ranges(s, holes)

    def _decimal_multiples(self, s: _S, step: Fraction, holes: list) -> ir.Node:
        """Numbers within s's bounds (holes excluded) that are exact multiples of a
        non-integer step, written without exponent (`numbers.decimal_multiples_ir`)."""
        if self.languages is None:  # schema_to_ir called without automata (a grammar-only caller)
            self.refuse("multipleOf", s.mults[0][2], f"multipleOf {step} needs an automaton (languages=)")
            return self._number_ranges(s, holes)
        within = self._number_ranges(s, holes)
        got = _numbers().decimal_multiples_ir(step, within, self.languages.byte_dfa, max_states=_MAX_MOD_STATES)
        if got is None:
            self.refuse("multipleOf", s.mults[0][2], f"multipleOf {step} needs too large an automaton")
            return self._number_ranges(s, holes)  # lenient: the bounds alone
        return got

    def _number_ranges(self, s: _S, holes: list) -> ir.Node:
        """All number texts within s's bounds, minus the excluded values `holes`."""
        N = _numbers()
        # all numbers in (lo, hi) minus holes: split into intervals at the holes
        intervals = []
        lo = s.lo
        for h in holes:
            if lo is not None and (h < lo[0] or (h == lo[0] and lo[1])):
                continue
            if s.hi is not None and (h > s.hi[0] or (h == s.hi[0] and s.hi[1])):
                continue
            intervals.append((lo, (h, True, _num_raw(h))))
            lo = (h, True, _num_raw(h))
        intervals.append((lo, s.hi))
        parts = []
        for a, b in intervals:
            if not _range_nonempty(a, b, False):
                continue
            parts.append(
                N.number_ir(
                    None if a is None or a[1] else a[2],
                    None if b is None or b[1] else b[2],
                    a[2] if a is not None and a[1] else None,
                    b[2] if b is not None and b[1] else None,
                )
            )
        return ir.alt(*parts)

    def _int_ranges(self, lo: int | None, hi: int | None, holes) -> ir.Node:
        N = _numbers()
        cuts = sorted(int(h) for h in holes if h.denominator == 1)
        parts = []
        a = lo
        for h in cuts:
            if (a is not None and h < a) or (hi is not None and h > hi):
                continue
            if a is None or a <= h - 1:
                parts.append(N.integer_ir(a, h - 1, None, None))
            a = h + 1
        if a is None or hi is None or a <= hi:
            parts.append(N.integer_ir(a, hi, None, None))
        return ir.alt(*parts)

    def _int_multiples(self, lo, hi, m: int, holes: list[int], s: _S) -> ir.Node:
        """Integers in [lo, hi] that are multiples of m (holes excluded)."""
        parts = []
        # non-negative part
        a = 0 if lo is None else max(lo, 0)
        if hi is None or hi >= a:
            parts.append(self._nonneg_multiples(a, hi, m, holes, s))
        # negative part: mirror
        if lo is None or lo < 0:
            nb = None if lo is None else -lo
            na = 1 if hi is None or hi >= 0 else -hi
            if nb is None or nb >= na:
                parts.append(ir.seq(ir.lit("-"), self._nonneg_multiples(na, nb, m, [-h for h in holes], s)))
        return ir.alt(*parts)

    def _nonneg_multiples(self, a: int, b: int | None, m: int, holes: list[int], s: _S) -> ir.Node:
        first = -(-a // m) * m
        if b is not None:
            count = 0 if b < first else (b - first) // m + 1
            if count <= _MAX_ENUMERATED_MULTIPLES:
                return ir.alt(*(ir.lit(str(x)) for x in range(first, b + 1, m) if x not in holes))
            self.refuse("multipleOf", s.mults[0][2], "multipleOf with a wide bounded range is not supported")
            return _numbers().integer_ir(a, b, None, None)
        if any(h >= a for h in holes):
            return ir.NOTHING  # documented over-constraint
        digits = len(str(a)) if a > 0 else 1
        top = 10**digits  # numbers with more digits than `a` are all >= a
        small = [x for x in range(first, top, m)] if a > 0 else []
        if len(small) > _MAX_ENUMERATED_MULTIPLES:
            self.refuse("multipleOf", s.mults[0][2], "multipleOf with a large minimum is not supported")
            return _numbers().integer_ir(a, None, None, None)
        if m * (digits + 1) > _MAX_MOD_STATES:
            self.refuse("multipleOf", s.mults[0][2], f"multipleOf {m} needs too large an automaton")
            return _numbers().integer_ir(a, None, None, None)
        if a > 0:
            return ir.alt(*(ir.lit(str(x)) for x in small), _mod_dfa(m, digits + 1))
        return ir.alt(ir.lit("0"), _mod_dfa(m, 1))

    # ------------------------------------------------------------ strings

    def _format_regex(self, name: str, ptr: str) -> str | None:
        pat = _format_pattern(name)
        if pat is None:
            if self.o.unknown_formats == "error":
                self.refuse("format", ptr, f"unknown format {name!r} (pass unknown_formats='ignore' to ignore it)")
            return None
        return "^(?:" + pat + ")$"

    def _string(self, s: _S) -> ir.Node:
        pats: list[tuple[str, str]] = []
        for p, ptr in s.patterns:
            if (p, ptr) not in pats and all(p != q for q, _ in pats):
                pats.append((p, ptr))
        for name, ptr in s.formats:
            rx = self._format_regex(name, ptr)
            if rx is not None and all(rx != q for q, _ in pats):
                pats.append((rx, ptr))
        excluded = sorted({v for v in s.not_values if isinstance(v, str)})
        key = (s.min_len, s.max_len, tuple(p for p, _ in pats), tuple(excluded))
        got = self.body_cache.get(key)
        if got is None:
            got = self._string_body(s.min_len, s.max_len, pats, excluded)
            self.body_cache[key] = got
        if got is _cs().json_body_ir():
            return ir.seq(ir.lit('"'), _free_string_rest())
        return ir.seq(ir.lit('"'), got, ir.lit('"'))

    def _string_body(self, lo: int, hi: int | None, pats: list, excluded: list[str]) -> ir.Node:
        C = _cs()
        if hi is not None and lo > hi:
            return ir.NOTHING
        nfas = []
        for p, ptr in pats:
            nfa = self.pattern_nfa(p, ptr)
            if nfa is not None:
                nfas.append((p, ptr, nfa))
        # excluded strings matter only if they are otherwise allowed
        excluded = [
            x for x in excluded if lo <= len(x) and (hi is None or len(x) <= hi) and all(n.matches(x) for _, _, n in nfas)
        ]
        if not nfas:
            if excluded:
                return _string_except(excluded) if lo == 0 and hi is None else _body_excluding(excluded, lo, hi)
            if lo == 0 and hi is None:
                return _cs().json_body_ir()
            body = ir.rep(C.json_char_ir(C.ANY_CHAR), lo, hi)
            if isinstance(body, ir.Repeat) and hi is not None and hi >= COUNTED_MIN_LENGTH:
                body.twin = ir.Repeat(body.item, body.min, None)  # (a character is at least a byte)
            return body
        if excluded:
            return ir.NOTHING  # documented over-constraint (not/enum exclusions next to a pattern)
        if len(nfas) == 1:
            p, ptr, nfa = nfas[0]
            plo, phi = nfa.length_range()
            if plo >= lo and (hi is None or (phi is not None and phi <= hi)):
                try:
                    return _rx().regex_ir(p, encoding="json", search=True)
                except RegexError:
                    pass  # e.g. an anchor inside the pattern: use the NFA below
            combined = nfa
        else:
            combined = nfas[0][2]
            for _, _, n in nfas[1:]:
                combined = combined.intersect(n)
        cap = hi if hi is not None else lo
        if combined.n * (cap + 1) <= _PRODUCT_BUDGET or hi is None:
            return combined.to_ir(lo, hi, max_states=self.o.max_states, tick=self.tick)
        # a long maxLength over a big pattern: bound the pattern's repetitions so that it
        # cannot exceed maxLength (a documented subset), then count only up to minLength
        capped = self._capped(pats, hi)
        if capped is None:
            raise GrammarTooLargeError(
                f"pattern/format with maxLength {hi} needs too many states ({combined.n * (cap + 1):,})"
            )
        return capped.to_ir(lo, None, max_states=self.o.max_states, tick=self.tick)

    def _capped(self, pats: list, hi: int) -> _CharNFA | None:
        """Patterns with every repetition capped at k (the largest k that keeps every
        match within `hi` characters, estimated on the regex AST), intersected."""
        rx = _rx()
        asts = [rx.parse_regex(p) for p, _ in pats]

        def longest(k: int) -> int:
            return min(_ast_maxlen(a, k, rx) for a in asts)

        a, b = 0, hi
        if longest(0) > hi:
            return None
        while a < b:  # largest k with longest(k) <= hi
            k = (a + b + 1) // 2
            if longest(k) <= hi:
                a = k
            else:
                b = k - 1
        k = a
        while True:
            self.tick()
            try:
                nfa = None
                for p, _ in pats:
                    n = _CharNFA.from_pattern(p, cap=k, budget=_PRODUCT_BUDGET)
                    nfa = n if nfa is None else nfa.intersect(n)
                _, mx = nfa.length_range()
                if mx is not None and mx <= hi:
                    return nfa
            except GrammarTooLargeError:
                pass
            if k == 0:
                return None
            k //= 2

    # ------------------------------------------------------------ arrays

    def _elem_items(self, s: _S, i: int | None) -> list:
        """Items constraining element i (None: an element past every prefix)."""
        out: list = []
        for a in s.arrs:
            if i is not None and i < len(a.prefix):
                out += a.prefix[i]
            elif a.rest is not None:
                out += a.rest
        return out

    def _array(self, s: _S, depth: int) -> ir.Node:
        st = self.style
        lo, hi = s.min_items, s.max_items
        if hi is not None and lo > hi:
            return ir.NOTHING
        k = max((len(a.prefix) for a in s.arrs), default=0)
        elems = [self.value(self._elem_items(s, i), depth + 1) for i in range(k)]
        rest = self.value(self._elem_items(s, None), depth + 1)
        # an impossible element caps the length
        for i, e in enumerate(elems):
            if ir.is_nothing(e):
                hi = i if hi is None else min(hi, i)
                break
        if ir.is_nothing(rest):
            hi = k if hi is None else min(hi, k)
        if hi is not None and lo > hi:
            return ir.NOTHING
        if s.contains:
            return self._array_contains(s, depth, elems, rest, lo, hi)
        if s.unique and (hi is None or hi > 1):
            return self._array_unique(s, depth, elems, rest, lo, hi)
        sep = st.sep(depth)

        def elem(i: int) -> ir.Node:
            return elems[i] if i < k else rest

        def tail(i: int) -> ir.Node:  # elements i.. each preceded by a separator
            if hi is not None and i >= hi:
                return ir.EMPTY
            if i >= k:
                return ir.rep(ir.seq(sep, rest), max(0, lo - i), None if hi is None else hi - i)
            nxt = ir.seq(sep, elem(i), tail(i + 1))
            return ir.alt(ir.EMPTY, nxt) if i >= lo else nxt

        parts = []
        if lo == 0:
            parts.append(st.empty(depth, "[", "]"))
        if k == 0 and hi is None and lo <= 1:
            parts.append(self.nonempty_list(depth, rest, "[", "]"))
        elif hi is None or hi > 0:
            parts.append(ir.seq(ir.lit("["), st.open(depth), elem(0), tail(1), st.close(depth), ir.lit("]")))
        return ir.alt(*parts)

    def _array_contains(self, s, depth, elems, rest, lo, hi) -> ir.Node:
        """Arrays with `contains`: a Graph over (index, matches so far). Elements either
        satisfy the contains schema (counted) or not. Without maxContains a "plain"
        element may match or not (counting only proven matches keeps minContains sound);
        with maxContains, plain elements must satisfy the NEGATION of the contains schema
        (exact, or a subset of it), so the count is exact."""
        st = self.style
        if len(s.contains) > 1:
            self.refuse("contains", s.contains[1][3], "several 'contains' on one array are not supported")
        items, cmin, cmax, cptr = s.contains[0]
        if cmax is not None and hi is not None and cmax >= hi:
            cmax = None  # cannot be exceeded
        if cmax is not None and cmin > cmax:
            return ir.NOTHING
        if s.unique and (hi is None or hi > 1):
            self.refuse("uniqueItems", s.unique, "uniqueItems together with contains is not supported")
        k = len(elems)
        hits = [self.value(self._elem_items(s, i) + items, depth + 1) for i in range(k)]
        rest_hit = self.value(self._elem_items(s, None) + items, depth + 1)
        if cmax is not None:
            (raw, ptr, chain), = items
            neg, _exact = self.negate(raw, ptr, chain)
            if neg is None:
                self.refuse("maxContains", cptr, "the contains schema cannot be negated")
                cmax = None
            else:
                def misses(i: int | None) -> ir.Node:
                    base = self._elem_items(s, i)
                    return ir.alt(*(self.value(base + [(a, cptr, chain)], depth + 1) for a in neg))

                elems = [misses(i) for i in range(k)]
                rest = misses(None)
        top = cmin if cmax is None else cmax  # count states 0..top (saturating without max)
        cap = max(k, lo, 1) if hi is None else hi
        if (cap + 1) * (top + 1) > 100_000:
            raise GrammarTooLargeError("array bounds with contains need too many states")
        ids: dict = {}

        def sid(key) -> int:
            if key not in ids:
                ids[key] = len(ids)
            return ids[key]

        edges = []
        final = sid("end")
        for i in range(cap + 1):
            for c in range(top + 1):
                src = sid((i, c))
                if i >= lo and c >= cmin:
                    edges.append((src, final, st.empty(depth, "", "]") if i == 0 else ir.seq(st.close(depth), ir.lit("]"))))
                if hi is not None and i >= hi:
                    continue
                ni = min(i + 1, cap)
                pre = st.open(depth) if i == 0 else st.sep(depth)
                plain = elems[i] if i < k else rest
                hit = hits[i] if i < k else rest_hit
                edges.append((src, sid((ni, c)), ir.seq(pre, plain)))
                if cmax is None or c + 1 <= cmax:
                    edges.append((src, sid((ni, min(c + 1, top))), ir.seq(pre, hit)))
        g = _graph(len(ids), sid((0, 0)), [final], edges)
        return ir.seq(ir.lit("["), g)

    def _array_unique(self, s, depth, elems, rest, lo, hi) -> ir.Node:
        """uniqueItems: only when every element comes from one finite set of scalars;
        the values are then emitted in schema order (a documented subset)."""
        st = self.style
        values = None
        if not elems:
            rs = self.normalize(self._elem_items(s, None))
            values = self._finite_scalars(rs)
        if values is None:
            self.refuse(
                "uniqueItems",
                s.unique,
                "uniqueItems is only supported for arrays of at most one item or of a finite set of scalars",
            )
            return self._array_plain_fallback(s, depth, elems, rest, lo, hi)
        n = len(values)
        cap = n if hi is None else min(hi, n)
        if lo > cap:
            return ir.NOTHING
        lits = [self.literal(v, depth + 1) for v in values]
        ids: dict = {}

        def sid(key) -> int:
            if key not in ids:
                ids[key] = len(ids)
            return ids[key]

        start = sid(("start",))
        final = sid(("end",))
        edges = []
        if lo == 0:
            edges.append((start, final, st.empty(depth, "", "]")))
        for j in range(n):
            edges.append((start, sid((j, 1)), ir.seq(st.open(depth), lits[j])))
        for j in range(n):
            for c in range(1, cap + 1):
                src = sid((j, c))
                if c >= lo:
                    edges.append((src, final, ir.seq(st.close(depth), ir.lit("]"))))
                if c < cap:
                    for j2 in range(j + 1, n):
                        edges.append((src, sid((j2, c + 1)), ir.seq(st.sep(depth), lits[j2])))
        return ir.seq(ir.lit("["), _graph(len(ids), start, [final], edges))

    def _array_plain_fallback(self, s, depth, elems, rest, lo, hi) -> ir.Node:
        t = s.copy()
        t.unique = None
        return self._array(t, depth)

    def _finite_scalars(self, s: _S) -> list | None:
        if s.groups or self.is_empty(s):
            return None if s.groups else []
        kinds = self.effective_kinds(s)
        excl = {_canon(v) for v in s.not_values}
        if s.enum is not None:
            vals = [v for v in s.enum if _kind_of(v) in kinds and _canon(v) not in excl and self.value_ok(s, v)]
        elif kinds <= {"null", "boolean"}:
            vals = [v for v in (None, True, False) if _kind_of(v) in kinds and _canon(v) not in excl]
        else:
            return None
        if any(isinstance(v, (list, dict)) for v in vals):
            return None
        return vals

    # ------------------------------------------------------------ objects

    def _object(self, s: _S, depth: int) -> ir.Node:
        st = self.style
        names: list[str] = []
        seen: set[str] = set()
        for x in s.objs:
            for n in x.props:
                if n not in seen:
                    seen.add(n)
                    names.append(n)
        for n in s.required:
            if n not in seen:
                seen.add(n)
                names.append(n)
        pn = self.normalize(s.prop_names) if s.prop_names else None
        if pn is not None and pn.is_unconstrained():
            pn = None
        colon = st.colon(depth)
        entries: list[tuple[ir.Node, bool]] = []
        for n in names:
            req = n in s.required
            if n in s.forbidden or (pn is not None and not self._name_ok(pn, n)):
                if req:
                    return ir.NOTHING
                continue
            v = self.value(self.conj_for(s, n), depth + 1)
            if ir.is_nothing(v):
                if req:
                    return ir.NOTHING
                continue
            entries.append((ir.seq(self.key_literal(n), colon, v), req))
        extra = self._extras(s, names, pn, depth)
        n_req = sum(1 for _, r in entries if r)
        n = len(entries)
        lo, hi = s.min_props, s.max_props
        if hi is not None and n_req > hi:
            return ir.NOTHING
        if extra is None and lo > n:
            return ir.NOTHING
        if self.o.property_order == "any" and n + (extra is not None) > 1:
            return st.members(depth, [e for e, _ in entries], [r for _, r in entries], extra, lo, hi)
        if extra is None and n_req == n and lo <= n and (hi is None or hi >= n):
            return st.container(depth, "{", "}", [e for e, _ in entries])  # all required: a sequence
        # Graph over (layer i = next declared property, c = entries written so far).
        # Without count bounds c only tells "none yet" (0) from "some" (1).
        counting = lo > n_req or (hi is not None and (extra is not None or hi < n))
        cap = (hi if hi is not None else lo) if counting else 1
        cap = max(cap, 1)
        if (n + 1) * (cap + 1) * 2 > self.o.max_states:
            raise GrammarTooLargeError(
                f"minProperties/maxProperties over {n} properties need too many states"
            )
        ids: dict = {}

        def sid(key) -> int:
            if key not in ids:
                ids[key] = len(ids)
            return ids[key]

        edges: list = []
        open_, sep = st.open(depth), st.sep(depth)
        close_some = ir.seq(st.close(depth), ir.lit("}"))
        close_none = st.empty(depth, "", "}")

        def entry(i: int, c: int, label: ir.Node, dst_layer: int) -> None:
            if counting and hi is not None and c + 1 > hi:
                return
            mid = sid(("mid", i, c if counting else 0))
            edges.append((sid((i, c)), mid, open_ if c == 0 else sep))
            edges.append((mid, sid((dst_layer, min(c + 1, cap))), label))

        for i, (label, req) in enumerate(entries):
            for c in range(cap + 1):
                entry(i, c, label, i + 1)
                if not req:
                    edges.append((sid((i, c)), sid((i + 1, c)), None))
        final = sid("end")
        for c in range(cap + 1):
            if extra is not None:
                entry(n, c, extra, n)
            if counting and c < lo:
                continue
            edges.append((sid((n, c)), final, close_none if c == 0 else close_some))
        return ir.seq(ir.lit("{"), _graph(len(ids), sid((0, 0)), [final], edges))

    def _name_ok(self, pn: _S, name: str) -> bool:
        """Whether a property name satisfies propertyNames."""
        if "string" not in self.effective_kinds(pn):
            return False
        if pn.groups:
            node = self.twin.compile_s(pn, 0)
            return _ir_match(node, json.dumps(name, ensure_ascii=False).encode())
        if pn.enum is not None and all(v != name for v in pn.enum):
            return False
        if any(v == name for v in pn.not_values):
            return False
        return self.value_ok(pn, name)

    def _string_nfa(self, s: _S, keyword: str, ptr: str) -> _CharNFA | None:
        """The strings `s` allows, as a char NFA (None: refused and lenient)."""
        if s.groups or s.enum is not None:
            self.refuse(keyword, ptr, "only patterns, formats, lengths and excluded values are supported here")
            return None
        if "string" not in self.effective_kinds(s):
            return _CharNFA(1, 0, set(), [[]])
        nfa = None
        pats = [(p, q) for p, q in s.patterns]
        for name, q in s.formats:
            rx = self._format_regex(name, q)
            if rx is not None:
                pats.append((rx, q))
        for p, q in pats:
            n = self.pattern_nfa(p, q)
            if n is not None:
                nfa = n if nfa is None else nfa.intersect(n)
        if s.min_len or s.max_len is not None:
            ln = _length_nfa(s.min_len, s.max_len)
            nfa = ln if nfa is None else nfa.intersect(ln)
        excluded = [v for v in s.not_values if isinstance(v, str)]
        if excluded:
            ex = _excluding_nfa(excluded)
            nfa = ex if nfa is None else nfa.intersect(ex)
        return nfa if nfa is not None else _CharNFA.any_string()

    def _overlap(self, a: _CharNFA, b: _CharNFA) -> bool:
        try:
            return not a.intersect(b).is_empty()
        except GrammarTooLargeError:
            return True

    def _extras(self, s: _S, names: list[str], pn: _S | None, depth: int) -> ir.Node | None:
        """The IR of ONE undeclared `"key": value` entry, or None if none is allowed.

        Keys matching a patternProperties pattern form one class per pattern; their
        value must satisfy that pattern's schema, every other pattern that may match
        the same key, and additionalProperties of members lacking the pattern (a sound
        over-approximation). Keys matching no pattern are approximated by the keys whose
        first character no pattern can start with."""
        if self.strict_for(s):
            return None
        C = _cs()
        colon = self.style.colon(depth)
        taken = set(names) | s.forbidden
        # disable_additional_properties: only keys some patternProperties declares
        declared_only = any(x.silent for x in s.objs) and s.min_props <= len(names)
        if pn is not None and pn.enum is not None and not pn.groups:
            if declared_only:
                return None
            # finite propertyNames: the extras are those names
            entries = []
            for name in pn.enum:
                if not isinstance(name, str) or name in taken or not self._name_ok(pn, name):
                    continue
                v = self.value(self.conj_for(s, name), depth + 1)
                if not ir.is_nothing(v):
                    entries.append(ir.seq(self.key_literal(name), colon, v))
            return ir.alt(*entries) if entries else None
        pn_nfa = None
        if pn is not None:
            pn_nfa = self._string_nfa(pn, "propertyNames", s.prop_names[0][1])
        classes: list[ir.Node] = []
        # distinct patterns, each with the items of every member that has it
        pats: dict[str, dict] = {}
        for x in s.objs:
            for pat, items, pptr in x.patterns:
                nfa = self.pattern_nfa(pat, pptr)
                if nfa is None:
                    continue  # lenient: unusable pattern, its keys get no class
                entry = pats.setdefault(pat, {"nfa": nfa, "items": [], "owners": [], "ptr": pptr})
                entry["items"] += items
                entry["owners"].append(x)
        taken_list = sorted(taken)
        budget = self.o.max_states

        def emit(keys: _CharNFA | None, body: ir.Node | None, conj: list) -> None:
            v = self.value(conj, depth + 1)
            if ir.is_nothing(v):
                return
            if body is None:
                if pn_nfa is not None:
                    keys = keys.intersect(pn_nfa)
                body = keys.to_ir(max_states=budget, tick=self.tick)
            if not ir.is_nothing(body):
                classes.append(ir.seq(ir.lit('"'), body, ir.lit('"'), colon, v))

        def lacking(owners: list) -> list:
            out: list = []
            for x in s.objs:
                if x not in owners and x.additional is not None:
                    out += x.additional
            return out

        for pat, e in pats.items():
            nfa = e["nfa"]
            others = [q for q in pats if q != pat and self._overlap(nfa, pats[q]["nfa"])]
            keys = nfa
            if any(nfa.matches(t) for t in taken_list):
                keys = keys.intersect(_excluding_nfa(taken_list))  # declared keys are declared entries
            plain = keys is nfa and pn_nfa is None
            # keys matching this pattern only: its schema, exactly
            exact_keys = keys
            if others and len(pats) <= 16:
                try:
                    union = None
                    for q in others:
                        union = pats[q]["nfa"] if union is None else union.union(pats[q]["nfa"])
                    exact_keys = keys.intersect(union.complement())
                except GrammarTooLargeError:
                    exact_keys = None
            elif others:
                exact_keys = None
            if exact_keys is not None:
                body = None
                if plain and not others:
                    try:
                        body = _rx().regex_ir(pat, encoding="json", search=True)
                    except RegexError:
                        body = None
                emit(exact_keys, body, e["items"] + lacking(e["owners"]))
            if others:
                # keys that may also match other patterns: all their schemas (a subset)
                conj = e["items"] + lacking(e["owners"])
                for q in others:
                    conj = conj + pats[q]["items"]
                owners = e["owners"] + [x for q in others for x in pats[q]["owners"]]
                conj += [it for it in lacking(owners) if it not in conj]
                emit(keys, None, conj)
        if declared_only:
            return ir.alt(*classes) if classes else None
        # keys matching no pattern: additionalProperties of every member
        rest_conj: list = []
        for x in s.objs:
            if x.additional is not None:
                rest_conj += x.additional
        v = self.value(rest_conj, depth + 1)
        if ir.is_nothing(v):
            return ir.alt(*classes) if classes else None
        if not pats and pn_nfa is None:
            body = _string_except(taken_list)
        else:
            keys = _excluding_nfa(taken_list)
            if pats:
                try:
                    union = None
                    for e in pats.values():
                        union = e["nfa"] if union is None else union.union(e["nfa"])
                    keys = keys.intersect(union.complement())
                except GrammarTooLargeError:
                    C = _cs()
                    first_taken = C.NO_CHAR
                    empty_ok = True
                    for e in pats.values():
                        first_taken = C.union(first_taken, e["nfa"].first_chars())
                        empty_ok = empty_ok and e["nfa"].start not in e["nfa"].finals
                    keys = _excluding_nfa(taken_list, first=C.difference(C.ANY_CHAR, first_taken), allow_empty=empty_ok)
            if pn_nfa is not None:
                keys = keys.intersect(pn_nfa)
            body = keys.to_ir(max_states=budget, tick=self.tick)
        if not ir.is_nothing(body):
            classes.append(ir.seq(ir.lit('"'), body, ir.lit('"'), colon, v))
        return ir.alt(*classes) if classes else None


@functools.lru_cache(maxsize=None)
def _free_string_rest() -> ir.Node:
    """A free string's body and closing quote as one lexeme: the automaton runs them on
    the DFA shared by every grammar, so a string value's states each hold one position
    (in that DFA, with what follows the string) instead of the body's loop and the quote
    apart, each with continuations of its own."""
    # a one-branch Alt: `ir.seq` would flatten a Concat into the string's, lexeme and all
    return ir.mark_lexeme(ir.Alt((ir.Concat((_cs().json_body_ir(), ir.lit('"'))),)))


@functools.lru_cache(maxsize=1024)
def _any_chars(min_n: int, max_n: int | None, any_hex_escape: bool) -> ir.Node:
    """A string body of min_n..max_n characters: one node per argument tuple, so the
    free tails after every prefix of the names `_body_excluding` avoids share their
    closures (a node per prefix made each key state derive its tail again)."""
    C = _cs()
    if (min_n, max_n, any_hex_escape) == (0, None, True):
        return C.json_body_ir()
    return ir.rep(C.json_char_ir(C.ANY_CHAR, any_hex_escape=any_hex_escape), min_n, max_n)


def _excluding_nfa(names: list[str], first=None, allow_empty: bool = True) -> _CharNFA:
    """Char NFA (a DFA, in fact) of every string not in `names`; with `first`, the
    first character must be in that set (the empty string only if allow_empty)."""
    C = _cs()
    trie: list[dict] = [{}]
    terminal: set[int] = set()
    for name in names:
        t = 0
        for ch in name:
            nxt = trie[t].get(ch)
            if nxt is None:
                nxt = len(trie)
                trie.append({})
                trie[t][ch] = nxt
            t = nxt
        terminal.add(t)
    sink = len(trie)
    edges: list[list] = []
    for t, children in enumerate(trie):
        allowed = first if (t == 0 and first is not None) else C.ANY_CHAR
        out = [(C.charset([ord(ch)]), d) for ch, d in children.items() if C.contains(allowed, ord(ch))]
        other = C.difference(allowed, C.charset(ord(ch) for ch in children))
        if other:
            out.append((other, sink))
        edges.append(out)
    edges.append([(C.ANY_CHAR, sink)])
    finals = {t for t in range(len(trie)) if t not in terminal and (t != 0 or allow_empty)} | {sink}
    return _CharNFA(len(trie) + 1, 0, finals, edges).trim()


def _ast_maxlen(node, k: int, rx, top: bool = True) -> int:
    """Longest match (code points) of a regex AST once every repetition is capped at k
    (and, with search semantics, k characters before and after unless anchored)."""
    if top:
        body = _ast_maxlen(node, k, rx, False)
        items = node.items if isinstance(node, rx.Sequence) else (node,)
        pre = 0 if items and isinstance(items[0], rx.Anchor) and items[0].kind == "^" else k
        post = 0 if items and isinstance(items[-1], rx.Anchor) and items[-1].kind == "$" else k
        return body + pre + post
    if isinstance(node, rx.Chars):
        return 1
    if isinstance(node, rx.Anchor):
        return 0
    if isinstance(node, rx.Sequence):
        return sum(_ast_maxlen(x, k, rx, False) for x in node.items)
    if isinstance(node, rx.Alternation):
        return max(_ast_maxlen(x, k, rx, False) for x in node.items)
    if isinstance(node, rx.Quantified):
        top = max(node.min, k if node.max is None else min(node.max, k))
        return top * _ast_maxlen(node.item, k, rx, False)
    raise TypeError(node)


def _merged(a: _S, b: _S) -> _S:
    m = a.copy()
    m.merge(b)
    return m


def _fraction_ir() -> ir.Node:
    d = ir.byte_range(0x30, 0x39)
    nz = ir.byte_range(0x31, 0x39)
    parts = [ir.seq(ir.lit("0."), ir.rep(ir.lit("0"), 0, 20), nz, ir.rep(d, 0, 13))]
    for n_int in range(1, 15):
        parts.append(ir.seq(nz, ir.rep(d, n_int - 1, n_int - 1), ir.lit("."), ir.rep(d, 0, 14 - n_int), nz))
    return ir.seq(ir.opt(ir.lit("-")), ir.alt(*parts))


def _num_raw(f: Fraction):
    return int(f) if f.denominator == 1 else float(f)


def _length_nfa(lo: int, hi: int | None) -> _CharNFA:
    C = _cs()
    if hi is None:
        n = lo + 1
        edges = [[(C.ANY_CHAR, min(i + 1, lo))] for i in range(n)]
        return _CharNFA(n, 0, {lo}, edges)
    edges = [[(C.ANY_CHAR, i + 1)] if i < hi else [] for i in range(hi + 1)]
    return _CharNFA(hi + 1, 0, set(range(lo, hi + 1)), edges)


def _decimal_fraction(value) -> Fraction:
    """The exact decimal value of a JSON number as parsed (a float by its shortest repr:
    multipleOf 0.01 means 1/100, not the double nearest to it)."""
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)


def _common_multiple(steps: list[Fraction]) -> Fraction:
    """The least common multiple of positive fractions: what a value that is a multiple
    of each of them is a multiple of."""
    out = steps[0]
    for step in steps[1:]:
        a, b = out, step
        out = Fraction(math.lcm(a.numerator, b.numerator), math.gcd(a.denominator, b.denominator))
    return out


def _mod_dfa(m: int, min_digits: int) -> ir.Node:
    """Positive integers (no leading zero) with at least `min_digits` digits that are
    multiples of m, as a Graph over (remainder, digits so far)."""
    cap = min_digits
    ids: dict = {}

    def sid(key) -> int:
        if key not in ids:
            ids[key] = len(ids)
        return ids[key]

    start = sid("start")
    edges: dict[tuple[int, int], list] = {}
    todo = []
    for d in range(1, 10):
        key = (d % m, 1)
        edges.setdefault((start, sid(key)), []).append((0x30 + d, 0x30 + d))
        todo.append(key)
    seen = set(todo)
    while todo:
        r, k = todo.pop()
        for d in range(10):
            key = ((r * 10 + d) % m, min(k + 1, cap))
            edges.setdefault((sid((r, k)), sid(key)), []).append((0x30 + d, 0x30 + d))
            if key not in seen:
                seen.add(key)
                todo.append(key)
    finals = [sid(k) for k in seen if k[0] == 0 and k[1] >= cap]
    return _graph(len(ids), start, finals, [(a, b, ir.byteset(rs)) for (a, b), rs in edges.items()])


def _string_except(names: list[str]) -> ir.Node:
    """Any string body but `names` (by decoded value): a StringExcept where the names are
    ASCII, which runs far cheaper inside the automaton; the basic tree otherwise."""
    if all(name.isascii() for name in names):
        from structgen.grammar.string_except import StringExcept

        return StringExcept(names)
    return _body_excluding(names, 0, None)


def _body_excluding(
    names: list[str], lo: int, hi: int | None, *, first=None, allow_empty: bool = True
) -> ir.Node:
    """JSON string body of any string of length lo..hi that is NOT in `names` (compared
    after decoding, so no escape spelling of an excluded name gets through); with
    `first`, the first character must be in that CharSet (and the empty string is
    allowed only if `allow_empty`)."""
    C = _cs()
    trie: dict = {}
    for name in names:
        node = trie
        for ch in name:
            node = node.setdefault(ch, {})
        node[None] = True

    def anything(min_n: int, max_n: int | None) -> ir.Node:
        return _any_chars(max(0, min_n), max_n, min_n == 0 and max_n is None)

    def build(node: dict, length: int) -> ir.Node:
        parts = []
        if None not in node and lo <= length and (hi is None or length <= hi) and (length > 0 or allow_empty):
            parts.append(ir.EMPTY)
        if hi is not None and length >= hi:
            return ir.alt(*parts)
        children = [ch for ch in node if ch is not None]
        allowed = C.ANY_CHAR if (length > 0 or first is None) else first
        for ch in children:
            if C.contains(allowed, ord(ch)):
                parts.append(ir.seq(C.json_char_ir(C.charset([ord(ch)])), build(node[ch], length + 1)))
        other = C.difference(allowed, C.charset(ord(ch) for ch in children))
        if other:
            rest_hi = None if hi is None else hi - length - 1
            parts.append(ir.seq(C.json_char_ir(other), anything(lo - length - 1, rest_hi)))
        return ir.alt(*parts)

    return build(trie, 0)


# ---------------------------------------------------------------- public API


def schema_to_ir(schema: Any, options: JsonOptions | None = None, *, deadline: float | None = None,
                 languages: Languages | None = None) -> ir.Node:
    """Compile a JSON Schema (dict, bool, or JSON text) to the byte-level IR.

    Raises SchemaError (invalid schema, with a JSON pointer), UnsupportedKeywordError
    (a keyword that cannot be enforced; recursion), GrammarTooLargeError (state or time
    budget). `deadline` is a `time.monotonic()` instant that overrides options.timeout_s.
    `languages`: the automata's answers (`automata.languages.AUTOMATA`, as the compiler
    passes); without them a `multipleOf` with a decimal step is refused as unsupported.
    """
    options = options or JsonOptions()
    schema = parse_schema(schema)
    own = time.monotonic() + options.timeout_s
    compiler = _Compiler(schema, options, min(own, deadline) if deadline is not None else own,
                         languages=languages)
    try:
        return compiler.compile_root()
    except RecursionError:  # within the nesting limits this is a bug; still the user's 400
        raise GrammarTooLargeError("the schema is nested too deeply to compile") from None


def parse_schema(schema: Any) -> dict | bool:
    """A schema given as JSON text parsed, and any schema checked against the nesting
    limits (`grammar.nesting`) before anything walks it recursively."""
    make_room_for_deep_input()
    if isinstance(schema, str):
        check_text_nesting(schema)
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise SchemaError(f"schema is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})", "") from None
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}", "")
    check_nesting(schema)
    return schema


def any_json_ir(options: JsonOptions | None = None) -> ir.Node:
    """Any JSON value in the given style (see JsonOptions.max_any_depth for nesting)."""
    return schema_to_ir(True, options)

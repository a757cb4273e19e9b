"""The JSON Schema keywords the compiler knows, and small helpers on raw JSON values.

Owns: which keywords are handled, which are annotations, which are refused and why, the
misspelling hints, the atomic kinds ("int" and "frac" split JSON numbers), JSON pointer
escaping, and JSON Schema equality of values (`canon`). Must not know the compiler, the
IR or the normalized schema: plain data and pure functions only.
"""

from __future__ import annotations

import difflib
import functools
import math
from fractions import Fraction
from typing import Any

BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
COUNTS = frozenset({"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
                    "minContains", "maxContains"})

ANNOTATIONS = frozenset(
    {
        "title", "description", "examples", "example", "default", "$comment", "$schema", "$id", "id",
        "deprecated", "readOnly", "writeOnly", "contentMediaType", "contentEncoding", "contentSchema",
        "$vocabulary", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$defs", "definitions",
        "nullable", "discriminator", "xml", "externalDocs", "markdownDescription", "enumDescriptions",
        "markdownEnumDescriptions", "errorMessage", "then", "else", "minContains", "maxContains",
    }
)  # fmt: skip
UNSUPPORTED = {
    "unevaluatedProperties": "needs evaluation tracking across subschemas",
    "unevaluatedItems": "needs evaluation tracking across subschemas",
    "$dynamicRef": "dynamic references are not supported",
    "$recursiveRef": "recursive references are not supported",
    "divisibleBy": "draft-03 keyword",
    "disallow": "draft-03 keyword",
    "extends": "draft-03 keyword",
}


@functools.lru_cache(maxsize=4096)
def misspelled_keyword(key: str) -> str | None:
    """The validation keyword `key` most likely misspells, if any. Keys starting with
    "_" are taken as deliberately disabled keywords (a common convention), not typos.
    Memoized: 20-40 us a key, and schemas repeat their annotation keys (a MaskBench
    schema that writes "preferredOrder" beside 62 of its objects spent ~3 ms of its
    ~20 ms compile here)."""
    if key.startswith("_") or not key:
        return None
    known = sorted(HANDLED | set(UNSUPPORTED))
    for word in known:
        if word.lower() == key.lower():
            return word
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.85)
    return close[0] if close else None


HANDLED = frozenset(
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
KINDS = frozenset({"null", "boolean", "int", "frac", "string", "array", "object"})
TYPE_KINDS = {
    "null": frozenset({"null"}),
    "boolean": frozenset({"boolean"}),
    "integer": frozenset({"int"}),
    "number": frozenset({"int", "frac"}),
    "string": frozenset({"string"}),
    "array": frozenset({"array"}),
    "object": frozenset({"object"}),
}


def pointer_token(key: str) -> str:
    """`key` as a JSON pointer reference token (RFC 6901: "~" and "/" escaped)."""
    if key.__class__ is str and "~" not in key and "/" not in key:
        return key
    return str(key).replace("~", "~0").replace("/", "~1")


def kind_of(v: Any) -> str:
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


def canon(v: Any):
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
        return ("a", tuple(canon(x) for x in v))
    if isinstance(v, dict):
        return ("o", frozenset((k, canon(x)) for k, x in v.items()))
    return ("?", repr(v))


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)

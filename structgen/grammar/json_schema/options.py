"""The options of a JSON Schema compile (`JsonOptions`) and the cache key of a schema
with its options (`canonical_key`, made of `schema_text`).

Owns: what a caller may ask for and the checks of those values. Must not know how a
schema is compiled: the other modules read the options, none is read here.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass
from typing import Any

from structgen.errors import SchemaError, StructgenError


@dataclass(frozen=True)
class JsonOptions:
    """How `schema_to_ir` renders and how far it goes.

    whitespace: "default" | "compact" | "flexible" | "indent" (see the package doc).
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
    return schema_text(schema) + "\n" + options_text(options or JsonOptions())


@functools.lru_cache(maxsize=256)
def options_text(options: JsonOptions) -> str:
    """The options as compact JSON, keys sorted. Remembered (the options are frozen):
    writing them out took ~40 us, on every request's cache lookup."""
    return json.dumps(asdict(options), sort_keys=True, separators=(",", ":"))


def schema_text(schema: Any) -> str:
    """The schema as compact JSON, its keys in their order (see `canonical_key`)."""
    try:
        return json.dumps(schema, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise SchemaError(f"schema is not JSON-serializable: {e}", "") from None

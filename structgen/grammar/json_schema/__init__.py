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
  * `pattern`/`format` with length bounds are intersected exactly: a product automaton
    while that stays small, else the pattern's graph bounded to `maxLength` characters,
    counted as the automaton reaches them (`ir.Bound`).
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

The package, one concept per module (each module's docstring says what it owns):
  options       JsonOptions, canonical_key
  keywords      keyword tables, misspelling hints, helpers on raw values
  references    $ref resolution
  normalized    the normalized schema types
  normalize     raw schema -> normalized schema
  negation, disjointness, combinators
                negations, emptiness/disjointness proofs, anyOf/oneOf/if expansion
  literals, any_value, numeric, strings, arrays, objects
                lowering to the IR, by kind
  style         whitespace and separators
  char_nfa      automata over code points (patterns, lengths, property names)
  graphs        trimmed ir.Graphs
  compiler      SchemaCompiler: the mixins above, the budget, the value cache
  alternatives  a top-level anyOf compiled and cached alternative by alternative
"""

from __future__ import annotations

import json
import time
from typing import Any

from structgen.errors import GrammarTooLargeError, SchemaError
from structgen.grammar import ir
from structgen.grammar.json_schema.alternatives import alternatives_info, clear_alternatives, union_ir
from structgen.grammar.json_schema.compiler import SchemaCompiler
from structgen.grammar.json_schema.options import JsonOptions, canonical_key
from structgen.grammar.languages import Languages
from structgen.grammar.nesting import check_nesting, check_text_nesting, make_room_for_deep_input

__all__ = ["JsonOptions", "schema_to_ir", "union_ir", "parse_schema", "canonical_key", "any_json_ir",
           "clear_alternatives", "alternatives_info"]


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
    compiler = SchemaCompiler(schema, options, min(own, deadline) if deadline is not None else own,
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

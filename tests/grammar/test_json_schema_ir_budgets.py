"""JSON Schema -> IR within its budgets: the size and time limits refuse what is too large,
and a schema used many times (conjoined with itself, or a shared definition) is counted
and compiled once.
"""

from __future__ import annotations

import time

import pytest

from structgen.errors import GrammarTooLargeError
from structgen.grammar import ir
from structgen.grammar.json_schema import JsonOptions, schema_to_ir
from tests.grammar.schema_checks import G, check


def test_a_schema_conjoined_with_itself_is_compiled_once():
    """`allOf` of the same definition twice, at every level: each level's property
    schema used to appear once per copy of its parent, 2^24 copies at the bottom (the
    WashingtonPost ANS schemas, whose traits include one another, ran out of the 10 s
    budget); a conjunction holds a schema once now, and the result is still exact."""
    depth = 24
    defs: dict = {}
    for i in range(depth):
        nxt = {"$ref": f"#/$defs/l{i + 1}"} if i + 1 < depth else {"type": "integer", "maximum": 5}
        defs[f"o{i}"] = {"type": "object", "properties": {"next": nxt, "n": {"type": "string"}},
                         "required": ["next"], "additionalProperties": False}
        defs[f"l{i}"] = {"allOf": [{"$ref": f"#/$defs/o{i}"}, {"$ref": f"#/$defs/o{i}"}]}
    start = time.monotonic()
    g = G({"$defs": defs, "$ref": "#/$defs/l0"}, timeout_s=5)
    assert time.monotonic() - start < 2
    deep = '{"next": ' * depth + "{}" + "}" * depth
    assert g.ok('{"next": ' * depth + "5" + "}" * depth)
    assert g.ok('{"next": ' * (depth - 1) + '{"next": 3, "n": "x"}' + "}" * (depth - 1))
    assert not g.ok('{"next": ' * depth + "6" + "}" * depth)
    assert not g.ok(deep)
    assert not g.ok('{"next": ' * (depth - 1) + '{"n": "x"}' + "}" * (depth - 1))


def test_budgets():
    with pytest.raises(GrammarTooLargeError):
        # one position per character: a JSON string character is one lexeme item
        schema_to_ir({"type": "string", "maxLength": 10_000_000}, JsonOptions(max_states=2_000_000))
    # ~410 positions an item (each node once, see the next test) x 10,000 copies
    big_item = {"type": "object", "properties": {f"k{i}": {"type": "string", "maxLength": 20} for i in range(10)}}
    with pytest.raises(GrammarTooLargeError):
        schema_to_ir({"type": "array", "items": big_item, "minItems": 10_000}, JsonOptions(max_states=2_000_000))
    # deep anyOf nesting: bounded by the deadline, never a hang
    schema: dict = {"type": "integer"}
    for i in range(40):
        schema = {"anyOf": [schema, {"type": "integer", "minimum": i}], "allOf": [{"anyOf": [{"maximum": 100}, {"minimum": -100}]}]}
    t0 = time.monotonic()
    try:
        schema_to_ir(schema, JsonOptions(timeout_s=1.0))
    except GrammarTooLargeError:
        pass
    assert time.monotonic() - t0 < 10


def test_budget_counts_a_shared_definition_once():
    """A definition `$ref`ed from many places is one subtree the automata hold once:
    the size budget counts it once per repeated copy, not once per path to it (20
    levels of definitions each using the one below twice are 2^20 paths, which the
    budget used to count and refuse)."""
    defs = {"d0": {"type": "object", "properties": {"v": {"type": "string", "maxLength": 8}}, "additionalProperties": False}}
    for i in range(1, 21):
        below = {"$ref": f"#/$defs/d{i - 1}"}
        defs[f"d{i}"] = {"type": "object", "properties": {"a": below, "b": below}, "additionalProperties": False}
    schema = {"$defs": defs, "$ref": "#/$defs/d20"}
    node = schema_to_ir(schema)
    assert ir.expanded_size(node) < 5_000
    # repeats still count as copies: 100 items of the whole tree
    assert ir.expanded_size(schema_to_ir({"$defs": defs, "type": "array", "items": {"$ref": "#/$defs/d20"}, "maxItems": 100})) > 100 * ir.expanded_size(node) * 0.9
    instance = {"v": "x"}
    for _ in range(3):
        instance = {"a": instance}
    check({"$defs": defs, "$ref": "#/$defs/d3"}, accepted=[instance, {"b": {"a": {"b": {}}}}],
          rejected=[{"a": {"a": {"a": {"v": "too long string"}}}}, {"c": 1}])

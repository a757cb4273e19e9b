"""JSON Schema -> IR for `$ref`: pointers, anchors and `$id`, siblings per the declared
draft, recursive references compiled to recursive rules (and the ones refused), and shared
references that are no recursion.
"""

from __future__ import annotations

import json

import jsonschema

from structgen.errors import SchemaError, UnsupportedKeywordError
from structgen.grammar.json_schema import schema_to_ir
from tests.grammar.schema_checks import G, T, check, raises


def test_refs():
    schema = {
        "$defs": {"pos": {"type": "integer", "minimum": 1}, "a/b": {"const": "s"}, "x y": {"type": "null"}},
        "type": "object",
        "properties": {
            "p": {"$ref": "#/$defs/pos"},
            "q": {"$ref": "#/$defs/a~1b"},
            "r": {"$ref": "#/$defs/x%20y"},
            "s": {"$ref": "#/properties/p", "maximum": 3},  # siblings apply (2020-12)
        },
        "definitions": {"old": {"type": "boolean"}},
    }
    check(
        schema,
        accepted=[{"p": 1, "q": "s", "r": None, "s": 3}],
        rejected=[{"p": 0}, {"q": "t"}, {"r": 1}, {"s": 4}],
    )
    check({"definitions": {"b": {"type": "boolean"}}, "items": {"$ref": "#/definitions/b"}}, accepted=[[True]])
    check({"$defs": {"a": {"$anchor": "A", "type": "integer"}}, "$ref": "#A"}, accepted=[1], rejected=["x"])
    check(
        {"$id": "https://example.com/root", "$defs": {"x": {"$id": "item", "type": "string"}}, "$ref": "item"},
        accepted=["a"],
        rejected=[1],
    )


def test_ref_siblings_follow_the_declared_draft():
    """Up to draft-07 the keywords beside "$ref" are ignored; from 2019-09 on they apply.
    The acceptor must agree with the validator of the draft the root declares."""
    body = {
        "definitions": {"flags": {"type": "object", "properties": {"cache": {"type": "boolean"}}}},
        "type": "object",
        "properties": {"out": {"$ref": "#/definitions/flags", "additionalProperties": False, "maxProperties": 0}},
    }
    instance = {"out": {"cache": True}}
    for draft, applies in [
        ("http://json-schema.org/draft-07/schema#", False),
        ("http://json-schema.org/draft-04/schema", False),
        ("https://json-schema.org/draft/2020-12/schema", True),
        (None, True),
    ]:
        schema = dict(body, **({"$schema": draft} if draft else {}))
        assert jsonschema.validators.validator_for(schema)(schema).is_valid(instance) is not applies
        if applies:
            check(schema, accepted=[{"out": {}}], rejected=[instance])
        else:
            check(schema, accepted=[instance, {"out": {}}], rejected=[{"out": {"cache": 1}}])
    # under 'not' too: draft-07 reads {"$ref": X, "type": "string"} as X alone
    old = {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"i": {"type": "integer"}}}
    check(dict(old, **{"not": {"$ref": "#/definitions/i", "type": "string"}}), accepted=["a", 1.5], rejected=[1])


def test_recursive_ref_compiles_to_recursive_rules():
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                "required": ["v"],
                "additionalProperties": False,
            }
        },
        "$ref": "#/$defs/node",
    }
    deep = {"v": 0}
    for i in range(1, 12):  # deeper than any fixed unrolling would allow
        deep = {"v": i, "kids": [deep, {"v": -i}]}
    check(
        tree,
        accepted=[{"v": 1}, {"v": 1, "kids": []}, {"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]}, deep],
        rejected=[{"v": 1, "kids": [{"kids": []}]}, {"v": 1, "kids": [{"v": "x"}]}, {"v": 1, "kids": [{"v": 2, "w": 1}]}],
    )
    check(tree, accepted=[deep], rejected=[{"v": 1, "kids": [{}]}], whitespace="compact")
    linked = {"type": "object", "properties": {"val": {"type": "string"}, "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}, "required": ["val", "next"]}
    check(linked, accepted=[{"val": "a", "next": {"val": "b", "next": None}}], rejected=[{"val": "a", "next": {"val": "b"}}])


def test_recursive_ref_refusals():
    node = {"type": "object", "properties": {"next": {"$ref": "#"}}}
    # indent's whitespace depends on the depth: one copy per level cannot close the loop
    e = raises(UnsupportedKeywordError, node, keyword="$ref", indent=2)
    assert "recursive" in str(e) and "compact" in str(e)
    # flexible with a fixed bound per run is depth-free: recursion compiles
    check(node, accepted=[T('{"next" : {\n  "next":{ } } }')], rejected=[T('{"next": {"next": 1}}')],
          whitespace="flexible", max_whitespace=3)
    # and so is its default bound past FLEXIBLE_LEVELS, where the loop closes: indent=4
    # output to that depth, indent=2 deeper, and the bound still holds at every depth
    nested = [{}]
    for _ in range(25):
        nested.append({"next": nested[-1]})
    check(node, accepted=[nested[25], T(json.dumps(nested[20], indent=2)), T(json.dumps(nested[10], indent=4))],
          rejected=[{"next": {"next": []}}, T(json.dumps(nested[21], indent=2)), T('{"next": {' + " " * 11 + '}}'),
                    T(json.dumps(nested[25]).replace("{}", "{" + " " * 43 + "}"))],
          whitespace="flexible")
    # a $ref cycle that never reaches a property or item defines nothing
    e = raises(SchemaError, {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})
    assert "cycle" in str(e)
    # every value would need to be infinitely deep: the language is empty
    infinite = {"type": "object", "properties": {"x": {"$ref": "#"}}, "required": ["x"]}
    from structgen.automata.nfa import LazyNFA

    assert LazyNFA(schema_to_ir(infinite)).is_empty_language


def test_any_value_is_unbounded_where_the_style_allows():
    deep = [{"a": [[[[[[[[["x"]]]]]]]]]}]
    check({}, accepted=[deep, [[[[[[[[[[[[1]]]]]]]]]]]]], rejected=[T("[[[[[[[[[1]]]]]]]]"), T('{"a": [[[}]]]}')])
    check({}, accepted=[deep], whitespace="compact")
    g = G({}, indent=2)  # depth-dependent style: bounded (3 levels unless max_any_depth says)
    assert g.value([[1]]) and not g.value([[[[1]]]])


def test_shared_refs_are_not_recursion():
    d = {"type": "integer"}
    schema = {"$defs": {"i": d}, "properties": {"a": {"$ref": "#/$defs/i"}, "b": {"allOf": [{"$ref": "#/$defs/i"}, {"$ref": "#/$defs/i"}]}}}
    check(schema, accepted=[{"a": 1, "b": 2}], rejected=[{"b": "x"}])

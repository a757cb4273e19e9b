"""JSON Schema -> IR in each whitespace style: default, compact, indent and flexible (with
its bounds).
"""

from __future__ import annotations

import json

from tests.grammar.schema_checks import T, check


def test_whitespace_styles():
    value = {"a": [1, {"b": None}], "c": {}, "d": []}
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {}},
            "c": {"type": "object"},
            "d": {"type": "array"},
        },
        "required": ["a", "c", "d"],
        "additionalProperties": False,
    }
    compact = json.dumps(value, separators=(",", ":"))
    default = json.dumps(value)
    ind2 = json.dumps(value, indent=2)
    ind4 = json.dumps(value, indent=4)
    compact, default, ind2, ind4 = T(compact), T(default), T(ind2), T(ind4)
    check(schema, accepted=[default], rejected=[compact, ind2])
    check(schema, accepted=[compact], rejected=[default, ind2], whitespace="compact")
    check(schema, accepted=[ind2], rejected=[default, ind4], indent=2)
    check(schema, accepted=[ind4], rejected=[ind2], indent=4)
    check(
        schema,
        accepted=[default, compact, ind2, ind4, T(ind2.replace("\n", "\r\n")), T('{ "a" : [ 1 ,{"b":null}],"c":{ },"d":[\t]}')],
        rejected=[T(" " + compact), T(compact + " "), T('{"a":[1,{"b":null}],"c":{},"d":[' + " " * 50 + "]}")],
        whitespace="flexible",
    )


def test_flexible_accepts_deep_indent():
    v = {"a": 1}
    for _ in range(8):
        v = {"k": v}
    check(True, accepted=[T(json.dumps(v, indent=2)), T(json.dumps(v, indent=4))], whitespace="flexible", max_any_depth=9)
    check(True, accepted=[T(json.dumps([1, 2]))], rejected=[T("[1,   2]")], whitespace="flexible", max_whitespace=2)

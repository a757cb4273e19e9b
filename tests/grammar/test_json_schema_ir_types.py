"""JSON Schema -> IR: boolean schemas, the any-value schema and its depth bound, `type`,
`const` and `enum` (filtered by their siblings, rendered in the whitespace style).
"""

from __future__ import annotations

import json

from tests.grammar.schema_checks import G, T, check


def test_boolean_schemas_and_any():
    g = check(True, accepted=[1, "x", None, [1, {"a": [2]}], {"a": {"b": {}}}], rejected=[T(""), T(" 1"), T("nul"), T("[1,]")])
    assert g.ok('{"a": "\\ud83d\\ude00"}') and g.ok('"\\u00e9"') and g.ok('"é"')
    check(False, rejected=[1, None, {}, ""])
    check({}, accepted=[{"x": [1.5e10, -0.0, "y"]}])


def test_any_value_depth_bound():
    g = G({}, max_any_depth=2)
    assert g.value([[1]]) and g.value({"a": {"b": 1}})
    assert g.value([[[]]])  # empty containers do not count as a level
    assert not g.value([[[1]]])  # documented: deeper nesting is rejected


def test_types():
    check({"type": "string"}, accepted=["", "abc", 'a"b\\c\n'], rejected=[1, None, T("'a'")])
    check({"type": "integer"}, accepted=[0, -5, 10**20], rejected=[1.5, "1", True, T("01"), T("-0")])
    check({"type": "number"}, accepted=[0, 1.5, -2e-7, 10**30], rejected=[T("1."), T(".5"), T("NaN"), True])
    check({"type": "boolean"}, accepted=[True, False], rejected=[0, "true", None])
    check({"type": "null"}, accepted=[None], rejected=[0, "", False])
    check({"type": ["string", "null"]}, accepted=["a", None], rejected=[1, []])
    check({"type": "array"}, accepted=[[], [1, "a", None]], rejected=[{}, "[]"])
    check({"type": "object"}, accepted=[{}, {"a": 1}], rejected=[[], T("{}x")])


def test_const_and_enum():
    check({"const": "a\u00e9"}, accepted=["a\u00e9", T('"a\u00e9"'), T('"a\\u00e9"')], rejected=["a", "A\u00e9"])
    check({"const": {"a": [1, 2], "b": None}}, accepted=[{"a": [1, 2], "b": None}], rejected=[{"a": [1, 2]}])
    check({"const": 1.0}, accepted=[T("1.0"), T("1")], rejected=[T("1.5"), T("true")])
    check({"enum": [1, "1", None, True, [1]]}, accepted=[1, "1", None, True, [1]], rejected=[False, 2, "2", []])
    # enum filtered by sibling keywords
    check({"type": "string", "enum": ["a", 1, "bb"], "maxLength": 1}, accepted=["a"], rejected=[1, "bb"])
    check({"enum": [1, 5, 10], "minimum": 4, "exclusiveMaximum": 10}, accepted=[5], rejected=[1, 10])
    check({"enum": [[1], [1, 2]], "maxItems": 1}, accepted=[[1]], rejected=[[1, 2]])
    # whitespace styles render container values in the style
    check({"const": {"a": [1, 2]}}, accepted=[T('{"a":[1,2]}')], rejected=[T('{"a": [1, 2]}')], whitespace="compact")
    check({"const": {"a": [1, 2]}}, accepted=[T(json.dumps({"a": [1, 2]}, indent=2))], indent=2)

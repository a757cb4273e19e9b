"""JSON Schema -> IR for arrays: `items` and counts, `prefixItems` (and draft-07's
`items` list), `contains` with its counts, `uniqueItems`.
"""

from __future__ import annotations

from structgen.errors import UnsupportedKeywordError
from tests.grammar.schema_checks import T, check, raises


def test_items_and_counts():
    check(
        {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
        accepted=[[1], [1, 2, 3]],
        rejected=[[], [1, 2, 3, 4], ["a"], T("[1,2]")],
    )
    check({"type": "array", "items": False}, accepted=[[]], rejected=[[1]])
    check({"type": "array", "maxItems": 0}, accepted=[[]], rejected=[[1]])


def test_prefix_items():
    check(
        {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
        accepted=[[], [1], [1, "a"]],
        rejected=[["a"], [1, 2], [1, "a", 3]],
    )
    check(
        {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "string"}, "minItems": 2},
        accepted=[[1, "a"], [1, "a", "b"]],
        rejected=[[1], [1, 2]],
    )
    # draft-07 spelling
    check(
        {"type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "boolean"}},
        accepted=[[], [1], [1, True, False]],
        rejected=[[True], [1, 2]],
    )


def test_contains():
    check(
        {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 10}},
        accepted=[[10], [1, 2, 11], [12, 1]],
        rejected=[[], [1, 2]],
    )
    check(
        {"type": "array", "contains": {"const": "x"}, "minContains": 2, "maxItems": 3},
        accepted=[["x", "x"], ["x", 1, "x"]],
        rejected=[["x"], ["x", 1, 2, "x"]],
    )
    # maxContains: other elements must provably not match the contains schema
    check(
        {"type": "array", "contains": {"const": "x"}, "maxContains": 1},
        accepted=[["x"], ["x", 1], [1, "x", 2]],
        rejected=[[], ["x", "x"], [1, 2]],
    )
    check(
        {"type": "array", "contains": {"type": "integer"}, "minContains": 2, "maxContains": 3},
        accepted=[[1, 2], ["a", 1, 2, 3]],
        rejected=[[1], [1, 2, 3, 4], ["a"]],
    )
    raises(UnsupportedKeywordError, {"type": "array", "contains": {"pattern": "a"}, "maxContains": 1}, "/contains", "maxContains")


def test_unique_items():
    check({"type": "array", "uniqueItems": True, "maxItems": 1}, accepted=[[], [[1]]], rejected=[[1, 1]])
    g = check(
        {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True},
        accepted=[[], ["a"], ["a", "c"], ["a", "b", "c"]],
        rejected=[["a", "a"], ["b", "b", "c"]],
    )
    assert not g.value(["c", "a"])  # documented: schema order
    raises(UnsupportedKeywordError, {"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "/uniqueItems")
    check({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, accepted=[["a", "a"]], lenient=True)

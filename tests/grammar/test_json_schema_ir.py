"""JSON Schema -> IR (structgen.grammar.json_schema): keyword by keyword, errors with
pointers, whitespace styles, a differential check against `jsonschema` on the
maskbench-dev instances, and hypothesis property tests.

The acceptor is the lead's lazy NFA/DFA (`structgen.automata`), built once per schema.
Soundness (an accepted text must be valid) is a hard requirement everywhere.
"""

from __future__ import annotations

import json
import os
import random
import time

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from structgen.automata.languages import AUTOMATA
from structgen.errors import GrammarTooLargeError, SchemaError, StructgenError, UnsupportedKeywordError
from structgen.grammar import ir
from structgen.grammar.acceptor import ir_accepts
from structgen.grammar.json_schema import JsonOptions, canonical_key, schema_to_ir
from tests.paths import MASKBENCH


def _acceptor(node: ir.Node):
    """bytes -> bool for the IR's language (lazy DFA from structgen.automata)."""
    try:
        from structgen.automata.dfa import LazyDFA
        from structgen.automata.nfa import LazyNFA
    except ImportError:  # pragma: no cover - fall back to Python regexes (small graphs only)
        import re

        rx = re.compile(ir.to_python_regex(node), re.S)
        return lambda data: rx.fullmatch(data) is not None
    dfa = LazyDFA(LazyNFA(node), max_states=1_000_000)

    def accepts(data: bytes) -> bool:
        if dfa.start < 0:
            return False
        sid = dfa.walk(dfa.start, data)
        return sid >= 0 and bool(dfa.accepting[sid])

    return accepts


class G:
    """A compiled schema: `g.ok(text)` / `g.value(v)` (rendered in the style)."""

    def __init__(self, schema, **options):
        self.options = JsonOptions(**options)
        self.node = schema_to_ir(schema, self.options, languages=AUTOMATA)
        self.accepts = _acceptor(self.node)

    def ok(self, text: str | bytes) -> bool:
        return self.accepts(text.encode() if isinstance(text, str) else text)

    def value(self, v) -> bool:
        return self.ok(dumps(v, self.options))


def dumps(v, options: JsonOptions) -> str:
    if options.style == "compact":
        return json.dumps(v, separators=(",", ":"))
    if options.style == "indent":
        return json.dumps(v, indent=options.indent)
    return json.dumps(v)


class T(str):
    """A literal JSON text (anything else given to `check` is a value to render)."""


def check(schema, accepted=(), rejected=(), **options):
    """Values (rendered in the style) or texts T("...") that must be accepted / rejected."""
    g = G(schema, **options)
    for x in accepted:
        text = x if isinstance(x, T) else dumps(x, g.options)
        assert g.ok(text), f"should accept {text!r} for {schema}"
    for x in rejected:
        text = x if isinstance(x, T) else dumps(x, g.options)
        assert not g.ok(text), f"should reject {text!r} for {schema}"
    return g


def raises(exc, schema, pointer=None, keyword=None, **options):
    with pytest.raises(exc) as info:
        schema_to_ir(schema, JsonOptions(**options), languages=AUTOMATA)
    if pointer is not None:
        assert info.value.pointer == pointer, str(info.value)
    if keyword is not None:
        assert info.value.keyword == keyword, str(info.value)
    return info.value


# ---------------------------------------------------------------- basics, types, const/enum


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


# ---------------------------------------------------------------- strings


def test_string_lengths_count_code_points():
    g = check({"type": "string", "minLength": 2, "maxLength": 3}, accepted=["ab", "abc", "é😀", "\n\t"])
    assert g.ok('"\\u00e9\\ud83d\\ude00"') and g.ok('"a\\n"')  # escapes are one character each
    assert not g.ok('"a"') and not g.ok('"abcd"') and not g.ok('"\\ud83d"')  # lone surrogate
    check({"type": "string", "maxLength": 0}, accepted=[""], rejected=["a"])


def test_pattern_search_semantics():
    check({"type": "string", "pattern": "b+"}, accepted=["abbc", "b"], rejected=["", "ac"])
    check({"type": "string", "pattern": "^a\\d{2}$"}, accepted=["a12"], rejected=["a123", "xa12", "a1"])
    # the pattern constrains the decoded string, whatever the escaping
    g = G({"type": "string", "pattern": "^é$"})
    assert g.ok('"é"') and g.ok('"\\u00e9"') and g.ok('"\\u00E9"') and not g.ok('"e"')


def test_pattern_with_lengths():
    check(
        {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 4},
        accepted=["ab", "abcd"],
        rejected=["a", "abcde", "aB", ""],
    )
    check(
        {"type": "string", "pattern": "[0-9]", "maxLength": 3},
        accepted=["a1", "123", "1"],
        rejected=["abcd1", "ab", "1234"],
    )
    # implied bounds: the pattern's own lengths are within the bounds
    check({"type": "string", "pattern": "^[0-9]{4}$", "maxLength": 10}, accepted=["1234"], rejected=["123"])
    # anchors inside the pattern keep ECMA semantics
    check({"type": "string", "pattern": "^a|b$", "maxLength": 3}, accepted=["abc", "cab", "b"], rejected=["cde"])


def test_two_patterns_intersect():
    check(
        {"allOf": [{"pattern": "^[a-z]+$"}, {"pattern": "x"}], "type": "string"},
        accepted=["abx", "x"],
        rejected=["ab", "aX", "1x"],
    )


def test_format():
    formats = pytest.importorskip("structgen.grammar.formats")
    if formats.format_pattern("date") is None:
        pytest.skip("no date format")
    check({"type": "string", "format": "date"}, accepted=["2024-02-29"], rejected=["2024-2-29", "x"])
    # format applies to strings only
    check({"type": "integer", "format": "date"}, accepted=[3])
    check({"format": "date"}, accepted=[3, None], rejected=["x"])


def test_unknown_format():
    e = raises(UnsupportedKeywordError, {"type": "string", "format": "no-such-format"}, "/format", "format")
    assert "no-such-format" in str(e)
    check({"type": "string", "format": "no-such-format"}, accepted=["x"], unknown_formats="ignore")
    check({"type": "string", "format": "no-such-format"}, accepted=["x"], lenient=True)


# ---------------------------------------------------------------- numbers


@settings(max_examples=100, deadline=None)
@given(
    step=st.sampled_from(["0.01", "0.05", "2.5", "0.3", "0.125", "1.5", "0.001"]),
    lower=st.one_of(st.none(), st.sampled_from(["0", "-10", "1.5", "0.01"])),
    upper=st.one_of(st.none(), st.sampled_from(["0", "100", "3.75", "99999999999.99"])),
    exclusive=st.booleans(),
    texts=st.lists(
        st.tuples(st.booleans(), st.integers(0, 10**6), st.text(alphabet="0123456789", max_size=5)),
        min_size=1, max_size=20,
    ),
)
def test_decimal_multiple_of_is_exact(step, lower, upper, exclusive, texts):
    """Decimal multipleOf against exact arithmetic, as jsonschema does it when the JSON is
    read with Decimal (its float division calls 19.99 no multiple of 0.01): every text
    accepted is a multiple within the bounds, and every plain one that is, is accepted."""
    from decimal import Decimal

    assume(lower is None or upper is None or Decimal(lower) <= Decimal(upper))
    schema = {"type": "number", "multipleOf": float(step)}
    if lower is not None:
        schema["exclusiveMinimum" if exclusive else "minimum"] = float(lower)
    if upper is not None:
        schema["maximum"] = float(upper)
    g = G(schema)
    exact = jsonschema.Draft202012Validator(json.loads(json.dumps(schema), parse_float=Decimal))
    for negative, whole, fraction in texts:
        text = ("-" if negative else "") + str(whole) + ("." + fraction if fraction else "")
        valid = exact.is_valid(json.loads(text, parse_float=Decimal))
        if text == "-0":  # never written under bounds (grammar/numbers): only soundness holds
            assert valid or not g.ok(text), (text, schema)
        else:
            assert g.ok(text) == valid, (text, schema)


def test_numeric_bounds():
    check({"type": "integer", "minimum": 2, "maximum": 5}, accepted=[2, 5], rejected=[1, 6, 3.0])
    check({"type": "integer", "exclusiveMinimum": 2, "exclusiveMaximum": 5}, accepted=[3, 4], rejected=[2, 5])
    check({"type": "integer", "minimum": 0.5}, accepted=[1], rejected=[0])
    check({"type": "number", "minimum": -1.5, "maximum": 2}, accepted=[-1.5, 0, 2, 1.99], rejected=[-1.6, 2.01, 3])
    check({"type": "number", "exclusiveMaximum": 0}, accepted=[-0.001, -5], rejected=[0, 0.0, 1])
    # draft-04 boolean exclusives
    check({"type": "integer", "minimum": 2, "exclusiveMinimum": True}, accepted=[3], rejected=[2])
    check({"type": "number", "maximum": 2, "exclusiveMaximum": True}, accepted=[1.5], rejected=[2])


def test_multiple_of():
    check({"type": "integer", "multipleOf": 1}, accepted=[3], rejected=[1.5])
    check({"type": "integer", "multipleOf": 7}, accepted=[0, 7, 14, -21, 700], rejected=[1, 8, -6, 15])
    check({"type": "integer", "multipleOf": 5, "minimum": 12}, accepted=[15, 100, 12345], rejected=[10, 11, 16])
    check({"type": "integer", "multipleOf": 3, "minimum": -7, "maximum": 7}, accepted=[-6, 0, 6], rejected=[-9, 9, 1])
    check({"type": "number", "multipleOf": 2}, accepted=[4], rejected=[3, 2.5])
    # a decimal step: exact decimal multiples, written without exponent
    check(
        {"type": "number", "multipleOf": 0.01},
        accepted=[T("19.99"), T("0.07"), T("10"), T("10.0"), T("10.990"), T("-4.02"), T("0")],
        rejected=[T("10.001"), T("0.075"), T("1e2"), T("1.5e-2"), T(".5"), T("1.")],
    )
    check({"type": "number", "multipleOf": 2.5, "minimum": 0, "maximum": 10},
          accepted=[0, 2.5, 5, 7.5, T("10.00")], rejected=[-2.5, 1.25, 12.5, 3])
    check({"type": "number", "multipleOf": 0.1, "exclusiveMinimum": 0}, accepted=[0.1, 3.3], rejected=[0, T("0.0"), -0.1, 0.15])
    # every step holds: multiples of the least common one (0.3 and 0.25: 1.5)
    check({"type": "number", "allOf": [{"multipleOf": 0.3}, {"multipleOf": 0.25}]}, accepted=[1.5, 3, -4.5], rejected=[0.3, 0.75])
    # an integer that is a multiple of 1.5 is one of 3
    check({"type": "integer", "multipleOf": 1.5}, accepted=[3, -6, 0], rejected=[1.5, 2, 4])
    raises(UnsupportedKeywordError, {"type": "number", "multipleOf": 0.0000123456789}, "/multipleOf", "multipleOf")
    # a remainder automaton past its budget is refused, not built (it once ran out of memory)
    raises(UnsupportedKeywordError, {"type": "integer", "multipleOf": 0.123456789}, "/multipleOf", "multipleOf")
    raises(UnsupportedKeywordError, {"type": "integer", "multipleOf": 123456789}, "/multipleOf", "multipleOf")
    raises(SchemaError, {"multipleOf": 0}, "/multipleOf")


# ---------------------------------------------------------------- objects


def test_properties_in_schema_order():
    schema = {
        "type": "object",
        "properties": {"b": {"type": "integer"}, "a": {"type": "string"}},
        "required": ["b", "a"],
        "additionalProperties": False,
    }
    check(schema, accepted=[T('{"b": 1, "a": "x"}')], rejected=[T('{"a": "x", "b": 1}'), T('{"b": 1}'), {"b": 1, "a": 2}])
    check(schema, accepted=[T('{"b":1,"a":"x"}')], rejected=[T('{"b": 1, "a": "x"}')], whitespace="compact")


def test_any_property_order():
    """property_order="any": declared properties in any order, each at most once,
    undeclared ones anywhere between them; counts, required and styles still hold."""
    schema = {
        "type": "object",
        "properties": {"b": {"type": "integer"}, "a": {"type": "string"}, "c": {"type": "boolean"}},
        "required": ["b", "a"],
        "additionalProperties": False,
    }
    for style in ("default", "compact", "flexible"):
        check(
            schema,
            accepted=[{"b": 1, "a": "x"}, {"a": "x", "b": 1}, {"c": True, "a": "x", "b": 1}, {"a": "x", "c": False, "b": 2}],
            rejected=[{"a": "x"}, {"b": 1, "a": "x", "d": 1}, {}, T('{"a": "x", "b": 1, "b": 2}'), {"b": "x", "a": 1}],
            whitespace=style,
            property_order="any",
        )
    check(schema, accepted=[{"c": True, "b": 1, "a": "x"}], rejected=[{"b": 1}], indent=2, property_order="any")
    check(
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
         "patternProperties": {"^x": {"type": "string"}}, "additionalProperties": {"type": "null"},
         "minProperties": 2, "maxProperties": 3},
        accepted=[{"x1": "s", "a": 1}, {"b": 1, "z": None, "a": 2}, {"z": None, "y": None}, {"x": "s", "b": 2, "x2": "t"}],
        rejected=[{"a": 1}, {"x1": "s", "a": 1, "b": 2, "z": None}, {"a": 1, "x": 1}, T('{"a": 1, "b": 2, "a": 3}')],
        property_order="any",
    )
    # a const object matches whatever the order of its members
    check({"const": {"k": 1, "v": [2]}}, accepted=[{"k": 1, "v": [2]}, {"v": [2], "k": 1}], rejected=[{"k": 1}],
          property_order="any")
    # nested objects and recursion: each object tracks its own members
    node = {
        "type": "object",
        "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
        "required": ["v"],
        "additionalProperties": False,
    }
    check(
        {"$defs": {"n": node}, "$ref": "#/$defs/n"},
        accepted=[{"kids": [{"v": 2}, {"kids": [], "v": 3}], "v": 1}],
        rejected=[{"kids": [{"kids": []}], "v": 1}],
        property_order="any",
    )
    # an entry that can never be written (false schema) is never offered
    check({"type": "object", "properties": {"a": False, "b": {"type": "integer"}, "c": {"type": "null"}}},
          accepted=[{"c": None, "b": 1}, {}], rejected=[{"a": 1}], property_order="any")
    raises(StructgenError, {}, property_order="sorted")


def test_optional_properties():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
        "required": ["b"],
        "additionalProperties": False,
    }
    check(
        schema,
        accepted=[{"b": 1}, {"a": 1, "b": 2}, {"b": 2, "c": 3}, {"a": 1, "b": 2, "c": 3}],
        rejected=[{}, {"a": 1}, {"a": 1, "c": 2}, {"b": 1, "d": 1}, T('{"b": 1, }'), T('{, "b": 1}')],
    )
    g = G({**schema, "required": []})
    assert g.value({}) and g.value({"c": 1}) and g.value({"a": 1, "c": 1}) and not g.ok("{ }")


def test_many_optional_properties_stay_linear():
    props = {f"p{i}": {"type": "integer"} for i in range(60)}
    node = schema_to_ir({"type": "object", "properties": props, "additionalProperties": False})
    assert ir.expanded_size(node) < 20_000


def test_additional_properties():
    base = {"type": "object", "properties": {"name": {"type": "string"}}}
    g = check(base, accepted=[{"name": "x", "extra": [1]}, {"other": 1}, {}])
    # an undeclared key may not be a declared name in disguise
    assert not g.ok('{"name": "x", "na\\u006de": 1}')
    assert not g.ok('{"name": 1}') and not g.ok('{"x": 1, "name": "y"}')  # declared ones come first
    check({**base, "additionalProperties": False}, accepted=[{"name": "x"}], rejected=[{"name": "x", "y": 1}])
    check(
        {**base, "additionalProperties": {"type": "integer"}},
        accepted=[{"name": "x", "y": 1, "z": 2}, {"n": 1}],
        rejected=[{"y": "s"}, {"name": "x", "y": None}],
    )
    check(base, accepted=[{"name": "x"}], rejected=[{"name": "x", "y": 1}], strict=True)


def test_required_not_in_properties():
    check(
        {"type": "object", "required": ["id"], "additionalProperties": {"type": "integer"}},
        accepted=[{"id": 1}, {"id": 1, "x": 2}],
        rejected=[{}, {"id": "a"}, {"x": 2}],
    )


def test_pattern_properties():
    schema = {
        "type": "object",
        "properties": {"id": {"type": "integer"}},
        "patternProperties": {"^x-": {"type": "string"}},
        "additionalProperties": False,
    }
    check(
        schema,
        accepted=[{"id": 1, "x-a": "s"}, {"x-": "t", "x-b": "u"}],
        rejected=[{"x-a": 1}, {"y": "s"}, {"id": "s"}],
    )
    # patternProperties also constrain declared properties whose names match
    check(
        {"properties": {"x-id": {"type": ["integer", "string"]}}, "patternProperties": {"^x-": {"type": "string"}}},
        accepted=[{"x-id": "a"}],
        rejected=[{"x-id": 1}],
    )
    # keys matching no pattern follow additionalProperties
    check(
        {"patternProperties": {"^a": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
        accepted=[{"ab": 1, "b": "s"}, {"b": "s"}],
        rejected=[{"b": 1}, {"ab": "s"}],
    )


def test_pattern_properties_unanchored_and_overlapping():
    schema = {
        "type": "object",
        "patternProperties": {"[0-9]{2,}": {"type": "boolean"}, "X_": {"type": "string"}},
        "additionalProperties": {"type": "integer"},
    }
    # keys matching no pattern follow additionalProperties, whatever their first character
    check(
        schema,
        accepted=[{"answer 1": 42}, {"a_x_3": 3}, {"a12": True}, {"X_y": "s"}],
        rejected=[{"a12": 1}, {"answer 1": "42"}, {"X_y": 1}, {"a12X_": True}, {"a12X_": "s"}],
    )
    # keys matching several patterns must satisfy all of their schemas
    check(
        {"patternProperties": {"a*": {"type": "integer"}, "aaa*": {"maximum": 20}}},
        accepted=[{"a": 21}, {"aaaa": 18}, {"b": 1}],
        rejected=[{"aaaa": 31}, {"aaa": "x"}],
    )
    check(
        {"patternProperties": {"f.*": True, "b.*": False}},
        accepted=[{"foo": 1}, {}],
        rejected=[{"bar": 1}, {"foobar": 1}],
    )


def test_min_max_properties():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
        "minProperties": 2,
        "maxProperties": 2,
        "additionalProperties": False,
    }
    check(schema, accepted=[{"a": 1, "b": 2}, {"b": 1, "c": 2}], rejected=[{"a": 1}, {"a": 1, "b": 2, "c": 3}, {}])
    check(
        {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "integer"}},
        accepted=[{}, {"x": 1}],
        rejected=[{"x": 1, "y": 2}],
    )
    check({"type": "object", "minProperties": 1}, accepted=[{"x": 1}], rejected=[{}])


def test_property_names():
    check(
        {"type": "object", "propertyNames": {"enum": ["a", "b"]}, "additionalProperties": {"type": "integer"}},
        accepted=[{"a": 1}, {"a": 1, "b": 2}, {}],
        rejected=[{"c": 1}],
    )
    check(
        {"type": "object", "propertyNames": {"pattern": "^[a-z]+$", "maxLength": 3}},
        accepted=[{"abc": 1}],
        rejected=[{"abcd": 1}, {"A": 1}],
    )
    check(
        {"type": "object", "properties": {"Ab": {}}, "propertyNames": {"pattern": "^[a-z]+$"}},
        accepted=[{"ab": 1}],
        rejected=[{"Ab": 1}],
    )


def test_dependencies():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "dependentRequired": {"a": ["b"]},
        "additionalProperties": False,
    }
    check(schema, accepted=[{}, {"b": 1}, {"a": 1, "b": 2}], rejected=[{"a": 1}])
    check(
        {"properties": {"a": {}, "b": {}}, "dependencies": {"a": {"required": ["b"]}}, "additionalProperties": False},
        accepted=[{"a": 1, "b": 1}, {"b": 1}],
        rejected=[{"a": 1}],
    )


# ---------------------------------------------------------------- arrays


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


# ---------------------------------------------------------------- combinators and refs


def test_any_of_and_all_of():
    check(
        {"anyOf": [{"type": "integer", "minimum": 5}, {"type": "string", "maxLength": 1}]},
        accepted=[5, "a", ""],
        rejected=[4, "ab", None],
    )
    check(
        {"allOf": [{"type": ["integer", "string"]}, {"type": ["string", "null"]}, {"minLength": 2}]},
        accepted=["ab"],
        rejected=[1, None, "a"],
    )
    # sibling keywords apply to every branch
    check(
        {
            "type": "object",
            "properties": {"kind": {"enum": ["a", "b"]}, "x": {"type": "integer"}},
            "additionalProperties": False,
            "anyOf": [{"required": ["kind"]}, {"required": ["x"]}],
        },
        accepted=[{"kind": "a"}, {"x": 1}, {"kind": "b", "x": 2}],
        rejected=[{}],
    )
    # allOf merges object members: additionalProperties sees its own subschema only
    check(
        {
            "allOf": [
                {"properties": {"a": {"type": "integer"}}, "additionalProperties": False},
                {"properties": {"b": {"type": "integer"}}},
            ]
        },
        accepted=[{"a": 1}, {}],
        rejected=[{"a": 1, "b": 2}, {"b": 2}],
    )


def test_one_of():
    check({"oneOf": [{"type": "string"}, {"type": "null"}]}, accepted=["a", None], rejected=[1])
    check({"oneOf": [{"type": "integer"}, {"type": "number"}]}, accepted=[1.5], rejected=[1, "a"])
    check(
        {
            "oneOf": [
                {"properties": {"t": {"const": "a"}, "x": {"type": "integer"}}, "required": ["t"]},
                {"properties": {"t": {"const": "b"}, "y": {"type": "string"}}, "required": ["t"]},
            ]
        },
        accepted=[{"t": "a", "x": 1}, {"t": "b", "y": "s"}],
        rejected=[{"t": "a", "x": "s"}, {"t": "c"}, {"x": 1}],
    )
    # not provably disjoint, but the other branch can be negated exactly
    check(
        {"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
        accepted=[{"a": 1}, {"b": 1}],
        rejected=[{"a": 1, "b": 2}, {}],
    )
    raises(
        UnsupportedKeywordError,
        {"oneOf": [{"type": "string", "pattern": "a"}, {"type": "string", "pattern": "b"}]},
        "/oneOf",
        "oneOf",
    )


def test_not():
    check({"not": {"type": "string"}}, accepted=[1, None, [], {}], rejected=["a"])
    check({"type": "string", "not": {"enum": ["a", "b"]}}, accepted=["", "c", "ab"], rejected=["a", "b", T('"\\u0061"')])
    check({"type": "integer", "not": {"const": 3}}, accepted=[2, 4], rejected=[3])
    check({"not": {"minimum": 3}, "type": "integer"}, accepted=[2], rejected=[3])
    check({"type": "object", "not": {"required": ["a"]}}, accepted=[{}, {"b": 1}], rejected=[{"a": 1}])
    check({"not": {}}, rejected=[1, None])
    raises(UnsupportedKeywordError, {"not": {"pattern": "a"}}, "/not", "not")


def test_if_then_else():
    schema = {
        "type": "object",
        "properties": {"kind": {"enum": ["a", "b"]}, "n": {"type": "integer"}},
        "additionalProperties": False,
        "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
        "then": {"required": ["n"]},
        "else": {"properties": {"n": {"maximum": 0}}},
    }
    check(
        schema,
        accepted=[{"kind": "a", "n": 5}, {"kind": "b", "n": -1}, {"n": 0}, {"kind": "b"}],
        rejected=[{"kind": "a"}, {"kind": "b", "n": 1}, {"n": 3}],
    )


def test_textual_property_order():
    # members of $ref, allOf and anyOf branches keep the schema's textual order
    schema = {
        "$defs": {"base": {"properties": {"id": {"type": "integer"}}, "required": ["id"]}},
        "allOf": [{"$ref": "#/$defs/base"}],
        "anyOf": [{"properties": {"kind": {"const": "a"}}, "required": ["kind"]}],
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    }
    check(schema, accepted=[{"id": 1, "kind": "a", "name": "n"}], rejected=[{"name": "n", "id": 1, "kind": "a"}])
    check(
        {"properties": {"b": {"type": "integer"}}, "$ref": "#/$defs/a", "$defs": {"a": {"properties": {"a": {}}}}},
        accepted=[{"b": 1, "a": 2}],
        rejected=[{"a": 2, "b": 1}],
    )


def test_one_of_discriminator_without_required():
    # branches overlap only on objects lacking "kind": requiring it makes them exclusive
    schema = {
        "type": "object",
        "oneOf": [
            {"properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}},
            {"properties": {"kind": {"const": "b"}, "x": {"type": "string"}}},
        ],
    }
    g = check(schema, accepted=[{"kind": "a", "x": 1}, {"kind": "b", "x": "s"}], rejected=[{"kind": "a", "x": "s"}])
    assert not g.value({"x": 1})  # documented subset: the discriminator becomes required


def test_format_with_length_bounds():
    formats = pytest.importorskip("structgen.grammar.formats")
    if formats.format_pattern("email") is None:
        pytest.skip("no email format")
    g = check(
        {"type": "string", "format": "email", "minLength": 6, "maxLength": 40},
        accepted=["a@b.co", "john.doe@example.com"],
        rejected=["a@b.c", "x" * 40 + "@example.com", "not an email"],
    )
    assert ir.expanded_size(g.node) < 5_000_000
    check(
        {"type": "string", "pattern": "^(?:\\S+\\s+){0,49}\\S+$", "maxLength": 500},
        accepted=["one two three", "x" * 10],
        rejected=["", " lead", "y" * 501],
    )


def test_strict_mode():
    schema = {
        "allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {"type": "integer"}}}],
        "additionalProperties": {"type": "integer"},
        "required": ["a"],
    }
    check(schema, accepted=[{"a": 1}, {"a": 1, "b": 2}], rejected=[{"a": 1, "c": 3}], strict=True)
    check({"type": "object", "required": ["x"]}, rejected=[{"x": 1}], strict=True)


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


# ---------------------------------------------------------------- whitespace


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


# ---------------------------------------------------------------- errors and budgets


@pytest.mark.parametrize(
    "schema, pointer",
    [
        ({"type": "strnig"}, "/type"),
        ({"properties": {"age": {"minimum": "3"}}}, "/properties/age/minimum"),
        ({"minLength": -1}, "/minLength"),
        ({"minLength": 1.5}, "/minLength"),
        ({"minLength": 3, "maxLength": 2}, "/minLength"),
        ({"minimum": 3, "maximum": 2}, "/minimum"),
        ({"required": "a"}, "/required"),
        ({"enum": []}, "/enum"),
        ({"properties": []}, "/properties"),
        ({"items": 3}, "/items"),
        ({"anyOf": []}, "/anyOf"),
        ({"allOf": [{"type": "string"}, 3]}, "/allOf/1"),
        ({"$ref": "#/$defs/missing"}, "/$ref"),
        ({"$ref": "https://example.com/schema.json"}, "/$ref"),
        ({"properties": {"a/b": {"$ref": 5}}}, "/properties/a~1b/$ref"),
        ({"type": "string", "pattern": "(unclosed"}, "/pattern"),
    ],
)
def test_schema_errors(schema, pointer):
    e = raises(SchemaError, schema, pointer)
    assert not isinstance(e, UnsupportedKeywordError) or schema.get("$ref") is None


@pytest.mark.parametrize(
    "schema, keyword, pointer",
    [
        ({"unevaluatedProperties": False}, "unevaluatedProperties", "/unevaluatedProperties"),
        ({"items": {"unevaluatedItems": False}}, "unevaluatedItems", "/items/unevaluatedItems"),
        ({"$dynamicRef": "#x"}, "$dynamicRef", "/$dynamicRef"),
        ({"type": "string", "pattern": "(?=a)b"}, "pattern", "/pattern"),
    ],
)
def test_unsupported_keywords(schema, keyword, pointer):
    raises(UnsupportedKeywordError, schema, pointer, keyword)


def test_lenient_and_unknown_keywords():
    check({"type": "integer", "x-foo": 1, "javaType": "Int", "unevaluatedProperties": False}, accepted=[1], lenient=True)
    check({"type": "integer", "x-foo": 1, "nullable": True}, accepted=[1], rejected=[None])
    raises(UnsupportedKeywordError, {"type": "integer", "javaType": "x"}, "/javaType", "javaType", unknown_keywords="error")
    with pytest.raises(StructgenError):
        JsonOptions(whitespace="pretty")
    with pytest.raises(SchemaError):
        schema_to_ir("{not json")
    with pytest.raises(SchemaError):
        schema_to_ir([1, 2])


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


def test_canonical_key():
    a = canonical_key({"type": "string", "maxLength": 3}, JsonOptions())
    assert a == canonical_key({"type": "string", "maxLength": 3}, JsonOptions())
    assert a != canonical_key({"type": "string", "maxLength": 3}, JsonOptions(whitespace="compact"))
    # property order matters (it decides the emitted order)
    assert canonical_key({"properties": {"a": {}, "b": {}}}) != canonical_key({"properties": {"b": {}, "a": {}}})


# ---------------------------------------------------------------- differential: maskbench-dev


def _maskbench_files():
    return sorted(MASKBENCH.glob("*.json")) if MASKBENCH.is_dir() else []


@pytest.mark.skipif(not MASKBENCH.is_dir(), reason="../shared/data is not beside the checkout")
def test_maskbench_differential():
    """Every accepted instance must be valid (jsonschema, draft from $schema, default
    2020-12). Runs a deterministic sample to stay fast; the full run is in the report."""
    files = _maskbench_files()
    everything = os.environ.get("STRUCTGEN_MASKBENCH_ALL") == "1"  # the full run (minutes)
    sample = files if everything else random.Random(1234).sample(files, min(len(files), 220))
    counts = {"compiled": 0, "refused": 0, "valid": 0, "valid_accepted": 0, "invalid": 0, "invalid_accepted": 0}
    unsound = []
    deadline = time.monotonic() + (10**6 if everything else 45)
    for path in sample:
        if time.monotonic() > deadline:
            break
        data = json.loads(path.read_text())
        try:
            node = schema_to_ir(data["schema"], JsonOptions(), languages=AUTOMATA)
        except StructgenError as e:
            assert str(e)
            counts["refused"] += 1
            continue
        counts["compiled"] += 1
        try:
            cls = jsonschema.validators.validator_for(data["schema"], default=jsonschema.Draft202012Validator)
            validator = cls(data["schema"])
        except Exception:
            continue
        accepts = _acceptor(node)
        for t in data["tests"]:
            try:
                truth = validator.is_valid(t["data"])
            except Exception:
                continue
            accepted = accepts(json.dumps(t["data"]).encode())
            key = "valid" if truth else "invalid"
            counts[key] += 1
            counts[key + "_accepted"] += accepted
            if accepted and not truth:
                unsound.append((path.name, json.dumps(t["data"])[:200]))
    print("\nmaskbench sample:", counts)
    assert not unsound, unsound[:5]
    assert counts["compiled"] >= 0.8 * (counts["compiled"] + counts["refused"])
    assert counts["valid_accepted"] >= 0.8 * counts["valid"]


# ---------------------------------------------------------------- property tests

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(st.characters(codec="utf-8"), max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(alphabet="abcxyz", max_size=3), inner, max_size=4),
    max_leaves=12,
)

PROPERTY_SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "minimum": -5, "maximum": 100},
            "b": {"type": "string", "maxLength": 3},
            "c": {"type": "array", "items": {"type": ["boolean", "null"]}, "maxItems": 3},
        },
        "required": ["a"],
        "additionalProperties": False,
    },
    {"anyOf": [{"type": "string", "pattern": "^[a-c]*$"}, {"type": "number", "exclusiveMinimum": 0}, {"type": "null"}]},
    {
        "type": "object",
        "properties": {"x": {"enum": [1, "a", None, [1]]}},
        "patternProperties": {"^b": {"type": "boolean"}},
        "additionalProperties": {"type": "integer"},
        "maxProperties": 3,
    },
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": {"type": "object", "maxProperties": 1}},
    {"not": {"type": ["object", "array"]}, "oneOf": [{"type": "string"}, {"type": "number", "minimum": 0}]},
    {
        "type": "object",
        "patternProperties": {"a": {"type": "integer"}, "b|c": {"type": ["integer", "string"]}},
        "additionalProperties": {"type": ["null", "boolean"]},
        "propertyNames": {"maxLength": 2},
    },
    {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "string"}, "z": {}},
        "oneOf": [{"required": ["x"]}, {"required": ["y"]}],
        "dependentRequired": {"z": ["x"]},
        "additionalProperties": False,
    },
]


def _python_compatible(v) -> bool:
    """Values whose json.dumps text parses back to an equal value (floats from width=32
    strategies are exact), so validity of the value and of the text agree."""
    return json.loads(json.dumps(v)) == v


def _in_documented_subset(v, order: list[str], depth: int = 0, max_depth: int = 4) -> bool:
    """False for valid values the grammar documents it may refuse: integral floats
    ("1.0" for an integer), nesting deeper than the any-value bound (checked loosely)."""
    if isinstance(v, float) and v.is_integer():
        return False
    if isinstance(v, (list, dict)):
        if depth >= max_depth:
            return False
        items = v.values() if isinstance(v, dict) else v
        return all(_in_documented_subset(x, [], depth + 1, max_depth) for x in items)
    return True


def _reorder(v, order: list[str]):
    """Declared properties first, in schema order (the documented emission order)."""
    if not isinstance(v, dict):
        return v
    head = {k: v[k] for k in order if k in v}
    return {**head, **{k: x for k, x in v.items() if k not in head}}


@pytest.mark.parametrize("index", range(len(PROPERTY_SCHEMAS)))
@pytest.mark.parametrize("style", ["default", "compact", "indent", "flexible"])
def test_property_accepted_iff_valid(index, style):
    schema = PROPERTY_SCHEMAS[index]
    options = {"indent": 2} if style == "indent" else {"whitespace": style}
    g = G(schema, **options, max_any_depth=4)
    spellings = [lambda v: dumps(v, g.options)]
    if style == "flexible":
        spellings += [lambda v: json.dumps(v, indent=2), lambda v: json.dumps(v, separators=(",", ":"))]
    validator = jsonschema.Draft202012Validator(schema)

    @settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(json_values)
    def run(v):
        if not _python_compatible(v):
            return
        order = list(schema.get("properties", {}))
        v = _reorder(v, order)
        valid = validator.is_valid(v)
        for spell in spellings:
            accepted = g.ok(spell(v))
            assert not (accepted and not valid), f"accepted an invalid value {spell(v)!r}"
            if valid and _in_documented_subset(v, order):
                assert accepted, f"rejected a valid value {spell(v)!r}"

    run()


@pytest.mark.parametrize("index", range(len(PROPERTY_SCHEMAS)))
@pytest.mark.parametrize("style", ["default", "flexible"])
def test_property_any_order_accepted_iff_valid(index, style):
    """property_order="any": values in whatever key order hypothesis produces (and
    shuffled) are accepted exactly when they are valid."""
    schema = PROPERTY_SCHEMAS[index]
    g = G(schema, whitespace=style, max_any_depth=4, property_order="any")
    validator = jsonschema.Draft202012Validator(schema)

    @settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(json_values, st.randoms(use_true_random=False))
    def run(v, rnd):
        if not _python_compatible(v):
            return
        if isinstance(v, dict):
            keys = list(v)
            rnd.shuffle(keys)
            v = {k: v[k] for k in keys}
        valid = validator.is_valid(v)
        accepted = g.value(v)
        assert not (accepted and not valid), f"accepted an invalid value {v!r}"
        if valid and _in_documented_subset(v, []):
            assert accepted, f"rejected a valid value {v!r}"

    run()


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.text(st.characters(codec="utf-8"), max_size=8), st.integers(0, 3), st.integers(0, 6))
def test_property_string_lengths(text, lo, extra):
    schema = {"type": "string", "minLength": lo, "maxLength": lo + extra}
    g = G(schema)
    assert g.value(text) == (lo <= len(text) <= lo + extra)
    assert g.ok(json.dumps(text, ensure_ascii=False)) == (lo <= len(text) <= lo + extra)


# ---------------------------------------------------------------- random schemas: soundness fuzz

KEYS = ["a", "b", "ab", "x-1"]
PATTERNS = ["^a", "b", "^[ab]+$", "[0-9]", "^x-"]
scalars = st.none() | st.booleans() | st.integers(-3, 12) | st.sampled_from([0.5, -1.5, 2.0, 10.25]) | st.sampled_from(["", "a", "b", "ab", "x-1", "a1", "zzz"])
small_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS + ["c", "1"]), inner, max_size=3),
    max_leaves=6,
)


def _schemas(depth: int):
    leaf = st.one_of(
        st.booleans(),
        st.fixed_dictionaries({"type": st.sampled_from(["string", "integer", "number", "null", "boolean", "array", "object"])}),
        st.fixed_dictionaries({"type": st.sampled_from([["string", "null"], ["integer", "array"]])}),
        st.fixed_dictionaries({"const": scalars}),
        st.fixed_dictionaries({"enum": st.lists(scalars, min_size=1, max_size=4)}),
        st.fixed_dictionaries({"minimum": st.integers(-2, 8)}),
        st.fixed_dictionaries({"exclusiveMaximum": st.sampled_from([0, 3, 7.5])}),
        st.fixed_dictionaries({"minLength": st.integers(0, 2), "maxLength": st.integers(2, 3)}),
        st.fixed_dictionaries({"pattern": st.sampled_from(PATTERNS)}),
        st.fixed_dictionaries({"pattern": st.sampled_from(PATTERNS), "maxLength": st.integers(1, 3)}),
        st.fixed_dictionaries({"required": st.lists(st.sampled_from(KEYS), max_size=2, unique=True)}),
        st.fixed_dictionaries({"minItems": st.integers(0, 2)}),
        st.fixed_dictionaries({"maxProperties": st.integers(0, 2)}),
        st.fixed_dictionaries({"minProperties": st.integers(1, 2)}),
        # steps a double holds exactly, so that jsonschema's float division is exact too
        st.fixed_dictionaries({"multipleOf": st.sampled_from([1, 2, 3, 0.5, 0.25])}),
        st.fixed_dictionaries({"dependentRequired": st.fixed_dictionaries({"a": st.lists(st.sampled_from(["b", "ab"]), min_size=1, max_size=2, unique=True)})}),
    )
    if depth == 0:
        return leaf
    sub = _schemas(depth - 1)
    return st.one_of(
        leaf,
        st.fixed_dictionaries(
            {"properties": st.dictionaries(st.sampled_from(KEYS), sub, max_size=2)},
            optional={
                "additionalProperties": sub,
                "patternProperties": st.dictionaries(st.sampled_from(PATTERNS), sub, max_size=2),
                "required": st.lists(st.sampled_from(KEYS), max_size=2, unique=True),
            },
        ),
        st.fixed_dictionaries({"items": sub}, optional={"prefixItems": st.lists(sub, max_size=2), "maxItems": st.integers(0, 3)}),
        st.fixed_dictionaries({"contains": sub}, optional={"minContains": st.integers(0, 2), "maxContains": st.integers(1, 2)}),
        st.fixed_dictionaries({"propertyNames": st.fixed_dictionaries({"pattern": st.sampled_from(PATTERNS)})}),
        st.fixed_dictionaries({"anyOf": st.lists(sub, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"oneOf": st.lists(sub, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"allOf": st.lists(sub, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"not": sub}),
        st.fixed_dictionaries({"if": sub, "then": sub}, optional={"else": sub}),
        st.fixed_dictionaries({"uniqueItems": st.just(True), "items": st.fixed_dictionaries({"enum": st.lists(scalars, min_size=1, max_size=3)})}),
    )


FUZZ = {"schemas": 0, "compiled": 0, "values": 0, "valid": 0, "valid_accepted": 0}


@settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(_schemas(2), st.lists(small_values, min_size=12, max_size=12))
def test_fuzz_random_schemas_are_sound(schema, values):
    """Random schemas over a small vocabulary: whatever compiles never accepts an
    invalid value (checked against jsonschema, draft 2020-12), in either property order."""
    FUZZ["schemas"] += 1
    try:
        g = G(schema, max_any_depth=3, timeout_s=5)
        any_order = G(schema, max_any_depth=3, timeout_s=5, property_order="any")
    except StructgenError:
        return
    FUZZ["compiled"] += 1
    validator = jsonschema.Draft202012Validator(schema)
    for v in values:
        text = json.dumps(v)
        valid = validator.is_valid(v)
        accepted = g.ok(text)
        FUZZ["values"] += 1
        FUZZ["valid"] += valid
        FUZZ["valid_accepted"] += valid and accepted
        assert valid or not accepted, f"accepted invalid {text} for {json.dumps(schema)}"
        assert valid or not any_order.ok(text), f"accepted invalid {text} in any order for {json.dumps(schema)}"
        assert any_order.ok(text) or not accepted, f"any order refused {text}, schema order took it"


def test_a_decimal_step_is_built_by_the_automata_it_is_given():
    """grammar/ never builds an automaton: `multipleOf` with a decimal step takes the
    automata's answers from its caller, and says so when it has none."""
    schema = {"type": "number", "multipleOf": 0.1}
    node = schema_to_ir(schema, languages=AUTOMATA)
    assert ir_accepts(node, b"0.3") and ir_accepts(node, b"-1.2") and not ir_accepts(node, b"0.35")
    with pytest.raises(UnsupportedKeywordError, match="multipleOf") as caught:
        schema_to_ir(schema)
    assert caught.value.pointer == "/multipleOf"

"""JSON Schema -> IR for numbers: bounds (draft-04 boolean exclusives too) and `multipleOf`,
integer and decimal steps, checked against exact arithmetic; a decimal step is built by
the automata the caller gives.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from structgen.automata.languages import AUTOMATA
from structgen.errors import SchemaError, UnsupportedKeywordError
from structgen.grammar.acceptor import ir_accepts
from structgen.grammar.json_schema import schema_to_ir
from tests.grammar.schema_checks import G, T, check, raises


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


def test_a_decimal_step_is_built_by_the_automata_it_is_given():
    """grammar/ never builds an automaton: `multipleOf` with a decimal step takes the
    automata's answers from its caller, and says so when it has none."""
    schema = {"type": "number", "multipleOf": 0.1}
    node = schema_to_ir(schema, languages=AUTOMATA)
    assert ir_accepts(node, b"0.3") and ir_accepts(node, b"-1.2") and not ir_accepts(node, b"0.35")
    with pytest.raises(UnsupportedKeywordError, match="multipleOf") as caught:
        schema_to_ir(schema)
    assert caught.value.pointer == "/multipleOf"

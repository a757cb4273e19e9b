"""Generators of hostile input (hypothesis strategies), for the fuzz benchmark and the
tests: JSON Schemas using every keyword with sensible and wrong values, nested deep and
wide; regexes; lark and GBNF grammars; request bodies with known and unknown fields.
Owns the shapes of the input only; what is checked of the answers is the caller's.
"""

from __future__ import annotations

from hypothesis import strategies as st

ODD_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**20), st.floats(allow_nan=True),
                       st.text(max_size=6), st.lists(st.integers(-2, 5), max_size=3))
PATTERNS = st.sampled_from(["^a+$", "[0-9]{2,4}", "(x|y)*z", "(", "\\d+(?=a)", "(a)\\1", "[^\\s]{0,3}", ".*"])
FORMATS = st.sampled_from(["date", "email", "uuid", "ipv4", "date-time", "no-such-format", "uri"])
TYPES = st.sampled_from(["string", "integer", "number", "boolean", "null", "object", "array", "strnig"])


def keyword_schemas(children):
    """One subschema: a few keywords, each with a sensible or a hostile value."""
    entries = st.one_of(
        st.tuples(st.just("type"), st.one_of(TYPES, st.lists(TYPES, max_size=3), ODD_VALUES)),
        st.tuples(st.sampled_from(["minLength", "maxLength", "minItems", "maxItems", "minProperties",
                                   "maxProperties", "minContains", "maxContains"]),
                  st.one_of(st.integers(-1, 40), ODD_VALUES)),
        st.tuples(st.sampled_from(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]),
                  st.one_of(st.integers(-10**6, 10**6), st.floats(-1e9, 1e9), st.just(0), ODD_VALUES)),
        st.tuples(st.just("pattern"), st.one_of(PATTERNS, ODD_VALUES)),
        st.tuples(st.just("format"), st.one_of(FORMATS, ODD_VALUES)),
        st.tuples(st.sampled_from(["enum", "const"]), st.one_of(st.lists(ODD_VALUES, max_size=4), ODD_VALUES)),
        st.tuples(st.sampled_from(["items", "not", "additionalProperties", "contains", "propertyNames",
                                   "if", "then", "else"]), st.one_of(children, ODD_VALUES)),
        st.tuples(st.sampled_from(["anyOf", "allOf", "oneOf", "prefixItems"]),
                  st.one_of(st.lists(children, max_size=4), ODD_VALUES)),
        st.tuples(st.sampled_from(["properties", "patternProperties", "$defs", "dependentSchemas"]),
                  st.one_of(st.dictionaries(st.sampled_from(["a", "b", "^c", "d/e", "~f"]), children, max_size=3),
                            ODD_VALUES)),
        st.tuples(st.just("required"), st.one_of(st.lists(st.sampled_from(["a", "b", "z"]), max_size=3), ODD_VALUES)),
        st.tuples(st.just("$ref"), st.sampled_from(["#", "#/$defs/a", "#/properties/a", "#/nowhere", "http://x/y",
                                                    "#/$defs/b/items"])),
        st.tuples(st.sampled_from(["uniqueItems", "unevaluatedProperties", "maxLenght", "$dynamicRef"]), ODD_VALUES),
    )
    return st.lists(entries, max_size=5).map(dict)


SCHEMAS = st.recursive(st.one_of(st.booleans(), keyword_schemas(st.just({}))), keyword_schemas, max_leaves=40)


def nested(schema, levels: int, keyword: str):
    for _ in range(levels):
        schema = {keyword: schema} if keyword != "anyOf" else {"anyOf": [schema, True]}
    return schema


DEEP_SCHEMAS = st.builds(nested, SCHEMAS, st.integers(0, 1500), st.sampled_from(["items", "not", "anyOf", "additionalProperties"]))



REGEX_PIECES = st.sampled_from(["a", "b", "[0-9]", "[^a]", ".", "\\d", "\\w", "(", ")", "|", "*", "+", "?",
                                "{2}", "{1,3}", "{,", "^", "$", "\\", "(?:", "(?=", "\\1", "[", "]", "é", "\\u00e9"])
REGEXES = st.lists(REGEX_PIECES, min_size=1, max_size=14).map("".join)

HOSTILE_TERMINALS = ['"a"', '"b"', '"("', "/[0-9]+/", "/x|y/", '"ab"i', "NUMBER", '""']
RULES = ["r0", "r1", "r2"]
ODD_LINES = ["%import common.NUMBER", '%ignore " "', "%import nothing.X", "(", 'r3: r3 "a"', 'start: "b"']


@st.composite
def lark_grammars(draw, terminals=tuple(HOSTILE_TERMINALS), odd_lines: bool = True):
    """Rules r0..r2 (start: r0) over `terminals` and one another, with repetition and
    optionals; with odd_lines, a few lines that imports, redefinitions or bad syntax make."""
    lines = ["start: r0"]
    for name in RULES:
        alternatives = []
        for _ in range(draw(st.integers(1, 3))):
            symbols = [draw(st.sampled_from(list(terminals) + RULES)) + draw(st.sampled_from(["", "", "", "?", "*", "+"]))
                       for _ in range(draw(st.integers(1, 3)))]
            alternatives.append(" ".join(symbols))
        lines.append(f"{name}: " + " | ".join(alternatives))
    if odd_lines:
        lines += draw(st.lists(st.sampled_from(ODD_LINES), max_size=2))
    return "\n".join(lines) + "\n"


@st.composite
def gbnf_grammars(draw):
    """The same shapes written as GBNF (`::=`, `root`)."""
    text = draw(lark_grammars())
    return text.replace("start:", "root ::=").replace("r0:", "r0 ::=").replace("r1:", "r1 ::=").replace("r2:", "r2 ::=")


JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
                         st.text(max_size=20))
ANY_JSON = st.recursive(JSON_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                              st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                        max_leaves=20)
FIELDS = ["model", "messages", "max_tokens", "temperature", "top_p", "n", "stop", "seed", "stream", "logprobs",
          "top_logprobs", "response_format", "structured_outputs", "tools", "tool_choice", "parallel_tool_calls",
          "frequency_penalty", "max_completion_tokens", "user", "no_such_field"]


@st.composite
def request_bodies(draw):
    """A chat request with a few fields of any JSON value, or a plausible one."""
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=4, unique=True)):
        body[name] = draw(ANY_JSON)
    return body

"""Tool sets share their tools' compiled alternatives (json_schema/alternatives.py): a set
that differs from one compiled before compiles only its new tools, wherever the others
sit, and its masks are those of a cold compile of the same set, on random walks with the
SmolLM2 vocabulary; each tool's `$ref`s resolve in its own `$defs`, and its errors point
into it."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

import structgen
from server.protocol import Tool
from server.tool_calls import TOOL_TAGS, call_schema, tool_parameter_at
from structgen.errors import SchemaError
from structgen.grammar.json_schema import alternatives_info
from tests.automata.test_flat import same_masks_on_walks


class Address(BaseModel):
    street: str
    city: str
    zip: int


class Person(BaseModel):
    name: str
    age: int
    home: Address  # {"$ref": "#/$defs/Address"} with $defs beside properties


def tool(name: str, parameters: dict, strict: bool | None = None) -> Tool:
    return Tool(function={"name": name, "parameters": parameters, "strict": strict})


def refers(to: dict) -> dict:
    """Parameters whose one property is a `$ref` to their own `$defs/X`, X being `to`."""
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/X"}}, "required": ["x"],
            "additionalProperties": False, "$defs": {"X": to}}


TOOLS = [
    tool("get_weather", {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                                           "unit": {"enum": ["c", "f"]}}, "required": ["city"]},
         strict=True),
    tool("add_person", Person.model_json_schema()),
    tool("count", refers({"type": "integer", "minimum": 0, "maximum": 999})),
    tool("label", refers({"type": "string", "pattern": "^[a-z]{1,8}$"})),
    tool("move", {"type": "object", "properties": {"steps": {"type": "array", "items": {"type": "number"},
                                                             "maxItems": 4}, "fast": {"type": "boolean"}}}),
    tool("note", {"type": "object", "properties": {"text": {"type": "string"}, "tags": {
        "type": "array", "items": {"enum": ["a", "b"]}}}, "required": ["text"], "additionalProperties": False}),
]
NEW = tool("search", {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
                      "required": ["query"]})


def compiled(tools: list[Tool], vocab, parallel: bool = False):
    schema = call_schema(tools)
    return structgen.compile_tool_calls(schema.schema, vocab, allow_text=True, parallel=parallel,
                                        strict_pointers=schema.strict_pointers)


def compiled_counting(tools: list[Tool], vocab) -> tuple[object, int, int]:
    """The grammar of `tools`, and how many alternatives it took from the cache and compiled."""
    before = alternatives_info()
    grammar = compiled(tools, vocab)
    after = alternatives_info()
    return grammar, after["hits"] - before["hits"], after["misses"] - before["misses"]


def call(name: str, arguments: dict) -> bytes:
    return f"{TOOL_TAGS[0]}{json.dumps({'name': name, 'arguments': arguments})}{TOOL_TAGS[1]}".encode()


@pytest.fixture
def cold():
    structgen.clear_cache()
    yield
    structgen.clear_cache()


def test_a_set_with_one_tool_replaced_compiles_only_that_tool(cold, smollm2_vocab):
    _, hits, misses = compiled_counting(TOOLS, smollm2_vocab)
    assert (hits, misses) == (0, len(TOOLS))
    _, hits, misses = compiled_counting(TOOLS[:-1] + [NEW], smollm2_vocab)
    assert (hits, misses) == (len(TOOLS) - 1, 1)


def test_a_tool_at_another_index_reuses_its_alternative(cold, smollm2_vocab):
    compiled(TOOLS[:3], smollm2_vocab)
    moved = [NEW, TOOLS[2], TOOLS[0], TOOLS[1]]  # every old tool at a new index
    _, hits, misses = compiled_counting(moved, smollm2_vocab)
    assert (hits, misses) == (3, 1)
    first, second = call_schema(TOOLS[:3]), call_schema(moved)
    assert first.schema["anyOf"][0] == second.schema["anyOf"][2]  # the same $id, wherever it sits


def test_reused_alternatives_give_the_masks_of_a_cold_compile(cold, smollm2_vocab):
    compiled(TOOLS, smollm2_vocab, parallel=True)
    changed = [TOOLS[3], NEW, *TOOLS[:3], TOOLS[5]]
    reused, hits, _ = compiled_counting(changed, smollm2_vocab)
    assert hits == 5
    structgen.clear_cache()
    fresh, hits, misses = compiled_counting(changed, smollm2_vocab)
    assert (hits, misses) == (0, len(changed)) and fresh is not reused
    same_masks_on_walks(reused, fresh, smollm2_vocab, walks=16, steps=80)


def test_each_tools_refs_resolve_in_its_own_defs_wherever_it_sits(cold, smollm2_vocab):
    count, label = TOOLS[2], TOOLS[3]  # both refer to "#/$defs/X": an integer, a string
    for tools in ([count, label], [label, count], [NEW, label, count]):
        grammar = compiled(tools, smollm2_vocab)
        assert grammar.accepts_bytes(call("count", {"x": 12}))
        assert not grammar.accepts_bytes(call("count", {"x": "ab"}))
        assert grammar.accepts_bytes(call("label", {"x": "ab"}))
        assert not grammar.accepts_bytes(call("label", {"x": 12}))


def test_a_tools_error_points_into_that_tool_even_from_the_cache_of_the_others(cold, smollm2_vocab):
    broken = tool("broken", {"type": "object", "properties": {"a": {"type": "text"}}})
    compiled(TOOLS[:2], smollm2_vocab)
    schema = call_schema([*TOOLS[:2], broken])
    with pytest.raises(SchemaError) as err:
        structgen.compile_tool_calls(schema.schema, smollm2_vocab)
    assert tool_parameter_at(schema.parameter_pointers, err.value.pointer) == (2, "/properties/a/type")
    assert f"(at {err.value.pointer})" in str(err.value)


def test_the_alternatives_kept_stay_within_their_text_budget(cold, smollm2_vocab, monkeypatch):
    from structgen.grammar.json_schema import alternatives

    monkeypatch.setattr(alternatives, "MAX_CACHED_TEXT", 600)
    for round_ in range(3):
        compiled([tool(f"t{round_}_{i}", {"type": "object", "properties": {f"p{round_}_{i}": {"type": "integer"}}})
                  for i in range(4)], smollm2_vocab)
        info = alternatives_info()
        assert 0 < info["text"] <= 600
        assert info["size"] < 4 * (round_ + 1)  # the oldest were dropped
    grammar, hits, misses = compiled_counting([tool("t2_3", {"type": "object", "properties": {
        "p2_3": {"type": "integer"}}})], smollm2_vocab)
    assert hits == 1 and misses == 0  # the newest one is still kept

"""Tool calls on the wire (server/tool_calls.py) and their grammar: the union of the
tools' calls, each tool's `$ref`s resolved in its own parameters, per-tool strict mode,
one call or several, and calls read back from complete and cut-off outputs."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

import structgen
from server.protocol import Tool
from server.tool_calls import TOOL_TAGS, call_schema, calls_from_text, tool_parameter_at


class Address(BaseModel):
    street: str
    city: str


class Person(BaseModel):
    name: str
    home: Address  # pydantic writes {"$ref": "#/$defs/Address"} with $defs beside properties


def tool(name: str, parameters: dict, strict: bool | None = None) -> Tool:
    return Tool(function={"name": name, "parameters": parameters, "strict": strict})


WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
           "additionalProperties": True}
TOOLS = [tool("get_weather", WEATHER, strict=True), tool("add_person", Person.model_json_schema())]


def tagged(name: str, arguments: dict) -> str:
    return f"{TOOL_TAGS[0]}{json.dumps({'name': name, 'arguments': arguments})}{TOOL_TAGS[1]}"


@pytest.fixture(scope="module")
def calls(smollm2_vocab):
    schema = call_schema(TOOLS)

    def compile_calls(parallel: bool):
        return structgen.compile_tool_calls(schema.schema, smollm2_vocab, allow_text=False, parallel=parallel,
                                            strict_pointers=schema.strict_pointers)
    return compile_calls


PERSON_CALL = tagged("add_person", {"name": "Ann", "home": {"street": "Rue 1", "city": "Paris"}})
WEATHER_CALL = tagged("get_weather", {"city": "Rome"})


def test_each_tools_refs_resolve_in_its_own_parameters(calls):
    one = calls(parallel=False)
    assert one.accepts_bytes(PERSON_CALL.encode())
    assert not one.accepts_bytes(tagged("add_person", {"name": "Ann", "home": {"street": 1, "city": "P"}}).encode())


def test_a_strict_tool_gets_no_undeclared_property_and_the_other_tool_keeps_its_own(calls):
    one = calls(parallel=False)
    assert one.accepts_bytes(WEATHER_CALL.encode())
    assert not one.accepts_bytes(tagged("get_weather", {"city": "Rome", "when": "now"}).encode())


def test_parallel_calls_follow_one_another_and_single_means_one(calls):
    assert calls(parallel=True).accepts_bytes((WEATHER_CALL + PERSON_CALL).encode())
    assert not calls(parallel=False).accepts_bytes((WEATHER_CALL + PERSON_CALL).encode())
    assert not calls(parallel=True).accepts_bytes(b"")


def test_calls_read_back_whole_and_cut_off():
    names = ["get_weather", "add_person"]
    both = calls_from_text(WEATHER_CALL + PERSON_CALL, names, complete=True)
    assert [name for name, _ in both] == names and json.loads(both[0][1]) == {"city": "Rome"}
    partial = TOOL_TAGS[0] + '{"name": "add_person", "arguments": {"name": "An'
    assert PERSON_CALL.startswith(partial)
    cut = calls_from_text(WEATHER_CALL + partial, names, complete=False)
    assert cut == [both[0], ("add_person", '{"name": "An')]
    assert calls_from_text(TOOL_TAGS[0] + '{"name": "add_', names, complete=False) == [("add_person", "")]
    assert calls_from_text(TOOL_TAGS[0] + '{"na', names, complete=False) == [("", "")]
    assert calls_from_text(TOOL_TAGS[0] + '{"na', names[:1], complete=False) == [("get_weather", "")]
    with pytest.raises(json.JSONDecodeError):
        calls_from_text(partial, names, complete=True)


def test_schema_errors_point_into_the_tool():
    schema = call_schema(TOOLS)
    assert tool_parameter_at(schema.parameter_pointers, "/anyOf/1/properties/arguments/properties/home") == (
        1, "/properties/home")
    assert tool_parameter_at(schema.parameter_pointers, "/anyOf/1/properties/name") is None

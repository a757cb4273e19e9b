"""From an API request to the grammar that constrains its output.

Reads `response_format`, vLLM's `structured_outputs` and `tools`/`tool_choice`, compiles
the grammar (cached by the compiler; a cold compile runs in a worker thread so the
event loop and the engine loop never wait on it) and says how to read the output back
(plain text, or tool calls). Errors are structgen's own (`StructgenError` with a JSON
pointer or position), turned into 400s by `app.py`. Never touches the engine.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from typing import Any

import structgen
from server.protocol import ChatCompletionRequest, CompletionRequest
from structgen.errors import StructgenError

ANY_OBJECT = {"type": "object"}


class UnsupportedRequestError(StructgenError):
    """A request option structgen does not implement; `param` names it."""

    def __init__(self, param: str, message: str):
        self.param = param
        super().__init__(message)


@dataclass
class OutputSpec:
    """What constrains a request's output and how the output is read back."""

    kind: str | None = None  # "json_schema", "regex", "choice", "grammar" or None (free text)
    source: Any = None
    tool_names: list[str] | None = None  # set when the output is a tool call
    single_tool: str | None = None  # a named tool_choice: the output is its arguments
    auto_tools: bool = False  # tool_choice "auto": free text, or one call between TOOL_TAGS
    param: str = "response_format"  # which request field the grammar came from
    options: dict | None = None  # extra compile_json_schema options (property_order)


def output_spec(request: ChatCompletionRequest | CompletionRequest) -> OutputSpec:
    """Which grammar the request asks for (at most one source may be given)."""
    specs = []
    fmt = request.response_format
    if fmt is not None and fmt.type != "text":
        if fmt.type == "json_object":
            specs.append(OutputSpec("json_schema", ANY_OBJECT))
        else:
            if fmt.json_schema is None or fmt.json_schema.schema_ is None:
                raise UnsupportedRequestError("response_format.json_schema",
                                              "response_format json_schema needs json_schema.schema")
            specs.append(OutputSpec("json_schema", fmt.json_schema.schema_))
    so = request.structured_outputs
    if so is not None:
        given = [(k, v) for k, v in (("json", so.json_), ("regex", so.regex), ("choice", so.choice),
                                     ("grammar", so.grammar)) if v is not None]
        if len(given) != 1:
            raise UnsupportedRequestError("structured_outputs", "give exactly one of json, regex, choice, grammar")
        key, value = given[0]
        if so.whitespace_pattern is not None:
            raise UnsupportedRequestError(
                "structured_outputs.whitespace_pattern",
                "whitespace_pattern is not supported: JSON is written with json.dumps separators",
            )
        options = None
        if so.property_order is not None:
            if key != "json":
                raise UnsupportedRequestError("structured_outputs.property_order",
                                              "property_order applies to structured_outputs.json only")
            options = {"property_order": so.property_order}
        if key == "grammar":
            value = (value, _grammar_syntax(value))
        if key == "json":
            value = json.loads(value) if isinstance(value, str) else value
            key = "json_schema"
        specs.append(OutputSpec(key, value, param=f"structured_outputs.{given[0][0]}", options=options))
    tool_spec = _tool_spec(request) if isinstance(request, ChatCompletionRequest) else None
    if tool_spec is not None:
        specs.append(tool_spec)
    if len(specs) > 1:
        raise UnsupportedRequestError("response_format",
                                      "give only one of response_format, structured_outputs, forced tool calls")
    return specs[0] if specs else OutputSpec()


TOOL_TAGS = ("<tool_call>", "</tool_call>")


def _tool_spec(request: ChatCompletionRequest) -> OutputSpec | None:
    """A forced tool call (tool_choice "required" or a named function) is constrained to
    the function's parameters; "auto" (the default when tools are given) allows free text
    or one call between TOOL_TAGS, constrained once the tag starts; "none" is free text."""
    choice = request.tool_choice
    tools = request.tools or []
    if choice == "none" or (choice in (None, "auto") and not tools):
        return None
    if choice in (None, "auto"):
        spec = _call_spec(tools)
        return OutputSpec("tool_calls", spec.source, tool_names=spec.tool_names, auto_tools=True, param="tools")
    if not tools:
        raise UnsupportedRequestError("tool_choice", "tool_choice needs tools")
    if not isinstance(choice, str):
        name = choice.function.get("name")
        match = [t for t in tools if t.function.name == name]
        if not match:
            raise UnsupportedRequestError("tool_choice", f"no tool named {name!r} in tools")
        params = match[0].function.parameters or ANY_OBJECT
        return OutputSpec("json_schema", params, single_tool=name, param="tools")
    return _call_spec(tools)


def _call_spec(tools: list) -> OutputSpec:
    """One call of any of the tools: {"name": ..., "arguments": {...}}."""
    variants = [{
        "type": "object",
        "properties": {"name": {"const": t.function.name},
                       "arguments": t.function.parameters or ANY_OBJECT},
        "required": ["name", "arguments"], "additionalProperties": False,
    } for t in tools]
    schema = variants[0] if len(variants) == 1 else {"anyOf": variants}
    return OutputSpec("json_schema", schema, tool_names=[t.function.name for t in tools], param="tools")


async def compile_spec(spec: OutputSpec, vocab: Any) -> tuple[Any, float, bool]:
    """(compiled grammar or None, seconds, cache hit). Cold compiles run in a thread."""
    if spec.kind is None:
        return None, 0.0, False
    hits_before = structgen.cache_info()["hits"]
    started = time.perf_counter()
    grammar = await asyncio.to_thread(_compile, spec, vocab)
    hit = structgen.cache_info()["hits"] > hits_before
    return grammar, time.perf_counter() - started, hit


def _compile(spec: OutputSpec, vocab: Any) -> Any:
    if spec.kind == "json_schema":
        return structgen.compile_json_schema(spec.source, vocab, **(spec.options or {}))
    if spec.kind == "regex":
        return structgen.compile_regex(spec.source, vocab)
    if spec.kind == "grammar":
        text, syntax = spec.source
        return structgen.compile_grammar(text, vocab, syntax=syntax)
    if spec.kind == "tool_calls":
        return structgen.compile_tool_calls(spec.source, vocab, open_tag=TOOL_TAGS[0], close_tag=TOOL_TAGS[1])
    return structgen.compile_choice(spec.source, vocab)


def _grammar_syntax(text: str) -> str:
    """lark or GBNF, told apart the way llama.cpp users write them: GBNF defines rules
    with `::=` (and needs a `root` rule); lark uses `:`."""
    return "gbnf" if re.search(r"^\s*[A-Za-z][\w-]*\s*::=", text, re.MULTILINE) else "lark"


def tool_calls_from(spec: OutputSpec, text: str, call_id: str) -> list[dict] | None:
    """The tool calls a constrained output encodes (None when it is not a tool call)."""
    if spec.single_tool is not None:
        return [_call(call_id, spec.single_tool, text)]
    if spec.auto_tools:
        if not text.startswith(TOOL_TAGS[0]):
            return None  # the model answered in text
        text = text[len(TOOL_TAGS[0]) : len(text) - len(TOOL_TAGS[1])]
    if spec.tool_names is not None:
        data = json.loads(text)
        return [_call(call_id, data["name"], json.dumps(data["arguments"], ensure_ascii=False))]
    return None


def _call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tools_prompt(tools: list, choice: Any) -> str:
    """A system message describing the tools, for chat templates that do not render them."""
    lines = ["You can call these tools (JSON Schema of each tool's arguments):"]
    for t in tools:
        f = t.function
        lines.append(json.dumps({"name": f.name, "description": f.description or "",
                                 "parameters": f.parameters or ANY_OBJECT}, ensure_ascii=False))
    if choice is None or choice == "auto":
        lines.append(f'To call one, reply with only {TOOL_TAGS[0]}{{"name": ..., "arguments": {{...}}}}'
                     f"{TOOL_TAGS[1]}; otherwise answer normally.")
    else:
        lines.append('Reply with the call: {"name": ..., "arguments": {...}}.')
    return "\n".join(lines)

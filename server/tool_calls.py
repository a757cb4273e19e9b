"""Tool calls on the wire: the schema a call follows, the prompt that describes the
tools, and the calls read back from the model's output.

A call is written `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, several
one after the other when parallel calls are allowed; a named `tool_choice` writes that
function's arguments alone. Output cut off by `max_tokens` still reads back as calls, with the
arguments written so far, as OpenAI returns them. Owns the shape of calls only:
compiling their grammar is `structured.py`'s, HTTP is `app.py`'s.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

ANY_OBJECT = {"type": "object"}
TOOL_TAGS = ("<tool_call>", "</tool_call>")
# Each tool's parameters get this $id (unless they carry their own), so that a "#/$defs/X"
# inside them resolves against the tool's own schema, not the union of all tools. It
# depends on the parameters alone, not on the tool's place in the list, so that a tool's
# compiled grammar is shared by every tool set that has it.
TOOL_ID = "urn:structgen:tool:{}"
CALL_PREFIX = '{"name": '
ARGUMENTS_PREFIX = ', "arguments": '


@dataclass(frozen=True)
class CallSchema:
    """The JSON Schema of one call of any of the tools."""

    schema: dict
    names: list[str]
    parameter_pointers: list[str]  # where tools[i].function.parameters sit in `schema`
    strict_pointers: tuple[str, ...]  # those of the tools that asked for strict mode


def call_schema(tools: list) -> CallSchema:
    """{"name": <one tool's name>, "arguments": <that tool's parameters>}."""
    variants = []
    for tool in tools:
        function = tool.function
        variants.append({
            "type": "object",
            "properties": {"name": {"const": function.name},
                           "arguments": _with_own_base(function.parameters or ANY_OBJECT)},
            "required": ["name", "arguments"], "additionalProperties": False,
        })
    if len(variants) == 1:
        schema, pointers = variants[0], ["/properties/arguments"]
    else:
        schema = {"anyOf": variants}
        pointers = [f"/anyOf/{i}/properties/arguments" for i in range(len(variants))]
    strict = tuple(p for p, tool in zip(pointers, tools) if tool.function.strict)
    return CallSchema(schema, [t.function.name for t in tools], pointers, strict)


def _with_own_base(parameters: dict) -> dict:
    if not isinstance(parameters, dict) or "$id" in parameters or "id" in parameters:
        return parameters
    text = json.dumps(parameters, separators=(",", ":"), ensure_ascii=False, default=repr)
    return {"$id": TOOL_ID.format(hashlib.sha256(text.encode()).hexdigest()[:32]), **parameters}


def tool_parameter_at(pointers: list[str], pointer: str) -> tuple[int, str] | None:
    """(tool index, pointer inside its parameters) for a pointer into a call schema."""
    for index, prefix in enumerate(pointers):
        if pointer == prefix or pointer.startswith(prefix + "/"):
            return index, pointer[len(prefix):]
    return None


def calls_from_text(text: str, names: list[str], complete: bool) -> list[tuple[str, str]]:
    """(name, arguments as JSON text) of each tagged call in `text`. With complete=False
    (cut off by max_tokens) the last call may be partial: its arguments are the text
    written so far, and its name the one it was writing."""
    open_tag, close_tag = TOOL_TAGS
    decoder = json.JSONDecoder()
    calls, pos = [], 0
    while text.startswith(open_tag, pos):
        start = pos + len(open_tag)
        try:
            data, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            if complete:
                raise
            calls.append(_partial_call(text[start:], names))
            break
        calls.append((data["name"], json.dumps(data["arguments"], ensure_ascii=False)))
        pos = end + len(close_tag)
    return calls


def _partial_call(fragment: str, names: list[str]) -> tuple[str, str]:
    """The name and the arguments so far of a call cut off inside its JSON."""
    if not fragment.startswith(CALL_PREFIX):
        return (names[0] if len(names) == 1 else ""), ""
    rest = fragment[len(CALL_PREFIX):]
    try:
        name, end = json.JSONDecoder().raw_decode(rest)
    except json.JSONDecodeError:
        written = [n for n in names if json.dumps(n, ensure_ascii=False).startswith(rest)]
        return (written[0] if written else ""), ""
    arguments = rest[end:]
    arguments = arguments[len(ARGUMENTS_PREFIX):] if arguments.startswith(ARGUMENTS_PREFIX) else ""
    return name, arguments


def tools_prompt(tools: list, choice, parallel: bool) -> str:
    """A system message describing the tools, for chat templates that do not render them."""
    lines = ["You can call these tools (JSON Schema of each tool's arguments):"]
    for tool in tools:
        function = tool.function
        lines.append(json.dumps({"name": function.name, "description": function.description or "",
                                 "parameters": function.parameters or ANY_OBJECT}, ensure_ascii=False))
    call = f'{TOOL_TAGS[0]}{{"name": ..., "arguments": {{...}}}}{TOOL_TAGS[1]}'
    several = " (for several calls, write them one after the other)" if parallel else ""
    if choice is None or choice == "auto":
        lines.append(f"To call a tool, reply with only {call}{several}; otherwise answer normally.")
    elif isinstance(choice, str):
        lines.append(f"Reply with the call: {call}{several}.")
    else:
        lines.append(f"Reply with the arguments of {choice.function.get('name')} as one JSON object.")
    return "\n".join(lines)

"""From an API request to the grammar that constrains its output.

Reads `response_format`, vLLM's `structured_outputs` and `tools`/`tool_choice` (with
their `strict` flags and the server's default for `additionalProperties`), compiles
the grammar (cached by the compiler; a cold compile runs in a worker thread so the
event loop and the engine loop never wait on it) and says how to read the output back
(plain text, or tool calls). Errors are structgen's own (`StructgenError` with a JSON
pointer or position), turned into 400s by `app.py`. Never touches the engine.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import structgen
from server.protocol import ChatCompletionRequest, CompletionRequest
from server.tool_calls import ANY_OBJECT, TOOL_TAGS, call_schema, calls_from_text, tool_parameter_at
from structgen.background import lower_this_thread
from structgen.compiler import cancelled_by
from structgen.errors import CompileCancelledError, SchemaError, StructgenError


class UnsupportedRequestError(StructgenError):
    """A request option structgen does not implement; `param` names it."""

    def __init__(self, param: str, message: str):
        self.param = param
        super().__init__(message)


@dataclass
class OutputSpec:
    """What constrains a request's output and how the output is read back."""

    kind: str | None = None  # "json_schema", "regex", "choice", "grammar", "tool_calls" or None (free text)
    source: Any = None
    param: str = "response_format"  # the request field the grammar came from
    options: dict = field(default_factory=dict)  # JsonOptions fields of a JSON Schema compile
    tool_names: list[str] | None = None  # set when the output is tool calls
    single_tool: str | None = None  # a named tool_choice: the output is its arguments
    auto_tools: bool = False  # tool_choice "auto": free text, or calls between TOOL_TAGS
    parallel: bool = False  # several tagged calls allowed, one after the other
    parameter_pointers: list[str] = field(default_factory=list)  # tools' parameters in `source`

    def grammar_key(self) -> str | None:
        """Text that is equal for two specs exactly when they compile to the same grammar
        (the compile cache's key, short of the vocabulary); None without a grammar."""
        if self.kind is None:
            return None
        return json.dumps([self.kind, self.source, sorted(self.options.items()), self.tool_names, self.single_tool,
                           self.auto_tools, self.parallel], separators=(",", ":"), ensure_ascii=False, default=str)

    def locate(self, err: SchemaError) -> tuple[str, str]:
        """(param, message) of a schema error, pointing into the tool it came from."""
        found = tool_parameter_at(self.parameter_pointers, err.pointer or "")
        if found is None:
            return self.param, str(err)
        index, pointer = found
        return f"tools[{index}].function.parameters", f"{err.detail} (at {pointer or '/'})"


JSON_KINDS = ("json_schema", "tool_calls")


def output_spec(request: ChatCompletionRequest | CompletionRequest, *,
                disable_additional_properties: bool = True) -> OutputSpec:
    """Which grammar the request asks for (at most one source may be given).

    disable_additional_properties: the server's default for object schemas silent on
    `additionalProperties` (no undeclared properties); `structured_outputs` may override it.
    Integers open on a side are bounded there by I-JSON's range (`safe_integers`).
    """
    so = request.structured_outputs
    chat = isinstance(request, ChatCompletionRequest)
    specs = [spec for spec in (_response_format_spec(request.response_format), _structured_outputs_spec(so),
                               _tool_spec(request) if chat else None) if spec is not None]
    if len(specs) > 1:
        raise UnsupportedRequestError("response_format",
                                      "give only one of response_format, structured_outputs, forced tool calls")
    spec = specs[0] if specs else OutputSpec()
    json_options = {"disable_additional_properties": disable_additional_properties, "safe_integers": True}
    if so is not None:
        for name in ("disable_additional_properties", "property_order"):
            value = getattr(so, name)
            if value is None:
                continue
            if spec.kind not in JSON_KINDS:
                raise UnsupportedRequestError(f"structured_outputs.{name}",
                                              f"{name} applies to JSON Schema outputs only")
            json_options[name] = value
    if spec.kind in JSON_KINDS:
        spec.options = {**json_options, **spec.options}
    return spec


def _response_format_spec(fmt) -> OutputSpec | None:
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return OutputSpec("json_schema", ANY_OBJECT)
    if fmt.json_schema is None or fmt.json_schema.schema_ is None:
        raise UnsupportedRequestError("response_format.json_schema",
                                      "response_format json_schema needs json_schema.schema")
    return OutputSpec("json_schema", fmt.json_schema.schema_, param="response_format.json_schema.schema",
                      options={"strict": bool(fmt.json_schema.strict)})


def _structured_outputs_spec(so) -> OutputSpec | None:
    """vLLM's `structured_outputs`: at most one grammar source, and its options."""
    if so is None:
        return None
    if so.whitespace_pattern is not None:
        raise UnsupportedRequestError(
            "structured_outputs.whitespace_pattern",
            "whitespace_pattern is not supported: JSON is written with json.dumps separators",
        )
    given = [(k, v) for k, v in (("json", so.json_), ("regex", so.regex), ("choice", so.choice),
                                 ("grammar", so.grammar)) if v is not None]
    if len(given) > 1:
        raise UnsupportedRequestError("structured_outputs", "give at most one of json, regex, choice, grammar")
    if not given:
        return None  # options only, for the grammar another field gives
    key, value = given[0]
    param = f"structured_outputs.{key}"
    if key == "grammar":
        return OutputSpec("grammar", (value, _grammar_syntax(value)), param=param)
    if key == "json":
        return OutputSpec("json_schema", json.loads(value) if isinstance(value, str) else value, param=param)
    return OutputSpec(key, value, param=param)


def _tool_spec(request: ChatCompletionRequest) -> OutputSpec | None:
    """A forced tool call (tool_choice "required" or a named function) is constrained to
    the function's parameters; "auto" (the default when tools are given) allows free text
    or calls between TOOL_TAGS, constrained once the tag starts; "none" is free text."""
    choice = request.tool_choice
    tools = request.tools or []
    if choice == "none" or (choice in (None, "auto") and not tools):
        return None
    if not tools:
        raise UnsupportedRequestError("tool_choice", "tool_choice needs tools")
    if choice not in (None, "auto", "required"):
        name = choice.function.get("name")
        match = [i for i, t in enumerate(tools) if t.function.name == name]
        if not match:
            raise UnsupportedRequestError("tool_choice", f"no tool named {name!r} in tools")
        function = tools[match[0]].function
        return OutputSpec("json_schema", function.parameters or ANY_OBJECT, single_tool=name,
                          param=f"tools[{match[0]}].function.parameters", options={"strict": bool(function.strict)})
    calls = call_schema(tools)
    return OutputSpec("tool_calls", calls.schema, param="tools", options={"strict_pointers": calls.strict_pointers},
                      tool_names=calls.names, auto_tools=choice in (None, "auto"),
                      parallel=request.parallel_tool_calls is not False, parameter_pointers=calls.parameter_pointers)


class Compile:
    """A grammar compiling in COMPILE_THREADS: `future` (a concurrent.futures.Future of
    the compiled grammar, which the engine takes as it is), the event that cancels it,
    and what `wait_compiled` reports."""

    def __init__(self, spec: OutputSpec, vocab: Any):
        self.hits_before = structgen.cache_info()["hits"]
        self.started = time.perf_counter()
        self.cancel = threading.Event()
        self.future = _compile_threads.submit(_compile, spec, vocab, self.cancel)


def start_compile(spec: OutputSpec, vocab: Any) -> Compile | None:
    """Start compiling the spec's grammar (None: it has none). Compiles run at a lower CPU
    priority (their Python half in `structgen.compile_workers` processes)."""
    return Compile(spec, vocab) if spec.kind is not None else None


async def wait_compiled(compiling: Compile | None,
                        client_gone: Callable[[], Awaitable[bool]] | None = None) -> tuple[Any, float, bool]:
    """(compiled grammar or None, seconds, cache hit), or the compile's error. Once
    `client_gone()` says the client left, the compile is cancelled (its worker stopped)
    and CompileCancelledError is raised."""
    if compiling is None:
        return None, 0.0, False
    waited = asyncio.wrap_future(compiling.future)
    waited.add_done_callback(_consume_result)  # read here too, in case nobody awaits it any more
    try:
        while not (await asyncio.wait({waited}, timeout=CLIENT_CHECK_S))[0]:
            if client_gone is not None and await client_gone():
                raise CompileCancelledError("the client disconnected while its grammar compiled")
        grammar = waited.result()
    except BaseException:  # the client left, or this request was cancelled
        compiling.cancel.set()
        raise
    hit = structgen.cache_info()["hits"] > compiling.hits_before
    return grammar, time.perf_counter() - compiling.started, hit


# Compiles in flight at once; more wait their turn (a compile is bounded by its own
# time budget, so a turn comes).
COMPILE_THREADS = 8
CLIENT_CHECK_S = 0.25  # how often a compiling request looks whether its client is still there
_compile_threads = ThreadPoolExecutor(COMPILE_THREADS, thread_name_prefix="structgen-compile",
                                      initializer=lower_this_thread)


def _consume_result(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()


def _compile(spec: OutputSpec, vocab: Any, cancel: threading.Event) -> Any:
    with cancelled_by(cancel):
        return _compiled(spec, vocab)


def _compiled(spec: OutputSpec, vocab: Any) -> Any:
    if spec.kind == "json_schema":
        return structgen.compile_json_schema(spec.source, vocab, **spec.options)
    if spec.kind == "regex":
        return structgen.compile_regex(spec.source, vocab)
    if spec.kind == "grammar":
        text, syntax = spec.source
        return structgen.compile_grammar(text, vocab, syntax=syntax)
    if spec.kind == "tool_calls":
        return structgen.compile_tool_calls(spec.source, vocab, open_tag=TOOL_TAGS[0], close_tag=TOOL_TAGS[1],
                                            allow_text=spec.auto_tools, parallel=spec.parallel, **spec.options)
    return structgen.compile_choice(spec.source, vocab)


def _grammar_syntax(text: str) -> str:
    """lark or GBNF, told apart the way llama.cpp users write them: GBNF defines rules
    with `::=` (and needs a `root` rule); lark uses `:`."""
    return "gbnf" if re.search(r"^\s*[A-Za-z][\w-]*\s*::=", text, re.MULTILINE) else "lark"


def tool_calls_from(spec: OutputSpec, text: str, call_id: str, complete: bool = True) -> list[dict] | None:
    """The tool calls a constrained output encodes (None when it is not a tool call).
    complete=False: the output was cut off, and its last call holds partial arguments."""
    if spec.single_tool is not None:
        return [_call(f"{call_id}_0", spec.single_tool, text)]
    if spec.tool_names is None or not text.startswith(TOOL_TAGS[0]):
        return None  # not a tool call, or the model answered in text ("auto")
    calls = calls_from_text(text, spec.tool_names, complete)
    return [_call(f"{call_id}_{k}", name, arguments) for k, (name, arguments) in enumerate(calls)]


def _call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}

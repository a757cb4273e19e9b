"""The engines the tools suite runs (`TOOL_ENGINES`), each turning a `ToolChoice` (the
functions, and tool_choice "required" or "auto") into its own grammar source, untimed,
and compiling that source, timed by the suite. Everything else (the matcher, the bitmask,
the cold compile) is MaskBench's adapter (benchmarks/masks/engines.py, benchmarks/peers.py).

What each compiles; a call is `<tool_call>{"name": <name>, "arguments": <arguments>}</tool_call>`:
- structgen: exactly the server's grammar. The request goes through
  `server.structured.output_spec` (which calls `server.tool_calls.call_schema` on the
  `server.protocol` tools), and its spec into `structgen.compile_tool_calls(spec.source,
  vocab, open_tag, close_tag, allow_text=<auto>, parallel=True, **spec.options)` as the
  server compiles it, in this process (the server's compile worker processes are not
  started). required: one call or more, back to back; auto: that, or free text that does
  not begin with `<tool_call>`. The arguments follow the server's JSON options: members
  in schema order, json.dumps' whitespace, no members a schema does not declare, integers
  within I-JSON's range.
- xgrammar: a structural tag (`GrammarCompiler.compile_structural_tag`), one "tag" per
  function: begin `<tool_call>{"name": "<name>", "arguments": `, content the function's
  parameters as a "json_schema" format (xgrammar's defaults: any whitespace, members in
  schema order, undeclared members refused), end `}</tool_call>`. required: "plus" of an
  "or" of the tags, the same language as ours but for whitespace. auto: "triggered_tags"
  with trigger `<tool_call>`, xgrammar's form for optional calls: text with calls
  anywhere in it, each constrained from its trigger on. Ours takes a reply that does
  not begin with the tag as free text, unconstrained, and allows no text after a call.
- llguidance: a lark grammar (`LLMatcher.grammar_from_lark`) with a rule per function,
  `"<tool_call>{\\"name\\": \\"<name>\\", \\"arguments\\": " %json {<parameters>} "}</tool_call>"`;
  required: `start: call+`; auto: `start: call+ | TEXT` with TEXT any text that does not
  begin with `<tool_call>` (a regex with negation): our language but for the arguments.
  Its `%json` takes llguidance's defaults: flexible whitespace, members in schema order,
  and members a schema does not declare allowed where it is silent on
  additionalProperties (ours refuses them).

So besides whitespace (both peers allow any), the languages differ in two places:
xgrammar's auto also allows text after a call (and constrains a call after text), and
llguidance allows undeclared members.

Must not time anything: the suite (benchmarks/tools.py) does, with walk.py's first_mask.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from benchmarks.masks.engines import StructgenAdapter
from benchmarks.peers import LLGuidanceAdapter, XGrammarAdapter
from benchmarks.tool_bench.functions import Function
from server.protocol import ChatCompletionRequest
from server.structured import output_spec
from server.tool_calls import ARGUMENTS_PREFIX, CALL_PREFIX, TOOL_TAGS

OPEN_TAG, CLOSE_TAG = TOOL_TAGS
MESSAGES = [{"role": "user", "content": "Call the tool that fits."}]


@dataclass(frozen=True)
class ToolChoice:
    functions: list[Function]
    auto: bool  # tool_choice "auto"; else "required"


def call_begin(name: str) -> str:
    """A call's text up to its arguments."""
    return f"{OPEN_TAG}{CALL_PREFIX}{json.dumps(name)}{ARGUMENTS_PREFIX}"


CALL_END = "}" + CLOSE_TAG


class StructgenTools(StructgenAdapter):
    @classmethod
    def settings(cls):
        return {"grammar": "server.structured.output_spec(ChatCompletionRequest(tools, tool_choice)) -> "
                           "structgen.compile_tool_calls(spec.source, vocab, open_tag, close_tag, "
                           "allow_text=auto, parallel=True, **spec.options)",
                "cache": "structgen.clear_cache() before each cold compile"}

    def source(self, choice: ToolChoice):
        tools = [{"type": "function", "function": {"name": f.name, "parameters": f.parameters}}
                 for f in choice.functions]
        request = ChatCompletionRequest.model_validate(
            {"messages": MESSAGES, "tools": tools, "tool_choice": "auto" if choice.auto else "required"})
        return output_spec(request)

    def compile(self, spec):
        return self.sg.compile_tool_calls(spec.source, self.vocab, open_tag=OPEN_TAG, close_tag=CLOSE_TAG,
                                          allow_text=spec.auto_tools, parallel=spec.parallel, **spec.options)


class XGrammarTools(XGrammarAdapter):
    @classmethod
    def settings(cls):
        return {"grammar": "compile_structural_tag: required = plus(or(tags)), auto = triggered_tags "
                           "(trigger <tool_call>); tag = begin '<tool_call>{\"name\": \"<name>\", \"arguments\": ', "
                           "json_schema(parameters) (defaults), end '}</tool_call>'",
                "GrammarCompiler": "cache_enabled=False (cold compiles)"}

    def source(self, choice: ToolChoice) -> str:
        tags = [{"type": "tag", "begin": call_begin(f.name),
                 "content": {"type": "json_schema", "json_schema": f.parameters}, "end": CALL_END}
                for f in choice.functions]
        if choice.auto:
            form = {"type": "triggered_tags", "triggers": [OPEN_TAG], "tags": tags}
        else:
            form = {"type": "plus", "content": {"type": "or", "elements": tags}}
        return json.dumps({"type": "structural_tag", "format": form})

    def compile(self, spec):
        return self.compiler.compile_structural_tag(spec)


# Any text that does not begin with the open tag (llguidance's regexes take & and ~).
FREE_TEXT = "TEXT: /(?s:.*)/ & ~/" + OPEN_TAG + "(?s:.*)/"


class LLGuidanceTools(LLGuidanceAdapter):
    @classmethod
    def settings(cls):
        return {"grammar": "LLMatcher.grammar_from_lark: one rule per function, '<tool_call>{\"name\": \"<name>\", "
                           "\"arguments\": ' %json {parameters} '}</tool_call>'; required: start: call+; "
                           "auto: start: call+ | TEXT (text not beginning with <tool_call>)",
                "json": "llguidance's %json defaults", "limits": "default"}

    def source(self, choice: ToolChoice) -> str:
        rules = [f"tool_{i}: {json.dumps(call_begin(f.name))} %json {json.dumps(f.parameters)} {json.dumps(CALL_END)}"
                 for i, f in enumerate(choice.functions)]
        start = ["start: calls | TEXT", FREE_TEXT] if choice.auto else ["start: calls"]
        call = "call: " + " | ".join(f"tool_{i}" for i in range(len(rules)))
        return "\n".join(["%llguidance {}", *start, "calls: call+", call, *rules]) + "\n"

    def compile(self, spec):
        return self.matcher_of(self.llg.LLMatcher.grammar_from_lark(spec))


TOOL_ENGINES = {"structgen": StructgenTools, "xgrammar": XGrammarTools, "llguidance": LLGuidanceTools}

"""Request bodies of the OpenAI-compatible API, as pydantic models.

Parameters are the ones OpenAI defines (plus vLLM's `structured_outputs` and a few
sampling extras). Unknown top-level fields are refused by name rather than silently
ignored, so a misspelled parameter is a 400, not a surprise. Owns validation of the
wire format only; turning a request into sampling parameters and grammars is `app.py`'s.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JsonSchemaSpec(_Strict):
    name: str = "response"
    description: str | None = None
    schema_: dict[str, Any] | bool | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Strict):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaSpec | None = None


class StructuredOutputs(_Strict):
    """vLLM's `structured_outputs`: at most one grammar source (json, regex, choice,
    grammar) and options for it, or for the JSON Schema that `response_format` or `tools`
    give."""

    json_: dict[str, Any] | bool | str | None = Field(default=None, alias="json")
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    whitespace_pattern: str | None = None  # vLLM's; refused by name when given (see structured.py)
    property_order: Literal["schema", "any"] | None = None  # structgen's: object members in any order
    # vLLM's: false restores JSON Schema's default, undeclared properties where a schema is silent
    disable_additional_properties: bool | None = None


class FunctionSpec(_Strict):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(_Strict):
    type: Literal["function"] = "function"
    function: FunctionSpec


class NamedToolChoice(_Strict):
    type: Literal["function"] = "function"
    function: dict[str, str]


class StreamOptions(_Strict):
    include_usage: bool = False


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None


class _SamplingFields(_Strict):
    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=-1)
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    n: int = Field(default=1, ge=1, le=16)
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    seed: int | None = None
    frequency_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    presence_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    ignore_eos: bool = False
    structured_outputs: StructuredOutputs | None = None
    response_format: ResponseFormat | None = None
    jump_forward: bool | None = None


class ChatCompletionRequest(_SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None


class CompletionRequest(_SamplingFields):
    prompt: str | list[int] | list[str] | list[list[int]]
    logprobs: int | None = Field(default=None, ge=0, le=20)
    echo: bool = False

"""langchain-openai's `with_structured_output` against `structgen serve`, by json_schema,
function_calling and json_mode: a valid object; a reply cut off by max_tokens surfaces
as langchain's own signal (the openai length error for json_schema and json_mode, and
for function_calling a raw message whose finish_reason is "length" with the partial
call among its invalid_tool_calls); a schema
structgen refuses is a 400 (json_mode sends no schema, only a prompt)."""

from __future__ import annotations

import openai
import pytest
from langchain_openai import ChatOpenAI

from tests.server.clients.cities import JSON_PROMPT, MAX_TOKENS, PROMPT, SHORT, City, Refused


def chat(base_url, model_name, max_tokens) -> ChatOpenAI:
    return ChatOpenAI(base_url=base_url, api_key="unused", model=model_name, temperature=0.0,
                      max_tokens=max_tokens, max_retries=0)


@pytest.mark.parametrize("method", ["json_schema", "function_calling", "json_mode"])
def test_returns_a_valid_object(base_url, model_name, method):
    structured = chat(base_url, model_name, MAX_TOKENS).with_structured_output(City, method=method)
    assert isinstance(structured.invoke(JSON_PROMPT if method == "json_mode" else PROMPT), City)


@pytest.mark.parametrize("method", ["json_schema", "json_mode"])
def test_a_cut_off_reply_raises_the_length_error(base_url, model_name, method):
    structured = chat(base_url, model_name, SHORT).with_structured_output(City, method=method)
    with pytest.raises(openai.LengthFinishReasonError):
        structured.invoke(JSON_PROMPT if method == "json_mode" else PROMPT)


def test_a_cut_off_function_call_is_a_length_cut_tool_call(base_url, model_name):
    structured = chat(base_url, model_name, SHORT).with_structured_output(City, method="function_calling",
                                                                         include_raw=True)
    result = structured.invoke(PROMPT)
    raw = result["raw"]
    assert result["parsed"] is None and raw.response_metadata["finish_reason"] == "length"
    assert not raw.content and [call["name"] for call in raw.invalid_tool_calls] == ["City"]


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_a_refused_schema_is_a_400(base_url, model_name, method):
    with pytest.raises(openai.BadRequestError) as err:
        chat(base_url, model_name, SHORT).with_structured_output(Refused, method=method).invoke(PROMPT)
    assert "unevaluatedProperties" in err.value.body["message"]

"""pydantic-ai against `structgen serve`: its tool output (tool_choice "required") and
`NativeOutput` (a strict json_schema). A valid object; a cut-off tool call raises its
`IncompleteToolCall`, a cut-off native reply its `UnexpectedModelBehavior`; a schema
structgen refuses is a `ModelHTTPError` with status 400."""

from __future__ import annotations

import pytest
from pydantic_ai import Agent, NativeOutput
from pydantic_ai.exceptions import IncompleteToolCall, ModelHTTPError, UnexpectedModelBehavior
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

from tests.server.clients.cities import MAX_TOKENS, PROMPT, SHORT, City, Refused

# a tool call's arguments start after `<tool_call>{"name": "final_result", "arguments": `
TOOL_SHORT = 24


def run(base_url, model_name, output_type, max_tokens):
    model = OpenAIChatModel(model_name, provider=OpenAIProvider(base_url=base_url, api_key="unused"))
    agent = Agent(model, output_type=output_type, retries=0,
                  model_settings=ModelSettings(max_tokens=max_tokens, temperature=0.0))
    return agent.run_sync(PROMPT).output


@pytest.mark.parametrize("native", [False, True])
def test_returns_a_valid_object(base_url, model_name, native):
    output = run(base_url, model_name, NativeOutput(City) if native else City, MAX_TOKENS)
    assert isinstance(output, City)


def test_a_cut_off_tool_call_raises_incomplete_tool_call(base_url, model_name):
    with pytest.raises(IncompleteToolCall):
        run(base_url, model_name, City, TOOL_SHORT)


def test_a_cut_off_native_reply_raises(base_url, model_name):
    with pytest.raises(UnexpectedModelBehavior):
        run(base_url, model_name, NativeOutput(City), SHORT)


@pytest.mark.parametrize("native", [False, True])
def test_a_refused_schema_is_a_400(base_url, model_name, native):
    with pytest.raises(ModelHTTPError) as err:
        run(base_url, model_name, NativeOutput(Refused) if native else Refused, SHORT)
    assert err.value.status_code == 400 and "unevaluatedProperties" in str(err.value.body)

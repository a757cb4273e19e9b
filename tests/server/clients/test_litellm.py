"""LiteLLM's OpenAI-compatible provider against `structgen serve`: a pydantic
response_format returns a valid object; a reply cut off by max_tokens comes back with
finish_reason "length" (LiteLLM raises nothing of its own for it) and does not parse; a
schema structgen refuses is LiteLLM's BadRequestError."""

from __future__ import annotations

import litellm  # conftest.py keeps it from fetching its price list
import pytest
from pydantic import ValidationError

from tests.server.clients.cities import MAX_TOKENS, PROMPT, SHORT, City, Refused


def complete(base_url, model_name, response_format, max_tokens):
    return litellm.completion(model="openai/" + model_name, api_base=base_url, api_key="unused",
                              messages=[{"role": "user", "content": PROMPT}], response_format=response_format,
                              max_tokens=max_tokens, temperature=0.0, num_retries=0)


def test_returns_a_valid_object(base_url, model_name):
    choice = complete(base_url, model_name, City, MAX_TOKENS).choices[0]
    assert choice.finish_reason == "stop"
    City.model_validate_json(choice.message.content)


def test_a_cut_off_reply_says_length(base_url, model_name):
    choice = complete(base_url, model_name, City, SHORT).choices[0]
    assert choice.finish_reason == "length"
    with pytest.raises(ValidationError):
        City.model_validate_json(choice.message.content)


def test_a_refused_schema_is_a_bad_request(base_url, model_name):
    with pytest.raises(litellm.BadRequestError, match="unevaluatedProperties"):
        complete(base_url, model_name, Refused, SHORT)

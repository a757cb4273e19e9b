"""instructor against `structgen serve`, in its TOOLS, JSON_SCHEMA and JSON modes: a valid
object, its own IncompleteOutputException for a reply cut off by max_tokens, and a 400 for
a schema structgen refuses (JSON mode sends no schema, only a prompt)."""

from __future__ import annotations

import instructor
import openai
import pytest
from instructor.core.exceptions import IncompleteOutputException, InstructorRetryException

from tests.server.clients.cities import JSON_PROMPT, MAX_TOKENS, PROMPT, SHORT, City, Refused

MODES = [instructor.Mode.TOOLS, instructor.Mode.JSON_SCHEMA, instructor.Mode.JSON]


def ask(base_url, model_name, mode, response_model, max_tokens):
    client = instructor.from_openai(openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0), mode=mode)
    prompt = JSON_PROMPT if mode == instructor.Mode.JSON else PROMPT
    return client.chat.completions.create(model=model_name, messages=[{"role": "user", "content": prompt}],
                                          response_model=response_model, max_tokens=max_tokens,
                                          temperature=0.0, max_retries=0)


@pytest.mark.parametrize("mode", MODES)
def test_returns_a_valid_object(base_url, model_name, mode):
    assert isinstance(ask(base_url, model_name, mode, City, MAX_TOKENS), City)


@pytest.mark.parametrize("mode", MODES)
def test_a_cut_off_reply_raises_incomplete_output(base_url, model_name, mode):
    with pytest.raises(IncompleteOutputException):
        ask(base_url, model_name, mode, City, SHORT)


@pytest.mark.parametrize("mode", MODES[:2])
def test_a_refused_schema_is_a_400(base_url, model_name, mode):
    with pytest.raises(InstructorRetryException) as err:
        ask(base_url, model_name, mode, Refused, SHORT)
    cause = err.value.__cause__
    assert isinstance(cause, openai.BadRequestError) and "unevaluatedProperties" in cause.body["message"]

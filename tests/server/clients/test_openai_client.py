"""The `openai` client against `structgen serve`: `chat.completions.parse` with a pydantic
model (a strict json_schema) and with a pydantic function tool, streaming, a reply cut off
by max_tokens, and a schema structgen refuses."""

from __future__ import annotations

import openai
import pytest

from tests.server.clients.cities import MAX_TOKENS, PROMPT, SHORT, City, Refused

MESSAGES = [{"role": "user", "content": PROMPT}]


@pytest.fixture(scope="module")
def client(base_url):
    return openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)


def test_parse_returns_a_valid_object(client, model_name):
    completion = client.chat.completions.parse(model=model_name, messages=MESSAGES, response_format=City,
                                               max_tokens=MAX_TOKENS, temperature=0.0)
    assert isinstance(completion.choices[0].message.parsed, City)


def test_parse_of_a_function_tool(client, model_name):
    completion = client.chat.completions.parse(model=model_name, messages=MESSAGES, max_tokens=MAX_TOKENS,
                                               temperature=0.0, tools=[openai.pydantic_function_tool(City)],
                                               tool_choice="required")
    call = completion.choices[0].message.tool_calls[0]
    assert completion.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "City" and isinstance(call.function.parsed_arguments, City)


def test_streamed_parse(client, model_name):
    with client.chat.completions.stream(model=model_name, messages=MESSAGES, response_format=City,
                                        max_tokens=MAX_TOKENS, temperature=0.0) as stream:
        deltas = [event.delta for event in stream if event.type == "content.delta"]
        completion = stream.get_final_completion()
    assert len(deltas) > 3 and isinstance(completion.choices[0].message.parsed, City)


def test_a_cut_off_reply_raises_the_length_error(client, model_name):
    with pytest.raises(openai.LengthFinishReasonError):
        client.chat.completions.parse(model=model_name, messages=MESSAGES, response_format=City,
                                      max_tokens=SHORT, temperature=0.0)


def test_a_refused_schema_is_a_400(client, model_name):
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.parse(model=model_name, messages=MESSAGES, response_format=Refused,
                                      max_tokens=SHORT)
    assert err.value.body["param"] == "response_format.json_schema.schema"
    assert "unevaluatedProperties" in err.value.body["message"]


def test_a_connection_left_idle_past_the_clients_expiry_still_serves(base_url, model_name):
    """A keep-alive connection idle for longer than uvicorn's and the clients' default 5 s
    carries the next request: the server keeps idle connections longer than clients do,
    so a client never sends on a connection the server is closing."""
    import http.client
    import time

    host, port = base_url.split("//")[1].split("/")[0].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", "/v1/models")
        assert conn.getresponse().read() and conn.sock is not None
        socket_before = conn.sock
        time.sleep(6.5)
        conn.request("GET", "/v1/models")  # on the same socket: a closed one fails to read
        response = conn.getresponse()
        assert response.status == 200 and model_name.encode() in response.read()
        assert conn.sock is socket_before
    finally:
        conn.close()

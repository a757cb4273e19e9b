"""The OpenAI-compatible server on loopback, driven by the real `openai` client and raw
httpx: structured outputs validate, streams are well-formed, bad input gets OpenAI error
bodies with 4xx statuses, and a client that disconnects frees its KV blocks."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import jsonschema
import openai
import pytest
import uvicorn

import structgen
from server.app import create_app
from structgen.engine import Engine
from structgen.engine.async_engine import AsyncEngine, wait_until_idle

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    def __init__(self, app):
        self.port = _free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.server.started
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def runner():
    engine = AsyncEngine(Engine(kv_cache_bytes=256 << 20, max_num_seqs=16))
    yield engine
    engine.shutdown()


@pytest.fixture(scope="module")
def live(runner):
    server = LiveServer(create_app(runner, max_body_bytes=64 << 10))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(live):
    return openai.OpenAI(base_url=live.url + "/v1", api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def model(client):
    return client.models.list().data[0].id


def json_format(schema, name="person"):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def test_models_and_health(live, model):
    assert model == "SmolLM2-135M-Instruct"
    assert httpx.get(live.url + "/health").json() == {"status": "ok"}
    assert "/v1/chat/completions" in httpx.get(live.url + "/openapi.json").json()["paths"]


def test_chat_json_schema_validates(client, model):
    resp = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Describe a person."}],
        response_format=json_format(PERSON), temperature=0.0, max_tokens=80)
    choice = resp.choices[0]
    assert choice.finish_reason == "stop"
    jsonschema.validate(json.loads(choice.message.content), PERSON)
    assert resp.usage.completion_tokens > 0 and resp.usage.prompt_tokens > 10


def test_streaming_matches_non_streaming_and_reports_usage(client, model):
    kwargs = dict(model=model, messages=[{"role": "user", "content": "Describe a person."}],
                  response_format=json_format(PERSON), temperature=0.0, max_tokens=80)
    whole = client.chat.completions.create(**kwargs).choices[0].message.content
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0


def content_chunks(client, model, **kwargs) -> tuple[list[str], int]:
    chunks = list(client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Tell me about the sea."}], temperature=0.0,
        max_tokens=40, stream=True, stream_options={"include_usage": True}, **kwargs))
    texts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    return texts, chunks[-1].usage.completion_tokens


def test_a_stream_interval_sends_the_same_text_in_fewer_larger_chunks(client, runner, model):
    """--stream-interval 4: the first text goes out alone, then a chunk per 4 tokens."""
    each_token, tokens = content_chunks(client, model)
    server = LiveServer(create_app(runner, stream_interval=4))
    try:
        paced_client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        paced, paced_tokens = content_chunks(paced_client, model)
    finally:
        server.stop()
    assert paced_tokens == tokens == 40
    assert "".join(paced) == "".join(each_token)
    assert len(each_token) > 30  # a chunk per token, bar those that end inside a character
    assert len(paced) <= 2 + (tokens - 1 + 3) // 4, paced  # the first alone, a chunk per 4 after it


def test_raw_stream_ends_with_done(live, model):
    body = {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5, "stream": True}
    with httpx.stream("POST", live.url + "/v1/chat/completions", json=body, timeout=60) as r:
        lines = [line for line in r.iter_lines() if line]
    assert r.status_code == 200 and lines[-1] == "data: [DONE]"
    assert all(line.startswith("data: ") for line in lines)


def test_invalid_schema_is_a_400_with_a_pointer(client, model):
    bad = {"type": "object", "properties": {"age": {"type": "integer", "minimum": "zero"}}}
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"}],
                                       response_format=json_format(bad))
    body = err.value.body
    assert "/properties/age" in body["message"] and body["param"] == "response_format.json_schema.schema"


@pytest.mark.parametrize("prefill", [True, False], ids=["prefill-while-compiling", "prompt-waits"])
def test_a_request_handed_over_while_compiling_ends_with_its_compile(client, runner, model, prefill):
    """The server gives the engine a request as its grammar starts compiling. A compile
    error is still a 400 before any output, streamed or not, and leaves no request in
    flight and no KV block taken; a good schema's output validates, whether the engine
    computes the prompt meanwhile or waits."""
    before = runner.engine.prefill_while_compiling
    runner.engine.prefill_while_compiling = prefill
    try:
        bad = {"type": "object", "properties": {"age": {"type": "integer", "minimum": "zero"}}}
        for stream in (False, True):
            with pytest.raises(openai.BadRequestError, match="/properties/age"):
                client.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"}],
                                               response_format=json_format(bad), stream=stream)
        assert wait_until_idle(runner, timeout=30)
        assert runner.engine.blocks.stats().used == 0
        good = {"type": "object", "properties": {"size": {"type": "integer", "minimum": 0, "maximum": 99}},
                "required": ["size"], "additionalProperties": False}
        reply = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "A size?"}],
                                               response_format=json_format(good), max_tokens=30, temperature=0)
        assert reply.choices[0].finish_reason == "stop"
        jsonschema.validate(json.loads(reply.choices[0].message.content), good)
    finally:
        runner.engine.prefill_while_compiling = before


def test_unsupported_keyword_is_named(client, model):
    schema = {"type": "string", "maxLenght": 3}
    with pytest.raises(openai.BadRequestError, match="maxLenght"):
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"}],
                                       response_format=json_format(schema))


def test_bad_parameters_are_400s(live, model):
    url = live.url + "/v1/chat/completions"
    base = {"model": model, "messages": [{"role": "user", "content": "x"}]}
    r = httpx.post(url, json={**base, "temperature": 9})
    assert r.status_code == 400 and r.json()["error"]["param"] == "temperature"
    r = httpx.post(url, json={**base, "frequency_penality": 1})
    assert r.status_code == 400 and "frequency_penality" in r.json()["error"]["message"]
    r = httpx.post(url, content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400
    r = httpx.post(url, json={**base, "model": "gpt-4"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_prompt_longer_than_context(live, model):
    r = httpx.post(live.url + "/v1/completions", json={"model": model, "prompt": [5] * 9000, "max_tokens": 4})
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"


def test_oversized_body_is_413(live, model):
    r = httpx.post(live.url + "/v1/completions", json={"model": model, "prompt": "x" * 100_000})
    assert r.status_code == 413


def test_oversized_body_without_a_length_is_413(live, model):
    """A chunked body (no Content-Length) is refused once its bytes pass the limit."""
    body = json.dumps({"model": model, "prompt": "x" * 100_000}).encode()
    chunks = (body[i:i + 8192] for i in range(0, len(body), 8192))
    r = httpx.post(live.url + "/v1/completions", content=chunks, headers={"content-type": "application/json"})
    assert "content-length" not in r.request.headers
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"


def test_completions_with_regex_and_choice(client, model):
    resp = client.completions.create(model=model, prompt="The year the first moon landing happened was",
                                     max_tokens=10, temperature=0.0,
                                     extra_body={"structured_outputs": {"regex": "[12][0-9]{3}"}})
    assert resp.choices[0].text.isdigit() and len(resp.choices[0].text) == 4
    resp = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Is water wet?"}],
                                          extra_body={"structured_outputs": {"choice": ["yes", "no"]}})
    assert resp.choices[0].message.content in ("yes", "no")


def test_structured_outputs_grammar_lark_and_gbnf(client, model):
    import lark

    lark_text = 'start: item ("," item)*\nitem: NAME "=" INT\nNAME: /[a-z]+/\n%import common.INT\n%ignore " "'
    resp = client.completions.create(model=model, prompt="Settings: ", max_tokens=30, temperature=1.0, seed=5,
                                     extra_body={"structured_outputs": {"grammar": lark_text}})
    choice = resp.choices[0]
    if choice.finish_reason == "stop":
        lark.Lark(lark_text, parser="earley", lexer="dynamic_complete").parse(choice.text)
    else:  # max_tokens ran out: still a prefix of the language, flagged incomplete
        assert choice.model_extra.get("incomplete") is True
    gbnf = 'root ::= answer "."\nanswer ::= "yes" | "no" | "maybe"'
    resp = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Is it raining?"}],
                                          extra_body={"structured_outputs": {"grammar": gbnf}})
    assert resp.choices[0].message.content in ("yes.", "no.", "maybe.")
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model=model, prompt="x", max_tokens=4,
                                  extra_body={"structured_outputs": {"grammar": "start: a\na: \"x\" | b"}})
    body = err.value.body
    assert body["param"] == "structured_outputs.grammar" and "b" in body["message"]


def test_structured_outputs_json_options(client, model):
    """structured_outputs.property_order="any" compiles the schema with members in any
    order (output still validates); vLLM's whitespace_pattern is refused by name, not
    ignored; property_order on a non-JSON grammar is a 400 too."""
    resp = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Give a person as JSON."}], max_tokens=60, temperature=1.0,
        seed=3, extra_body={"structured_outputs": {"json": PERSON, "property_order": "any"}})
    choice = resp.choices[0]
    if choice.finish_reason == "stop":
        jsonschema.validate(json.loads(choice.message.content), PERSON)
    for extra, param in [({"json": PERSON, "whitespace_pattern": "[ ]?"}, "structured_outputs.whitespace_pattern"),
                         ({"regex": "[a-z]+", "property_order": "any"}, "structured_outputs.property_order")]:
        with pytest.raises(openai.BadRequestError) as err:
            client.completions.create(model=model, prompt="x", max_tokens=4, extra_body={"structured_outputs": extra})
        assert err.value.body["param"] == param, err.value.body


def test_named_tool_call_arguments_validate(client, model):
    weather = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                                "unit": {"enum": ["celsius", "fahrenheit"]}},
               "required": ["city", "unit"], "additionalProperties": False}
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": weather}},
             {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]
    resp = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Weather in Paris?"}], tools=tools,
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, temperature=0.0, max_tokens=60)
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), weather)
    resp = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "What time is it?"}], tools=tools,
        tool_choice="required", temperature=0.0, max_tokens=80)
    assert resp.choices[0].message.tool_calls[0].function.name in ("get_weather", "get_time")


def test_tool_choice_auto_answers_in_text_or_with_a_valid_call(client, model):
    weather = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}},
               "required": ["city"], "additionalProperties": False}
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather of a city",
                                               "parameters": weather}}]
    shown = [{"role": "user", "content": "Weather in Paris?"},
             {"role": "assistant", "content": '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'},
             {"role": "user", "content": "It is sunny there. And the weather in Rome?"}]
    kinds = set()
    for seed, messages in enumerate([[{"role": "user", "content": "Say hello."}], shown,
                                     [{"role": "user", "content": "What is 2 + 2?"}]]):
        resp = client.chat.completions.create(model=model, messages=messages, tools=tools, temperature=0.7,
                                              seed=seed, max_tokens=60)  # tool_choice defaults to "auto"
        choice = resp.choices[0]
        if choice.finish_reason == "tool_calls":
            call = choice.message.tool_calls[0]
            assert call.function.name == "get_weather" and choice.message.content is None
            jsonschema.validate(json.loads(call.function.arguments), weather)
            kinds.add("call")
        else:
            assert not (choice.message.content or "").startswith("<tool_call>")
            kinds.add("text")
        # streaming gives the same reply: content deltas for text, one tool_calls delta for a call
        stream = client.chat.completions.create(model=model, messages=messages, tools=tools, temperature=0.7,
                                                seed=seed, max_tokens=60, stream=True)
        content, calls, finish = "", [], None
        for chunk in stream:
            delta = chunk.choices[0].delta
            content += delta.content or ""
            calls += delta.tool_calls or []
            finish = chunk.choices[0].finish_reason or finish
        assert finish == choice.finish_reason
        if finish == "tool_calls":
            assert not content and calls[0].function.arguments == choice.message.tool_calls[0].function.arguments
        else:
            assert content == (choice.message.content or "") and not calls
    # With these seeds the model answers the plain questions in text and imitates the
    # call shown in the conversation, so both paths above are exercised.
    assert kinds == {"text", "call"}


def test_n_and_seed_and_logprobs(client, model):
    kwargs = dict(model=model, messages=[{"role": "user", "content": "Name a color."}], max_tokens=8,
                  temperature=1.0, seed=7, n=2, logprobs=True, top_logprobs=3)
    a = client.chat.completions.create(**kwargs)
    b = client.chat.completions.create(**kwargs)
    assert [c.message.content for c in a.choices] == [c.message.content for c in b.choices]
    lp = a.choices[0].logprobs.content[0]
    assert lp.logprob <= 0 and len(lp.top_logprobs) == 3


def test_disconnect_mid_stream_frees_blocks(live, runner, model):
    body = {"model": model, "messages": [{"role": "user", "content": "Tell a long story."}],
            "max_tokens": 400, "stream": True, "ignore_eos": True}
    with httpx.stream("POST", live.url + "/v1/chat/completions", json=body, timeout=60) as r:
        for i, _ in enumerate(r.iter_lines()):
            if i > 5:
                break  # leave mid-stream: the connection closes here
    assert wait_until_idle(runner, timeout=30)
    assert runner.engine.blocks.stats().used == 0


def test_metrics_are_exposed(live, client, model):
    client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=3)
    client.chat.completions.create(model=model, messages=[{"role": "user", "content": "A number"}], max_tokens=3,
                                   response_format={"type": "json_schema", "json_schema": {
                                       "name": "n", "schema": {"type": "integer"}}})
    text = httpx.get(live.url + "/metrics").text
    for name in ("structgen_requests_total", "structgen_time_to_first_token_seconds_bucket",
                 "structgen_kv_blocks_used", 'structgen_grammar_compile_seconds_count{kind="json_schema"}',
                 "structgen_fast_forwarded_tokens_total", "structgen_queue_depth", "structgen_grammar_cache_bytes",
                 "structgen_grammar_cache_budget_bytes", "structgen_grammar_cache_entries",
                 "structgen_grammar_cache_evictions_total", "structgen_grammar_cache_evicted_in_use_bytes"):
        assert name in text, name
    cache = {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
             if line.startswith("structgen_grammar_cache_") and not line.startswith("#")}
    assert (cache["structgen_grammar_cache_bytes"] + cache["structgen_grammar_cache_evicted_in_use_bytes"]
            <= cache["structgen_grammar_cache_budget_bytes"])


def test_finished_requests_let_go_of_their_evicted_grammars(live, client, model, runner):
    """With a budget of 0 every grammar is evicted as soon as it is compiled; once the
    requests are done, none is still held (nothing keeps a finished request's matcher)."""
    before = structgen.cache_info()["budget_bytes"]
    structgen.set_cache_bytes(0)
    try:
        for i in range(3):
            schema = {"type": "object", "properties": {f"k{i}": {"type": "integer"}}, "required": [f"k{i}"]}
            client.chat.completions.create(model=model, messages=PARIS, max_tokens=20,
                                           response_format=json_format(schema))
        assert wait_until_idle(runner, timeout=30)
        info = structgen.cache_info()
        assert info["evictions"] >= 2 and info["evicted_in_use"] == 0, info  # the last one just used stays
    finally:
        structgen.set_cache_bytes(before)


def test_api_key_is_enforced(runner):
    server = LiveServer(create_app(runner, api_key="sekrit"))
    try:
        bad = openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
        good = openai.OpenAI(base_url=server.url + "/v1", api_key="sekrit", max_retries=0)
        assert good.models.list().data
        assert httpx.get(server.url + "/health").status_code == 200  # health needs no key
    finally:
        server.stop()


def test_64_concurrent_streams_with_early_disconnects(live, runner, model):
    """64 streaming clients at once, every 8th leaving after its first chunks: the others
    all finish normally, nothing errors, and every KV block is free afterwards."""
    import asyncio

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}

    async def one(client: httpx.AsyncClient, i: int):
        body = {"model": model, "messages": [{"role": "user", "content": f"Pick a number, {i}."}],
                "max_tokens": 24, "stream": True, "temperature": 1.0, "seed": i}
        if i % 2:
            body["response_format"] = json_format(schema, "n")
        leave_early = i % 8 == 0
        chunks = []
        async with client.stream("POST", live.url + "/v1/chat/completions", json=body) as r:
            assert r.status_code == 200
            async for line in r.aiter_lines():
                if not line:
                    continue
                chunks.append(line)
                if leave_early and len(chunks) >= 2:
                    return None
        assert chunks[-1] == "data: [DONE]"
        events = [json.loads(c[6:]) for c in chunks[:-1]]
        assert not any("error" in e for e in events), events
        text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
        finish = [e["choices"][0]["finish_reason"] for e in events if e["choices"] and e["choices"][0]["finish_reason"]]
        if i % 2 and finish == ["stop"]:
            jsonschema.validate(json.loads(text), schema)
        return finish

    async def main():
        async with httpx.AsyncClient(timeout=300) as client:
            return await asyncio.gather(*[one(client, i) for i in range(64)])

    results = asyncio.run(main())
    completed = [r for r in results if r is not None]
    assert len(completed) == 56 and all(r in (["stop"], ["length"]) for r in completed)
    assert wait_until_idle(runner, timeout=60)
    assert runner.engine.blocks.stats().used == 0


def test_json_object_reply_is_an_object(client, model):
    resp = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Give me a JSON object about a cat."}],
        response_format={"type": "json_object"}, temperature=0.0, max_tokens=120)
    choice = resp.choices[0]
    if choice.finish_reason == "stop":
        assert isinstance(json.loads(choice.message.content), dict)
    else:
        assert choice.model_extra.get("incomplete") is True


def test_full_queue_gets_429_with_retry_after():
    """With room for one running and no waiting request, concurrent requests beyond it
    are refused at once with 429 + Retry-After; the admitted one completes."""
    import asyncio

    from structgen.default_model import load_default_tokenizer
    from tests.engine.tiny_models import TINY_SMOLLM_SHAPE

    engine = Engine(TINY_SMOLLM_SHAPE, load_format="dummy", tokenizer=load_default_tokenizer(),
                    kv_cache_bytes=16 << 20, max_num_seqs=1)
    runner = AsyncEngine(engine, max_waiting=0)
    server = LiveServer(create_app(runner, model_name="tiny"))

    async def main():
        body = {"messages": [{"role": "user", "content": "Go."}], "max_tokens": 300, "ignore_eos": True}
        async with httpx.AsyncClient(timeout=120) as c:
            return await asyncio.gather(*[c.post(server.url + "/v1/chat/completions", json=body) for _ in range(4)])

    try:
        responses = asyncio.run(main())
    finally:
        server.stop()
        runner.shutdown()
    codes = sorted(r.status_code for r in responses)
    assert 200 in codes and 429 in codes, codes
    for r in responses:
        if r.status_code == 429:
            assert r.headers["retry-after"] and r.json()["error"]["type"] == "rate_limit_error"
        else:
            assert r.json()["choices"][0]["finish_reason"] == "length"


def test_a_full_engine_refuses_before_compiling_the_grammar():
    """A request that would be shed is refused before its schema compiles: under a burst,
    shed requests are answered at once instead of queueing for the compile threads."""
    import asyncio

    import structgen
    from structgen.default_model import load_default_tokenizer
    from tests.engine.tiny_models import TINY_SMOLLM_SHAPE

    engine = Engine(TINY_SMOLLM_SHAPE, load_format="dummy", tokenizer=load_default_tokenizer(),
                    kv_cache_bytes=16 << 20, max_num_seqs=1)
    runner = AsyncEngine(engine, max_waiting=0)
    server = LiveServer(create_app(runner, model_name="tiny"))
    never_seen = {"type": "object", "properties": {"refused_before_compile_7193": {"type": "integer"}},
                  "required": ["refused_before_compile_7193"]}

    async def main():
        busy = {"messages": [{"role": "user", "content": "Go."}], "max_tokens": 300, "ignore_eos": True}
        shaped = {"messages": [{"role": "user", "content": "Go."}], "max_tokens": 5,
                  "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": never_seen}}}
        async with httpx.AsyncClient(timeout=120) as c:
            running = asyncio.create_task(c.post(server.url + "/v1/chat/completions", json=busy))
            while runner.num_in_flight == 0:
                await asyncio.sleep(0.01)
            misses = structgen.cache_info()["misses"]
            refused = await c.post(server.url + "/v1/chat/completions", json=shaped)
            return refused, structgen.cache_info()["misses"] - misses, await running

    try:
        refused, compiled, running = asyncio.run(main())
    finally:
        server.stop()
        runner.shutdown()
    assert refused.status_code == 429 and refused.headers["retry-after"]
    assert compiled == 0  # the schema was never compiled
    assert running.status_code == 200


def test_a_reservation_holds_room_until_filled_or_released():
    from structgen.default_model import load_default_tokenizer
    from structgen.engine.async_engine import EngineOverloadedError
    from tests.engine.tiny_models import TINY_SMOLLM_SHAPE

    engine = Engine(TINY_SMOLLM_SHAPE, load_format="dummy", tokenizer=load_default_tokenizer(),
                    kv_cache_bytes=16 << 20, max_num_seqs=1)
    runner = AsyncEngine(engine, max_waiting=1)
    try:
        first = runner.reserve(2)  # all the room: one running, one waiting
        assert runner.num_in_flight == 2
        with pytest.raises(EngineOverloadedError):
            runner.reserve(1)
        with pytest.raises(ValueError):
            first.fill(1)  # a reservation is filled by as many requests as it holds
        first.release()
        first.release()  # once only
        assert runner.num_in_flight == 0
        second = runner.reserve(1)
        second.fill(1)
        second.release()  # filled: the room is the request's now
        assert runner.num_in_flight == 1
    finally:
        runner.shutdown()


# -- what OpenAI and vLLM users expect: strict, undeclared properties, tool calls ----------

CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                         "country": {"type": "string", "maxLength": 20},
                                         "population": {"type": "integer", "minimum": 0, "maximum": 100000000}},
        "required": ["city", "country", "population"]}  # as pydantic writes it: additionalProperties unsaid
OPEN_CITY = {**CITY, "additionalProperties": True}
PARIS = [{"role": "user", "content": "Tell me about Paris."}]


def city_reply(client, model, **kwargs):
    resp = client.chat.completions.create(model=model, messages=PARIS, temperature=0.0, max_tokens=80, **kwargs)
    return resp.choices[0]


def city_format(schema, strict: bool | None = None) -> dict:
    spec = {"name": "City", "schema": schema}
    if strict is not None:
        spec["strict"] = strict
    return {"type": "json_schema", "json_schema": spec}


def undeclared(text: str) -> set:
    return set(json.loads(text)) - set(CITY["properties"])


def test_undeclared_properties_are_not_generated_where_the_schema_is_silent(client, model):
    """Greedy, this model adds "capital" and more to a City until max_tokens when JSON
    Schema's default lets it; by default the server generates declared keys only, and
    `structured_outputs.disable_additional_properties: false` restores the default."""
    choice = city_reply(client, model, response_format=city_format(CITY))
    assert choice.finish_reason == "stop" and not undeclared(choice.message.content)
    jsonschema.validate(json.loads(choice.message.content), CITY)
    restored = city_reply(client, model, response_format=city_format(CITY),
                          extra_body={"structured_outputs": {"disable_additional_properties": False}})
    assert restored.finish_reason == "length" and '"capital"' in restored.message.content


def test_strict_is_honoured_in_response_format(client, model):
    """An explicit additionalProperties: true is honoured, unless the schema is strict."""
    for unsaid in (False, None):
        loose = city_reply(client, model, response_format=city_format(OPEN_CITY, unsaid))
        assert '"capital"' in loose.message.content
    strict = city_reply(client, model, response_format=city_format(OPEN_CITY, True))
    assert strict.finish_reason == "stop" and not undeclared(strict.message.content)


@pytest.mark.parametrize("tool_choice", [{"type": "function", "function": {"name": "City"}}, "required"])
def test_strict_is_honoured_per_tool(client, model, tool_choice):
    other = {"type": "function", "function": {"name": "Weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    for strict in (True, False):
        tools = [{"type": "function", "function": {"name": "City", "parameters": OPEN_CITY, "strict": strict}}, other]
        choice = city_reply(client, model, tools=tools, tool_choice=tool_choice)
        call = choice.message.tool_calls[0]
        assert call.function.name == "City" and choice.message.content is None
        if strict:
            assert choice.finish_reason == "tool_calls" and not undeclared(call.function.arguments)
            jsonschema.validate(json.loads(call.function.arguments), OPEN_CITY)
        else:  # the model's extra keys run on until max_tokens, and the call says so
            assert choice.finish_reason == "length" and '"population": 11, "' in call.function.arguments


@pytest.mark.parametrize("tool_choice", [{"type": "function", "function": {"name": "City"}}, "required"])
def test_a_forced_call_cut_off_by_max_tokens_is_still_a_tool_call(client, model, tool_choice):
    tools = [{"type": "function", "function": {"name": "City", "parameters": CITY}}]
    for stream in (False, True):
        kwargs = dict(model=model, messages=PARIS, tools=tools, tool_choice=tool_choice, max_tokens=18,
                      temperature=0.0)
        if stream:
            chunks = list(client.chat.completions.create(stream=True, **kwargs))
            calls = [c for chunk in chunks for c in chunk.choices[0].delta.tool_calls or []]
            finish = [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices[0].finish_reason]
            content = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
        else:
            choice = client.chat.completions.create(**kwargs).choices[0]
            calls, finish, content = choice.message.tool_calls, [choice.finish_reason], choice.message.content
        assert finish == ["length"] and not content
        assert len(calls) == 1 and calls[0].function.name == "City"
        assert calls[0].function.arguments.startswith('{"city": "')  # partial, as written so far


def test_parallel_tool_calls(client, model):
    """With parallel_tool_calls (OpenAI's default) a model shown two calls writes two;
    with parallel_tool_calls false the grammar ends after one."""
    weather = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"]}
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": weather}}]
    shown = '<tool_call>{"name": "get_weather", "arguments": {"city": "%s"}}</tool_call>'
    messages = [{"role": "user", "content": "Weather in Paris and Rome?"},
                {"role": "assistant", "content": shown % "Paris" + shown % "Rome"},
                {"role": "user", "content": "Sunny in both. And the weather in Berlin and Madrid?"}]
    counts = {}
    for parallel in (True, False):
        choice = client.chat.completions.create(model=model, messages=messages, tools=tools, tool_choice="required",
                                                parallel_tool_calls=parallel, temperature=0.0,
                                                max_tokens=80).choices[0]
        assert choice.finish_reason == "tool_calls"
        for call in choice.message.tool_calls:
            jsonschema.validate(json.loads(call.function.arguments), weather)
        counts[parallel] = len(choice.message.tool_calls)
    assert counts == {True: 2, False: 1}


def test_tool_choice_errors_name_the_parameter(live, model):
    url = live.url + "/v1/chat/completions"
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},
             {"type": "function", "function": {"name": "g", "parameters": {
                 "type": "object", "properties": {"a": {"type": "integer", "minimum": "x"}}}}}]
    base = {"model": model, "messages": PARIS, "tools": tools}
    for bad in ("sometimes", {"type": "function"}):
        r = httpx.post(url, json={**base, "tool_choice": bad})
        error = r.json()["error"]
        assert r.status_code == 400 and error["param"] == "tool_choice", error
        assert "'none', 'auto' or 'required'" in error["message"] and "literal" not in error["message"]
    r = httpx.post(url, json={**base, "tool_choice": "required"})
    error = r.json()["error"]
    assert r.status_code == 400 and error["param"] == "tools[1].function.parameters", error
    assert error["message"].endswith("(at /properties/a/minimum)")
    r = httpx.post(url, json={**base, "tools": tools[:1], "max_tokens": 4,
                              "structured_outputs": {"disable_additional_properties": False}})
    assert r.status_code == 200, r.text  # tool_choice "auto": the calls follow a JSON Schema
    r = httpx.post(url, json={"model": model, "messages": PARIS,
                              "structured_outputs": {"disable_additional_properties": False}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "structured_outputs.disable_additional_properties"

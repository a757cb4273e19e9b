"""Input nested deep: schemas of 200 and 1,000 levels compile and mask, deeper ones are a
clear error naming the limit and where it was passed, never a RecursionError; several
deep compiles at once do not trip each other; and the server answers every such body,
and every body it cannot read, with an OpenAI error, never a 500."""

from __future__ import annotations

import json
import sys
import threading
import time

import httpx
import pytest

import structgen
from server.app import create_app
from server.guard import MAX_BODY_NESTING
from structgen.grammar.nesting import MAX_SCHEMA_LEVELS, check_nesting, text_nesting
from tests.server.test_server import LiveServer


def nested_objects(levels: int) -> dict:
    schema: dict = {"type": "integer"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


def nested_arrays(levels: int) -> dict:
    schema: dict = {"type": "integer"}
    for _ in range(levels):
        schema = {"type": "array", "items": schema, "minItems": 1}
    return schema


def nested_any_of(levels: int) -> dict:
    schema: dict = {"type": "integer"}
    for _ in range(levels):
        schema = {"anyOf": [schema, {"type": "null"}]}
    return schema


def dumps(value) -> str:
    """JSON text of a value nested deeper than json.dumps's default recursion allows."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 50_000))
    try:
        return json.dumps(value)
    finally:
        sys.setrecursionlimit(limit)


@pytest.mark.parametrize("make, first", [(nested_objects, b'{"a": {"a": '), (nested_arrays, b"[[[[[["),
                                         (nested_any_of, b"")])
@pytest.mark.parametrize("levels", [200, MAX_SCHEMA_LEVELS])
def test_deep_schemas_compile_and_mask(make, first, levels, smollm2_vocab):
    grammar = structgen.compile_json_schema(make(levels), smollm2_vocab)
    matcher = grammar.matcher()
    assert matcher.accept_bytes(first) and len(matcher.allowed_token_ids()) > 0


@pytest.mark.parametrize("make, pointer", [(nested_objects, "/properties/a/properties/a"),
                                           (nested_arrays, "/items/items/items"),
                                           (nested_any_of, "/anyOf/0/anyOf/0")])
@pytest.mark.parametrize("levels", [MAX_SCHEMA_LEVELS + 100, 10_000])
def test_deeper_schemas_are_refused_with_the_limit_and_where(make, pointer, levels, smollm2_vocab):
    schema = make(levels)
    for given in (schema, dumps(schema)):
        with pytest.raises(structgen.SchemaError, match="the limit") as err:
            structgen.compile_json_schema(given, smollm2_vocab)
        assert str(MAX_SCHEMA_LEVELS) in str(err.value)
        if isinstance(given, dict):
            assert err.value.pointer.startswith(pointer)


def test_the_nesting_check_names_the_first_value_past_the_limit():
    schema = {"properties": {"x": {"const": [[[[1]]]]}}}
    check_nesting(schema, limit=7)
    with pytest.raises(structgen.SchemaError) as err:
        check_nesting(schema, limit=6)
    assert err.value.pointer == "/properties/x/const/0/0/0"
    assert text_nesting('{"a": "[[[[{{", "b": [[]]}') == 3


def test_deep_compiles_at_once_do_not_trip_each_other(smollm2_vocab):
    """Each compile once lowered the recursion limit back when it ended, under the others."""
    structgen.clear_cache()
    errors = []

    def compile_one(levels):
        try:
            structgen.compile_json_schema(nested_objects(levels), smollm2_vocab, warm_s=0)
        except Exception as exc:  # collected: the assertion below shows it
            errors.append(exc)

    threads = [threading.Thread(target=compile_one, args=(levels,)) for levels in (300, 301, 302, 303)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


@pytest.fixture(scope="module")
def live():
    from structgen.default_model import load_default_tokenizer
    from structgen.engine import Engine
    from structgen.engine.async_engine import AsyncEngine
    from tests.engine.tiny_models import TINY_SMOLLM_SHAPE

    engine = Engine(TINY_SMOLLM_SHAPE, load_format="dummy", tokenizer=load_default_tokenizer(),
                    kv_cache_bytes=16 << 20)
    runner = AsyncEngine(engine)
    server = LiveServer(create_app(runner, model_name="tiny"))
    yield server
    server.stop()
    runner.shutdown()


def post(live, text: str | bytes, content_type: str = "application/json") -> httpx.Response:
    return httpx.post(live.url + "/v1/chat/completions", content=text, headers={"content-type": content_type},
                      timeout=120)


def schema_request(schema: dict) -> str:
    return dumps({"messages": [{"role": "user", "content": "x"}], "max_tokens": 4,
                  "response_format": {"type": "json_schema", "json_schema": {"name": "deep", "schema": schema}}})


@pytest.mark.parametrize("make", [nested_objects, nested_arrays, nested_any_of])
@pytest.mark.parametrize("levels", [200, MAX_SCHEMA_LEVELS, 10_000])
def test_the_server_answers_deep_schemas_with_200_or_a_400_naming_the_limit(live, make, levels):
    r = post(live, schema_request(make(levels)))
    if levels <= MAX_SCHEMA_LEVELS:
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["finish_reason"] in ("stop", "length")
    else:
        assert r.status_code == 400, r.text
        assert str(MAX_SCHEMA_LEVELS) in r.json()["error"]["message"]
    assert httpx.get(live.url + "/health").status_code == 200


def test_bodies_the_server_cannot_read_get_openai_errors(live):
    cases = [
        (post(live, "[" * 5000 + "]" * 5000), 400, f"the limit is {MAX_BODY_NESTING}"),
        (post(live, '{"anyOf": ' * 3000 + "{}" + "}" * 3000), 400, "nests"),
        (post(live, b"{not json"), 400, "not valid JSON"),
        (post(live, b"messages=x", "application/x-www-form-urlencoded"), 415, "application/json"),
        (httpx.get(live.url + "/v1/nothing"), 404, "/v1/nothing"),
        (httpx.get(live.url + "/v1/chat/completions"), 405, "GET"),
    ]
    for response, status, fragment in cases:
        assert response.status_code == status, response.text
        error = response.json()["error"]
        assert fragment in error["message"] and set(error) == {"message", "type", "param", "code"}


def test_grammars_nested_too_deep_are_refused_with_where(smollm2_vocab):
    from structgen.grammar.lark_grammar import MAX_NESTING

    deep = "start: " + "(" * (MAX_NESTING + 1) + '"a"' + ")" * (MAX_NESTING + 1) + "\n"
    with pytest.raises(structgen.GrammarError, match=f"more than {MAX_NESTING}") as err:
        structgen.compile_grammar(deep, smollm2_vocab)
    assert (err.value.line, err.value.column) == (1, 8 + MAX_NESTING)
    ok = 'start: "(" x ")" /[(]+/ // ((((\nx: ' + "(" * MAX_NESTING + '"a"' + ")" * MAX_NESTING + "\n"
    assert structgen.compile_grammar(ok, smollm2_vocab).accepts_bytes(b"(a)((")


@pytest.mark.parametrize("syntax", ["lark", "gbnf"])
def test_long_rule_chains_end_within_the_budget(syntax, smollm2_vocab):
    """10,000 rules each naming the next: refused as rules entered without consuming input,
    in a few seconds (deciding which rules are productive took minutes, past the budget)."""
    arrow = ":" if syntax == "lark" else " ::="
    first = "start" if syntax == "lark" else "root"
    text = f"{first}{arrow} r0\n" + "".join(f"r{i}{arrow} r{i + 1}\n" for i in range(10_000)) + f'r10000{arrow} "a"\n'
    started = time.monotonic()
    with pytest.raises(structgen.GrammarTooLargeError):
        structgen.compile_grammar(text, smollm2_vocab, syntax=syntax, timeout_s=10.0)
    assert time.monotonic() - started < 10.0 + 10.0
    chain = f"{first}{arrow} r0\n" + "".join(f"r{i}{arrow} r{i + 1}\n" for i in range(1_000)) + f'r1000{arrow} "a"\n'
    assert structgen.compile_grammar(chain, smollm2_vocab, syntax=syntax).accepts_bytes(b"a")


@pytest.mark.parametrize("line", ["%import nothing.X", "%import .common.X", "%import ..etc.X", "  %import os.X"])
def test_lark_imports_read_only_lark_own_grammars(line, smollm2_vocab):
    """`%import` of another module read files of the server's (and a missing one was a 500)."""
    with pytest.raises(structgen.GrammarError, match="lark's own grammars") as err:
        structgen.compile_grammar(f"start: X\n{line}\n", smollm2_vocab)
    assert err.value.line == 2
    assert structgen.compile_grammar("start: NUMBER\n%import common (NUMBER, WS)\n", smollm2_vocab).accepts_bytes(b"12")

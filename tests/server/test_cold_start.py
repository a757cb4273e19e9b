"""A first start on a fresh machine: `structgen serve` from the checkout with every cache
folder empty (the model is converted again, nothing compiled is found) prints its
start-up phases, listens, and answers a constrained request with a valid object. A
functional check with a generous timeout; the figures are `structgen bench startup`'s."""

from __future__ import annotations

import json

import httpx
import jsonschema
import pytest

from tests.server.serve_process import serve_process

START_TIMEOUT_S = 300
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}


@pytest.mark.slow
def test_a_cold_server_starts_and_answers(tmp_path):
    caches = tmp_path / "caches"
    log = tmp_path / "serve.log"
    with serve_process(log, START_TIMEOUT_S, STRUCTGEN_CACHE_DIR=str(caches / "structgen"),
                       HF_HOME=str(caches / "hf"), XDG_CACHE_HOME=str(caches / "xdg")) as server:
        body = {"model": "SmolLM2-135M-Instruct", "max_tokens": 60, "temperature": 0.0,
                "messages": [{"role": "user", "content": "Describe a person."}],
                "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}}
        reply = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=120)
        assert reply.status_code == 200, reply.text
        choice = reply.json()["choices"][0]
        if choice["finish_reason"] == "stop":
            jsonschema.validate(json.loads(choice["message"]["content"]), PERSON)
        else:
            assert choice["finish_reason"] == "length"
    text = log.read_text()
    assert "converting" in text  # the empty cache made it convert the model again
    for phase in ("loading the weights", "allocating the KV cache", "token trie", "compile worker"):
        assert phase in text, text

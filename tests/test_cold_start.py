"""A first start on a fresh machine: `structgen serve` from the checkout with every cache
folder empty (the model is converted again, nothing compiled is found) prints its
start-up phases, listens, and answers a constrained request with a valid object. A
functional check with a generous timeout; the figures are `structgen bench startup`'s."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time

import httpx
import jsonschema
import pytest
from test_cli import CLI

START_TIMEOUT_S = 300
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_cold_server_starts_and_answers(tmp_path):
    port = free_port()
    caches = tmp_path / "caches"
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", STRUCTGEN_CACHE_DIR=str(caches / "structgen"),
               HF_HOME=str(caches / "hf"), XDG_CACHE_HOME=str(caches / "xdg"))
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([*CLI, "serve", "--port", str(port)], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_listening(url, proc, log)
        body = {"model": "SmolLM2-135M-Instruct", "max_tokens": 60, "temperature": 0.0,
                "messages": [{"role": "user", "content": "Describe a person."}],
                "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}}
        reply = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
        assert reply.status_code == 200, reply.text
        choice = reply.json()["choices"][0]
        if choice["finish_reason"] == "stop":
            jsonschema.validate(json.loads(choice["message"]["content"]), PERSON)
        else:
            assert choice["finish_reason"] == "length"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    text = log.read_text()
    assert "converting" in text  # the empty cache made it convert the model again
    for phase in ("loading the weights", "allocating the KV cache", "token trie", "compile worker"):
        assert phase in text, text


def wait_listening(url: str, proc: subprocess.Popen, log) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        assert proc.poll() is None, f"structgen serve exited: {log.read_text()}"
        assert time.monotonic() < deadline, f"structgen serve did not listen: {log.read_text()}"
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.5)

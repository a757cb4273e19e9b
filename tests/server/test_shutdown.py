"""SIGTERM with a stream in flight, for `structgen serve` and for `structgen serve
--replicas 1` (Ray Serve): the stream runs to its last token and `[DONE]`, new requests
get a 503 (`shutting_down`, with `Retry-After`), and then the server, and the cluster it
started, stop. A tiny random-weight model of SmolLM2's
architecture, the real command on loopback."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import time

import httpx
import pytest

from tests.engine.tiny_models import make_tokenized_checkpoint
from tests.server.serve_process import fields_after_comm, serve_process

START_TIMEOUT_S = 300
LONG_STREAM = {"model": "tiny", "messages": [{"role": "user", "content": "Go on."}], "max_tokens": 900,
               "ignore_eos": True, "stream": True}
DEPLOYMENTS = {
    "one engine": [],
    "ray serve": ["--replicas", "1", "--drain-seconds", "60"],
}


@pytest.mark.parametrize("deployment", list(DEPLOYMENTS))
def test_sigterm_lets_a_stream_in_flight_finish_then_stops(deployment, tmp_path):
    if deployment == "ray serve" and importlib.util.find_spec("ray") is None:
        pytest.skip("Ray Serve is not installed (the scale extra)")
    model = tmp_path / "tiny"
    if not make_tokenized_checkpoint(model):
        pytest.skip("no SmolLM2 tokenizer at hand")
    args = [*DEPLOYMENTS[deployment], "--model", str(model), "--compile-workers", "0", "--served-model-name", "tiny"]
    with serve_process(tmp_path / "serve.log", START_TIMEOUT_S, args) as server:
        with httpx.stream("POST", server.url + "/v1/chat/completions", json=LONG_STREAM, timeout=120) as stream:
            lines = (line for line in stream.iter_lines() if line)
            assert next(lines).startswith("data: ")  # the stream is under way
            os.kill(server.pid, signal.SIGTERM)
            sent_at = time.monotonic()
            turned_away = turned_away_while_draining(server.url)
            rest = list(lines)
        finished_after_s = time.monotonic() - sent_at
        assert rest[-1] == "data: [DONE]", rest[-3:]
        finals = [json.loads(line[6:])["choices"][0]["finish_reason"] for line in rest[:-1]]
        assert finals[-1] == "length", finals[-3:]
        assert finished_after_s > 0.5, "the stream ended before the drain was tested; make it longer"
        assert turned_away.status_code == 503, turned_away.text
        assert turned_away.json()["error"]["code"] == "shutting_down", turned_away.text
        assert turned_away.headers["retry-after"], turned_away.headers
        deadline = time.monotonic() + 90
        while process_alive(server.pid):
            assert time.monotonic() < deadline, "structgen serve did not stop after draining"
            time.sleep(0.5)


def turned_away_while_draining(url: str, within_s: float = 10.0) -> httpx.Response:
    """The first answer to a new request that is not a 200 (the drain starts a moment
    after the signal); the last 200 after `within_s`. A connection refused or reset
    fails the test: while draining, every request that reaches the server is answered."""
    deadline = time.monotonic() + within_s
    while True:
        answer = httpx.post(url + "/v1/chat/completions", timeout=30, json={
            "model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1})
        if answer.status_code != 200 or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def process_alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return fields_after_comm(stat.read())[0] != "Z"
    except OSError:
        return False

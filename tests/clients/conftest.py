"""The client suite's server: `structgen serve` started from the checkout as a user
starts it (the real command, the embedded SmolLM2 model, loopback), once per session,
and stopped after the last client test."""

from __future__ import annotations

import os
import socket
import subprocess
import time

import httpx
import pytest
from test_cli import CLI

START_TIMEOUT_S = 300  # a first start converts the model (~25 s on 2 cores; see README)
# LiteLLM fetches its price list at import unless told not to: no network at run time
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def base_url(tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    with open(log, "w") as out:
        proc = subprocess.Popen([*CLI, "serve", "--port", str(port)], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            assert proc.poll() is None, f"structgen serve exited: {log.read_text()}"
            assert time.monotonic() < deadline, f"structgen serve did not listen: {log.read_text()}"
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.5)
        yield url + "/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def model_name(base_url) -> str:
    return httpx.get(base_url + "/models").json()["data"][0]["id"]

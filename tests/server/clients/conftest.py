"""The client suite's server: `structgen serve` started from the checkout as a user
starts it (the real command, the embedded SmolLM2 model, loopback), once per session,
and stopped after the last client test."""

from __future__ import annotations

import os

import httpx
import pytest

from tests.server.serve_process import serve_process

START_TIMEOUT_S = 300  # a first start converts the model (~25 s on 2 cores; see README)
# LiteLLM fetches its price list at import unless told not to: no network at run time
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(scope="session")
def base_url(tmp_path_factory):
    with serve_process(tmp_path_factory.mktemp("serve") / "serve.log", START_TIMEOUT_S) as url:
        yield url + "/v1"


@pytest.fixture(scope="session")
def model_name(base_url) -> str:
    return httpx.get(base_url + "/models").json()["data"][0]["id"]

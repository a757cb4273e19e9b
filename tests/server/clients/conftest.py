"""The client suite's server: `structgen serve` started from the checkout as a user
starts it (the real command, the embedded SmolLM2 model, loopback), once per deployment,
and stopped after the last client test of this package, so no cluster outlives it. The suite runs twice: against one engine, and
against two replicas on Ray Serve (`--replicas 2`), where every answer must be the same
kind of answer."""

from __future__ import annotations

import os

import httpx
import pytest

from tests.server.serve_process import serve_process

START_TIMEOUT_S = 300  # a first start converts the model (~25 s on 2 cores; see README)
# LiteLLM fetches its price list at import unless told not to: no network at run time
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


DEPLOYMENTS = {"one-engine": (), "ray-2-replicas": ("--replicas", "2", "--compile-workers", "1")}


@pytest.fixture(scope="package", params=list(DEPLOYMENTS))
def base_url(request, tmp_path_factory):
    if DEPLOYMENTS[request.param]:
        pytest.importorskip("ray.serve")
    log = tmp_path_factory.mktemp(request.param) / "serve.log"
    with serve_process(log, START_TIMEOUT_S, DEPLOYMENTS[request.param]) as server:
        yield server.url + "/v1"


@pytest.fixture(scope="package")
def model_name(base_url) -> str:
    return httpx.get(base_url + "/models").json()["data"][0]["id"]

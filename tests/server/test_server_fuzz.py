"""schemathesis against the served OpenAPI document: generated requests (valid and
invalid bodies) never get a 5xx. The app runs on a tiny random-weight model with the
real SmolLM2 tokenizer, so each generated request decodes quickly."""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402

from server.app import create_app  # noqa: E402
from structgen.engine import Engine  # noqa: E402
from structgen.engine.async_engine import AsyncEngine  # noqa: E402
from tests.engine.tiny_models import TINY_SMOLLM_SHAPE  # noqa: E402

def _app():
    from structgen.default_model import load_default_tokenizer

    engine = Engine(TINY_SMOLLM_SHAPE, load_format="dummy", tokenizer=load_default_tokenizer(),
                    kv_cache_bytes=32 << 20, max_num_seqs=8)
    return create_app(AsyncEngine(engine), model_name="tiny")


schema = schemathesis.openapi.from_asgi("/openapi.json", _app())


@schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors(case):
    if isinstance(case.body, dict):
        # Keep generations short (the property under test is "no 5xx", not speed): an
        # absent max_tokens would let a chat request run to the end of the context.
        for key in ("max_tokens", "max_completion_tokens"):
            value = case.body.get(key)
            if value is None or (isinstance(value, int) and value > 8):
                case.body[key] = 8
        if isinstance(case.body.get("n"), int) and case.body["n"] > 2:
            case.body["n"] = 2
    response = case.call()
    assert response.status_code < 500, (response.status_code, response.text[:500])

"""The OpenAI-compatible HTTP API on top of `AsyncEngine`: `create_app` assembles it.

Endpoints: POST /v1/chat/completions and /v1/completions (`completions.py`), GET
/v1/models, /health and /metrics (`admin.py`). In front of every route, `guard.py`
checks the API key and the body; every error is an OpenAI error body (`errors.py`).
The routes read the engine, the metrics and the served model name from the app's
`ServerState` (`state.py`). Owns the assembly only.
"""

from __future__ import annotations

from fastapi import FastAPI

from server import admin, completions
from server.errors import install_handlers
from server.guard import DEFAULT_MAX_BODY_BYTES, Guard
from server.metrics import Metrics
from server.state import ServerState
from structgen.engine.async_engine import AsyncEngine
from structgen.grammar.nesting import make_room_for_deep_input


def create_app(engine: AsyncEngine, *, model_name: str | None = None, api_key: str | None = None,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, disable_additional_properties: bool = True,
               stream_interval: int = 1) -> FastAPI:
    """disable_additional_properties: an object schema that declares properties and is
    silent on `additionalProperties` gets no undeclared ones (a request's
    `structured_outputs.disable_additional_properties` overrides it). stream_interval:
    the tokens a streamed chunk holds after a stream's first (streaming.py)."""
    make_room_for_deep_input()  # bodies and schemas up to the nesting limits parse and compile
    app = FastAPI(title="structgen", version="0.1.0", description="OpenAI-compatible structured generation")
    metrics = Metrics()
    app.state.server = ServerState(engine, metrics, model_name or engine.engine.model_name,
                                   disable_additional_properties, stream_interval)
    app.add_middleware(Guard, api_key=api_key, max_body_bytes=max_body_bytes,
                       count_response=lambda endpoint, status: metrics.requests.labels(endpoint, status).inc())
    install_handlers(app)
    app.include_router(admin.router)
    app.include_router(completions.router)
    return app

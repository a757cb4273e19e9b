"""What every route of one server reads: its engine, its metrics, the model name it
serves and its default for undeclared properties. Owns `ServerState` (kept on the
FastAPI app by `create_app`) and `state_of(request)`; routes keep no state of their own."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from server.metrics import Metrics
from structgen.engine.async_engine import AsyncEngine


@dataclass(frozen=True)
class ServerState:
    engine: AsyncEngine
    metrics: Metrics
    served: str  # the model name clients ask for
    disable_additional_properties: bool  # an object schema silent on them gets none
    stream_interval: int = 1  # tokens per streamed chunk after a stream's first


def state_of(request: Request) -> ServerState:
    return request.app.state.server

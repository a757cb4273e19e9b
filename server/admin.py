"""The routes that are not completions: GET /health, /v1/models and /metrics (Prometheus).
Owns these three only."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from server.errors import APIError
from server.state import state_of

router = APIRouter()


@router.get("/health")
async def health(http: Request):
    engine = state_of(http).engine
    if engine.dead is not None:
        raise APIError(503, f"engine stopped: {engine.dead!r}", "server_error")
    return {"status": "ok"}


@router.get("/v1/models")
async def models(http: Request):
    state = state_of(http)
    return {"object": "list", "data": [{"id": state.served, "object": "model", "created": 0, "owned_by": "structgen",
                                        "max_model_len": state.engine.engine.max_model_len}]}


@router.get("/metrics")
async def prometheus(http: Request):
    state = state_of(http)
    engine, metrics = state.engine.engine, state.metrics
    stats = engine.stats()
    metrics.waiting.set(stats.waiting + len(engine.compiling))
    metrics.running.set(stats.running)
    metrics.kv_used.set(stats.blocks.used)
    metrics.kv_total.set(stats.blocks.total)
    return PlainTextResponse(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

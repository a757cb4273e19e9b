"""The ingress of the Ray Serve application: the one HTTP endpoint in front of the
engine replicas.

Every request passes the same `Guard` as under `structgen serve` (API key, body size,
media type, nesting), is given its `Route` (routes.py), and is forwarded whole to the
replica the router picks (router.py); the replica's answer streams back unchanged,
with the `x-structgen-replica` header naming it. `/metrics` is the ingress's own:
routing and grammar-cache figures per replica (metrics.py).

Faults:
- a replica that fails before the first byte of its answer (it died, or was
  unreachable) costs nothing but time: the request is sent again, avoiding it, up to
  `MAX_ATTEMPTS` times;
- one that fails mid-stream ends the stream with an OpenAI error event, never a hang;
- a request no replica accepts within `ACCEPT_TIMEOUT_S` gets a 503 (`/health` within
  `HEALTH_TIMEOUT_S`: healthy while any replica is).

Shutting down, the ingress drains (`drain`): from then on every request, `/health`
too, gets a 503, and the driver (cluster.py) waits until the requests in flight are
answered before it stops Ray Serve.

Owns forwarding and these rules; never the routes' own behaviour (the replica's app).
"""

from __future__ import annotations

import asyncio
import json

from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from ray.exceptions import NodeDiedError, RayActorError, WorkerCrashedError
from ray.serve.exceptions import DeploymentUnavailableError, ReplicaUnavailableError
from ray.serve.handle import DeploymentHandle
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route as HTTPRoute

from server.completions import GRAMMAR_CACHE_HEADER
from server.drain import Draining
from server.errors import APIError, error_response
from server.guard import Guard
from server.launch import ServeOptions
from server.ray_serve.forwarding import Accepted, Body, ForwardedRequest, Start
from server.ray_serve.metrics import ScaleOutMetrics
from server.ray_serve.routes import Route, route_for

REPLICA_FAILURES = (RayActorError, WorkerCrashedError, NodeDiedError, ReplicaUnavailableError,
                    DeploymentUnavailableError)
MAX_ATTEMPTS = 3
RETRY_PAUSE_S = 0.5
# How long a request may wait for a replica to take it: longer than a replica's restart
# (~30 s on 2 cores with the embedded model), so a request sent while the only replica
# restarts is served.
ACCEPT_TIMEOUT_S = 120.0
HEALTH_TIMEOUT_S = 10.0  # /health: unhealthy when no replica answers within this


class ReplicaUnavailable(Exception):
    pass


class Answer:
    """A replica's answer under way: which replica, its response start, and the rest."""

    def __init__(self, stream, replica: str, start: Start):
        self.stream, self.replica, self.start = stream, replica, start

    def header(self, name: str) -> str | None:
        for key, value in self.start.headers:
            if key.decode("latin-1").lower() == name:
                return value.decode("latin-1")
        return None


class Ingress:
    def __init__(self, engines: DeploymentHandle, options: ServeOptions):
        self.engines = engines.options(stream=True)
        self.options = options
        self.metrics = ScaleOutMetrics()
        self.forwarding = Draining(self._forward)  # counts the requests being forwarded or answered

    def __serve_build_asgi_app__(self):
        routes = Starlette(routes=[HTTPRoute("/metrics", self.prometheus, methods=["GET"]),
                                   Mount("", app=self.forwarding)])
        return Guard(routes, api_key=self.options.api_key, max_body_bytes=self.options.max_body_bytes,
                     count_response=lambda endpoint, status: self.metrics.requests.labels(endpoint, status).inc())

    async def prometheus(self, _request) -> PlainTextResponse:
        return PlainTextResponse(generate_latest(self.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    def drain(self) -> int:
        """Refuses every new request from now on; returns how many are still in flight."""
        self.forwarding.start()
        return self.forwarding.in_flight

    async def _forward(self, scope, receive, send) -> None:
        body = await _read_body(receive)
        request = ForwardedRequest.from_scope(scope, body)
        route = route_for(request.path, body, not self.options.allow_additional_properties)
        try:
            answer = await self._first_answer(request, route)
        except ReplicaUnavailable as err:
            await error_response(APIError(503, str(err), "server_error", headers={"Retry-After": "5"}))(
                scope, receive, send)
            return
        try:
            self.metrics.served(answer.replica, route.served_by(answer.replica), answer.header(GRAMMAR_CACHE_HEADER))
            await send({"type": "http.response.start", "status": answer.start.status,
                        "headers": answer.start.headers})
            await self._relay_body(answer, send)
        finally:
            answer.stream.cancel()  # no-op when it ended; stops the replica's work when our client left

    async def _first_answer(self, request: ForwardedRequest, route: Route) -> Answer:
        """The first replica answer to start, trying others when a replica fails first."""
        failure: Exception | None = None
        accept_timeout_s = HEALTH_TIMEOUT_S if request.path == "/health" else ACCEPT_TIMEOUT_S
        for attempt in range(MAX_ATTEMPTS):
            if attempt:
                self.metrics.retries.inc()
                await asyncio.sleep(RETRY_PAUSE_S)
            stream, replica = self.engines.handle.remote(request, route=route), None
            try:
                accepted = await asyncio.wait_for(stream.__anext__(), accept_timeout_s)
                replica = accepted.replica if isinstance(accepted, Accepted) else None
                start = await stream.__anext__()
                return Answer(stream, replica, start)
            except asyncio.TimeoutError:
                stream.cancel()
                raise ReplicaUnavailable(f"no engine replica took the request within {accept_timeout_s:.0f} s")
            except (StopAsyncIteration, *REPLICA_FAILURES) as err:
                stream.cancel()
                failure = err
                if replica is not None:
                    route.avoid.add(replica)
            except BaseException:
                stream.cancel()
                raise
        raise ReplicaUnavailable(f"the engine replicas failed this request {MAX_ATTEMPTS} times; the last "
                                 f"failure: {type(failure).__name__}: {failure}")

    async def _relay_body(self, answer: Answer, send) -> None:
        try:
            async for message in answer.stream:
                if isinstance(message, Body):
                    await send({"type": "http.response.body", "body": message.chunk, "more_body": True})
        except REPLICA_FAILURES as err:
            self.metrics.cut_streams.inc()
            if (answer.header("content-type") or "").startswith("text/event-stream"):
                await send({"type": "http.response.body", "body": _error_event(answer.replica, err),
                            "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _read_body(receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _error_event(replica: str, err: Exception) -> bytes:
    error = {"error": {"message": f"the engine replica {replica} failed mid-stream ({type(err).__name__}); the "
                                  "output so far is incomplete", "type": "server_error", "param": None,
                       "code": "replica_failed"}}
    return f"data: {json.dumps(error)}\n\ndata: [DONE]\n\n".encode()

"""One engine replica of the Ray Serve application: an actor that runs what
`structgen serve` runs (`server.launch`), with its own engine, KV cache and grammar
cache, and answers the ingress's forwarded requests through the same app.

Ray restarts a replica whose `check_health` fails (its engine stopped) or whose process
died. Owns the replica's life and its answer stream; never routing.
"""

from __future__ import annotations

from typing import AsyncIterator

from ray import serve

from server import launch
from server.ray_serve.forwarding import REPLICA_HEADER, Accepted, Body, ForwardedRequest, Start, replay
from server.ray_serve.routes import Route


class EngineReplica:
    def __init__(self, options: launch.ServeOptions):
        self.name = serve.get_replica_context().replica_id.unique_id
        self.served = launch.start(options)

    async def handle(self, request: ForwardedRequest, route: Route | None = None
                     ) -> AsyncIterator[Accepted | Start | Body]:
        """`route` is the router's; the replica answers whatever it is sent."""
        yield Accepted(self.name)
        async for message in replay(self.served.app, request):
            if isinstance(message, Start):
                message = Start(message.status, [*message.headers, (REPLICA_HEADER.encode(), self.name.encode())])
            yield message

    def check_health(self) -> None:
        if self.served.runner.dead is not None:
            raise RuntimeError(f"the engine stopped: {self.served.runner.dead!r}")

    def __del__(self) -> None:
        served = getattr(self, "served", None)
        if served is not None:
            served.stop()

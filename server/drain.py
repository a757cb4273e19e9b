"""The drain of `structgen serve` (one engine under uvicorn) on SIGTERM or Ctrl-C:
new requests get a 503 (`shutting_down`, with `Retry-After`) while the ones in flight
finish, for at most `drain_seconds`; then uvicorn stops. A second signal stops it at once.

uvicorn's own shutdown closes its listening socket at the signal, and a request whose
connection lands at that moment is reset: its client cannot tell whether it was served.
Here the socket stays open through the drain, and every request that reaches it is
answered. The Ray Serve ingress wraps its forwarding in the same `Draining`
(server/ray_serve/ingress.py).

Owns the drain only; never the routes (app.py) or the engine's stop (launch.py).
"""

from __future__ import annotations

import threading
import time

import uvicorn

from server.errors import APIError, error_response

DRAIN_SECONDS = 30.0  # the default of --drain-seconds
POLL_S = 0.05  # how often the drain looks at the requests in flight


def shutting_down() -> APIError:
    """The answer to a request that arrives while the server drains."""
    return APIError(503, "the server is shutting down", "server_error", code="shutting_down",
                    headers={"Retry-After": "5"})


class Draining:
    """ASGI wrapper: counts the HTTP requests in flight and, once `start()` is called,
    answers every new one 503."""

    def __init__(self, app):
        self.app = app
        self.in_flight = 0
        self.draining = False

    def start(self) -> None:
        self.draining = True

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.draining:
            await error_response(shutting_down())(scope, receive, send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


class DrainingServer(uvicorn.Server):
    """uvicorn's server, whose first SIGTERM or SIGINT starts the drain instead of the
    stop."""

    def __init__(self, config: uvicorn.Config, draining: Draining, drain_seconds: float):
        super().__init__(config)
        self.draining, self.drain_seconds = draining, drain_seconds

    def handle_exit(self, sig, frame) -> None:
        if self.draining.draining:  # a second signal: stop now
            super().handle_exit(sig, frame)
            return
        self.draining.start()
        threading.Thread(target=self._stop_when_drained, args=(sig,), name="drain", daemon=True).start()

    def _stop_when_drained(self, sig) -> None:
        deadline = time.monotonic() + self.drain_seconds
        while self.draining.in_flight and time.monotonic() < deadline:
            time.sleep(POLL_S)
        super().handle_exit(sig, None)

"""server/drain.py under a real uvicorn server on loopback: a drain answers new requests
503 while one in flight goes on, and stops the server once that one is done, or after
`drain_seconds` when it is not. The app is a small ASGI stream whose pace the test sets
(the engine's own drain runs in tests/server/test_shutdown.py)."""

from __future__ import annotations

import asyncio
import signal
import threading
import time

import httpx
import uvicorn

from server.drain import Draining, DrainingServer
from tests.server.serve_process import free_port


def ticking(seconds: float):
    """An ASGI app that streams a line every 0.1 s for `seconds`."""
    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        for _ in range(int(seconds / 0.1)):
            await send({"type": "http.response.body", "body": b"tick\n", "more_body": True})
            await asyncio.sleep(0.1)
        await send({"type": "http.response.body", "body": b"done\n", "more_body": False})
    return app


def running(stream_s: float, drain_s: float):
    app = Draining(ticking(stream_s))
    port = free_port()
    server = DrainingServer(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           timeout_graceful_shutdown=0.5), app, drain_s)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    return server, thread, f"http://127.0.0.1:{port}"


def test_a_drain_lets_the_request_in_flight_finish_and_turns_new_ones_away():
    server, thread, url = running(stream_s=1.5, drain_s=30)
    with httpx.stream("GET", url, timeout=10) as stream:
        lines = stream.iter_lines()
        assert next(lines) == "tick"
        server.handle_exit(signal.SIGTERM, None)
        turned_away = httpx.get(url, timeout=10)
        rest = list(lines)
    assert turned_away.status_code == 503 and turned_away.headers["retry-after"], turned_away
    assert turned_away.json()["error"]["code"] == "shutting_down"
    assert rest[-1] == "done"
    thread.join(10)
    assert not thread.is_alive(), "the server did not stop once its last request was done"


def test_a_drain_stops_the_server_after_drain_seconds_and_a_second_signal_at_once():
    server, thread, url = running(stream_s=60, drain_s=0.5)
    with httpx.stream("GET", url, timeout=10) as stream:
        assert next(stream.iter_lines()) == "tick"
        stopped_at = time.monotonic()
        server.handle_exit(signal.SIGTERM, None)
        thread.join(10)
    assert not thread.is_alive() and time.monotonic() - stopped_at < 5, "the drain outlasted drain_seconds"

    server, thread, url = running(stream_s=60, drain_s=60)
    with httpx.stream("GET", url, timeout=10) as stream:
        assert next(stream.iter_lines()) == "tick"
        server.handle_exit(signal.SIGTERM, None)
        server.handle_exit(signal.SIGTERM, None)
        thread.join(10)
    assert not thread.is_alive(), "a second signal did not stop the server"

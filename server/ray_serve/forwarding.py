"""An HTTP request carried from the ingress to an engine replica, and its replay there.

The ingress reads a request once and sends it as a `ForwardedRequest` (plain data that
Ray pickles); the replica runs it through the very app `structgen serve` runs
(`server.app.create_app`), so that every route, parameter and error body is the same
whichever way structgen is deployed. The replica answers with a stream of messages:
`Accepted(replica)` at once, then `Start(status, headers)`, then `Body(chunk)`s. If the
ingress stops reading (its client left), the replayed app sees a disconnect, so a
compile or a generation of a client that left is cancelled as it is under uvicorn.
Owns this message format and the replay; never routing, retries or Ray itself.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

REPLICA_HEADER = "x-structgen-replica"  # names the replica that served a response


@dataclass(frozen=True)
class ForwardedRequest:
    method: str
    path: str
    query_string: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes
    client: tuple[str, int] | None = None

    @classmethod
    def from_scope(cls, scope: dict, body: bytes) -> "ForwardedRequest":
        return cls(scope["method"], scope["path"], scope.get("query_string", b""), list(scope["headers"]), body,
                   tuple(scope["client"]) if scope.get("client") else None)

    def scope(self) -> dict:
        return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": self.method,
                "scheme": "http", "path": self.path, "raw_path": self.path.encode(), "root_path": "",
                "query_string": self.query_string, "headers": self.headers, "client": self.client,
                "server": ("127.0.0.1", 0), "state": {}}


@dataclass(frozen=True)
class Accepted:
    replica: str  # the replica that took the request; nothing has been sent yet


@dataclass(frozen=True)
class Start:
    status: int
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)


@dataclass(frozen=True)
class Body:
    chunk: bytes


_APP_DONE = object()


async def replay(app: Any, request: ForwardedRequest) -> AsyncIterator[Start | Body]:
    """`request` run through the ASGI `app`: its response start, then its body chunks."""
    sent: asyncio.Queue = asyncio.Queue()
    client_gone = asyncio.Event()
    body_given = False

    async def receive() -> dict:
        nonlocal body_given
        if not body_given:
            body_given = True
            return {"type": "http.request", "body": request.body, "more_body": False}
        await client_gone.wait()
        return {"type": "http.disconnect"}

    task = asyncio.create_task(app(request.scope(), receive, sent.put))
    task.add_done_callback(lambda _: sent.put_nowait(_APP_DONE))
    try:
        async for message in _joined(sent):
            yield message
        task.result()  # the app's own failure, if any
    finally:
        client_gone.set()  # a reader that stopped early: the app sees its client leave
        if not task.done():
            await asyncio.wait({task}, timeout=5)
            task.cancel()


async def _joined(sent: asyncio.Queue) -> AsyncIterator[Start | Body]:
    """The app's messages until it is done, with the body chunks already queued behind
    one joined to it (never waiting for more): a busy replica sends fewer, larger
    messages, and each message costs every hop to the client about the same."""
    held = None  # a message taken from the queue while joining, not yet handled
    while True:
        message, held = (held if held is not None else await sent.get()), None
        if message is _APP_DONE:
            return
        if message["type"] == "http.response.start":
            yield Start(message["status"], list(message.get("headers", [])))
            continue
        chunks = [message.get("body", b"")]
        while not sent.empty():
            following = sent.get_nowait()
            if following is _APP_DONE or following["type"] != "http.response.body":
                held = following
                break
            chunks.append(following.get("body", b""))
        if body := b"".join(chunks):
            yield Body(body)

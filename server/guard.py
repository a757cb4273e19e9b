"""What every HTTP request passes before its route: the API key, the body's size, and a
POST body's media type and nesting depth (checked before anything parses it: the JSON
parser recurses once per level). Refusals are OpenAI error bodies; every response is
counted by endpoint and status.

A plain ASGI middleware, not Starlette's `BaseHTTPMiddleware`: that one hides a
client's disconnect from the route (`Request.is_disconnected` stays False), and the
server cancels the compile of a client that left. The body read here is handed to the
route as it came, then the route receives from the connection itself. Owns these checks
only; the routes are app.py's.
"""

from __future__ import annotations

from typing import Any

from server.errors import APIError, error_response
from structgen.grammar.nesting import MAX_JSON_NESTING, MAX_SCHEMA_LEVELS, text_nesting

DEFAULT_MAX_BODY_BYTES = 4 << 20
MAX_BODY_NESTING = MAX_JSON_NESTING + 16  # a schema's own limit, and the fields around it


class Guard:
    def __init__(self, app: Any, *, api_key: str | None, max_body_bytes: int, count_response):
        """count_response(endpoint, status): called once per response."""
        self.app, self.api_key, self.max_body_bytes = app, api_key, max_body_bytes
        self.count_response = count_response

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        endpoint, status = scope["path"], []

        async def counted_send(message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        try:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            self._check_key(endpoint, headers)
            self._check_length(headers)
            if scope["method"] == "POST":
                body, more = await self._read_body(receive)
                _check_body(body, headers)
                receive = _replaying(body, more, receive)
            await self.app(scope, receive, counted_send)
        except APIError as err:
            await error_response(err)(scope, receive, counted_send)
        finally:
            if status:
                self.count_response(endpoint, str(status[0]))

    def _check_key(self, endpoint: str, headers: dict) -> None:
        if self.api_key is not None and endpoint.startswith("/v1/"):
            if headers.get("authorization", "") != f"Bearer {self.api_key}":
                raise APIError(401, "invalid or missing API key", "authentication_error", code="invalid_api_key")

    def _check_length(self, headers: dict) -> None:
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            raise APIError(413, f"request body of {length} bytes exceeds the limit of {self.max_body_bytes}",
                           code="request_too_large")

    async def _read_body(self, receive) -> tuple[bytes, bool]:
        """(the body, whether the connection closed while it was read)."""
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return b"".join(chunks), True
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:  # no (or a false) Content-Length
                raise APIError(413, f"request body exceeds the limit of {self.max_body_bytes} bytes",
                               code="request_too_large")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks), False


def _replaying(body: bytes, disconnected: bool, receive):
    """A `receive` that gives the route the body already read, then the connection's own
    messages (its disconnect, above all)."""
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        if disconnected:
            return {"type": "http.disconnect"}
        return await receive()

    return replay


def _check_body(body: bytes, headers: dict) -> None:
    if not body:
        return
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type and not content_type.endswith("json"):
        raise APIError(415, f"the request body must be JSON (Content-Type: application/json), not {content_type}",
                       code="unsupported_media_type")
    depth = text_nesting(body)
    if depth > MAX_BODY_NESTING:
        raise APIError(400, f"the request body nests {depth} levels of JSON arrays and objects; the limit is "
                            f"{MAX_BODY_NESTING} (schemas may nest about {MAX_SCHEMA_LEVELS} levels)",
                       code="nesting_too_deep")

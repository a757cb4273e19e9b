"""OpenAI error bodies: `APIError` (status, message, type, param, code, headers), the JSON
response that carries it, and the handlers that turn every failure into one: our own
refusals, a bug (500), unknown routes and methods, and request bodies that fail
validation (with `param` named as the user wrote it). Owns the error shape and these
handlers; which input gives which error is decided where the input is read."""

from __future__ import annotations

import re

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException


class APIError(Exception):
    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type_, param, code
        self.headers = headers or {}


def error_response(err: APIError) -> JSONResponse:
    body = {"error": {"message": err.message, "type": err.type, "param": err.param, "code": err.code}}
    return JSONResponse(body, status_code=err.status, headers=err.headers)


def install_handlers(app: FastAPI) -> None:
    """Every error `app` sends, as an OpenAI error body."""
    app.add_exception_handler(APIError, _on_api_error)
    app.add_exception_handler(Exception, _on_bug)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)


async def _on_api_error(_: Request, err: APIError) -> JSONResponse:
    return error_response(err)


async def _on_bug(_: Request, exc: Exception) -> JSONResponse:
    """A bug of ours still answers as an OpenAI error (the traceback goes to the log)."""
    return error_response(APIError(500, f"internal error ({type(exc).__name__}); the server log has the details",
                                   "server_error"))


async def _on_http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    """Unknown routes, wrong methods and bodies the framework cannot read."""
    if exc.status_code == 404:
        message = f"no route {request.url.path!r}; this server serves /v1/chat/completions, " \
                  "/v1/completions, /v1/models, /health and /metrics"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    else:
        message = str(exc.detail)
    type_ = "invalid_request_error" if exc.status_code < 500 else "server_error"
    return error_response(APIError(exc.status_code, message, type_, headers=getattr(exc, "headers", None)))


async def _on_validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid":  # its location is an offset in the text, not a parameter
        reason = (first.get("ctx") or {}).get("error")
        return error_response(APIError(400, "the request body is not valid JSON" + (f": {reason}" if reason else "")))
    param = _param_name(first.get("loc", ()))
    message = _union_message(errors, param) if param else first.get("msg", "invalid request")
    if first.get("type") == "extra_forbidden":
        message = f"unknown parameter {param!r}"
    return error_response(APIError(400, f"{message} (param: {param})" if param else message, param=param))


def _param_name(location) -> str | None:
    """The request parameter a validation error is about, as the user wrote it: the
    path without "body" and without the union members pydantic names in it
    (`literal['none','auto','required']`, `NamedToolChoice`, `str`)."""
    parts = []
    for part in location:
        if isinstance(part, int):
            parts[-1:] = [f"{parts[-1]}[{part}]"] if parts else [f"[{part}]"]
        elif part != "body" and part not in _UNION_MEMBERS and re.fullmatch(r"[a-z_][a-z0-9_]*", part):
            parts.append(part)
    return ".".join(parts) or None


def _union_message(errors: list[dict], param: str) -> str:
    """The messages of the errors about `param`: a union (tool_choice is a string or an
    object) fails once per member, and each says what that member needed."""
    messages = []
    for error in errors:
        name = _param_name(error.get("loc", ())) or ""
        if name == param:
            messages.append(error.get("msg", ""))
        elif name.startswith(param + "."):
            messages.append(f"{name}: {error.get('msg', '')}")
    return "; or ".join(dict.fromkeys(messages))


_UNION_MEMBERS = {"str", "int", "float", "bool", "dict", "list", "none", "is_instance", "function_after"}

"""OpenAI error bodies: `APIError` (status, message, type, param, code, headers) and the
JSON response that carries it. Every error the server sends is one of these. Owns the
error shape only; which input gives which error is decided where the input is read."""

from __future__ import annotations

from fastapi.responses import JSONResponse


class APIError(Exception):
    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type_, param, code
        self.headers = headers or {}


def error_response(err: APIError) -> JSONResponse:
    body = {"error": {"message": err.message, "type": err.type, "param": err.param, "code": err.code}}
    return JSONResponse(body, status_code=err.status, headers=err.headers)

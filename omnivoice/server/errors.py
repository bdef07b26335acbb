"""Errors in OpenAI's envelope: ``{"error": {"message", "type", "param", "code"}}``."""

from __future__ import annotations

from typing import Optional

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

# HTTP status -> OpenAI error type.
_TYPES = {401: "authentication_error", 404: "not_found_error", 409: "conflict_error",
          429: "rate_limit_error", 503: "server_error", 504: "timeout_error"}


class APIError(Exception):
    """An error answered to the client: HTTP ``status`` with an OpenAI-style body."""

    def __init__(self, status: int, message: str, param: Optional[str] = None, code: Optional[str] = None,
                 headers: Optional[dict[str, str]] = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, self.param, self.code, self.headers)


def error_response(status: int, message: str, param: Optional[str] = None, code: Optional[str] = None,
                   headers: Optional[dict[str, str]] = None) -> JSONResponse:
    """The JSON response for an error."""
    kind = _TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


def _validation_message(err: dict) -> tuple[str, Optional[str]]:
    """One pydantic error as (message naming the field, param)."""
    loc = [str(x) for x in err.get("loc", ()) if x not in ("body", "query", "path")]
    # Union members add their type name to the location ("voice.str"); the field is the first part.
    param = loc[0] if loc else None
    if err.get("type") == "missing":
        return f"'{param}' is required", param
    if err.get("type") == "extra_forbidden":
        return f"unrecognized request argument: '{param}'", param
    if err.get("type") == "json_invalid":
        return "the body is not valid JSON", None
    return f"'{'.'.join(loc) or 'body'}': {err.get('msg', 'invalid value')}", param


def install_error_handlers(app: FastAPI) -> None:
    """Every error, ours or FastAPI's, answers in the OpenAI envelope (validation errors are 400)."""

    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        message, param = _validation_message(errors[0]) if errors else ("invalid request", None)
        return error_response(400, message, param, "invalid_value")

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, str(exc.detail), None, None, getattr(exc, "headers", None))

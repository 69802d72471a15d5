"""How ``lucy serve`` answers errors: always JSON, in the shape of :func:`lucy.service.errors.error_body`
(``detail`` for plain clients, an OpenAI-style ``error`` object so that OpenAI clients show the message).

- :class:`ServiceError`, and the domain errors of the layers below (:func:`lucy.service.errors.domain_error`: an
  unknown stream 404, a conflicting one 409, a bad one 422): its status; a locked memory store, a full disk or no
  descriptors left, wherever they surfaced (:func:`service_error_for`), take precedence: 503 with ``Retry-After``,
  507, 503;
- any other :class:`LucyError` (bad input or environment): 422 with its message, credentials redacted;
- validation errors: 422 with FastAPI's list of problems as ``detail``, and OpenAI's ``param``; on the
  OpenAI-compatible routes the message names fields as OpenAI does (``messages[0].role: Field required``);
- unknown routes and methods (Starlette's HTTPException): 404 / 405, and 413 from the body limit;
- anything else: 500 naming only the exception's type; the traceback goes to the log.
"""

from __future__ import annotations

import logging
import sqlite3
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from lucy.errors import LucyError, StreamError
from lucy.redaction import redact_url
from lucy.service.errors import (
    InvalidRequest,
    ServiceError,
    domain_error,
    error_body,
    error_headers,
    service_error_for,
)

log = logging.getLogger(__name__)


def install(app: FastAPI) -> None:
    """Attach the error handlers to ``app``."""
    app.add_exception_handler(ServiceError, _service_error)  # type: ignore[arg-type]
    app.add_exception_handler(StreamError, _domain_error)  # type: ignore[arg-type]
    app.add_exception_handler(LucyError, _lucy_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(sqlite3.Error, _unexpected)
    app.add_exception_handler(OSError, _unexpected)
    # Starlette runs this one outermost and re-raises after answering, so the server logs the traceback.
    app.add_exception_handler(Exception, _last_resort)


def answer(err: ServiceError) -> JSONResponse:
    return JSONResponse(error_body(err.status, str(err), err.code, param=err.param), status_code=err.status,
                        headers=error_headers(err))


def _environment(request: Request, err: Exception) -> JSONResponse | None:
    found = service_error_for(err)
    if found is None:
        return None
    log.warning("%s %s: %s (%s: %s)", request.method, request.url.path, found, type(err).__name__,
                redact_url(str(err)))
    return answer(found)


async def _service_error(request: Request, err: ServiceError) -> JSONResponse:
    return _environment(request, err) or answer(err)


async def _domain_error(request: Request, err: StreamError) -> JSONResponse:
    found = domain_error(err)
    return _environment(request, err) or answer(found if found is not None else InvalidRequest(redact_url(str(err))))


async def _lucy_error(request: Request, err: LucyError) -> JSONResponse:
    return _environment(request, err) or answer(InvalidRequest(redact_url(str(err))))


# The OpenAI-compatible routes name a field as OpenAI does (``messages[0].role``); the others as FastAPI's ``loc``
# does (``body.question``), as they always have.
OPENAI_PATHS = frozenset({"/v1/chat/completions", "/v1/models"})


async def _invalid(request: Request, err: RequestValidationError) -> JSONResponse:
    problems = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
                for e in err.errors()]
    openai_style = request.url.path in OPENAI_PATHS
    said = [(field_path(p["loc"]) if openai_style else ".".join(str(part) for part in p["loc"]),
             _problem(p) if openai_style else str(p["msg"])) for p in problems[:5]]
    message = "; ".join(f"{where}: {what}" if where else what for where, what in said) or "invalid request"
    param = field_path(problems[0]["loc"]) or None if problems else None
    return JSONResponse(error_body(422, message, detail=problems, param=param), status_code=422)


def field_path(loc: list[Any]) -> str:
    """Where a validation problem is, as OpenAI names a parameter: ``messages[0].role`` for ``("body", "messages",
    0, "role")``; query and path parameters by their name; "" for the body as a whole."""
    parts = list(loc[1:]) if loc and loc[0] in ("body", "query", "path", "header") else list(loc)
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _problem(problem: dict[str, Any]) -> str:
    if problem["type"] == "json_invalid":
        return f"the request body is not valid JSON ({problem['msg']})"
    if problem["loc"] == ["body"]:
        return f"the request body must be a JSON object ({problem['msg']})"
    return str(problem["msg"])


async def _http_error(request: Request, err: StarletteHTTPException) -> JSONResponse:
    status, path = err.status_code, request.url.path
    message = str(err.detail)
    if status == 404 and message == HTTPStatus.NOT_FOUND.phrase:
        message = f"nothing at {path}: the API's routes are listed at /docs"
    elif status == 405 and message == HTTPStatus.METHOD_NOT_ALLOWED.phrase:
        allowed = (err.headers or {}).get("Allow") or (err.headers or {}).get("allow")
        message = f"{request.method} is not allowed on {path}" + (f" (allowed: {allowed})" if allowed else "")
    return JSONResponse(error_body(status, message), status_code=status, headers=err.headers)


async def _unexpected(request: Request, err: Exception) -> JSONResponse:
    known = _environment(request, err)
    if known is not None:
        return known
    log.error("%s %s failed", request.method, request.url.path, exc_info=err)
    return _internal(err)


async def _last_resort(request: Request, err: Exception) -> JSONResponse:
    known = _environment(request, err)
    if known is not None:
        return known
    log.error("%s %s failed with %s (traceback follows)", request.method, request.url.path, type(err).__name__)
    return _internal(err)


def _internal(err: Exception) -> JSONResponse:
    return JSONResponse(error_body(500, f"internal error ({type(err).__name__}); the server's log has the details"),
                        status_code=500)

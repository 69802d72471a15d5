"""How ``lucy serve`` answers errors: always JSON, in the shape of :func:`lucy.service.errors.error_body`
(``detail`` for plain clients, an OpenAI-style ``error`` object so that OpenAI clients show the message).

- :class:`ServiceError`: its status; a locked memory store, a full disk or no descriptors left, wherever they
  surfaced (:func:`service_error_for`), take precedence: 503 with ``Retry-After``, 507, 503;
- any other :class:`LucyError` (bad input or environment): 422 with its message, credentials redacted;
- validation errors: 422 with FastAPI's list of problems as ``detail``;
- unknown routes and methods (Starlette's HTTPException): 404 / 405, and 413 from the body limit;
- anything else: 500 naming only the exception's type; the traceback goes to the log.
"""

from __future__ import annotations

import logging
import sqlite3
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from lucy.errors import LucyError
from lucy.ingest import redact_url
from lucy.service.errors import InvalidRequest, ServiceError, error_body, error_headers, service_error_for

log = logging.getLogger(__name__)


def install(app: FastAPI) -> None:
    """Attach the error handlers to ``app``."""
    app.add_exception_handler(ServiceError, _service_error)  # type: ignore[arg-type]
    app.add_exception_handler(LucyError, _lucy_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(sqlite3.Error, _unexpected)
    app.add_exception_handler(OSError, _unexpected)
    # Starlette runs this one outermost and re-raises after answering, so the server logs the traceback.
    app.add_exception_handler(Exception, _last_resort)


def answer(err: ServiceError) -> JSONResponse:
    return JSONResponse(error_body(err.status, str(err), err.code), status_code=err.status,
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


async def _lucy_error(request: Request, err: LucyError) -> JSONResponse:
    return _environment(request, err) or answer(InvalidRequest(redact_url(str(err))))


async def _invalid(request: Request, err: RequestValidationError) -> JSONResponse:
    problems = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
                for e in err.errors()]
    message = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in problems[:5]) or "invalid request"
    return JSONResponse(error_body(422, message, detail=problems), status_code=422)


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

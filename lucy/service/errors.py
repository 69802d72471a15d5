"""Errors the service turns into HTTP status codes (and MQTT error replies). Messages are shown to clients.

:func:`service_error_for` says which of them an environment failure is (a locked database, a full disk, no file
descriptors left), whatever layer it surfaced in; :func:`error_body` is the one JSON shape every error answer
has, readable by plain clients (``detail``) and by OpenAI clients (``error``).
"""

from __future__ import annotations

import errno
import logging
import math
import os
import sqlite3
from collections.abc import Iterator
from typing import Any

from lucy.errors import InvalidStream, LucyError, StreamConflict, StreamError, StreamNotFound
from lucy.redaction import redact_url


class ServiceError(LucyError):
    """A request the service cannot carry out; ``status`` is the HTTP status code it maps to, ``code`` the
    OpenAI-style error code (derived from the status when None), ``retry_after`` the seconds a client should
    wait before trying again (sent as ``Retry-After``; None: do not retry blindly)."""

    status = 400
    code: str | None = None
    retry_after: int | None = None

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param  # the request field at fault (OpenAI's error.param), when one is


class InvalidRequest(ServiceError):
    status = 422


class NotFound(ServiceError):
    status = 404


def check_time_range(start: float | None, end: float | None) -> None:
    """:class:`InvalidRequest` for a ``from``/``to`` range that is not one (not finite, or empty); either may be
    absent."""
    if (start is not None and not math.isfinite(start)) or (end is not None and not math.isfinite(end)):
        raise InvalidRequest("from and to must be finite numbers of seconds")
    if start is not None and end is not None and end <= start:
        raise InvalidRequest(f"empty time range: to ({end:g}) must be after from ({start:g})")


class ModelNotFound(NotFound):
    """``model`` of an OpenAI-compatible request names no stream."""

    code = "model_not_found"


class Conflict(ServiceError):
    status = 409


class Unavailable(ServiceError):
    status = 503


class TimedOut(ServiceError):
    status = 504


class ClientGone(ServiceError):
    """The client closed the connection before the answer; nobody reads this status (nginx's 499)."""

    status = 499


class Busy(Unavailable):
    """The memory store stayed locked by another writer for all of ``memory.busy_timeout_seconds``."""

    code = "busy"
    retry_after = 2


class StoreDown(Unavailable):
    """The shared memory store (PostgreSQL, on a cluster) cannot be reached."""

    code = "store_unavailable"
    retry_after = 5


class OutOfDescriptors(Unavailable):
    """The process has no file descriptor left (EMFILE) or the system none (ENFILE)."""

    code = "too_many_open_files"
    retry_after = 10


class InsufficientStorage(ServiceError):
    """The disk (or quota) holding the data directory is full."""

    status = 507
    code = "insufficient_storage"


# --------------------------------------------------------------------------------------- domain errors

# What each refusal of the stream runtime (lucy.errors) answers: the runtime knows no HTTP statuses.
_DOMAIN: tuple[tuple[type[StreamError], type[ServiceError]], ...] = (
    (StreamNotFound, NotFound), (StreamConflict, Conflict), (InvalidStream, InvalidRequest))


def domain_error(err: BaseException) -> ServiceError | None:
    """The service error (and so the HTTP status) a domain error of the layers below amounts to, or None when
    ``err`` is not one of them: :class:`lucy.errors.StreamNotFound` is 404, :class:`lucy.errors.StreamConflict`
    409, :class:`lucy.errors.InvalidStream` 422. The message is kept."""
    for domain, service in _DOMAIN:
        if isinstance(err, domain):
            return service(str(err))
    return None


# --------------------------------------------------------------------------------------- the JSON shape

_CODES = {400: "bad_request", 401: "invalid_api_key", 404: "not_found", 405: "method_not_allowed",
          409: "conflict", 413: "request_too_large", 421: "misdirected_request", 422: "invalid_request",
          499: "client_gone", 500: "internal_error", 503: "unavailable", 504: "timeout",
          507: "insufficient_storage"}


def error_body(status: int, message: str, code: str | None = None, *, detail: Any = None,
               param: str | None = None) -> dict[str, Any]:
    """``{"detail": ..., "error": {"message", "type", "param", "code"}}``: ``detail`` for plain clients (the
    message, unless given, e.g. FastAPI's list of validation problems), ``error`` as OpenAI clients expect it
    (their exceptions show its ``message``; ``param`` names the request field at fault, when one is)."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"detail": message if detail is None else detail,
            "error": {"message": message, "type": kind, "param": param,
                      "code": code or _CODES.get(status, str(status))}}


def error_headers(err: ServiceError) -> dict[str, str]:
    return {} if err.retry_after is None else {"Retry-After": str(err.retry_after)}


# --------------------------------------------------------------------------------------- environment failures

# SQLite's primary result codes (sqlite3.h); extended codes carry them in their low byte.
SQLITE_BUSY, SQLITE_LOCKED, SQLITE_FULL, SQLITE_CANTOPEN = 5, 6, 13, 14
_STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_DESCRIPTOR_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})


def service_error_for(exc: BaseException) -> ServiceError | None:
    """The service error an environment failure amounts to, or None when ``exc`` is not one of these:

    - the memory store locked past its busy timeout (SQLITE_BUSY / SQLITE_LOCKED; PostgreSQL's lock timeout):
      :class:`Busy`, 503;
    - the PostgreSQL memory store unreachable (down, restarting, out of connections): :class:`StoreDown`, 503;
    - a full disk or quota (SQLITE_FULL, ENOSPC, EDQUOT): :class:`InsufficientStorage`, 507;
    - no file descriptors left (EMFILE, ENFILE; or SQLite's "unable to open database file" while the process
      cannot open anything): :class:`OutOfDescriptors`, 503.

    The causes and contexts of ``exc`` are searched too, so a failure wrapped on its way up (a StoreError raised
    ``from None`` still carries the sqlite3 error as its context) is still recognised.
    """
    for e in _chain(exc):
        if isinstance(e, sqlite3.Error):
            found = _sqlite_error(e)
        elif type(e).__module__.startswith("psycopg"):
            found = _postgres_error(e)
        elif isinstance(e, OSError):
            found = _os_error(e.errno)
        else:
            continue
        if found is not None:
            return found
    return None


def _chain(exc: BaseException, depth: int = 16) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo and len(seen) < depth:
        e = todo.pop(0)
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [c for c in (e.__cause__, e.__context__) if c is not None]


def _sqlite_error(err: sqlite3.Error) -> ServiceError | None:
    code = getattr(err, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    text = str(err).lower()
    if primary in (SQLITE_BUSY, SQLITE_LOCKED) or (primary is None and ("is locked" in text or "is busy" in text)):
        return Busy("the memory store is locked by another writer (waited memory.busy_timeout_seconds); "
                    "try again shortly")
    if primary == SQLITE_FULL or (primary is None and "disk is full" in text):
        return _storage()
    if primary == SQLITE_CANTOPEN or (primary is None and "unable to open database file" in text):
        # SQLite does not say why; when nothing at all can be opened, the reason is the descriptor limit.
        return _descriptors() if descriptors_exhausted() else None
    return None


def _postgres_error(err: BaseException) -> ServiceError | None:
    import psycopg  # loaded already: ``err`` is one of its errors

    if isinstance(err, psycopg.errors.LockNotAvailable):
        return Busy("the memory store is locked by another writer (waited memory.busy_timeout_seconds); "
                    "try again shortly")
    if isinstance(err, psycopg.OperationalError):
        return StoreDown("the memory store's PostgreSQL server cannot be reached (down or restarting); "
                         "try again shortly")
    return None


def _os_error(number: int | None) -> ServiceError | None:
    if number in _STORAGE_ERRNOS:
        return _storage()
    if number in _DESCRIPTOR_ERRNOS:
        return _descriptors()
    return None


def _storage() -> InsufficientStorage:
    return InsufficientStorage("no space left on the disk that holds the data directory (or its quota is used "
                               "up): free some space, then try again")


def _descriptors() -> OutOfDescriptors:
    return OutOfDescriptors("the server has run out of file descriptors (too many open files); try again "
                            "shortly, and if it persists raise the server's limit (ulimit -n) or restart it")


def descriptors_exhausted() -> bool:
    """True when this process cannot open a file for lack of descriptors (its own limit or the system's)."""
    try:
        fd = os.open(os.devnull, os.O_RDONLY)
    except OSError as err:
        return err.errno in _DESCRIPTOR_ERRNOS
    os.close(fd)
    return False


def in_band_error(err: BaseException, what: str) -> tuple[int, dict[str, Any]]:
    """``(status, error_body)`` for an error met after a streamed reply (SSE) has started, when it can only be
    sent in-band. Unexpected errors are logged with their traceback and shown by type only."""
    if not isinstance(err, ServiceError):
        err = service_error_for(err) or domain_error(err) or err
    if isinstance(err, ServiceError):
        return err.status, error_body(err.status, str(err), err.code, param=err.param)
    if isinstance(err, LucyError):
        return 422, error_body(422, redact_url(str(err)))
    logging.getLogger("lucy.service").error("%s failed", what, exc_info=err)
    return 500, error_body(500, f"internal error: {type(err).__name__}")

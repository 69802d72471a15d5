"""Errors the service turns into HTTP status codes (and MQTT error replies). Messages are shown to clients."""

from __future__ import annotations

from lucy.errors import LucyError


class ServiceError(LucyError):
    """A request the service cannot carry out; ``status`` is the HTTP status code it maps to."""

    status = 400


class InvalidRequest(ServiceError):
    status = 422


class NotFound(ServiceError):
    status = 404


class Conflict(ServiceError):
    status = 409


class Unavailable(ServiceError):
    status = 503


class TimedOut(ServiceError):
    status = 504

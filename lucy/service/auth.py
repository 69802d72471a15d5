"""The API token guard: with ``service.api_token`` set, every request but health checks needs
``Authorization: Bearer <token>``. A pure ASGI middleware, so streamed responses (SSE) pass through untouched.

The dashboard's pages (``/``, a stream's review page ``/review/{name}``) and their static files carry no data and
stay reachable, so that a browser can load a page and then send the token (typed once, kept in the tab's session
storage) with every API call it makes.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/", "/favicon.ico"})
OPEN_PREFIXES = ("/static/", "/review/")


def bearer_token(headers: list[tuple[bytes, bytes]]) -> str | None:
    for key, value in headers:
        if key.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


class TokenGuard:
    """Refuses (401) requests without the right bearer token; constant-time comparison."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    def allowed(self, scope: Scope) -> bool:
        path = scope.get("path", "")
        if path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
            return True
        given = bearer_token(scope.get("headers", []))
        return given is not None and hmac.compare_digest(given.encode(), self._token)

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] != "http" or self.allowed(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"detail": "missing or wrong API token: send 'Authorization: Bearer <token>'",
                           "error": {"message": "missing or wrong API token", "type": "invalid_request_error",
                                     "param": None, "code": "invalid_api_key"}}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b'Bearer realm="lucy"')]})
        await send({"type": "http.response.body", "body": body})

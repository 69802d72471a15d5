"""Browser hardening headers on every answer of ``lucy serve``: a page elsewhere must not frame the dashboard
(clickjacking a "delete stream" button), a stored caption or frame must never run as script, and the dashboard's
URLs (stream names, questions) must not leak to other sites in ``Referer``.

The dashboard loads only its own files (``/static/``: no inline script or style, no other origin), so its policy
is ``default-src 'self'``, with ``data:`` and ``blob:`` images for the frames it draws and ``blob:`` media for the
clips the review page plays (fetched with the API token, then played from memory). The API's ``/docs`` and
``/redoc`` pages (:mod:`lucy.service.routes.docs`) load Swagger UI / ReDoc from here too; Swagger starts with an
inline script, which the page's own policy allows by its hash (:func:`docs_policy`), still never framed. A pure ASGI
middleware, like :class:`lucy.service.auth.TokenGuard`, so streamed answers (SSE) pass through untouched; it runs
outermost, so that refusals by the other guards carry the headers too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CSP = ("default-src 'self'; img-src 'self' data: blob:; media-src 'self' blob:; frame-ancestors 'none'; "
       "object-src 'none'; base-uri 'none'; form-action 'self'")
# The docs pages: Swagger UI and ReDoc from this server only. ReDoc styles itself with <style> elements it writes
# (styled-components) and parses the spec in a web worker made from a blob; both draw images from data: URLs.
# A page's inline scripts are allowed by hash (docs_policy); the default allows none.
DOCS_CSP = ("default-src 'self'; script-src 'self'{hashes}; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data: blob:; worker-src 'self' blob:; frame-ancestors 'none'; object-src 'none'; "
            "base-uri 'none'; form-action 'self'")
DOCS_PATHS = frozenset({"/docs", "/redoc", "/docs/oauth2-redirect"})
COMMON = ((b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
          (b"referrer-policy", b"no-referrer"))


def policy(path: str) -> str:
    """The Content-Security-Policy of the answer to ``path``."""
    return docs_policy([]) if path in DOCS_PATHS else CSP


def docs_policy(script_hashes: list[str]) -> str:
    """The policy of a docs page whose inline scripts have these sha256 hashes (base64)."""
    return DOCS_CSP.format(hashes="".join(f" 'sha256-{h}'" for h in script_hashes))


class SecurityHeaders:
    """Adds ``Content-Security-Policy``, ``X-Content-Type-Options``, ``X-Frame-Options`` and ``Referrer-Policy`` to
    every HTTP answer (replacing any the app set, except a docs page's own policy)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        added = (*COMMON, (b"content-security-policy", policy(path).encode()))
        # a docs page names its own inline scripts' hashes in its policy: that one is kept
        own_policy = path in DOCS_PATHS

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = message.get("headers", [])
                mine = added
                if own_policy and any(k.lower() == b"content-security-policy" for k, _ in headers):
                    mine = COMMON
                names = {name for name, _ in mine}
                kept = [(k, v) for k, v in headers if k.lower() not in names]
                message = {**message, "headers": [*kept, *mine]}
            await send(message)

        await self.app(scope, receive, send_with_headers)

"""Browser hardening headers on every answer of ``lucy serve``: a page elsewhere must not frame the dashboard
(clickjacking a "delete stream" button), a stored caption or frame must never run as script, and the dashboard's
URLs (stream names, questions) must not leak to other sites in ``Referer``.

The dashboard loads only its own files (``/static/``: no inline script or style, no other origin), so its policy
is ``default-src 'self'``, with ``data:`` and ``blob:`` images for the frames it draws. FastAPI's ``/docs`` and
``/redoc`` pages load Swagger UI / ReDoc from a CDN and start them with an inline script: those two pages get a
policy that allows exactly that (until they are served from here), still never framed. A pure ASGI middleware,
like :class:`lucy.service.auth.TokenGuard`, so streamed answers (SSE) pass through untouched; it runs outermost,
so that refusals by the other guards carry the headers too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CSP = ("default-src 'self'; img-src 'self' data: blob:; frame-ancestors 'none'; object-src 'none'; "
       "base-uri 'none'; form-action 'self'")
CDN = "https://cdn.jsdelivr.net"
# What FastAPI's get_swagger_ui_html / get_redoc_html pages load (scripts and styles from the CDN, an inline
# starter script, ReDoc's web worker from a blob, its fonts from Google, the FastAPI logo as favicon)
DOCS_CSP = (f"default-src 'self'; script-src 'self' 'unsafe-inline' {CDN}; "
            f"style-src 'self' 'unsafe-inline' {CDN} https://fonts.googleapis.com; font-src https://fonts.gstatic.com; "
            "img-src 'self' data: blob: https://fastapi.tiangolo.com https://cdn.redoc.ly; worker-src 'self' blob:; "
            "frame-ancestors 'none'; object-src 'none'; base-uri 'none'")
DOCS_PATHS = frozenset({"/docs", "/redoc", "/docs/oauth2-redirect"})
COMMON = ((b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
          (b"referrer-policy", b"no-referrer"))


def policy(path: str) -> str:
    """The Content-Security-Policy of the answer to ``path``."""
    return DOCS_CSP if path in DOCS_PATHS else CSP


class SecurityHeaders:
    """Adds ``Content-Security-Policy``, ``X-Content-Type-Options``, ``X-Frame-Options`` and ``Referrer-Policy`` to
    every HTTP answer (replacing any the app set)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        added = (*COMMON, (b"content-security-policy", policy(scope.get("path", "")).encode()))
        names = {name for name, _ in added}

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": [*kept, *added]}
            await send(message)

        await self.app(scope, receive, send_with_headers)

"""Request guards of ``lucy serve`` that sit in front of every route: the ``Host`` check (against DNS rebinding)
and the request body limit. Pure ASGI middleware, like :class:`lucy.service.auth.TokenGuard`, so streamed
responses (SSE) pass through untouched.

**Host.** A web page can make a browser send requests to ``127.0.0.1:8321`` under its own name: it points its
domain's DNS at 127.0.0.1 ("DNS rebinding"), and the browser then treats the server as the page's own origin,
reads its answers and sends it writes. What gives this away is the ``Host`` header, which still names the page's
domain, so requests are answered only when ``Host`` names the server: its bind address, ``localhost`` and the
loopback addresses when it listens on loopback (or on every address), and ``service.allowed_hosts``. The port is
not compared: a rebinding page must use the server's port anyway, and a reverse proxy forwards its own. A
wildcard bind (0.0.0.0, ::) without ``allowed_hosts`` answers any name: it cannot know the names it is reached
by, and it needs an API token, which a rebinding page does not have.

The health probes (/healthz, /readyz) answer any ``Host``: kubelets and load balancers send the pod's or the
node's address, and the probes change nothing and show nothing but "up" and a count of streams.

**Body size.** A declared ``Content-Length`` over ``service.max_body_bytes`` is refused (413) before the app
runs; a streamed (chunked) body is counted as the app reads it, and reading stops at the limit.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.exceptions import HTTPException

from lucy.config.settings import ServiceSettings, is_loopback_host
from lucy.service.errors import error_body

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/healthz", "/readyz"})
LOOPBACK_NAMES = frozenset({"localhost", "ip6-localhost", "127.0.0.1", "::1"})
WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::", "*"})


async def send_json(send: Send, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    data = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value)
    return None


# ------------------------------------------------------------------------------------------------ Host


def host_name(header: str) -> str:
    """The name in a ``Host`` header: lower case, without port, brackets or a trailing dot."""
    value = header.strip().lower()
    if value.startswith("["):  # [v6]:port
        value = value[1:].partition("]")[0]
    elif value.count(":") == 1:  # name:port (a bare IPv6 address has several colons)
        value = value.partition(":")[0]
    return value.rstrip(".")


class HostPolicy:
    """Which ``Host`` names a server bound as ``settings`` answers (``any``: every name)."""

    def __init__(self, settings: ServiceSettings) -> None:
        bind = host_name(settings.host) if settings.host.strip() not in WILDCARD_BINDS else ""
        configured = set(settings.allowed_hosts)
        self.any = "*" in configured or (bind == "" and not configured)
        self.suffixes = tuple(n[1:] for n in configured if n.startswith("*."))  # ".example.com"
        self.names = frozenset(n for n in configured if not n.startswith("*")) | ({bind} if bind else set())
        self.loopback = bind == "" or is_loopback_host(bind)
        if self.loopback:
            self.names |= LOOPBACK_NAMES

    def allows(self, name: str) -> bool:
        if self.any or name in self.names or name.endswith(self.suffixes):
            return True
        if self.loopback:
            try:
                return ipaddress.ip_address(name).is_loopback
            except ValueError:
                return False
        return False


class HostGuard:
    """Refuses (421) requests whose ``Host`` does not name this server (see the module's docstring)."""

    def __init__(self, app: ASGIApp, settings: ServiceSettings) -> None:
        self.app = app
        self.policy = HostPolicy(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.policy.any or scope["type"] not in ("http", "websocket") or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        raw = _header(scope, b"host")
        name = host_name(raw.decode("latin-1")) if raw is not None else ""
        if name and self.policy.allows(name):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008})
            return
        shown = json.dumps(name[:100]) if raw is not None else "none"
        message = (f"this server does not answer to the host name {shown}: add it to service.allowed_hosts "
                   f"(LUCY_SERVICE__ALLOWED_HOSTS) if clients reach the server by that name")
        await send_json(send, 421, error_body(421, message))


# ------------------------------------------------------------------------------------------------ body size


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when a streamed body passes the limit. An HTTPException, so that FastAPI's body
    reading lets it through as it is and the app's handler answers it (JSON 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is over {limit} bytes (service.max_body_bytes)",
                         headers={"Connection": "close"})  # the rest of the body is never read


class BodyLimit:
    """Refuses (413) request bodies over ``max_bytes``, declared or streamed, without reading past the limit."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _header(scope, b"content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)  # the body is never read; the server closes the connection after this
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, sending)
        except BodyTooLarge:  # read outside the app's exception handlers (e.g. by a mounted app)
            if started:
                raise
            await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        message = f"the request body is over {self.max_bytes} bytes (service.max_body_bytes)"
        await send_json(send, 413, error_body(413, message), {"Connection": "close"})

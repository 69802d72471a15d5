"""The HTTP API of ``lucy serve`` (FastAPI): streams, questions, memory, frames, an OpenAI-compatible chat
endpoint, health, Prometheus metrics and the live dashboard.

:func:`create_app` only assembles: the service's lifespan (:mod:`lucy.service.state`), the error handlers, the
per-resource routers (:mod:`lucy.service.routes`) and the guards. Handlers never block the event loop: anything
that touches the disk (frame store, memory store, the stream list) runs in a worker thread, and questions run on
their own threads (:mod:`lucy.service.questions`).
"""

from __future__ import annotations

from fastapi import FastAPI

from lucy import __version__
from lucy.config import LucySettings
from lucy.memory.store import MemoryStore
from lucy.runtime.protocol import RuntimeFactory
from lucy.service import http_errors, state
from lucy.service.auth import TokenGuard
from lucy.service.guards import BodyLimit, HostGuard
from lucy.service.headers import SecurityHeaders
from lucy.service.routes import ROUTERS, dashboard, docs
from lucy.wiring.runtime import local_runtime


def create_app(settings: LucySettings, *, memory: MemoryStore | None = None,
               runtime: RuntimeFactory = local_runtime) -> FastAPI:
    """The ASGI app. Startup opens the stores (``memory`` if given), builds the stream runtime (``runtime``: worker
    processes on this machine, unless ``lucy serve`` picked another) and resumes the registered streams."""
    app = FastAPI(
        title="Lucy", version=__version__, lifespan=state.lifespan(settings, memory, runtime),
        docs_url=None, redoc_url=None,  # served from Lucy's own files (lucy.service.routes.docs), not a CDN
        description="Ask questions about video streams while they record. `model` in the OpenAI-compatible "
                    "endpoints names a stream. With service.api_token set, send `Authorization: Bearer <token>`.")
    http_errors.install(app)  # every error answers JSON, with an OpenAI-style error object
    for router in ROUTERS:
        app.include_router(router)
    dashboard.mount_static(app)
    docs.mount_assets(app)
    # The last added runs first: the browser headers, the Host check, then the token, then the body limit.
    app.add_middleware(BodyLimit, max_bytes=settings.service.max_body_bytes)
    token = settings.service.api_token
    if token is not None:
        app.add_middleware(TokenGuard, token=token.get_secret_value())
    app.add_middleware(HostGuard, settings=settings.service)
    app.add_middleware(SecurityHeaders)  # outermost: the guards' refusals carry the browser headers too
    return app

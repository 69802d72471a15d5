"""The HTTP API, one router per resource (as vLLM's OpenAI entrypoints): each module holds a module-level
``APIRouter`` whose handlers read the shared :class:`lucy.service.state.Service` with
:func:`lucy.service.state.service` and leave the work to the service's parts.
"""

from __future__ import annotations

from fastapi import APIRouter

from lucy.service.routes import (
    clips,
    dashboard,
    docs,
    health,
    memory,
    objects,
    openai,
    questions,
    streams,
    watches,
)

ROUTERS: tuple[APIRouter, ...] = (health.router, streams.router, clips.router, memory.router, objects.router,
                                  questions.router, watches.router, openai.router, dashboard.router, docs.router)

__all__ = ["ROUTERS", "dashboard", "docs"]

"""Memory and frames: a stream's memory nodes by time and level, a search of them by words and meaning, and its
stored frames as JPEGs."""

from __future__ import annotations

import asyncio
import math
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from lucy.config import LEVEL_NAMES_HELP, is_level_name
from lucy.memory.transcribers import SPEECH_LEVEL
from lucy.service import memory_pages
from lucy.service.errors import InvalidRequest, check_time_range
from lucy.service.schemas import MemoryOut, SearchOut
from lucy.service.state import service
from lucy.untrusted import normalise_line

router = APIRouter(tags=["memory"])

MAX_NODES = 5000
MAX_QUERY_CHARS = 500


@router.get("/v1/streams/{name}/memory", response_model=MemoryOut,
            summary="Memory nodes overlapping [from, to), by start time")
async def get_memory(
    name: str, request: Request,
    start: Annotated[float, Query(alias="from", ge=0, description="Media seconds (default 0).")] = 0.0,
    end: Annotated[float | None, Query(alias="to", gt=0, description="Media seconds (default: the end).")] = None,
    level: Annotated[str | None, Query(description=f"{LEVEL_NAMES_HELP}.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_NODES)] = 1000,
    latest: Annotated[bool, Query(description="Return the latest `limit` nodes instead of the first.")] = False,
) -> dict[str, Any]:
    svc = service(request)
    check_time_range(start, end)
    if level is not None and not is_level_name(level):
        raise InvalidRequest(f"unknown level {level!r}: use {LEVEL_NAMES_HELP}")
    await asyncio.to_thread(svc.manager.require, name)
    return await asyncio.to_thread(memory_pages.memory_page, svc, name, level=level, start=start, end=end,
                                   limit=limit, latest=latest)


Q = Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for.",
                         examples=["orange shapes"])]
LevelQ = Annotated[str | None, Query(description=f"{LEVEL_NAMES_HELP}, or {SPEECH_LEVEL} (default: all).")]
FromQ = Annotated[float | None, Query(alias="from", ge=0, description="Media seconds: nodes ending after it.")]
ToQ = Annotated[float | None, Query(alias="to", gt=0, description="Media seconds: nodes starting before it.")]
# The names this route had before it took the memory route's from/to: kept, out of the documentation.
StartQ = Annotated[float | None, Query(ge=0, include_in_schema=False)]
EndQ = Annotated[float | None, Query(gt=0, include_in_schema=False)]
LimitQ = Annotated[int, Query(ge=1, le=100)]


def _search_request(q: str, level: str | None, start: float | None, end: float | None) -> str:
    """The query normalised, once its filters are checked (422 otherwise)."""
    query = normalise_line(q)  # NFC, no invisible or control characters: what is typed is what is searched
    if not query:
        raise InvalidRequest("q is empty: say what to look for")
    check_time_range(start, end)
    if level is not None and level != SPEECH_LEVEL and not is_level_name(level):
        raise InvalidRequest(f"unknown level {level!r}: use {LEVEL_NAMES_HELP}, or {SPEECH_LEVEL}")
    return query


@router.get("/v1/streams/{name}/search", response_model=SearchOut,
            summary="A stream's memory nodes that match some words (and their meaning), best first")
async def search_memory(name: str, request: Request, q: Q, level: LevelQ = None, start_at: FromQ = None,
                        end_at: ToQ = None, start: StartQ = None, end: EndQ = None,
                        limit: LimitQ = 20) -> dict[str, Any]:
    svc = service(request)
    start, end = start_at if start_at is not None else start, end_at if end_at is not None else end
    query = _search_request(q, level, start, end)
    await asyncio.to_thread(svc.manager.require, name)
    return await asyncio.to_thread(memory_pages.search_page, svc, [name], query, level=level, start=start, end=end,
                                   limit=limit)


@router.get("/v1/search", response_model=SearchOut,
            summary="Memory nodes of every stream (or of some) that match some words (and their meaning), best first")
async def search_all(request: Request, q: Q,
                     streams: Annotated[str | None, Query(description="Comma-separated stream names (default: "
                                                                      "every stream).", examples=["door,yard"])] = None,
                     level: LevelQ = None, start: FromQ = None, end: ToQ = None, limit: LimitQ = 20) -> dict[str, Any]:
    svc = service(request)
    query = _search_request(q, level, start, end)
    if streams is None:
        names = await asyncio.to_thread(svc.manager.names)
    else:
        wanted = list(dict.fromkeys(n.strip() for n in streams.split(",") if n.strip()))
        if not wanted:
            raise InvalidRequest("streams names no stream: give names separated by commas, or leave it out")
        names = [await asyncio.to_thread(svc.manager.require, n) for n in wanted]
    return await asyncio.to_thread(memory_pages.search_page, svc, names, query, level=level, start=start, end=end,
                                   limit=limit)


@router.get("/v1/streams/{name}/frames", response_class=Response,
            summary="The stored frame shown at media time t, as a JPEG",
            responses={200: {"content": {"image/jpeg": {}}}, 404: {"description": "No frame at t"}})
async def get_frame(
    name: str, request: Request,
    t: Annotated[float, Query(ge=0, description="Media seconds.")],
    width: Annotated[int | None, Query(ge=16, le=3840, description="Scale to this width.")] = None,
) -> Response:
    svc = service(request)
    if not math.isfinite(t):
        raise InvalidRequest("t must be a finite number of seconds")
    await asyncio.to_thread(svc.manager.require, name)
    jpeg, shown = await asyncio.to_thread(memory_pages.frame_jpeg, svc, name, t, width)
    return Response(jpeg, media_type="image/jpeg",
                    headers={"X-Lucy-Frame-Time": f"{shown:.3f}", "Cache-Control": "private, max-age=3600"})

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
from lucy.service.errors import InvalidRequest
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
    if not math.isfinite(start) or (end is not None and not math.isfinite(end)):
        raise InvalidRequest("from and to must be finite numbers of seconds")
    if end is not None and end <= start:
        raise InvalidRequest(f"empty time range: to ({end:g}) must be after from ({start:g})")
    if level is not None and not is_level_name(level):
        raise InvalidRequest(f"unknown level {level!r}: use {LEVEL_NAMES_HELP}")
    await asyncio.to_thread(svc.manager.require, name)
    return await asyncio.to_thread(memory_pages.memory_page, svc, name, level=level, start=start, end=end,
                                   limit=limit, latest=latest)


@router.get("/v1/streams/{name}/search", response_model=SearchOut,
            summary="Memory nodes that match some words (and their meaning), best first")
async def search_memory(
    name: str, request: Request,
    q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for.",
                            examples=["orange shapes"])],
    level: Annotated[str | None, Query(description=f"{LEVEL_NAMES_HELP}, or {SPEECH_LEVEL} (default: all).")] = None,
    start: Annotated[float | None, Query(ge=0, description="Media seconds: nodes ending after it.")] = None,
    end: Annotated[float | None, Query(gt=0, description="Media seconds: nodes starting before it.")] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> dict[str, Any]:
    svc = service(request)
    query = normalise_line(q)  # NFC, no invisible or control characters: what is typed is what is searched
    if not query:
        raise InvalidRequest("q is empty: say what to look for")
    if (start is not None and not math.isfinite(start)) or (end is not None and not math.isfinite(end)):
        raise InvalidRequest("start and end must be finite numbers of seconds")
    if start is not None and end is not None and end <= start:
        raise InvalidRequest(f"empty time range: end ({end:g}) must be after start ({start:g})")
    if level is not None and level != SPEECH_LEVEL and not is_level_name(level):
        raise InvalidRequest(f"unknown level {level!r}: use {LEVEL_NAMES_HELP}, or {SPEECH_LEVEL}")
    await asyncio.to_thread(svc.manager.require, name)
    return await asyncio.to_thread(memory_pages.search_page, svc, name, query, level=level, start=start, end=end,
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

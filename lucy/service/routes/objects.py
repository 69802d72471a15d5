"""Tracked objects of a stream as events (Frigate's ``/api/events``): the objects its detect stage followed, by label
and time, and the snapshot of each one's best frame. The shape is :func:`lucy.service.objects.object_json`'s."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from lucy.memory.store import MAX_ID
from lucy.service import objects
from lucy.service.errors import InvalidRequest, NotFound, check_time_range
from lucy.service.schemas import ObjectList
from lucy.service.state import service

router = APIRouter(tags=["objects"])

LabelQ = Annotated[str | None, Query(max_length=64, description="Keep one label (COCO's names: person, car, dog, "
                                     "...); vehicle keeps every vehicle class (car, truck, bus, motorcycle, ...).",
                                     examples=["person"])]
FromQ = Annotated[float | None, Query(alias="from", ge=0, description="Media seconds: objects last seen after it.")]
ToQ = Annotated[float | None, Query(alias="to", gt=0, description="Media seconds: objects first seen before it.")]
TrackId = Annotated[int, Path(ge=1, le=MAX_ID, description="The object's id (its track id).")]


@router.get("/v1/streams/{name}/objects", response_model=ObjectList,
            summary="Tracked objects seen in [from, to), oldest first",
            responses={404: {"description": "Unknown stream"}, 422: {"description": "Bad label or time range"}})
async def list_objects(name: str, request: Request, label: LabelQ = None, start: FromQ = None, end: ToQ = None,
                       limit: Annotated[int, Query(ge=1, le=objects.MAX_OBJECTS)] = 100) -> dict[str, Any]:
    svc = service(request)
    try:
        wanted = objects.check_label(label)
    except ValueError as err:
        raise InvalidRequest(str(err)) from None
    check_time_range(start, end)
    await asyncio.to_thread(svc.manager.require, name)
    return await asyncio.to_thread(objects.objects_page, svc.memory, name, label=wanted, start=start, end=end,
                                   limit=limit)


@router.get("/v1/streams/{name}/objects/{track_id}/snapshot.jpg", response_class=Response,
            summary="The best frame of a tracked object, its box drawn, as a JPEG",
            responses={200: {"content": {"image/jpeg": {}}},
                       404: {"description": "Unknown stream or object, or no snapshot kept"}})
async def object_snapshot(name: str, track_id: TrackId, request: Request) -> Response:
    svc = service(request)
    await asyncio.to_thread(svc.manager.require, name)
    jpeg = await asyncio.to_thread(objects.snapshot, svc.memory, name, track_id)
    if jpeg is None:
        raise NotFound(f"stream {name!r} has no snapshot of object {track_id}")
    # A snapshot does not change once its track has ended; an active one's may still get a better view.
    return Response(jpeg, media_type="image/jpeg", headers={"Cache-Control": "private, max-age=60"})

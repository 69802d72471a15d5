"""Streams: start, list, show, stop (and purge) the streams the server ingests, and their figures' history."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from lucy.runtime.protocol import RetentionAges
from lucy.service.schemas import History, StreamCreate, StreamList, StreamStatus
from lucy.service.state import service

router = APIRouter(tags=["streams"])


@router.post("/v1/streams", status_code=201, response_model=StreamStatus, summary="Start ingesting a stream",
             responses={409: {"description": "Name taken"}, 422: {"description": "Bad name or source"}})
async def create_stream(body: StreamCreate, request: Request) -> dict[str, Any]:
    svc = service(request)
    ages = body.retention  # the API's body type stays here: the runtime takes its own
    retention = RetentionAges(ages.full_seconds, ages.keep_seconds) if ages is not None else None
    stream = await asyncio.to_thread(svc.manager.add, body.name, body.source, preset=body.preset,
                                     captioner=body.captioner, realtime=body.realtime, retention=retention,
                                     recording=body.recording)
    return await asyncio.to_thread(stream.status)


@router.get("/v1/streams", response_model=StreamList, summary="All streams")
async def list_streams(request: Request) -> dict[str, Any]:
    return {"streams": await asyncio.to_thread(service(request).manager.statuses)}


@router.get("/v1/streams/{name}", response_model=StreamStatus, summary="One stream",
            responses={404: {"description": "Unknown stream"}})
async def get_stream(name: str, request: Request) -> dict[str, Any]:
    svc = service(request)
    await asyncio.to_thread(svc.manager.require, name)
    return await asyncio.to_thread(svc.manager.status, name)


@router.delete("/v1/streams/{name}", response_model=StreamStatus,
               summary="Stop a stream (its memory is kept unless purge=true)")
async def delete_stream(name: str, request: Request,
                        purge: Annotated[bool, Query(description="Also delete its frames and memory.")] = False,
                        ) -> dict[str, Any]:
    svc = service(request)
    status = await asyncio.to_thread(svc.manager.remove, name, purge=purge)
    svc.forget_reader(name)
    if purge:
        await asyncio.to_thread(svc.clips.forget, name)
    return status


@router.get("/v1/streams/{name}/history", response_model=History,
            summary="Recent samples of a stream's figures (dashboard charts)")
async def history(name: str, request: Request) -> dict[str, Any]:
    svc = service(request)
    await asyncio.to_thread(svc.manager.require, name)
    stream = svc.manager.get(name)
    return {"stream": name, "interval_seconds": svc.settings.service.stats_interval_seconds,
            "points": list(stream.history) if stream is not None else []}

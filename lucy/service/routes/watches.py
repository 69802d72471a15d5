"""Standing questions ("watches") of a stream, and the alerts they raised: their history, and new ones as
server-sent events. The stream's worker checks the watches as its coarse spans close and stores the alerts; the
server's :class:`lucy.watch.delivery.AlertFollower` delivers them (the bus behind the SSE stream, MQTT, webhooks).

A watch may be registered before its stream exists (as ``lucy watch`` may): a valid name is enough, and the watch is
checked from the stream's start once a worker ingests it. Until then the stream is known by its watches: they can be
listed and deleted, and its alerts followed; a name with neither a stream nor a watch is 404. Registering is
idempotent (:meth:`lucy.memory.store.MemoryStore.register_watch`): the same question, stream and webhook answer 200
with the watch already registered, a new one 201."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from sse_starlette import EventSourceResponse, ServerSentEvent

from lucy.errors import StreamNotFound
from lucy.memory.store import MAX_ID
from lucy.service import sse
from lucy.service.errors import NotFound
from lucy.service.schemas import AlertList, WatchIn, WatchList, WatchOut
from lucy.service.state import Service, service, webhook_policy
from lucy.watch.delivery import alert_json

router = APIRouter(tags=["watches"])


def _valid_name(svc: Service, name: str) -> None:
    """422 for a name no stream may have; a valid name is enough (the stream may start later)."""
    try:
        svc.manager.require(name)
    except StreamNotFound:
        pass


def _known(svc: Service, name: str) -> None:
    """422 for a bad name; 404 unless the stream exists or has watches waiting for it."""
    try:
        svc.manager.require(name)
    except StreamNotFound:
        if not svc.memory.watches(name):
            raise


@router.post("/v1/streams/{name}/watches", response_model=WatchOut, status_code=201,
             summary="Watch a stream for something: a standing question",
             description="The stream's worker asks the question of each new coarse span; each time it comes true "
                         "an alert is stored and delivered (the alerts SSE stream, MQTT `<prefix>/<stream>/alerts`, "
                         "and a POST to `webhook_url` when given: the server then connects outward to that URL). "
                         "The stream need not exist yet: the watch is checked from its start once it is ingested. "
                         "The same question (ignoring case and invisible characters), stream and `webhook_url` as "
                         "an active watch answer 200 with that watch (its cooldown kept) instead of a second one.",
             responses={200: {"description": "The same watch was already registered: that watch", "model": WatchOut}})
async def add_watch(name: str, body: WatchIn, request: Request, response: Response) -> dict[str, Any]:
    svc = service(request)
    await asyncio.to_thread(_valid_name, svc, name)
    if body.webhook_url is not None:
        webhook_policy(svc).check_url(body.webhook_url)  # 422 for a host webhooks may not go to
    options: dict[str, Any] = {"webhook_url": body.webhook_url}
    if body.cooldown_seconds is not None:
        options["cooldown_seconds"] = body.cooldown_seconds
    watch, new = await asyncio.to_thread(svc.memory.register_watch, name, body.question.strip(), **options)
    if not new:
        response.status_code = 200
    elif svc.alerts is not None:
        svc.alerts.forget_watches()
    return asdict(watch)


@router.get("/v1/streams/{name}/watches", response_model=WatchList, summary="The stream's active watches")
async def list_watches(name: str, request: Request) -> dict[str, Any]:
    svc = service(request)
    await asyncio.to_thread(_known, svc, name)
    watches = await asyncio.to_thread(svc.memory.watches, name)
    return {"stream": name, "watches": [asdict(w) for w in watches]}


@router.delete("/v1/streams/{name}/watches/{watch_id}", summary="Stop watching (its alerts stay as history)")
async def delete_watch(name: str, watch_id: Annotated[int, Path(ge=1, le=MAX_ID)],
                       request: Request) -> dict[str, Any]:
    svc = service(request)
    await asyncio.to_thread(_known, svc, name)

    def delete() -> bool:
        if not any(w.id == watch_id for w in svc.memory.watches(name)):
            return False
        return svc.memory.delete_watch(watch_id)

    if not await asyncio.to_thread(delete):
        raise NotFound(f"stream {name!r} has no active watch {watch_id}")
    if svc.alerts is not None:
        svc.alerts.forget_watches()
    return {"stream": name, "id": watch_id, "deleted": True}


@router.get("/v1/streams/{name}/alerts", response_model=AlertList, summary="Alerts of the stream, oldest first")
async def list_alerts(name: str, request: Request,
                      after_id: Annotated[int, Query(ge=0, le=MAX_ID,
                                                     description="Only alerts with a greater id.")] = 0,
                      limit: Annotated[int, Query(ge=1, le=1000)] = 100,
                      watch_id: Annotated[int | None, Query(ge=1, le=MAX_ID,
                                                            description="Only this watch's alerts.")] = None,
                      ) -> dict[str, Any]:
    svc = service(request)
    await asyncio.to_thread(_known, svc, name)
    alerts = await asyncio.to_thread(svc.memory.alerts, name, watch_id=watch_id, after_id=after_id, limit=limit)
    return {"stream": name, "alerts": [alert_json(a) for a in alerts]}


@router.get("/v1/streams/{name}/alerts/events", summary="New alerts of the stream, as server-sent events",
            description="One `alert` event per new alert (the objects of GET .../alerts), and a `: ping` comment "
                        "every service.sse_ping_seconds to keep proxies from closing the connection. Alerts raised "
                        "while no client listened are in GET .../alerts.",
            responses={200: {"content": {"text/event-stream": {}}}})
async def alert_events(name: str, request: Request) -> EventSourceResponse:
    svc = service(request)
    await asyncio.to_thread(_known, svc, name)
    return sse.event_stream(_alert_events(svc, name), svc.settings.service.sse_ping_seconds)


async def _alert_events(svc: Service, name: str) -> AsyncIterator[ServerSentEvent]:
    """Until the client goes (the response then cancels this generator where it waits)."""
    async with svc.bus.subscribe() as sub:
        yield sse.comment("listening")  # headers and a first byte now, so clients know they are subscribed
        while True:
            event = await sub.get()
            if event.get("type") == "alert" and event.get("stream") == name:
                yield sse.event(event["alert"], "alert")

"""The HTTP API of ``lucy serve`` (FastAPI): streams, questions, memory, frames, an OpenAI-compatible chat
endpoint, health, Prometheus metrics and the live dashboard.

Handlers never block the event loop: anything that touches the disk (frame store, memory store, the stream
list) runs in a worker thread, and questions run on their own threads (:mod:`lucy.service.questions`).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import math
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from importlib import resources
from typing import Annotated, Any

import numpy as np
from fastapi import FastAPI, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles

from lucy import __version__
from lucy.config import LucySettings
from lucy.errors import StoreError
from lucy.ingest import ZarrFrameStore
from lucy.memory.store import MemoryStore
from lucy.metrics import CONTENT_TYPE, MetricsExporter
from lucy.service import chat, http_errors
from lucy.service.auth import TokenGuard
from lucy.service.errors import InvalidRequest, NotFound, in_band_error
from lucy.service.events import EventBus, ObservedMemoryStore, node_json
from lucy.service.guards import BodyLimit, HostGuard
from lucy.service.questions import QuestionService
from lucy.service.schemas import (
    AnswerOut,
    History,
    MemoryOut,
    ModelList,
    QuestionIn,
    StreamCreate,
    StreamList,
    StreamStatus,
)
from lucy.service.streams import StreamManager

log = logging.getLogger(__name__)

LEVEL_NAME = re.compile(r"^(coarse|fine|ultra_fine|summary[1-9][0-9]?)$")
MAX_NODES = 5000
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@dataclass
class Service:
    """Everything the handlers share; built at startup, torn down at shutdown."""

    settings: LucySettings
    memory: MemoryStore
    bus: EventBus
    manager: StreamManager
    questions: QuestionService
    exporter: MetricsExporter
    ready: bool = False
    readers: dict[str, ZarrFrameStore] = field(default_factory=dict)
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    mqtt: Any = None

    def reader(self, name: str) -> ZarrFrameStore:
        """A cached read-only frame store (blocking: call in a thread)."""
        store = self.readers.get(name)
        if store is None or not (store.path / "zarr.json").is_file():
            try:
                store = ZarrFrameStore.open(self.settings.data, name)
            except StoreError:
                raise NotFound(f"stream {name!r} has no frames yet") from None
            self.readers[name] = store
        return store


def build_service(settings: LucySettings, memory: MemoryStore | None = None) -> Service:
    from lucy.memory.sqlite_store import SQLiteMemoryStore

    bus = EventBus()
    store = ObservedMemoryStore(memory or SQLiteMemoryStore.for_data(settings), bus)
    manager = StreamManager(settings, store, bus)
    return Service(settings=settings, memory=store, bus=bus, manager=manager,
                   questions=QuestionService(settings, manager, store), exporter=MetricsExporter())


def sse(event: str, data: Any) -> bytes:
    """One server-sent event (data is one JSON line, so it never needs splitting)."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _wants_sse(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("accept", "").lower()


async def _sample_forever(svc: Service) -> None:
    """Sample every stream's figures for the dashboard's history, the metrics and MQTT status."""
    interval = svc.settings.service.stats_interval_seconds
    last_state: dict[str, str] = {}
    last_sent = 0.0
    while True:
        try:
            points = await asyncio.to_thread(_sample, svc)
            now = time.monotonic()
            periodic = now - last_sent >= max(10.0, 5 * interval)
            for name, status in points:
                if periodic or last_state.get(name) != status["state"]:
                    svc.bus.publish({"type": "status", "stream": name, "status": status})
                last_state[name] = status["state"]
            if periodic:
                last_sent = now
        except Exception:  # keep sampling; the failure is in the log with its traceback
            log.exception("sampling stream figures failed")
        await asyncio.sleep(interval)


def _sample(svc: Service) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for stream in svc.manager.managed():
        stream.sample()
        out.append((stream.name, stream.status()))
    svc.exporter.update(svc.manager.figures())
    return out


def create_app(settings: LucySettings, *, memory: MemoryStore | None = None) -> FastAPI:
    """The ASGI app. Startup opens the memory store and resumes the registered streams."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        svc = await asyncio.to_thread(build_service, settings, memory)
        app.state.svc = svc
        if settings.service.resume_streams:
            resumed = await asyncio.to_thread(svc.manager.resume)
            if resumed:
                log.warning("resumed %d stream(s): %s", len(resumed), ", ".join(resumed))
        svc.tasks.append(asyncio.create_task(_sample_forever(svc), name="sample"))
        from lucy.ingest.retention import RetentionMaintainer

        retention = RetentionMaintainer(settings, settings_for=svc.manager.settings_for)
        svc.exporter.retention = retention.stats  # lucy_frame_* metrics; cancelled with svc.tasks at shutdown
        svc.tasks.append(asyncio.create_task(retention.run_forever(), name="retention"))
        if settings.mqtt.enabled:
            from lucy.service.mqtt import MqttBridge

            svc.mqtt = MqttBridge(settings.mqtt, svc)
            svc.tasks.append(asyncio.create_task(svc.mqtt.run(), name="mqtt"))
        svc.ready = True
        try:
            yield
        finally:
            svc.ready = False
            if svc.mqtt is not None:
                await svc.mqtt.close()
            for task in svc.tasks:
                task.cancel()
            await asyncio.gather(*svc.tasks, return_exceptions=True)
            await asyncio.to_thread(svc.manager.shutdown)
            await asyncio.to_thread(svc.questions.close)
            await asyncio.to_thread(svc.memory.close)

    app = FastAPI(
        title="Lucy", version=__version__, lifespan=lifespan,
        description="Ask questions about video streams while they record. `model` in the OpenAI-compatible "
                    "endpoints names a stream. With service.api_token set, send `Authorization: Bearer <token>`.")

    # ------------------------------------------------------------------------------------ errors

    http_errors.install(app)  # every error answers JSON, with an OpenAI-style error object

    def svc_of(request: Request) -> Service:
        return request.app.state.svc

    # ------------------------------------------------------------------------------------ health

    @app.get("/healthz", tags=["health"], summary="The process is up")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], summary="Ready to serve: memory store open, streams resumed")
    async def readyz(request: Request) -> JSONResponse:
        svc: Service | None = getattr(request.app.state, "svc", None)
        if svc is None or not svc.ready:
            return JSONResponse({"status": "starting"}, status_code=503)
        try:
            await asyncio.to_thread(svc.memory.captioned_until, "-")  # the database answers
        except Exception as err:  # noqa: BLE001  (reported, not hidden: the probe fails)
            return JSONResponse({"status": "memory store unavailable", "error": type(err).__name__}, 503)
        mqtt = None if svc.mqtt is None else ("connected" if svc.mqtt.connected else "disconnected")
        return JSONResponse({"status": "ready", "streams": len(svc.manager.managed()), "mqtt": mqtt,
                             "mqtt_connects": None if svc.mqtt is None else svc.mqtt.connects})

    @app.get("/metrics", tags=["health"], summary="Prometheus metrics", response_class=Response)
    async def metrics(request: Request) -> Response:
        svc = svc_of(request)
        body = await asyncio.to_thread(lambda: (svc.exporter.update(svc.manager.figures()), svc.exporter.render())[1])
        return Response(body, media_type=CONTENT_TYPE)

    # ------------------------------------------------------------------------------------ streams

    @app.post("/v1/streams", tags=["streams"], status_code=201, response_model=StreamStatus,
              summary="Start ingesting a stream",
              responses={409: {"description": "Name taken"}, 422: {"description": "Bad name or source"}})
    async def create_stream(body: StreamCreate, request: Request) -> dict[str, Any]:
        svc = svc_of(request)
        stream = await asyncio.to_thread(svc.manager.add, body.name, body.source, preset=body.preset,
                                         captioner=body.captioner, realtime=body.realtime, retention=body.retention)
        return await asyncio.to_thread(stream.status)

    @app.get("/v1/streams", tags=["streams"], response_model=StreamList, summary="All streams")
    async def list_streams(request: Request) -> dict[str, Any]:
        return {"streams": await asyncio.to_thread(svc_of(request).manager.statuses)}

    @app.get("/v1/streams/{name}", tags=["streams"], response_model=StreamStatus, summary="One stream",
             responses={404: {"description": "Unknown stream"}})
    async def get_stream(name: str, request: Request) -> dict[str, Any]:
        svc = svc_of(request)
        await asyncio.to_thread(svc.manager.require, name)
        return await asyncio.to_thread(svc.manager.status, name)

    @app.delete("/v1/streams/{name}", tags=["streams"], response_model=StreamStatus,
                summary="Stop a stream (its memory is kept unless purge=true)")
    async def delete_stream(name: str, request: Request,
                            purge: Annotated[bool, Query(description="Also delete its frames and memory.")] = False,
                            ) -> dict[str, Any]:
        svc = svc_of(request)
        status = await asyncio.to_thread(svc.manager.remove, name, purge=purge)
        svc.readers.pop(name, None)
        return status

    @app.get("/v1/streams/{name}/history", tags=["streams"], response_model=History,
             summary="Recent samples of a stream's figures (dashboard charts)")
    async def history(name: str, request: Request) -> dict[str, Any]:
        svc = svc_of(request)
        await asyncio.to_thread(svc.manager.require, name)
        stream = svc.manager.get(name)
        return {"stream": name, "interval_seconds": svc.settings.service.stats_interval_seconds,
                "points": list(stream.history) if stream is not None else []}

    # ------------------------------------------------------------------------------------ memory and frames

    @app.get("/v1/streams/{name}/memory", tags=["memory"], response_model=MemoryOut,
             summary="Memory nodes overlapping [from, to), by start time")
    async def get_memory(
        name: str, request: Request,
        start: Annotated[float, Query(alias="from", ge=0, description="Media seconds (default 0).")] = 0.0,
        end: Annotated[float | None, Query(alias="to", gt=0, description="Media seconds (default: the end).")] = None,
        level: Annotated[str | None, Query(description="coarse, fine, ultra_fine or summaryN.")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_NODES)] = 1000,
        latest: Annotated[bool, Query(description="Return the latest `limit` nodes instead of the first.")] = False,
    ) -> dict[str, Any]:
        svc = svc_of(request)
        if not math.isfinite(start) or (end is not None and not math.isfinite(end)):
            raise InvalidRequest("from and to must be finite numbers of seconds")
        if end is not None and end <= start:
            raise InvalidRequest(f"empty time range: to ({end:g}) must be after from ({start:g})")
        if level is not None and not LEVEL_NAME.fullmatch(level):
            raise InvalidRequest(f"unknown level {level!r}: use coarse, fine, ultra_fine or summaryN")
        await asyncio.to_thread(svc.manager.require, name)

        def read() -> list[dict[str, Any]]:
            if latest:
                nodes = svc.memory.nodes(name, level=level, start=start, end=end)
                return [node_json(n) for n in nodes[-limit - 1:]]
            return [node_json(n) for n in svc.memory.nodes(name, level=level, start=start, end=end, limit=limit + 1)]

        nodes = await asyncio.to_thread(read)
        truncated = len(nodes) > limit
        nodes = nodes[-limit:] if latest else nodes[:limit]
        return {"stream": name, "level": level, "start": start, "end": end, "nodes": nodes, "truncated": truncated}

    @app.get("/v1/streams/{name}/frames", tags=["memory"], response_class=Response,
             summary="The stored frame shown at media time t, as a JPEG",
             responses={200: {"content": {"image/jpeg": {}}}, 404: {"description": "No frame at t"}})
    async def get_frame(
        name: str, request: Request,
        t: Annotated[float, Query(ge=0, description="Media seconds.")],
        width: Annotated[int | None, Query(ge=16, le=3840, description="Scale to this width.")] = None,
    ) -> Response:
        svc = svc_of(request)
        if not math.isfinite(t):
            raise InvalidRequest("t must be a finite number of seconds")
        await asyncio.to_thread(svc.manager.require, name)
        jpeg, shown = await asyncio.to_thread(_frame_jpeg, svc, name, t, width)
        return Response(jpeg, media_type="image/jpeg",
                        headers={"X-Lucy-Frame-Time": f"{shown:.3f}", "Cache-Control": "private, max-age=3600"})

    # ------------------------------------------------------------------------------------ questions

    @app.post("/v1/streams/{name}/questions", tags=["questions"], response_model=AnswerOut,
              summary="Ask about everything ingested so far",
              description="Returns the answer object of `lucy ask --json`. With `Accept: text/event-stream` the "
                          "trace streams as `step` events while the question runs, then one `answer` event (or "
                          "an `error` event).",
              responses={200: {"content": {"application/json": {}, "text/event-stream": {}}}})
    async def ask(name: str, body: QuestionIn, request: Request) -> Any:
        svc = svc_of(request)
        if _wants_sse(request):
            text, options = svc.questions.check(body.question, body.options)
            await asyncio.to_thread(svc.manager.require, name)
            return StreamingResponse(_sse_answer(svc, name, text, options), media_type="text/event-stream",
                                     headers=SSE_HEADERS)
        return await svc.questions.ask(name, body.question, body.options, client_gone=request.is_disconnected)

    @app.get("/v1/streams/{name}/questions", tags=["questions"], summary="Recent questions and their answers")
    async def recent_questions(name: str, request: Request,
                               limit: Annotated[int, Query(ge=1, le=500)] = 20) -> dict[str, Any]:
        svc = svc_of(request)
        await asyncio.to_thread(svc.manager.require, name)
        rows = await asyncio.to_thread(svc.memory.questions, name, limit)
        return {"stream": name, "questions": rows}

    # ------------------------------------------------------------------------------------ OpenAI-compatible

    @app.get("/v1/models", tags=["openai"], response_model=ModelList, summary="Streams, as OpenAI models")
    async def models(request: Request) -> dict[str, Any]:
        svc = svc_of(request)
        rows = await asyncio.to_thread(svc.manager.statuses)
        return {"object": "list", "data": [
            {"id": r["name"], "object": "model", "created": int(r["created"] or r["started_at"] or 0),
             "owned_by": "lucy"} for r in rows]}

    chat.install(app, svc_of)

    # ------------------------------------------------------------------------------------ dashboard

    static = resources.files("lucy.service") / "static"

    @app.get("/", include_in_schema=False)
    async def dashboard() -> FileResponse:
        return FileResponse(str(static / "index.html"), media_type="text/html",
                            headers={"Cache-Control": "no-cache"})

    app.mount("/static", StaticFiles(directory=str(static)), name="static")

    # The last added runs first: the Host check, then the token, then the body limit.
    app.add_middleware(BodyLimit, max_bytes=settings.service.max_body_bytes)
    token = settings.service.api_token
    if token is not None:
        app.add_middleware(TokenGuard, token=token.get_secret_value())
    app.add_middleware(HostGuard, settings=settings.service)
    return app


async def _sse_answer(svc: Service, name: str, question: str, options: tuple[str, ...]) -> AsyncIterator[bytes]:
    try:
        async for kind, value in svc.questions.events(name, question, options):
            yield sse(kind, value)
    except Exception as err:  # noqa: BLE001  (the stream has started: the error can only go in-band)
        status, body = in_band_error(err, f"question about {name}")
        yield sse("error", {**body, "status": status})


def _frame_jpeg(svc: Service, name: str, t: float, width: int | None) -> tuple[bytes, float]:
    from PIL import Image

    store = svc.reader(name)
    times = store.times()
    if len(times) == 0:
        raise NotFound(f"stream {name!r} has no frames yet")
    info_end = float(times[-1]) + 1.0 / store.attrs["stored_fps"]
    if t > info_end:
        raise NotFound(f"no frame at {t:g} s: stream {name!r} is ingested up to {info_end:.3f} s")
    i = max(0, int(np.searchsorted(times, t, side="right")) - 1)
    shown = float(times[i])
    clip = store.read(shown, shown + 1e-6)
    if len(clip) == 0:
        raise NotFound(f"no frame at {t:g} s")
    image = Image.fromarray(clip.frames[0])
    if width is not None and width != image.width:
        image = image.resize((width, max(1, round(image.height * width / image.width))))
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=85)
    return out.getvalue(), shown

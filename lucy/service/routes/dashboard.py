"""The live dashboard: its static page and script, the event stream that keeps it up to date (server-sent events:
stream figures, host CPU and memory, new memory nodes, alerts), and each stream's newest frame as a small JPEG.

The page holds one long-lived connection (this feed) whatever it shows: a browser opens at most six connections to
a server over HTTP/1.1, and a second event stream per open dashboard would soon use them up."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles
from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.sse import AppStatus

from lucy.config import CAPTIONER_BACKENDS, PRESETS
from lucy.service import review, sse
from lucy.service.errors import NotFound, check_time_range
from lucy.service.live_feed import DashboardFeed, LatestFrames, status_changes
from lucy.service.live_view import MEDIA_TYPE, LiveResponse, LiveViews, live_parts
from lucy.service.state import Service, service

router = APIRouter(tags=["dashboard"])

STATIC = resources.files("lucy.service") / "static"
NODE_TEXT_CHARS = 400  # the dashboard's memory list shows this much of a node; the memory API has all of it


@router.get("/", include_in_schema=False)
async def dashboard() -> FileResponse:
    return FileResponse(str(STATIC / "index.html"), media_type="text/html", headers={"Cache-Control": "no-cache"})


@router.get("/review/{name}", include_in_schema=False)
async def review_page(name: str) -> FileResponse:
    """A stream's review timeline (the page reads the stream's name from its address)."""
    return FileResponse(str(STATIC / "review.html"), media_type="text/html", headers={"Cache-Control": "no-cache"})


def mount_static(app: FastAPI) -> None:
    """Serve the dashboard's files under ``/static`` (a mount: routers cannot carry one)."""
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")


def feed(request: Request) -> DashboardFeed:
    """The app's one dashboard feed (made on first use: it samples only while a dashboard is open)."""
    state = request.app.state
    if getattr(state, "dashboard_feed", None) is None:
        svc = service(request)
        state.dashboard_feed = DashboardFeed(svc.manager, svc.settings.data,
                                             svc.settings.service.stats_interval_seconds)
    return state.dashboard_feed


def latest_frames(request: Request) -> LatestFrames:
    state = request.app.state
    if getattr(state, "latest_frames", None) is None:
        state.latest_frames = LatestFrames()
    return state.latest_frames


def live_views(request: Request) -> LiveViews:
    """The app's live views (made on first use)."""
    state = request.app.state
    if getattr(state, "live_views", None) is None:
        svc = service(request)
        s = svc.settings.service
        state.live_views = LiveViews(svc.reader, fps=s.live_fps, width=s.live_width, max_viewers=s.live_max_viewers)
    return state.live_views


def _node(node: dict[str, Any]) -> dict[str, Any]:
    text = node["text"]
    return {**node, "text": text if len(text) <= NODE_TEXT_CHARS else text[:NODE_TEXT_CHARS] + "…"}


async def _feed_events(svc: Service, source: DashboardFeed) -> AsyncIterator[ServerSentEvent]:
    """``hello`` (everything, once), then a ``tick`` per interval with what changed (stream fields, chart points,
    host figures, streams gone), a ``node`` for each memory node stored and an ``alert`` for each alert raised."""
    async with svc.bus.subscribe(maxsize=2000) as sub:
        tick = await asyncio.to_thread(source.tick)
        sent = {s["name"]: s for s in tick.statuses}
        yield sse.event({
            "interval_seconds": source.interval, "ready": svc.ready, "streams": tick.statuses,
            "host": tick.host, "host_history": list(source.host.history), "presets": list(PRESETS),
            # how often each preset closes a coarse span: the page explains its lag chart with it
            "coarse_span_seconds": {name: p.coarse.span_seconds for name, p in PRESETS.items()},
            "default_preset": svc.settings.preset, "captioners": list(CAPTIONER_BACKENDS),
            "default_captioner": svc.settings.captioner.backend}, "hello")
        points = {name: p["t"] for name, p in tick.points.items()}
        due = time.monotonic() + source.interval
        while True:
            try:
                async with asyncio.timeout(max(0.0, due - time.monotonic())):
                    event = await sub.get()
            except TimeoutError:
                event = None
            if event is not None:
                if event.get("type") == "node":
                    yield sse.event(_node(event["node"]), "node")
                elif event.get("type") == "alert":
                    yield sse.event(event["alert"], "alert")
                elif event.get("type") == "status":  # a state change, or a stream stopped or deleted
                    source.changed()
                    status = event["status"]
                    if status.get("purged"):
                        if sent.pop(status["name"], None) is not None:
                            yield sse.event({"streams": {}, "removed": [status["name"]]}, "tick")
                    else:
                        changes = status_changes(sent.get(status["name"]), status)
                        sent[status["name"]] = status
                        if changes:
                            yield sse.event({"streams": {status["name"]: changes}}, "tick")
                continue
            due = time.monotonic() + source.interval
            tick = await asyncio.to_thread(source.tick)
            streams = {}
            for status in tick.statuses:
                changes = status_changes(sent.get(status["name"]), status)
                if changes:
                    streams[status["name"]] = changes
                sent[status["name"]] = status
            listed = {s["name"] for s in tick.statuses}
            removed = [name for name in sent if name not in listed]
            for name in removed:
                del sent[name]
            new_points = {name: p for name, p in tick.points.items() if points.get(name) != p["t"]}
            points.update((name, p["t"]) for name, p in new_points.items())
            out: dict[str, Any] = {"streams": streams, "host": tick.host, "ready": svc.ready}
            if new_points:
                out["points"] = new_points
            if removed:
                out["removed"] = removed
            yield sse.event(out, "tick")


@router.get("/v1/dashboard/events", summary="The dashboard's live feed, as server-sent events",
            description="A `hello` event with every stream's status and the host's figures, then a `tick` event "
                        "per `service.stats_interval_seconds` with what changed (`streams`: the changed fields of "
                        "each stream's status; `points`: new chart samples; `host`; `removed`: streams gone) and a "
                        "`node` event per memory node stored (text cut to 400 characters) and an `alert` event per "
                        "alert raised (as `GET .../alerts` shows it), of every stream. `: ping` comments keep it "
                        "alive (service.sse_ping_seconds).",
            response_class=EventSourceResponse, responses={200: {"content": {"text/event-stream": {}}}})
async def dashboard_events(request: Request) -> EventSourceResponse:
    svc = service(request)
    return sse.event_stream(_feed_events(svc, feed(request)), svc.settings.service.sse_ping_seconds)


@router.get("/v1/streams/{name}/frames/latest", response_class=Response,
            summary="The newest stored frame of a stream, as a small JPEG (the dashboard's live thumbnail)",
            description="Encoded once per new frame and width. The ETag names the frame: a client that sends it "
                        "back in `If-None-Match` gets 304 until a newer frame is stored.",
            responses={200: {"content": {"image/jpeg": {}}}, 304: {"description": "No newer frame"},
                       404: {"description": "No frames yet"}})
async def latest_frame(name: str, request: Request,
                       width: Annotated[int, Query(ge=16, le=1280, description="Scale down to this width.")] = 160,
                       ) -> Response:
    svc = service(request)
    await asyncio.to_thread(svc.manager.require, name)
    frames = latest_frames(request)

    def read() -> tuple[float, bytes] | None:
        return frames.jpeg(name, svc.reader(name), width)

    found = await asyncio.to_thread(read)
    if found is None:
        raise NotFound(f"stream {name!r} has no frames yet")
    shown, jpeg = found
    etag = f'"{shown:.3f}-{width}"'
    headers = {"ETag": etag, "X-Lucy-Frame-Time": f"{shown:.3f}", "Cache-Control": "no-cache"}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    return Response(jpeg, media_type="image/jpeg", headers=headers)


@router.get("/v1/streams/{name}/live.mjpeg", response_class=Response,
            summary="A stream's live view: its newest frames as MJPEG (multipart/x-mixed-replace)",
            description="One JPEG part per new stored frame, at most `service.live_fps` a second, each with "
                        "`X-Lucy-Frame-Time` (media seconds) and, for a live source, `X-Lucy-Frame-Wall` (the Unix "
                        "time the frame was taken) in its part headers. The newest frame comes at once. Each frame is "
                        "encoded once however many watch; at most `service.live_max_viewers` viewers per stream "
                        "(one more gets 503). Shown by an `<img>`, VLC or ffplay.",
            responses={200: {"content": {MEDIA_TYPE: {}}}, 404: {"description": "Unknown stream"},
                       503: {"description": "The stream has its most live viewers"}})
async def live_view(name: str, request: Request) -> Response:
    svc = service(request)
    await asyncio.to_thread(svc.manager.require, name)
    views = live_views(request)
    preview = views.join(name)
    return LiveResponse(live_parts(preview, lambda: AppStatus.should_exit), lambda: views.leave(preview),
                        headers={"Cache-Control": "no-cache, no-store", "X-Accel-Buffering": "no"})


@router.get("/v1/streams/{name}/timeline", summary="What the review page draws along a stream's time, in one answer",
            description="Over [from, to) (default: all of it): `coverage`, the runs of stored frames ([start, end] "
                        "pairs; a run ends where frames are missing), the `gaps` ingest recorded (reconnects) and "
                        "`expired_before` (retention); `recordings`, the runs of recorded segments (recording on); "
                        "the tracked `objects` (as GET .../objects), the `alerts` (as "
                        "GET .../alerts), the on-screen `texts` read (one per showing of a text) and the answered "
                        "`questions` with evidence there (newest first). Each part is read with a bound and says "
                        "when it was cut (`..._truncated`). Texts are data read from video.",
            responses={404: {"description": "Unknown stream"}, 422: {"description": "Bad time range"}})
async def timeline(name: str, request: Request,
                   start: Annotated[float, Query(alias="from", ge=0, description="Media seconds (default 0).")] = 0.0,
                   end: Annotated[float | None, Query(alias="to", gt=0,
                                                      description="Media seconds (default: the end).")] = None,
                   ) -> dict[str, Any]:
    svc = service(request)
    check_time_range(start, end)
    await asyncio.to_thread(svc.manager.require, name)
    return await asyncio.to_thread(review.timeline, svc, name, start, end)

"""Health: liveness, readiness and the Prometheus metrics."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from lucy.metrics import CONTENT_TYPE
from lucy.service.state import Service, service

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Ready to serve: memory store open, streams resumed")
async def readyz(request: Request) -> JSONResponse:
    svc: Service | None = getattr(request.app.state, "svc", None)  # not there yet while the app starts
    if svc is None or not svc.ready:
        return JSONResponse({"status": "starting"}, status_code=503)
    try:
        await asyncio.to_thread(svc.memory.check)
    except Exception as err:  # noqa: BLE001  (reported, not hidden: the probe fails)
        return JSONResponse({"status": "memory store unavailable", "error": type(err).__name__}, 503)
    mqtt = None if svc.mqtt is None else ("connected" if svc.mqtt.connected else "disconnected")
    return JSONResponse({"status": "ready", "streams": len(svc.manager.managed()), "mqtt": mqtt,
                         "mqtt_connects": None if svc.mqtt is None else svc.mqtt.connects})


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    svc = service(request)

    def render() -> bytes:
        svc.exporter.update(svc.manager.figures())
        return svc.exporter.render()

    return Response(await asyncio.to_thread(render), media_type=CONTENT_TYPE)

"""What the routers share: the :class:`Service` on ``app.state.svc``, built at startup and torn down at shutdown,
and the background tasks it runs (stream sampling, frame retention, the MQTT bridge, alert delivery).

Routers read it with :func:`service` (``request.app.state.svc``) and never build anything themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request

from lucy.config import LucySettings
from lucy.errors import StoreError
from lucy.ingest import FrameStore, FrameStores
from lucy.ingest.clips import ClipCache
from lucy.memory.retrieval import MemoryIndex
from lucy.memory.store import MemoryStore
from lucy.metrics import MetricsExporter
from lucy.runtime.events import EventBus
from lucy.runtime.protocol import RuntimeFactory, StreamRuntime
from lucy.service.errors import NotFound
from lucy.service.questions import QuestionService
from lucy.wiring import open_frames
from lucy.wiring.runtime import local_runtime

log = logging.getLogger(__name__)


@dataclass
class Service:
    """Everything the handlers share; built at startup, torn down at shutdown."""

    settings: LucySettings
    frames: FrameStores
    memory: MemoryStore
    bus: EventBus
    manager: StreamRuntime  # the streams, local or on a cluster: the service knows only the protocol
    questions: QuestionService
    exporter: MetricsExporter
    index: MemoryIndex  # memory search by words and meaning
    clips: ClipCache  # clips served before, to serve again
    ready: bool = False
    readers: dict[str, FrameStore] = field(default_factory=dict)
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    mqtt: Any = None
    alerts: Any = None  # the AlertFollower (lucy.watch.delivery), which delivers the workers' alerts

    def reader(self, name: str) -> FrameStore:
        """A cached read-only frame store (blocking: call in a thread)."""
        store = self.readers.get(name)
        if store is None or not self.frames.exists(name):
            try:
                store = self.frames.open(name)
            except StoreError:
                raise NotFound(f"stream {name!r} has no frames yet") from None
            self.readers[name] = store
        return store

    def forget_reader(self, name: str) -> None:
        self.readers.pop(name, None)


def service(request: Request) -> Service:
    """The service of the app that received ``request``."""
    return request.app.state.svc


def build_service(settings: LucySettings, memory: MemoryStore | None = None,
                  runtime: RuntimeFactory = local_runtime) -> Service:
    """The service of ``settings.data``: its stores (``memory`` if given), the stream runtime (``runtime``: worker
    processes on this machine unless ``lucy serve`` hands in another), the questions and the memory search."""
    from lucy.wiring import open_memory

    bus = EventBus()
    frames = open_frames(settings)
    store = memory or open_memory(settings)
    manager = runtime(settings, store, bus, frames=frames)
    questions = QuestionService(settings, manager, store)
    # Search and questions share one index (one embedder in memory, one vector cache), made before any question
    # runs and closed with the questions' backends. Without an embedder, memory is searched by words only.
    index = questions.runner.backends.index(settings, store) or MemoryIndex(store, None)
    clips = ClipCache(Path(settings.data) / "clips", max_bytes=settings.recording.clip_cache_bytes)
    return Service(settings=settings, frames=frames, memory=store, bus=bus, manager=manager, questions=questions,
                   exporter=MetricsExporter(), index=index, clips=clips)


def lifespan(settings: LucySettings, memory: MemoryStore | None = None, runtime: RuntimeFactory = local_runtime,
             ) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """The app's lifespan: build the service, resume the registered streams and start the background tasks;
    at shutdown stop them, the streams, the questions (and their backends) and the memory store, in that
    order."""

    @contextlib.asynccontextmanager
    async def run(app: FastAPI) -> AsyncIterator[None]:
        svc = await asyncio.to_thread(build_service, settings, memory, runtime)
        app.state.svc = svc
        await start(svc)
        try:
            yield
        finally:
            await stop(svc)

    return run


async def start(svc: Service) -> None:
    settings = svc.settings
    # Every node stored (by this server's questions, its workers, or anywhere on a cluster) is announced on the
    # event bus (MQTT, the dashboard).
    svc.manager.announce_nodes()
    if settings.service.resume_streams:
        resumed = await asyncio.to_thread(svc.manager.resume)
        if resumed:
            log.info("resumed %d stream(s): %s", len(resumed), ", ".join(resumed))
    svc.tasks.append(asyncio.create_task(_sample_forever(svc), name="sample"))
    if svc.manager.replicated:  # a cluster's frames are kept by the bucket's lifecycle rules: no retention pass
        _deliver_once_per_deployment(svc)
    else:
        from lucy.ingest.retention import RetentionMaintainer

        # Only the streams this server records, and never their frames not yet captioned into its memory.
        retention = RetentionMaintainer(settings, settings_for=svc.manager.settings_for, frames=svc.frames,
                                        streams=svc.manager.recorded, memory=svc.memory)
        svc.exporter.retention = retention.stats  # lucy_frame_* metrics; cancelled with svc.tasks at shutdown
        svc.tasks.append(asyncio.create_task(retention.run_forever(), name="retention"))
        if settings.mqtt.enabled:
            from lucy.service.mqtt import MqttBridge

            svc.mqtt = MqttBridge(settings.mqtt, svc, counts=settings.detect.backend != "none")
            svc.tasks.append(asyncio.create_task(svc.mqtt.run(), name="mqtt"))
            svc.tasks.append(asyncio.create_task(_object_follower(svc).run(), name="objects"))
        _follow_alerts(svc)
    svc.ready = True


def _follow_alerts(svc: Service) -> None:
    """Deliver the alerts the stream workers store: SSE (the bus), MQTT when enabled, and webhooks."""
    from lucy.metrics.stats import DeliveryStats
    from lucy.watch.delivery import AlertFollower, BusSink

    stats = DeliveryStats()
    svc.alerts = AlertFollower(svc.memory, [BusSink(svc.bus, stats), *_outward_sinks(svc, stats)],
                               svc.settings.alerts, stats, wall_start=lambda name: _wall_start(svc, name))
    svc.exporter.alerts = stats  # lucy_alert* and lucy_watches metrics
    svc.tasks.append(asyncio.create_task(svc.alerts.run(), name="alerts"))


def webhook_policy(svc: Service) -> Any:
    """Where this server's webhooks may go (:class:`lucy.watch.targets.WebhookPolicy`): never its own port."""
    from lucy.watch.targets import WebhookPolicy

    return WebhookPolicy(svc.settings.alerts.webhook_allowed_hosts, server_port=svc.settings.service.port)


def _outward_sinks(svc: Service, stats: Any) -> list[Any]:
    """Where alerts go beyond this server's own clients: webhooks, and MQTT when its bridge runs here."""
    from lucy.watch.delivery import MqttSink, WebhookSink

    sinks: list[Any] = [WebhookSink(svc.settings.alerts, stats, policy=webhook_policy(svc))]
    if svc.mqtt is not None:
        sinks.append(MqttSink(svc.mqtt, stats))
    return sinks


def _deliver_once_per_deployment(svc: Service) -> None:
    """A replica pushes alerts to its own SSE clients; the MQTT bridge and the webhooks run on the one replica that
    holds the delivery duty (:meth:`StreamRuntime.hold_duty`)."""
    from lucy.metrics.stats import DeliveryStats
    from lucy.watch.delivery import AlertFollower, BusSink

    settings = svc.settings
    stats = DeliveryStats()
    svc.alerts = AlertFollower(svc.memory, [BusSink(svc.bus, stats)], settings.alerts, stats,
                               wall_start=lambda name: _wall_start(svc, name), consumer=None)
    svc.exporter.alerts = stats
    svc.tasks.append(asyncio.create_task(svc.alerts.run(), name="alerts"))

    async def deliver() -> None:
        if settings.mqtt.enabled:
            from lucy.service.mqtt import MqttBridge

            svc.mqtt = MqttBridge(settings.mqtt, svc, counts=settings.detect.backend != "none")
        outward = AlertFollower(svc.memory, _outward_sinks(svc, stats), settings.alerts, stats,
                                wall_start=lambda name: _wall_start(svc, name), counts=False)
        try:
            await asyncio.gather(outward.run(), *([svc.mqtt.run(), _object_follower(svc).run()]
                                                  if svc.mqtt is not None else []))
        finally:
            if svc.mqtt is not None:
                await svc.mqtt.close()
                svc.mqtt = None

    svc.tasks.append(asyncio.create_task(svc.manager.hold_duty(deliver), name="delivery"))


def _object_follower(svc: Service) -> Any:
    """What tells the MQTT bridge of tracks that appear and end, and of the counts in view
    (:class:`lucy.service.object_events.ObjectFollower`, on the event bus the bridge forwards)."""
    from lucy.service.object_events import ObjectFollower

    settings = svc.settings
    return ObjectFollower(svc.memory, svc.bus, svc.manager.names, poll_seconds=settings.mqtt.objects_poll_seconds,
                          lost_seconds=settings.detect.track_lost_seconds)


def _wall_start(svc: Service, name: str) -> float | None:
    try:
        return svc.reader(name).info().wall_start
    except NotFound:
        return None


async def stop(svc: Service) -> None:
    svc.ready = False
    if svc.mqtt is not None:
        await svc.mqtt.close()
    for task in svc.tasks:
        task.cancel()
    await asyncio.gather(*svc.tasks, return_exceptions=True)
    await asyncio.to_thread(svc.manager.shutdown)  # a cluster replica's node listener stops with it
    await asyncio.to_thread(svc.questions.close)  # closes the embedder the search shares
    await asyncio.to_thread(svc.memory.close)


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

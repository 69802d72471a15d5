"""Delivery of alerts by ``lucy serve``: the server follows the alerts that the stream workers' checkers write
into the memory store and hands each new one to every sink, once.

- :class:`BusSink`: an ``alert`` event on the server's event bus (the dashboard's SSE stream);
- :class:`MqttSink`: ``<prefix>/<stream>/alerts`` through the MQTT bridge's outbox (QoS ``mqtt.qos``; kept across
  broker restarts like every other message of the bridge);
- :class:`WebhookSink`: a POST of the alert to its watch's ``webhook_url``, signed with ``alerts.webhook_secret``
  (``X-Lucy-Signature: sha256=<hex HMAC-SHA256 of the raw body>``) and retried with exponential backoff on
  connection errors, timeouts, 5xx and 429 (never on other answers). One task per delivery, a bounded number of
  requests at once: a dead receiver never holds up other alerts or sinks. Every try first checks where the URL's
  host resolves to (:class:`lucy.watch.targets.WebhookPolicy`: never cloud metadata, link-local addresses or Ray's
  ports) and connects to the address it checked.

Metrics count final outcomes by sink only (``delivered``, ``failed``, ``refused`` for webhooks), never a host, a
port or an HTTP status: otherwise whoever may add watches could read from /metrics which ports answer HTTP where.
The log says what happened to each webhook, for the operator.

Across restarts: :class:`AlertFollower` keeps how far it has delivered in the memory store (its cursor), so alerts
raised while the server was down (by ``lucy ingest``, say) are delivered when it starts again, unless older than
``alerts.catch_up_seconds`` (counted as stale); the first start of a server on a data directory starts after the
newest alert, never re-sending history. A webhook still being retried when the server stops is not retried by the
next server (retries live in this process only).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any, Protocol
from urllib.parse import quote, urlsplit

import httpx

from lucy import __version__
from lucy.config.settings import AlertSettings
from lucy.errors import WebhookRefused
from lucy.ingest.clips import clip_url
from lucy.memory.store import MemoryStore
from lucy.memory.watches import Alert, Watch
from lucy.metrics.stats import DeliveryStats
from lucy.watch.targets import WebhookPolicy

log = logging.getLogger(__name__)

PAGE = 500  # alerts read from the store at once
WATCH_COUNT_EVERY_SECONDS = 5.0


def alert_json(alert: Alert) -> dict[str, Any]:
    """An alert as the API, SSE, MQTT and webhooks show it: its fields, ``frame_url``, the frames endpoint's URL of
    the frame it was raised on, and ``clip_url``, the clip of its evidence span (both relative to the server; GET
    them with the API token)."""
    return {**asdict(alert), "frame_url": f"/v1/streams/{quote(alert.stream)}/frames?t={alert.frame_time:.3f}",
            "clip_url": clip_url(alert.stream, alert.start, alert.end)}


def where(url: str) -> str:
    """A webhook URL as logs show it: scheme, host and path (no credentials, no query that may hold a token)."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}"


class AlertSink(Protocol):
    """Where alerts go. :meth:`deliver` must not block: a slow sink starts its own task."""

    name: str

    def deliver(self, alert: Alert, watch: Watch | None, payload: dict[str, Any]) -> None: ...

    async def close(self) -> None: ...


class EventPublisher(Protocol):
    def publish(self, event: dict[str, Any]) -> None: ...


class BusSink:
    """``{"type": "alert", "stream": ..., "alert": ...}`` on the server's event bus (the SSE endpoint's source)."""

    name = "sse"

    def __init__(self, bus: EventPublisher, stats: DeliveryStats) -> None:
        self.bus, self.stats = bus, stats

    def deliver(self, alert: Alert, watch: Watch | None, payload: dict[str, Any]) -> None:
        self.bus.publish({"type": "alert", "stream": alert.stream, "alert": payload})
        self.stats.outcome(self.name, "delivered")

    async def close(self) -> None:
        return None


class MqttOutbox(Protocol):
    def topic(self, stream: str, kind: str) -> str: ...

    def post(self, topic: str, payload: bytes, retain: bool = False) -> None: ...


class MqttSink:
    """``<prefix>/<stream>/alerts`` (not retained), queued in the bridge's outbox: sent now if connected, else
    after the next connect."""

    name = "mqtt"

    def __init__(self, bridge: MqttOutbox, stats: DeliveryStats) -> None:
        self.bridge, self.stats = bridge, stats

    def deliver(self, alert: Alert, watch: Watch | None, payload: dict[str, Any]) -> None:
        self.bridge.post(self.bridge.topic(alert.stream, "alerts"), json.dumps(payload, separators=(",", ":")).encode())
        self.stats.outcome(self.name, "queued")

    async def close(self) -> None:
        return None


class WebhookSink:
    """POSTs each alert of a watch with a ``webhook_url`` there, signed and retried (see the module's doc).
    Outcomes counted: ``delivered`` (2xx), ``failed`` (an answer that is not retried, other 4xx or 3xx, or retries
    used up), ``refused`` (the URL's host is, or resolves to, an address webhooks may not go to)."""

    name = "webhook"

    def __init__(self, settings: AlertSettings, stats: DeliveryStats,
                 client: httpx.AsyncClient | None = None, policy: WebhookPolicy | None = None) -> None:
        self.settings, self.stats = settings, stats
        self.policy = policy or WebhookPolicy(settings.webhook_allowed_hosts)
        # Redirects are not followed: the receiver is where the watch said, nowhere else. No connection is kept:
        # requests go to a checked address with the host's name for TLS, and a kept connection to one name must
        # not carry another's request that resolved to the same address.
        self.client = client or httpx.AsyncClient(timeout=settings.webhook_timeout_seconds, follow_redirects=False,
                                                  limits=httpx.Limits(max_keepalive_connections=0),
                                                  headers={"User-Agent": f"lucy/{__version__}"})
        self._slots = asyncio.Semaphore(settings.webhook_max_in_flight)
        self._tasks: set[asyncio.Task[None]] = set()
        self._warned_unsigned = False

    def deliver(self, alert: Alert, watch: Watch | None, payload: dict[str, Any]) -> None:
        if watch is None or not watch.webhook_url:
            return
        body = json.dumps(payload, separators=(",", ":")).encode()
        task = asyncio.create_task(self._post(watch.webhook_url, body, alert.id), name=f"webhook-{alert.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def headers(self, body: bytes, alert_id: int) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "X-Lucy-Alert-Id": str(alert_id)}
        secret = self.settings.webhook_secret
        if secret is None:
            if not self._warned_unsigned:
                log.warning("webhooks are sent unsigned: set alerts.webhook_secret so receivers can check them")
                self._warned_unsigned = True
        else:
            digest = hmac.new(secret.get_secret_value().encode(), body, hashlib.sha256).hexdigest()
            headers["X-Lucy-Signature"] = f"sha256={digest}"
        return headers

    async def _post(self, url: str, body: bytes, alert_id: int) -> None:
        s = self.settings
        headers = self.headers(body, alert_id)
        delay = s.webhook_initial_seconds
        for attempt in range(s.webhook_retries + 1):
            async with self._slots:
                try:
                    response = await self._send(url, body, headers)
                    status, problem = response.status_code, f"HTTP {response.status_code}"
                except WebhookRefused as err:
                    log.warning("webhook of alert %d to %s not sent: %s", alert_id, where(url), err)
                    self.stats.outcome(self.name, "refused")
                    return
                except OSError as err:  # the name does not resolve (now)
                    status, problem = None, f"cannot resolve the host ({err.strerror or err})"
                except httpx.TransportError as err:  # connection refused or reset, timeouts, TLS
                    status, problem = None, type(err).__name__
            if status is not None and 200 <= status < 300:
                self.stats.outcome(self.name, "delivered")
                return
            if status is not None and status < 500 and status != 429:
                log.warning("webhook of alert %d to %s refused with %s; not retried", alert_id, where(url), problem)
                self.stats.outcome(self.name, "failed")
                return
            if attempt == s.webhook_retries:
                log.warning("webhook of alert %d to %s failed (%s) after %d tries; given up", alert_id, where(url),
                            problem, attempt + 1)
                self.stats.outcome(self.name, "failed")
                return
            log.info("webhook of alert %d to %s: %s; retrying in %.1f s", alert_id, where(url), problem, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, s.webhook_max_seconds)

    async def _send(self, url: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
        """POST to the address the policy checked (against DNS rebinding), naming the URL's host in ``Host`` and
        in TLS (SNI and the certificate check)."""
        address = await self.policy.resolve(url)
        target = httpx.URL(url)
        host = target.netloc.decode("ascii").rpartition("@")[2]  # host[:port] as the URL gives it
        return await self.client.post(target.copy_with(host=address), content=body, headers={**headers, "Host": host},
                                      extensions={"sni_hostname": target.host})

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.client.aclose()


class AlertFollower:
    """Follows the memory store's alerts (written by the stream workers) and hands each new one to every sink.
    Starts where the last server on this data directory stopped delivering (``consumer``'s cursor in the memory
    store), or after the newest alert on a first start."""

    def __init__(self, memory: MemoryStore, sinks: Sequence[AlertSink], settings: AlertSettings,
                 stats: DeliveryStats, wall_start: Callable[[str], float | None] = lambda stream: None, *,
                 consumer: str | None = "serve", counts: bool = True) -> None:
        self.memory, self.sinks, self.settings, self.stats = memory, list(sinks), settings, stats
        # None: no cursor kept (a cluster replica's own SSE clients, from now on); counts: this follower counts the
        # alerts it sees (a cluster's delivering replica leaves that to its SSE follower)
        self.consumer, self.counts = consumer, counts
        self.wall_start = wall_start  # a stream's Unix time of media time 0 (None: not live); blocking
        self.last_id: int | None = None
        self._watches: dict[int, Watch] = {}
        self._counted_at = 0.0

    async def run(self) -> None:
        """Poll every ``alerts.poll_seconds`` until cancelled; then close the sinks."""
        try:
            while True:
                try:
                    if self.last_id is None:
                        self.last_id = await asyncio.to_thread(self._start_id)
                    await self.poll()
                except Exception:  # keep following; the failure is in the log with its traceback
                    log.exception("following alerts failed")
                await asyncio.sleep(self.settings.poll_seconds)
        finally:
            await asyncio.gather(*(sink.close() for sink in self.sinks), return_exceptions=True)

    async def poll(self) -> int:
        """Deliver the alerts stored since the last poll; the number delivered."""
        delivered = 0
        while True:
            alerts = await asyncio.to_thread(self.memory.alerts, after_id=self.last_id or 0, limit=PAGE)
            for alert in alerts:
                assert alert.id is not None  # stored alerts have ids
                if time.time() - alert.created > self.settings.catch_up_seconds:
                    for sink in self.sinks:  # raised long ago, while no server delivered
                        self.stats.outcome(sink.name, "stale")
                    self.last_id = alert.id
                    continue
                watch = self._watches.get(alert.watch_id)
                if watch is None:
                    self._watches = {w.id: w for w in await asyncio.to_thread(self.memory.watches)}
                    watch = self._watches.get(alert.watch_id)
                self._deliver(alert, watch, await asyncio.to_thread(self.wall_start, alert.stream))
                self.last_id = alert.id
                delivered += 1
            if alerts and self.consumer is not None:
                await asyncio.to_thread(self.memory.set_alert_cursor, self.consumer, int(self.last_id or 0))
            if len(alerts) < PAGE:
                break
        if delivered or time.monotonic() - self._counted_at >= WATCH_COUNT_EVERY_SECONDS:
            await asyncio.to_thread(self._count_watches)
        return delivered

    def forget_watches(self) -> None:
        """Read the watches again before the next alert (one was added, changed or deleted)."""
        self._watches = {}
        self._counted_at = 0.0

    def _deliver(self, alert: Alert, watch: Watch | None, wall_start: float | None) -> None:
        if self.counts:
            self.stats.seen(alert, wall_start)
        payload = alert_json(alert)
        for sink in self.sinks:
            try:
                sink.deliver(alert, watch, payload)
            except Exception:  # one sink's bug must not cost the others the alert
                log.exception("delivering alert %d to %s failed", alert.id, sink.name)
                self.stats.outcome(sink.name, "error")

    def _start_id(self) -> int:
        """Where delivery resumes: the cursor of the last server, else after the newest alert (a first start)."""
        cursor = None if self.consumer is None else self.memory.alert_cursor(self.consumer)
        if cursor is not None:
            return cursor
        latest = self.memory.latest_alert()
        newest = 0 if latest is None or latest.id is None else latest.id
        if self.consumer is not None:
            self.memory.set_alert_cursor(self.consumer, newest)
        return newest

    def _count_watches(self) -> None:
        watches = self.memory.watches()
        self._watches = {w.id: w for w in watches}
        counts: dict[str, int] = {}
        for w in watches:
            counts[w.stream] = counts.get(w.stream, 0) + 1
        self.stats.set_watches(counts)
        self._counted_at = time.monotonic()

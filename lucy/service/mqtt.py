"""The MQTT bridge (aiomqtt): questions in, answers, new memory and stream status out.

Topics (``<p>`` is ``mqtt.topic_prefix``, default ``lucy``):

- ``<p>/<stream>/questions`` (in): ``{"id": ..., "question": "...", "options": [...]}``
- ``<p>/<stream>/answers`` (out): ``{"id": ..., "stream": ..., <the answer object>}``, or ``{"id": ..., "error": ...}``
- ``<p>/_all/questions`` (in) and ``<p>/_all/answers`` (out): a question across every stream (``"streams": [...]``
  in the payload: only those), answered as ``POST /v1/questions`` answers it (``_all`` is
  :data:`lucy.config.ALL_STREAMS`, a name no stream can take)
- ``<p>/<stream>/captions`` (out): each new memory node, as the API shows it
- ``<p>/<stream>/alerts`` (out): each alert of the stream's watches, with its ``frame_url``
  (:mod:`lucy.watch.delivery` posts them through :meth:`MqttBridge.post`)
- ``<p>/<stream>/objects`` (out): each tracked object that appears, changes (stops or starts moving, new
  attributes) or ends, as Frigate's ``frigate/events`` with one object: ``{"type": "new" | "update" | "end",
  "stream", "object": <the API's object>}`` (:class:`lucy.service.object_events.ObjectFollower` reads them from the
  store)
- ``<p>/<stream>/counts`` (out, retained; with a detector): the objects in view in the newest detected frame, when
  they change: ``{"stream", "time", "counts": {"person": 3, "car": 1}}`` (labels with none left out)
- ``<p>/<stream>/status`` (out, retained): the stream's state and progress (source redacted), published when it
  changes (a change of state at once, progress at most every ``mqtt.status_interval_seconds``; rates alone are no
  change) and again every ``mqtt.status_heartbeat_seconds`` unchanged. Every stream of the data directory is
  looked at, those ``lucy ingest`` writes in another process included.
- ``<p>/available`` (out, retained): plain ``online`` while connected, ``offline`` otherwise (Home Assistant's
  availability topic, as Frigate's ``frigate/available``): ``offline`` is the connection's last will, which the
  broker publishes when the server vanishes (crash, kill, network), and a clean shutdown says it itself
- ``<p>/status`` (out, retained): what serves, as of the last connect: ``{"version", "since", "streams"}``
- ``<d>/sensor/<node>/<stream>_state/config`` and ``<d>/binary_sensor/<node>/<stream>_alert/config`` (out,
  retained; ``<d>`` is ``mqtt.discovery_prefix``, ``<node>`` the client id): Home Assistant MQTT discovery, as
  Frigate's integration names its entities: per stream a device with a sensor of its state, a binary sensor
  that is on for a minute after each alert and, with a detector, a sensor of the people in view
  (``<d>/sensor/<node>/<stream>_people/config``, fed by the counts topic), all unavailable while
  ``<p>/available`` says ``offline``; cleared (empty retained payloads) when the stream is purged. Off with
  ``mqtt.discovery = false``.

Reconnects with exponential backoff whenever the broker goes away; what was to be published meanwhile waits in
a bounded outbox (oldest dropped first), and retained status is published again on every connect, so a
restarted broker that lost its retained messages gets them back. The link is measured (``lucy_mqtt_connected``,
``lucy_mqtt_connects_total``, ``lucy_mqtt_dropped_messages_total``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiomqtt

from lucy import __version__
from lucy.config import ALL_STREAMS
from lucy.config.settings import MqttSettings
from lucy.errors import LucyError
from lucy.redaction import redact_url
from lucy.runtime.messages import StreamState
from lucy.service.errors import InvalidRequest, ServiceError, domain_error

log = logging.getLogger(__name__)

OUTBOX_MAX = 10_000
PUBLISH_TIMEOUT_SECONDS = 10.0
ONLINE, OFFLINE = b"online", b"offline"  # the availability payloads Home Assistant expects by default
# Rates move a little with every sample of a stream that does nothing: left out when telling whether it changed.
VOLATILE = {"decode_fps", "realtime_factor", "captions_per_second", "spans_per_second"}
ALERT_ON_SECONDS = 60  # how long Home Assistant's alert binary sensor stays on after an alert (alerts are events)


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def comparable(status: dict[str, Any]) -> str:
    """A stream's status without its volatile fields (:data:`VOLATILE`, at any depth), as one string: two
    statuses that say the same thing give the same string."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        return value
    return json.dumps(strip(status), sort_keys=True, separators=(",", ":"))


def _ha_id(text: str) -> str:
    """``text`` as Home Assistant allows in a discovery topic's node and object ids (``[a-zA-Z0-9_-]``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)


@dataclass(slots=True)
class _Sent:
    """What was last published on a stream's status topic: its state, its :func:`comparable` form, when."""

    state: str
    key: str
    at: float  # time.monotonic()


class MqttBridge:
    """Runs for the server's lifetime (:meth:`run`), across broker restarts; :meth:`close` says goodbye."""

    def __init__(self, settings: MqttSettings, svc: Any, *, counts: bool = False) -> None:
        self.settings = settings
        self.svc = svc
        parts = urlsplit(settings.url)
        self.tls = parts.scheme == "mqtts"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (8883 if self.tls else 1883)
        self.prefix = settings.topic_prefix.rstrip("/")
        self.connected = False
        self.connects = 0
        self.dropped = 0
        self.metrics = svc.exporter.mqtt()
        self.metrics.connected.set(0)
        self._client: aiomqtt.Client | None = None
        self._outbox: asyncio.Queue[tuple[str, bytes, bool]] = asyncio.Queue()
        self._unsent: tuple[str, bytes, bool] | None = None
        self._questions: set[asyncio.Task[None]] = set()
        self._closing = False
        self._sent: dict[str, _Sent] = {}  # per stream: its last status published
        self._announced: set[str] = set()  # streams whose discovery configs this connection has published
        # Objects are counted (a detector runs): <prefix>/<stream>/counts is kept, and feeds Home Assistant a sensor
        # of the people in view (Frigate's per-camera person count)
        self.counts = counts

    # ------------------------------------------------------------------------------------ topics

    def topic(self, stream: str, kind: str) -> str:
        return f"{self.prefix}/{stream}/{kind}"

    @property
    def availability_topic(self) -> str:
        """``<prefix>/available``: ``online`` / ``offline``, retained."""
        return f"{self.prefix}/available"

    def _stream_of(self, topic: str) -> str | None:
        head, tail = f"{self.prefix}/", "/questions"
        if topic.startswith(head) and topic.endswith(tail):
            stream = topic[len(head):-len(tail)]
            return stream if stream and "/" not in stream else None
        return None

    # ------------------------------------------------------------------------------------ outbox

    def post(self, topic: str, payload: bytes, retain: bool = False) -> None:
        """Queue a message (sent now if connected, else after the next connect)."""
        if self._outbox.qsize() >= OUTBOX_MAX:
            self._outbox.get_nowait()
            self.dropped += 1
            self.metrics.dropped.inc()
        self._outbox.put_nowait((topic, payload, retain))

    async def _forward_events(self, sub: Any) -> None:
        while True:
            event = await sub.get()
            stream = event.get("stream")
            if not stream:
                continue
            if event["type"] == "node":
                self.post(self.topic(stream, "captions"), _json(event["node"]))
            elif event["type"] == "object":  # Frigate's frigate/events, one object instead of before / after
                self.post(self.topic(stream, "objects"), _json({"type": event["event"], "stream": stream,
                                                                "object": event["object"]}))
            elif event["type"] == "counts":  # retained: a sensor reads the latest when it (re)subscribes
                self.post(self.topic(stream, "counts"), _json({"stream": stream, "time": event["time"],
                                                               "counts": event["counts"]}), retain=True)
            elif event["type"] == "status":
                self.offer_status(stream, event["status"])

    # ------------------------------------------------------------------------------------ status, on change

    def offer_status(self, stream: str, status: dict[str, Any]) -> bool:
        """Publish a stream's status if it says something new (whether it was queued): a new state at once, other
        changes once ``status_interval_seconds`` have passed since the last one, the same again only after
        ``status_heartbeat_seconds``. A purged stream's retained status and discovery configs are cleared."""
        if status.get("purged"):
            self._sent.pop(stream, None)
            self._unannounce(stream)  # first: Home Assistant would read the emptied status as a state otherwise
            self.post(self.topic(stream, "status"), b"", retain=True)  # an empty retained message deletes it
            if self.counts:
                self.post(self.topic(stream, "counts"), b"", retain=True)
            return True
        self._announce(stream)
        s, now, key = self.settings, time.monotonic(), comparable(status)
        last = self._sent.get(stream)
        if last is not None and last.state == status["state"]:
            quiet = now - last.at
            if quiet < s.status_heartbeat_seconds and (key == last.key or quiet < s.status_interval_seconds):
                return False  # nothing new, or progress that the next look publishes
        self._sent[stream] = _Sent(status["state"], key, now)
        self.post(self.topic(stream, "status"), _json(status), retain=True)
        return True

    async def _status_loop(self) -> None:
        """Look at every stream's status each ``status_interval_seconds``: the streams only stored in the data
        directory (``lucy ingest`` writes them in another process) have no other way here."""
        known: set[str] = set(self._sent)
        while True:
            await asyncio.sleep(self.settings.status_interval_seconds)
            try:
                statuses = await asyncio.to_thread(self.svc.manager.statuses)
            except Exception:  # keep looking; the traceback is in the log
                log.exception("mqtt: reading the streams' status failed")
                continue
            names = {status["name"] for status in statuses}
            for gone in known - names:  # its store was deleted by hand (a purge this bridge heard of is cleared)
                if gone in self._sent:
                    self.offer_status(gone, {"purged": True})
            known = names
            for status in statuses:
                self.offer_status(status["name"], status)

    # ------------------------------------------------------------------------------------ Home Assistant

    def discovery_topics(self, stream: str) -> dict[str, str]:
        """The discovery config topic of each Home Assistant entity of ``stream`` (component -> topic)."""
        base, node = self.settings.discovery_prefix.rstrip("/"), _ha_id(self.settings.client_id)
        topics = {"sensor": f"{base}/sensor/{node}/{_ha_id(stream)}_state/config",
                  "binary_sensor": f"{base}/binary_sensor/{node}/{_ha_id(stream)}_alert/config"}
        if self.counts:
            topics["people"] = f"{base}/sensor/{node}/{_ha_id(stream)}_people/config"
        return topics

    def discovery_configs(self, stream: str) -> dict[str, dict[str, Any]]:
        """Home Assistant's discovery configs of ``stream``: topic -> config (a sensor of the stream's state, with
        the status as its attributes, and a binary sensor on for :data:`ALERT_ON_SECONDS` after each alert)."""
        node = _ha_id(self.settings.client_id)
        uid = f"{node}_{_ha_id(stream)}"
        device = {"identifiers": [uid], "name": f"Lucy {stream}", "manufacturer": "Lucy", "model": "video stream",
                  "sw_version": __version__}
        common = {"availability_topic": self.availability_topic, "payload_available": ONLINE.decode(),
                  "payload_not_available": OFFLINE.decode(), "device": device, "qos": self.settings.qos}
        topics = self.discovery_topics(stream)
        status = self.topic(stream, "status")
        counts = self.topic(stream, "counts")
        people = {} if "people" not in topics else {topics["people"]: {
            **common, "name": "People in view", "unique_id": f"{uid}_people", "object_id": f"{uid}_people",
            "state_topic": counts, "value_template": "{{ value_json.counts.person | default(0) }}",
            "json_attributes_topic": counts, "state_class": "measurement", "unit_of_measurement": "people",
            "icon": "mdi:account-group"}}
        return {
            topics["sensor"]: {
                **common, "name": "State", "unique_id": f"{uid}_state", "object_id": f"{uid}_state",
                "state_topic": status, "value_template": "{{ value_json.state }}", "json_attributes_topic": status,
                "device_class": "enum", "options": [state.value for state in StreamState], "icon": "mdi:cctv"},
            topics["binary_sensor"]: {
                **common, "name": "Alert", "unique_id": f"{uid}_alert", "object_id": f"{uid}_alert",
                "state_topic": self.topic(stream, "alerts"), "value_template": "ON", "payload_on": "ON",
                "off_delay": ALERT_ON_SECONDS, "json_attributes_topic": self.topic(stream, "alerts"),
                "icon": "mdi:bell-alert"},
            **people,
        }

    def _announce(self, stream: str) -> None:
        if self.settings.discovery and stream not in self._announced:
            self._announced.add(stream)
            for topic, config in self.discovery_configs(stream).items():
                self.post(topic, _json(config), retain=True)

    def _unannounce(self, stream: str) -> None:
        if self.settings.discovery:
            self._announced.discard(stream)
            for topic in self.discovery_topics(stream).values():
                self.post(topic, b"", retain=True)  # Home Assistant removes an entity whose config is emptied

    # ------------------------------------------------------------------------------------ connection

    def _make_client(self) -> aiomqtt.Client:
        s = self.settings
        tls_context = None
        if self.tls:
            tls_context = ssl.create_default_context(cafile=str(s.tls_ca_file) if s.tls_ca_file else None)
            if s.tls_cert_file is not None:
                tls_context.load_cert_chain(str(s.tls_cert_file), str(s.tls_key_file) if s.tls_key_file else None)
            if s.tls_insecure:
                tls_context.check_hostname = False
        # One will per connection: the availability topic's, so that a crash reads "offline" where it matters.
        will = aiomqtt.Will(self.availability_topic, OFFLINE, qos=s.qos, retain=True)
        return aiomqtt.Client(
            self.host, self.port, username=s.username,
            password=s.password.get_secret_value() if s.password is not None else None,
            identifier=s.client_id, will=will, keepalive=s.keepalive_seconds, tls_context=tls_context,
            tls_insecure=s.tls_insecure if self.tls else None, timeout=PUBLISH_TIMEOUT_SECONDS)

    async def run(self) -> None:
        """Connect, serve, and reconnect with backoff until cancelled."""
        s = self.settings
        delay = s.reconnect_initial_seconds
        async with self.svc.bus.subscribe(maxsize=OUTBOX_MAX) as sub:
            forwarder = asyncio.create_task(self._forward_events(sub), name="mqtt-events")
            try:
                while not self._closing:
                    try:
                        async with self._make_client() as client:
                            self._client, self.connected = client, True
                            self.connects += 1
                            self.metrics.connects.inc()
                            self.metrics.connected.set(1)
                            delay = s.reconnect_initial_seconds
                            log.info("mqtt: connected to %s:%d", self.host, self.port)
                            await self._serve(client)
                    except aiomqtt.MqttError as err:
                        if self.connected:
                            log.warning("mqtt: connection to %s:%d lost (%s); reconnecting", self.host, self.port,
                                        err)
                        else:
                            log.warning("mqtt: cannot reach %s:%d (%s); retrying in %.1f s", self.host, self.port,
                                        err, delay)
                    finally:
                        self._client, self.connected = None, False
                        self.metrics.connected.set(0)
                    if self._closing:
                        break
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, s.reconnect_max_seconds)
            finally:
                forwarder.cancel()
                for task in list(self._questions):
                    task.cancel()

    async def _serve(self, client: aiomqtt.Client) -> None:
        s = self.settings
        await client.subscribe(f"{self.prefix}/+/questions", qos=s.qos)
        statuses = await asyncio.to_thread(self.svc.manager.statuses)
        await client.publish(f"{self.prefix}/status", _json(
            {"version": __version__, "since": time.time(), "streams": [st["name"] for st in statuses]}),
            qos=s.qos, retain=True)
        await client.publish(self.availability_topic, ONLINE, qos=s.qos, retain=True)
        # Everything retained again (a restarted broker may have lost it): discovery configs, then each status.
        self._announced.clear()
        for status in statuses:
            name = status["name"]
            if s.discovery:
                for topic, config in self.discovery_configs(name).items():
                    await client.publish(topic, _json(config), qos=s.qos, retain=True)
                self._announced.add(name)
            await client.publish(self.topic(name, "status"), _json(status), qos=s.qos, retain=True)
            self._sent[name] = _Sent(status["state"], comparable(status), time.monotonic())
        tasks = [asyncio.create_task(self._publish_loop(client), name="mqtt-publish"),
                 asyncio.create_task(self._receive_loop(client), name="mqtt-receive"),
                 asyncio.create_task(self._status_loop(), name="mqtt-status")]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()  # re-raises the MqttError that ended the connection
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _publish_loop(self, client: aiomqtt.Client) -> None:
        while True:
            if self._unsent is None:
                self._unsent = await self._outbox.get()
            topic, payload, retain = self._unsent
            await client.publish(topic, payload, qos=self.settings.qos, retain=retain)
            self._unsent = None  # only once the broker has it: a message in flight when the link drops is resent

    async def _receive_loop(self, client: aiomqtt.Client) -> None:
        async for message in client.messages:
            stream = self._stream_of(message.topic.value)
            if stream is None:
                continue
            task = asyncio.create_task(self._answer(stream, message.payload), name=f"mqtt-question-{stream}")
            self._questions.add(task)
            task.add_done_callback(self._questions.discard)

    # ------------------------------------------------------------------------------------ questions

    async def _answer(self, stream: str, payload: Any) -> None:
        topic = self.topic(stream, "answers")
        qid: Any = None
        try:
            try:
                raw = payload.decode() if isinstance(payload, bytes | bytearray) else str(payload)
                body = json.loads(raw)
            except (UnicodeDecodeError, ValueError):
                raise InvalidRequest("the payload must be JSON: {\"id\": ..., \"question\": \"...\"}") from None
            if not isinstance(body, dict):
                raise InvalidRequest("the payload must be a JSON object with an id and a question")
            qid = body.get("id")
            if not isinstance(qid, str | int) or isinstance(qid, bool) or len(str(qid)) > 128:
                qid = None
                raise InvalidRequest("every question needs an \"id\" (a string or number, up to 128 characters)")
            question, options = body.get("question"), body.get("options", [])
            if not isinstance(question, str):
                raise InvalidRequest("\"question\" must be a string")
            if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
                raise InvalidRequest("\"options\" must be a list of strings")
            target = await self._streams_asked(body) if stream == ALL_STREAMS else stream
            result = await self.svc.questions.ask(target, question, options)
            self.post(topic, _json({"id": qid, "stream": stream, **result.to_json()}))
        except asyncio.CancelledError:
            raise
        except (ServiceError, LucyError) as err:
            status = getattr(domain_error(err) or err, "status", 422)  # an unknown stream: 404, as over HTTP
            self.post(topic, _json({"id": qid, "stream": stream, "error": redact_url(str(err)),
                                    "status": status}))
        except Exception as err:
            log.exception("mqtt question about %s failed", stream)
            self.post(topic, _json({"id": qid, "stream": stream, "error": f"internal error: {type(err).__name__}",
                                    "status": 500}))

    async def _streams_asked(self, body: dict[str, Any]) -> list[str]:
        """The streams a question on ``<p>/_all/questions`` is about: its ``streams``, or every stream."""
        streams = body.get("streams")
        if streams is not None and (not isinstance(streams, list) or not all(isinstance(n, str) for n in streams)):
            raise InvalidRequest("\"streams\" must be a list of stream names (leave it out to ask every stream)")
        return await self.svc.questions.streams_across(streams)

    # ------------------------------------------------------------------------------------ shutdown

    async def close(self) -> None:
        """Say ``offline`` (retained) before the server stops; then :meth:`run` ends."""
        self._closing = True
        client = self._client
        if client is not None and self.connected:
            try:
                async with asyncio.timeout(PUBLISH_TIMEOUT_SECONDS):
                    await client.publish(self.availability_topic, OFFLINE, qos=self.settings.qos, retain=True)
            except (aiomqtt.MqttError, TimeoutError) as err:
                log.warning("mqtt: could not publish offline: %s", err)

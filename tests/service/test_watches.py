"""Standing questions over HTTP, and the delivery of their alerts to SSE, MQTT (a real mosquitto) and webhooks (a
real HTTP receiver on loopback), against a real ``lucy serve``. Alerts are stored straight into the server's
memory store, as a stream worker's checker stores them."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from lucy.config import LucySettings
from lucy.memory.watches import Alert
from lucy.wiring import open_memory
from tests.service.conftest import LucyServer, Mosquitto, wait_for
from tests.service.test_mqtt import Watcher

SECRET = "webhook-secret-0123456789"


@dataclass
class Receiver:
    """A webhook receiver on loopback that answers each request with the next of ``statuses`` (then 200)."""

    statuses: list[int]
    requests: list[tuple[dict[str, str], bytes, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, headers: dict[str, str], body: bytes) -> int:
        with self.lock:
            status = self.statuses.pop(0) if self.statuses else 200
            self.requests.append((headers, body, status))
            return status


@contextmanager
def receiver(statuses: list[int]) -> Iterator[tuple[Receiver, str]]:
    state = Receiver(list(statuses))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            status = state.answer({k.lower(): v for k, v in self.headers.items()}, body)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}/hook?token=abc"
    finally:
        server.shutdown()
        server.server_close()


def store_alert(server: LucyServer, watch_id: int, stream: str, question: str, t: float) -> Alert:
    """Store an alert as a stream worker's checker does."""
    store = open_memory(LucySettings(data=server.data))
    try:
        return store.add_alert(Alert(id=None, watch_id=watch_id, stream=stream, question=question, start=t,
                                     end=t + 60, reason=f"<b>seen</b> at {t:g}", frame_time=t + 30, level="coarse",
                                     created=time.time(), event_end=t + 60, llm_calls=1, caption_calls=0))
    finally:
        store.close()


class SseReader:
    """Reads ``alert`` events of a stream's SSE endpoint in a thread."""

    def __init__(self, server: LucyServer, stream: str) -> None:
        self.events: list[dict[str, Any]] = []
        self.comments = 0
        self._client = server.client(timeout=60)
        opened = threading.Event()

        def read() -> None:
            try:
                with self._client.stream("GET", f"/v1/streams/{stream}/alerts/events") as r:
                    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
                    kind = None
                    for line in r.iter_lines():
                        if line.startswith(":"):
                            self.comments += 1
                            opened.set()
                        elif line.startswith("event: "):
                            kind = line[7:]
                        elif line.startswith("data: ") and kind == "alert":
                            self.events.append(json.loads(line[6:]))
            except httpx.HTTPError:
                pass  # closed by the test

        threading.Thread(target=read, daemon=True).start()
        assert opened.wait(30), "the SSE stream did not open"

    def close(self) -> None:
        self._client.close()


def test_watches_api(shared_server: LucyServer) -> None:
    with shared_server.client(30) as c:
        assert c.post("/v1/streams", json={"name": "watched", "captioner": "none",
                                           "source": "rtsp://127.0.0.1:9/x"}).status_code == 201
        r = c.post("/v1/streams/watched/watches", json={"question": "Is a van at the gate?", "cooldown_seconds": 60,
                                                        "webhook_url": "https://hooks.example.com/x"})
        assert r.status_code == 201, r.text
        watch = r.json()
        assert watch["question"] == "Is a van at the gate?" and watch["cooldown_seconds"] == 60 and watch["active"]
        # The same watch again (question in another case, with an invisible character): 200 and the same watch.
        again = c.post("/v1/streams/watched/watches", json={"question": "is a VAN at the\u200b gate?",
                                                            "cooldown_seconds": 5,
                                                            "webhook_url": "https://hooks.example.com/x"})
        assert again.status_code == 200 and again.json() == watch, again.text
        second = c.post("/v1/streams/watched/watches", json={"question": "Anyone at the door?"}).json()
        assert [w["id"] for w in c.get("/v1/streams/watched/watches").json()["watches"]] == [watch["id"],
                                                                                               second["id"]]
        # Bad bodies and unknown streams answer in the app's error shape.
        for bad in ({"question": ""}, {"question": "x" * 501}, {"question": "q", "cooldown_seconds": -1},
                    {"question": "q", "webhook_url": "file:///etc/passwd"}, {"question": "q", "extra": 1},
                    {"question": "q", "webhook_url": "ftp://example.com/x"},
                    {"question": "q", "webhook_url": "http://169.254.169.254/latest/meta-data/"},
                    {"question": "q", "webhook_url": "http://metadata.google.internal/computeMetadata/v1/"},
                    {"question": "q", "webhook_url": "http://localhost:8265/api/jobs/"},
                    {"question": "q", "webhook_url": f"http://127.0.0.1:{shared_server.port}/v1/streams"}):
            r = c.post("/v1/streams/watched/watches", json=bad)
            assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", bad
        for method, path in (("GET", "/v1/streams/nosuch/watches"), ("GET", "/v1/streams/nosuch/alerts"),
                             ("DELETE", "/v1/streams/nosuch/watches/1"), ("GET", "/v1/streams/nosuch/alerts/events")):
            r = c.request(method, path, json={"question": "q"} if method == "POST" else None)
            assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", (method, path)
        # Delete: gone from the list, a second delete is 404.
        assert c.delete(f"/v1/streams/watched/watches/{watch['id']}").status_code == 200
        assert c.delete(f"/v1/streams/watched/watches/{watch['id']}").status_code == 404
        assert [w["id"] for w in c.get("/v1/streams/watched/watches").json()["watches"]] == [second["id"]]
        assert c.get("/v1/streams/watched/alerts").json() == {"stream": "watched", "alerts": []}


def test_a_watch_registered_before_its_stream_exists(shared_server: LucyServer) -> None:
    """As ``lucy watch`` can: a valid name with no stream yet is accepted; the stream is then known by its watches
    (listed, deleted, its alerts read) until the last goes; a bad name is 422."""
    with shared_server.client(30) as c:
        r = c.post("/v1/streams/later/watches", json={"question": "Is a van at the gate?"})
        assert r.status_code == 201, r.text
        watch = r.json()
        assert c.post("/v1/streams/later/watches", json={"question": "Is a van at the gate?"}).json() == watch
        assert [w["id"] for w in c.get("/v1/streams/later/watches").json()["watches"]] == [watch["id"]]
        assert c.get("/v1/streams/later/alerts").json() == {"stream": "later", "alerts": []}
        for bad in ("bad%20name", "a..b", "-dash", "a" * 200):
            r = c.post(f"/v1/streams/{bad}/watches", json={"question": "q"})
            assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", (bad, r.text)
        assert c.delete(f"/v1/streams/later/watches/{watch['id']}").status_code == 200
        assert c.get("/v1/streams/later/watches").status_code == 404  # no stream, no watch: unknown again


def test_alerts_reach_sse_mqtt_and_webhooks(lucy_server: Callable[..., LucyServer], mosquitto: Mosquitto) -> None:
    server = lucy_server(mqtt={"enabled": True, "url": f"mqtt://127.0.0.1:{mosquitto.port}", "client_id": "lucy-w"},
                         alerts={"webhook_secret": SECRET, "webhook_retries": 3, "webhook_initial_seconds": 0.2,
                                 "webhook_max_seconds": 0.5, "poll_seconds": 0.1})
    wait_for(lambda: server.client().get("/readyz").json()["mqtt"] == "connected", 60, "the bridge to connect")
    watcher = Watcher(mosquitto.port)
    with receiver([503, 503]) as (flaky, flaky_url), receiver([400]) as (refusing, refusing_url), \
            server.client(30) as c:
        assert c.post("/v1/streams", json={"name": "gate", "captioner": "none",
                                           "source": "rtsp://127.0.0.1:9/x"}).status_code == 201
        w1 = c.post("/v1/streams/gate/watches", json={"question": "Van?", "webhook_url": flaky_url}).json()
        w2 = c.post("/v1/streams/gate/watches", json={"question": "Door?", "webhook_url": refusing_url}).json()
        sse = SseReader(server, "gate")
        try:
            a1 = store_alert(server, w1["id"], "gate", "Van?", 60.0)
            a2 = store_alert(server, w2["id"], "gate", "Door?", 120.0)
            # SSE: each alert once, with its frame URL; the reason stays text.
            wait_for(lambda: len(sse.events) >= 2, 30, "two alerts on SSE")
            assert [e["id"] for e in sse.events] == [a1.id, a2.id]
            assert sse.events[0]["frame_url"] == "/v1/streams/gate/frames?t=90.000"
            assert sse.events[0]["reason"] == "<b>seen</b> at 60"
            # MQTT: each once on <prefix>/gate/alerts.
            on_mqtt = wait_for(lambda: (m := watcher.find(lambda t, p, r: t == "lucy/gate/alerts")) and len(m) >= 2
                               and m, 30, "two alerts on MQTT")
            assert sorted(p["id"] for _, p, _ in on_mqtt) == [a1.id, a2.id] and not any(r for _, _, r in on_mqtt)
            # The flaky webhook: two 503s, then accepted; signed over the raw body.
            wait_for(lambda: len(flaky.requests) >= 3, 30, "the third webhook try")
            bodies = {body for _, body, _ in flaky.requests}
            assert len(bodies) == 1 and [s for _, _, s in flaky.requests] == [503, 503, 200]
            headers, body, _ = flaky.requests[-1]
            expected = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
            assert headers["x-lucy-signature"] == f"sha256={expected}"
            assert json.loads(body)["id"] == a1.id and headers["content-type"] == "application/json"
            # The refusing webhook: one 400, never retried.
            wait_for(lambda: refusing.requests, 30, "the refused webhook")
            time.sleep(1.0)  # longer than the whole backoff
            assert len(refusing.requests) == 1 and len(flaky.requests) == 3
            history = c.get("/v1/streams/gate/alerts", params={"after_id": a1.id}).json()["alerts"]
            assert [a["id"] for a in history] == [a2.id]
            metrics = c.get("/metrics").text
            assert 'lucy_alerts_total{stream="gate"} 2.0' in metrics
            # Final outcomes only: the retries and the receiver's status stay in the log (no port-probing oracle).
            assert 'lucy_alert_deliveries_total{outcome="failed",sink="webhook"} 1.0' in metrics
            assert 'outcome="retried"' not in metrics and 'outcome="rejected"' not in metrics
            assert 'lucy_watches{stream="gate"} 2.0' in metrics
            assert SECRET not in server.log()
        finally:
            sse.close()

        # A restarted server does not send old alerts again; what was raised while it was down goes out when it is
        # back, and new ones as they come.
        server.stop()
        raised_while_down = store_alert(server, w1["id"], "gate", "Van?", 150.0)
        server.start()
        wait_for(lambda: server.client().get("/readyz").json()["mqtt"] == "connected", 60, "the bridge to reconnect")
        wait_for(lambda: len(flaky.requests) >= 4, 30, "the webhook of the alert raised while the server was down")
        sse = SseReader(server, "gate")
        try:
            time.sleep(1.0)  # several polls
            a3 = store_alert(server, w1["id"], "gate", "Van?", 180.0)
            wait_for(lambda: sse.events, 30, "the new alert on SSE")
            wait_for(lambda: len(flaky.requests) >= 5, 30, "the new alert's webhook")
            time.sleep(0.5)
            assert [e["id"] for e in sse.events] == [a3.id]
            assert [json.loads(b)["id"] for _, b, _ in flaky.requests[3:]] == [raised_while_down.id, a3.id]
            assert len(refusing.requests) == 1
            assert sorted(p["id"] for _, p, _ in watcher.find(lambda t, p, r: t == "lucy/gate/alerts")) == [
                a1.id, a2.id, raised_while_down.id, a3.id]
        finally:
            sse.close()
    watcher.close()

"""The MQTT bridge against a real mosquitto broker, restarted mid-test; its availability topic (``lucy/available``:
plain ``online`` / ``offline``, retained, ``offline`` as the last will) as Home Assistant reads it."""

from __future__ import annotations

import json
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
import pytest

from lucy.testing import child_env
from tests.service.conftest import LucyServer, Mosquitto, wait_for


class Watcher:
    """A plain MQTT client (paho) that records what it receives on ``lucy/#``."""

    def __init__(self, port: int, topics: tuple[str, ...] = ("lucy/#",)) -> None:
        self.messages: queue.Queue[tuple[str, Any, bool]] = queue.Queue()
        self.seen: list[tuple[str, Any, bool]] = []
        self._lock = threading.Lock()
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2)
        self.client.on_message = self._on_message
        subscribed = threading.Event()
        self.client.on_subscribe = lambda *a, **k: subscribed.set()
        self.client.on_connect = lambda c, *a, **k: c.subscribe([(topic, 1) for topic in topics])
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        assert subscribed.wait(30), "the test's MQTT client could not subscribe"

    def _on_message(self, client: Any, userdata: Any, message: paho.MQTTMessage) -> None:
        try:
            payload = json.loads(message.payload) if message.payload else None
        except ValueError:
            payload = message.payload
        item = (message.topic, payload, bool(message.retain))
        with self._lock:
            self.seen.append(item)
        self.messages.put(item)

    def find(self, predicate: Callable[[str, Any, bool], bool]) -> list[tuple[str, Any, bool]]:
        with self._lock:
            return [m for m in self.seen if predicate(*m)]

    def publish(self, topic: str, payload: Any) -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.client.publish(topic, body, qos=1).wait_for_publish(30)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def _available(watcher: Watcher, payload: bytes, what: str, retained: bool | None = None,
               timeout: float = 60) -> None:
    """Wait for ``lucy/available`` to carry ``payload`` (plain text, not JSON), retained if asked."""
    wait_for(lambda: watcher.find(lambda t, p, r: t == "lucy/available" and p == payload
                                  and (retained is None or r == retained)), timeout, what)


def _answer(watcher: Watcher, qid: Any, stream: str = "gate", timeout: float = 120) -> dict:
    found = wait_for(lambda: watcher.find(lambda t, p, r: t == f"lucy/{stream}/answers" and isinstance(p, dict)
                                          and p.get("id") == qid), timeout, f"the answer to {qid!r}")
    return found[-1][1]


def test_mqtt_bridge(lucy_server: Callable[..., LucyServer], mosquitto: Mosquitto, videos: dict[str, Path]) -> None:
    server = lucy_server(mqtt={"enabled": True, "url": f"mqtt://127.0.0.1:{mosquitto.port}", "client_id": "lucy-test",
                               "reconnect_initial_seconds": 0.2, "reconnect_max_seconds": 1.0, "keepalive_seconds": 5})
    wait_for(lambda: server.client().get("/readyz").json()["mqtt"] == "connected", 60, "the bridge to connect")
    watcher = Watcher(mosquitto.port)
    try:
        # The server is online (retained: this client subscribed after it was said), with what serves on lucy/status.
        _available(watcher, b"online", "lucy/available online, retained", retained=True, timeout=30)
        info = wait_for(lambda: watcher.find(lambda t, p, r: t == "lucy/status" and r), 30, "lucy/status")
        assert info[-1][1]["version"] and "state" not in info[-1][1]
        secret = "pa55word"
        with server.client() as c:
            assert c.post("/v1/streams", json={"name": "gate", "source": str(videos["a"])}).status_code == 201
            assert c.post("/v1/streams", json={"name": "door", "captioner": "none",
                                               "source": f"rtsp://cam:{secret}@127.0.0.1:9/x"}).status_code == 201
        server.wait_captioned("gate")
        # New memory nodes go out on captions, one message per node, as the API shows them.
        captions = wait_for(lambda: (m := watcher.find(lambda t, p, r: t == "lucy/gate/captions")) and len(m) >= 3
                            and m, 60, "three coarse captions on lucy/gate/captions")
        assert sorted((p["start"], p["end"]) for _, p, _ in captions if p["level"] == "coarse") == [
            (0, 60), (60, 120), (120, 150)]
        with server.client() as c:
            stored = c.get("/v1/streams/gate/memory", params={"level": "coarse"}).json()["nodes"]
        assert {n["id"] for n in stored} <= {p["id"] for _, p, _ in captions}
        # Status is retained per stream; credentials never reach MQTT.
        wait_for(lambda: watcher.find(lambda t, p, r: t == "lucy/gate/status" and p and p["state"] == "finished"),
                 30, "gate's finished status")
        wait_for(lambda: watcher.find(lambda t, p, r: t == "lucy/door/status" and p and p["state"] == "failed"), 60,
                 "door's failed status")
        assert all(secret not in json.dumps(p) for _, p, _ in watcher.find(lambda t, p, r: True)
                   if not isinstance(p, bytes))

        # Questions in, answers out, matched by id.
        watcher.publish("lucy/gate/questions", {"id": "q-1", "question": "What number plate was shown?"})
        answer = _answer(watcher, "q-1")
        assert answer["stream"] == "gate" and answer["trace"] and "confident" in answer and "error" not in answer
        # ... and across every stream on lucy/_all (the stream with no frames is left out), or the streams named
        watcher.publish("lucy/_all/questions", {"id": "q-all", "question": "What number plate was shown?"})
        across = _answer(watcher, "q-all", stream="_all")
        assert "error" not in across and across["trace"], across
        # (only gate has frames: the question is gate's, as POST /v1/questions answers it)
        assert across.get("streams", [across["stream"]]) == ["gate"], across
        assert {e.get("stream", "gate") for e in across["evidence"]} <= {"gate"}
        watcher.publish("lucy/_all/questions", {"id": "q-none", "question": "Who?", "streams": ["nosuch"]})
        watcher.publish("lucy/_all/questions", {"id": "q-str", "question": "Who?", "streams": "gate"})
        assert _answer(watcher, "q-none", stream="_all")["status"] == 404
        assert _answer(watcher, "q-str", stream="_all")["status"] == 422
        # Bad questions get an error reply (with the id when there is one), and the bridge carries on.
        watcher.publish("lucy/gate/questions", b"{not json")
        watcher.publish("lucy/gate/questions", {"id": "q-2", "question": ""})
        watcher.publish("lucy/gate/questions", {"id": "q-invisible", "question": "\u200b\u2060\ufeff\u0000"})
        watcher.publish("lucy/gate/questions", {"id": "q-same", "question": "Which?", "options": ["Red", "r\u200bed"]})
        watcher.publish("lucy/nosuch/questions", {"id": 3, "question": "anyone there?"})
        bad_json = wait_for(lambda: watcher.find(lambda t, p, r: t == "lucy/gate/answers" and isinstance(p, dict)
                                                 and p.get("id") is None), 60, "the bad-JSON reply")
        assert "JSON" in bad_json[0][1]["error"]
        assert _answer(watcher, "q-2")["status"] == 422
        assert "empty" in (invisible := _answer(watcher, "q-invisible"))["error"] and invisible["status"] == 422
        assert "are the same" in (same := _answer(watcher, "q-same"))["error"] and same["status"] == 422
        assert _answer(watcher, 3, stream="nosuch")["status"] == 404

        # The broker restarts (and forgets everything retained): the bridge reconnects and re-announces.
        mosquitto.restart()
        watcher.close()
        wait_for(lambda: (r := server.client().get("/readyz").json())["mqtt"] == "connected"
                 and r["mqtt_connects"] >= 2, 90, "the bridge to reconnect")
        watcher = Watcher(mosquitto.port)
        _available(watcher, b"online", "the retained online after the restart", retained=True, timeout=30)
        wait_for(lambda: watcher.find(lambda t, p, r: t == "lucy/gate/status" and r and p["state"] == "finished"),
                 30, "gate's retained status after the restart")
        watcher.publish("lucy/gate/questions", {"id": "after-restart", "question": "What colours were shown?"})
        assert "error" not in _answer(watcher, "after-restart")

        # The last will: the server vanishes without a word, the broker says it is offline, and keeps saying so to
        # clients that come later.
        assert not watcher.find(lambda t, p, r: t == "lucy/available" and p == b"offline")
        server.stop(signal.SIGKILL)
        _available(watcher, b"offline", "the last will on lucy/available")
        late = Watcher(mosquitto.port)
        try:
            _available(late, b"offline", "the retained offline, to a later client", retained=True, timeout=30)
        finally:
            late.close()
    finally:
        watcher.close()


def test_mqtt_clean_shutdown_says_offline(lucy_server: Callable[..., LucyServer], mosquitto: Mosquitto) -> None:
    server = lucy_server(mqtt={"enabled": True, "url": f"mqtt://127.0.0.1:{mosquitto.port}", "client_id": "lucy-2"})
    wait_for(lambda: server.client().get("/readyz").json()["mqtt"] == "connected", 60, "the bridge to connect")
    watcher = Watcher(mosquitto.port)
    try:
        _available(watcher, b"online", "lucy/available online", retained=True, timeout=30)
        assert server.stop(signal.SIGTERM) == 0
        _available(watcher, b"offline", "offline on a clean shutdown", timeout=30)
        assert "could not publish offline" not in server.log()
    finally:
        watcher.close()


def test_server_starts_while_broker_is_down(lucy_server: Callable[..., LucyServer], mosquitto: Mosquitto) -> None:
    """A broker that is not there yet never stops the server; the bridge connects when it comes."""
    mosquitto.stop()
    server = lucy_server(mqtt={"enabled": True, "url": f"mqtt://127.0.0.1:{mosquitto.port}", "client_id": "lucy-3",
                               "reconnect_initial_seconds": 0.2, "reconnect_max_seconds": 1.0})
    assert server.client().get("/readyz").json()["mqtt"] == "disconnected"
    assert server.client().get("/v1/streams").status_code == 200
    mosquitto.start()
    wait_for(lambda: server.client().get("/readyz").json()["mqtt"] == "connected", 60, "the bridge to connect")


def _tls_material(root: Path) -> dict[str, Path]:
    """A private CA and a broker certificate for 127.0.0.1, made with openssl."""
    files = {k: root / f"{k}.pem" for k in ("ca_key", "ca", "key", "csr", "cert")}
    run = lambda *args: subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)  # noqa: E731
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=lucy-test-ca",
        "-keyout", str(files["ca_key"]), "-out", str(files["ca"]))
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", str(files["key"]),
        "-out", str(files["csr"]))
    ext = root / "san.cnf"
    ext.write_text("subjectAltName = IP:127.0.0.1\n")
    run("x509", "-req", "-in", str(files["csr"]), "-CA", str(files["ca"]), "-CAkey", str(files["ca_key"]),
        "-CAcreateserial", "-days", "1", "-extfile", str(ext), "-out", str(files["cert"]))
    return files


def test_mqtt_over_tls_with_credentials(lucy_server: Callable[..., LucyServer], tmp_path: Path) -> None:
    if not shutil.which("openssl") or not shutil.which("mosquitto_passwd"):
        pytest.fail("openssl and mosquitto_passwd are needed (Debian's openssl and mosquitto)")
    tls = _tls_material(tmp_path)
    passwd = tmp_path / "passwd"
    subprocess.run(["mosquitto_passwd", "-b", "-c", str(passwd), "lucy", "br0ker-pw"], check=True, timeout=60)
    broker = Mosquitto(tmp_path, settings=f"allow_anonymous false\npassword_file {passwd}\ncafile {tls['ca']}\n"
                                          f"certfile {tls['cert']}\nkeyfile {tls['key']}\n").start()
    try:
        mqtt = {"enabled": True, "url": f"mqtts://127.0.0.1:{broker.port}", "username": "lucy",
                "tls_ca_file": str(tls["ca"]), "reconnect_initial_seconds": 0.2, "reconnect_max_seconds": 1.0}
        good = lucy_server(mqtt={**mqtt, "password": "br0ker-pw", "client_id": "lucy-tls"})
        bad = lucy_server(mqtt={**mqtt, "password": "wrong-pw", "client_id": "lucy-bad"})
        wait_for(lambda: good.client().get("/readyz").json()["mqtt"] == "connected", 60, "the TLS bridge to connect")
        # A client that trusts the same CA sees the server online, over TLS with the same credentials.
        received: queue.Queue[dict] = queue.Queue()
        client = paho.Client(paho.CallbackAPIVersion.VERSION2)
        client.username_pw_set("lucy", "br0ker-pw")
        client.tls_set(ca_certs=str(tls["ca"]))
        client.on_connect = lambda c, *a, **k: c.subscribe("lucy/status", qos=1)
        client.on_message = lambda c, u, m: received.put(json.loads(m.payload))
        client.connect("127.0.0.1", broker.port)
        client.loop_start()
        try:
            assert received.get(timeout=30)["version"]
        finally:
            client.loop_stop()
            client.disconnect()
        time.sleep(2)  # the bad one keeps being refused
        assert bad.client().get("/readyz").json()["mqtt"] == "disconnected"
        assert "br0ker-pw" not in good.log() + bad.log() and "wrong-pw" not in bad.log()
    finally:
        broker.stop()


def test_status_goes_out_on_change_and_streams_appear_in_home_assistant(
        lucy_server: Callable[..., LucyServer], mosquitto: Mosquitto, videos: dict[str, Path]) -> None:
    """A finished stream's status is not said again within the heartbeat; a stream `lucy ingest` writes in another
    process is published as it goes (recording: a paced file, as its lock's record tells; then finished); each
    stream has Home Assistant discovery configs (retained, valid JSON, on Lucy's topics), cleared when it is purged;
    the connection is a note (INFO), not a warning."""
    server = lucy_server(start=False, mqtt={
        "enabled": True, "url": f"mqtt://127.0.0.1:{mosquitto.port}", "client_id": "lucy-ha",
        "status_interval_seconds": 0.5, "status_heartbeat_seconds": 3600,
        "reconnect_initial_seconds": 0.2, "reconnect_max_seconds": 1.0})
    server.extra_args = ["-v"]  # Lucy's notes in the log: the connection's level can be read there
    server.start()
    wait_for(lambda: server.client().get("/readyz").json()["mqtt"] == "connected", 60, "the bridge to connect")
    watcher = Watcher(mosquitto.port, topics=("lucy/#", "homeassistant/#"))
    status_of = lambda name: watcher.find(lambda t, p, r: t == f"lucy/{name}/status" and p)  # noqa: E731
    try:
        with server.client() as c:
            assert c.post("/v1/streams", json={"name": "gate", "source": str(videos["short"]),
                                               "captioner": "none"}).status_code == 201
        wait_for(lambda: any(p["state"] == "finished" and p["ended_at"] and p["worker_pid"] is None
                             for _, p, _ in status_of("gate")), 60, "gate finished, its worker gone")

        configs = {}
        for component, object_id in (("sensor", "gate_state"), ("binary_sensor", "gate_alert")):
            topic = f"homeassistant/{component}/lucy-ha/{object_id}/config"
            found = wait_for(lambda t=topic: watcher.find(lambda tt, p, r: tt == t and p), 30, topic)
            assert isinstance(found[-1][1], dict), found[-1][1]  # valid JSON
            configs[component] = found[-1][1]
        sensor, alert = configs["sensor"], configs["binary_sensor"]
        assert sensor["state_topic"] == sensor["json_attributes_topic"] == "lucy/gate/status"
        assert sensor["value_template"] == "{{ value_json.state }}" and "catching_up" in sensor["options"]
        assert alert["state_topic"] == "lucy/gate/alerts" and alert["off_delay"] > 0
        for config in configs.values():
            assert config["availability_topic"] == "lucy/available" and config["payload_available"] == "online"
            assert config["device"]["identifiers"] == ["lucy-ha_gate"] and config["device"]["name"] == "Lucy gate"
        assert sensor["unique_id"] != alert["unique_id"] and all(c["unique_id"] for c in configs.values())

        # Another process writes a stream (a paced file: SHORT_SECONDS of it, longer than the old re-publication
        # period of 10 s): the bridge publishes it as it goes, while gate, unchanged, stays quiet.
        said = len(status_of("gate"))
        ingest = subprocess.Popen([sys.executable, "-m", "lucy", "ingest", str(videos["short"]), "--stream", "yard",
                                   "--data", str(server.data), "--captioner", "none", "--realtime"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=child_env())
        try:
            wait_for(lambda: any(p["state"] == "recording" for _, p, _ in status_of("yard")), 60,
                     "yard recording on MQTT")
            assert server.stream("yard")["state"] in ("recording", "finished")  # the API: the same word
            _, err = ingest.communicate(timeout=120)
            assert ingest.returncode == 0, err
        finally:
            if ingest.poll() is None:
                ingest.kill()
                ingest.communicate()
        wait_for(lambda: status_of("yard")[-1][1]["state"] == "finished", 30, "yard finished on MQTT")
        assert watcher.find(lambda t, p, r: t == "homeassistant/sensor/lucy-ha/yard_state/config" and p)
        gate = [p for _, p, _ in status_of("gate")]
        assert len(gate) == said, [{k: v for k, v in p.items() if gate[said - 1].get(k) != v} for p in gate[said:]]

        # Purged: its entities go from Home Assistant (empty retained configs), its retained status too.
        with server.client() as c:
            assert c.delete("/v1/streams/yard", params={"purge": "true"}).status_code == 200
        for topic in ("homeassistant/sensor/lucy-ha/yard_state/config",
                      "homeassistant/binary_sensor/lucy-ha/yard_alert/config", "lucy/yard/status"):
            wait_for(lambda t=topic: watcher.find(lambda tt, p, r: tt == t and p is None), 30, f"{topic} cleared")
        assert "lucy: INFO: mqtt: connected to" in server.log()
        assert "WARNING: mqtt: connected" not in server.log()
    finally:
        watcher.close()


def test_status_is_published_on_change_with_a_heartbeat(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bridge's rule, on a clock of the test's own: a new state at once; other changes at most every
    status_interval_seconds; rates alone are no change; the same status again only after the heartbeat."""
    from types import SimpleNamespace

    from lucy.config import load_settings
    from lucy.metrics import MetricsExporter
    from lucy.service import mqtt

    settings = load_settings(**{"mqtt.status_interval_seconds": 10, "mqtt.status_heartbeat_seconds": 300,
                                "mqtt.client_id": "lucy"})
    bridge = mqtt.MqttBridge(settings.mqtt, SimpleNamespace(exporter=MetricsExporter()))
    now = [1000.0]
    monkeypatch.setattr(mqtt.time, "monotonic", lambda: now[0])

    def offer(at: float, **fields: Any) -> bool:
        now[0] = 1000.0 + at
        status = {"name": "cam", "state": "finished", "ingested_until": 60.0, "decode_fps": 20.0,
                  "caption": {"captions_per_second": 0.1, "queued": 0}, **fields}
        return bridge.offer_status("cam", status)

    assert offer(0)  # the first one
    assert not offer(5) and not offer(299, decode_fps=3.5, caption={"captions_per_second": 0.0, "queued": 0})
    assert offer(300)  # the heartbeat
    assert not offer(301, ingested_until=61.0)  # progress, within the interval: the next look says it
    assert offer(311, ingested_until=61.0)
    assert offer(312, ingested_until=61.0, state="stopped")  # a new state at once
    sent = []
    while not bridge._outbox.empty():
        sent.append(bridge._outbox.get_nowait())
    configs = [topic for topic, _, _ in sent if topic.startswith("homeassistant/")]
    assert configs == ["homeassistant/sensor/lucy/cam_state/config",
                       "homeassistant/binary_sensor/lucy/cam_alert/config"]
    assert [json.loads(p)["state"] for t, p, retain in sent if t == "lucy/cam/status" and retain] == [
        "finished", "finished", "finished", "stopped"]
    assert bridge.offer_status("cam", {"purged": True})
    cleared = [bridge._outbox.get_nowait() for _ in range(bridge._outbox.qsize())]
    assert sorted(t for t, p, retain in cleared if p == b"" and retain) == sorted(["lucy/cam/status", *configs])

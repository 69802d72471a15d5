"""Lucy on a cluster, end to end: ``lucy serve --cluster`` replicas over a three-node Ray cluster (simulated nodes
on this machine), PostgreSQL for memory and SeaweedFS for frames, all real servers started by the tests.

Covered: streams added on one replica are recorded by an owner actor and seen and answered on another; a node
killed mid-ingest (its owner is restarted elsewhere, takes the lease over and resumes: no frame lost or duplicated);
a question during the failover; PostgreSQL restarted and the object store briefly down mid-ingest.
"""

from __future__ import annotations

import json
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from lucy.config import load_settings
from lucy.memory.nodes import INGEST_ORIGIN
from lucy.memory.postgres_store import PostgresMemoryStore
from lucy.memory.watches import Alert
from lucy.synth import Overlay, write_video
from lucy.testing.postgres import PostgresServer
from lucy.testing.ray_cluster import LocalCluster
from lucy.testing.seaweedfs import ACCESS_KEY, BUCKET, SECRET_KEY
from lucy.testing.waiting import wait_for
from lucy.wiring import open_frames

VIDEO_SECONDS = 40
STORED_FPS = 2.0  # the live preset's finest rate: frames a whole run stores per media second

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[LocalCluster]:
    cluster = LocalCluster(ingest_nodes=2, per_node=4).start()  # before ray is imported: it reads its settings then
    import ray

    ray.init(address=cluster.address, namespace="lucy", log_to_driver=False)
    try:
        yield cluster
    finally:
        cluster.shutdown()


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cluster-videos")
    return write_video(root / "gate.mp4", duration=VIDEO_SECONDS, fps=10, width=320, height=180, seed=7,
                       overlays=[Overlay(4, 14, "GATE 7 OPEN", size=0.12), Overlay(26, 36, "PLATFORM 3", size=0.12)])


_PREFIXES = iter(range(1_000_000))


def cluster_sections(dsn: str, weed: Any, cluster: LocalCluster) -> dict[str, dict[str, Any]]:
    """The config sections of a replica: shared stores (a fresh S3 prefix), the cluster, short leases."""
    return {
        "memory": {"backend": "postgres", "postgres_dsn": dsn},
        "frames": {"backend": "s3", "s3_url": f"s3://{BUCKET}/cluster-{next(_PREFIXES)}", "s3_endpoint": weed.endpoint,
                   "s3_access_key_id": ACCESS_KEY, "s3_secret_access_key": SECRET_KEY, "s3_retry_seconds": 60.0},
        "cluster": {"address": cluster.address, "lease_seconds": 3.0, "reconcile_seconds": 0.5,
                    "auth_token": cluster.token},
    }


@pytest.fixture
def replicas(lucy_server: Callable[..., Any], postgres_dsn: str, weed: Any,
             ray_cluster: LocalCluster) -> Callable[..., list[Any]]:
    """``replicas(n, dsn=...)``: n ``lucy serve --cluster`` replicas sharing one database and one bucket prefix."""

    def make(n: int = 1, dsn: str | None = None) -> list[Any]:
        sections = cluster_sections(dsn or postgres_dsn, weed, ray_cluster)
        return [lucy_server(**sections) for _ in range(n)]

    return make


def _settings(server: Any) -> Any:
    c = server.config
    return load_settings(data=server.data, memory=c["memory"], frames=c["frames"], cluster=c["cluster"])


def _gone(actor: str) -> bool:
    import ray

    try:
        ray.get_actor(actor, namespace="lucy")
    except ValueError:
        return True
    return False


def _owner(stream: str) -> dict[str, Any]:
    import ray

    return ray.get(ray.get_actor(f"owner:{stream}", namespace="lucy").describe.remote(), timeout=30)


class Feed:
    """A replica's dashboard feed (``/v1/dashboard/events``), read in a thread: the node events it sent."""

    def __init__(self, server: Any) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        threading.Thread(target=self._read, args=(server.url,), daemon=True).start()
        wait_for(lambda: self.events, 30, "the feed's hello")

    def _read(self, url: str) -> None:
        kind = ""
        try:
            with httpx.stream("GET", f"{url}/v1/dashboard/events", timeout=None) as r:
                for line in r.iter_lines():
                    if line.startswith("event:"):
                        kind = line.split(":", 1)[1].strip()
                    elif line.startswith("data:"):
                        self.events.append((kind, json.loads(line.split(":", 1)[1])))
        except httpx.HTTPError:
            pass  # the replica stopped at the test's end

    def nodes(self) -> list[dict[str, Any]]:
        return [event for kind, event in self.events if kind == "node"]


def _status(server: Any, name: str) -> dict[str, Any] | None:
    r = httpx.get(f"{server.url}/v1/streams/{name}", timeout=30)
    return r.json() if r.status_code == 200 else None


def _check_whole(server: Any, name: str) -> tuple[int, int]:
    """Frames stored once each, in order, covering the whole video; the stream's coarse captions (not what questions
    wrote back) held once each and reaching its end. Their counts."""
    settings = _settings(server)
    store = open_frames(settings).open(name)
    times = store.times()
    assert np.all(np.diff(times) > 0), "frames stored twice or out of order"
    assert len(times) == int(VIDEO_SECONDS * STORED_FPS), "frames lost"
    memory = PostgresMemoryStore.for_settings(settings)
    try:
        coarse = [(n.start, n.end) for n in memory.nodes(name, level="coarse") if n.origin == INGEST_ORIGIN]
    finally:
        memory.close()
    assert coarse and len(coarse) == len(set(coarse)), f"coarse spans held twice: {coarse}"
    assert coarse[-1][1] == pytest.approx(VIDEO_SECONDS, abs=0.6)
    return len(times), len(coarse)


def test_a_stream_added_on_one_replica_is_recorded_once_and_answered_on_another(replicas, clip,
                                                                                  run_lucy) -> None:
    first, second = replicas(2)
    feeds = [Feed(first), Feed(second)]  # each replica's dashboard hears of each new node once
    r = httpx.post(f"{first.url}/v1/streams", json={"name": "gate", "source": str(clip), "realtime": True},
                   timeout=60)
    assert r.status_code == 201, r.text
    # The other replica follows the same owner. Paused while the owner records, it misses the owner's last reports
    # (the first replica lets the owner go at the run's end): it reads how the run went from the stores.
    wait_for(lambda: (_status(second, "gate") or {}).get("ingested_until", 0) > 2, 60,
             "the second replica to follow the stream's ingest")
    second.proc.send_signal(signal.SIGSTOP)
    try:
        first.wait_captioned("gate", timeout=240)
        wait_for(lambda: _gone("owner:gate"), 30, "the owner to be let go at the run's end")
    finally:
        second.proc.send_signal(signal.SIGCONT)
    status = second.wait_captioned("gate", timeout=60)
    for feed in feeds:
        wait_for(lambda f=feed: f.nodes(), 30, "the coarse caption on each replica's feed")
    time.sleep(1.0)
    assert [[(n["level"], n["start"], n["origin"]) for n in f.nodes()] for f in feeds] == \
        [[("coarse", 0.0, INGEST_ORIGIN)]] * 2
    assert status["state"] == "finished"
    # Recorded to its end, once: one epoch, and its owner gone (its ingest capacity free again).
    memory = PostgresMemoryStore.for_settings(_settings(first))
    try:
        epochs = memory.run(lambda c: c.execute("SELECT epoch FROM frame_segments WHERE stream = 'gate'").fetchall())
    finally:
        memory.close()
    assert epochs == [(1,)]
    assert _gone("owner:gate")
    _check_whole(first, "gate")
    with second.client() as c:
        answer = c.post("/v1/streams/gate/questions", json={"question": "What did the sign about the gate say?"})
        listed = [s["name"] for s in c.get("/v1/streams").json()["streams"]]
    assert answer.status_code == 200, answer.text
    assert "GATE 7" in answer.json()["answer"].upper()
    assert answer.json()["horizon"] == pytest.approx(VIDEO_SECONDS, abs=1.0)
    assert listed == ["gate"]
    # The CLI reads the same shared stores (no Ray needed to ask).
    asked = run_lucy("ask", "--config", str(first.workdir / "lucy.toml"), "--stream", "gate", "--json",
                     "What did the sign about the gate say?", timeout=120)
    assert asked.returncode == 0, asked.stderr
    assert "GATE 7" in json.loads(asked.stdout)["answer"].upper()
    # Started again on the second replica after it ended: the first follows the new run too.
    began = _status(first, "gate")["started_at"]
    assert httpx.post(f"{second.url}/v1/streams", json={"name": "gate", "source": str(clip)},
                      timeout=60).status_code == 201
    wait_for(lambda: (s := _status(first, "gate")) and s["started_at"] > began and s["state"] == "finished", 120,
             "the first replica to follow the new run to its end")
    # Removing it on the second replica stops the owner for good; the first one lets it go too.
    with second.client() as c:
        assert c.delete("/v1/streams/gate", params={"purge": "true"}).status_code == 200
    wait_for(lambda: _status(first, "gate") is None, 30, "the first replica to let the stream go")


def test_a_node_killed_mid_ingest_loses_and_duplicates_nothing(replicas, clip, ray_cluster) -> None:
    (server,) = replicas(1)
    r = httpx.post(f"{server.url}/v1/streams", json={"name": "dock", "source": str(clip), "realtime": True},
                   timeout=60)
    assert r.status_code == 201, r.text
    wait_for(lambda: (_status(server, "dock") or {}).get("ingested_until", 0) >= 8, 120, "ingest to get going")
    before = _owner("dock")
    node = ray_cluster.node_of(before["node"])
    assert node is not None, "the owner runs on an ingest node"
    answers: list[httpx.Response] = []

    def ask() -> None:  # a question during the failover: replicas read the shared stores, not the owner
        with server.client(120) as c:
            answers.append(c.post("/v1/streams/dock/questions", json={"question": "What did the sign say?"}))

    asker = threading.Thread(target=ask)
    killed = ray_cluster.kill_node(node)
    asker.start()
    from ray.exceptions import RayError

    after = wait_for(lambda: (o := _owner("dock"))["epoch"] > before["epoch"] and o, 60, "a new owner",
                     tolerate=(RayError,))  # while Ray restarts it, the owner is unavailable
    reowned = time.monotonic() - killed
    ray_cluster.add_node()  # spare capacity for the tests that follow
    asker.join(120)
    assert after["node"] != before["node"] and reowned < 30
    assert answers and answers[0].status_code == 200, answers[0].text if answers else "no answer"
    server.wait_captioned("dock", timeout=240)
    frames, _ = _check_whole(server, "dock")
    assert frames == VIDEO_SECONDS * STORED_FPS


def test_postgres_restarted_and_object_store_down_mid_ingest_lose_nothing(replicas, clip, weed) -> None:
    root = Path(tempfile.mkdtemp(prefix="lucy-pg-restart-"))
    database = PostgresServer(root)
    database.start()
    try:
        (server,) = replicas(1, dsn=database.create_database())
        r = httpx.post(f"{server.url}/v1/streams", json={"name": "yard", "source": str(clip), "realtime": True},
                       timeout=60)
        assert r.status_code == 201, r.text
        wait_for(lambda: (_status(server, "yard") or {}).get("ingested_until", 0) >= 6, 120, "ingest to get going")
        database.stop()
        time.sleep(2)
        database.start()
        wait_for(lambda: (_status(server, "yard") or {}).get("ingested_until", 0) >= 20, 120, "ingest to go on")
        weed.stop()
        time.sleep(3)
        weed.start()
        server.wait_captioned("yard", timeout=300)
        _check_whole(server, "yard")
    finally:
        database.stop()


@pytest.fixture
def webhook() -> Iterator[tuple[list[dict[str, Any]], str]]:
    """A webhook receiver on loopback: the alerts it was sent, and its URL."""
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0)))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield received, f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


def test_each_alert_reaches_its_webhook_once_whichever_replica_delivers(lucy_server, postgres_dsn, weed, ray_cluster,
                                                                       clip, webhook) -> None:
    received, url = webhook
    sections = cluster_sections(postgres_dsn, weed, ray_cluster)
    sections["alerts"] = {"poll_seconds": 0.1}
    replicas = [lucy_server(**sections) for _ in range(2)]
    with replicas[0].client(60) as c:
        assert c.post("/v1/streams", json={"name": "hall", "source": str(clip)}).status_code == 201
        watch = c.post("/v1/streams/hall/watches", json={"question": "Gate open?", "webhook_url": url})
    assert watch.status_code == 201, watch.text
    memory = PostgresMemoryStore(postgres_dsn)

    def alert(t: float) -> Alert:
        return memory.add_alert(Alert(id=None, watch_id=watch.json()["id"], stream="hall", question="Gate open?",
                                      start=t, end=t + 10, reason="seen", frame_time=t + 5, level="coarse",
                                      created=time.time(), event_end=t + 10))

    try:
        first = alert(0.0)
        wait_for(lambda: received, 30, "the alert at the webhook")
        time.sleep(2.0)  # time enough for a second replica's delivery, were there one
        assert [a["id"] for a in received] == [first.id]
        # The replica that delivers dies; the other takes the duty over once its lease runs out.
        holder = memory.run(lambda c: c.execute(
            "SELECT owner FROM cluster_leases WHERE stream = 'duty:delivery'").fetchone())[0]
        delivering = next(r for r in replicas if f":{r.proc.pid}:" in holder)
        delivering.stop(signal.SIGKILL)
        second = alert(20.0)
        wait_for(lambda: len(received) >= 2, 60, "the next alert from the other replica")
        time.sleep(1.0)
        assert [a["id"] for a in received] == [first.id, second.id]
    finally:
        memory.close()


def test_a_wrong_cluster_address_is_one_clear_line(run_lucy, postgres_dsn, weed, tmp_path) -> None:
    from lucy.testing.waiting import free_port

    config = tmp_path / "cluster.toml"  # not ./lucy.toml, which every command here would read
    config.write_text(f'[memory]\nbackend = "postgres"\npostgres_dsn = "{postgres_dsn}"\n'
                      f'[frames]\nbackend = "s3"\ns3_url = "s3://{BUCKET}/nowhere"\ns3_endpoint = "{weed.endpoint}"\n')
    started = time.monotonic()
    done = run_lucy("serve", "--config", str(config), "--data", str(tmp_path / "data"),
                    "--cluster", f"127.0.0.1:{free_port()}", timeout=60)
    assert done.returncode == 1 and time.monotonic() - started < 30
    assert "cannot reach the Ray cluster's head" in done.stderr and "Traceback" not in done.stderr
    done = run_lucy("serve", "--data", str(tmp_path / "data"), "--cluster", "head.local:6379", timeout=60)
    assert done.returncode != 0 and 'memory.backend = "postgres"' in done.stderr  # a cluster needs shared stores


def test_the_harness_listens_on_loopback_only(ray_cluster: LocalCluster) -> None:
    import psutil

    mine = {p.pid for p in psutil.Process().children(recursive=True)}
    listening = [c for c in psutil.net_connections(kind="inet")
                 if c.status == psutil.CONN_LISTEN and c.pid in mine]
    assert len(listening) >= 6, listening  # GCS, raylets, object managers, agents of three nodes
    assert all(_loopback(c.laddr.ip) for c in listening), listening


def _loopback(ip: str) -> bool:
    import ipaddress

    address = ipaddress.ip_address(ip)
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


_JOIN = """
import sys
from lucy.cluster.manager import connect
from lucy.config import load_settings
from lucy.errors import LucyError

settings = load_settings(memory={"backend": "postgres", "postgres_dsn": "postgresql://lucy@127.0.0.1/lucy"},
                         frames={"backend": "s3", "s3_url": "s3://lucy/none"},
                         cluster={"address": sys.argv[1], "auth_token": sys.argv[2]})
try:
    connect(settings)
except LucyError as err:
    print("refused:", err)
    sys.exit(1)
import ray
print("ingest:", ray.cluster_resources().get("ingest"))
"""


def test_a_replica_joins_with_the_configured_token_and_is_refused_without_it(ray_cluster: LocalCluster) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}  # only cluster.auth_token counts
    joined = subprocess.run([sys.executable, "-c", _JOIN, ray_cluster.address, ray_cluster.token], env=env,
                            capture_output=True, text=True, timeout=120)
    assert joined.returncode == 0 and "ingest: 8.0" in joined.stdout, joined.stderr[-2000:]
    wrong = "0" * 64
    refused = subprocess.run([sys.executable, "-c", _JOIN, ray_cluster.address, wrong], env=env,
                             capture_output=True, text=True, timeout=180)
    assert refused.returncode == 1 and "refused: cannot join the Ray cluster" in refused.stdout, refused.stdout
    assert wrong not in refused.stdout + refused.stderr

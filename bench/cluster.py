"""Cluster benchmark (issue 14): Lucy on three simulated Ray nodes against the single-machine default.

Set-up (all real, on loopback, stopped at the end even on error): a PostgreSQL server (memory, leases, the frame
segments' catalogue), SeaweedFS's ``weed mini`` (frames, as S3), a Ray cluster of a head and three ingest nodes
(``lucy.testing.ray_cluster``: real raylets, shortened health checks) with room for six owners each, and one
``lucy serve --cluster ADDRESS`` replica (a subprocess, driven over HTTP). Owners reserve no CPU
(``cluster.owner_cpus = 0``: three one-CPU nodes on a two-core machine would otherwise not hold six owners once one
node is gone). Leases last 3 s. Embedded backends (``pixels`` captioner, embedded reasoner), 320x180 stored frames at
the ``live`` preset (2 stored frames per media second). Each stream is a generated video of its own with a sign on it
that the questions ask about.

Phase 1, throughput, the same in both set-ups: the streams (videos of ``--throughput-seconds``) added at once,
``realtime: false`` (as fast as they go), on a plain ``lucy serve`` (SQLite and local Zarr: the single-machine
default) and then on the cluster; then the same fixed batch of questions (two clients) on each. Printed: media seconds
ingested per wall second, end to end (from the POST to the last stream ingested to its end: worker or owner start-up
included) and after each stream's first frame, seconds until all is captioned, questions per second and latency; each
as the ratio cluster / single machine. Progress is read from the API, as a user sees it: a cluster's reports reach it
up to about a second later (the owner reports every 0.5 s, the replica polls every 0.5 s), which weighs on short
runs. The questions repeat per stream (one per stream asks something new; later ones are answered from the memory
the first wrote back), so the rate says more about the first, deep, questions than about the cheap ones.

Phase 2, failover, on the cluster: the streams added again, ``realtime: true``; once each has ingested
``--kill-after`` media seconds, the node holding most owners is killed (no graceful shutdown) while two clients ask
questions round the streams. Printed, with targets:

- seconds from the kill until every moved stream is owned again (a new lease epoch in PostgreSQL), and until each is
  ingesting again (its new epoch's frame segment holds a frame) (target: owned again < 30 s, the end-to-end test's
  bound);
- per stream, from the stores once all is captioned: frames lost = duration x 2 - frames stored (target 0), frames
  duplicated = stored times that do not increase (target 0), the largest gap between stored times, coarse
  ingest-origin memory nodes held twice (target 0) and whether they reach the end, and the segment rows (one per
  owner epoch) of ``frame_segments``;
- questions asked during the failover window (kill until every stream ingests again) and after it: answered, failed
  (target 0), right (the sign's words in the answer) and latency.

Phase 3, growth: ``--soak`` more questions round the same streams; the replica process's open descriptors, RSS and
threads after a tenth of them (the warm-up), half and all (target: end within 5% of after warm-up).

Ray's own logs (raylets report a killed node loudly on stderr) go to ``bench/out/cluster-ray.log``; each
``lucy serve``'s to its ``serve.log`` in the run's temporary directory (its tail is printed if it fails). Figures are
written to ``bench/out/cluster.json``. About 4 minutes on a two-core machine (plus the videos' generation the first
time); ``--quick`` (3 streams of 30 s, 60 s for throughput) under 2.

    .venv/bin/python bench/cluster.py [--quick] [--streams 6] [--seconds 60] [--throughput-seconds 180]
                                      [--kill-after 15] [--questions 24] [--nodes 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx
import numpy as np

from lucy.config import load_settings
from lucy.memory.nodes import INGEST_ORIGIN
from lucy.memory.postgres_store import PostgresMemoryStore
from lucy.synth import PALETTE, Overlay, Scene, cached_video
from lucy.testing.postgres import PostgresServer
from lucy.testing.ray_cluster import LocalCluster
from lucy.testing.seaweedfs import ACCESS_KEY, BUCKET, SECRET_KEY, Weed
from lucy.testing.waiting import free_port, stop_process, wait_for
from lucy.wiring import open_frames

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
STORED_FPS = 2.0  # the live preset's finest rate: frames a whole run stores per media second
LEASE_SECONDS = 3.0
REOWN_TARGET_SECONDS = 30.0
GROWTH_TARGET = 0.05  # the replica's descriptors, RSS and threads: end within 5% of after warm-up
SIGNS = ["GATE 7 OPEN", "PLATFORM 3 CLOSED", "DOCK 12 READY", "BAY 5 FULL", "EXIT 9 BLOCKED", "LANE 4 CLEAR",
         "PIER 8 SHUT", "ZONE 6 SAFE"]
COLOURS = ["blue", "green", "purple", "orange", "red", "yellow"]


@dataclass(frozen=True)
class Video:
    path: Path
    seconds: int
    sign: str

    @property
    def question(self) -> str:
        # Naming what the sign is about: the embedded (lexical) reasoner finds nothing for "What did the sign say?"
        return f"What did the sign about the {self.sign.split()[0].lower()} say?"

    def right(self, answer: str) -> bool:
        """The answer names the sign (its first two words, e.g. GATE 7)."""
        return " ".join(self.sign.split()[:2]) in answer.upper()


def make_videos(count: int, seconds: int) -> list[Video]:
    """One video per stream, each with a sign of its own shown from 20% to 50% of it."""
    videos = []
    for k in range(count):
        sign = SIGNS[k % len(SIGNS)]
        colours = [PALETTE.get(COLOURS[k % len(COLOURS)], PALETTE["blue"]), PALETTE["blue"]]
        scenes = [Scene(0, seconds / 2, colours[0]), Scene(seconds / 2, seconds, colours[1])]
        path = cached_video(OUT / f"cluster-{k}-{seconds}s.mp4", duration=seconds, fps=10, width=320, height=180,
                            seed=k, scenes=scenes, overlays=[Overlay(int(seconds * .2), int(seconds * .5), sign,
                                                                     size=0.12)])
        videos.append(Video(path, seconds, sign))
    return videos


# ------------------------------------------------------------------------------------------------ lucy serve


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | Path):
        return json.dumps(str(value))
    return repr(value)


def write_config(path: Path, config: dict[str, Any]) -> Path:
    """A lucy.toml from a nested dict (top-level keys first, then one table per section)."""
    lines = [f"{k} = {_toml(v)}" for k, v in config.items() if not isinstance(v, dict)]
    for section, values in config.items():
        if isinstance(values, dict):
            lines += [f"\n[{section}]", *(f"{k} = {_toml(v)}" for k, v in values.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class Replica:
    """One ``lucy serve`` in a child process, its output in ``workdir/serve.log``."""

    workdir: Path
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Replica:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config: dict[str, Any] = {
            "data": str(self.workdir / "data"), "preset": "live",
            "ingest": {"frame_width": 320, "frame_height": 180, "commit_every_seconds": 0.5},
            "captioner": {"backend": "pixels", "max_in_flight": 2},
            "service": {"port": self.port, "stats_interval_seconds": 0.5},
        }
        for section, values in self.sections.items():
            config.setdefault(section, {}).update(values)
        path = write_config(self.workdir / "lucy.toml", config)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LUCY_")}
        with open(self.workdir / "serve.log", "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "lucy", "serve", "--config", str(path), *self.args],
                                         stdout=log, stderr=log, env=env, cwd=self.workdir)

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise SystemExit(f"lucy serve exited with {self.proc.returncode}:\n{self.log()}")
            return httpx.get(f"{self.url}/readyz", timeout=5).status_code == 200

        wait_for(ready, 120, "lucy serve to be ready", interval=0.2, tolerate=(httpx.HTTPError,))
        return self

    def log(self, chars: int = 3000) -> str:
        path = self.workdir / "serve.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, timeout=60)

    def client(self, timeout: float = 120.0) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout)

    def add(self, name: str, video: Video, *, realtime: bool) -> None:
        r = httpx.post(f"{self.url}/v1/streams", json={"name": name, "source": str(video.path), "realtime": realtime},
                       timeout=60)
        if r.status_code != 201:
            raise SystemExit(f"adding stream {name} failed: {r.status_code} {r.text}")

    def statuses(self, names: list[str]) -> dict[str, dict[str, Any]]:
        with self.client(30) as c:
            out = {}
            for name in names:
                r = c.get(f"/v1/streams/{name}")
                out[name] = r.json() if r.status_code == 200 else {}
                if out[name].get("state") == "failed":
                    raise SystemExit(f"stream {name} failed: {out[name].get('error')}\n{self.log()}")
            return out

    def wait_captioned(self, names: list[str], timeout: float) -> None:
        def done() -> bool:
            return all(s.get("state") == "finished" and s["ingested_until"] > 0
                       and s["captioned_until"] >= s["ingested_until"] - 1e-6 for s in self.statuses(names).values())

        wait_for(done, timeout, "every stream ingested and captioned", interval=0.5, tolerate=(httpx.HTTPError,))


# ------------------------------------------------------------------------------------------------ questions


@dataclass
class Asked:
    began: float  # monotonic
    seconds: float
    stream: str
    ok: bool
    right: bool
    detail: str = ""  # the answer, or what went wrong


def ask(client: httpx.Client, stream: str, video: Video) -> Asked:
    began = time.monotonic()
    try:
        r = client.post(f"/v1/streams/{stream}/questions", json={"question": video.question})
        ok = r.status_code == 200
        detail = r.json()["answer"] if ok else f"{r.status_code} {r.text[:200]}"
        right = ok and video.right(detail)
    except httpx.HTTPError as err:
        ok, right, detail = False, False, f"{type(err).__name__}: {err}"
    return Asked(began, time.monotonic() - began, stream, ok, right, detail)


def question_batch(replica: Replica, streams: dict[str, Video], count: int, clients: int = 2) -> dict[str, Any]:
    """``count`` questions round the streams from ``clients`` clients at once; rate and latency."""
    names = list(streams)
    jobs = iter(range(count))
    lock = threading.Lock()
    asked: list[Asked] = []

    def client_loop() -> None:
        with replica.client() as c:
            while True:
                with lock:
                    i = next(jobs, None)
                if i is None:
                    return
                result = ask(c, names[i % len(names)], streams[names[i % len(names)]])
                with lock:
                    asked.append(result)

    began = time.monotonic()
    threads = [threading.Thread(target=client_loop) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - began
    return {"questions": count, "wall_s": wall, "per_s": count / wall, **summarise(asked)}


def summarise(asked: list[Asked]) -> dict[str, Any]:
    latencies = [a.seconds for a in asked if a.ok]
    return {"asked": len(asked), "answered": sum(a.ok for a in asked), "failed": sum(not a.ok for a in asked),
            "right": sum(a.right for a in asked),
            "p50_s": float(np.percentile(latencies, 50)) if latencies else float("nan"),
            "p95_s": float(np.percentile(latencies, 95)) if latencies else float("nan"),
            "failures": [f"{a.stream}: {a.detail}" for a in asked if not a.ok][:5],
            "sample": next((f"{a.stream}: {a.detail}" for a in asked if a.ok), None)}


class Asker:
    """Clients asking round the streams until stopped (the failover phase)."""

    def __init__(self, replica: Replica, streams: dict[str, Video], clients: int = 2) -> None:
        self.replica, self.streams = replica, streams
        self.asked: list[Asked] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._counter = iter(range(1 << 30))
        self._threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(clients)]

    def __enter__(self) -> Self:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(180)

    def _loop(self) -> None:
        names = list(self.streams)
        with self.replica.client() as c:
            while not self._stop.is_set():
                with self._lock:
                    i = next(self._counter)
                result = ask(c, names[i % len(names)], self.streams[names[i % len(names)]])
                with self._lock:
                    self.asked.append(result)


# ------------------------------------------------------------------------------------------------ phase 1


def ingest_throughput(replica: Replica, streams: dict[str, Video], timeout: float) -> dict[str, Any]:
    """Add every stream at once, as fast as they go; when each got its first frame and reached its end."""
    names = list(streams)
    media = sum(v.seconds for v in streams.values())
    began = time.monotonic()
    for name, video in streams.items():
        replica.add(name, video, realtime=False)
    first: dict[str, float] = {}
    ingested: dict[str, float] = {}
    deadline = began + timeout
    while len(ingested) < len(names):
        if time.monotonic() > deadline:
            raise SystemExit(f"ingest did not end within {timeout:g} s\n{replica.log()}")
        now = time.monotonic()
        for name, s in replica.statuses(names).items():
            if s.get("ingested_until", 0) > 0:
                first.setdefault(name, now)
            if s.get("ingested_until", 0) >= streams[name].seconds - 1.0 or s.get("state") == "finished":
                ingested.setdefault(name, now)
        time.sleep(0.2)
    end = max(ingested.values())
    replica.wait_captioned(names, timeout)
    captioned = time.monotonic() - began
    # After the first frame: each stream's media over its own time from first frame to end, summed.
    steady = sum(streams[n].seconds / max(ingested[n] - first.get(n, ingested[n]), 0.2) for n in names)
    return {"media_s": media, "ingest_wall_s": end - began, "media_s_per_s": media / (end - began),
            "first_frame_s": max(first.get(n, end) for n in names) - began,
            "media_s_per_s_after_first_frame": steady, "captioned_wall_s": captioned}


# ------------------------------------------------------------------------------------------------ phase 2


def lease_rows(db: PostgresMemoryStore, names: list[str]) -> tuple[dict[str, int], dict[str, dict[int, int]]]:
    """Each stream's lease epoch, and its frame segments' committed frames by epoch."""
    def work(c: Any) -> tuple[list[Any], list[Any]]:
        leases = c.execute("SELECT stream, epoch FROM cluster_leases WHERE stream = ANY(%s)", (names,)).fetchall()
        segs = c.execute("SELECT stream, epoch, frames FROM frame_segments WHERE stream = ANY(%s)", (names,)).fetchall()
        return leases, segs

    leases, segs = db.run(work)
    frames: dict[str, dict[int, int]] = {n: {} for n in names}
    for stream, epoch, count in segs:
        frames[stream][int(epoch)] = int(count)
    return {s: int(e) for s, e in leases}, frames


def owners(names: list[str]) -> dict[str, dict[str, Any]]:
    import ray

    return {n: ray.get(ray.get_actor(f"owner:{n}", namespace="lucy").describe.remote(), timeout=30) for n in names}


def failover(replica: Replica, cluster: LocalCluster, db: PostgresMemoryStore, streams: dict[str, Video],
             kill_after: float) -> dict[str, Any]:
    from ray.exceptions import RayError

    names = list(streams)
    for name, video in streams.items():
        replica.add(name, video, realtime=True)
    wait_for(lambda: all(s.get("ingested_until", 0) >= kill_after for s in replica.statuses(names).values()),
             kill_after * 4 + 120, f"{kill_after:g} s ingested on every stream", interval=0.25,
             tolerate=(httpx.HTTPError,))
    before = owners(names)
    by_node = Counter(o["node"] for o in before.values())
    victim, held = by_node.most_common(1)[0]
    moved = sorted(n for n, o in before.items() if o["node"] == victim)
    epochs_before, _ = lease_rows(db, names)
    at_kill = {n: s["ingested_until"] for n, s in replica.statuses(moved).items()}
    say(f"  owners per node: {sorted(by_node.values(), reverse=True)}; killing the node with {held} "
        f"({', '.join(moved)})")
    node = cluster.node_of(victim)
    if node is None:
        raise SystemExit("the owners' node is not one of the simulated ingest nodes")
    with Asker(replica, streams) as asker:
        time.sleep(1.0)  # a few questions before the kill, as a reference
        killed = cluster.kill_node(node)
        reowned: dict[str, float] = {}
        resumed: dict[str, float] = {}
        deadline = killed + 180
        lowest = dict(at_kill)  # what the replica shows of the moved streams meanwhile
        states: Counter[str] = Counter()
        polls = 0
        while len(resumed) < len(moved) and time.monotonic() < deadline:
            if polls % 5 == 0:
                with contextlib.suppress(httpx.HTTPError):
                    for n, st in replica.statuses(moved).items():
                        lowest[n] = min(lowest[n], st.get("ingested_until", 0.0))
                        states[st.get("state", "gone")] += 1
            polls += 1
            epochs, frames = lease_rows(db, moved)
            now = time.monotonic() - killed
            for n in moved:
                if epochs.get(n, 0) > epochs_before[n]:
                    reowned.setdefault(n, now)
                if any(e > epochs_before[n] and c > 0 for e, c in frames[n].items()):
                    resumed.setdefault(n, now)
            time.sleep(0.05)
        window_end = killed + max(resumed.values(), default=180)
        say(f"  every moved stream owned again after {max(reowned.values(), default=float('nan')):.2f} s, "
            f"ingesting again after {max(resumed.values(), default=float('nan')):.2f} s")
        after = wait_for(lambda: owners(names), 60, "every owner to answer", tolerate=(RayError,))
        replica.wait_captioned(names, max(s.seconds for s in streams.values()) * 4 + 240)
    asked = asker.asked
    phases = {"before the kill": [a for a in asked if a.began < killed],
              "during failover": [a for a in asked if killed <= a.began < window_end],
              "after failover": [a for a in asked if a.began >= window_end]}
    return {"killed_node_owners": held, "moved": moved, "reowned_s": reowned, "resumed_s": resumed,
            "owned_again_s": max(reowned.values(), default=None) if len(reowned) == len(moved) else None,
            "ingesting_again_s": max(resumed.values(), default=None) if len(resumed) == len(moved) else None,
            "nodes_after": {n: after[n]["node"] != victim for n in names},
            "replica_view": {"states_seen": dict(states),
                             "ingested_until_at_kill": at_kill, "lowest_ingested_until_shown": lowest},
            "owner_epochs": {n: after[n]["epoch"] for n in names},
            "questions": {k: summarise(v) for k, v in phases.items()}}


def verify(settings: Any, streams: dict[str, Video]) -> dict[str, dict[str, Any]]:
    """From the shared stores: frames lost and duplicated, coarse nodes held twice, the segment rows."""
    frames = open_frames(settings)
    memory = PostgresMemoryStore.for_settings(settings, migrate=False)
    out = {}
    try:
        for name, video in streams.items():
            times = frames.open(name).times()
            expected = int(video.seconds * STORED_FPS)
            steps = np.diff(times)
            made = [(n.level, n.start, n.end) for n in memory.nodes(name, origin=INGEST_ORIGIN)]
            coarse = [(start, end) for level, start, end in made if level == "coarse"]
            segments = memory.run(lambda c, n=name: c.execute(
                "SELECT epoch, first_index, frames, first_time, last_time FROM frame_segments WHERE stream = %s "
                "ORDER BY epoch", (n,)).fetchall())
            out[name] = {"expected": expected, "stored": len(times), "lost": max(expected - len(times), 0),
                         "extra": max(len(times) - expected, 0), "duplicated": int(np.sum(steps <= 0)),
                         "largest_gap_s": float(steps.max()) if len(steps) else float("nan"),
                         "ingest_nodes": len(made), "nodes_twice": len(made) - len(set(made)), "coarse": len(coarse),
                         "coarse_reaches_end": bool(coarse) and abs(coarse[-1][1] - video.seconds) <= 0.6,
                         "segments": [[int(e), int(i), int(f), ft, lt] for e, i, f, ft, lt in segments]}
    finally:
        memory.close()
    return out


# ------------------------------------------------------------------------------------------------ the run


def say(*args: object) -> None:
    """A progress line, to the terminal even while Ray's output goes to its log (:func:`ray_output_to`)."""
    print(*args, file=sys.__stdout__, flush=True)


@contextlib.contextmanager
def ray_output_to(path: Path) -> Iterator[None]:
    """Send Ray's output to ``path`` for a while: this process's stderr (and so its children's, the raylets') and
    ``sys.stdout``, where Ray's driver prints the cluster's error messages (a dead node) whatever ``log_to_driver``."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "a") as log:
        os.dup2(log.fileno(), 2)
        sys.stdout = log
        try:
            yield
        finally:
            sys.stdout = sys.__stdout__
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


class Stack:
    """Things to stop at the end, last started first, each whatever the others do."""

    def __init__(self) -> None:
        self._stops: list[tuple[str, Callable[[], object]]] = []

    def push(self, what: str, stop: Callable[[], object]) -> None:
        self._stops.append((what, stop))

    def close(self) -> None:
        for what, stop in reversed(self._stops):
            try:
                stop()
            except Exception as err:  # noqa: BLE001  (stopping the rest matters more)
                say(f"  stopping {what} failed: {err!r}")


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def run(args: argparse.Namespace, videos: list[Video], tmp: Path, stack: Stack) -> dict[str, Any]:
    figures: dict[str, Any] = {"streams": args.streams, "seconds": args.seconds, "kill_after": args.kill_after,
                               "throughput_seconds": args.throughput_seconds,
                               "ingest_nodes": args.nodes, "questions": args.questions, "soak": args.soak}
    tp = {f"tp-{k}": v for k, v in enumerate(make_videos(args.streams, args.throughput_seconds))}
    timeout = max(args.seconds, args.throughput_seconds) * 4 + 240

    # Phase 1a: the single-machine default (nothing of the cluster running yet).
    say(f"phase 1: {args.streams} streams of {args.throughput_seconds} s, realtime false, "
        f"then {args.questions} questions")
    single = Replica(tmp / "single")
    stack.push("single lucy serve", single.stop)
    single.start()
    figures["single"] = {"ingest": ingest_throughput(single, tp, timeout),
                         "questions": question_batch(single, tp, args.questions)}
    single.stop()
    say("  single machine done")

    # The cluster: PostgreSQL, S3, Ray (a head and ingest nodes).
    pg_root = Path(tempfile.mkdtemp(prefix="lucy-bench-pg-"))  # made by mkdtemp: `nobody` can own and reach it
    stack.push("PostgreSQL's directory", lambda: shutil.rmtree(pg_root, ignore_errors=True))
    pg = PostgresServer(pg_root)
    pg.start()
    stack.push("PostgreSQL", pg.stop)
    (tmp / "weed").mkdir()
    weed = Weed(tmp / "weed")
    weed.start()
    stack.push("weed mini", weed.stop)
    return cluster_phases(args, tmp, stack, pg, weed, tp, videos, figures, timeout)


def cluster_phases(args: argparse.Namespace, tmp: Path, stack: Stack, pg: PostgresServer, weed: Weed,
                   tp: dict[str, Video], videos: list[Video], figures: dict[str, Any], timeout: float,
                   ) -> dict[str, Any]:
    began = time.monotonic()
    cluster = LocalCluster(ingest_nodes=args.nodes, per_node=args.streams, cpus_per_node=1)
    stack.push("the Ray cluster", cluster.shutdown)
    cluster.start()  # before ray is imported: it reads its node address and token from the environment then
    import ray

    ray.init(address=cluster.address, namespace="lucy", log_to_driver=False)
    say(f"  Ray cluster: a head and {args.nodes} ingest nodes up in {time.monotonic() - began:.1f} s")
    dsn = pg.create_database()
    sections = {
        "memory": {"backend": "postgres", "postgres_dsn": dsn},
        "frames": {"backend": "s3", "s3_url": f"s3://{BUCKET}/bench", "s3_endpoint": weed.endpoint,
                   "s3_access_key_id": ACCESS_KEY, "s3_secret_access_key": SECRET_KEY, "s3_retry_seconds": 60.0},
        "cluster": {"lease_seconds": LEASE_SECONDS, "reconcile_seconds": 0.5, "owner_cpus": 0.0},
    }
    replica = Replica(tmp / "replica", sections, ["--cluster", cluster.address])
    stack.push("the cluster's lucy serve", replica.stop)
    replica.start()

    # Phase 1b: the same on the cluster.
    figures["cluster"] = {"ingest": ingest_throughput(replica, tp, timeout),
                          "questions": question_batch(replica, tp, args.questions)}
    with replica.client() as c:  # their owners would hold a unit of `ingest` each
        for name in tp:
            c.delete(f"/v1/streams/{name}", params={"purge": "true"}).raise_for_status()
    say("  cluster done")

    # Phase 2: failover.
    say(f"phase 2: {args.streams} streams, realtime true; the busiest node killed at {args.kill_after:g} s")
    fo = {f"fo-{k}": v for k, v in enumerate(videos)}
    db = PostgresMemoryStore(dsn, migrate=False)
    try:
        figures["failover"] = failover(replica, cluster, db, fo, args.kill_after)
    finally:
        db.close()
    settings = load_settings(data=tmp / "verify", memory=sections["memory"], frames=sections["frames"],
                             cluster={"address": cluster.address})
    figures["stores"] = verify(settings, fo)

    # Phase 3: growth of the replica's process over many questions.
    say(f"phase 3: {args.soak} questions; the replica's descriptors, memory and threads")
    figures["growth"] = growth(replica, fo, args.soak)
    return figures


def growth(replica: Replica, streams: dict[str, Video], count: int) -> dict[str, dict[str, float]]:
    """The replica's open descriptors, RSS and threads after a tenth of ``count`` questions (the warm-up), half of
    them, and all."""
    import psutil

    assert replica.proc is not None
    process = psutil.Process(replica.proc.pid)
    samples: dict[str, dict[str, float]] = {}
    done = 0
    for label, upto in (("after warm-up", count // 10), ("middle", count // 2), ("end", count)):
        question_batch(replica, streams, upto - done)
        done = upto
        samples[label] = {"fds": process.num_fds(), "rss_mb": process.memory_info().rss / 2**20,
                          "threads": process.num_threads()}
    return samples


# ------------------------------------------------------------------------------------------------ the report


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def report(f: dict[str, Any]) -> bool:
    s, c = f["single"], f["cluster"]
    print(f"\nthroughput ({f['streams']} streams x {f['throughput_seconds']} s, realtime false; "
          f"{f['questions']} questions from 2 clients)")
    print(f"  {'':<40}{'single':>10}{'cluster':>10}{'cluster/single':>16}")
    rows = [("ingest media s / wall s, end to end", "ingest", "media_s_per_s", True),
            ("ingest media s / s, after first frame", "ingest", "media_s_per_s_after_first_frame", True),
            ("seconds to every stream's first frame", "ingest", "first_frame_s", False),
            ("seconds until all captioned", "ingest", "captioned_wall_s", False),
            ("questions / s", "questions", "per_s", True),
            ("question latency p50 s", "questions", "p50_s", False),
            ("question latency p95 s", "questions", "p95_s", False)]
    for label, group, key, _ in rows:
        a, b = s[group][key], c[group][key]
        print(f"  {label:<40}{a:>10.2f}{b:>10.2f}{ratio(b, a):>16.2f}")
    for name, q in (("single", s["questions"]), ("cluster", c["questions"])):
        print(f"  {name}: {q['answered']}/{q['asked']} answered, {q['right']} right; e.g. {q['sample']}"
              + "".join(f"\n    failed: {x}" for x in q["failures"]))

    fo = f["failover"]
    print(f"\nfailover (kill after {f['kill_after']:g} s ingested; the killed node held {fo['killed_node_owners']} "
          f"owner(s): {', '.join(fo['moved'])})")
    for n in fo["moved"]:
        print(f"  {n}: owned again after {fo['reowned_s'].get(n, float('nan')):.2f} s, ingesting again after "
              f"{fo['resumed_s'].get(n, float('nan')):.2f} s")
    owned, resumed = fo["owned_again_s"], fo["ingesting_again_s"]
    ok_owned = owned is not None and owned < REOWN_TARGET_SECONDS
    print(f"  every stream owned again after {owned if owned is not None else float('nan'):.2f} s "
          f"(target < {REOWN_TARGET_SECONDS:g} s) {verdict(ok_owned)}; ingesting again after "
          f"{resumed if resumed is not None else float('nan'):.2f} s")
    moved_off = all(fo["nodes_after"].values())
    print(f"  owners after: none on the killed node {verdict(moved_off)}; epochs {fo['owner_epochs']}")
    view = fo["replica_view"]
    went_back = {n: (round(view["ingested_until_at_kill"][n], 1), round(v, 1))
                 for n, v in view["lowest_ingested_until_shown"].items() if v < view["ingested_until_at_kill"][n]}
    print(f"  the replica's view of the moved streams meanwhile: states {view['states_seen']}; ingested_until shown "
          f"lower than at the kill (at kill, lowest): {went_back or 'none'}")
    print(f"\n  {'questions':<18}{'asked':>7}{'answered':>10}{'failed':>8}{'right':>7}{'p50 s':>8}{'p95 s':>8}")
    for phase, q in fo["questions"].items():
        print(f"  {phase:<18}{q['asked']:>7}{q['answered']:>10}{q['failed']:>8}{q['right']:>7}{q['p50_s']:>8.2f}"
              f"{q['p95_s']:>8.2f}" + "".join(f"\n    failed: {x}" for x in q["failures"]))
    failed = sum(q["failed"] for q in fo["questions"].values())
    during = fo["questions"]["during failover"]
    print(f"  failed questions: {failed} (target 0) {verdict(failed == 0)}; answered during failover: "
          f"{during['answered']}")

    st = f["stores"]
    print(f"\n  {'stream':<8}{'expected':>9}{'stored':>8}{'lost':>6}{'dup':>5}{'max gap s':>10}{'nodes':>7}"
          f"{'twice':>7}{'coarse to end':>15}  segments (epoch, first index, frames, first t, last t)")
    for name, v in st.items():
        segs = "; ".join(f"{e},{i},{n},{ft if ft is None else round(ft, 1)},{lt if lt is None else round(lt, 1)}"
                         for e, i, n, ft, lt in v["segments"])
        print(f"  {name:<8}{v['expected']:>9}{v['stored']:>8}{v['lost']:>6}{v['duplicated']:>5}"
              f"{v['largest_gap_s']:>10.2f}{v['ingest_nodes']:>7}{v['nodes_twice']:>7}{v['coarse_reaches_end']!s:>15}"
              f"  {segs}")
    lost = sum(v["lost"] for v in st.values())
    dup = sum(v["duplicated"] + v["extra"] for v in st.values())
    twice = sum(v["nodes_twice"] for v in st.values())
    ends = all(v["coarse_reaches_end"] for v in st.values())
    print(f"  frames lost: {lost} (target 0) {verdict(lost == 0)}; frames duplicated: {dup} (target 0) "
          f"{verdict(dup == 0)}; memory nodes (ingest-made, any level) duplicated: {twice} (target 0) "
          f"{verdict(twice == 0)}; coarse memory "
          f"reaches every stream's end {verdict(ends)}")

    g = f["growth"]
    first, end = g["after warm-up"], g["end"]
    print(f"\ngrowth of the replica over {f['soak']} questions "
          f"(target: end within {GROWTH_TARGET:.0%} of after warm-up)")
    print(f"  {'':<14}" + "".join(f"{label:>15}" for label in g) + f"{'end / warm-up':>15}")
    flat = True
    for key, label in (("fds", "descriptors"), ("rss_mb", "RSS MB"), ("threads", "threads")):
        change = end[key] / max(first[key], 1e-9)
        flat &= change <= 1 + GROWTH_TARGET
        print(f"  {label:<14}" + "".join(f"{v[key]:>15.1f}" for v in g.values()) + f"{change:>15.2f}")
    print(f"  {verdict(flat)}")
    return ok_owned and moved_off and failed == 0 and lost == 0 and dup == 0 and twice == 0 and ends and flat


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="3 streams of 30 s (60 s for throughput), the kill at 8 s, 12 questions")
    parser.add_argument("--streams", type=int, default=6)
    parser.add_argument("--seconds", type=int, default=60, help="length of each failover stream's video")
    parser.add_argument("--throughput-seconds", type=int, default=180,
                        help="length of each throughput stream's video (long enough for start-up not to dominate)")
    parser.add_argument("--kill-after", type=float, default=15.0, help="media seconds ingested before the kill")
    parser.add_argument("--questions", type=int, default=24, help="questions in each throughput batch")
    parser.add_argument("--nodes", type=int, default=3, help="ingest nodes of the Ray cluster (besides the head)")
    parser.add_argument("--soak", type=int, default=1000, help="questions of the growth phase")
    args = parser.parse_args(argv)
    if args.quick:
        args.streams, args.seconds, args.throughput_seconds, args.kill_after, args.questions = 3, 30, 60, 8.0, 12
        args.soak = 200
    OUT.mkdir(exist_ok=True)
    videos = make_videos(args.streams, args.seconds)  # before Ray's output is sent away: they print
    make_videos(args.streams, args.throughput_seconds)
    began = time.monotonic()
    stack = Stack()
    ray_log = OUT / "cluster-ray.log"
    ray_log.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="lucy-bench-cluster-") as tmp, ray_output_to(ray_log):
        try:
            figures = run(args, videos, Path(tmp), stack)
        finally:
            stack.close()
    figures["wall_s"] = time.monotonic() - began
    ok = report(figures)
    (OUT / "cluster.json").write_text(json.dumps(figures, indent=2, default=str) + "\n")
    print(f"\n{'all targets met' if ok else 'some targets missed'}; {figures['wall_s']:.0f} s in all; figures in "
          f"{OUT / 'cluster.json'}")


if __name__ == "__main__":
    main()

"""Fixtures for service tests: a real ``lucy serve`` in a child process on a free port, generated videos, a real
mosquitto broker that a test can restart, and polling helpers.

Deadlines are generous: the suite runs on small shared machines (2 cores).
"""

from __future__ import annotations

import getpass
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from lucy.synth import PALETTE, Overlay, Scene, Shape, write_video
from lucy.testing import child_env
from lucy.testing.waiting import free_port, stop_process
from lucy.testing.waiting import wait_for as _wait_for

T = TypeVar("T")
MOSQUITTO = "/usr/sbin/mosquitto"

# The generated videos' details (what questions ask about).
PLATE = "PLATE KX-4821"
BOARD = "PLATFORM 7 DEPARTS 14:05"
SHORT_SECONDS = 12.0


def wait_for(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.2) -> T:
    """Poll until truthy; a server still starting or restarting (connection errors) counts as "not yet"."""
    return _wait_for(condition, timeout, what, interval, tolerate=(httpx.HTTPError, OSError))


# ------------------------------------------------------------------------------------------------ videos


def _video(path: Path, duration: float, overlays: list[Overlay], seed: int) -> Path:
    scenes = [Scene(0, duration / 2, PALETTE["blue"]), Scene(duration / 2, duration, PALETTE["green"])]
    shapes = [Shape(duration * 0.6, duration * 0.8, PALETTE["orange"], count=3, x=0.1, y=0.5)]
    return write_video(path, duration=duration, fps=6, width=320, height=180, scenes=scenes, overlays=overlays,
                       shapes=shapes, seed=seed)


@pytest.fixture(scope="session")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Small generated videos: ``a``, ``b`` and ``c`` (150 s: two whole coarse spans and a partial one), and
    ``short`` (for paced ingest)."""
    root = tmp_path_factory.mktemp("videos")
    return {
        "a": _video(root / "a.mp4", 150, [Overlay(20, 40, PLATE, size=0.09)], 1),
        "b": _video(root / "b.mp4", 150, [Overlay(70, 95, BOARD, size=0.09)], 2),
        "c": _video(root / "c.mp4", 150, [Overlay(100, 130, "STORE CLOSES AT 9 PM", size=0.09)], 3),
        "short": _video(root / "short.mp4", SHORT_SECONDS, [Overlay(2, 10, PLATE, size=0.09)], 4),
    }


# ------------------------------------------------------------------------------------------------ lucy serve


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | Path):
        return json.dumps(str(value))
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):  # a nested section, e.g. captioner.openai, as an inline table
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return repr(value)


def write_config(path: Path, config: dict[str, Any]) -> Path:
    """A lucy.toml from a nested dict (top-level keys first, then one table per section)."""
    lines = [f"{k} = {_toml(v)}" for k, v in config.items() if not isinstance(v, dict)]
    for section, values in config.items():
        if isinstance(values, dict):
            lines.append(f"\n[{section}]")
            lines += [f"{k} = {_toml(v)}" for k, v in values.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def base_config(data: Path, port: int, **sections: dict[str, Any]) -> dict[str, Any]:
    """Small frames, the embedded captioner and reasoner, fast sampling: what every service test starts from."""
    config: dict[str, Any] = {
        "data": str(data), "preset": "live",
        "ingest": {"frame_width": 320, "frame_height": 180, "commit_every_seconds": 0.5,
                   "connect_timeout_seconds": 5.0, "read_timeout_seconds": 3.0,
                   "reconnect_initial_seconds": 0.25, "reconnect_max_seconds": 1.0},
        "captioner": {"backend": "pixels", "max_in_flight": 2},
        "service": {"port": port, "stats_interval_seconds": 0.5},
    }
    for section, values in sections.items():
        config.setdefault(section, {}).update(values)
    return config


@dataclass
class LucyServer:
    """``lucy serve`` in a child process. Its log (stderr) goes to ``log_path``."""

    workdir: Path
    config: dict[str, Any]
    token: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    extra_args: list[str] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.config["service"]["port"])

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def data(self) -> Path:
        return Path(self.config["data"])

    @property
    def log_path(self) -> Path:
        return self.workdir / "serve.log"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def client(self, timeout: float = 120.0) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers(), timeout=timeout)

    def launch(self) -> subprocess.Popen[bytes]:
        config_file = write_config(self.workdir / "lucy.toml", self.config)
        env = child_env()
        log = open(self.log_path, "ab")  # noqa: SIM115  (the child keeps it)
        self.proc = subprocess.Popen([sys.executable, "-m", "lucy", "serve", "--config", str(config_file),
                                      *self.extra_args], stdout=log, stderr=log, env=env, cwd=self.workdir)
        log.close()
        return self.proc

    def start(self, timeout: float = 90.0, attempts: int = 3) -> LucyServer:
        """Launch the server and wait until it is ready. A port that another process bound between
        :func:`free_port` and the server's bind (parallel test workers pick ports at once) is replaced by a new one,
        up to ``attempts`` times; any other exit fails the test."""
        for attempt in range(1, attempts + 1):
            logged = len(self.log())
            self.launch()
            outcome = wait_for(lambda since=logged, last=attempt == attempts: self._ready(since, last), timeout,
                               "lucy serve to be ready")
            if outcome != "port taken":
                return self
            self.config["service"]["port"] = free_port()
        raise AssertionError("unreachable: the last attempt fails or returns")

    def _ready(self, since: int, last: bool) -> bool | str:
        """Whether the server launched last is ready (its log from ``since`` on is its own); "port taken" when it
        exited because its port was bound by someone else and another attempt is left."""
        log = self.log()[since:]
        if self.proc is not None and self.proc.poll() is not None:
            if "address already in use" in log and not last:
                return "port taken"
            pytest.fail(f"lucy serve exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
        # Its own start line first: a port another test's server took meanwhile would answer /readyz too.
        return f":{self.port} (" in log and httpx.get(f"{self.url}/readyz", timeout=5).status_code == 200

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 90.0) -> int:
        """Stop the server (SIGTERM: a clean shutdown; SIGKILL: a crash) and return its exit status."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
            pytest.fail(f"lucy serve did not stop within {timeout:g} s:\n{self.log()[-3000:]}")

    # -------------------------------------------------------------------------------- API helpers

    def stream(self, name: str) -> dict[str, Any]:
        with self.client(30) as c:
            r = c.get(f"/v1/streams/{name}")
        r.raise_for_status()
        return r.json()

    def wait_captioned(self, name: str, timeout: float = 300.0) -> dict[str, Any]:
        """Wait until a file stream is ingested to its end and all of it is captioned."""
        def done() -> dict[str, Any] | None:
            s = self.stream(name)
            if s["state"] == "failed":
                pytest.fail(f"stream {name} failed: {s['error']}\n{self.log()[-3000:]}")
            ok = (s["state"] == "finished" and s["ingested_until"] > 0
                  and s["captioned_until"] >= s["ingested_until"] - 1e-6)
            return s if ok else None

        return wait_for(done, timeout, f"stream {name} to be ingested and captioned", interval=0.5)


@pytest.fixture
def lucy_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., LucyServer]]:
    """Make servers: ``lucy_server(service={...}, mqtt={...})`` (started); all are stopped at teardown.

    Their memory is searched by words only unless a test names an ``embedder``: embedding each caption with the two
    local models was a fifth of these servers' CPU, and search by meaning is tested on :func:`shared_server`, which
    keeps the default embedder (tests/service/test_search_api.py, the dashboard's search)."""
    servers: list[LucyServer] = []

    def make(*, start: bool = True, token: str | None = None, data: Path | None = None,
             **sections: dict[str, Any]) -> LucyServer:
        workdir = tmp_path_factory.mktemp("serve")
        sections.setdefault("embedder", {"backend": "none"})
        config = base_config(data or workdir / "data", free_port(), **sections)
        if token is not None:
            config["service"]["api_token"] = token
        server = LucyServer(workdir, config, token=token)
        servers.append(server)
        return server.start() if start else server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def shared_server(tmp_path_factory: pytest.TempPathFactory, videos: dict[str, Path]) -> Iterator[LucyServer]:
    """One server for the whole session (each test module names its own streams)."""
    workdir = tmp_path_factory.mktemp("serve-shared")
    config = base_config(workdir / "data", free_port(),
                         service={"allowed_source_roots": [str(videos["a"].parent), str(workdir)],
                                  "max_question_chars": 500})
    server = LucyServer(workdir, config).start()
    yield server
    server.stop()


# ------------------------------------------------------------------------------------------------ mosquitto


@dataclass
class Mosquitto:
    """A real mosquitto broker on a loopback port; :meth:`restart` brings it back on the same port."""

    workdir: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    settings: str = "allow_anonymous true\n"  # more mosquitto.conf lines (TLS, password file...)

    def start(self, timeout: float = 30.0) -> Mosquitto:
        conf = self.workdir / "mosquitto.conf"
        # As root, mosquitto would switch to its own user, which cannot read this test's files: stay who we are.
        conf.write_text(f"listener {self.port} 127.0.0.1\npersistence false\nuser {getpass.getuser()}\n"
                        f"{self.settings}")
        deadline = time.monotonic() + timeout
        while True:
            log = open(self.workdir / "mosquitto.log", "ab")  # noqa: SIM115
            self.proc = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=log, stderr=log)
            log.close()
            if self._listening(deadline):
                return self
            self.stop()
            if time.monotonic() > deadline:
                raise RuntimeError(f"mosquitto did not start: {(self.workdir / 'mosquitto.log').read_text()[-2000:]}")
            time.sleep(0.3)  # the port may still be held by the broker before

    def _listening(self, deadline: float) -> bool:
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return True
            except OSError:
                time.sleep(0.1)
        return False

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[Mosquitto]:
    if not os.access(MOSQUITTO, os.X_OK):
        pytest.fail(f"{MOSQUITTO} is missing: install Debian's mosquitto (scripts/setup.sh does)")
    broker = Mosquitto(tmp_path).start()
    yield broker
    broker.stop()

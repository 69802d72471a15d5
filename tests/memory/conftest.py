"""Fixtures for memory tests: an in-process captioner whose speed and failures the test controls, videos, and a
real PostgreSQL server (for the PostgreSQL memory store)."""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from lucy.config import Level
from lucy.ingest.frames import Clip
from lucy.memory.captioners.base import Captioner, CaptionerError
from lucy.memory.nodes import Caption
from lucy.synth import write_video


class ClipCaptioner(Captioner):
    """Describes a clip by what it holds (frame times and mean colour), so a test can check which frames a
    caption was made from. ``fail(call_number)`` returning True makes that call raise CaptionerError;
    ``gate`` (a threading.Event) holds every call until it is set."""

    name = "clip"
    model = "clip-test-1"

    def __init__(self, *, delay: float = 0.0, fail: Callable[[int], bool] | None = None,
                 gate: threading.Event | None = None) -> None:
        self.delay = delay
        self.fail = fail
        self.gate = gate
        self.calls = 0
        self.captions: list[tuple[float, float, int]] = []  # (first time, last time, frames) of each success
        self.in_flight = 0
        self.peak_in_flight = 0
        self.starts: list[tuple[float, int]] = []  # (monotonic time, calls in flight with it) of each call
        self.first_failure: float | None = None
        self.closed = False
        self._lock = threading.Lock()

    async def describe(self, clip: Clip, instruction: str, *, level: Level) -> Caption:
        with self._lock:
            self.calls += 1
            call = self.calls
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            self.starts.append((time.monotonic(), self.in_flight))
        try:
            if self.gate is not None:
                while not self.gate.is_set():
                    await asyncio.sleep(0.01)
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.fail is not None and self.fail(call):
                if self.first_failure is None:
                    self.first_failure = time.monotonic()
                raise CaptionerError(f"scripted failure of call {call}")
            first, last = float(clip.times[0]), float(clip.times[-1])
            rgb = clip.frames.reshape(-1, 3).mean(axis=0)
            with self._lock:
                self.captions.append((first, last, len(clip)))
            text = (f"{len(clip)} frames from {first:.2f} s to {last:.2f} s, level {level.value}, "
                    f"mean colour {rgb[0]:.0f} {rgb[1]:.0f} {rgb[2]:.0f}")
            return Caption(text=text, model=self.model, frames=len(clip))
        finally:
            with self._lock:
                self.in_flight -= 1

    async def aclose(self) -> None:
        self.closed = True


@pytest.fixture
def clip_captioner():
    """The :class:`ClipCaptioner` class (construct it with the behaviour a test needs)."""
    return ClipCaptioner


@pytest.fixture(scope="session")
def five_span_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """270 s of small generated video: four whole 60 s coarse spans and a 30 s partial one."""
    return write_video(tmp_path_factory.mktemp("memory-videos") / "five.mp4", duration=270, fps=4,
                       width=160, height=96)


# ------------------------------------------------------------------------------------------------ PostgreSQL

PG_USER = "lucy"
PG_PASSWORD = "pg-Secret-4821"  # tests check that it never reaches an error message or a log line


def _postgres_bindir() -> Path:
    """Where Debian's PostgreSQL server binaries are (``pg_config --bindir``, else the newest installed)."""
    candidates: list[Path] = []
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
        candidates.append(Path(out))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name), reverse=True)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    pytest.fail("PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's postgresql package "
                "(scripts/setup.sh does)", pytrace=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """A throwaway PostgreSQL server on 127.0.0.1 (its own data directory, socket directory and port), run as an
    unprivileged user when the tests run as root (initdb refuses root). Password authentication, no fsync."""

    def __init__(self, root: Path) -> None:
        self.bindir = _postgres_bindir()
        self.root = root
        self.data = root / "data"
        self.port = _free_port()
        self.user: dict[str, int] = {}
        if os.geteuid() == 0:  # initdb and postgres refuse to run as root
            nobody = pwd.getpwnam("nobody")
            self.user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
            os.chown(root, nobody.pw_uid, nobody.pw_gid)
        root.chmod(0o700)
        (root / "pwfile").write_text(PG_PASSWORD + "\n")
        if self.user:
            os.chown(root / "pwfile", self.user["user"], self.user["group"])
        self._run("initdb", "-D", str(self.data), "-U", PG_USER, f"--pwfile={root / 'pwfile'}", "-A", "scram-sha-256",
                  "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run([str(self.bindir / tool), *args], capture_output=True, text=True, timeout=120,
                              check=False, cwd=self.root, **self.user)  # type: ignore[arg-type]
        if done.returncode != 0:
            pytest.fail(f"{tool} failed ({done.returncode}): {done.stdout}{done.stderr}", pytrace=False)

    def start(self) -> None:
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-o", options, "-w", "-t", "60",
                  "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://{PG_USER}:{PG_PASSWORD}@127.0.0.1:{self.port}/{dbname}"


@pytest.fixture(scope="session")
def postgres_server():
    """One PostgreSQL server for the test session, stopped at its end. Fails (never skips) without PostgreSQL."""
    root = Path(tempfile.mkdtemp(prefix="lucy-pg-"))
    server = PostgresServer(root)
    server.start()
    try:
        yield server
    finally:
        try:
            server.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_dsn(postgres_server: PostgresServer):
    """The DSN of an empty database of its own on the session's server (dropped afterwards)."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    yield postgres_server.dsn(name)
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

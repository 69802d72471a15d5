"""Fixtures for live-stream tests: a real RTSP server (GStreamer, run by Debian's system Python) in a child
process that a test can stop, freeze and restart on the same port, plus small polling helpers.

The server needs ``python3-gi`` and ``gir1.2-gst-rtsp-server-1.0`` (see scripts/setup.sh). Only when the system
Python cannot import ``GstRtspServer`` are these tests skipped; any other failure of the server fails them.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from lucy.config import IngestSettings, LucySettings
from lucy.testing import child_env
from lucy.testing.waiting import free_port, stop_process
from lucy.testing.waiting import wait_for as _wait_for

SYSTEM_PYTHON = "/usr/bin/python3"
RTSP_SERVER = Path(__file__).resolve().parents[1] / "servers" / "rtsp_server.py"
T = TypeVar("T")

_GI_PROBE = ("import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstRtspServer', '1.0'); "
             "from gi.repository import GstRtspServer")


def _rtsp_unavailable() -> str | None:
    """Why the RTSP server cannot run here (None: it can)."""
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return f"{SYSTEM_PYTHON} not found (the RTSP test server runs with Debian's system Python)"
    probe = subprocess.run([SYSTEM_PYTHON, "-c", _GI_PROBE], capture_output=True, text=True, timeout=60,
                           check=False)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return (f"{SYSTEM_PYTHON} cannot import gi's GstRtspServer ({last}); "
                f"install python3-gi and gir1.2-gst-rtsp-server-1.0 (scripts/setup.sh does)")
    return None


_UNAVAILABLE: list[str | None] = []


@pytest.fixture(scope="session")
def rtsp_available() -> None:
    if not _UNAVAILABLE:
        _UNAVAILABLE.append(_rtsp_unavailable())
    if _UNAVAILABLE[0] is not None:
        pytest.skip(_UNAVAILABLE[0])


def wait_for(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    return _wait_for(condition, timeout, what, interval)


@dataclass
class RtspServer:
    """One RTSP server on a fixed port; :meth:`stop` then :meth:`start` restarts it on the same port."""

    port: int
    path: str = "/stream"
    user: str | None = None
    password: str | None = None
    file: Path | None = None
    fps: int = 15
    audio: str | None = None  # a sound track: "tone", a WAV file's path, or "file" (the --file's own AAC track)
    audio_codec: str = "aac"  # how generated sound is sent: aac, opus or pcmu
    proc: subprocess.Popen[str] | None = None
    output: list[str] = field(default_factory=list)  # everything the server printed, for failure messages

    def url(self, user: str | None = None, password: str | None = None) -> str:
        """The stream's URL, with the given credentials (default: the server's own, if any)."""
        user = self.user if user is None else user
        password = self.password if password is None else password
        auth = f"{user}:{password}@" if user is not None else ""
        return f"rtsp://{auth}127.0.0.1:{self.port}{self.path}"

    def start(self, timeout: float = 60.0) -> RtspServer:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        cmd = [SYSTEM_PYTHON, "-u", str(RTSP_SERVER), "--port", str(self.port), "--path", self.path,
               "--fps", str(self.fps)]
        if self.user is not None:
            cmd += ["--user", self.user, "--password", str(self.password)]
        if self.file is not None:
            cmd += ["--file", str(self.file)]
        if self.audio is not None:
            cmd += ["--audio", str(self.audio), "--audio-codec", self.audio_codec]
        deadline = time.monotonic() + timeout
        while True:  # the port may still be held for a moment by the previous server of this port
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                         start_new_session=True)
            lines: queue.Queue[str | None] = queue.Queue()
            threading.Thread(target=self._drain, args=(self.proc, lines), daemon=True).start()
            line = self._ready_line(lines, deadline)
            if line.startswith("READY "):
                return self
            self.stop()
            if not line.startswith("ERROR cannot listen") or time.monotonic() > deadline:
                raise RuntimeError(f"RTSP server did not start: {line!r}; it printed: {''.join(self.output)[-2000:]}")
            time.sleep(0.2)

    def _ready_line(self, lines: queue.Queue[str | None], deadline: float) -> str:
        while True:
            try:
                line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                return "TIMEOUT waiting for READY"
            if line is None:
                return "EXITED before READY"
            if line.startswith(("READY ", "ERROR ")):
                return line.strip()

    def _drain(self, proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.output.append(line)
            lines.put(line)
        lines.put(None)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """Stop the server (clients see their connection close); waits until the process is gone."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):  # it may have exited just now
            os.kill(self.proc.pid, signal.SIGCONT)  # in case it was frozen
        stop_process(self.proc)

    def freeze(self) -> None:
        """SIGSTOP: the connection stays open but no data flows (a stalled camera)."""
        assert self.running
        os.kill(self.proc.pid, signal.SIGSTOP)  # type: ignore[union-attr]

    def thaw(self) -> None:
        assert self.running
        os.kill(self.proc.pid, signal.SIGCONT)  # type: ignore[union-attr]


@pytest.fixture
def rtsp_server_factory(rtsp_available: None) -> Iterator[Callable[..., RtspServer]]:
    """Start RTSP servers: ``rtsp_server_factory(user="u", password="p", file=path)``; all stop at teardown."""
    servers: list[RtspServer] = []

    def make(**kwargs: Any) -> RtspServer:
        server = RtspServer(port=free_port(), **kwargs)
        servers.append(server)
        return server.start()

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def rtsp_server(rtsp_server_factory: Callable[..., RtspServer]) -> RtspServer:
    """A running RTSP server with a live 320x240, 15 fps H.264 test pattern, no authentication."""
    return rtsp_server_factory()


def live_settings(data: Path, **ingest: Any) -> LucySettings:
    """Settings for live tests: short timeouts and backoff, so that faults show within seconds."""
    values: dict[str, Any] = {"connect_timeout_seconds": 5.0, "read_timeout_seconds": 3.0,
                              "reconnect_initial_seconds": 0.25, "reconnect_max_seconds": 1.0,
                              "commit_every_seconds": 0.5}
    values.update(ingest)
    return LucySettings(data=data, preset="live", ingest=IngestSettings(**values))


LIVE_ENV = {  # the same for `lucy` child processes (and no captioning: these tests are about ingest)
    "LUCY_INGEST__CONNECT_TIMEOUT_SECONDS": "5", "LUCY_INGEST__READ_TIMEOUT_SECONDS": "3",
    "LUCY_INGEST__RECONNECT_INITIAL_SECONDS": "0.25", "LUCY_INGEST__RECONNECT_MAX_SECONDS": "1",
    "LUCY_INGEST__COMMIT_EVERY_SECONDS": "0.5", "LUCY_CAPTIONER__BACKEND": "none",
}


def lucy_command() -> list[str]:
    """The installed ``lucy`` script of this virtual environment (``python -m lucy`` if there is none)."""
    script = Path(sys.executable).with_name("lucy")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "lucy"]


def lucy_env(**extra: str) -> dict[str, str]:
    env = child_env()
    env.update(LIVE_ENV)
    env.update(extra)
    return env


class Background(threading.Thread):
    """Runs ``fn()`` in a thread and keeps its result or exception for :meth:`result`."""

    def __init__(self, fn: Callable[[], T], name: str = "background") -> None:
        super().__init__(name=name, daemon=True)
        self._fn = fn
        self.value: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.value = self._fn()
        except BaseException as err:  # noqa: BLE001  (re-raised by result() in the test's thread)
            self.error = err

    def result(self, timeout: float) -> Any:
        self.join(timeout)
        if self.is_alive():
            pytest.fail(f"{self.name} did not finish within {timeout:g} s")
        if self.error is not None:
            raise self.error
        return self.value


class LucyProcess:
    """``lucy ARGS`` in a child process, its output going to files (a pipe nobody reads could block it)."""

    def __init__(self, args: list[str], workdir: Path, env: dict[str, str] | None = None) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self._out_path, self._err_path = workdir / "stdout.txt", workdir / "stderr.txt"
        with open(self._out_path, "w") as out, open(self._err_path, "w") as err:
            self.proc = subprocess.Popen([*lucy_command(), *args], stdout=out, stderr=err, env=lucy_env(**(env or {})),
                                         cwd=workdir)
        self.started = time.monotonic()

    @property
    def stderr(self) -> str:
        return self._err_path.read_text()

    @property
    def stdout(self) -> str:
        return self._out_path.read_text()

    def send(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def finish(self, timeout: float = 60.0) -> int:
        """Wait for the process to exit and return its exit code."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"lucy did not exit within {timeout:g} s; stderr: {self.stderr[-2000:]}")


class LiveKit:
    """The helpers above, handed to tests as the ``live`` fixture (test modules import nothing from here)."""

    wait_for = staticmethod(wait_for)
    settings = staticmethod(live_settings)
    lucy_command = staticmethod(lucy_command)
    lucy_env = staticmethod(lucy_env)
    free_port = staticmethod(free_port)

    @staticmethod
    def lucy(args: list[str], workdir: Path, env: dict[str, str] | None = None) -> LucyProcess:
        """Start ``lucy ARGS`` (with the short live timeouts of LIVE_ENV) in ``workdir``."""
        return LucyProcess(args, workdir, env)

    @staticmethod
    def background(fn: Callable[[], Any], name: str = "background") -> Background:
        thread = Background(fn, name)
        thread.start()
        return thread


@pytest.fixture
def live() -> type[LiveKit]:
    return LiveKit

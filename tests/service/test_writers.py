"""One writer per stream and one server per data directory, between real processes: `lucy serve`, its stream
workers and `lucy ingest` refuse each other's streams at once, naming who writes them."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from lucy.ingest import ZarrFrameStore
from lucy.ingest.lock import read_holder
from lucy.testing import child_env
from lucy.testing.waiting import stop_process
from tests.service.conftest import LucyServer, wait_for

HOST = socket.gethostname()


def _ingest(data: Path, video: Path, stream: str, *args: str) -> subprocess.Popen[str]:
    env = child_env()
    return subprocess.Popen([sys.executable, "-m", "lucy", "ingest", str(video), "--stream", stream, "--data",
                             str(data), "--captioner", "none", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _holding(data: Path, stream: str, pid: int) -> None:
    """Wait until ``pid`` holds ``stream`` and has stored frames of it."""
    wait_for(lambda: (h := read_holder(data / "locks" / f"{stream}.lock")) is not None and h.pid == pid
             and (data / "frames.zarr" / stream / "zarr.json").is_file(), 60, f"pid {pid} to write stream {stream}")


def test_the_server_and_lucy_ingest_refuse_each_others_streams(lucy_server: Callable[..., LucyServer],
                                                               videos: dict[str, Path], run_lucy) -> None:
    server = lucy_server()
    cli = _ingest(server.data, videos["a"], "cli", "--realtime")
    try:
        _holding(server.data, "cli", cli.pid)
        with server.client() as c:
            # The server answers 409 at once instead of starting a worker that would fail.
            r = c.post("/v1/streams", json={"name": "cli", "source": str(videos["a"])})
            assert r.status_code == 409, r.text
            assert r.json()["detail"] == (f"stream 'cli' is being written by pid {cli.pid} (lucy ingest) on {HOST}; "
                                          f"stop it first")
            assert c.get("/v1/streams/cli").json()["managed"] is False
            r = c.delete("/v1/streams/cli", params={"purge": "true"})  # nor deletes frames under a writer
            assert r.status_code == 409 and (server.data / "frames.zarr" / "cli").is_dir()

            # `lucy ingest` of a stream the server ingests is refused, naming the server (the process to stop).
            c.post("/v1/streams", json={"name": "paced", "source": str(videos["b"]),
                                        "realtime": True}).raise_for_status()
            worker = wait_for(lambda: (s := server.stream("paced"))["state"] == "recording" and s["worker_pid"], 60,
                              "the server's stream to run")
            second = run_lucy("ingest", str(videos["b"]), "--stream", "paced", "--data", str(server.data),
                              "--captioner", "none", timeout=60)
            assert second.returncode == 1
            assert (f"lucy: error: stream 'paced' is being written by pid {server.proc.pid} (lucy serve, stream "
                    f"worker {worker}) on {HOST}; stop it first") in second.stderr
            frames = server.stream("paced")["frames"]
            wait_for(lambda: server.stream("paced")["frames"] >= frames + 4, 60, "the server to write on")
            assert np.all(np.diff(ZarrFrameStore.open(server.data, "paced").times()) > 0)
            assert server.stream("paced")["state"] == "recording"

            # Once `lucy ingest` ends, the server takes its stream over and resumes it.
            assert stop_process(cli) == 0
            c.post("/v1/streams", json={"name": "cli", "source": str(videos["a"])}).raise_for_status()
            done = server.wait_captioned("cli", timeout=180)
            assert done["ingested_until"] >= 149
            assert np.all(np.diff(ZarrFrameStore.open(server.data, "cli").times()) > 0)
    finally:
        stop_process(cli, signal.SIGKILL)


def test_a_resumed_stream_that_another_process_writes_is_left_alone(lucy_server: Callable[..., LucyServer],
                                                                   videos: dict[str, Path]) -> None:
    server = lucy_server()
    with server.client() as c:
        c.post("/v1/streams", json={"name": "cam", "source": str(videos["a"]), "realtime": True,
                                    "captioner": "none"}).raise_for_status()
    wait_for(lambda: server.stream("cam")["state"] == "recording", 60, "the stream to run")
    assert server.stop() == 0  # the stream stays registered: the next start resumes it
    cli = _ingest(server.data, videos["a"], "cam", "--realtime")
    try:
        _holding(server.data, "cam", cli.pid)
        server.start()
        refused = server.stream("cam")
        assert refused["state"] == "failed" and refused["worker_pid"] is None
        assert refused["error"] == (f"stream 'cam' is being written by pid {cli.pid} (lucy ingest) on {HOST}; "
                                    f"stop it first")
        assert cli.poll() is None
    finally:
        stop_process(cli, signal.SIGKILL)


def test_a_second_server_on_one_data_directory_exits(lucy_server: Callable[..., LucyServer]) -> None:
    first = lucy_server()
    second = lucy_server(data=first.data, start=False)
    proc = second.launch()
    assert proc.wait(timeout=60) == 1
    assert (f"lucy: error: data directory {str(first.data)!r} is being served by pid {first.proc.pid} "
            f"(lucy serve) on {HOST}; stop it first") in second.log()
    with first.client() as c:
        assert c.get("/readyz").status_code == 200
    assert first.stop() == 0
    second.start()  # the lock went with the first server

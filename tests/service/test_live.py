"""A live camera through the service: a real RTSP server (GStreamer) with credentials, stopped and restarted."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.service.conftest import LucyServer, free_port, wait_for

SYSTEM_PYTHON = "/usr/bin/python3"
RTSP_SERVER = Path(__file__).resolve().parents[1] / "servers" / "rtsp_server.py"
USER, PASSWORD = "viewer", "cam-s3cret"


class Camera:
    """tests/servers/rtsp_server.py (a live test pattern, basic auth) on a fixed port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen[str] | None = None

    def start(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.proc = subprocess.Popen(
                [SYSTEM_PYTHON, "-u", str(RTSP_SERVER), "--port", str(self.port), "--path", "/cam", "--user", USER,
                 "--password", PASSWORD, "--fps", "10"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            lines: queue.Queue[str] = queue.Queue()
            threading.Thread(target=lambda p=self.proc, q=lines: [q.put(x) for x in p.stdout], daemon=True).start()
            try:
                line = ""
                while not line.startswith(("READY", "ERROR")):
                    line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = "TIMEOUT"
            if line.startswith("READY"):
                return
            self.stop()
            if time.monotonic() > deadline:
                raise RuntimeError(f"the RTSP server did not start: {line}")
            time.sleep(0.3)  # the port may still be held by the server before

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)


@pytest.fixture
def camera() -> Iterator[Camera]:
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import gi; gi.require_version('GstRtspServer', '1.0'); "
                            "from gi.repository import GstRtspServer"], capture_output=True, text=True, timeout=60)
    if not os.access(SYSTEM_PYTHON, os.X_OK) or probe.returncode != 0:
        pytest.skip("Debian's python3-gi with gir1.2-gst-rtsp-server-1.0 is needed for the RTSP server "
                    "(scripts/setup.sh installs it)")
    cam = Camera()
    cam.start()
    yield cam
    cam.stop()


def test_live_camera_states(lucy_server: Callable[..., LucyServer], camera: Camera) -> None:
    server = lucy_server()
    url = f"rtsp://{USER}:{PASSWORD}@127.0.0.1:{camera.port}/cam"
    with server.client() as c:
        r = c.post("/v1/streams", json={"name": "porch", "source": url, "captioner": "none"})
        assert r.status_code == 201, r.text
        assert PASSWORD not in r.text
    running = wait_for(lambda: (s := server.stream("porch"))["state"] == "recording" and s["ingested_until"] > 2 and s,
                       60, "the camera to stream")
    assert running["live"] is True and running["source"] == f"rtsp://{USER}:***@127.0.0.1:{camera.port}/cam"
    camera.stop()  # the camera goes away: the stream waits and retries
    wait_for(lambda: server.stream("porch")["state"] == "reconnecting", 60, "the reconnecting state")
    camera.start()
    back = wait_for(lambda: (s := server.stream("porch"))["state"] == "recording" and s["reconnects"] >= 1 and s, 90,
                    "the stream to come back")
    assert back["gaps"] >= 1  # the outage is recorded as a gap in media time
    with server.client() as c:
        metrics = c.get("/metrics").text
        listed = c.get("/v1/streams").text
        stopped = c.delete("/v1/streams/porch").json()
    assert 'lucy_ingest_reconnects_total{stream="porch"} ' in metrics
    assert stopped["state"] == "stopped"
    for text in (metrics, listed, json.dumps(stopped), server.log()):
        assert PASSWORD not in text

"""The live view's latency to the glass and its CPU per viewer, against a real camera and a real ``lucy serve``.

A live RTSP camera (tests/servers/rtsp_server.py: GStreamer's test pattern, H.264) is ingested by ``lucy serve`` with
Lucy's default ingest settings (frames committed every second); viewers read ``GET /v1/streams/cam/live.mjpeg`` at
``--fps`` pictures a second as a browser would. For each picture a viewer receives, the latency to the glass is the
wall time it arrived minus the time its frame was taken (the part's ``X-Lucy-Frame-Wall``: the stream's wall clock
start + the frame's media time; same machine, same clock). CPU is the server process's own (user + system, psutil),
measured over ``--seconds`` with no viewer, then with one viewer (the stream's producer starts: it reads and encodes
each new frame once), then with ``--viewers`` viewers; the stream's worker process (decode, ingest) is another
process and not counted.

    .venv/bin/python bench/live_view.py                    # about a minute
    .venv/bin/python bench/live_view.py --fps 2 --viewers 8 --seconds 20
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

from lucy.testing import child_env
from lucy.testing.waiting import free_port, stop_process, wait_for

ROOT = Path(__file__).resolve().parents[1]
RTSP_SERVER = ROOT / "tests" / "servers" / "rtsp_server.py"


class Viewer(threading.Thread):
    """Reads the live view's parts and notes each one's latency (seconds) until stopped."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.latencies: list[float] = []
        self.frames = 0
        self.stopped = threading.Event()
        self.status: int | None = None

    def run(self) -> None:
        with httpx.Client(timeout=30) as c, c.stream("GET", self.url) as res:
            self.status = res.status_code
            buf = b""
            for chunk in res.iter_bytes():
                buf += chunk
                while b"\r\n\r\n" in buf:
                    head, rest = buf.split(b"\r\n\r\n", 1)
                    fields = dict(line.split(": ", 1) for line in head.decode().split("\r\n") if ": " in line)
                    length = int(fields["Content-Length"])
                    if len(rest) < length:
                        break
                    arrived = time.time()
                    self.frames += 1
                    if "X-Lucy-Frame-Wall" in fields:
                        self.latencies.append(arrived - float(fields["X-Lucy-Frame-Wall"]))
                    buf = rest[length:]
                if self.stopped.is_set():
                    return


def cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def measure(proc: psutil.Process, seconds: float) -> float:
    """Percent of one core the process used over ``seconds``."""
    before, start = cpu_seconds(proc), time.monotonic()
    time.sleep(seconds)
    return 100.0 * (cpu_seconds(proc) - before) / (time.monotonic() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fps", type=float, default=1.0, help="service.live_fps (default 1)")
    parser.add_argument("--viewers", type=int, default=5, help="viewers at once in the last phase (default 5)")
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each phase (default 15)")
    parser.add_argument("--camera-fps", type=int, default=15)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=360)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="lucy-live-bench-"))
    cam_port, port = free_port(), free_port()
    camera = subprocess.Popen(["/usr/bin/python3", "-u", str(RTSP_SERVER), "--port", str(cam_port), "--path", "/cam",
                               "--fps", str(args.camera_fps), "--width", str(args.width), "--height",
                               str(args.height)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert camera.stdout is not None
    line = camera.stdout.readline()
    if not line.startswith("READY"):
        print(f"the RTSP server did not start: {line}", file=sys.stderr)
        return 1
    config = work / "lucy.toml"
    config.write_text(f'data = "{work / "data"}"\npreset = "live"\n[captioner]\nbackend = "pixels"\n'
                      f"[service]\nport = {port}\nlive_fps = {args.fps}\nlive_max_viewers = {args.viewers + 1}\n")
    log = open(work / "serve.log", "wb")  # noqa: SIM115  (the child keeps it)
    server = subprocess.Popen([sys.executable, "-m", "lucy", "serve", "--config", str(config)], stdout=log,
                              stderr=log, env=child_env(), cwd=work)
    url = f"http://127.0.0.1:{port}"
    viewers: list[Viewer] = []
    try:
        wait_for(lambda: httpx.get(f"{url}/readyz", timeout=5).status_code == 200, 90, "lucy serve",
                 tolerate=(httpx.HTTPError,))
        r = httpx.post(f"{url}/v1/streams", json={"name": "cam", "source": f"rtsp://127.0.0.1:{cam_port}/cam"},
                       timeout=60)
        r.raise_for_status()
        wait_for(lambda: httpx.get(f"{url}/v1/streams/cam", timeout=5).json()["frames"] > 4, 90, "frames")
        # lucy serve may re-execute itself (jemalloc): the process that listens is the server
        proc = next(p for p in psutil.Process(server.pid).children(recursive=True) + [psutil.Process(server.pid)]
                    if any(c.laddr.port == port for c in p.net_connections(kind="tcp")))
        idle = measure(proc, args.seconds)
        live = f"{url}/v1/streams/cam/live.mjpeg"
        viewers.append(Viewer(live))
        viewers[0].start()
        time.sleep(2)  # the producer's first frames
        one = measure(proc, args.seconds)
        for _ in range(args.viewers - 1):
            viewers.append(Viewer(live))
            viewers[-1].start()
        time.sleep(2)
        many = measure(proc, args.seconds)
        for v in viewers:
            v.stopped.set()
        latencies = sorted(x for v in viewers for x in v.latencies)
        frames = [v.frames for v in viewers]
        q = statistics.quantiles(latencies, n=20) if len(latencies) >= 20 else [float("nan")] * 19
        out = {
            "live_fps": args.fps, "camera": f"{args.width}x{args.height}@{args.camera_fps}", "viewers": args.viewers,
            "pictures_received": sum(frames), "latency_seconds": {
                "median": round(statistics.median(latencies), 3), "p95": round(q[18], 3),
                "max": round(latencies[-1], 3)},
            "server_cpu_percent": {"no_viewer": round(idle, 1), "one_viewer": round(one, 1),
                                   f"{args.viewers}_viewers": round(many, 1)},
            "cpu_percent_first_viewer": round(one - idle, 2),  # the producer (read + encode once) and one socket
            "cpu_percent_per_further_viewer": round((many - one) / max(1, args.viewers - 1), 2),
        }
        print(json.dumps(out, indent=2))
        return 0
    finally:
        stop_process(server, timeout=60)
        stop_process(camera)
        log.close()


if __name__ == "__main__":
    sys.exit(main())

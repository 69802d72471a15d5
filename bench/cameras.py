"""Live-cameras benchmark: N live 1080p30 RTSP cameras through ``lucy serve`` with everything on, beside a
decode-only baseline of the same N cameras measured in the same run.

Each camera is tests/servers/rtsp_server.py (GStreamer's gst-rtsp-server, as the live tests use) replaying, in real
time, the H.264 + AAC tracks of a generated 1080p30 video: textured frames (realistic decode cost), no B-frames, a
camera-like bit rate (x264 crf 18: about 3.3 Mbit/s, 8 at most), a keyframe every 2 s, a sign to read and spoken
lines (espeak-ng); a 30 s clip looped (``ffmpeg -stream_loop``, no re-encode) to outlast the run. In one run:

  1. detector alone: NanoDet + the tracker on 2 fps of the clip's full-resolution frames, CPU seconds per second of
     video (what the detect stage costs, with nothing else of ours running);
  2. decode-only: N PyAV processes read the N cameras at once (RTSP over TCP, as Lucy reads them), every video
     and audio frame decoded and dropped: each one's real-time factor and CPU per second of video;
  3. Lucy: one ``lucy serve`` (temporary data directory) with the N cameras added through the API, everything on:
     detect nanodet at 2 fps, the pixels captioner with OCR, the whisper transcriber. ``GET /v1/streams/{s}`` and
     ``/metrics`` are sampled through the run: per stream the real-time factor (media seconds stored per wall
     second over the window), caption, speech and detect lag, detect frames dropped, detection wall time per
     second of video (seconds_per_frame x fps), the worker's CPU (``lucy_stream_worker_cpu_seconds_total``) per
     second of video; and the whole machine's CPU use, ours and other processes'.

Each phase starts fresh camera servers, so both see the same pictures from the start. Targets (issue 28): every
stream >= 1x real time (window real-time factor >= 0.97: frames are committed once a second), detect frames
dropped <= 2 %, detection + tracking <= 0.25 CPU-seconds per second of video.

    .venv/bin/python bench/cameras.py [--cameras 4] [--seconds 120] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from lucy.synth import Overlay, Speech, cached_video, speech_track
from lucy.testing import child_env
from lucy.testing.waiting import free_port, stop_process

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
RTSP_SERVER = ROOT / "tests" / "servers" / "rtsp_server.py"
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, with python3-gi and gir1.2-gst-rtsp-server-1.0
CLIP_SECONDS = 30
DETECT_FPS = 2.0
LINES = [Speech(3, "Delivery for gate three, please sign at the front desk."),
         Speech(14, "The north car park is full, use the south entrance."),
         Speech(23, "Camera check complete, all doors are closed.")]
TICKS = os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------------------------------------ the video

def camera_video(seconds: float) -> Path:
    """A 1080p30 camera-like recording at least ``seconds`` long: a textured 30 s clip, looped without re-encoding."""
    track = speech_track(LINES, CLIP_SECONDS, noise=0.01)
    clip = cached_video(OUT / "cameras-1080p30-clip.mp4", duration=CLIP_SECONDS, fps=30, width=1920, height=1080,
                        preset="veryfast", gop=60, texture=True, audio=track,
                        codec_options={"x264-params": "bframes=0:crf=18:vbv-maxrate=8000:vbv-bufsize=16000"},
                        overlays=[Overlay(0, CLIP_SECONDS, "GATE 3  NORTH ENTRANCE", size=0.05, x=0.05, y=0.08)])
    loops = int(seconds // CLIP_SECONDS) + 1
    looped = OUT / f"cameras-1080p30-{loops * CLIP_SECONDS}s.mp4"
    if not looped.exists():
        tmp = looped.with_suffix(".partial.mp4")
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-stream_loop", str(loops - 1), "-i", str(clip), "-c", "copy",
                        str(tmp)], check=True)
        tmp.rename(looped)
    return looped


# ------------------------------------------------------------------------------------------------ the cameras

class Cameras:
    """N RTSP servers replaying ``video`` in real time (H.264 and its own AAC track), one process each."""

    def __init__(self, video: Path, n: int) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        self.urls: list[str] = []
        for i in range(n):
            port = free_port()
            proc = subprocess.Popen([SYSTEM_PYTHON, "-u", str(RTSP_SERVER), "--port", str(port), "--path",
                                     f"/cam{i + 1}", "--file", str(video), "--audio", "file"],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.procs.append(proc)
            lines: queue.Queue[str] = queue.Queue()
            threading.Thread(target=lambda p=proc, q=lines: [q.put(x) for x in p.stdout], daemon=True).start()
            line = ""
            try:
                while not line.startswith(("READY", "ERROR")):
                    line = lines.get(timeout=60)
            except queue.Empty:
                line = "TIMEOUT"
            if not line.startswith("READY"):
                self.close()
                raise SystemExit(f"the RTSP server did not start: {line.strip()}")
            self.urls.append(line.split()[1])

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def close(self) -> None:
        for proc in self.procs:
            stop_process(proc, timeout=20)


# ------------------------------------------------------------------------------------------------ CPU figures

def process_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) of a running process; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(b")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def thread_cpu(pids: list[int]) -> dict[str, float]:
    """CPU seconds of the threads of ``pids`` by thread name, numbers dropped: FFmpeg names its own threads
    (``av:h264:df`` decoding, ``sws`` scaling), Python's and the model runtimes' are all ``python`` (or the pool's)."""
    found: dict[str, float] = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            name = stat[stat.index(b"(") + 1:stat.rindex(b")")].decode(errors="replace").rstrip("0123456789")
            fields = stat[stat.rindex(b")") + 2:].split()
            found[name] = found.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / TICKS
    return found


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, all cores."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # without guest time, which is counted in user already
    return (total - idle) / TICKS, total / TICKS


# ------------------------------------------------------------------------------------------------ 1. detector

def detector_alone(video: Path, frames: int = 40) -> dict[str, float]:
    """NanoDet + tracker CPU on ``frames`` full-resolution frames taken at DETECT_FPS from ``video``."""
    import av

    from lucy.config.settings import DetectSettings
    from lucy.perception.detect import open_detector
    from lucy.perception.track import Tracker

    settings = DetectSettings(backend="nanodet", fps=DETECT_FPS)
    detector = open_detector(settings)
    assert detector is not None
    tracker = Tracker("bench", settings)
    pictures = []
    with av.open(str(video)) as container:
        next_t = 0.0
        for frame in container.decode(video=0):
            if frame.time is not None and frame.time >= next_t:
                pictures.append((frame.time, frame))
                next_t += 1.0 / DETECT_FPS
                if len(pictures) >= frames:
                    break
    detector.detect(pictures[0][1].to_ndarray(format="rgb24"))  # first-use costs out of the figure
    cpu, wall = time.process_time(), time.perf_counter()
    found = 0
    for t, frame in pictures:
        rgb = frame.to_ndarray(format="rgb24")  # the stage converts in its own thread too
        detections = detector.detect(rgb)
        found += len(detections)
        tracker.update(t, detections, rgb)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"frames": len(pictures), "cpu_seconds_per_frame": cpu / len(pictures),
            "wall_seconds_per_frame": wall / len(pictures), "cpu_seconds_per_video_second": cpu / len(pictures) *
            DETECT_FPS, "detections": found}


# ------------------------------------------------------------------------------------------------ 2. decode-only

def decode_one(url: str, seconds: float) -> dict[str, float]:
    """Decode every video and audio frame of a live RTSP stream for ``seconds`` wall seconds after its first
    picture; nothing is kept. (Run in a process of its own by :func:`decode_only`.)"""
    import av

    with av.open(url, options={"rtsp_transport": "tcp", "timeout": "10000000"}) as container:
        video = container.streams.video[0]
        video.thread_type = "AUTO"
        streams = [video, *container.streams.audio[:1]]
        for s in streams[1:]:
            s.thread_type = "AUTO"
        first = last = None
        frames = 0
        began = cpu0 = 0.0
        for packet in container.demux(*streams):
            for frame in packet.decode():
                if packet.stream is not video or frame.time is None:
                    continue
                if first is None:
                    first, began, cpu0 = frame.time, time.monotonic(), time.process_time()
                last = frame.time
                frames += 1
            if first is not None and time.monotonic() - began >= seconds:
                break
    wall = time.monotonic() - began
    media = (last or 0.0) - (first or 0.0)
    return {"media_seconds": media, "wall_seconds": wall, "cpu_seconds": time.process_time() - cpu0,
            "frames": frames, "realtime_factor": media / wall if wall else 0.0}


def decode_only(urls: list[str], seconds: float, camera_pids: list[int]) -> dict[str, Any]:
    """N decode-only processes at once, one per camera; their figures and the machine's CPU over the same time."""
    procs = [subprocess.Popen([sys.executable, __file__, "--decode-one", url, "--seconds", str(seconds)],
                              stdout=subprocess.PIPE, text=True) for url in urls]
    busy0, total0 = machine_cpu()
    ours0 = sum(process_cpu(p) for p in [*camera_pids, *(p.pid for p in procs)])
    time.sleep(max(1.0, seconds - 2))  # the window of the decoders (each starts its clock at its first picture)
    ours = sum(process_cpu(p) for p in [*camera_pids, *(p.pid for p in procs)]) - ours0
    busy, total = machine_cpu()
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=seconds + 120)
        if proc.returncode != 0:
            raise SystemExit(f"a decode-only reader failed (exit {proc.returncode})")
        results.append(json.loads(out.strip().splitlines()[-1]))
    machine = _machine(busy - busy0, total - total0, ours)
    return {"streams": results, "machine": machine}


def _machine(busy: float, total: float, ours: float) -> dict[str, float]:
    cores = os.cpu_count() or 1
    wall = total / cores
    return {"cores": cores, "busy_share": busy / total if total else 0.0, "ours_cores": ours / wall if wall else 0.0,
            "others_cores": max(0.0, busy - ours) / wall if wall else 0.0}


# ------------------------------------------------------------------------------------------------ 3. Lucy

class Server:
    """``lucy serve`` with everything on, in ``workdir``."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        config = workdir / "lucy.toml"
        config.write_text(f'data = "{workdir / "data"}"\npreset = "live"\n'
                          f'[detect]\nbackend = "nanodet"\nfps = {DETECT_FPS}\n'
                          f'[captioner]\nbackend = "pixels"\n[captioner.pixels]\nocr = true\n'
                          f'[transcriber]\nbackend = "whisper"\n'
                          f'[service]\nport = {self.port}\nstats_interval_seconds = 1.0\n')
        # child_env() carries the suite's own default (no detect stage); environment variables win over the file,
        # so the detector is named here too.
        # PYTHONFAULTHANDLER: a worker that crashes in native code leaves its threads' stacks in the log.
        env = {**child_env(), "LUCY_DETECT__BACKEND": "nanodet", "PYTHONFAULTHANDLER": "1"}
        self.logpath = OUT / "cameras-serve.log"  # kept after the run (the data directory is not)
        self.log = open(self.logpath, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen([sys.executable, "-m", "lucy", "serve", "--config", str(config)],
                                     stdout=self.log, stderr=self.log, env=env)
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=60)
        deadline = time.monotonic() + 180
        while True:
            try:
                if self.http.get("/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit(f"lucy serve did not start; see {self.logpath}")
            time.sleep(0.3)

    def status(self, name: str) -> dict[str, Any]:
        r = self.http.get(f"/v1/streams/{name}")
        r.raise_for_status()
        return r.json()

    def metrics(self) -> dict[tuple[str, str], float]:
        """``{(sample name, stream label): value}`` of /metrics."""
        from prometheus_client.parser import text_string_to_metric_families

        values = {}
        for family in text_string_to_metric_families(self.http.get("/metrics").text):
            for sample in family.samples:
                if "stream" in sample.labels:
                    values[(sample.name, sample.labels["stream"])] = sample.value
        return values

    def close(self) -> None:
        self.http.close()
        stop_process(self.proc, timeout=120)
        self.log.close()


def _sample(server: Server, names: list[str], pids: list[int]) -> dict[str, Any]:
    busy, total = machine_cpu()
    statuses = {n: server.status(n) for n in names}
    worker_pids = [s["worker_pid"] for s in statuses.values() if s["worker_pid"]]
    return {"wall": time.monotonic(), "busy": busy, "total": total, "status": statuses, "metrics": server.metrics(),
            "ours": sum(process_cpu(p) for p in [*pids, *worker_pids]), "threads": thread_cpu(worker_pids),
            "workers": {n: process_cpu(s["worker_pid"]) if s["worker_pid"] else 0.0 for n, s in statuses.items()}}


def lucy_run(urls: list[str], seconds: float, camera_pids: list[int], workdir: Path) -> dict[str, Any]:
    server = Server(workdir)
    names = [f"cam{i + 1}" for i in range(len(urls))]
    try:
        for name, url in zip(names, urls, strict=True):
            r = server.http.post("/v1/streams", json={"name": name, "source": url, "captioner": "pixels"})
            r.raise_for_status()
        # The window opens once every stream records (models loaded, first frames committed) and a few seconds more.
        deadline = time.monotonic() + 180
        while True:
            statuses = [server.status(n) for n in names]
            failed = [s for s in statuses if s["state"] == "failed"]
            if failed:
                raise SystemExit(f"stream {failed[0]['name']} failed: {failed[0]['error']}")
            if all(s["state"] == "recording" and s["ingested_until"] > 2 for s in statuses):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"the streams did not start recording: {[s['state'] for s in statuses]}")
            time.sleep(0.5)
        time.sleep(5)
        pids = [server.proc.pid, *camera_pids]
        samples = [_sample(server, names, pids)]
        while samples[-1]["wall"] - samples[0]["wall"] < seconds:
            time.sleep(2)
            samples.append(_sample(server, names, pids))
        return {"streams": {n: _stream_figures(n, samples) for n in names}, "machine": _machine(
            samples[-1]["busy"] - samples[0]["busy"], samples[-1]["total"] - samples[0]["total"],
            samples[-1]["ours"] - samples[0]["ours"]), "log": str(server.logpath),
            "worker_threads_cores": _thread_cores(samples[0], samples[-1])}
    finally:
        server.close()


def _thread_cores(first: dict[str, Any], last: dict[str, Any]) -> dict[str, float]:
    """Cores the workers' threads used over the window, by thread name, largest first."""
    wall = last["wall"] - first["wall"]
    used = {k: (v - first["threads"].get(k, 0.0)) / wall for k, v in last["threads"].items()}
    return dict(sorted(((k, round(v, 3)) for k, v in used.items() if v >= 0.005), key=lambda kv: -kv[1]))


def _slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs: media seconds per wall second without the one-second steps of commits."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def _stream_figures(name: str, samples: list[dict[str, Any]]) -> dict[str, Any]:
    first, last = samples[0], samples[-1]
    s0, s1 = first["status"][name], last["status"][name]
    wall = last["wall"] - first["wall"]
    media = s1["ingested_until"] - s0["ingested_until"]
    d0, d1 = s0.get("detect") or {}, s1.get("detect") or {}
    detected = d1.get("frames", 0) - d0.get("frames", 0)
    dropped = d1.get("dropped", 0) - d0.get("dropped", 0)
    cpu_metric = "lucy_stream_worker_cpu_seconds_total"
    worker_cpu = last["metrics"].get((cpu_metric, name), 0.0) - first["metrics"].get((cpu_metric, name), 0.0)
    worker_cpu_proc = last["workers"][name] - first["workers"][name]
    speech = s1.get("speech") or {}
    return {
        "realtime_factor": _slope([x["wall"] for x in samples], [x["status"][name]["ingested_until"] for x in samples]),
        "status_realtime_factor": s1["realtime_factor"],
        "state": s1["state"], "restarts": s1["restarts"] - s0["restarts"],
        "reconnects": s1["reconnects"] - s0["reconnects"], "gaps": s1["gaps"] - s0["gaps"],
        "caption_lag_seconds": s1["lag_seconds"], "caption_lag_max": max(x["status"][name]["lag_seconds"]
                                                                         for x in samples),
        "coarse_nodes": s1["caption"]["coarse_nodes"], "caption_failures": s1["caption"]["failures"],
        "speech_lag_seconds": speech.get("lag_seconds"), "speech_lines": speech.get("lines"),
        "detect_frames": detected, "detect_dropped": dropped,
        "detect_dropped_share": dropped / (detected + dropped) if detected + dropped else 0.0,
        "detect_lag_seconds": d1.get("lag_seconds"),
        "detect_lag_max": max((x["status"][name].get("detect") or {}).get("lag_seconds", 0.0) for x in samples),
        "detect_seconds_per_frame": d1.get("seconds_per_frame"),
        "detect_wall_per_video_second": (d1.get("seconds_per_frame") or 0.0) * DETECT_FPS,
        "worker_cpu_per_video_second": worker_cpu / media if media else 0.0,
        "worker_cpu_per_video_second_proc": worker_cpu_proc / media if media else 0.0,
        "window_seconds": wall, "media_seconds": media,
    }


# ------------------------------------------------------------------------------------------------ report

def report(n: int, seconds: float, detector: dict[str, float], base: dict[str, Any], lucy: dict[str, Any]) -> bool:
    print(f"\n{n} live 1080p30 cameras (H.264 ~3.3 Mbit/s + AAC speech), {seconds:.0f} s windows, "
          f"{os.cpu_count()} cores")
    print(f"detector alone (NanoDet + tracker, 1 thread): {detector['cpu_seconds_per_frame'] * 1000:.0f} ms CPU a "
          f"frame ({detector['wall_seconds_per_frame'] * 1000:.0f} ms wall), "
          f"{detector['cpu_seconds_per_video_second']:.3f} CPU-s per s of video at {DETECT_FPS:g} fps "
          f"(target <= 0.25)")
    print(f"\n{'stream':8} {'Lucy RTF':>9} {'decode RTF':>10} {'ratio':>6} | {'decode CPU/s':>12} "
          f"{'worker CPU/s':>12} {'extra':>6} | {'det wall/s':>10} {'dropped':>9} {'det lag':>7} | "
          f"{'capt lag':>8} {'speech lag':>10} {'lines':>5}")
    ok = True
    for i, (name, s) in enumerate(lucy["streams"].items()):
        b = base["streams"][i]
        decode_cpu = b["cpu_seconds"] / b["media_seconds"] if b["media_seconds"] else 0.0
        keeps = (s["realtime_factor"] >= 0.97 and s["state"] == "recording" and not s["gaps"]
                 and not s["restarts"])
        drops = s["detect_dropped_share"] <= 0.02
        ok = ok and keeps and drops
        speech_lag = "-" if s["speech_lag_seconds"] is None else f"{s['speech_lag_seconds']:.1f}"
        print(f"{name:8} {s['realtime_factor']:9.3f} {b['realtime_factor']:10.3f} "
              f"{s['realtime_factor'] / b['realtime_factor'] if b['realtime_factor'] else 0:6.3f} | "
              f"{decode_cpu:12.3f} {s['worker_cpu_per_video_second']:12.3f} "
              f"{s['worker_cpu_per_video_second'] - decode_cpu:6.3f} | {s['detect_wall_per_video_second']:10.3f} "
              f"{s['detect_dropped']:4d}/{s['detect_frames'] + s['detect_dropped']:<4d} "
              f"{s['detect_lag_max']:7.1f} | {s['caption_lag_max']:8.1f} {speech_lag:>10} "
              f"{s['speech_lines'] or 0:5d}  {'ok' if keeps and drops else 'FAIL'}")
    for label, m in (("decode-only", base["machine"]), ("lucy", lucy["machine"])):
        print(f"machine CPU during {label:11}: {m['busy_share'] * 100:5.1f} % of {m['cores']} cores busy; "
              f"ours {m['ours_cores']:.2f} cores, other processes {m['others_cores']:.2f} cores")
    threads = ", ".join(f"{k} {v:.2f}" for k, v in lucy["worker_threads_cores"].items())
    print(f"cores used by the workers' threads, by thread name (all workers): {threads}")
    det_ok = detector["cpu_seconds_per_video_second"] <= 0.25
    print(f"\nRTF: media seconds per wall second over the window (Lucy: the slope of ingested_until, stored frames; "
          f"baseline: decoded); CPU/s: CPU "
          f"seconds per second of video; extra = worker CPU/s - decode CPU/s (detection, tracking, storing, OCR, "
          f"speech); det wall/s = detect seconds_per_frame x {DETECT_FPS:g} (wall, an upper bound of its CPU); "
          f"lags at their largest in the window (the coarse span is 60 s).")
    print(f"targets: >= 1x real time (RTF >= 0.97) and detect dropped <= 2 % on every stream: "
          f"{'PASS' if ok else 'FAIL'}; detection + tracking <= 0.25 CPU-s per s: {'PASS' if det_ok else 'FAIL'}")
    return ok and det_ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cameras", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=120.0, help="wall seconds of each measured window")
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    parser.add_argument("--decode-one", metavar="URL", help=argparse.SUPPRESS)  # a decode-only reader process
    args = parser.parse_args(argv)
    if args.decode_one:
        print(json.dumps(decode_one(args.decode_one, args.seconds)))
        return 0
    if not os.access(SYSTEM_PYTHON, os.X_OK) or shutil.which("ffmpeg") is None:
        raise SystemExit("needs /usr/bin/python3 with python3-gi + gir1.2-gst-rtsp-server-1.0, and ffmpeg "
                         "(scripts/setup.sh installs them)")
    video = camera_video(args.seconds + 240)  # the Lucy phase's start-up (models, first frames) comes before it
    print(f"camera video: {video.name}, {video.stat().st_size / 1e6:.0f} MB", flush=True)
    print("1. detector alone ...", flush=True)
    detector = detector_alone(video)
    print(f"2. decode-only, {args.cameras} cameras, {args.seconds:.0f} s ...", flush=True)
    cameras = Cameras(video, args.cameras)
    try:
        base = decode_only(cameras.urls, args.seconds, cameras.pids)
    finally:
        cameras.close()
    print(f"3. lucy serve, {args.cameras} cameras, {args.seconds:.0f} s (after start-up) ...", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="lucy-cameras-"))
    cameras = Cameras(video, args.cameras)
    try:
        lucy = lucy_run(cameras.urls, args.seconds, cameras.pids, workdir)
    finally:
        cameras.close()
    passed = report(args.cameras, args.seconds, detector, base, lucy)
    if args.json:
        args.json.write_text(json.dumps({"cameras": args.cameras, "seconds": args.seconds, "detector": detector,
                                         "decode_only": base, "lucy": lucy, "passed": passed}, indent=2))
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

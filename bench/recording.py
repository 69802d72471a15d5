"""Recording and clips: what keeping a camera's original video costs, and how fast a clip comes back.

One run, on a 1080p30 H.264 stream (ffmpeg's testsrc2 encoded with libx264, served in real time by the RTSP test
server, tests/servers/rtsp_server.py, as a camera would send it):

  1. re-muxing alone: the file's packets through :class:`lucy.ingest.recording.SegmentWriter` (demux + mux, no
     decode), as CPU seconds per media second, i.e. the share of one core a camera's recording takes;
  2. ingest beside ingest: two ``lucy ingest`` processes on the same RTSP stream at the same time, one with
     ``--record`` and one with ``--no-record``; each one's CPU seconds over the same wall time (from /proc), their
     difference as a share of a core and the ratio of the two;
  3. clips: a 60 s clip from the recording (re-muxed) and from the other stream's stored frames (encoded), each
     the median of ``--runs`` with :func:`lucy.ingest.clips.make_clip`, as ``GET /v1/streams/{name}/clip`` makes it.

    .venv/bin/python bench/recording.py                 # about 2 minutes on 2 cores
    .venv/bin/python bench/recording.py --seconds 40 --clip-seconds 30
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import av

from lucy.config import load_settings
from lucy.ingest.clips import make_clip
from lucy.ingest.recording import SegmentWriter
from lucy.ingest.segments import list_segments, recordings_dir
from lucy.testing.waiting import free_port, stop_process
from lucy.wiring import open_frames

ROOT = Path(__file__).resolve().parents[1]
LUCY = str(Path(sys.executable).with_name("lucy"))
TICKS = os.sysconf("SC_CLK_TCK")


def make_video(path: Path, seconds: float) -> Path:
    """1080p30 H.264 (a keyframe every 2 s, 4 Mbit/s, no B-frames, as many cameras send) of testsrc2."""
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    f"testsrc2=size=1920x1080:rate=30:duration={seconds}", "-c:v", "libx264", "-preset", "ultrafast",
                    "-tune", "zerolatency", "-g", "60", "-b:v", "4M", "-pix_fmt", "yuv420p", str(path)], check=True)
    return path


def remux_cost(video: Path, folder: Path) -> tuple[float, float]:
    """(CPU seconds, media seconds) of re-muxing the whole file into 10 s segments, packets demuxed as ingest
    demuxes them (the decode ingest does anyway is left out)."""
    writer = SegmentWriter(folder, 10.0, "bench")
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        media = float(stream.duration * stream.time_base) if stream.duration else 0.0
        writer.connect(stream, None)
        writer.anchor(0.0)
        began = time.process_time()
        for packet in container.demux(stream):
            writer.packet(packet)
        writer.close()
        cpu = time.process_time() - began
    return cpu, media


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its threads so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=75.0, help="Wall seconds both ingests run (default 75).")
    parser.add_argument("--clip-seconds", type=float, default=60.0, help="Length of the timed clips (default 60).")
    parser.add_argument("--runs", type=int, default=3, help="Clips made of each kind (median; default 3).")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lucy-bench-recording-"))
    video = make_video(work / "1080p30.mp4", 30.0)

    cpu, media = remux_cost(video, recordings_dir(work, "remux"))
    print(f"re-mux alone: {cpu:.2f} CPU s for {media:.0f} s of 1080p30 = {100 * cpu / media:.2f} % of one core "
          f"({sum(s.size for s in list_segments(work, 'remux')) / media * 8 / 1e6:.1f} Mbit/s written)")

    port = free_port()
    server = subprocess.Popen(["/usr/bin/python3", "-u", str(ROOT / "tests/servers/rtsp_server.py"), "--port",
                               str(port), "--path", "/cam", "--file", str(video)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    assert server.stdout is not None and server.stdout.readline().startswith("READY"), "the RTSP server did not start"
    data = work / "data"
    env = {**os.environ, "LUCY_CAPTIONER__BACKEND": "none", "LUCY_DETECT__BACKEND": "none"}
    url = f"rtsp://127.0.0.1:{port}/cam"
    ingests = {flag: subprocess.Popen([LUCY, "ingest", url, "--stream", name, "--data", str(data), flag],
                                      env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for flag, name in (("--record", "rec"), ("--no-record", "plain"))}
    try:
        time.sleep(5.0)  # both connected and past their start-up
        start = {flag: cpu_seconds(p.pid) for flag, p in ingests.items()}
        began = time.monotonic()
        time.sleep(args.seconds)
        used = {flag: cpu_seconds(p.pid) - start[flag] for flag, p in ingests.items()}
        wall = time.monotonic() - began
    finally:
        for p in ingests.values():
            p.send_signal(signal.SIGTERM)
        for p in ingests.values():
            p.wait(60)
        stop_process(server)
    rec, plain = used["--record"] / wall, used["--no-record"] / wall
    print(f"ingest over {wall:.0f} s: with recording {100 * rec:.1f} % of a core, without {100 * plain:.1f} %; "
          f"recording costs {100 * (rec - plain):+.1f} % of a core (ratio {rec / plain:.3f})")

    settings = load_settings(data=data)
    frames = open_frames(settings)
    segments = list_segments(data, "rec")
    print(f"recorded {len(segments)} segments, {segments[0].start:.1f}-{segments[-1].end:.1f} s")
    for stream in ("rec", "plain"):
        info = frames.open(stream).info()
        end = min(info.media_seconds, segments[-1].end if stream == "rec" else info.media_seconds) - 1.0
        start = max(info.first_time or 0.0, end - args.clip_seconds)
        times, origin, size = [], "", 0
        for run in range(args.runs):
            began = time.monotonic()
            made = make_clip(frames, data, stream, start, end, work / f"{stream}-{run}.mp4", max_seconds=300)
            times.append(time.monotonic() - began)
            origin, size = made.origin, made.size
        print(f"{end - start:.0f} s clip from {origin}: {statistics.median(times):.2f} s (median of {args.runs}), "
              f"{size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()

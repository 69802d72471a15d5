"""Compressed-time retention run (issue 8): disk use stays under its bound while recording never stops.

Several streams ingest a generated video in real time (``realtime=True``, as a camera would deliver it) into a
data directory on a small real disk: a tmpfs of ``--disk-mb`` mounted for the run (when mounting is not allowed,
a plain folder with ``retention.max_bytes`` as the bound, and a notice). Retention ages are scaled down (thin
after ``--full`` s, drop after ``--keep`` s, a pass every ``--interval`` s); one stream, ``guarded``, has no ages
(its own full_seconds = keep_seconds = 0) so that only the disk guard (``retention.min_free_bytes``) bounds it.
Frames are large and textured (1280x720, JPEG quality 95) so that the disk fills within the run without retention.

Printed: disk use over time against the bound, the peak, frames lost (sampled frames the ingestors failed to
store: must be 0), the longest stretch without a commit per stream, and whether recording ever stopped.

    .venv/bin/python bench/retention.py [--seconds 90] [--streams 3] [--disk-mb 64]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lucy.config import LucySettings, load_settings
from lucy.ingest import Ingestor, IngestResult
from lucy.ingest.retention import RetentionMaintainer
from lucy.synth import cached_video
from lucy.wiring import open_frames

OUT = Path(__file__).resolve().parent / "out"
MB = 1 << 20


@contextlib.contextmanager
def small_disk(disk_mb: int) -> Iterator[tuple[Path, bool]]:
    """A folder on a tmpfs of ``disk_mb`` (True), or a plain temporary folder when mounting is refused (False)."""
    with tempfile.TemporaryDirectory(prefix="lucy-retention-") as tmp:
        mount = Path(tmp) / "disk"
        mount.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={disk_mb}m", "tmpfs", str(mount)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"notice: cannot mount a {disk_mb} MB tmpfs ({(done.stderr or done.stdout).strip()}); "
                  f"bounding frame bytes with retention.max_bytes instead", flush=True)
            yield mount, False
            return
        try:
            yield mount, True
        finally:
            subprocess.run(["umount", "-l", str(mount)], check=False)


def _frame_bytes(data: Path) -> int:
    """Bytes of every frame chunk under the data directory (a full walk, for the record only)."""
    root = data / "frames.zarr"
    return sum(f.stat().st_size for f in root.glob("*/frames/c.*"))


def run_retention(*, seconds: float = 90.0, streams: int = 3, disk_mb: int = 64, min_free_mb: int = 16,
                  full_seconds: float = 10.0, keep_seconds: float = 20.0, interval_seconds: float = 1.0,
                  width: int = 1280, height: int = 720, quality: int = 95, sample_seconds: float = 0.5,
                  report_every: float = 5.0) -> dict[str, Any]:
    """Run the retention benchmark and return its figures (also printed as it goes)."""
    video = cached_video(OUT / f"bench-retention-{width}x{height}-{int(seconds)}s.mp4", duration=seconds,
                         fps=10, width=width, height=height, texture=True, gop=20)
    with small_disk(disk_mb) as (mount, mounted):
        data = mount / "data"
        bound = (disk_mb - min_free_mb) * MB
        flags: dict[str, Any] = {
            "ingest.frame_width": width, "ingest.frame_height": height, "ingest.jpeg_quality": quality,
            "retention.full_seconds": full_seconds, "retention.keep_seconds": keep_seconds,
            "retention.interval_seconds": interval_seconds,
            "retention.min_free_bytes": min_free_mb * MB if mounted else 0,
            "retention.min_free_fraction": 0.5,  # the floor asked for, not a tenth of the small disk
            "retention.max_bytes": 0 if mounted else bound,
        }
        settings = load_settings(data=data, **flags)
        names = [f"cam{i}" for i in range(streams - 1)] + ["guarded"]
        no_ages = settings.retention.model_copy(update={"full_seconds": 0.0, "keep_seconds": 0.0})
        guarded = settings.model_copy(update={"retention": no_ages})

        def settings_for(name: str) -> LucySettings:
            return guarded if name == "guarded" else settings

        maintainer = RetentionMaintainer(settings, settings_for=settings_for, frames=open_frames(settings))
        ingestors = {name: Ingestor(settings, str(video), name, realtime=True,
                                    frames=open_frames(settings)) for name in names}
        results: dict[str, IngestResult] = {}
        errors: dict[str, str] = {}

        def ingest(name: str) -> None:
            try:
                results[name] = ingestors[name].run()
            except Exception as err:  # noqa: BLE001  (recorded: recording stopped)
                errors[name] = f"{type(err).__name__}: {err}"

        disk = f"a {disk_mb} MB tmpfs" if mounted else str(data)
        guard = f"free-space floor {min_free_mb} MB" if mounted else "retention.max_bytes"
        print(f"{streams} streams of {video.name} in real time into {disk}; thin after {full_seconds:g} s, drop "
              f"after {keep_seconds:g} s (stream 'guarded': never), {guard}: bound {bound / MB:.0f} MB", flush=True)
        print(f"{'t (s)':>6} {'disk used':>10} {'frames':>8} {'bound':>7}  committed frames per stream", flush=True)
        threads = [threading.Thread(target=ingest, args=(n,), name=f"ingest-{n}") for n in names]
        began = time.monotonic()
        for thread in threads:
            thread.start()
        samples: list[dict[str, Any]] = []
        last_commit = dict.fromkeys(names, (0, began))
        longest_gap = dict.fromkeys(names, 0.0)
        next_pass = began + interval_seconds
        next_report = began
        passes: list[float] = []
        while any(t.is_alive() for t in threads):
            now = time.monotonic()
            if now >= next_pass:
                report = maintainer.run_once()
                passes.append(report.seconds)
                next_pass = now + interval_seconds
            usage = shutil.disk_usage(mount)
            stored = sum(maintainer.stats.snapshot()[0].values())
            for n in names:
                committed = ingestors[n].stats.committed
                if committed != last_commit[n][0]:
                    last_commit[n] = (committed, now)
                elif committed:  # waiting for the stream's next commit
                    longest_gap[n] = max(longest_gap[n], now - last_commit[n][1])
            point = {"t": round(now - began, 2), "disk_used": usage.used, "frame_bytes": stored,
                     "committed": {n: ingestors[n].stats.committed for n in names}}
            samples.append(point)
            if now >= next_report:
                used = usage.used if mounted else stored
                print(f"{point['t']:6.1f} {used / MB:8.1f}MB {stored / MB:6.1f}MB {bound / MB:5.0f}MB  "
                      + " ".join(f"{n}={c}" for n, c in point["committed"].items()), flush=True)
                next_report = now + report_every
            time.sleep(sample_seconds)
        for thread in threads:
            thread.join()
        final = maintainer.run_once()
        wall = time.monotonic() - began

        expected = round(seconds * settings.levels.finest_fps)
        lost = {n: expected - (results[n].frames if n in results else ingestors[n].stats.committed) for n in names}
        peak_used = max(s["disk_used"] for s in samples)
        peak_frames = max(s["frame_bytes"] for s in samples)
        freed: dict[str, int] = {}
        for (_stream, reason), nbytes in maintainer.stats.snapshot()[1].items():
            freed[reason] = freed.get(reason, 0) + nbytes
        written = sum(freed.values()) + _frame_bytes(data)
        figures = {
            "mounted_tmpfs": mounted, "disk_bytes": disk_mb * MB, "bound_bytes": bound,
            "bound_kind": "disk size - retention.min_free_bytes" if mounted else "retention.max_bytes",
            "seconds": seconds, "wall_seconds": round(wall, 1), "streams": streams,
            "peak_disk_used_bytes": peak_used, "peak_frame_bytes": peak_frames,
            "final_frame_bytes": _frame_bytes(data), "frame_bytes_written": written, "freed_bytes": freed,
            "peak_over_bound_bytes": max(0, (peak_used if mounted else peak_frames) - bound),
            "frames_expected_per_stream": expected, "frames_lost": lost,
            "longest_commit_gap_seconds": {n: round(g, 2) for n, g in longest_gap.items()},
            "recording_stopped": bool(errors) or any(not r.complete for r in results.values()),
            "errors": errors, "passes": len(passes), "pass_seconds_max": round(max(passes, default=0.0), 3),
            "over_bound_at_end": final.over_bound,
        }
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=90.0, help="media (and wall) seconds each stream records")
    parser.add_argument("--streams", type=int, default=3, help="streams (the last one bounded by the guard only)")
    parser.add_argument("--disk-mb", type=int, default=64, help="size of the tmpfs the data directory is on")
    parser.add_argument("--min-free-mb", type=int, default=16, help="retention.min_free_bytes, in MB")
    parser.add_argument("--full", type=float, default=10.0, help="retention.full_seconds")
    parser.add_argument("--keep", type=float, default=20.0, help="retention.keep_seconds")
    parser.add_argument("--interval", type=float, default=1.0, help="retention.interval_seconds")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object at the end")
    args = parser.parse_args(argv)
    f = run_retention(seconds=args.seconds, streams=args.streams, disk_mb=args.disk_mb, min_free_mb=args.min_free_mb,
                      full_seconds=args.full, keep_seconds=args.keep, interval_seconds=args.interval)
    peak = f["peak_disk_used_bytes"] if f["mounted_tmpfs"] else f["peak_frame_bytes"]
    print(f"\npeak {'disk use' if f['mounted_tmpfs'] else 'frame bytes'}: {peak / MB:.1f} MB against a bound of "
          f"{f['bound_bytes'] / MB:.0f} MB ({f['bound_kind']}; disk {f['disk_bytes'] / MB:.0f} MB); "
          f"over the bound by at most {f['peak_over_bound_bytes'] / MB:.2f} MB")
    print(f"frames written {f['frame_bytes_written'] / MB:.1f} MB, freed "
          + ", ".join(f"{r} {b / MB:.1f} MB" for r, b in sorted(f["freed_bytes"].items()))
          + f", left {f['final_frame_bytes'] / MB:.1f} MB")
    print(f"frames lost: {f['frames_lost']} (of {f['frames_expected_per_stream']} per stream)")
    print(f"longest wait for a commit: {f['longest_commit_gap_seconds']} s; recording stopped: "
          f"{'YES ' + json.dumps(f['errors']) if f['recording_stopped'] else 'no'}")
    print(f"{f['passes']} retention passes, slowest {f['pass_seconds_max']:.3f} s; run {f['wall_seconds']:.0f} s")
    if args.json:
        print(json.dumps(f))
    ok = (not f["recording_stopped"] and not any(f["frames_lost"].values())
          and (f["mounted_tmpfs"] or f["peak_over_bound_bytes"] == 0))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

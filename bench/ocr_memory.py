"""OCR memory probe: does a RapidOCR engine's RSS stay flat as it reads pictures of many sizes and text widths?

Why: a server's question-time captioner reads text from whichever executor thread is free, on frames of whatever
size a stream stores, with lines of any length; a caching allocator (glibc's per-thread arenas, onnxruntime's
arena) grows to the largest input each cache has met. This reads ``--reads`` pictures (97 generated frames,
320x180 to 1280x720, 1-4 lines of 1-6 words each) through one engine of ``--engines`` sessions from a pool of
``--threads`` threads, and prints RSS every 50 reads and CPU per read (process CPU, so other load on the machine
does not count).

    .venv/bin/python bench/ocr_memory.py [--reads 600] [--engines 2] [--threads 6]
"""

from __future__ import annotations

import argparse
import random
import time
from concurrent.futures import ThreadPoolExecutor

import psutil
from PIL import Image

from lucy.perception.ocr import RapidOcrEngine
from lucy.synth.video import PALETTE, FramePainter, Overlay, Scene

WORDS = ["PLATFORM", "EXIT", "GATE", "TICKETS", "DEPARTURES", "NORTH", "SOUTH", "LIFT", "STAIRS", "CAFE", "14:05", "7B",
         "TRAIN", "BUS", "TO", "CITY", "CENTRE"]
SIZES = [(640, 360), (480, 270), (320, 180), (1280, 720), (960, 540), (800, 450), (560, 315)]


def pictures(n: int = 97, seed: int = 0) -> list[Image.Image]:
    rng = random.Random(seed)
    out = []
    for k in range(n):
        w, h = SIZES[k % len(SIZES)]
        lines = [Overlay(0, 10, " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))),
                         x=rng.uniform(0.02, 0.4), y=0.1 + 0.2 * j, size=rng.uniform(0.04, 0.1))
                 for j in range(rng.randint(1, 4))]
        out.append(Image.fromarray(FramePainter(w, h, [Scene(0, 10, list(PALETTE.values())[k % 12])], lines, [])(1.0)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reads", type=int, default=600)
    parser.add_argument("--engines", type=int, default=2)
    parser.add_argument("--threads", type=int, default=6)
    args = parser.parse_args()
    frames = pictures()
    proc = psutil.Process()
    print(f"RSS with the pictures made, before the engine: {proc.memory_info().rss / 2**20:.0f} MiB")
    engine = RapidOcrEngine(args.engines)
    pool = ThreadPoolExecutor(args.threads)
    cpu0, lines, marks = sum(proc.cpu_times()[:4]), 0, []
    began = time.perf_counter()
    for start in range(0, args.reads, 50):
        lines += sum(pool.map(lambda i: len(engine.read(frames[i % len(frames)])), range(start, start + 50)))
        marks.append(f"{start + 50}: {proc.memory_info().rss / 2**20:.0f}")
    cpu = sum(proc.cpu_times()[:4]) - cpu0
    reads = len(marks) * 50
    print(f"{reads} reads, {lines} lines, CPU {1000 * cpu / reads:.1f} ms per read, wall "
          f"{1000 * (time.perf_counter() - began) / reads:.1f} ms per read")
    print("RSS MiB after N reads: " + ", ".join(marks))
    pool.shutdown()


if __name__ == "__main__":
    main()

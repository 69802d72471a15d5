"""Captioning benchmark: the continuous coarse builder's throughput, the pixels captioner's speed, caption lag.

In one run:
  (1) Builder throughput against a local OpenAI-compatible server (``ScriptedOpenAIServer``) that simulates a
      VLM with a fixed latency L per request and room for C requests at once, in its own process as
      a real VLM server would be. The builder starts on a frame
      store that already holds N coarse spans (the catch-up case: every span is ready), uses the real
      ``openai`` captioner over HTTP, and must reach >= 0.9 x C / L clips per second. The baseline is measured
      in the same run: the same requests (same frames, same encoding) sent straight from an ``AsyncOpenAI``
      client, C at a time, with no builder, frame store or memory store in between.
  (2) The ``pixels`` captioner's frames per second on stored frames, at the coarse and the fine level.
  (3) Caption lag while ``lucy ingest`` runs a generated file faster than real time with the ``pixels``
      captioner: lag (media ingested minus media captioned) sampled at every commit, and how long the backlog
      took to drain once the file was stored.

    .venv/bin/python bench/captioning.py [--latency 1.0] [--capacity 8] [--spans 96] [--ingest-seconds 600]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import openai

from lucy.config import Level, LucySettings, load_settings
from lucy.ingest import Ingestor, ZarrFrameStore
from lucy.memory.builder import CoarseBuilder
from lucy.memory.captioners.base import pick_evenly
from lucy.memory.captioners.openai import OpenAICaptioner, encode_jpeg_frames
from lucy.memory.sqlite_store import DB_NAME
from lucy.synth import PALETTE, Overlay, Scene, write_video
from lucy.testing.openai_server import Reply, ScriptedOpenAIServer
from lucy.wiring import open_frames, open_memory

TARGET = 0.9


def filled_store(data: Path, spans: int, span_seconds: float, fps: float, size: tuple[int, int]) -> None:
    """A finished (non-live) stream holding ``spans`` whole coarse spans of varied frames at ``fps``."""
    width, height = size
    store = ZarrFrameStore.create(data, "bench", source="bench", source_id="bench", live=False, width=width,
                                  height=height, stored_fps=fps, codec="jpeg", quality=85)
    rng = np.random.default_rng(0)
    per_span = int(round(span_seconds * fps))
    base = rng.integers(0, 255, size=(per_span, height, width, 3), dtype=np.uint8)
    for k in range(spans):
        times = k * span_seconds + np.arange(per_span) / fps
        store.append(np.roll(base, k, axis=2), times)
    store.mark_finished(complete=True, lost=None)


def settings_for(data: Path, base_url: str, capacity: int, max_frames: int) -> LucySettings:
    return load_settings(data=data, preset="live", **{
        "captioner.backend": "openai", "captioner.max_in_flight": capacity,
        "captioner.openai.base_url": base_url, "captioner.openai.max_frames": max_frames,
        "captioner.openai.max_retries": 0, "captioner.openai.timeout_seconds": 60,
        "memory.queue_spans": 4 * capacity})


async def direct_baseline(settings: LucySettings, clip_frames: np.ndarray, requests: int, capacity: int) -> float:
    """Requests per second straight from an AsyncOpenAI client, ``capacity`` at a time (frames pre-sampled
    and JPEG-encoded per request, like the captioner does)."""
    s = settings.captioner.openai
    client = openai.AsyncOpenAI(base_url=s.base_url, api_key="x", max_retries=0, timeout=60)
    slots = asyncio.Semaphore(capacity)

    async def one() -> None:
        async with slots:
            picked = clip_frames[pick_evenly(len(clip_frames), s.max_frames)]
            jpegs = await asyncio.to_thread(encode_jpeg_frames, picked, s.image_max_side, s.jpeg_quality)
            content = [{"type": "text", "text": "A clip."}] + [
                {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{j}"}} for j in jpegs]
            reply = await client.chat.completions.create(model=s.model, max_tokens=s.max_tokens,
                                                         messages=[{"role": "user", "content": content}])
            assert reply.choices[0].message.content

    began = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(requests)))
    took = time.perf_counter() - began
    await client.close()
    return requests / took


def _serve(latency: float, capacity: int, conn) -> None:
    """Child process: the simulated VLM server, until told to stop; sends back its URL, then its counters."""
    with ScriptedOpenAIServer(lambda body: Reply("a caption of the clip"), latency=latency,
                              capacity=capacity) as server:
        conn.send(server.base_url)
        conn.recv()
        conn.send({"requests": len(server.requests), "peak_in_flight": server.peak_in_flight})


class ServerProcess:
    """The scripted server in its own process, like a real VLM server: its HTTP and JSON work does not
    compete with the builder for this process's interpreter lock."""

    def __init__(self, latency: float, capacity: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(latency, capacity, child), daemon=True)

    def __enter__(self) -> str:
        self._process.start()
        if not self._conn.poll(60):
            raise RuntimeError("the scripted server process did not start")
        return self._conn.recv()

    def counters(self) -> dict[str, int]:
        self._conn.send("stop")
        return self._conn.recv()

    def __exit__(self, *exc: object) -> None:
        self._process.terminate()
        self._process.join(10)


def run_builder(settings: LucySettings, spans: int, in_flight: int) -> tuple[float, int, int]:
    """Caption every span of the stream from scratch; returns (clips per second, nodes stored, failures)."""
    for suffix in ("", "-wal", "-shm"):  # a fresh memory: every span is to be captioned
        Path(f"{settings.data / DB_NAME}{suffix}").unlink(missing_ok=True)
    memory = open_memory(settings)
    captioner = OpenAICaptioner(settings.captioner.openai, max_in_flight=in_flight)
    began = time.perf_counter()
    with CoarseBuilder(settings, "bench", memory, captioner, frames=open_frames(settings)) as builder:
        drained = builder.drain(give_up_seconds=10, timeout=600, interval=0.01)
        took = time.perf_counter() - began
        failures = builder.stats.failures
    nodes = memory.count("bench", level="coarse")
    memory.close()
    if not drained:
        print(f"  builder did not finish: {builder.stats.as_dict()}")
    return spans / took, nodes, failures


def bench_throughput(latency: float, capacity: int, spans: int, max_frames: int, headroom: int) -> bool:
    ideal = capacity / latency
    print(f"\n== (1) builder throughput: scripted VLM server (own process), latency L = {latency:g} s, capacity "
          f"C = {capacity}; {spans} coarse spans already in the frame store, {max_frames} frames per request ==")
    print(f"  ideal C / L: {ideal:.2f} clips/s")
    server = ServerProcess(latency, capacity)
    ok = False
    with tempfile.TemporaryDirectory(prefix="lucy-bench-") as tmp, server as base_url:
        data = Path(tmp) / "data"
        coarse = settings_for(data, base_url, capacity, max_frames).levels.coarse
        filled_store(data, spans, coarse.span_seconds, coarse.fps, (160, 96))
        reader = ZarrFrameStore.open(data, "bench")
        began = time.perf_counter()
        for k in range(spans):
            clip = reader.read(k * coarse.span_seconds, (k + 1) * coarse.span_seconds, coarse.fps)
        reads = spans / (time.perf_counter() - began)
        print(f"  frame-store reads alone (one thread, {len(clip)} frames per clip at {coarse.fps:g} fps): "
              f"{reads:.1f} clips/s  <- the ceiling the builder shares the CPU with")
        # max_in_flight = C leaves each server slot idle while its client turns around (reply parsing, the
        # next request's encoding and upload); a few more requests than C keep the server's queue non-empty,
        # as clients of a batching vLLM server do.
        for in_flight in (capacity, capacity + headroom):
            settings = settings_for(data, base_url, in_flight, max_frames)
            baseline = asyncio.run(direct_baseline(settings, clip.frames, spans, in_flight))
            rate, nodes, failures = run_builder(settings, spans, in_flight)
            print(f"  captioner.max_in_flight = {in_flight}:")
            print(f"    baseline, direct AsyncOpenAI client ({in_flight} at once, same frames): {baseline:7.2f} clips/s"
                  f" = {baseline / ideal:.3f} x C/L")
            print(f"    builder (frame store -> openai captioner -> SQLite), {nodes} nodes, {failures} failures: "
                  f"{rate:7.2f} clips/s = {rate / ideal:.3f} x C/L")
            print(f"    RATIO builder / (C/L) = {rate / ideal:.3f} (target >= {TARGET}); "
                  f"RATIO builder / measured baseline = {rate / baseline:.3f}")
            ok = rate >= TARGET * ideal and nodes == spans  # judged on the last (recommended) setting
        served = server.counters()
    print(f"  server: {served['requests']} requests served, peak {served['peak_in_flight']} in flight "
          f"(capacity {capacity})")
    print(f"  throughput target (>= {TARGET} x C/L with max_in_flight = C + {headroom}): {'MET' if ok else 'NOT MET'}")
    return ok


def bench_pixels(repeat: int) -> None:
    from lucy.backends import builder_captioner

    print("\n== (2) pixels captioner speed (embedded CPU captioner: OCR, colours, motion, scene cuts) ==")
    with tempfile.TemporaryDirectory(prefix="lucy-bench-") as tmp:
        settings = load_settings(data=Path(tmp) / "data", preset="live", **{"captioner.backend": "pixels"})
        span = settings.levels.coarse.span_seconds
        video = text_video(Path(tmp) / "text.mp4", span * (repeat + 1))
        Ingestor(settings, str(video), "px", frames=open_frames(settings)).run()
        store = ZarrFrameStore.open(settings.data, "px")
        captioner = builder_captioner(settings)  # unguarded: the bench times the captioner itself
        instruction = settings.captioner.coarse_instruction
        for level in (Level.COARSE, Level.FINE):
            spec = settings.levels.level(level)
            # Warm up on the first span; time the others (different frames: nothing comes from a cache).
            asyncio.run(captioner.describe(store.read(0, spec.span_seconds, spec.fps), instruction, level=level))
            took, looked, frames = 0.0, 0, 0
            for r in range(1, repeat + 1):
                start = r * span
                clip = store.read(start, start + spec.span_seconds, spec.fps)
                began = time.perf_counter()
                caption = asyncio.run(captioner.describe(clip, instruction, level=level))
                took += time.perf_counter() - began
                looked += caption.frames or len(clip)
                frames += len(clip)
            print(f"  {level.value:6} level: {repeat} clips of {spec.span_seconds:3.0f} s, "
                  f"{frames // repeat} frames each "
                  f"({clip.frames.shape[2]}x{clip.frames.shape[1]}) of which the captioner analyses "
                  f"{looked // repeat}: {took / repeat * 1000:7.1f} ms per clip = {looked / took:7.1f} analysed "
                  f"frames/s ({frames / took:7.1f} clip frames/s)")
            print(f"         caption: {caption.text[:150]!r}{'...' if len(caption.text) > 150 else ''}")
        asyncio.run(captioner.aclose())


def text_video(path: Path, seconds: float) -> Path:
    colours = list(PALETTE.values())
    scenes = [Scene(t, min(t + 20, seconds), colours[i % len(colours)])
              for i, t in enumerate(range(0, int(seconds), 20))]
    overlays = [Overlay(t + 2, t + 12, f"GATE {t // 10 + 1} OPENS AT 0{t % 9}:30", size=0.07)
                for t in range(0, int(seconds), 30)]
    return write_video(path, duration=seconds, fps=10, scenes=scenes, overlays=overlays)


def bench_lag(seconds: float) -> None:
    from lucy.backends import builder_captioner

    print(f"\n== (3) caption lag: ingesting a generated {seconds:.0f} s 640x360 file faster than real time "
          f"(Ingestor + builder, as `lucy ingest` runs them), pixels captioner ==")
    with tempfile.TemporaryDirectory(prefix="lucy-bench-") as tmp:
        settings = load_settings(data=Path(tmp) / "data", preset="live", **{"captioner.backend": "pixels"})
        video = text_video(Path(tmp) / "lag.mp4", seconds)
        memory = open_memory(settings)
        samples: list[tuple[float, float, float]] = []  # (wall, ingested_until, lag)
        with CoarseBuilder(settings, "lag", memory, builder_captioner(settings),
                           frames=open_frames(settings)) as builder:
            def on_commit(store, stats) -> None:
                builder.on_commit(store, stats)
                samples.append((time.perf_counter(), stats.ingested_until, builder.stats.lag))

            began = time.perf_counter()
            result = Ingestor(settings, str(video), "lag", on_commit=on_commit, frames=open_frames(settings)).run()
            ingest_wall = time.perf_counter() - began
            lag_at_end = builder.stats.lag
            drained = builder.drain(timeout=600)
            drain_wall = time.perf_counter() - began - ingest_wall
            stats = builder.stats
        memory.close()
        lags = np.array([lag for _, _, lag in samples])
        span = settings.levels.coarse.span_seconds
        print(f"  ingest: {result.media_seconds:.0f} s of media in {ingest_wall:.2f} s "
              f"({result.media_seconds / ingest_wall:.0f}x real time), coarse span {span:.0f} s")
        print(f"  caption lag during ingest (media s): median {np.median(lags):7.1f}, p95 "
              f"{np.percentile(lags, 95):7.1f}, max {lags.max():7.1f}; at the end of ingest {lag_at_end:7.1f}")
        print(f"  (a span can only be captioned once it closes, so lag >= up to one span ({span:.0f} s) "
              f"is inherent)")
        print(f"  backlog drained {'' if drained else 'NOT '}in {drain_wall:.2f} s after the file was stored; "
              f"{stats.captioned} coarse captions, {stats.captions_per_second:.2f} captions/s (last 30 s), "
              f"{stats.failures} failures, captioned until {stats.captioned_until:.1f} s")
        print(f"  captioning keeps up with {result.media_seconds / (ingest_wall + drain_wall):.0f}x real time "
              f"end to end (media seconds per wall second, ingest + captions)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=1.0, help="simulated VLM latency per request (s)")
    parser.add_argument("--capacity", type=int, default=8, help="requests the simulated VLM serves at once")
    parser.add_argument("--spans", type=int, default=96, help="coarse spans captioned in the throughput test")
    parser.add_argument("--headroom", type=int, default=None,
                        help="extra requests the builder keeps in flight above C (default: C)")
    parser.add_argument("--max-frames", type=int, default=8, help="frames per request (captioner.openai.max_frames)")
    parser.add_argument("--repeat", type=int, default=3, help="pixels timing: best of this many")
    parser.add_argument("--ingest-seconds", type=float, default=600, help="length of the lag test's video")
    parser.add_argument("--skip-pixels", action="store_true", help="only the throughput test")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start "
          f"(other work on the machine makes every figure below noisier)")
    headroom = args.capacity if args.headroom is None else args.headroom
    ok = bench_throughput(args.latency, args.capacity, args.spans, args.max_frames, headroom)
    if not args.skip_pixels:
        bench_pixels(args.repeat)
        bench_lag(args.ingest_seconds)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

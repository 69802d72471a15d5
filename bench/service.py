"""Service benchmark: question latency while streams ingest at full speed, and ingest throughput per stream.

One ``lucy serve`` (embedded backends: the ``pixels`` captioner and the ``lexical`` reasoner), in one run:

  1. identical "question" streams are ingested and captioned from a generated video with details worth asking
     about (so every phase below starts from the same memory; one more takes the first-use costs);
  2. idle, first half: half of the questions, one at a time, on a question stream of its own, nothing ingesting;
  3. one load stream ingests a long 720p video at full speed (with its caption builder): throughput alone;
  4. loaded: four load streams ingest at full speed while the same questions are asked in two halves, each on
     a question stream of its own (a load stream that reaches the end of its file is started again);
  5. idle, second half: the load streams are removed and the second half is asked on a last question stream.

The order idle, loaded, loaded, idle cancels a machine that slows down or speeds up steadily over the run
(shared machines drift by tens of percent over minutes), which a plain idle-then-loaded order would count as
the cost of ingesting.

Prints question latency p50 / p95 idle and loaded and their ratio (target: loaded p50 and p95 <= 1.3 x idle),
and ingest throughput (media seconds per wall second) per stream with 1 and with 4 streams.

    .venv/bin/python bench/service.py [--questions 20] [--load-seconds 300]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from lucy.synth import PALETTE, Overlay, Scene, Shape, cached_video
from lucy.testing.waiting import free_port, stop_process

OUT = Path(__file__).resolve().parent / "out"

QUESTIONS: list[dict[str, Any]] = [
    {"question": "What was the delivery van's number plate?"},
    {"question": "What time does platform 7 depart?"},
    {"question": "When does the store close?"},
    {"question": "How many orange boxes were shown?", "options": ["1", "2", "3", "4"]},
    {"question": "What colour was the background at the start?", "options": ["red", "blue", "green", "purple"]},
]


def question_video() -> Path:
    """Two minutes with text details at known times (as in ``lucy demo``)."""
    scenes = [Scene(0, 40, PALETTE["blue"]), Scene(40, 80, PALETTE["green"]), Scene(80, 120, PALETTE["purple"])]
    overlays = [Overlay(8, 20, "DELIVERY VAN PLATE KX-4821", size=0.06),
                Overlay(45, 58, "PLATFORM 7 DEPARTS 14:05", size=0.06),
                Overlay(95, 110, "STORE CLOSES AT 9 PM", size=0.06)]
    shapes = [Shape(84, 100, PALETTE["orange"], count=3, x=0.1, y=0.5)]
    return cached_video(OUT / "service-questions-120s.mp4", duration=120, fps=25, scenes=scenes,
                        overlays=overlays, shapes=shapes)


def load_video(seconds: float) -> Path:
    """A long 720p25 textured video: realistic decoding work for the load streams."""
    return cached_video(OUT / f"service-load-720p25-{int(seconds)}s.mp4", duration=seconds, fps=25, width=1280,
                        height=720, preset="veryfast", gop=50, texture=True,
                        overlays=[Overlay(10, seconds - 10, "LOAD STREAM", size=0.05)])




class Server:
    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = workdir / "lucy.toml"
        config.write_text(f'data = "{workdir / "data"}"\npreset = "live"\n[captioner]\nbackend = "pixels"\n'
                          f'[service]\nport = {self.port}\nstats_interval_seconds = 1.0\n')
        env = {k: v for k, v in os.environ.items() if not k.startswith("LUCY_")}
        self.log = open(workdir / "serve.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen([sys.executable, "-m", "lucy", "serve", "--config", str(config)],
                                     stdout=self.log, stderr=self.log, env=env)
        self.http = httpx.Client(base_url=self.url, timeout=600)
        deadline = time.monotonic() + 120
        while True:
            try:
                if self.http.get("/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit(f"lucy serve did not start; see {workdir / 'serve.log'}")
            time.sleep(0.3)

    def add(self, name: str, source: Path, captioner: str = "pixels") -> None:
        r = self.http.post("/v1/streams", json={"name": name, "source": str(source), "captioner": captioner})
        r.raise_for_status()

    def status(self, name: str) -> dict[str, Any]:
        return self.http.get(f"/v1/streams/{name}").json()

    def wait(self, condition: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            failed = [s for s in self.http.get("/v1/streams").json()["streams"] if s["state"] == "failed"]
            if failed:
                raise SystemExit(f"stream {failed[0]['name']} failed: {failed[0]['error']}")
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what}")
            time.sleep(0.5)

    def ask(self, stream: str, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        began = time.perf_counter()
        r = self.http.post(f"/v1/streams/{stream}/questions", json=body)
        r.raise_for_status()
        return time.perf_counter() - began, r.json()

    def close(self) -> None:
        stop_process(self.proc, timeout=120)
        self.log.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def ask_all(server: Server, stream: str, n: int) -> list[float]:
    latencies = []
    for i in range(n):
        seconds, answer = server.ask(stream, QUESTIONS[i % len(QUESTIONS)])
        latencies.append(seconds)
        print(f"    {seconds:7.3f} s  {answer['llm_calls']:2d} llm  {answer['caption_calls']:2d} captions  "
              f"{'confident' if answer['confident'] else 'unsure   '}  {answer['answer'][:60]!r}", flush=True)
    return latencies


def throughput(server: Server, names: list[str], seconds: float) -> dict[str, float]:
    """Media seconds ingested per wall second by each stream over ``seconds`` (all must keep running)."""
    before = {n: server.status(n)["ingested_until"] for n in names}
    began = time.monotonic()
    time.sleep(seconds)
    after = {n: server.status(n) for n in names}
    wall = time.monotonic() - began
    for n, s in after.items():
        if s["state"] != "catching_up":  # a file read as fast as it goes
            print(f"  warning: {n} is {s['state']} at the end of the window", flush=True)
    return {n: (after[n]["ingested_until"] - before[n]) / wall for n in names}


class Keeper:
    """Keeps load streams ingesting: one that reaches the end of its file is started again from scratch."""

    def __init__(self, server: Server, names: list[str], video: Path) -> None:
        self.server, self.names, self.video = server, names, video
        self.restarts = 0
        self.idle_seen = 0  # polls that found a stream not ingesting (between its end and its restart)
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Keeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        http = httpx.Client(base_url=self.server.url, timeout=120)
        while not self._stop.wait(1.0):
            self.polls += 1
            for name in self.names:
                state = http.get(f"/v1/streams/{name}").json()["state"]
                if state == "catching_up":
                    continue
                self.idle_seen += 1
                if state == "finished":
                    http.delete(f"/v1/streams/{name}", params={"purge": "true"}).raise_for_status()
                    http.post("/v1/streams", json={"name": name, "source": str(self.video),
                                                   "captioner": "pixels"}).raise_for_status()
                    self.restarts += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=20, help="questions asked idle, and as many loaded")
    parser.add_argument("--load-seconds", type=float, default=300, help="length of the load video")
    parser.add_argument("--window", type=float, default=10, help="seconds over which ingest throughput is measured")
    args = parser.parse_args()

    qvideo, lvideo = question_video(), load_video(args.load_seconds)
    workdir = Path(tempfile.mkdtemp(prefix="lucy-bench-service-"))
    print(f"cores: {os.cpu_count()}; server data in {workdir}", flush=True)
    server = Server(workdir)
    try:
        first, second = (args.questions + 1) // 2, args.questions // 2
        names = ("q-warm", "q-idle-1", "q-loaded-1", "q-loaded-2", "q-idle-2")
        for name in names:
            server.add(name, qvideo)
        for name in names:
            server.wait(lambda n=name: (s := server.status(n))["state"] == "finished"
                        and s["captioned_until"] >= s["ingested_until"] > 0, 600, f"{name} captioned")
        server.ask("q-warm", QUESTIONS[0])  # first-use costs (OCR engines, imports) fall on neither phase

        print(f"\n[idle, first half] {first} questions, nothing ingesting", flush=True)
        idle = ask_all(server, "q-idle-1", first)

        print(f"\n[1 stream] ingest throughput over {args.window:.0f} s", flush=True)
        server.add("load-solo", lvideo)
        server.wait(lambda: server.status("load-solo")["ingested_until"] > 2, 120, "load-solo running")
        solo = throughput(server, ["load-solo"], args.window)
        server.http.delete("/v1/streams/load-solo", params={"purge": "true"}).raise_for_status()

        print(f"\n[loaded] 4 streams ingesting at full speed; {args.questions} questions", flush=True)
        loads = [f"load-{i}" for i in range(1, 5)]
        for name in loads:
            server.add(name, lvideo)
        server.wait(lambda: all(server.status(n)["ingested_until"] > 2 for n in loads), 180, "load streams running")
        four = throughput(server, loads, args.window)
        with Keeper(server, loads, lvideo) as keeper:
            loaded = ask_all(server, "q-loaded-1", first) + ask_all(server, "q-loaded-2", second)
        running_share = 1 - keeper.idle_seen / max(1, keeper.polls * len(loads))

        for name in loads:
            server.http.delete(f"/v1/streams/{name}", params={"purge": "true"}).raise_for_status()
        print(f"\n[idle, second half] {second} questions, nothing ingesting", flush=True)
        idle += ask_all(server, "q-idle-2", second)
    finally:
        server.close()
        shutil.rmtree(workdir, ignore_errors=True)

    p50_i, p95_i = statistics.median(idle), percentile(idle, 0.95)
    p50_l, p95_l = statistics.median(loaded), percentile(loaded, 0.95)
    print("\nquestion latency (embedded backends: pixels captioner, lexical reasoner)")
    print(f"  idle:                 p50 {p50_i:7.3f} s   p95 {p95_i:7.3f} s")
    print(f"  4 streams ingesting:  p50 {p50_l:7.3f} s   p95 {p95_l:7.3f} s   "
          f"(load streams running {100 * running_share:.0f}% of the time; {keeper.restarts} restarted at their end)")
    print(f"  ratio loaded / idle:  p50 {p50_l / p50_i:7.2f}     p95 {p95_l / p95_i:7.2f}     (target <= 1.3)")
    print(f"  total time of the {len(idle)} questions: idle {sum(idle):.1f} s, loaded {sum(loaded):.1f} s "
          f"(ratio {sum(loaded) / sum(idle):.2f})")
    print("ingest throughput per stream (media seconds per wall second, 720p25 at full speed, with captioning)")
    print(f"  1 stream:   {solo['load-solo']:6.2f} x real time")
    print(f"  4 streams:  {statistics.mean(four.values()):6.2f} x real time each "
          f"({', '.join(f'{v:.2f}' for v in four.values())}); total {sum(four.values()):.2f}")


if __name__ == "__main__":
    main()

"""Soak benchmark: one ``lucy serve`` answering thousands of questions while four streams ingest, one of whose
captioners hangs for part of the run. Then a compressed-time retention run (``bench/retention.py``).

Set-up (all real, on loopback): two RTSP cameras (GStreamer's RTSP server, live test pattern), two generated
files ingested at real-time pace, one of them captioned by an OpenAI-compatible server (scripted replies) that
stops replying between 40% and 70% of the questions (and for a short spell during the warm-up). Embedded backends
otherwise (``pixels``, ``lexical``).

Questions go round the four streams from four clients at once, over the plain JSON API, SSE and the OpenAI chat
API; most are answered from memory, one in ``--deep-every`` asks something new that needs deeper captions.

Prints, for the server process: open descriptors, RSS and threads after warm-up, in the middle and at the end
(target: end within 5% of after warm-up; warm-up is the first 10% of the questions, with a short hang in it),
failed questions (target 0), question latency p50/p95 on the healthy streams while the captioner hangs against
without (target ratio <= 1.3), and per stream gaps, decode errors and whether stored times only ever increase
(frames lost: target 0).

    .venv/bin/python bench/soak.py [--questions 10000] [--skip-retention]
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np

from lucy.ingest import ZarrFrameStore
from lucy.synth import PALETTE, Overlay, Scene, Shape, cached_video
from lucy.testing.openai_server import ScriptedOpenAIServer
from lucy.testing.waiting import free_port, stop_process, wait_for

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
RTSP_SERVER = HERE.parent / "tests" / "servers" / "rtsp_server.py"
CLIENTS = 4
SCRAPE_SECONDS = 5.0
# Shares of the questions between which the scripted captioner hangs: a short spell in the warm-up (so that every
# kind of work has run once before the figures are first taken), then the long one the latency figures compare.
WARM_UP = 0.1
HANGS = ((0.03, 0.06), (0.4, 0.7))

QUESTIONS = [
    "What was the delivery van's number plate?",
    "What time does platform 7 depart?",
    "When does the store close?",
    "How many orange boxes were shown?",
    "What colour was the background at the start?",
]


def soak_video(seconds: int) -> Path:
    """A long file with details at known times, repeating every two minutes."""
    scenes, overlays = [], []
    texts = ["DELIVERY VAN PLATE KX-4821", "PLATFORM 7 DEPARTS 14:05", "STORE CLOSES AT 9 PM"]
    colours = [PALETTE["blue"], PALETTE["green"], PALETTE["purple"]]
    for k, start in enumerate(range(0, seconds, 40)):
        scenes.append(Scene(start, min(start + 40, seconds), colours[k % 3]))
        overlays.append(Overlay(start + 8, min(start + 20, seconds), texts[k % 3], size=0.07))
    shapes = [Shape(s + 84, s + 100, PALETTE["orange"], count=3, x=0.1, y=0.5) for s in range(0, seconds - 100, 120)]
    return cached_video(OUT / f"soak-{seconds}s.mp4", duration=seconds, fps=10, width=480, height=270,
                        scenes=scenes, overlays=overlays, shapes=shapes)


def process_figures(pid: int) -> dict[str, float]:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    field = {line.split(":")[0]: line.split(":")[1].split() for line in status}
    return {"fds": len(os.listdir(f"/proc/{pid}/fd")), "rss_mb": int(field["VmRSS"][0]) / 1024,
            "threads": int(field["Threads"][0])}


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q * 100)) if values else float("nan")


class Soak:
    def __init__(self, workdir: Path, questions: int, deep_every: int, video_seconds: int) -> None:
        self.workdir = workdir
        self.questions = questions
        self.deep_every = deep_every
        self.video = soak_video(video_seconds)
        self.vlm = ScriptedOpenAIServer().start()
        self.rtsp: list[tuple[subprocess.Popen[bytes], str]] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.latencies: dict[str, list[float]] = {"healthy, captioner hung": [], "healthy, no hang": []}
        self.failures: list[str] = []
        self.answered = 0
        self.caption_calls = 0
        self.lock = threading.Lock()
        self.samples: dict[str, dict[str, float]] = {}

    # ------------------------------------------------------------------------------------ set-up

    def start(self) -> None:
        for k in range(2):
            port = free_port()
            proc = subprocess.Popen(["/usr/bin/python3", str(RTSP_SERVER), "--port", str(port), "--path", f"/cam{k}",
                                     "--fps", "10"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            assert proc.stdout is not None
            line = proc.stdout.readline().decode().strip()
            if not line.startswith("READY"):
                raise SystemExit(f"RTSP server did not start: {line}")
            self.rtsp.append((proc, line.split()[1]))
        config = self.workdir / "lucy.toml"
        config.write_text(
            f'data = "{self.workdir / "data"}"\npreset = "live"\n'
            f'[captioner]\nbackend = "pixels"\n[captioner.openai]\nbase_url = "{self.vlm.base_url}"\nmax_retries = 0\n'
            f'timeout_seconds = 30\n[query]\ncaption_timeout_seconds = 5\n'
            f'[service]\nport = {self.port}\nstats_interval_seconds = 1.0\nmax_concurrent_questions = 4\n')
        env = {k: v for k, v in os.environ.items() if not k.startswith("LUCY_")}
        self.log = open(self.workdir / "serve.log", "wb")  # noqa: SIM115
        self.server = subprocess.Popen([sys.executable, "-m", "lucy", "serve", "--config", str(config)],
                                       stdout=self.log, stderr=self.log, env=env)
        self.http = httpx.Client(base_url=self.url, timeout=600)
        wait_for(lambda: self.http.get("/readyz").status_code == 200, 120, "lucy serve", tolerate=(httpx.HTTPError,))
        streams = {"file-a": {"source": str(self.video), "realtime": True},
                   "file-b": {"source": str(self.video), "realtime": True, "captioner": "openai"},
                   "rtsp-0": {"source": self.rtsp[0][1]}, "rtsp-1": {"source": self.rtsp[1][1]}}
        for name, body in streams.items():
            self.http.post("/v1/streams", json={"name": name, **body}).raise_for_status()
        self.streams = list(streams)
        wait_for(lambda: all(self.http.get(f"/v1/streams/{n}").json()["captioned_until"] >= 60 for n in self.streams),
                 300, "a minute of coarse memory on every stream")

    def close(self) -> None:
        stop_process(self.server, timeout=120)
        self.log.close()
        for proc, _ in self.rtsp:
            stop_process(proc)
        self.vlm.stop()

    # ------------------------------------------------------------------------------------ the questions

    def question(self, i: int) -> tuple[str, str]:
        stream = self.streams[i % len(self.streams)]
        if self.deep_every and i % self.deep_every == self.deep_every - 1:
            return stream, f"Which letters and digits were written near second {(i * 7) % 100 + 10}, exactly?"
        return stream, QUESTIONS[(i // len(self.streams)) % len(QUESTIONS)]

    def ask(self, client: httpx.Client, i: int) -> None:
        stream, text = self.question(i)
        hung = self.vlm.latency > 0
        began = time.perf_counter()
        try:
            if i % 5 == 3:  # SSE
                with client.stream("POST", f"/v1/streams/{stream}/questions", json={"question": text},
                                   headers={"Accept": "text/event-stream"}) as r:
                    lines = [line for line in r.iter_lines() if line.startswith("event: ")]
                    ok = r.status_code == 200 and lines and lines[-1] == "event: answer"
                    detail = f"SSE {r.status_code} {lines[-1:]}"
                    calls = 0
            elif i % 5 == 4:  # the OpenAI-compatible chat API
                r = client.post("/v1/chat/completions",
                                json={"model": stream, "messages": [{"role": "user", "content": text}]})
                ok, detail = r.status_code == 200, f"chat {r.status_code} {r.text[:200]}"
                calls = r.json()["lucy"]["caption_calls"] if ok else 0
            else:
                r = client.post(f"/v1/streams/{stream}/questions", json={"question": text})
                ok, detail = r.status_code == 200, f"{r.status_code} {r.text[:200]}"
                calls = r.json()["caption_calls"] if ok else 0
        except httpx.HTTPError as err:
            ok, detail, calls = False, f"{type(err).__name__}: {err}", 0
        seconds = time.perf_counter() - began
        with self.lock:
            if not ok:
                self.failures.append(f"#{i} {stream}: {detail}")
                return
            self.answered += 1
            self.caption_calls += calls
            if stream != "file-b" and i >= self.questions * WARM_UP:
                self.latencies["healthy, captioner hung" if hung else "healthy, no hang"].append(seconds)

    def run(self) -> None:
        n = self.questions
        counter = itertools.count()
        marks = {int(n * WARM_UP): "after warm-up", int(n * (WARM_UP + 1) / 2): "middle", n - 1: "end"}
        hang_starts = {int(n * a) for a, _ in HANGS}
        hang_ends = {int(n * b) for _, b in HANGS}
        began = time.monotonic()

        def client_loop() -> None:
            with httpx.Client(base_url=self.url, timeout=600) as client:
                while (i := next(counter)) < n:
                    if i in hang_starts:
                        self.vlm.latency = 3600.0
                        print(f"  [{time.monotonic() - began:6.0f} s] question {i}: captioner of file-b hangs", flush=True)
                    elif i in hang_ends:
                        self.vlm.latency = 0.0
                        print(f"  [{time.monotonic() - began:6.0f} s] question {i}: captioner of file-b back", flush=True)
                    self.ask(client, i)
                    if i in marks:
                        self.samples[marks[i]] = process_figures(self.server.pid)
                        print(f"  [{time.monotonic() - began:6.0f} s] question {i}: {marks[i]}: "
                              f"{self.samples[marks[i]]}", flush=True)
                    if i % 1000 == 999:
                        print(f"  [{time.monotonic() - began:6.0f} s] {i + 1} questions, {len(self.failures)} failed",
                              flush=True)

        def scrape(done: threading.Event) -> None:  # as Prometheus would (it takes what the stats objects keep)
            with httpx.Client(base_url=self.url, timeout=60) as client:
                while not done.wait(SCRAPE_SECONDS):
                    client.get("/metrics").raise_for_status()

        done = threading.Event()
        scraper = threading.Thread(target=scrape, args=(done,), daemon=True)
        scraper.start()
        with ThreadPoolExecutor(CLIENTS) as pool:
            for future in [pool.submit(client_loop) for _ in range(CLIENTS)]:
                future.result()
        done.set()
        scraper.join(60)
        self.wall = time.monotonic() - began

    # ------------------------------------------------------------------------------------ the figures

    def report(self) -> None:
        n = self.questions
        print(f"\n{n} questions in {self.wall:.0f} s ({n / self.wall:.1f}/s), {self.answered} answered, "
              f"{len(self.failures)} failed (target 0), {self.caption_calls} caption calls")
        for failure in self.failures[:10]:
            print(f"  failed: {failure}")
        base = self.samples.get("after warm-up")
        print(f"\n{'server process':<16}" + "".join(f"{k:>16}" for k in self.samples) + f"{'end / warm-up':>16}")
        for key in ("fds", "rss_mb", "threads"):
            row = "".join(f"{s[key]:>16.1f}" for s in self.samples.values())
            ratio = self.samples["end"][key] / base[key] if base and "end" in self.samples else float("nan")
            print(f"{key:<16}{row}{ratio:>16.3f}")
        print("  (target: end within 5% of after warm-up)")
        calm, hung = self.latencies["healthy, no hang"], self.latencies["healthy, captioner hung"]
        print(f"\nhealthy-stream question latency   {'n':>6} {'p50 ms':>8} {'p95 ms':>8}")
        for name, values in (("without a hung captioner", calm), ("while file-b's captioner hangs", hung)):
            print(f"  {name:<32}{len(values):>6} {percentile(values, .5) * 1000:>8.1f} "
                  f"{percentile(values, .95) * 1000:>8.1f}")
        if calm and hung:
            print(f"  ratio hung / without: p50 {percentile(hung, .5) / percentile(calm, .5):.2f}, "
                  f"p95 {percentile(hung, .95) / percentile(calm, .95):.2f} (target <= 1.3)")
        print(f"\n{'stream':<8}{'state':>11}{'frames':>8}{'gaps':>6}{'decode errors':>15}{'restarts':>10}"
              f"{'times increase':>16}")
        for name in self.streams:
            s = self.http.get(f"/v1/streams/{name}").json()
            times = ZarrFrameStore.open(self.workdir / "data", name).times()
            increasing = bool(np.all(np.diff(times) > 0))
            print(f"{name:<8}{s['state']:>11}{s['frames']:>8}{s['gaps']:>6}{s['decode_errors']:>15}"
                  f"{s.get('restarts', 0):>10}{increasing!s:>16}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=10_000)
    parser.add_argument("--deep-every", type=int, default=200, help="one question in N needs new captions")
    parser.add_argument("--video-seconds", type=int, default=900, help="length of the two real-time file streams")
    parser.add_argument("--skip-retention", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lucy-soak-") as tmp:
        soak = Soak(Path(tmp), args.questions, args.deep_every, args.video_seconds)
        try:
            soak.start()
            print(f"four streams ingesting; asking {args.questions} questions from {CLIENTS} clients", flush=True)
            soak.run()
            soak.report()
        finally:
            soak.close()
    if not args.skip_retention:
        sys.path.insert(0, str(HERE))
        from retention import main as retention_main  # bench/retention.py

        print("\ncompressed-time retention run (bench/retention.py)", flush=True)
        retention_main([])


if __name__ == "__main__":
    main()

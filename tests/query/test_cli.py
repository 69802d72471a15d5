"""`lucy ask` from the command line, also from another process while `lucy ingest` runs on the same data."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lucy.ingest import ZarrFrameStore
from lucy.synth import PALETTE, Overlay, Scene, write_video
from lucy.testing import child_env

ENV = {"LUCY_INGEST__FRAME_WIDTH": "320", "LUCY_INGEST__FRAME_HEIGHT": "180",
       "LUCY_CAPTIONER__PIXELS__COARSE_MAX_FRAMES": "8", "LUCY_CAPTIONER__MAX_IN_FLIGHT": "2"}
OPTIONS = ["PLATFORM 2", "PLATFORM 7", "PLATFORM 9"]


def platform_video(path: Path, duration: float) -> Path:
    return write_video(path, duration=duration, fps=4, width=320, height=180,
                       scenes=[Scene(0, duration, PALETTE["teal"])],
                       overlays=[Overlay(2, 12, "PLATFORM 7", size=0.12, x=0.05, y=0.1),
                                 Overlay(2, 12, "DEPARTS 14:05", size=0.05, x=0.05, y=0.5)])


def _env() -> dict[str, str]:
    env = child_env()
    env.update(ENV)
    return env


def test_ask_while_another_process_ingests(tmp_path):
    video = platform_video(tmp_path / "v.mp4", 30)
    data = tmp_path / "data"
    ingest = subprocess.Popen([sys.executable, "-m", "lucy", "ingest", str(video), "--stream", "cam", "--realtime",
                               "--captioner", "pixels", "--data", str(data)], env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:  # wait until ingest has stored 14 s of media (the sign is shown from 2 to 12 s)
            assert ingest.poll() is None, ingest.communicate()
            try:
                if ZarrFrameStore.open(data, "cam").info().media_seconds >= 14:
                    break
            except Exception:  # noqa: BLE001  (not created yet)
                pass
            assert time.monotonic() < deadline, "ingest stored nothing"
            time.sleep(0.2)
        asked = subprocess.run([sys.executable, "-m", "lucy", "ask", "Which platform did the sign show?",
                                "--stream", "cam", "--data", str(data), "--json", *[a for o in OPTIONS for a in
                                                                                    ("--option", o)]],
                               env=_env(), capture_output=True, text=True, timeout=120)
        still_ingesting = ingest.poll() is None
    finally:
        ingest.terminate()
        ingest.communicate(timeout=60)
    assert asked.returncode == 0, asked.stderr
    out = json.loads(asked.stdout)
    assert still_ingesting
    assert out["answer"] == "PLATFORM 7" and out["option_index"] == 1
    assert 14 <= out["horizon"] < 30
    assert set(out) >= {"answer", "option_index", "confident", "evidence", "iterations", "llm_calls",
                        "caption_calls", "horizon", "trace"}
    # no coarse span of 60 s had closed yet: the question captioned the tail itself
    assert out["trace"][0]["agent"] == "tail" and out["trace"][0]["caption_calls"] == 1
    assert all(e["end"] <= out["horizon"] for e in out["evidence"])


@pytest.fixture
def ingested(tmp_path):
    video = platform_video(tmp_path / "v.mp4", 20)
    data = tmp_path / "data"
    done = subprocess.run([sys.executable, "-m", "lucy", "ingest", str(video), "--stream", "cam", "--captioner",
                           "pixels", "--data", str(data)], env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return data


def test_ask_prints_trace_and_answer(ingested):
    asked = subprocess.run([sys.executable, "-m", "lucy", "ask", "Which platform did the sign show?", "--stream",
                            "cam", "--data", str(ingested), *[a for o in OPTIONS for a in ("--option", o)]],
                           env=_env(), capture_output=True, text=True, timeout=120)
    assert asked.returncode == 0, asked.stderr
    lines = asked.stdout.splitlines()
    assert lines[0].startswith("#1") and " observe " in lines[0]  # coarse memory holds the sign: no captions
    assert "answer: PLATFORM 7 (option 1)" in lines
    costs = next(line for line in lines if " | horizon " in line)
    assert re.match(r"^\d+ rounds? \| \d+ llm calls? \| \d+ caption calls? \| horizon ", costs), costs
    assert "tokens" not in costs  # the embedded agents count no tokens: none are shown


def test_ask_errors_are_one_line(ingested):
    asked = subprocess.run([sys.executable, "-m", "lucy", "ask", "anything?", "--stream", "nope", "--data",
                            str(ingested)], env=_env(), capture_output=True, text=True, timeout=60)
    assert asked.returncode == 1
    assert asked.stderr.strip().count("\n") == 0 and "no stream named 'nope'" in asked.stderr
    asked = subprocess.run([sys.executable, "-m", "lucy", "ask", "  ", "--stream", "cam", "--data", str(ingested)],
                           env=_env(), capture_output=True, text=True, timeout=60)
    assert asked.returncode == 1 and "question is empty" in asked.stderr
    # Invisible characters are no question, and options that differ only by them (or by case) are one option.
    for args, message in ((["\u200b\u2060\ufeff"], "question is empty"),
                          (["Which colour?", "--option", "Red", "--option", "re\u200bd"], "are the same")):
        asked = subprocess.run([sys.executable, "-m", "lucy", "ask", *args, "--stream", "cam", "--data",
                                str(ingested)], env=_env(), capture_output=True, text=True, timeout=60)
        assert asked.returncode == 1 and asked.stderr.startswith("lucy: error:") and message in asked.stderr, args

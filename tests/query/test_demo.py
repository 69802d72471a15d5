"""`lucy demo` end to end (ingest as fast as possible; `make demo` paces it in real time)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from lucy.config import load_settings
from lucy.demo import run_demo

SHELL_PATH = "/usr/bin:/bin"  # a shell that has not activated the virtual environment


def test_demo_answers_its_questions(tmp_path, capsys, monkeypatch):
    """The demo keeps its stream, ``demo``, in ./lucy-data; the hints that follow are short and run as printed from
    the same folder; a second demo replaces the first one's stream."""
    monkeypatch.setenv("PATH", SHELL_PATH)
    monkeypatch.chdir(tmp_path)
    assert run_demo(load_settings(), realtime=False) == 0
    out = capsys.readouterr().out
    answers = [line.split("answer: ")[1] for line in out.splitlines() if "=> answer: " in line]
    assert answers == ["KX-4821 (option 1)", "14:05 (option 1)", "3 (option 1)", "KX-4821 (option 1)"]
    last = out.rsplit("? What was the plate number", 1)[1]
    assert "| 0 caption calls |" in last and "| 1 llm call |" in last  # asked again: answered from memory

    # The hints at the end run as printed, from that shell and folder, with no --data: ./lucy-data is the default.
    assert (tmp_path / "lucy-data").is_dir() and "--data" not in out.rsplit("kept in", 1)[1]
    listed, shown, asked = (subprocess.run(shlex.split(line.split(": ", 1)[1]), capture_output=True, text=True,
                                           check=False, timeout=120, env={"PATH": SHELL_PATH}, cwd=tmp_path)
                            for line in out.splitlines() if line.startswith(("try: ", " or: ")))
    assert listed.returncode == 0 and " demo " in listed.stdout, listed.stderr
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("demo: ") and "coarse captions cover 0-90.0 s" in shown.stdout
    assert asked.returncode == 0, asked.stderr
    assert "answer: " in asked.stdout and "KX-4821" in asked.stdout

    # Again, with --data: the earlier demo's stream is replaced (not added to), and the hints name that --data.
    data = tmp_path / "lucy-data"
    again = subprocess.run(["lucy", "demo", "--fast", "--data", str(data)], capture_output=True, text=True, check=False,
                           timeout=600, env={"PATH": str(Path(sys.executable).parent) + ":" + SHELL_PATH})
    assert again.returncode == 0, again.stderr
    assert f"replacing the stream 'demo' of an earlier demo in {data}" in again.stdout
    assert again.stdout.count("=> answer: ") == 4 and f"memory --stream demo --data {data}" in again.stdout
    [stream] = json.loads(lucy("streams", "--json", "--data", str(data)))
    assert stream["stream"] == "demo" and stream["frames"] == 180 and stream["media_seconds"] == 90.0  # not 360
    nodes = json.loads(lucy("memory", "--stream", "demo", "--data", str(data), "--json"))["nodes"]
    recorded = [(n["start"], n["end"]) for n in nodes if n["level"] == "coarse" and n["origin"] == "ingest"]
    assert recorded == [(0.0, 60.0), (60.0, 90.0)]  # one recording's coarse memory, not two


def lucy(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "lucy", *args], capture_output=True, text=True, check=False,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout

"""`lucy demo` end to end (ingest as fast as possible; `make demo` paces it in real time)."""

from __future__ import annotations

import shlex
import subprocess

from lucy.config import load_settings
from lucy.demo import run_demo

SHELL_PATH = "/usr/bin:/bin"  # a shell that has not activated the virtual environment


def test_demo_answers_its_questions(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", SHELL_PATH)
    assert run_demo(load_settings(), workdir=tmp_path, realtime=False) == 0
    out = capsys.readouterr().out
    answers = [line.split("answer: ")[1] for line in out.splitlines() if "=> answer: " in line]
    assert answers == ["KX-4821 (option 1)", "14:05 (option 1)", "3 (option 1)", "KX-4821 (option 1)"]
    last = out.rsplit("? What was the plate number", 1)[1]
    assert "| 0 caption calls |" in last and "| 1 llm call |" in last  # asked again: answered from memory

    # The hints at the end run as printed, from that shell.
    memory = next(line for line in out.splitlines() if line.startswith("try: "))
    shown = subprocess.run(shlex.split(memory.removeprefix("try: ")), capture_output=True, text=True, check=False,
                           timeout=120, env={"PATH": SHELL_PATH})
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("demo: ") and "coarse captions cover 0-90.0 s" in shown.stdout
    ask = next(line for line in out.splitlines() if line.startswith(" or: "))
    asked = subprocess.run(shlex.split(ask.removeprefix(" or: ")), capture_output=True, text=True, check=False,
                           timeout=120, env={"PATH": SHELL_PATH})
    assert asked.returncode == 0, asked.stderr
    assert "answer: " in asked.stdout and "KX-4821" in asked.stdout

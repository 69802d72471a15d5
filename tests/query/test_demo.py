"""`lucy demo` end to end (ingest as fast as possible; `make demo` paces it in real time)."""

from __future__ import annotations

from lucy.config import load_settings
from lucy.demo import run_demo


def test_demo_answers_its_questions(tmp_path, capsys):
    assert run_demo(load_settings(), workdir=tmp_path, realtime=False) == 0
    out = capsys.readouterr().out
    answers = [line.split("answer: ")[1] for line in out.splitlines() if "=> answer: " in line]
    assert answers == ["KX-4821 (option 1)", "14:05 (option 1)", "3 (option 1)", "KX-4821 (option 1)"]
    last = out.rsplit("? What was the plate number", 1)[1]
    assert "caption calls 0" in last and "llm calls 1 " in last  # asked again: answered from memory

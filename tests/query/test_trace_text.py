"""Trace text as people read it: cuts at word boundaries, counts with the right plural, token counts only where a
model counted them, and the short progress line a chat reply shows while a step runs."""

from __future__ import annotations

import pytest

from lucy.query.trace import TraceStep, progress_line
from lucy.text import clip_words, counted

INSTRUCTION = "needed to answer: At what time does the train to the harbour leave platform seven, as the " \
              "announcement said it would?"


def test_clip_words_cuts_between_words_with_an_ellipsis() -> None:
    assert clip_words("short enough", 20) == "short enough"
    assert clip_words("needed to answer: At what time", 26) == "needed to answer: At what…"
    assert clip_words("needed to answer: At what time", 19) == "needed to answer…"  # the dangling colon goes
    cut = clip_words(INSTRUCTION, 60)
    assert len(cut) <= 60 and cut.endswith("…") and INSTRUCTION.startswith(cut[:-1])
    assert INSTRUCTION[len(cut) - 1] == " "  # what was kept ends where a word ends
    # One long word leaves no boundary near enough: it is cut inside, still within the limit.
    assert clip_words("x" * 50, 10) == "x" * 9 + "…"
    assert clip_words("abc", 1) == "…" and clip_words("abc", 0) == ""


@pytest.mark.parametrize(("count", "noun", "text"), [
    (1, "round", "1 round"), (2, "round", "2 rounds"), (0, "caption", "0 captions"), (1, "caption", "1 caption"),
    (3, "llm call", "3 llm calls"), (2, "reply", "2 replies")])
def test_counted_says_singular_and_plural(count: int, noun: str, text: str) -> None:
    assert counted(count, noun, "replies" if noun == "reply" else None) == text


def test_a_trace_line_cuts_look_for_at_a_word_and_keeps_one_line() -> None:
    step = TraceStep(index=4, agent="caption", level="coarse", start=40, end=50, iteration=1,
                     instruction=INSTRUCTION.replace("platform", "platform\n"), caption_calls=1, llm_calls=0)
    line = step.line()
    assert "\n" not in line
    look_for = line.split(" | look for: ")[1].split(" [")[0]
    assert look_for.endswith("…") and len(look_for) <= 100
    assert " ".join(INSTRUCTION.split()).startswith(look_for[:-1]) and look_for[:-1].split()[-1] in INSTRUCTION.split()
    assert line.endswith("[1 caption, 0.00s]")


def test_a_trace_line_shows_tokens_only_where_a_model_counted_them() -> None:
    embedded = TraceStep(index=1, agent="answer", llm_calls=1, latency_seconds=0.01).line()
    assert "tok" not in embedded and "0+0" not in embedded and "[1 llm call, 0.01s]" in embedded
    model = TraceStep(index=1, agent="answer", llm_calls=2, prompt_tokens=321, completion_tokens=45,
                      caption_calls=7).line()
    assert "[2 llm calls, 321+45 tok, 7 captions, 0.00s]" in model


@pytest.mark.parametrize(("fields", "text"), [
    ({"agent": "answer", "iteration": 0}, "reading coarse memory …"),
    ({"agent": "answer", "iteration": 2}, "answering again with what round 2 found …"),
    ({"agent": "caption", "level": "fine", "start": 40.0, "end": 50.0, "iteration": 1},
     "looking closer at 0:40–0:50 …"),
    ({"agent": "tail", "level": "coarse", "start": 3600.0, "end": 3660.0},
     "captioning 1:00:00–1:01:00, which ingest has not captioned yet …"),
    ({"agent": "localise", "iteration": 3}, "round 3: choosing where to look closer …"),
    ({"agent": "final", "iteration": 5}, "settling on a final answer …"),
])
def test_progress_lines_say_what_a_step_is_doing(fields: dict, text: str) -> None:
    assert progress_line(TraceStep(index=1, **fields).to_json()) == text


def test_a_progress_line_quotes_what_to_look_for_only_whole() -> None:
    def line(instruction: str) -> str:
        return progress_line(TraceStep(index=5, agent="caption", level="coarse", start=40, end=50,
                                       instruction=instruction).to_json())

    assert line("the number on the van's\nplate") == "looking closer at 0:40–0:50 for: the number on the van's plate …"
    assert line(INSTRUCTION * 2) == "looking closer at 0:40–0:50 …"  # cut short it would say little

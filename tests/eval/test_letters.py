"""Option letters (and counts) from replies in prose, as lmms-eval reads them."""

from __future__ import annotations

import pytest

from lucy.eval.letters import extract_count, extract_letter

OPTIONS = ("a red van", "a blue truck", "a green bus", "a white car")


@pytest.mark.parametrize(("reply", "letter"), [
    ("C", "C"),
    ("The best answer is B.", "B"),
    ("The correct answer is (D) a white car", "D"),
    ("Answer: A", "A"),
    ("**B.** The truck is blue.", "B"),
    ("<think>maybe A? no</think> The answer is C", "C"),
    ("After reading the memories I believe it was a blue truck that stopped.", "B"),
    ("A van stopped at the gate, and the plate was read later; it was a green bus that left.", "C"),
    ("I could not find anything about vehicles in what I was shown, so I do not know which it was at all.", None),
    ("E", None),
    ("", None),
])
def test_extract_letter(reply: str, letter: str | None) -> None:
    assert extract_letter(reply, OPTIONS) == letter


def test_only_this_questions_letters() -> None:
    assert extract_letter("The answer is C", ("yes", "no")) is None
    assert extract_letter("B", ("yes", "no")) == "B"


def test_extract_count() -> None:
    assert extract_count("They jumped 3 times.") == "3"
    assert extract_count("none seen") is None

"""The kinds benchmark's sets and checkers (bench/kinds_sets.py, bench/kinds_seen_set.py, bench/kinds_test_set.py): each
split is a pure function of its seed, every split asks every kind, the splits differ from each other in what they show
and how they ask, and each checker tells a right answer from a wrong one (a checker that passes everything would hide
a wrong answer)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from kinds_seen_set import seen_set  # noqa: E402  (bench/ is a folder of scripts, not a package)
from kinds_sets import (  # noqa: E402
    KINDS,
    SIZE,
    Check,
    Question,
    Sign,
    Squares,
    VideoPlan,
    judge,
    judge_free,
    tune_set,
)
from kinds_test_set import test_set as held_out_set  # noqa: E402  (renamed: pytest would collect test_set)

SPLITS = {"tune": tune_set, "seen": seen_set, "test": held_out_set}


@pytest.mark.parametrize("split", list(SPLITS))
def test_a_split_is_a_pure_function_of_its_seed(split: str) -> None:
    make = SPLITS[split]
    assert make(3, False) == make(3, False)
    assert make(3, False) != make(4, False)
    quick_plans, quick_questions = make(3, True)
    plans, questions = make(3, False)
    assert len(quick_plans) == 1 < len(plans)
    assert quick_plans[0] == plans[0]
    assert {q.video for q in quick_questions} == {plans[0].name}


@pytest.mark.parametrize("split", list(SPLITS))
@pytest.mark.parametrize("quick", [False, True])
def test_every_kind_and_open_questions_with_and_without_options_are_in_each_split(split: str, quick: bool) -> None:
    plans, questions = SPLITS[split](1, quick)
    assert {q.kind for q in questions} == set(KINDS)
    assert any(q.open for q in questions)
    assert any(q.options for q in questions) and any(not q.options for q in questions)
    for q in questions:
        assert q.options == () or (q.truth is not None and 0 <= q.truth < len(q.options)
                                   and len(set(q.options)) == len(q.options))
    for plan in plans:  # events of 3-12 s inside a video of 1-3 minutes
        assert 60 <= plan.duration <= 180
        for event in (*plan.signs, *plan.squares):
            assert 3 <= event.end - event.start <= 12 and 0 <= event.start < event.end <= plan.duration


@pytest.mark.parametrize(("one", "other"), [("tune", "test"), ("seen", "test"), ("tune", "seen")])
def test_the_splits_differ_in_footage_vocabulary_and_phrasing(one: str, other: str) -> None:
    one_plans, one_questions = SPLITS[one](1, False)
    other_plans, other_questions = SPLITS[other](1, False)
    assert {p.footage for p in one_plans}.isdisjoint({p.footage for p in other_plans})
    words = {s.name for p in one_plans for s in p.signs}
    assert words.isdisjoint({s.name for p in other_plans for s in p.signs})
    assert {q.text for q in one_questions}.isdisjoint({q.text for q in other_questions})


def test_the_held_out_split_has_its_own_words_voices_square_colours_and_clear_sign_places() -> None:
    from kinds_sets import sign_width

    plans, _ = held_out_set(23, False)
    others = [plan for make in (tune_set, seen_set) for plan in make(1, False)[0]]
    seen_words = {w for p in others for s in p.signs for w in s.text.split() if w.isalpha()}
    assert seen_words.isdisjoint({w for p in plans for s in p.signs for w in s.text.split() if w.isalpha()})
    assert {a.voice for p in others for a in p.speech}.isdisjoint({a.voice for p in plans for a in p.speech})
    assert {q.colour for p in others for q in p.squares}.isdisjoint({q.colour for p in plans for q in p.squares})
    for plan in plans:  # a sign's place has one answer: its middle is well inside a third of the frame
        for sign in plan.signs:
            middle = (sign.x + sign_width(sign.text, sign.size) / 2, sign.y + 0.7 * sign.size)
            assert all(min(abs(m - 1 / 3), abs(m - 2 / 3)) > 0.03 for m in middle)
            assert sign.x >= 0 and sign.x + sign_width(sign.text, sign.size) <= 1


def _right(check: Check, answer: str, confident: bool = True, starts: tuple[float, ...] = ()) -> bool:
    return judge_free(check, answer, confident, list(starts))


def test_a_count_is_right_within_its_tolerance_and_a_time_is_not_a_count() -> None:
    exact = Check("count", 4, 4)
    assert _right(exact, "4 red squares (0:37-0:44).") and _right(exact, "Four.")
    assert not _right(exact, "5 red squares.") and not _right(exact, "At 0:04 the squares appeared.")
    assert not _right(exact, "The memory holds nothing about this.")
    loose = Check("count", 11, 22)
    assert _right(loose, "About 14 people walked by, 3 to 7 at a time.") and not _right(loose, "1")


def test_yes_and_no_are_read_from_the_first_such_word() -> None:
    assert _right(Check("yes"), "Yes — a red square at 0:37.") and not _right(Check("yes"), "No red square was seen.")
    assert _right(Check("no"), "No, no dog was seen.") and not _right(Check("no"), "Yes, but no more than one.")
    assert not _right(Check("no"), "The memory holds nothing about this.")


def test_a_time_is_right_inside_the_event_span_and_evidence_stands_in_for_a_time_not_said() -> None:
    span = Check("time", 50.6, 57.4)
    assert _right(span, "0:51 (the sign was seen 0:51-0:57).") and _right(span, "At 52 s.")
    assert not _right(span, "0:12 (the sign was seen 0:12-0:20).") and not _right(span, "Early on.")
    assert _right(span, "When the sign was up.", starts=(51.0,)) and not _right(span, "Then.", starts=(20.0,))


def test_order_text_colour_place_and_duration_checks_fail_a_wrong_answer() -> None:
    order = Check("first", expect=("EXIT", "PLATFORM"))
    assert _right(order, "The EXIT sign (0:50), then PLATFORM (1:05).") and _right(order, "exit")
    assert not _right(order, "PLATFORM came before EXIT.")
    text = Check("text", expect=("GATE 16 CLOSED",), wrong=("BUS 36 DELAYED",))
    assert _right(text, '"GATE 16 CLOSED" (top left).') and not _right(text, "GATE 16")
    assert not _right(text, "GATE 16 CLOSED, BUS 36 DELAYED and PLATFORM 5")  # every sign listed is no reading
    assert _right(Check("text", expect=("London 9",)), "The train to London leaves from platform nine.")
    assert not _right(Check("text", expect=("London 9",)), "The train to London leaves from platform 7.")
    assert _right(Check("colour", expect=("green",)), "Green (5 squares).")
    assert not _right(Check("colour", expect=("green",)), "Yellow, on a green background.")
    place = Check("place", expect=("middle", "left"))
    assert _right(place, "Middle left of the picture.") and not _right(place, "Top left.")
    seconds = Check("seconds", low=4.5, high=8.5)
    assert _right(seconds, "About 7 seconds (0:06-0:13).") and _right(seconds, "From 0:06 to 0:13.")
    assert not _right(seconds, "20 s.") and not _right(seconds, "A while.")


def test_a_summary_names_what_was_observed_in_its_period_only() -> None:
    check = Check("names", groups=(("people", "person"), ("ROOM 17",)), wrong=("PLATFORM 25",))
    assert _right(check, "0:00-0:20: 3-5 people in view; a sign ROOM 17 (0:06-0:13).")
    assert not _right(check, "A sign ROOM 17 (0:06-0:13).")  # the people in view are not named
    assert not _right(check, "People; ROOM 17; PLATFORM 25 later.")  # names what the period did not show
    assert not _right(check, "The memory holds nothing about this.")


def test_a_beyond_question_is_right_only_when_answered_without_confidence() -> None:
    unsure = Question("v", "beyond", "Why?", Check("unsure"), ("yes", "no"), 0)
    assert judge(unsure, "I cannot tell from what was observed: a vision-language model would be needed.", None,
                 False, [])
    assert not judge(unsure, "Because he was late.", None, True, [])
    assert not judge(unsure, "", None, False, [])


def test_with_options_the_option_picked_decides_and_a_free_answer_naming_one_picks_it() -> None:
    q = Question("v", "order", "Which came first?", Check("first", expect=("EXIT", "GATE")), ("GATE", "EXIT"), 1)
    assert judge(q, "EXIT", 1, True, []) and not judge(q, "EXIT", 0, True, [])
    assert judge(q, "exit", None, True, []) and not judge(q, "neither", None, True, [])


def test_the_painter_draws_each_event_only_during_its_span() -> None:
    from kinds import paint  # the runner imports Lucy's backends: only this test needs it

    from lucy.synth import PALETTE

    plan = VideoPlan("v", (), 60.0, signs=(Sign(10.0, 15.0, "ROOM 4", 0.05, 0.05),),
                     squares=(Squares(20.0, 25.0, "red", 3, x=0.1, y=0.6),))
    blank = np.full((SIZE[1], SIZE[0], 3), 90, np.uint8)
    assert (paint(blank.copy(), plan, 5.0) == blank).all()
    red = (paint(blank.copy(), plan, 21.0) == PALETTE["red"]).all(axis=-1)
    side = int(0.09 * SIZE[1])
    assert red.sum() == 3 * side * side  # three squares, nothing else
    sign = paint(blank.copy(), plan, 12.0)
    assert (sign != blank).any(axis=-1)[: SIZE[1] // 3, : SIZE[0] // 3].sum() > 100  # letters at the top left
    assert ((sign != blank).any(axis=-1)[SIZE[1] // 3:]).sum() == 0


def test_a_time_said_with_tenths_is_read_with_them() -> None:
    notice = Check("time", 48.2, 53.2)  # one second of slack either side
    assert _right(notice, "At 0:47.9 (the words were heard 0:47.9-0:51.8).")
    assert not _right(notice, "At 0:47.1.") and not _right(Check("time", 50.0, 55.0), "At 0:48.9.")

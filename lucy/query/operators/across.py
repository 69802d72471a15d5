"""Operators across streams: each stream's operator answers for its own stream (:func:`lucy.query.operators.
answer_question` over its observations and memory, in its media time), and :func:`combine` makes one answer of
them by the question's kind.

* *count* — per stream, and the total (the most in view at once: per stream, the most of any);
* *presence* — which streams saw it (a "no" needs every stream's "no");
* *time* — per stream, the earliest first; *order* across streams ("which camera saw the red van first?") — each
  stream's time of the thing, compared: wall-clock times where every stream has one (live cameras started at
  different times), media times otherwise;
* any other kind — each stream's answer, naming it; one that only one stream gives is that stream's.

Evidence stays with its stream: each span is put in the question's view time (:mod:`lucy.query.lanes`) by the
stream's offset, so the loop and the result know which camera it is on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from lucy.query.kinds import CountMode, Kind, ParsedQuestion
from lucy.query.operators.base import OperatorAnswer, with_options
from lucy.text import hms

# "Which camera saw the red van first?": an order question whose two sides are the streams themselves.
_WHICH_STREAM = re.compile(r"\b(?:which|what)\s+(?:camera|cam|stream|feed|view)s?\b|\bon which\s+(?:camera|stream)\b",
                           re.IGNORECASE)
_STREAM_WORDS = re.compile(r"\b(?:which|what)\s+(?:camera|cam|stream|feed|view)s?\b|\b(?:camera|cam|stream|feed)s?\b",
                           re.IGNORECASE)
_FIRST = re.compile(r"\b(?:first|earliest|earlier|sooner|before)\b", re.IGNORECASE)


@dataclass(frozen=True)
class StreamAnswer:
    """One stream's operator answer (None: its operator could not answer) and where the stream lies."""

    stream: str
    answer: OperatorAnswer | None
    offset: float = 0.0  # view time of the stream's media time 0
    wall_start: float | None = None  # Unix time of its media time 0 (live streams)


def per_stream(question: ParsedQuestion) -> ParsedQuestion:
    """The question each stream's operator answers: "which camera saw X first" asks each stream when it saw X (a
    time question about X, the words that name the streams taken out); any other question is asked as it is."""
    if question.kind is not Kind.ORDER or not _WHICH_STREAM.search(question.text):
        return question
    text = " ".join(_STREAM_WORDS.sub(" ", question.text).split())
    return replace(question, text=f"When was {text.rstrip('?').strip()} seen first?", kind=Kind.TIME)


def _named(one: StreamAnswer) -> str:
    assert one.answer is not None
    sentence = one.answer.answer.strip().rstrip(".")
    if sentence[:1].isupper() and not sentence[1:2].isupper():  # "At 0:12" reads "at 0:12"; all-capital sign text stays
        sentence = sentence[:1].lower() + sentence[1:]
    return f"on {one.stream}: {sentence}"


def _names(streams: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return streams[0] if len(streams) == 1 else f"{', '.join(streams[:-1])} and {streams[-1]}"


def _evidence(answers: Sequence[StreamAnswer]) -> tuple[tuple[float, float], ...]:
    return tuple((one.offset + a, one.offset + b) for one in answers if one.answer is not None
                 for a, b in one.answer.evidence)


def _reason(answers: Sequence[StreamAnswer]) -> str:
    return "; ".join(f"{one.stream}: {one.answer.reason if one.answer is not None else 'nothing observed or read'}"
                     for one in answers)


def _when(one: StreamAnswer, *, wall: bool) -> float:
    assert one.answer is not None and one.answer.value is not None
    return float(one.answer.value) + (one.wall_start or 0.0 if wall else 0.0)


def combine(question: ParsedQuestion, answers: Sequence[StreamAnswer],
            options: Sequence[str] = ()) -> OperatorAnswer | None:
    """One answer to ``question`` from each stream's (``answers``, in the streams' order), or None when no stream's
    operator could answer. Its evidence is in the question's view time."""
    answered = [one for one in answers if one.answer is not None]
    if not answered:
        return None
    silent = [one.stream for one in answers if one.answer is None]
    kind = question.kind
    found: OperatorAnswer
    if kind is Kind.COUNT and all(isinstance(one.answer.value, int | float) and not isinstance(one.answer.value, bool)
                                  for one in answered if one.answer is not None):
        found = _count(question, answered)
    elif kind is Kind.PRESENCE and all(isinstance(one.answer.value, bool) for one in answered if one.answer):
        found = _presence(answered)
    elif kind in (Kind.TIME, Kind.ORDER) and all(one.answer.seconds for one in answered if one.answer is not None):
        found = _first(question, answered)
    else:
        found = _each(answered)
    if silent and kind in (Kind.COUNT, Kind.PRESENCE) and not (kind is Kind.PRESENCE and found.value is True):
        found = found.doubted(f"nothing observed on {', '.join(silent)}")
    if options and found.option_index is None:
        found = with_options(found, options)
    return found


def _count(question: ParsedQuestion, answered: list[StreamAnswer]) -> OperatorAnswer:
    values = [int(one.answer.value) for one in answered if one.answer is not None]  # type: ignore[arg-type]
    each = "; ".join(_named(one) for one in answered)
    confidence = min(one.answer.confidence for one in answered if one.answer is not None)
    if question.count_mode is CountMode.TOTAL:
        total = sum(values)
        sentence = f"{total} in all across {len(answered)} streams ({each})." if len(answered) > 1 else \
            f"{each[:1].upper()}{each[1:]}"
    else:  # the most in view at once, or at a moment: per camera; the most of any is what one picture held
        total = max(values)
        sentence = f"At most {total} on any one stream ({each})." if len(answered) > 1 else \
            f"{each[:1].upper()}{each[1:]}"
    return OperatorAnswer(sentence, confidence, _evidence(answered), _reason(answered), value=total)


def _presence(answered: list[StreamAnswer]) -> OperatorAnswer:
    seen = [one for one in answered if one.answer is not None and one.answer.value is True]
    if seen:
        names = _names([one.stream for one in seen])
        each = "; ".join(_named(one) for one in seen)
        confidence = max(one.answer.confidence for one in seen if one.answer is not None)
        return OperatorAnswer(f"Yes, on {names} ({each}).", confidence, _evidence(seen), _reason(answered),
                              value=True)
    confidence = min(one.answer.confidence for one in answered if one.answer is not None)
    return OperatorAnswer(f"No: not seen on any of the {len(answered)} streams ({'; '.join(map(_named, answered))}).",
                          confidence, _evidence(answered), _reason(answered), value=False)


def _first(question: ParsedQuestion, answered: list[StreamAnswer]) -> OperatorAnswer:
    """Each stream's time of the thing, the earliest first (by wall clock where every stream has one)."""
    wall = all(one.wall_start is not None for one in answered)
    ordered = sorted(answered, key=lambda one: _when(one, wall=wall))
    first = ordered[0]
    assert first.answer is not None
    rest = "; ".join(_named(one) for one in ordered[1:])
    clock = "by the wall clock" if wall else "in media time from each stream's start"
    if question.kind is Kind.ORDER:
        if len(ordered) == 1:
            sentence = f"Only {first.stream} saw it ({_named(first)})."
        else:
            ahead = _when(ordered[1], wall=wall) - _when(first, wall=wall)
            sentence = (f"{first.stream} first, at {hms(float(first.answer.value or 0.0))}, {ahead:.0f} s before "
                        f"{ordered[1].stream} ({clock}): {_named(first)}; {rest}.")
        confidence = min(one.answer.confidence for one in ordered[:2] if one.answer is not None)
        return OperatorAnswer(sentence, confidence, _evidence(ordered), _reason(ordered), value=first.stream)
    sentence = f"First {_named(first)}" + (f"; then {rest}." if rest else ".")
    return OperatorAnswer(sentence, first.answer.confidence, _evidence(ordered), _reason(ordered),
                          value=first.answer.value, seconds=True)


def _each(answered: list[StreamAnswer]) -> OperatorAnswer:
    """Any other kind: each stream's answer, naming it; confident where they agree (or only one answers)."""
    if len(answered) == 1:
        one = answered[0]
        assert one.answer is not None
        return replace(one.answer, answer=f"On {one.stream}: {one.answer.answer}", evidence=_evidence(answered))
    values = {str(one.answer.value).lower() for one in answered if one.answer is not None}
    confidences = [one.answer.confidence for one in answered if one.answer is not None]
    confidence = max(confidences) if len(values) == 1 else min(confidences)
    sentence = "; ".join(_named(one) for one in answered) + "."
    first = answered[0].answer
    assert first is not None
    return OperatorAnswer(sentence[:1].upper() + sentence[1:], confidence, _evidence(answered), _reason(answered),
                          value=first.value if len(values) == 1 else None, seconds=first.seconds,
                          partial=any(one.answer.partial for one in answered if one.answer is not None))

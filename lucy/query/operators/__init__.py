"""Operators: one per kind of question (:mod:`lucy.query.kinds`), over what the detect stage observed and what
memory holds as lines, each with a confidence computed from the evidence.

* *count*, *presence* — tracks and per-frame counts (:mod:`.objects`); presence and count of what the detector does
  not name, from the statements of memory that mention it and the number they give (:mod:`.mentions`);
* *time*, *order*, *duration* — first / last-seen times of tracks, text sightings or transcript lines
  (:mod:`.timing`);
* *text*, *speech* — on-screen text sightings and transcript lines that hold the question's content words
  (:mod:`.reading`, over :mod:`.lines`);
* *attribute*, *beyond* — colours, places and ways of tracks or texts; an honest "memory holds ..., a vision-language
  model is needed" (:mod:`.describing`);
* *summary* — per part of the period, what was observed, read and heard (:mod:`.summary`).

:func:`answer_question` is the engine's fast path (VideoLucy's first step: answer from coarse memory, stop when
confident); :func:`restate` turns a memory line an agent chose into the answer sentence of the question's kind.
Blocking (store reads): the engine calls :func:`answer_question` in a thread.
"""

from __future__ import annotations

from collections.abc import Sequence

from lucy.memory.nodes import MemoryNode
from lucy.query.kinds import Kind, ParsedQuestion
from lucy.query.operators import describing, mentions, reading, timing
from lucy.query.operators.base import CONFIDENT, Observed, OperatorAnswer, observe, span_words, with_options
from lucy.query.operators.lines import (
    HEARD_LINE,
    Heard,
    MemoryLines,
    best_matches,
    content_terms,
    distinct,
    sightings_in,
)
from lucy.query.operators.objects import count, presence
from lucy.query.operators.summary import summary
from lucy.text import hms

__all__ = ["CONFIDENT", "FAST_KINDS", "OperatorAnswer", "answer_question", "restate"]

# Kinds an operator answers; OTHER goes to the agent loop as it is.
FAST_KINDS = frozenset(Kind) - {Kind.OTHER}
_OBJECT_KINDS = frozenset({Kind.COUNT, Kind.PRESENCE, Kind.SUMMARY})  # need the detect stage's observations


def answer_question(question: ParsedQuestion, store: object, stream: str, *, horizon: float,
                    nodes: Sequence[MemoryNode] = (), grid: Sequence[tuple[float, float]] = (),
                    options: Sequence[str] = (),
                    detector_labels: frozenset[str] | None = None) -> OperatorAnswer | None:
    """The operator's answer to ``question`` from observations and memory ``nodes``, or None when none can answer
    it: another kind, a subject the detector does not name, nothing observed or read that fits. Blocking."""
    kind = question.kind
    if kind not in FAST_KINDS or (kind is Kind.SUMMARY and options):
        return None  # a summary chooses no option
    subject = question.subject
    unknown = subject is not None and detector_labels is not None and not subject.labels & detector_labels
    if kind in (Kind.PRESENCE, Kind.COUNT) and (subject is None or unknown):
        return _from_mentions(question, nodes, horizon, options)
    if unknown:  # "none seen" of a class the detector cannot name means nothing: read memory's lines alone
        question = ParsedQuestion(question.text, kind, None, question.period, question.count_mode, question.colour,
                                  question.still)
    start, end = question.period.bounds(horizon)
    observed = observe(store, stream, start, end)
    if kind in _OBJECT_KINDS and observed is None:
        return None
    lines = MemoryLines.of(nodes).within(start, end)
    if kind is Kind.SUMMARY:
        assert observed is not None
        return summary(question, observed, lines, grid)
    found = _by_kind(question, observed, lines, options, detector_labels)
    if found is None:
        return None
    if kind is Kind.ORDER and found.option_index is not None:
        return found  # the options were the two things compared
    return with_options(found, options, tolerance=_tolerance(question, found))


def _from_mentions(question: ParsedQuestion, nodes: Sequence[MemoryNode], horizon: float,
                   options: Sequence[str]) -> OperatorAnswer | None:
    """Presence or count of a thing the detector does not name (or of no named thing): from the statements of
    memory in the period that mention it (:mod:`.mentions`), with the option it picks; None when none does."""
    start, end = question.period.bounds(horizon)
    operator = mentions.presence if question.kind is Kind.PRESENCE else mentions.count
    found = operator(question, nodes, start, end)
    return None if found is None else with_options(found, options)


def _by_kind(question: ParsedQuestion, observed: Observed | None, lines: MemoryLines, options: Sequence[str],
             detector_labels: frozenset[str] | None) -> OperatorAnswer | None:
    """The answer of the operator of ``question``'s kind (any but a summary), before it picks an option; None when
    it finds nothing that fits. Count and presence need ``observed``."""
    kind = question.kind
    if kind is Kind.COUNT:
        assert observed is not None
        return count(question, observed)
    if kind is Kind.PRESENCE:
        assert observed is not None
        return presence(question, observed)
    if kind is Kind.TEXT:
        return reading.text(question, lines)
    if kind is Kind.SPEECH:
        return reading.speech(question, lines)
    if kind is Kind.TIME:
        return timing.when(question, observed, lines)
    if kind is Kind.DURATION:
        return timing.how_long(question, observed, lines)
    if kind is Kind.ORDER:
        return timing.order(question, observed, lines, tuple(options), detector_labels)
    if kind is Kind.ATTRIBUTE:
        return describing.attribute(question, observed, lines)
    return describing.beyond(question, observed, lines)


def _tolerance(question: ParsedQuestion, found: OperatorAnswer) -> float:
    """How far in seconds an option may be from the answer's time and still be its option: 5 s, or 15% of a long
    duration."""
    return max(5.0, 0.15 * float(found.value)) if question.kind is Kind.DURATION and found.value else 5.0


def restate(question: ParsedQuestion, line: str) -> str | None:
    """The answer sentence of ``question``'s kind read from ``line``, a memory line an agent answered with (an
    on-screen text sighting or a transcript line in it); None when the kind's operator cannot read it."""
    kind = question.kind
    if kind not in (Kind.TEXT, Kind.TIME, Kind.DURATION, Kind.SPEECH):
        return None
    wanted = content_terms(question.text)
    if kind is Kind.SPEECH:
        heard = [Heard.of(m) for m in HEARD_LINE.finditer(line)]
        matches = distinct(best_matches(heard, wanted))
        if not matches or (len(heard) != 1 and not (len(matches) == 1 and matches[0].complete)):
            return None
        h = matches[0].line
        return f'"{h.text}" (said at {hms(h.start)}).' if isinstance(h, Heard) else None
    sightings = sightings_in(line)
    # Only a line that says one thing: one text in it, or one text that alone holds every content word. A line
    # with a place sign and a code under it, for "what did the plate at the gate read", keeps its words.
    matches = distinct(best_matches(sightings, wanted))
    if not matches or (len({s.text.upper() for s in sightings}) != 1 and not (len(matches) == 1 and
                                                                             matches[0].complete)):
        return None
    s = matches[0].line
    if isinstance(s, Heard):
        return None
    seen = span_words(s.first, s.last)
    if kind is Kind.TIME:
        return f'At {hms(s.first)} ("{s.text}", seen {seen}).'
    if kind is Kind.DURATION:
        return f'About {round(s.last - s.first)} seconds ("{s.text}", seen {seen}).'
    value = reading.answer_part(s.text, reading.wh_noun(question.text), wanted)
    return f'{value} (the text "{s.text}" was seen {seen}).' if value and value != s.text else \
        f'"{s.text}" (seen {seen}).'

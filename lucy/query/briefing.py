"""The brief a model-backed reasoner gets with a question: its kind and a table of what was observed in its period.

A chat model that answers from captions alone counts people by reading prose ("people walk by"), while the detect
stage already followed each of them, counted every detected frame, and OCR read the signs. So the engine reads those
records for the question's period once and hands them down with the question (:class:`QuestionBrief`), for reasoners
that show them (:attr:`~lucy.query.reasoners.base.Reasoner.reads_observations`): every class (distinct tracks, the
most in view at once, first and last seen), the longest and most confident tracks, text read on screen and words
heard. The table is bounded here in rows; :mod:`lucy.query.prompts` bounds it in characters and shows it as data.

Blocking (store reads): the engine calls :func:`question_brief` in a thread.
"""

from __future__ import annotations

from collections.abc import Sequence

from lucy.memory.nodes import MemoryNode
from lucy.perception.describe import looks
from lucy.perception.objects import TrackedObject
from lucy.query import prompts
from lucy.query.kinds import CountMode, Kind, ParsedQuestion, parse
from lucy.query.operators.base import SOLID_SCORE, Observed, observe
from lucy.query.operators.lines import MemoryLines
from lucy.query.reasoners.base import ClassRow, ObservationTable, QuestionBrief, Sighting, TrackRow
from lucy.text import split_follow_up

MAX_TRACK_ROWS = 20  # tracks listed one by one; the classes' rows count them all
MAX_SIGHTINGS = 16  # text sightings, and speech lines, each
MOMENT_WINDOW_SECONDS = 5.0  # a question about a moment is shown the text and speech this close to it

_DETAILS = {CountMode.TOTAL: "distinct ones over the period", CountMode.AT_ONCE: "the most in view at once",
            CountMode.MOMENT: "how many were in view at that moment"}


def _detail(parsed: ParsedQuestion) -> str:
    parts = [_DETAILS[parsed.count_mode]] if parsed.kind is Kind.COUNT else []
    if parsed.colour:
        parts.append(f"colour {parsed.colour}")
    if parsed.still is True:
        parts.append("one that stayed in place")
    elif parsed.still is False and parsed.subject is not None:
        parts.append("one that moved")
    return "; ".join(parts)


def _rank(track: TrackedObject) -> tuple[float, float, int]:
    # The longest-lived and surest first: a parked van and a person who crossed the picture tell more than a
    # half-second detection a model might count as one more.
    return (-track.dwell * min(1.0, track.score / SOLID_SCORE), -track.score, track.track_id)


def observation_table(observed: Observed | None, nodes: Sequence[MemoryNode], start: float,
                      end: float) -> ObservationTable | None:
    """The table of ``[start, end]``: ``observed`` (None: the detector never reached it) and the on-screen text
    and speech of ``nodes``; None when there is nothing at all to show."""
    lo, hi = (start - MOMENT_WINDOW_SECONDS, end + MOMENT_WINDOW_SECONDS) if end - start < 1.0 else (start, end)
    lines = MemoryLines.of(nodes).within(lo, hi)
    texts = tuple(Sighting(s.first, s.last, s.text) for s in lines.sightings[:MAX_SIGHTINGS])
    speech = tuple(Sighting(h.start, h.end, h.text) for h in lines.heard[:MAX_SIGHTINGS])
    if observed is None:
        if not texts and not speech:
            return None
        return ObservationTable(start, end, None, texts=texts, speech=speech)
    tracks = sorted(observed.tracks, key=_rank)
    by_label: dict[str, list[TrackedObject]] = {}
    for track in tracks:
        by_label.setdefault(track.label, []).append(track)
    tol = observed.tolerance if end - start < 1e-6 else 1e-6
    samples = [c for c in observed.counts if start - tol <= c.time <= end + tol]
    peaks: dict[str, int] = {}
    seen: dict[str, tuple[float, float]] = {}
    for sample in samples:
        for label, n in sample.counts.items():
            if int(n) > 0:
                peaks[label] = max(peaks.get(label, 0), int(n))
                a, b = seen.get(label, (sample.time, sample.time))
                seen[label] = (min(a, sample.time), max(b, sample.time))
    classes = []
    for label in sorted(set(by_label) | set(peaks), key=lambda lb: (-len(by_label.get(lb, ())), lb)):
        own = by_label.get(label, [])
        first = min((t.first_seen for t in own), default=seen.get(label, (start, start))[0])
        last = max((t.last_seen for t in own), default=seen.get(label, (end, end))[1])
        classes.append(ClassRow(label, len(own), peaks.get(label, 0), first, last))
    rows = tuple(TrackRow(t.track_id, t.label, t.first_seen, t.last_seen, t.entered, t.exited, t.moving, looks(t),
                          t.score) for t in tracks[:MAX_TRACK_ROWS])
    return ObservationTable(start, end, observed.coverage, tuple(classes), rows, len(tracks), texts, speech)


def question_brief(text: str, store: object, stream: str, *, horizon: float, nodes: Sequence[MemoryNode],
                   budget_tokens: int | None = None) -> QuestionBrief:
    """What ``text`` asks (its own words, not a follow-up's earlier conversation) and what was observed in the
    period it names, from ``store`` (a memory store, which keeps the observations) and ``nodes`` (memory up to the
    horizon, for text read on screen and speech). ``budget_tokens``: the prompts' context budget, of which the table
    takes a bounded share (:func:`lucy.query.prompts.observation_chars`)."""
    own, _ = split_follow_up(text)
    parsed = parse(own)
    start, end = parsed.period.bounds(horizon)
    table = observation_table(observe(store, stream, start, end), nodes, start, end)
    return QuestionBrief(kind=parsed.kind.value, subject=parsed.subject.name if parsed.subject else None,
                         period=None if parsed.period.whole else (start, end), period_words=parsed.period.words,
                         detail=_detail(parsed), table=table, max_chars=prompts.observation_chars(budget_tokens))

"""What every operator shares: its answer, the observations of a period, and how an answer picks an option.

An :class:`OperatorAnswer` carries a sentence, the value it rests on (a number, yes / no, a time, a text), evidence
times and a confidence computed from the evidence (how much of the period the detector watched, the tracks' scores,
how far independent readings agree, how many candidates compete), never from the words of the question: an
operator states those facts as :class:`Grounds` and :func:`confidence` turns them into one number and a reason.
With options, the option that the value picks is chosen; an option that only nearly fits keeps the answer below
:data:`CONFIDENT`, so the agent loop looks closer.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from lucy.perception.describe import looks
from lucy.perception.objects import CountSample, ObservationStore, TrackedObject
from lucy.query.kinds import ParsedQuestion, Subject, clock_seconds
from lucy.text import hms, terms

CONFIDENT = 0.7  # an operator's answer at or above this confidence ends the question
DOUBT = CONFIDENT / 2  # what an answer is capped at when something speaks against it
FULL_COVERAGE = 0.95  # a "no" needs the detector to have watched this share of the period
MIN_GAP_SECONDS = 2.0  # count samples further apart than this (or 3 detect intervals) leave a gap unobserved
SOLID_SCORE = 0.5  # a track whose best detector score reaches this is taken as real
_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_NUMBER = re.compile(r"\b(\d+|" + "|".join(_NUMBER_WORDS) + r")\b")
_ORDINALS = {w: i + 1 for i, w in enumerate(
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth".split())}

Value = int | float | bool | str | None


@dataclass(frozen=True)
class OperatorAnswer:
    """An operator's answer: a sentence, its value, the evidence times and a confidence in [0, 1].

    ``value`` is what options are matched against: a count (int), yes / no (bool), a media time in seconds
    (float, with ``seconds=True``) or a length of time (float), or the words that answer (str)."""

    answer: str
    confidence: float
    evidence: tuple[tuple[float, float], ...] = ()
    reason: str = ""
    option_index: int | None = None
    value: Value = None
    seconds: bool = False  # value is a media time (matched against options that name a time)
    partial: bool = False  # its evidence lacks some of what the question names (a line holding some content words)

    @property
    def confident(self) -> bool:
        return self.confidence >= CONFIDENT

    def doubted(self, why: str) -> OperatorAnswer:
        """This answer, kept below :data:`CONFIDENT` with the reason why."""
        return replace(self, confidence=min(self.confidence, DOUBT), reason=f"{self.reason}; {why}")


@dataclass(frozen=True)
class Grounds:
    """The evidence facts an operator's value rests on, each a share in [0, 1] (1: nothing speaks against it).

    * ``coverage`` — how much of the asked period was watched at the depth the thing needs (a "no" or a count
      over a period the detector did not wholly watch may have missed some);
    * ``quality`` — how sure the readings themselves are (detector scores against :data:`SOLID_SCORE`, OCR);
    * ``agreement`` — how far independent readings of the same value agree (distinct tracks against the arrivals
      the per-frame counts show; the tracks of a class that say the same colour);
    * ``candidates`` — how many different values fit the question alike (1: one; more: the question does not say
      which, whatever the other facts say);
    * ``notes`` — why, in words, for the trace and the answer's reason.
    """

    coverage: float = 1.0
    quality: float = 1.0
    agreement: float = 1.0
    candidates: int = 1
    notes: tuple[str, ...] = ()


def confidence(grounds: Grounds) -> tuple[float, str]:
    """The confidence the evidence ``grounds`` allow, and the weakest fact in words.

    The weakest fact decides (a minimum, not a product: one thin fact is as thin however solid the others are), so
    a confident answer needs every fact at :data:`CONFIDENT` or better; several candidates cap it at :data:`DOUBT`.
    """
    facts = {"coverage of the period": grounds.coverage, "quality of the readings": grounds.quality,
             "agreement between readings": grounds.agreement}
    weakest = min(facts, key=lambda k: facts[k])
    value = max(0.0, min(1.0, facts[weakest]))
    why = f"weakest: {weakest} {value:.2f}"
    if grounds.candidates > 1:
        value = min(value, DOUBT)
        why = f"{grounds.candidates} candidates fit alike; {why}"
    return value, "; ".join((*grounds.notes, why))


@dataclass(frozen=True)
class Observed:
    """What the detect stage stored for ``[start, end]`` of a stream (``until``: how far it had looked)."""

    start: float
    end: float
    until: float
    tracks: Sequence[TrackedObject] = ()
    counts: Sequence[CountSample] = field(default_factory=tuple)

    @property
    def tolerance(self) -> float:
        """The widest gap between count samples that still counts as watched."""
        times = [c.time for c in self.counts]
        if len(times) < 2:
            return MIN_GAP_SECONDS
        return max(MIN_GAP_SECONDS, 3 * statistics.median(b - a for a, b in zip(times, times[1:], strict=False)))

    @property
    def coverage(self) -> float:
        """The share of the period the detector watched (:meth:`coverage_of` the whole period)."""
        return self.coverage_of(self.start, self.end)

    def coverage_of(self, start: float, end: float) -> float:
        """The share of ``[start, end]`` the detector watched: count samples with no wider gap than
        :attr:`tolerance` between them and the bounds, up to ``until``. A moment is covered by a sample close to
        it."""
        tol = self.tolerance
        times = [c.time for c in self.counts if start - tol <= c.time <= end + tol]
        if end - start < 1e-6:
            return 1.0 if any(abs(t - start) <= tol for t in times) else 0.0
        lost = 0.0
        edges = [start, *[min(max(t, start), end) for t in times], min(end, self.until)]
        for a, b in zip(edges, edges[1:], strict=False):
            lost += max(0.0, b - a - tol)
        lost += max(0.0, end - max(self.until, start))
        return max(0.0, 1.0 - lost / (end - start))

    def of(self, subject: Subject) -> list[TrackedObject]:
        return [t for t in self.tracks if t.label in subject.labels]

    def series(self, subject: Subject) -> list[tuple[float, int]]:
        """(time, how many of the subject were in view) per count sample in the period."""
        return [(c.time, sum(int(n) for label, n in c.counts.items() if label in subject.labels))
                for c in self.counts if self.start - 1e-6 <= c.time <= self.end + 1e-6]

    def arrivals(self, subject: Subject) -> int:
        """How many of the subject came into view, read from the per-frame counts alone (no tracker): those in view
        at the first sample, plus every rise of the count after. A detection missed for one frame would read as a
        leaving and an arrival, so the counts are smoothed first (the median of each sample and its neighbours).
        An independent reading of a distinct count: a tracker that splits one person into two tracks leaves it
        unchanged."""
        values = [n for _, n in self.series(subject)]
        if not values:
            return 0
        smooth = [statistics.median(values[max(0, i - 1):i + 2]) for i in range(len(values))]
        return round(smooth[0] + sum(max(0.0, b - a) for a, b in zip(smooth, smooth[1:], strict=False)))


def observe(store: object, stream: str, start: float, end: float) -> Observed | None:
    """The observations of ``[start, end]``, or None when the detect stage never reached that part of the stream
    (or ``store`` keeps no observations)."""
    if not isinstance(store, ObservationStore):
        return None
    until = store.observed_until(stream)
    if until is None or until <= start:
        return None
    tol = MIN_GAP_SECONDS
    tracks = [t for t in store.object_tracks(stream, start=start, end=max(end, start + 1e-3) + 1e-6)
              if t.last_seen >= start and t.first_seen <= end]
    return Observed(start, end, until, tracks, store.object_counts(stream, start - tol, end + tol))


# ------------------------------------------------------------------------------------------- words and tracks

def span_words(start: float, end: float) -> str:
    return f"{hms(start)}–{hms(end)}" if end - start >= 0.05 else hms(start)


def matching(question: ParsedQuestion, tracks: Sequence[TrackedObject]) -> list[TrackedObject]:
    """The tracks a question's details keep: a colour it names, and "stopped / parked / standing" (not moving)."""
    kept = list(tracks)
    if question.colour is not None:
        kept = [t for t in kept if question.colour in looks(t).split()]
    if question.still:
        kept = [t for t in kept if not t.moving]
    return kept


def quality(tracks: Sequence[TrackedObject]) -> float:
    """How sure the tracks are real: their mean best score against :data:`SOLID_SCORE` (1 for no tracks)."""
    if not tracks:
        return 1.0
    return statistics.fmean(min(1.0, t.score / SOLID_SCORE) for t in tracks)


def what(subject: Subject, question: ParsedQuestion) -> str:
    colour = f"{question.colour} " if question.colour else ""
    return f"{colour}{subject.name}"


def described(track: TrackedObject, name: str) -> str:
    """"a white car", "a person (red top)", "a dog": a track as an answer names it."""
    look = looks(track)
    if not look:
        return f"a {name}"
    return f"a {name} ({look})" if track.label == "person" else f"a {look} {track.label}"


# ------------------------------------------------------------------------------------------- options

def number_of(text: str) -> int | None:
    m = _NUMBER.search(text.lower())
    if m is None:
        return None
    return int(m[1]) if m[1].isdigit() else _NUMBER_WORDS[m[1]]


def _pick_number(options: Sequence[str], value: float) -> tuple[int | None, bool]:
    """The option whose number is ``value`` (exact: True), else the nearest (False); None when none has a number."""
    numbered = [(i, n) for i, o in enumerate(options) if (n := number_of(o)) is not None]
    if not numbered:
        return None, False
    exact = [i for i, n in numbered if n == value]
    if len(exact) == 1:
        return exact[0], True
    return min(numbered, key=lambda p: (abs(p[1] - value), p[0]))[0], False


def _pick_yes_no(options: Sequence[str], value: bool) -> int | None:
    words = ("yes", "true") if value else ("no", "false")
    for i, option in enumerate(options):
        if option.strip().lower().split(" ", 1)[0].strip(".,!—-") in words:
            return i
    return None


_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0}
_OPTION_CLOCK = re.compile(r"\b(\d+:\d{2}(?::\d{2})?)\b")
_OPTION_AMOUNT = re.compile(r"\b(\d+(?:\.\d+)?)\s*(h(?:ours?|rs?)?|m(?:inutes?|ins?)?|s(?:econds?|ecs?)?)\b")
_OPTION_MINUTE = re.compile(r"\bminute\s+(\d+)\b|\b(\d+)(?:st|nd|rd|th)\s+minute\b|\b(" + "|".join(_ORDINALS) +
                            r")\s+minute\b")


def option_time(option: str) -> tuple[float, float] | None:
    """The media time an option names, as a range: "2:20" -> (140, 140), "90 seconds" -> (90, 90), "minute 3" or
    "the third minute" -> (120, 180); None when it names none."""
    text = option.lower()
    if m := _OPTION_MINUTE.search(text):
        n = int(m[1] or m[2]) if (m[1] or m[2]) else _ORDINALS[m[3]]
        return (n - 1) * 60.0, n * 60.0
    if m := _OPTION_CLOCK.search(text):
        t = clock_seconds(m[1])
        return t, t
    if m := _OPTION_AMOUNT.search(text):
        t = float(m[1]) * _UNIT_SECONDS[m[2][0]]
        return t, t
    return None


def _pick_time(options: Sequence[str], value: float, tolerance: float) -> tuple[int | None, bool]:
    """The option whose time holds ``value`` (within ``tolerance`` of a point, inside a range): exact when only
    one does; else the nearest, not exact."""
    timed = [(i, r) for i, o in enumerate(options) if (r := option_time(o)) is not None]
    if not timed:
        return None, False

    def distance(r: tuple[float, float]) -> float:
        return 0.0 if r[0] <= value < max(r[1], r[0] + 1e-6) else min(abs(value - r[0]), abs(value - r[1]))

    holding = [i for i, r in timed if distance(r) <= (tolerance if r[0] == r[1] else 0.0)]
    if len(holding) == 1:
        return holding[0], True
    return min(timed, key=lambda p: (distance(p[1]), p[0]))[0], False


def _pick_words(options: Sequence[str], value: str) -> tuple[int | None, bool]:
    """The option that shares the most words with ``value`` (exact: it holds all of the option's words and no
    other option shares as many)."""
    plain = not terms(value)  # a value of words search leaves out ("before", "after") is matched by those words

    def words(text: str) -> set[str]:
        return set(text.lower().split()) if plain else set(terms(text))

    wanted = words(value)
    scored = [(len(wanted & words(o)), len(words(o)), i) for i, o in enumerate(options)]
    best = max(scored, key=lambda s: (s[0], -s[1]), default=None)
    if best is None or best[0] == 0:
        return None, False
    rivals = [s for s in scored if s[0] == best[0]]
    return best[2], len(rivals) == 1 and best[0] == best[1]


def with_options(answer: OperatorAnswer, options: Sequence[str], *, tolerance: float = 5.0) -> OperatorAnswer:
    """``answer`` with the option its value picks; an answer no option matches exactly is not confident."""
    if not options or answer.value is None:
        return answer
    if isinstance(answer.value, bool):
        index, exact = _pick_yes_no(options, answer.value), True
    elif isinstance(answer.value, str):
        index, exact = _pick_words(options, answer.value)
    elif answer.seconds:
        index, exact = _pick_time(options, float(answer.value), tolerance)
    else:
        index, exact = _pick_number(options, answer.value)
    if index is None:
        return answer.doubted("no option matches it")
    picked = replace(answer, answer=options[index], option_index=index)
    return picked if exact else picked.doubted(f"option {options[index]!r} is the nearest")

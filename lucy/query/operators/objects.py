"""Operators over the detect stage's tracks and per-frame counts: how many, and whether there was one.

* *count* — distinct tracks of the class in the period ("how many people walked by"), the most in view in one
  detected frame ("at once", "at most"), or the count in view at a moment ("now", "at 1:20");
* *presence* — yes with the first sighting, or a no that is confident only when the detector watched the whole
  period (observed up to its end, count samples with no gap in it).
"""

from __future__ import annotations

import re
from dataclasses import replace

from lucy.perception.describe import looks, plural
from lucy.perception.objects import PERSON, TrackedObject
from lucy.query.kinds import CountMode, ParsedQuestion, Subject
from lucy.query.operators.base import (
    FULL_COVERAGE,
    SOLID_SCORE,
    Grounds,
    Observed,
    OperatorAnswer,
    confidence,
    matching,
    quality,
    span_words,
    what,
)
from lucy.query.operators.lines import FRAME_WORDS
from lucy.text import hms, terms

FILTERED_AGREEMENT = 0.8  # tracks of one colour or one way of moving: the tracker's word alone, no second reading
GLIMPSE = 0.75  # one track seen for under a second


# What tracks tell of a thing besides its class and colour: that it was there or in view, moved or stayed, passed,
# came or went, how many at once, and when (a question's period and numbers are read apart).
_TOLD = frozenset(terms(
    "there here present around ever all seen spotted show showed up pass passed passing walk walked walking drive "
    "drove driving ride rode riding move moved moving cross crossed go went come came enter entered exit exited "
    "leave left by past through stop stopped park parked parking stand stood standing wait waited waiting stay "
    "stayed still idle remain remained during period whole half hour hours middle final altogether overall "
    "different distinct separate individual once same together simultaneously most maximum max peak largest "
    "biggest greatest highest fewest least minimum min smallest lowest crowd group number total time times frame "
    "screen picture shot sight"))


def unchecked(question: ParsedQuestion) -> list[str]:
    """The words of a count or presence question that its subject's tracks cannot answer, in its order: what it
    says the thing did or was with besides being there, moving or staying ("sit", "bench" in "did anyone sit on
    the bench?"; "bag" in "how many people carried a bag?")."""
    subject = question.subject
    known = set(terms(subject.noun if subject else "")) | set(terms(question.colour or "")) | _TOLD | FRAME_WORDS
    words = [w for w in re.findall(r"[a-z][a-z'-]*", question.text.lower())
             if any(t not in known for t in terms(w))]
    return list(dict.fromkeys(words))


def _as_far_as_tracks_tell(question: ParsedQuestion, found: OperatorAnswer) -> OperatorAnswer:
    """``found``, not confident when the question asks more of its subject than tracks tell (:func:`unchecked`)."""
    more = unchecked(question)
    if not more:
        return found
    said = ", ".join(f'"{w}"' for w in more)
    return replace(found.doubted(f"the tracks do not tell {said}"),
                   answer=f"{found.answer} (what the question adds, {said}, is more than the detector tells)")


def _noun(subject: Subject, n: int) -> str:
    return plural(subject.name, n)


# ------------------------------------------------------------------------------------------- count

def count(question: ParsedQuestion, observed: Observed) -> OperatorAnswer:
    """How many of the question's subject: distinct tracks, the most at once, or in view at a moment."""
    subject = question.subject
    assert subject is not None
    series = observed.series(subject)
    if question.count_mode is CountMode.MOMENT:
        found = _count_at_moment(question, observed, subject, series)
    elif question.count_mode is CountMode.AT_ONCE:
        found = _count_at_once(observed, subject, series)
    else:
        found = _count_tracks(question, observed, subject, series)
    return _as_far_as_tracks_tell(question, found)


def _count_at_moment(question: ParsedQuestion, observed: Observed, subject: Subject,
                     series: list[tuple[float, int]]) -> OperatorAnswer:
    """The detector's count in view at the moment the question gives (the period's end for "now", else its start):
    the count sample nearest it, sure when that sample is within :attr:`Observed.tolerance` of it (else 0.3)."""
    at = observed.end if question.period.from_end else observed.start
    if not series:
        return OperatorAnswer(f"Nothing was observed near {hms(at)}.", 0.0, reason="no count sample near it")
    t, n = min(series, key=lambda s: abs(s[0] - at))
    close = abs(t - at) <= observed.tolerance
    text = f"{n} {_noun(subject, n)} {'was' if n == 1 else 'were'} in view at {hms(t)}."
    return OperatorAnswer(text, 1.0 if close else 0.3, ((t, t),),
                          f"the detector's count at {t:.1f} s", value=n)


def _count_at_once(observed: Observed, subject: Subject, series: list[tuple[float, int]]) -> OperatorAnswer:
    """The most of the subject in view in one detected frame of the period, sure as far as a second frame reaches
    that peak and the detector watched the period."""
    coverage = observed.coverage
    where = span_words(observed.start, observed.end)
    if not series:
        return OperatorAnswer(f"Nothing was observed in {where}.", 0.0, reason="no count samples in the period")
    high = max(n for _, n in series)
    t = next(t for t, n in series if n == high)
    text = f"At most {high} {_noun(subject, high)} {'was' if high == 1 else 'were'} in view at once " \
           f"(first at {hms(t)})."
    # One frame alone at the peak may hold a false detection: the peak stands when a second frame reaches it.
    runner_up = sorted((n for _, n in series), reverse=True)[1] if len(series) > 1 else 0
    held = 1.0 if runner_up == high or high == 0 else runner_up / high
    sure, why = confidence(Grounds(coverage=coverage, agreement=held, notes=(
        f"most in one detected frame of {len(series)}, next most {runner_up}",
        f"the detector watched {coverage:.0%} of {where}")))
    return OperatorAnswer(text, sure, ((t, t),), why, value=high)


def _count_tracks(question: ParsedQuestion, observed: Observed, subject: Subject,
                  series: list[tuple[float, int]]) -> OperatorAnswer:
    """The distinct tracks of the subject that match the question (its colour, standing still), sure by the
    tracks' quality, the detector's coverage and how far the per-frame counts agree (:func:`_agreement`)."""
    coverage = observed.coverage
    where = span_words(observed.start, observed.end)
    tracks = matching(question, observed.of(subject))
    n = len(tracks)
    sure, why = confidence(Grounds(coverage=coverage, quality=quality(tracks),
                                   agreement=_agreement(question, observed, n), notes=(
                                       f"{n} distinct tracks", f"the detector watched {coverage:.0%} of {where}")))
    evidence = tuple((t.first_seen, t.last_seen) for t in tracks[:5]) or ((observed.start, observed.end),)
    return OperatorAnswer(_tracks_text(subject, tracks, series, where), sure, evidence, why, value=n)


def _tracks_text(subject: Subject, tracks: list[TrackedObject], series: list[tuple[float, int]], where: str) -> str:
    """The sentence of a count of distinct tracks: how many, "walked by" or "passed" when most of them moved, and
    how many were in view at a time while any were."""
    n = len(tracks)
    moving = sum(1 for t in tracks if t.moving)
    verb = ("walked by" if subject.name == PERSON else "passed") if n and moving * 2 >= n else "were seen"
    about = "About " if n > 5 else ""
    if n == 0:
        return f"No {_noun(subject, 2)} were seen ({where})."
    if n == 1:
        return f"1 {_noun(subject, 1)} {'was seen' if verb == 'were seen' else verb} ({where})."
    text = f"{about}{n} {_noun(subject, n)} {verb}"
    counts = [c for _, c in series if c]  # while any were in view
    if counts and max(counts) > 1:
        low, high = min(counts), max(counts)
        text += f", {low} to {high} at a time" if low != high else f", {high} at a time"
    return text + f" ({where})."


def _agreement(question: ParsedQuestion, observed: Observed, n: int) -> float:
    """How far the distinct-track count ``n`` agrees with the arrivals the per-frame counts show
    (:meth:`Observed.arrivals`): a tracker that split people into pieces, or joined two into one, reads
    otherwise than the counts. A count of some of the class only (a colour, standing still) has no second
    reading: :data:`FILTERED_AGREEMENT`."""
    assert question.subject is not None
    if question.colour is not None or question.still:
        return FILTERED_AGREEMENT
    arrivals = observed.arrivals(question.subject)
    return 1.0 if max(n, arrivals) == 0 else min(n, arrivals) / max(n, arrivals)


# ------------------------------------------------------------------------------------------- presence

def presence(question: ParsedQuestion, observed: Observed) -> OperatorAnswer:
    """Whether the subject was seen in the period: yes with its first sighting, or a no that is confident only when
    the detector watched all of the period."""
    subject = question.subject
    assert subject is not None
    where = span_words(observed.start, observed.end)
    every = observed.of(subject)
    tracks = sorted(matching(question, every), key=lambda t: (t.first_seen, t.track_id))
    if tracks:
        first = tracks[0]
        look = looks(first)
        noun = what(subject, question) if question.colour else subject.name
        described = f"a {noun}" if not look or question.colour else (
            f"a {noun} ({look})" if first.label == PERSON else f"a {look} {first.label}")
        text = f"Yes — {described}, first seen at {hms(first.first_seen)}"
        if len(tracks) > 1:
            text += f" ({len(tracks)} in all)"
        best = max(t.score for t in tracks)
        # One track seen for under a second is one glimpse: a second sighting (or a longer one) confirms it.
        solid = len(tracks) >= 2 or first.dwell >= 1.0
        sure, why = confidence(Grounds(
            quality=min(1.0, best / SOLID_SCORE) * (1.0 if solid else GLIMPSE),
            agreement=FILTERED_AGREEMENT if question.colour else 1.0,
            notes=(f"{len(tracks)} tracks of {subject.name}; best detector score {best:.2f}",)))
        return _as_far_as_tracks_tell(question, OperatorAnswer(
            text + ".", sure, tuple((t.first_seen, t.last_seen) for t in tracks[:3]), why, value=True))
    coverage = observed.coverage
    asked = what(subject, question)
    if every:  # seen, but not as asked (another colour, moving): the detector's colours are no proof of a no
        return OperatorAnswer(f"No {asked} that the detector could tell; it saw {len(every)} "
                              f"{_noun(subject, len(every))} in {where}.", 0.3,
                              tuple((t.first_seen, t.last_seen) for t in every[:3]),
                              "tracks of the class exist, none with the details asked", value=False)
    if coverage >= FULL_COVERAGE:
        return OperatorAnswer(f"No — no {asked} was seen in {where} (the detector watched all of it).", coverage,
                              ((observed.start, observed.end),),
                              f"no track of {subject.name}; the detector watched {coverage:.0%} of the period",
                              value=False)
    return OperatorAnswer(f"No {asked} was seen in the part of {where} the detector watched ({coverage:.0%}).",
                          coverage * 0.5, ((observed.start, min(observed.end, observed.until)),),
                          f"the detector watched only {coverage:.0%} of the period", value=False)

"""Operators that describe: *attribute* (what colour, where in the picture, which direction) and *beyond* (why,
intentions, feelings: what observations cannot tell).

*attribute* reads the tracks of the class a question names (the tracker's colours, the edges a track entered and
left by, the way it went: :func:`lucy.perception.describe.way_of`, where it stood: its best box), or for a question
about a text, the place and colours its sighting was read with. The tracks must agree: two cars of different
colours for "what colour was the car" is not confident.

*beyond* answers honestly: what memory does hold about the question's subject (when it was seen, what text or speech
names it) and that a vision-language model is needed for the rest. It is never confident.
"""

from __future__ import annotations

import re
from collections import Counter

from lucy.perception.describe import looks, place, way_of
from lucy.perception.objects import PERSON, TrackedObject
from lucy.query.kinds import ParsedQuestion
from lucy.query.operators.base import (
    DOUBT,
    Grounds,
    Observed,
    OperatorAnswer,
    confidence,
    described,
    matching,
    quality,
    span_words,
)
from lucy.query.operators.lines import MemoryLines, Sighting, best_matches, content_terms
from lucy.query.operators.reading import choose
from lucy.text import hms

AGREE = 2 / 3  # the share of tracks that must say the same for the answer to stand
TRACKER_WORD = 0.8  # a colour, place or way the tracker gives: one reading of small, moving boxes, never certain
BEYOND_CONFIDENCE = 0.2
_COLOUR_Q = re.compile(r"\bcolou?r\b")
_DIRECTION_Q = re.compile(r"\b(?:direction|which way|where did\b.*\b(?:go|come from|head)|from which side|"
                          r"heading|headed)\b")
_LETTERS_Q = re.compile(r"\b(?:letter\w*|text|writing|words?|font|written|printed)\b")
_GROUND_Q = re.compile(r"\b(?:sign|board|banner|plate|placard)\b")  # the colour of what a text is written on


def _agreed(values: list[str]) -> tuple[str | None, float]:
    """The value most tracks share and the share that do."""
    values = [v for v in values if v]
    if not values:
        return None, 0.0
    value, n = Counter(values).most_common(1)[0]
    return value, n / len(values)


def _track_value(question: ParsedQuestion, track: TrackedObject, observed: Observed) -> str:
    t = question.text.lower()
    if _COLOUR_Q.search(t):
        if track.label != PERSON:
            return looks(track)
        a = track.attributes
        lower = re.search(r"\b(?:trousers|pants|bottoms?|skirt|shorts|jeans)\b", t)
        return str(a.get("lower" if lower else "upper", "") or "")
    if _DIRECTION_Q.search(t):
        return way_of(track, observed.start, observed.end).words
    x0, y0, x1, y1 = track.best_box
    return place((x0 + x1) / 2, (y0 + y1) / 2)


def _from_tracks(question: ParsedQuestion, observed: Observed) -> OperatorAnswer | None:
    subject = question.subject
    assert subject is not None
    tracks = matching(question, observed.of(subject))
    if not tracks:
        return None
    values = [_track_value(question, t, observed) for t in tracks]
    value, share = _agreed(values)
    if value is None:
        return None
    example = next(t for t, v in zip(tracks, values, strict=True) if v == value)
    sentence = f"{value[0].upper()}{value[1:]} ({described(example, subject.name)}, seen " \
               f"{span_words(example.first_seen, example.last_seen)})."
    others = sorted({v for v in values if v and v != value})
    sure, why = confidence(Grounds(
        quality=min(TRACKER_WORD, quality(tracks)), agreement=share if share >= AGREE else min(share, DOUBT),
        candidates=1 + len(others),
        notes=(f"{len(tracks)} tracks of {subject.name}; {share:.0%} of those with a value agree",
               *([f"other tracks say {', '.join(others)}"] if others else []))))
    return OperatorAnswer(sentence, sure, ((example.first_seen, example.last_seen),), why, value=value)


def _from_text(question: ParsedQuestion, lines: MemoryLines) -> OperatorAnswer | None:
    wanted = content_terms(question.text)
    # A number alone ties no question to a text: "the 5 squares" asks about squares, not a sign with a 5 on it.
    matches = [m for m in best_matches(lines.sightings, wanted, details=False)
               if not m.found or any(not w.isdigit() for w in m.found)]
    best, confidence_of_text, why = choose(matches, whole=not wanted)
    if best is None:
        return None
    s = best.line
    assert isinstance(s, Sighting)
    t = question.text.lower()
    agreement, notes = 1.0, ()
    if _COLOUR_Q.search(t):
        on_ground = bool(_GROUND_Q.search(t) and not _LETTERS_Q.search(t))  # "the sign's colour", not its lettering's
        value = _text_colour(s.colours, on_ground)
        # A reading names colours only where most of its frames showed them alike (thin or small strokes lose theirs
        # to the video's colour subsampling): a colour one reading of several gave is that reading's, not the text's.
        said = [_text_colour(c, on_ground) for c in (s.colour_readings or (s.colours,))]
        agreement = said.count(value) / len(said)
        notes = (f"{said.count(value)} of {len(said)} readings of the text name it {value}",)
    else:
        value = s.where
    if not value:
        return None
    sure, reason = confidence(Grounds(quality=confidence_of_text * 0.9, agreement=agreement,
                                      notes=(f"on-screen text: {why}", *notes)))
    return OperatorAnswer(f'{value[0].upper()}{value[1:]} (the text "{s.text}", seen {span_words(s.first, s.last)}).',
                          sure, ((s.first, s.last),), reason, value=value)


def _text_colour(colours: str, on_ground: bool) -> str:
    """The letters' colour of a sighting's ``colours`` ("red letters on gray"), or the ground's."""
    letters, _, ground = colours.partition(" letters")
    return ground.removeprefix(" on ").strip() if on_ground else letters.strip()


def attribute(question: ParsedQuestion, observed: Observed | None, lines: MemoryLines) -> OperatorAnswer | None:
    """What colour, where in the picture or which way: from the tracks of the class the question names, else from
    the sighting of the text it is about."""
    if question.subject is not None and observed is not None:
        found = _from_tracks(question, observed)
        if found is not None:
            return found
    return _from_text(question, lines)


def beyond(question: ParsedQuestion, observed: Observed | None, lines: MemoryLines) -> OperatorAnswer:
    """What memory holds about a question it cannot answer (why, intentions, feelings), and what would be needed."""
    held: list[str] = []
    evidence: list[tuple[float, float]] = []
    subject = question.subject
    if subject is not None and observed is not None:
        tracks = matching(question, observed.of(subject))
        if tracks:
            first = tracks[0]
            held.append(f"{len(tracks)} {subject.name} track{'s' if len(tracks) != 1 else ''}, the first "
                        f"({described(first, subject.name)}) seen {span_words(first.first_seen, first.last_seen)}")
            evidence += [(t.first_seen, t.last_seen) for t in tracks[:3]]
    wanted = content_terms(question.text)
    if wanted:
        for m in best_matches([*lines.sightings, *lines.heard], wanted)[:2]:
            line = m.line
            start, end = (line.first, line.last) if isinstance(line, Sighting) else (line.start, line.end)
            held.append(f'"{line.text}" ({"on screen" if isinstance(line, Sighting) else "heard"} at {hms(start)})')
            evidence.append((start, end))
    known = ("Memory holds: " + "; ".join(held) + ". ") if held else "Memory holds nothing about it. "
    sentence = (f"{known}Why someone did something, what they meant or felt is more than the observations tell: a "
                "vision-language model captioning those moments would be needed.")
    return OperatorAnswer(sentence, min(BEYOND_CONFIDENCE, DOUBT), tuple(evidence),
                          "beyond what observations can tell (no vision-language model)")

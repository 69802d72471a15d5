"""Operators over when things were seen: *time* (when, which minute, how far in), *order* (which came first, did X
happen before Y) and *duration* (how long was X in view).

Each resolves the thing a question (or one side of it) is about to the times it was seen, by the first source that
knows it (:func:`locate`): tracks of an object class the question names (their first / last-seen times), else the
on-screen text sightings that hold its content words (seen A-B s), else transcript lines that do. Confidence is the
thing's own (the tracks' detector scores and how much of the period before it the detector watched; a text's
competition, :func:`lucy.query.operators.reading.choose`) and drops when candidates compete: several objects of the
class for "when did the car arrive", two showings of one text, two things seen at the same moment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lucy.perception.objects import TrackedObject
from lucy.query.kinds import ParsedQuestion, Subject, parse, subject_of
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
from lucy.query.operators.lines import Heard, MemoryLines, Sighting, best_matches, content_terms
from lucy.query.operators.reading import about_speech, choose
from lucy.text import hms

# "when did the last one leave", "when was it last seen": the end of a sighting, not its start.
_ENDING = re.compile(r"\b(?:leave|left|leaves|leaving|exit\w*|disappear\w*|gone|go away|went away|last seen|"
                     r"taken down|removed|end(?:ed|s)?|stop(?:ped)? (?:showing|being shown))\b")
_FIRST = re.compile(r"\b(?:first|earliest|initially|begin\w*|start\w*)\b")
_LAST = re.compile(r"\b(?:last|latest|final)\b")
_MINUTE = re.compile(r"\bwhich minute\b|\bwhat minute\b|\bin which minute\b")
_TEXT_NOUNS = re.compile(r"\b(?:sign|signs|banner|board|screen|display|label|caption|plate|placard|poster|notice|"
                         r"text|written|writing|lettering|letters|words?|message|code|number)\b")
_NAME = re.compile(r"\b[A-Z0-9][A-Z0-9-]*[A-Z][A-Z0-9-]*\b")  # "LEFT", "B12": a name as read on screen


def _frame(text: str) -> str:
    """``text`` lower-cased, without the words it writes in capitals: those are names as read on screen (the "LEFT
    LANE" sign), never the verbs and adverbs that say what a time question asks (when did it *leave*, the *last*
    one)."""
    return _NAME.sub(" ", text).lower()


SAME_TIME = 1.0  # seconds: two things first seen closer than this came at the same time (no order to tell)


@dataclass(frozen=True)
class Located:
    """Where a thing was found: when it was first and last seen, how, how sure, and how many compete."""

    first: float
    last: float
    what: str  # "a white car", '"GATE 12 CLOSED"', 'the words "doors closing"'
    confidence: float
    reason: str
    rivals: int = 0  # other candidates (other tracks of the class, other showings of the text)
    still_in_view: bool = False
    edges: tuple[bool, bool] = (True, True)  # whether its coming and going were seen (a text: Sighting.opened/closed)


def _track_located(question: ParsedQuestion, subject: Subject, observed: Observed, *, ending: bool) -> Located | None:
    tracks: list[TrackedObject] = sorted(matching(question, observed.of(subject)),
                                         key=lambda t: (t.first_seen, t.track_id))
    if not tracks:
        return None
    track = max(tracks, key=lambda t: t.last_seen) if ending else tracks[0]
    # Nothing earlier was missed: the detector watched the period up to the first sighting (for an ending, from
    # the last sighting to the period's end).
    watched = observed.coverage_of(track.last_seen, observed.end) if ending else \
        observed.coverage_of(observed.start, track.first_seen)
    sure, why = confidence(Grounds(coverage=watched, quality=quality([track]), notes=(
        f"{len(tracks)} tracks of {subject.name}; best score {track.score:.2f}; the detector watched "
        f"{watched:.0%} of the period around it",)))
    return Located(track.first_seen, track.last_seen, described(track, subject.name), sure, why, len(tracks) - 1,
                   track.active)


def _line_located(question_text: str, lines: MemoryLines) -> Located | None:
    """The sighting (or, for a question about speech, the transcript line; last, a thing captions say was seen at a
    place and a time, :attr:`MemoryLines.things`) that holds the content words. A
    question that names no content word ("when was the announcement made?", "when was the sign shown?") is about
    the only line of its kind in the period: speech for a question about speech, on-screen text for one that names a
    text; it is as sure as that line is alone (:func:`lucy.query.operators.reading.choose`)."""
    wanted = content_terms(question_text)
    speech = about_speech(question_text)
    sources: list[list[Sighting] | list[Heard]] = [list(lines.sightings), list(lines.heard)]
    if not wanted:
        if speech:
            sources = [list(lines.heard)]
        elif _TEXT_NOUNS.search(question_text.lower()):
            sources = [list(lines.sightings)]
        else:
            return None
    elif speech:
        sources.reverse()
    if wanted:  # last, the things captions say were seen where and when ("4 red squares (bottom left, 37-39 s)")
        sources.append(list(lines.things))
    things = {id(t) for t in lines.things}
    for source in sources:
        matches = best_matches(source, wanted)
        best, confidence, why = choose(matches, whole=not wanted)
        if best is None:
            continue
        line = best.line
        showings = [m for m in matches if m.line.text.upper() == line.text.upper()]
        if isinstance(line, Sighting) and id(line) in things:
            return Located(line.first, line.last, line.text, confidence, f"memory's captions: {why}",
                           len(showings) - 1, edges=(line.opened, line.closed))
        if isinstance(line, Sighting):
            if line.doubtful:
                confidence = min(confidence, DOUBT)
            return Located(line.first, line.last, f'"{line.text}"', confidence, f"on-screen text: {why}",
                           len(showings) - 1, edges=(line.opened, line.closed))
        return Located(line.start, line.end, f'the words "{line.text}"', confidence, f"transcript: {why}",
                       len(showings) - 1)
    return None


def locate(question: ParsedQuestion, observed: Observed | None, lines: MemoryLines, *,
           ending: bool = False) -> Located | None:
    """The thing ``question`` is about and when it was seen, or None when neither tracks nor lines know it. A
    question that names a text ("the sign ...") or speech looks in memory's lines first."""
    subject = question.subject
    by_track = None
    if subject is not None and observed is not None:
        by_track = _track_located(question, subject, observed, ending=ending)
    if by_track is not None and not (_TEXT_NOUNS.search(question.text.lower()) or about_speech(question.text)):
        return by_track
    return _line_located(question.text, lines) or by_track


def _first_asked(question: ParsedQuestion) -> bool:
    return bool(_FIRST.search(_frame(question.text)) or _LAST.search(_frame(question.text)))


def when(question: ParsedQuestion, observed: Observed | None, lines: MemoryLines) -> OperatorAnswer | None:
    """When the thing was first seen (last seen, for "when did it leave"), as a sentence and a media time."""
    ending = bool(_ENDING.search(_frame(question.text)))
    found = locate(question, observed, lines, ending=ending)
    if found is None:
        return None
    at = found.last if ending else found.first
    seen = f"{found.what}, seen {span_words(found.first, found.last)}"
    if _MINUTE.search(_frame(question.text)):
        sentence = f"In minute {int(at // 60) + 1} (at {hms(at)}; {seen})."
    else:
        sentence = f"At {hms(at)} ({seen})."
    answer = OperatorAnswer(sentence, found.confidence, ((found.first, found.last),), found.reason, value=at,
                            seconds=True)
    if found.rivals and not _first_asked(question):
        return answer.doubted(f"{found.rivals + 1} candidates; the question does not say which")
    return answer


def how_long(question: ParsedQuestion, observed: Observed | None, lines: MemoryLines) -> OperatorAnswer | None:
    """How long the thing was in view: last seen - first seen of its track or its text."""
    found = locate(question, observed, lines)
    if found is None:
        return None
    length = found.last - found.first
    lead = "At least " if found.still_in_view else "About "
    sentence = f"{lead}{_length_words(length)} ({found.what}, seen {span_words(found.first, found.last)})."
    answer = OperatorAnswer(sentence, found.confidence, ((found.first, found.last),), found.reason, value=length,
                            seconds=True)
    if found.rivals:
        return answer.doubted(f"{found.rivals + 1} candidates; lengths may differ")
    if not all(found.edges):
        unseen = " and ".join(w for w, seen in zip(("came", "went"), found.edges, strict=True) if not seen)
        return answer.doubted(f"no close look saw the moment before it {unseen}: its length is not known")
    if length < 0.5:
        return answer.doubted("seen at one moment only: its length is not known")
    return answer


def _length_words(seconds: float) -> str:
    if seconds < 90:
        n = round(seconds)
        return f"{n} second{'s' if n != 1 else ''}"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}" + (f" {rest} s" if rest else "")


# ------------------------------------------------------------------------------------------- order

_EITHER = re.compile(r"(?:,|:|\bfirst\b|\bearlier\b|\blater\b|\blast\b)\s*(?P<a>[^,?]+?)\s+or\s+"
                     r"(?P<b>[^,?]+?)\s*(?:\?|$|,)")
_RELATIVE = re.compile(r"^\s*(?:did|was|were|does|is|has|had)\s+(?P<a>.+?)\s+(?P<rel>before|after)\s+"
                       r"(?P<b>.+?)\s*\??\s*$")
# "Was the announcement before or after the sign?": which of the two relations holds.
_WHICH_RELATION = re.compile(r"^\s*(?:did|was|were|does|is|has|had)\s+(?P<a>.+?)\s+(?:come\s+|happen\s+|appear\s+)?"
                             r"(?:before or after|after or before)\s+(?P<b>.+?)\s*\??\s*$")
# "Between the sign and the van, which came first?", "The bus and the tram: which arrived later?"
_BOTH = re.compile(r"^\s*(?:(?:between|of|out of)\s+)?(?P<a>[^,:]+?)\s+and\s+(?P<b>[^,:?]+?)\s*[,:]\s*"
                   r"(?:which|what|who)\b")
_LATER_ASKED = re.compile(r"\b(?:last|later|after|second|latest)\b")
_ASKING = re.compile(r"\b(?:which|what|who)\b")


def _sides(text: str) -> tuple[str, str, str | None] | None:
    """The two things an order question compares and, for "did X ... before Y", the relation asked ("which" for
    "was X before or after Y")."""
    t = " ".join(text.lower().split())
    if m := _WHICH_RELATION.search(t):
        return m["a"], m["b"], "which"
    if m := _RELATIVE.search(t):
        return m["a"], m["b"], m["rel"]
    if m := _EITHER.search(t):
        return m["a"], m["b"], None
    if m := _BOTH.search(t):
        return m["a"], m["b"], None
    return None


def _locate_phrase(phrase: str, observed: Observed | None, lines: MemoryLines,
                   detector_labels: frozenset[str] | None) -> Located | None:
    parsed = parse(phrase)
    subject = subject_of(phrase)
    if subject is not None and detector_labels is not None and not subject.labels & detector_labels:
        subject = None
    return locate(ParsedQuestion(phrase, parsed.kind, subject, colour=parsed.colour, still=parsed.still),
                  observed if subject is not None else None, lines)


def order(question: ParsedQuestion, observed: Observed | None, lines: MemoryLines, options: tuple[str, ...] = (),
          detector_labels: frozenset[str] | None = None) -> OperatorAnswer | None:
    """Which of two things was seen first (or, for "did X happen before Y", yes or no), from first-seen times."""
    sides = _sides(question.text)
    phrases = [sides[0], sides[1]] if sides else list(options)
    if len(phrases) != 2:
        return None
    found = [_locate_phrase(p, observed, lines, detector_labels) for p in phrases]
    if any(f is None for f in found):
        return None
    a, b = found
    assert a is not None and b is not None
    confidence = min(a.confidence, b.confidence)
    evidence = ((a.first, a.last), (b.first, b.last))
    reason = f"{phrases[0]!r} first seen {a.first:.1f} s ({a.reason}); {phrases[1]!r} {b.first:.1f} s ({b.reason})"
    first, second = (0, 1) if a.first <= b.first else (1, 0)
    times = (a.first, b.first)
    if sides is not None and sides[2] == "which":
        relation = "before" if a.first < b.first else "after"
        sentence = f"{relation[0].upper()}{relation[1:]} — {phrases[0]} ({hms(a.first)}) came {relation} " \
                   f"{phrases[1]} ({hms(b.first)})."
        answer = OperatorAnswer(sentence, confidence, evidence, reason, value=relation)  # options: by its word
    elif sides is not None and sides[2] is not None:
        holds = (a.first < b.first) == (sides[2] == "before")
        verb = "before" if a.first < b.first else "after"
        sentence = (f"{'Yes' if holds else 'No'} — {phrases[0]} ({hms(a.first)}) came {verb} {phrases[1]} "
                    f"({hms(b.first)}).")
        answer = OperatorAnswer(sentence, confidence, evidence, reason, value=holds)
    else:
        # Whether it asks for the later one: in the clause that asks ("which came later, X or Y?", "between X and
        # Y, which came later?"), not in the things compared.
        clauses = re.split(r"[,:]", _frame(question.text))
        asking = next((c for c in clauses if _ASKING.search(c)), clauses[0])
        later = bool(_LATER_ASKED.search(asking))
        pick = second if later else first
        other = 1 - pick
        word = "later" if later else "first"
        sentence = (f"{phrases[pick][0].upper()}{phrases[pick][1:]} came {word} ({hms(times[pick])}; "
                    f"{phrases[other]} at {hms(times[other])}).")
        answer = OperatorAnswer(sentence, confidence, evidence, reason, value=phrases[pick])
        if not sides:  # the phrases were the options themselves
            answer = OperatorAnswer(options[pick], confidence, evidence, reason, option_index=pick)
    if abs(a.first - b.first) < SAME_TIME:
        return answer.doubted("both were first seen at about the same time")
    if a.rivals or b.rivals:
        return answer.doubted("one side has several candidates")
    return answer

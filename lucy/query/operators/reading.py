"""Operators that read memory's lines: what a text on screen said (*text*) and what was said (*speech*).

*text* — the on-screen text sightings that hold the question's content words (:mod:`.lines`); the answer is the
part of the text the question's wh-noun asks for ("which gate is closed?" over ``GATE 12 CLOSED``: "Gate 12", the
token beside the noun it names; "which number": the text's number), or the whole text, with when it was seen.
*speech* — the transcript line that holds the content words, quoted, with its time.

Confidence comes from the competition and the reading, never from how many words overlap: one text that holds every
content word, with no other text that fits as well, is confident; two different texts that fit alike, a content
word no text holds, or a doubtful OCR reading are not.
"""

from __future__ import annotations

import re

from lucy.query.kinds import ParsedQuestion
from lucy.query.operators.base import OperatorAnswer, span_words
from lucy.query.operators.lines import (
    Heard,
    Match,
    MemoryLines,
    Sighting,
    best_matches,
    content_terms,
    distinct,
    held,
)
from lucy.text import ABOUT_SPEECH, hms, terms

SURE = 0.85  # one text holding every content word, unrivalled
ALONE = 0.75  # the only text of the period, for a question that names none of its words
PARTIAL = 0.5  # the best text holds some of the content words only
MAX_LISTED = 3
# "which gate", "what number", "what platform": the noun a wh-word asks about (not a verb or "colour").
_WH_NOUN = re.compile(r"\b(?:which|what)\s+(?:\w+\s+)??(?P<noun>[a-z]+)\s+(?:is|was|were|are|has|had|did|does|do|"
                      r"will|would|can|could|should|on|in|at|of|for|to|from|appeared|showed|shown|said|read)\b")
_DIGITS = re.compile(r"\d")
_NUMBER_NOUNS = frozenset({"number", "digit", "digits", "figure", "code", "amount", "price", "count"})
_WHOLE_NOUNS = frozenset({"word", "words", "text", "message", "sign", "banner", "name", "phrase", "title"})


def wh_noun(question: str) -> str | None:
    """The noun a "which X" / "what X" question asks about, or None ("what did the sign say?")."""
    m = _WH_NOUN.search(question.lower())
    if m is None or m["noun"] in {"did", "does", "do", "is", "was", "were", "are", "colour", "color", "time"}:
        return None
    return m["noun"]


def _title(words: list[str]) -> str:
    return " ".join(w.capitalize() if w.isalpha() else w for w in words)


def answer_part(text: str, noun: str | None, wanted: set[str]) -> str | None:
    """The part of ``text`` that answers a question about ``noun``: its number for "which number", the token next
    to the noun (after it, else before it) when the text names the noun, the whole text for "what did it say";
    None when the text holds no such part (a "which number" over a text without one)."""
    tokens = text.split()
    if noun is None or noun in _WHOLE_NOUNS:
        return text
    if noun in _NUMBER_NOUNS:
        numbers = [t.strip(".,:;") for t in tokens if _DIGITS.search(t)]
        return numbers[0] if len(numbers) == 1 else None
    stem = terms(noun)
    for i, token in enumerate(tokens):
        if stem and held(set(stem), set(terms(token))):
            after = [t for t in tokens[i + 1:i + 2] if not held(set(terms(t)), wanted)]
            before = [t for t in tokens[max(0, i - 1):i] if not held(set(terms(t)), wanted)]
            beside = after or before
            if beside:
                parts = [token, *beside] if after else [*beside, token]
                return _title([p.strip(".,:;") for p in parts])
    return None


def _ocr_note(s: Sighting) -> str:
    depths = " and ".join(sorted(s.levels)) or "memory"
    return f"read at {depths} depth" + (f" ({s.readings} readings)" if s.readings > 1 else "")


def choose(matches: list[Match], *, whole: bool) -> tuple[Match | None, float, str]:
    """The match a reading operator answers with, its confidence and why: ``whole`` is True when the question named
    none of the line's words (then a line is only as sure as it is alone)."""
    texts = distinct(matches)
    if not texts:
        return None, 0.0, "no line holds the question's words"
    best = texts[0]
    if len(texts) > 1:
        listed = ", ".join(f'"{m.line.text}"' for m in texts[:MAX_LISTED])
        return best, PARTIAL * 0.6, f"{len(texts)} different lines fit alike: {listed}"
    if whole:
        return best, ALONE, "the only line of the period"
    if best.complete:
        return best, SURE, f"the only line that holds {', '.join(sorted(best.found))}"
    missing = sorted(best.wanted - best.found)
    return best, PARTIAL, f"the best line lacks {', '.join(missing)}"


def text(question: ParsedQuestion, lines: MemoryLines) -> OperatorAnswer | None:
    """What a text on screen said, or the part of it the question asks for; None when no sighting fits."""
    noun = wh_noun(question.text)
    wanted = content_terms(question.text, terms(noun) if noun in _NUMBER_NOUNS | _WHOLE_NOUNS else ())
    matches = best_matches(lines.sightings, wanted)
    best, confidence, why = choose(matches, whole=not wanted)
    if best is None:
        return None
    s = best.line
    assert isinstance(s, Sighting)
    part = answer_part(s.text, noun, wanted)
    value = part or s.text
    seen = span_words(s.first, s.last)
    sentence = f'{value} (the text "{s.text}" was seen {seen}).' if value != s.text else f'"{s.text}" (seen {seen}).'
    partial = bool(wanted) and not best.complete
    if part is None:
        confidence, why, partial = min(confidence, PARTIAL), why + f"; the text names no {noun}", True
    if s.doubtful:
        confidence, why = min(confidence, PARTIAL), why + f"; OCR read it with confidence {s.ocr:.0f} only"
    return OperatorAnswer(sentence, confidence, ((s.first, s.last),), f"{why}; {_ocr_note(s)}", value=value,
                          partial=partial)


def speech(question: ParsedQuestion, lines: MemoryLines) -> OperatorAnswer | None:
    """The transcript line the question asks about, quoted with its time; None when no line fits."""
    wanted = content_terms(question.text)
    matches = best_matches(lines.heard, wanted)
    best, confidence, why = choose(matches, whole=not wanted)
    if best is None:
        return None
    h = best.line
    assert isinstance(h, Heard)
    if h.doubtful:
        confidence, why = min(confidence, PARTIAL), f"{why}; the transcriber was {h.confidence:.0%} sure of it only"
    return OperatorAnswer(f'"{h.text}" (said at {hms(h.start)}).', confidence, ((h.start, h.end),),
                          f"transcript: {why}", value=h.text, partial=bool(wanted) and not best.complete)


def about_speech(question: str) -> bool:
    """Whether a question asks about what was said rather than shown."""
    return bool(ABOUT_SPEECH.search(question))


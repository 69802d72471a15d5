"""The summary operator: what happened in a period, part by part, composed from what was observed.

Per part of the period (the coarse grid, merged into at most :data:`MAX_PARTS` parts), in time order: people and
vehicles as the detector's notes tell them (:mod:`lucy.perception.describe`), text read on screen and words heard;
a few sentences, bounded.
"""

from __future__ import annotations

from collections.abc import Sequence

from lucy.config import Level
from lucy.perception.describe import SpanObservations, describe_observations
from lucy.query.kinds import ParsedQuestion
from lucy.query.operators.base import CONFIDENT, Observed, OperatorAnswer, span_words
from lucy.query.operators.lines import MemoryLines
from lucy.text import hms

MAX_PARTS = 6  # a summary speaks of at most this many parts of its period
PART_CHARS = 260  # the detector's notes of one part, at most
MAX_TEXTS, MAX_LINES = 3, 2  # on-screen texts and speech lines per part
SUMMARY_CHARS = 1500


def _parts(start: float, end: float, grid: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """``[start, end)`` cut on the coarse grid, merged into at most :data:`MAX_PARTS` parts."""
    spans = [(max(a, start), min(b, end)) for a, b in grid if b > start and a < end] or [(start, end)]
    size = -(-len(spans) // MAX_PARTS)
    return [(spans[i][0], spans[min(i + size, len(spans)) - 1][1]) for i in range(0, len(spans), size)]


def summary(question: ParsedQuestion, observed: Observed, lines: MemoryLines,
            grid: Sequence[tuple[float, float]]) -> OperatorAnswer:
    """What happened in the period, part by part: the detector's notes, text on screen and words heard."""
    sentences, evidence, said = [], [], 0
    for a, b in _parts(observed.start, observed.end, grid):
        span = SpanObservations(a, b, [t for t in observed.tracks if t.last_seen >= a and t.first_seen < b],
                                [c for c in observed.counts if a <= c.time < b], observed.until)
        notes = describe_observations(span, level=Level.COARSE, max_chars=PART_CHARS)
        notes = " ".join(notes.replace(" (detector)", "").replace("Detector: ", "").split())
        parts = [notes]
        texts: dict[str, float] = {}  # each text once per part, at its first time
        for s in lines.sightings:
            if a <= s.first < b:
                texts.setdefault(s.text, s.first)
        if texts:
            shown = ", ".join(f'"{text}" ({hms(t)})' for text, t in list(texts.items())[:MAX_TEXTS])
            more = f" and {len(texts) - MAX_TEXTS} more" if len(texts) > MAX_TEXTS else ""
            parts.append(f"On screen: {shown}{more}.")
        heard = [h for h in lines.heard if a <= h.start < b]
        if heard:
            parts.append("Heard: " + "; ".join(f'"{h.text}" ({hms(h.start)})' for h in heard[:MAX_LINES]) + ".")
        said += len(texts) + len(heard)
        sentences.append(f"{span_words(a, b)}: " + " ".join(parts))
        evidence.append((a, b))
    text = "\n".join(sentences)
    if len(text) > SUMMARY_CHARS:
        text = text[:SUMMARY_CHARS - 2].rsplit(" ", 1)[0] + " …"
    coverage = observed.coverage
    confidence = max(coverage, CONFIDENT if said else 0.0)
    return OperatorAnswer(text, confidence, tuple(evidence),
                          f"composed from observations (the detector watched {coverage:.0%} of the period), "
                          f"{said} lines of text and speech")

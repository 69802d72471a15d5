"""What memory holds as lines an operator can read: on-screen text sightings and transcript lines, and which of them
a question is about.

The pixels captioner writes each text line it read as ``- "TEXT" (where, colours, seen A-B s[, n of m frames,
confidence c])`` under its "On-screen text" section, and the transcriber writes ``[A-B s] words`` lines into speech
nodes (the query's memory view shows them as ``Speech heard A-B s: "words"``). The same text read at two depths
(a coarse caption and a fine one of the same moment) is one :class:`Sighting` seen at both: agreement between
depths is evidence. A question is about the lines that hold its *content words*: its words less the words of its
frame (what kind of question it is: "sign", "say", "when", "first", ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from lucy.memory.nodes import MemoryNode
from lucy.memory.transcribers import SPEECH_LEVEL, SURE, parse_transcript, sure_of
from lucy.query.memory_view import HEARD_LINE as HEARD_LINE  # where operators read it
from lucy.text import similar, terms

# One text line as the pixels captioner writes it, anywhere in a text (a memory line the lexical reasoner quotes
# has it inline, after "At 20-30s: ").
TEXT_LINE = re.compile(r'(?:^|\s)- "(?P<text>[^"\n]+)" \((?P<details>[^()\n]*?)\bseen (?P<a>\d+(?:\.\d+)?)'
                       r'(?:-(?P<b>\d+(?:\.\d+)?))? s(?P<rest>[^()\n]*)\)')
_OCR_CONFIDENCE = re.compile(r"confidence (\d+(?:\.\d+)?)")
MERGE_GAP = 3.0  # seconds: sightings of one text closer than this are one showing of it
LOW_OCR = 50.0  # an OCR confidence below this (of 100) makes a reading doubtful
_SIMILAR = 0.85  # two words this alike are one word misread (OCR) or spelt another way

# The words of a question's frame: what kind of question it is, never what it is about.
FRAME_WORDS = frozenset(terms(
    "sign signs banner board screen display label caption plate placard poster notice text written writing printed "
    "lettering letters letter word words code name number message say said says saying read reads show showed "
    "shows spell spelled spelt when time minute minutes second seconds point moment far long first last earliest "
    "earlier later latest before after start end beginning appear appeared arrive arrived came come happen "
    "happened stay stayed view shown seen go went leave left disappear disappeared gone announce announced "
    "announcement spoke speak spoken talk talked mention mentioned heard hear voice call called colour color "
    "where picture side corner direction way part video stream camera footage clip kind type tell please exactly "
    "long how many much did does into made make makes given give gave someone somebody anyone anybody something "
    "anything count counted counting total displayed visible"))


@dataclass(frozen=True)
class Sighting:
    """One showing of an on-screen text: the text, when it was seen, where and in what colours, at which depths."""

    text: str
    first: float
    last: float
    where: str = ""
    colours: str = ""  # "red letters on gray" ("" when not clear)
    levels: frozenset[str] = frozenset()
    readings: int = 1  # how many memory lines read it
    colour_readings: tuple[str, ...] = ()  # the colours each of those lines gave ("" for one that named none)
    ocr: float | None = None  # the lowest OCR confidence a detailed reading gave
    # Whether a memory that read it also looked just before it came (``opened``) and just after it went
    # (``closed``), and saw nothing: only then are its first and last times its edges, not where the look began or
    # ended (:func:`edges_seen`).
    opened: bool = True
    closed: bool = True

    @property
    def words(self) -> set[str]:
        return set(terms(self.text))

    @property
    def detail_words(self) -> set[str]:
        return set(terms(f"{self.where} {self.colours}"))

    @property
    def doubtful(self) -> bool:
        return self.ocr is not None and self.ocr < LOW_OCR


@dataclass(frozen=True)
class Heard:
    """One transcript line, and how sure the transcriber was of it (0-1)."""

    text: str
    start: float
    end: float
    confidence: float = 1.0

    @classmethod
    def of(cls, m: re.Match[str]) -> Heard:
        """A line as a memory item shows it (:data:`HEARD_LINE`)."""
        return cls(m["text"], float(m["a"]), float(m["b"]), sure_of(m["sure"]))

    @property
    def doubtful(self) -> bool:
        """The transcriber was not sure of it (:data:`lucy.memory.transcribers.SURE`)."""
        return self.confidence < SURE

    @property
    def words(self) -> set[str]:
        return set(terms(self.text))


def _reading(m: re.Match[str], level: str) -> Sighting:
    details = [d.strip() for d in m["details"].split(",") if d.strip()]
    colours = next((d for d in details if "letter" in d), "")
    where = next((d for d in details if d != colours), "")
    ocr = _OCR_CONFIDENCE.search(m["rest"])
    a = float(m["a"])
    return Sighting(" ".join(m["text"].split()), a, float(m["b"]) if m["b"] else a, where, colours,
                    frozenset({level}), 1, (colours,), float(ocr[1]) if ocr else None)


# A thing a caption says was seen, with where and when: "4 red squares (bottom left, 37.0-39.0 s)" (one statement of
# a list; on-screen text lines, which start with a quote, are TEXT_LINE's).
THING_LINE = re.compile(r'(?:^|[:;]\s+)(?P<text>[A-Za-z0-9][^"():;\n]*?) \((?P<where>[^()\n,]+), (?:seen )?'
                        r'(?P<a>\d+(?:\.\d+)?)(?:-(?P<b>\d+(?:\.\d+)?))? s\)')


def things_in(text: str, level: str = "") -> list[Sighting]:
    """The things ``text`` (a caption) says were seen at a place and a time, as sightings of their words."""
    out = []
    for line in text.splitlines():
        for m in THING_LINE.finditer(line):
            a = float(m["a"])
            out.append(Sighting(" ".join(m["text"].split()), a, float(m["b"]) if m["b"] else a, m["where"].strip(),
                                levels=frozenset({level})))
    return out


def sightings_in(text: str, level: str = "") -> list[Sighting]:
    """The text lines written in ``text`` (a caption, or a memory line an agent quoted), in the order written."""
    return [_reading(m, level) for m in TEXT_LINE.finditer(text)]


def merge(readings: Iterable[Sighting]) -> list[Sighting]:
    """Readings of the same text that overlap in time (within :data:`MERGE_GAP`) as one sighting each, in time
    order: the widest times, every depth that read it, the colours each reading gave, the lowest OCR confidence."""
    by_text: dict[str, list[Sighting]] = {}
    for s in sorted(readings, key=lambda s: (s.first, s.last)):
        shown = by_text.setdefault(s.text.upper(), [])
        if shown and s.first <= shown[-1].last + MERGE_GAP:
            p = shown[-1]
            ocr = min((v for v in (p.ocr, s.ocr) if v is not None), default=None)
            shown[-1] = Sighting(p.text, p.first, max(p.last, s.last), p.where or s.where, p.colours or s.colours,
                                 p.levels | s.levels, p.readings + s.readings,
                                 p.colour_readings + s.colour_readings, ocr)
        else:
            shown.append(s)
    return sorted((s for shown in by_text.values() for s in shown), key=lambda s: (s.first, s.text))


EDGE_SECONDS = 1.0  # a look that reaches this close to a sighting, and not into it, saw it was not there yet


def edges_seen(sightings: Iterable[Sighting], looks: Sequence[tuple[str, float, float]]) -> list[Sighting]:
    """``sightings`` with :attr:`Sighting.opened` / :attr:`Sighting.closed` set from ``looks`` (level, start,
    end of each memory node): an edge is seen when a node of a depth that read the text spans from at least
    :data:`EDGE_SECONDS` before the first sighting up to it (after the last, from it on). A text first read at the
    first moment of a fine span, whose earlier span was never looked at that closely, may have been there before:
    its length is not known. Serves *duration* (and the times of a text's edges)."""
    out = []
    for s in sightings:
        mine = [(a, b) for level, a, b in looks if level in s.levels]
        opened = any(a <= s.first - EDGE_SECONDS and b >= s.first - EDGE_SECONDS for a, b in mine)
        closed = any(b >= s.last + EDGE_SECONDS and a <= s.last + EDGE_SECONDS for a, b in mine)
        out.append(replace(s, opened=opened, closed=closed))
    return out


@dataclass(frozen=True)
class MemoryLines:
    """The text sightings and transcript lines of a stream's memory nodes."""

    sightings: tuple[Sighting, ...] = ()
    heard: tuple[Heard, ...] = ()
    things: tuple[Sighting, ...] = ()  # things captions say were seen, with a place and times (THING_LINE)

    @classmethod
    def of(cls, nodes: Sequence[MemoryNode]) -> MemoryLines:
        readings: list[Sighting] = []
        things: list[Sighting] = []
        heard: dict[tuple[float, str], Heard] = {}
        looks: list[tuple[str, float, float]] = []
        for node in nodes:
            if node.level == SPEECH_LEVEL:
                for line in parse_transcript(node.text):
                    heard[(line.start, line.text)] = Heard(" ".join(line.text.split()), line.start, line.end,
                                                           line.confidence)
            else:
                readings += sightings_in(node.text, node.level)
                things += things_in(node.text, node.level)
                looks.append((node.level, node.start, node.end))
        return cls(tuple(edges_seen(merge(readings), looks)),
                   tuple(sorted(heard.values(), key=lambda h: (h.start, h.text))),
                   tuple(edges_seen(merge(things), looks)))

    def within(self, start: float, end: float) -> MemoryLines:
        """The lines seen or heard at some time in ``[start, end]``."""
        return MemoryLines(tuple(s for s in self.sightings if s.last >= start - 1e-6 and s.first <= end + 1e-6),
                           tuple(h for h in self.heard if h.end >= start - 1e-6 and h.start <= end + 1e-6),
                           tuple(s for s in self.things if s.last >= start - 1e-6 and s.first <= end + 1e-6))


def content_terms(text: str, also: Iterable[str] = ()) -> set[str]:
    """The words ``text`` is about: its search terms less :data:`FRAME_WORDS` (and ``also``)."""
    return set(terms(text)) - FRAME_WORDS - set(also)


def _held(term: str, words: set[str]) -> bool:
    return term in words or (len(term) >= 4 and any(len(w) >= 4 and similar(term, w, _SIMILAR) >= _SIMILAR
                                                    for w in words))


def held(wanted: set[str], words: set[str]) -> set[str]:
    """The terms of ``wanted`` that ``words`` hold (the same word, or one misread by a letter or two)."""
    return {t for t in wanted if _held(t, words)}


@dataclass(frozen=True)
class Match:
    """A line and how well it fits the question: the content words it holds (of ``wanted``)."""

    line: Sighting | Heard
    found: frozenset[str]
    wanted: frozenset[str]

    @property
    def complete(self) -> bool:
        return bool(self.wanted) and self.found == self.wanted


def best_matches(lines: Sequence[Sighting | Heard], wanted: set[str], *, details: bool = True) -> list[Match]:
    """The lines holding the most of ``wanted`` (a sighting's place and colours count with its text when
    ``details``), best first; every line when nothing is wanted; none when no line holds any."""
    if not wanted:
        return [Match(line, frozenset(), frozenset()) for line in lines]
    scored: list[Match] = []
    for line in lines:
        words = line.words | (line.detail_words if details and isinstance(line, Sighting) else set())
        found = held(wanted, words)
        if found:
            scored.append(Match(line, frozenset(found), frozenset(wanted)))
    if not scored:
        return []
    top = max(len(m.found) for m in scored)
    return [m for m in scored if len(m.found) == top]


def distinct(matches: Sequence[Match]) -> list[Match]:
    """One match per different text (the earliest of each)."""
    out: dict[str, Match] = {}
    for m in matches:
        out.setdefault(m.line.text.upper(), m)
    return list(out.values())

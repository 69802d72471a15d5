"""*presence* and *count* of what the detector does not name ("was there a pink square?", "was the hatch sealed?",
"how many red squares were shown?"): the statements of memory that mention it — a caption's lines and list items,
on-screen text lines, words heard — and the number they give of it.

A statement that holds every content word of the question (:func:`lucy.query.operators.lines.content_terms`) says
yes; the earliest is quoted with its span. A "box" or "block" a question asks about is any square or rectangle a
caption names (the captioner names shapes by their sides); "squares" are squares. A detailed memory (fine or finer,
or a transcript) is a close look and may be taken at its word; coarse memory alone is lossy by design (few, small
frames) and may misname what it saw.
Nothing mentioned is a "no" that is never confident: captions that do not mention a thing are no proof that it was
not there (what depth would show it is not known), so the agent loop looks at every span of the period.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from lucy.memory.nodes import MemoryNode
from lucy.memory.transcribers import SPEECH_LEVEL, parse_transcript
from lucy.query.kinds import ParsedQuestion
from lucy.query.operators.base import DOUBT, Grounds, OperatorAnswer, confidence, span_words
from lucy.query.operators.lines import MERGE_GAP, content_terms, held, things_in
from lucy.text import clip_words, terms

_STATEMENT = re.compile(r"\n+|;\s+")
_ITEM = re.compile(r"^[-*•]\s*")  # a list item's mark
_HEADER = re.compile(r"^[A-Z][^:\n]{0,60}:\s+(?=\S)")  # a caption section's name ("Objects (solid shapes): ...")
_NEGATIVE = re.compile(r"^\W*(?:no|none|nothing|not)\b", re.IGNORECASE)  # "none readable", "no ... stand out"
_DETAILED = frozenset({"fine", "ultra_fine", SPEECH_LEVEL})
COARSE_WORD = 0.6  # a thing only coarse memory mentions
UNMENTIONED = 0.3  # a "no" from memory's silence


# Plain shapes as a caption names them (by their sides), and the words a question may use for any of them.
_SHAPES = frozenset(terms("square rectangle"))
_ANY_SHAPE = frozenset(terms("box block tile patch shape"))


def _asked(text: str) -> set[str]:
    """The content terms of a question, a word for any plain shape as one ("shape", :data:`_ANY_SHAPE`)."""
    return {"shape" if w in _ANY_SHAPE else w for w in content_terms(text)}


def _words(text: str) -> set[str]:
    """The terms of a statement of memory, with "shape" beside any plain shape it names: a question's "boxes" are
    its squares and rectangles, its "squares" are squares."""
    words = set(terms(text))
    return words | {"shape"} if words & _SHAPES else words


def _statements(node: MemoryNode) -> list[str]:
    if node.level == SPEECH_LEVEL:
        return [line.text for line in parse_transcript(node.text)]
    return [_HEADER.sub("", _ITEM.sub("", s.strip())).rstrip(".") for s in _STATEMENT.split(node.text) if s.strip()]


def presence(question: ParsedQuestion, nodes: Sequence[MemoryNode], start: float, end: float) -> OperatorAnswer | None:
    """Yes with the earliest statement of memory in ``[start, end]`` that mentions what the question asks about, or
    a "no" that is not confident; None when the question names nothing to look for."""
    wanted = _asked(question.text)
    if not wanted:
        return None
    hits = [(node, statement) for node in sorted(nodes, key=lambda n: (n.start, n.end))
            if node.end >= start - 1e-6 and node.start <= end + 1e-6
            for statement in _statements(node)
            if not _NEGATIVE.match(statement) and held(wanted, _words(statement)) == wanted]
    where = span_words(start, end)
    if not hits:
        return OperatorAnswer(f"No — nothing memory holds of {where} mentions it (captions that do not mention a "
                              "thing are no proof it was not there).", min(UNMENTIONED, DOUBT), ((start, end),),
                              f"no statement of memory holds {', '.join(sorted(wanted))}", value=False)
    node, statement = hits[0]
    detailed = [n for n, _ in hits if n.level in _DETAILED]
    sure, why = confidence(Grounds(quality=1.0 if detailed else COARSE_WORD, notes=(
        f"{len(hits)} statements of memory mention {', '.join(sorted(wanted))}",
        f"{'a close look' if detailed else 'coarse memory only'}")))
    return OperatorAnswer(f"Yes — memory says: {clip_words(statement, 160)} ({span_words(node.start, node.end)}).",
                          sure, tuple((n.start, n.end) for n, _ in hits[:3]), why, value=True)


_TOKEN = re.compile(r"[A-Za-z]+|\d+")
_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split())} | {"a": 1, "an": 1}
# Words that may stand between a count and the thing counted ("4 small red squares", "a white van").
_DESCRIBING = frozenset("red orange yellow green blue purple pink brown black white gray grey silver teal light dark "
                        "pale bright big small large little tall short round solid".split())
SINGLE_READING = 0.6  # a count one statement gives, with no second reading to agree or not


def number_said(statement: str, wanted: set[str]) -> int | None:
    """The count ``statement`` gives of what ``wanted`` names: the number just before the first of its words and the
    other wanted words beside it ("4 red squares" for {red, square}: 4; "a white van": 1); None when it gives none."""
    tokens = _TOKEN.findall(statement)
    words = [_words(t) for t in tokens]
    first = next((i for i, w in enumerate(words) if held(wanted, w)), None)
    if first is None:
        return None
    j = first - 1
    while j >= 0 and (held(wanted, words[j]) or tokens[j].lower() in _DESCRIBING):
        j -= 1
    if j < 0:
        return None
    token = tokens[j].lower()
    return int(token) if token.isdigit() else _NUMBER_WORDS.get(token)


def _joined(spans: Iterable[tuple[float, float]], gap: float = 0.0) -> list[list[float]]:
    """``spans`` as the runs they make, spans less than ``gap`` apart joined."""
    runs: list[list[float]] = []
    for a, b in sorted(spans):
        if runs and a <= runs[-1][1] + gap:
            runs[-1][1] = max(runs[-1][1], b)
        else:
            runs.append([a, b])
    return runs


def _showings(statements: Iterable[str]) -> int:
    """How many separate showings ``statements`` speak of: the times they give (:func:`things_in`), joined where
    they lie within :data:`lucy.query.operators.lines.MERGE_GAP`; statements that give no time are one of those.
    Two showings of a thing at different times may be two things, or one counted twice: the question does not say
    which."""
    return max(1, len(_joined(((t.first, t.last) for text in statements for t in things_in(text)), MERGE_GAP)))


def looked_closely(nodes: Sequence[MemoryNode], start: float, end: float) -> float:
    """The share of ``[start, end]`` that captions of a close look (fine or finer) cover: what coarse memory's few
    frames passed over may hold more of a thing than any caption says."""
    if end <= start:
        return 1.0
    runs = _joined((max(n.start, start), min(n.end, end)) for n in nodes
                   if n.level in _DETAILED and n.level != SPEECH_LEVEL and n.end > start and n.start < end)
    return sum(b - a for a, b in runs) / (end - start)


def count(question: ParsedQuestion, nodes: Sequence[MemoryNode], start: float, end: float) -> OperatorAnswer | None:
    """How many of what the question names (a thing the detector does not name: "red squares"), as the statements
    of memory in ``[start, end]`` count it. Sure when a close look says it, a second reading agrees and close looks
    cover the period (a showing no close look saw may have held more); readings that give other counts are
    candidates. None mentioned: an answer of none, never confident (the loop then looks at
    every span of the period). None when the question names nothing to count."""
    wanted = _asked(question.text)
    if not wanted:
        return None
    said = [(node, statement, n) for node in sorted(nodes, key=lambda n: (n.start, n.end))
            if node.end >= start - 1e-6 and node.start <= end + 1e-6
            for statement in _statements(node)
            if not _NEGATIVE.match(statement) and held(wanted, _words(statement)) == wanted
            and (n := number_said(statement, wanted)) is not None]
    where = span_words(start, end)
    if not said:
        return OperatorAnswer(f"None that memory mentions in {where} (captions that do not mention a thing are no "
                              "proof it was not there).", min(UNMENTIONED, DOUBT), ((start, end),),
                              f"no statement of memory counts {', '.join(sorted(wanted))}", value=0)
    counts = Counter(n for _, _, n in said)
    value, agreeing = counts.most_common(1)[0]
    node, statement, _ = next(s for s in said if s[2] == value)
    detailed = any(n.level in _DETAILED for n, _, v in said if v == value)
    looked = looked_closely(nodes, start, end)
    showings = _showings(statement for _, statement, _ in said)
    sure, why = confidence(Grounds(
        coverage=looked, quality=1.0 if detailed else COARSE_WORD,
        agreement=SINGLE_READING if len(said) == 1 else agreeing / len(said),
        candidates=max(len(counts), showings),
        notes=(f"{len(said)} statements of memory count it: " + ", ".join(f"{n} ({c}x)" for n, c in counts.items()),
               f"{looked:.0%} of the period looked at closely")))
    return OperatorAnswer(f"{value} (memory says: {clip_words(statement, 160)}, {span_words(node.start, node.end)}).",
                          sure, tuple((n.start, n.end) for n, _, v in said if v == value)[:3], why, value=value)

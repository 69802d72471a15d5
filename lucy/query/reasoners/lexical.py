"""The embedded reasoner: deterministic lexical retrieval and option scoring, no model, CPU only.

- *select* and *localise* rank spans by BM25 between the question (and its options) and memory text, and by
  meaning where the engine gives each memory its similarity to the question (an embedder's vectors);
- *answer* scores each option by how much of what tells it apart from the other options appears in memory,
  weighted by how deep that memory is and how well it matches the question's own words; an open question is
  answered by quoting the line of memory that best matches it, never confidently (an excerpt is no answer: the
  engine's operators read the answer of the question's kind from memory and judge it by the evidence);
- the confidence rule is what makes the loop backtrack: the answer is confident only when the best option
  clearly beats the runner-up *and* the evidence is detailed (a fine or ultra-fine memory, or an exact match of
  the option's words), so an answer guessed from lossy coarse memory sends the loop deeper;
- *check* (a watch) follows the same rule: what the watch names, all of it in one statement of a detailed memory,
  is a yes; found only in part, or only in coarse memory, a maybe (the checker then looks closer); none of it, a no.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from lucy.config.settings import LexicalReasonerSettings
from lucy.query.reasoners.base import (
    EVIDENCE_NOTE,
    AnswerReply,
    CheckReply,
    EvidenceSpan,
    LocaliseReply,
    MemoryItem,
    Question,
    Reasoned,
    Reasoner,
    SelectReply,
    SummaryReply,
    Usage,
)
from lucy.query.reasoners.lexical_watch import check_memory
from lucy.text import BM25, clip_text, hybrid_scores, normalise_phrase, question_terms, similar, terms

_DEPTH_WEIGHT = {"coarse": 0.55, "fine": 1.0, "ultra_fine": 1.0}
_DETAILED = ("fine", "ultra_fine")
_ANSWER_KIND = frozenset({"color", "many", "much", "count", "number", "kind", "type", "name"})
_DEPTHS = ("coarse", "fine", "ultra_fine")
_SUMMARY_WEIGHT = 0.3
_GLOBAL = re.compile(
    r"\b(whole|entire|overall|throughout|summari[sz]e|summary|in total|altogether|how many times|"
    r"from (the )?(beginning|start) to (the )?end|all (of )?the video|over the (course|video))\b", re.IGNORECASE)
# Where a question stops saying what it asks about and starts saying where or when ("... at the north door", "...
# while the radio played"): the words after it place the moment (time context of every kind; LexicalReasoner._weights).
_CONTEXT = re.compile(r"\s(at|while|when|during|around|after|before|beside|behind|under|below|above|next to|near|"
                      r"together with|with)\s", re.IGNORECASE)
# ... or a clause before the question proper, up to the comma before its question word ("Once the bus had left, what
# colour was the car?", "Near the two cones, which ...").
_LEADING = re.compile(r"^[^,?]*,\s*(?=(in |on |at |of |for |from |to )?(which|what|whose|who|where|how)\b)",
                      re.IGNORECASE)
_SENTENCES = re.compile(r"(?<=[.?!])\s+")
_WH = re.compile(r"\b(which|what|whose|who|where|how)\b", re.IGNORECASE)
_PRONOUN = re.compile(r"\b(they|them|it|those|these)\b", re.IGNORECASE)
# The thing a sentence ends on, after its article or count ("I saw a man with some blue balloons."): what a pronoun
# in the next sentence ("How many were there?") stands for (the subject of a question of any kind).
_LAST_THING = re.compile(r"\b(?:a|an|the|some|\d+)\s+((?:[\w-]+\s+){0,2}[\w-]+)\W*$", re.IGNORECASE)
# The word captions use for the picture as a whole, and its synonym (attribute: the colour of the background).
_BACKGROUND = re.compile(r"\b(backdrop|backgrounds?)\b", re.IGNORECASE)
# A number that is part of a name ("BUS 12", "CAR 40"), no count the question gives (count).
_NAME_NUMBER = re.compile(r"\b[A-Z][A-Z-]*\s+(\d+)\b")
# A word written as a name or a code ("MAIN", "12", "XY-901"): what a text question anchors its answer to (text).
_NAMED = re.compile(r"\b[A-Z0-9][A-Z0-9-]*[A-Z0-9]\b")
_QUOTED = re.compile(r"[\"“]([^\"”]{2,})[\"”]")
_TIMES = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s*-\s*(\d+(?:\.\d+)?))?\s*s\b")  # "seen 120.0-124.0 s", "754.0 s"
NEAR_ENOUGH = 1.0  # weight of question words beside an option that makes it fully "near" (LexicalReasoner._near)
ECHO_WEIGHT = 0.5  # an option that only repeats the question's words (every kind with options; LexicalReasoner._option)
UNANCHORED_WEIGHT = 0.5  # an option said away from what the question names (LexicalReasoner._anchors)
CONTEXT_WEIGHT = 0.25  # a word that places the moment, against 1 for what is asked about (LexicalReasoner._weights)
# A choice is confident only from a memory that holds, with the memories enclosing it, this share of what the
# question names (as memory holds it at best, see LexicalReasoner._context), for every kind: "the bike by the red
# door" is not answered for sure from a bike by a blue door, however exactly that memory names the bike; "the number
# of the bus at the depot" is, from a close look at the bus inside the span that shows the depot.
CHOICE_COVERAGE = 0.8
# What a memory inherits of the question words matched by a memory enclosing it: it is part of that moment (time
# context of every kind).
ENCLOSING_SHARE = 0.4
# A colour said of nothing in particular, or of another thing than the one asked about (LexicalReasoner._attached).
NEUTRAL_WEIGHT, ELSEWHERE_WEIGHT = 0.75, 0.5
# A count or colour the question gives of a thing ("when 2 red cars drove past") found in a memory only of something
# else ("BUS 2", "red awning"): how much of the word's weight it still carries there (count, attribute).
DETACHED_WEIGHT = 0.25
# ... and where it is said of that thing, but not with the others the question gives ("4 red cars; 2 white cars" for
# "the 2 red cars").
APART_WEIGHT = 0.75
# Words that ask for the colour of writing ("the lettering", "written in which colour"): what a caption says of letters.
_WRITING = re.compile(r"\b(letter\w*|written|writing|text|font|print\w*|script|words?)\b", re.IGNORECASE)
COLOUR_NAMES = frozenset((
    "black", "gray", "grey", "white", "red", "orange", "brown", "yellow", "green", "teal", "blue", "purple", "pink",
    "violet", "cyan", "magenta", "beige", "gold", "silver", "navy", "maroon", "olive", "turquoise"))
_COLOUR_TERMS = frozenset(terms(" ".join(COLOUR_NAMES)))
# Colours either side of a colour's borders on the hue wheel (and brown, a dark orange), as captions name them
# (attribute).
_NEIGHBOURS: dict[str, set[str]] = {}
for _a, _b in (("red", "orange"), ("orange", "yellow"), ("yellow", "green"), ("green", "teal"), ("teal", "blue"),
               ("blue", "purple"), ("purple", "pink"), ("pink", "red"), ("orange", "brown")):
    _NEIGHBOURS.setdefault(_a, set()).add(_b)
    _NEIGHBOURS.setdefault(_b, set()).add(_a)
# Least similarity of a name of short words to a line OCR read ("8US 1Z" for "BUS 12"; text; see _misread).
PHRASE_FUZZY = 0.75
NEIGHBOUR_WEIGHT = 0.5  # what a neighbour's name counts for an option colour no memory names
_WORDY = re.compile(r"^(?=.*[a-z])[a-z0-9-]{3,}$")  # a word or a code, not a number, time or decimal
_FACT = re.compile(r"\n+|;\s+")  # a caption's separate statements: its lines, and the items of a list in one line
_SENTENCE = re.compile(r"(?<=[.;!?])\s+|\n+")


@dataclass(slots=True)
class _Scored:
    item: MemoryItem
    score: float
    exact: bool
    context: float
    moment: float  # how much of the question the memory and those enclosing it hold (see CHOICE_COVERAGE)
    anchored: bool  # the option stands in a statement that names what the question names (see _anchors)


@dataclass(slots=True)
class _Reading:
    """What a question with options asks, read once for all its options and memories (LexicalReasoner._read)."""

    qset: set[str]  # its search terms
    echoed: set[str]  # ... less the numbers of names ("BUS 5"): what an option that repeats the question repeats
    weights: dict[str, float]  # each word by what it says (LexicalReasoner._weights)
    anchors: set[str]  # the names the answer must be said with (LexicalReasoner._anchors)
    cues: set[str]  # the names that place the moment (LexicalReasoner._cues)
    asked: set[str]  # the things asked a colour of (LexicalReasoner._asked)
    counted: tuple[str, frozenset[str]] | None  # the thing asked a count of, with its colours
    option_terms: list[set[str]]
    option_colours: set[str]  # the options that are colours


@dataclass(slots=True)
class _Memories:
    """The memories of one answer, split into statements once (LexicalReasoner._memories)."""

    items: list[MemoryItem]
    facts: list[list[str]]  # per memory, its statements
    lines: list[list[list[str]]]  # ... as terms
    doc_terms: list[set[str]]
    phrases: list[str]  # per memory, its text normalised for phrase matching
    fixtures: set[str]  # words on screen all the time
    cap: list[float]  # what each memory can contribute at most
    relevant: list[int]  # the memories about what is asked
    relevant_mass: float
    context: list[float]
    moment: list[float]
    timed: list[set[int]]  # per memory, the options it says at the moment the question gives


@dataclass(slots=True)
class _Option:
    """How one option is looked for in memory (LexicalReasoner._option)."""

    index: int
    terms: list[str]
    distinct: set[str]  # the words that tell it apart from the other options
    mass: float  # their idf
    echo: float  # ECHO_WEIGHT for an option that only repeats the question's words
    by_words: bool  # whether its words alone tell it apart (else only the whole phrase does)
    coded: bool
    patterns: list[re.Pattern[str]]  # its spellings, verbatim, where it is a name or a code
    colour: str | None  # the colour it is, where the question asks a colour
    count: str | None  # the count it is, where the question asks a count
    compact: str  # its letters and digits run together, for a misread name of short words
    short_words: bool


def _relevant(context: float) -> float:
    """Weight of a memory by how well it matches the question: steep, so that the memory that names what the
    question is about outweighs its neighbours that merely share a word."""
    return 0.15 + 0.85 * context * context


def _weight(level: str) -> float:
    return _DEPTH_WEIGHT.get(level, _SUMMARY_WEIGHT)


def subject_of(question: str) -> str:
    """The words of a question that say what it asks about, less those that place the moment: "What colour was
    the van at the BUS DEPOT?" -> "What colour was the van"; "Once the bus had left, what colour was the car?" ->
    "what colour was the car?"; "A man came in with some blue balloons. How many were they?" -> "How many were
    they? blue balloons" (a pronoun stands for the thing the sentence before ends on). Serves every kind: it is what
    the question is about, as against the moment it gives."""
    sentences = [part for part in _SENTENCES.split(question.strip()) if part]
    if not sentences:
        return ""
    at = max((i for i, part in enumerate(sentences) if part.rstrip().endswith("?")), default=len(sentences) - 1)
    asking = _LEADING.sub("", sentences[at])
    found = _CONTEXT.search(asking)
    subject = asking if found is None else asking[:found.start()]
    if found is not None and _WH.search(asking[found.end():]) and not _WH.search(subject):
        subject = asking[found.start():]  # "The code appeared under which sign?": the asking part comes last
    if at > 0 and _PRONOUN.search(subject) and (thing := _LAST_THING.search(sentences[at - 1])):
        subject = f"{subject} {thing.group(1)}"
    return subject


def _distinctive(phrase: str) -> bool:
    """Whether an option (normalised) is a name or a code that is evidence wherever it is found verbatim: several
    words ("MAIN HALL", "top left") or one with digits ("XY-901"), four characters or more (text)."""
    return len(phrase) >= 4 and (" " in phrase or any(c.isdigit() for c in phrase))


def _verbatim(phrase: str) -> list[re.Pattern[str]]:
    """The spellings of an option (normalised) to find verbatim, where it is a name or a code (text): itself, and a
    code of a few words run together, as it is said aloud or read ("B 12" on a sign, "B12" in a transcript)."""
    if not _distinctive(phrase):
        return []
    spellings = [phrase]
    if " " in phrase and any(c.isdigit() for c in phrase) and len(phrase.split()) <= 3:
        spellings.append(phrase.replace(" ", ""))
    return [re.compile(rf"(?<![a-z0-9]){re.escape(s)}(?![a-z0-9])") for s in spellings]


def _is_modifier(word: list[str]) -> bool:
    """Whether a word (its terms) is a count or a colour: "3", "three", "green"."""
    return len(word) == 1 and ((word[0].isdigit() and len(word[0]) <= 3) or word[0] in _COLOUR_TERMS)


class LexicalReasoner(Reasoner):
    """Deterministic agents over memory text. Every call counts as one (free) LLM call in the trace."""

    name = "lexical"
    model = "lexical-bm25"

    def __init__(self, settings: LexicalReasonerSettings | None = None) -> None:
        self.settings = settings or LexicalReasonerSettings()

    # ------------------------------------------------------------------------------------------- helpers

    @staticmethod
    def _usage(started: float) -> Usage:
        return Usage(latency_seconds=time.perf_counter() - started, llm_calls=1)

    def _match(self, term: str, doc_terms: set[str]) -> tuple[float, str | None]:
        """(1, term) for an exact term, a reduced score for an OCR-style near miss of a long term, else 0 (text:
        codes and names as OCR reads them; every kind matches the question's words with it)."""
        if term in doc_terms:
            return 1.0, term
        if len(term) >= 5 and any(c.isdigit() for c in term):
            # A code run together with the word before it ("FORMXY-901" for "FORM XY-901").
            glued = next((d for d in doc_terms if term in d), None)
            if glued is not None:
                return 1.0, glued
        if len(term) < 6:
            return 0.0, None  # short codes and numbers must match exactly ("4821" is not "4281")
        best, which = 0.0, None
        for d in doc_terms:
            if abs(len(d) - len(term)) <= 2:
                score = similar(term, d, self.settings.fuzzy)
                if score > best:
                    best, which = score, d
        if best < self.settings.fuzzy:
            return 0.0, None
        return 0.5 * (best - self.settings.fuzzy) / (1 - self.settings.fuzzy), which

    def _misread(self, compact: str, facts: list[str]) -> tuple[float, str]:
        """How well a name of short words (``compact``: "bus12") matches the best of the text lines a memory
        quotes, or a run of their words as long as it, read with OCR slips ("ARC = 1"), as :meth:`_match` scores a
        near miss (0 below the fuzzy floor); and that run."""
        best, where = 0.0, ""
        digits = any(c.isdigit() for c in compact)
        for fact in facts:
            for line in _QUOTED.findall(fact):
                words = normalise_phrase(line).split()
                for a in range(len(words)):
                    for b in range(a + 1, len(words) + 1):
                        run = "".join(words[a:b])
                        if len(run) > len(compact) + 2:
                            break
                        if digits != any(c.isdigit() for c in run):
                            continue  # "BUS STOP" is no reading of "BUS 12": its number is not there at all
                        score = similar(compact, run, PHRASE_FUZZY)
                        if score > best:
                            best, where = score, " ".join(words[a:b])
        if best < PHRASE_FUZZY:
            return 0.0, ""
        return 0.5 * (best - PHRASE_FUZZY) / (1 - PHRASE_FUZZY), where

    @staticmethod
    def _near(lines: list[list[str]], term: str, weights: dict[str, float], window: int = 6) -> float:
        """How close ``term`` stands to the question's words in a memory (the terms of each of its lines), in
        [0, 1]: the question's words within a few words of it on one line, each by its weight (:func:`_weights`),
        :data:`NEAR_ENOUGH` of them making 1 ("5 white cars" for "how many white cars"); 0 with none (a
        caption's lines are separate facts: "- none readable" ends its text section and says nothing about the
        "People: ..." line after it)."""
        best = 0.0
        for sequence in lines:
            for p, t in enumerate(sequence):
                if t == term:
                    around = set(sequence[max(0, p - window):p + window + 1]) - {term}
                    best = max(best, sum(weights.get(w, 0.0) for w in around))
        return min(1.0, best / NEAR_ENOUGH)

    @classmethod
    def _near_phrase(cls, lines: list[list[str]], phrase: list[str], weights: dict[str, float]) -> float:
        """:meth:`_near` for the words of a phrase where they stand together ("top right" where a line says
        "top right", not wherever it says "right")."""
        n, best = len(phrase), 0.0
        for sequence in lines:
            for p in range(len(sequence) - n + 1):
                if sequence[p:p + n] == phrase:
                    rest = sequence[:p] + [" ".join(phrase)] + sequence[p + n:]
                    best = max(best, cls._near([rest], " ".join(phrase), weights))
        return best

    @staticmethod
    def _anchors(question: Question) -> set[str]:
        """What the question names in what it asks about, written as a name ("the colour of the MAIN HALL sign",
        'the "OPEN" sign', a code): the answer must be said in the statement that names it, not in a caption's other
        lines ("white letters" of another sign). Options' own words are not anchors (text, attribute)."""
        subject = subject_of(question.text)
        named = " ".join(_NAMED.findall(subject) + _QUOTED.findall(subject))
        return set(terms(named)) - {t for option in question.options for t in terms(option)}

    @staticmethod
    def _cues(question: Question, anchors: set[str]) -> set[str]:
        """The words written as names by which the question places the moment, not what it asks about ("while the
        MENU board was lit": menu), less the anchors, the options' words and bare numbers (time context)."""
        subject = subject_of(question.text)
        named = set(terms(" ".join(_NAMED.findall(question.text)))) - set(terms(" ".join(_NAMED.findall(subject))))
        options = {t for option in question.options for t in terms(option)}
        return {t for t in named - anchors - options if not t.isdigit()}

    @staticmethod
    def _span(fact: str) -> tuple[float, float] | None:
        """The times a caption's statement gives for what it says ("seen 120.0-124.0 s", "(top right, 754.0 s)"),
        from the first to the last; None when it gives none (time context)."""
        found = [(float(m[1]), float(m[2] or m[1])) for m in _TIMES.finditer(fact)]
        return (min(a for a, _ in found), max(b for _, b in found)) if found else None

    def _timed(self, question: Question, facts: list[list[str]], lines: list[list[list[str]]],
               option_terms: list[set[str]], cues: set[str], asked: set[str]) -> list[set[int]]:
        """Per memory, the options it says of what is asked about at the time of what the question places the
        moment by, where it times both (time context): "while a sign said AWAY", read at 109 s in a caption whose
        scenes were brown 100-108 s and orange at 109 s, is the orange. What places the moment is a name the
        question gives outside what it asks about (``cues``), or a count or colour it gives of a thing there ("when 4
        yellow cars parked"); what is asked about is the thing with the counts and colours the question gives of it
        ("the blue cars": not the white car that was on screen as the sign was), or else the ``asked`` words (the
        background, the lettering)."""
        subject = subject_of(question.text)
        placing = self._modifiers(question.text.replace(subject, " ") if subject else question.text)
        things = self._modifiers(subject)

        def says(line: list[str], modifiers: dict[str, tuple[str, frozenset[str]]]) -> bool:
            return any((run := self._said_with(line, t, thing)) is not None and group <= run
                       for t, (thing, group) in modifiers.items())

        out: list[set[int]] = []
        for item_facts, item_lines in zip(facts, lines, strict=True):
            spans = [self._span(fact) for fact in item_facts]
            words = [set(line) for line in item_lines]
            moments = [span for span, line, held in zip(spans, item_lines, words, strict=True)
                       if span is not None and (cues & held or says(line, placing))]
            said: set[int] = set()
            for span, line, held in zip(spans, item_lines, words, strict=True):
                if span is None or not any(span[0] <= b and a <= span[1] for a, b in moments):
                    continue
                if says(line, things) if things else (not asked or asked & held):
                    said.update(i for i, option in enumerate(option_terms) if option and option <= held)
            out.append(said)
        return out

    @staticmethod
    def _fixtures(memory: Sequence[MemoryItem], doc_terms: list[set[str]]) -> set[str]:
        """Words on screen all the time (a camera's name, a channel's logo, a clock), not of any moment (attribute,
        text: their colour or words answer nothing about a moment): those said in at
        least half the coarse spans memory reaches (by any memory inside each: a coarse look may misread them),
        and in three or more."""
        length = max((m.end - m.start for m in memory if m.level == "coarse"), default=0.0)
        if length <= 0:
            return set()
        spans: dict[int, set[str]] = {}
        for item, words in zip(memory, doc_terms, strict=True):
            if item.level in _DEPTHS:
                spans.setdefault(int(item.start // length), set()).update(words)
        counts = Counter(t for words in spans.values() for t in words)
        return {t for t, n in counts.items() if n >= max(3.0, len(spans) / 2)}

    @staticmethod
    def _asked(question: Question, anchors: set[str]) -> set[str]:
        """The things the question asks a colour of ("the lettering of the X sign": lettering, sign; "the
        background colour": background), as terms: the words of what it asks about, less names and options
        (attribute)."""
        subject = subject_of(question.text)
        options = {t for option in question.options for t in terms(option)}
        asked = set(terms(subject)) - anchors - options - _ANSWER_KIND - _COLOUR_TERMS
        if _BACKGROUND.search(subject):
            asked.add("background")
        return asked | ({"letter"} if _WRITING.search(question.text) else set())

    @staticmethod
    def _attached(facts: list[str], colour: str, asked: set[str], fixtures: set[str] = frozenset(),
                  cues: set[str] = frozenset()) -> float:
        """How a colour stands in a memory's statements, as English attaches it to the word right after it: 1
        where it is said of what the question asks about ("green letters" for the lettering);
        :data:`NEUTRAL_WEIGHT` where it is said of nothing in particular ("... in brown"); less where every mention
        is of something else (:data:`ELSEWHERE_WEIGHT`: "4 red cars" when the lettering is asked about, "brown
        93%" of the picture, "letters on brown" unless the background is asked about, any colour of text made
        only of ``fixtures``, on screen all the time, such as a camera's name, or of text that holds ``cues``, the
        names by which the question places the moment: "the door's colour while the MENU board was lit" is not the
        colour of the MENU line). Serves the attribute kind."""
        pattern = re.compile(rf"(\bon\s+)?(?<![a-z0-9-]){re.escape(colour)}(?![a-z0-9-])(?:\s+([a-z0-9%.]+))?",
                             re.IGNORECASE)
        best = 0.0
        for fact in facts:
            quoted = [set(terms(q)) for q in _QUOTED.findall(fact)]
            if quoted and (fixtures and all(q <= fixtures for q in quoted) or any(q & cues for q in quoted)):
                if pattern.search(fact):
                    best = max(best, ELSEWHERE_WEIGHT)
                continue
            for found in pattern.finditer(fact):
                following = terms((found.group(2) or "").lower())
                if following and following[0] in asked:
                    return 1.0
                # Said of nothing in particular ("... in green."), or of something else ("red cars", "brown 93%"
                # of the picture, the ground letters are written on: "white letters on blue").
                elsewhere = following or (found.group(1) and "background" not in asked)
                best = max(best, ELSEWHERE_WEIGHT if elsewhere else NEUTRAL_WEIGHT)
        return best or 1.0

    @staticmethod
    def _counted_thing(question: Question) -> tuple[str, frozenset[str]] | None:
        """The thing a question asks the count of, with the colours it gives of it: "how many white cars
        went by?" -> ("car", {"white"}); None when it asks no count (count)."""
        words = [terms(token) for token in subject_of(question.text).split()]
        for p, word in enumerate(words):
            if word[-1:] in (["many"], ["number"], ["count"]):
                given = []
                for later in words[p + 1:]:
                    if not later:  # "the number of ...": a stopword before the thing
                        continue
                    if not _is_modifier(later):
                        return later[0], frozenset(given)
                    given.append(later[0])
        return None

    @staticmethod
    def _counted(lines: list[list[str]], number: str, thing: str, given: frozenset[str]) -> float:
        """How a count stands in a memory's statements, as :meth:`_attached` for a colour: 1 where it is the
        count of the thing asked about, with the colours the question gives of it ("2 white cars" for "how
        many white cars"); :data:`ELSEWHERE_WEIGHT` where every mention counts something else ("3 red cars") or is
        no count at all ("BUS 3"). Serves the count kind."""
        best = 0.0
        for line in lines:
            said = LexicalReasoner._said_with(line, number, thing)
            if said is not None and given <= said:
                return 1.0
            if number in line:
                best = ELSEWHERE_WEIGHT
        return best or 1.0

    @staticmethod
    def _specific(weights: dict[str, float], bm25: BM25) -> dict[str, float]:
        """The words of what is asked about, each weighted by how specific it is in memory (its idf against the
        most specific of them): in "where were the red cars", "red" tells the ones asked about from the white
        car every caption mentions, and "cars" does not (every kind)."""
        subject = [w for w, weight in weights.items() if weight >= 1.0 and w in bm25.idf]  # words memory holds
        top = max((bm25.idf[w] for w in subject), default=0.0)
        if top <= 0:
            return weights
        return {w: (weight * min(1.0, bm25.idf_of(w) / top) if weight >= 1.0 else weight)
                for w, weight in weights.items()}

    @staticmethod
    def _weights(question: str) -> dict[str, float]:
        """The question's words, each weighted by what it says: 1 for what is asked about ("the red cars"),
        :data:`CONTEXT_WEIGHT` for the words that place it ("at the BUS DEPOT", "while the sign said EXIT": they
        find the moment, and stand on the moment's other lines), half for words that only name the kind of answer
        ("colour", "how many")."""
        subject = subject_of(question)
        weights = dict.fromkeys(question_terms(question), CONTEXT_WEIGHT)
        for t in question_terms(subject) + (["background"] if _BACKGROUND.search(subject) else []):
            weights[t] = 1.0
        for t in weights.keys() & _ANSWER_KIND:
            weights[t] = 0.5
        return weights

    def _context(self, memory: Sequence[MemoryItem], bm25: BM25, query: list[str],
                 question: Question) -> tuple[list[float], list[float]]:
        """How well each memory matches the question's own words, in [0, 1], each word by its idf and by how well
        the memory holds it (:meth:`_held`); a memory inherits :data:`ENCLOSING_SHARE` of what the memories
        enclosing it match (a fine caption inside the coarse span that names the place). Returned with each memory's
        moment: the same match with all that the memories enclosing it hold (see :data:`CHOICE_COVERAGE`)."""
        qset = set(query)
        vocabulary = set(bm25.idf)
        # Each question word as memory writes it: exactly, or its near misses (scored once over the vocabulary).
        near = {t: {d: found for d in vocabulary - {t} if (found := self._match(t, {d})[0]) > 0} for t in qset}
        modifiers = self._modifiers(question.text)
        own = [self._held(item, doc, qset, near, modifiers) for item, doc in zip(memory, bm25.docs, strict=True)]
        # A word counts as much as memory holds it at best: one no memory holds, even misread, tells nothing about
        # which memory is relevant, and the memory that holds a misread word best is not marked down for the slip.
        best = {t: max(held.get(t, 0.0) for held in own) for t in qset} if own else {}
        worth = {t: best[t] * (bm25.idf_of(t) if t in vocabulary else max(bm25.idf_of(d) for d in near[t]))
                 for t in qset if best.get(t)}
        total = sum(worth.values()) or 1.0
        own = [{t: found / best[t] for t, found in held.items()} for held in own]
        out, moments = [], []
        for i in range(len(memory)):
            enclosed = self._enclosed(i, memory, own)
            mass = sum(worth[t] * found for t, found in own[i].items())
            around = sum(worth[t] * gain for t, gain in enclosed.items())
            out.append(min(1.0, (mass + ENCLOSING_SHARE * around) / total))
            moments.append(min(1.0, (mass + around) / total))
        return out, moments

    def _held(self, item: MemoryItem, doc: Counter[str], qset: set[str], near: dict[str, dict[str, float]],
              modifiers: dict[str, tuple[str, frozenset[str]]]) -> dict[str, float]:
        """The question's words a memory holds, each with how well: 1 exactly; a long word read with an OCR slip as
        :meth:`_match` scores it (text); a count or colour the question gives of a thing fully only where it is said
        of that thing (:meth:`_modifiers`: count, attribute), :data:`APART_WEIGHT` where said of it without the
        others the question gives, :data:`DETACHED_WEIGHT` where said of something else."""
        held = {t: 1.0 for t in qset if t in doc}
        for t in qset - held.keys():
            found = max((near[t][d] for d in doc if d in near[t]), default=0.0)
            if found:
                held[t] = found
        given = modifiers.keys() & held.keys()
        if given:
            lines = [terms(fact) for fact in _FACT.split(item.text)]
            for t in given:
                thing, group = modifiers[t]
                said = [run for line in lines if (run := self._said_with(line, t, thing)) is not None]
                if not said:
                    held[t] = DETACHED_WEIGHT
                elif not any(group <= run for run in said):
                    held[t] = min(held[t], APART_WEIGHT)
        return held

    @staticmethod
    def _enclosed(i: int, memory: Sequence[MemoryItem], own: list[dict[str, float]]) -> dict[str, float]:
        """What memory ``i`` lacks of the question's words that the memories around it hold (the moment it is part
        of), each word at the most any of them adds."""
        item = memory[i]
        enclosed: dict[str, float] = {}
        for j, other in enumerate(memory):
            if j != i and other.start <= item.start and item.end <= other.end and \
                    (other.end - other.start) > (item.end - item.start):
                for t, found in own[j].items():
                    enclosed[t] = max(enclosed.get(t, 0.0), found - own[i].get(t, 0.0))
        return {t: gain for t, gain in enclosed.items() if gain > 0}

    @staticmethod
    def _modifiers(question: str) -> dict[str, tuple[str, frozenset[str]]]:
        """The counts and colours the question gives of a thing, each with that thing and all the question gives of
        it: "when 3 green cars parked" -> {"3": ("car", {"3", "green"}), "green": (the same)}; a count with no thing
        right after it is of the thing named before it ("the green cars (there were 3)", "bus 3"). A
        number inside a time or a code is no count (count, attribute)."""
        words = [terms(token) for token in question.split()]
        things: dict[str, str] = {}
        for p, word in enumerate(words):
            if not _is_modifier(word):
                continue
            thing = next((w for w in words[p + 1:] if not _is_modifier(w)), None)
            if not thing and word[0].isdigit():
                thing = next((w for w in reversed(words[:p]) if w and not _is_modifier(w)), None)
            if thing:  # none when a stopword follows ("3 of the ...")
                things[word[0]] = thing[0]
        return {t: (thing, frozenset(m for m, other in things.items() if other == thing))
                for t, thing in things.items()}

    @staticmethod
    def _said_with(line: list[str], modifier: str, thing: str) -> frozenset[str] | None:
        """The counts and colours a line says together with ``modifier`` of ``thing`` ("4 red cars": {"4",
        "red"}; "cars: 3": {"3"}), the largest such run where it says it more than once; None where it does
        not say ``modifier`` of ``thing``."""
        best: frozenset[str] | None = None
        for p, word in enumerate(line):
            if word != modifier:
                continue
            a = b = p
            while a > 0 and _is_modifier(line[a - 1:a]):
                a -= 1
            while b + 1 < len(line) and _is_modifier(line[b + 1:b + 2]):
                b += 1
            if (b + 1 < len(line) and line[b + 1] == thing) or (a > 0 and line[a - 1] == thing):
                run = frozenset(line[a:b + 1])
                if best is None or len(run) > len(best):
                    best = run
        return best

    @staticmethod
    def _specificity(memory: Sequence[MemoryItem], context: list[float]) -> list[float]:
        """1, or 0.5 for a memory that holds a deeper one matching the question at least as well (every kind with
        options; VideoLucy's coarse-to-fine evidence): a fine caption
        of 10 s mixes what the asked-about moment showed with what came before or after it, the ultra-fine
        caption inside it is about that moment alone, so its evidence should prevail."""
        out = []
        for i, item in enumerate(memory):
            superseded = any(
                context[j] > 0 and context[j] >= context[i] - 1e-9 and item.start <= other.start
                and other.end <= item.end and (other.end - other.start) < (item.end - item.start)
                and _DEPTHS.index(other.level) > _DEPTHS.index(item.level)
                for j, other in enumerate(memory)
                if j != i and other.level in _DEPTHS and item.level in _DEPTHS)
            out.append(0.5 if superseded else 1.0)
        return out

    # ------------------------------------------------------------------------------------------- agents

    async def answer(self, question: Question, memory: Sequence[MemoryItem], *,
                     final: bool = False) -> Reasoned[AnswerReply]:
        started = time.perf_counter()
        memory = list(memory)
        bm25 = BM25([m.text for m in memory])
        query = question_terms(question.text)
        context, moment = self._context(memory, bm25, query, question)
        if question.options:
            reply = self._choose(question, memory, bm25, context, moment)
        else:
            reply = self._quote(question, memory, bm25, context, query)
        if final:
            reply = reply.model_copy(update={"confident": False})
        return Reasoned(reply, self._usage(started))

    def _choose(self, question: Question, memory: list[MemoryItem], bm25: BM25, context: list[float],
                moment: list[float]) -> AnswerReply:
        """The option the memories best support (see the module's docstring), in three steps: what the question asks
        (:meth:`_read`), what each memory says (:meth:`_memories`), and how each option stands in each memory
        (:meth:`_score_option`); :meth:`_verdict` then decides how sure the choice is."""
        reading = self._read(question, bm25)
        memories = self._memories(question, memory, bm25, context, moment, reading)
        scored = [self._score_option(self._option(i, question, reading, bm25), reading, memories, bm25)
                  for i in range(len(question.options))]
        return self._verdict(question, scored)

    def _read(self, question: Question, bm25: BM25) -> _Reading:
        """What a question with options asks, read once for all its options and memories: its words and their
        weights (what is asked about, the moment's context, the kind of answer), the names it anchors the answer to,
        the names that place the moment, the things it asks a colour or a count of."""
        qset = set(question_terms(question.text))
        # The number of a name ("BUS 5") is no count the question gives: an option "5" does not echo it (count).
        echoed = qset - {m[1] for m in _NAME_NUMBER.finditer(question.text)}
        weights = self._specific(self._weights(question.text), bm25)
        # What is asked about may take several words ("the cars in the bottom left"): an option beside all of
        # them that memory holds is nearer than one beside some ("2 red cars (top left)").
        subject_mass = sum(w for t, w in weights.items()
                           if t in bm25.idf and t not in _ANSWER_KIND and w > CONTEXT_WEIGHT)
        if subject_mass > NEAR_ENOUGH:
            weights = {t: w * NEAR_ENOUGH / subject_mass for t, w in weights.items()}
        anchors = self._anchors(question)
        return _Reading(qset, echoed, weights, anchors, self._cues(question, anchors), self._asked(question, anchors),
                        self._counted_thing(question), [set(terms(o)) for o in question.options],
                        {normalise_phrase(o) for o in question.options} & COLOUR_NAMES)

    def _memories(self, question: Question, memory: list[MemoryItem], bm25: BM25, context: list[float],
                  moment: list[float], reading: _Reading) -> _Memories:
        """The memories of one answer split into statements once, with what each can contribute at most (its depth,
        how well it matches the question, whether a deeper memory inside it supersedes it) and the relevant set:
        those within half of the best."""
        facts = [_FACT.split(m.text) for m in memory]
        lines = [[terms(fact) for fact in item] for item in facts]
        doc_terms = [{t for line in item for t in line} for item in lines]
        specific = self._specificity(memory, context)
        cap = [_weight(m.level) * _relevant(context[k]) * specific[k] for k, m in enumerate(memory)]
        top_cap = max(cap, default=0.0)
        relevant = [k for k in range(len(memory)) if top_cap > 0 and cap[k] >= 0.5 * top_cap]
        timed = self._timed(question, facts, lines, reading.option_terms, reading.cues, reading.asked)
        return _Memories(memory, facts, lines, doc_terms, [normalise_phrase(m.text) for m in memory],
                         self._fixtures(memory, doc_terms), cap, relevant, sum(cap[k] for k in relevant) or 1.0,
                         context, moment, timed)

    @staticmethod
    def _option(i: int, question: Question, reading: _Reading, bm25: BM25) -> _Option:
        """How option ``i`` is looked for: the words that tell it apart from the other options, as a whole phrase,
        spelled as OCR or a transcript may write it, and as a colour or a count where the question asks one."""
        own = reading.option_terms[i]
        others = set().union(*(t for j, t in enumerate(reading.option_terms) if j != i))
        distinct = (own - others - reading.qset) or (own - others) or own
        phrase = normalise_phrase(question.options[i])
        number = terms(question.options[i])
        compact = "".join(phrase.split())
        return _Option(
            index=i, terms=number, distinct=distinct, mass=sum(bm25.idf_of(t) for t in distinct) or 1.0,
            # An option that only repeats the question's words is its distractor ("the background behind the red
            # cars" was not red): what it is found beside counts half.
            echo=ECHO_WEIGHT if distinct <= reading.echoed else 1.0,
            # Options made of the same words in another order ("top left", "bottom left"...) are told apart only
            # by the whole phrase: a stray "left" elsewhere is no evidence for either.
            by_words=bool(own - others) or len(own) < 2, coded=any(c.isdigit() for c in phrase),
            patterns=_verbatim(phrase),
            colour=phrase if phrase in COLOUR_NAMES and reading.asked else None,
            count=number[0] if reading.counted and len(number) == 1 and number[0].isdigit() else None,
            compact=compact, short_words=len(own) > 1 and all(len(t) < 6 for t in own) and len(compact) >= 4)

    def _score_option(self, option: _Option, reading: _Reading, memories: _Memories, bm25: BM25) -> _Scored | None:
        """How well the memories support an option: the best single memory's support, blended with how consistently
        the relevant memories agree (a caption that straddles a cut may name a colour from just before the moment
        asked about)."""
        best: _Scored | None = None
        scores = [0.0] * len(memories.items)
        for k, item in enumerate(memories.items):
            support, exact, anchored = self._support(option, k, reading, memories, bm25)
            score = scores[k] = support * memories.cap[k]
            if score > 0 and (best is None or score > best.score):
                best = _Scored(item, score, exact, memories.context[k], memories.moment[k], anchored)
        if best is not None:
            agreement = sum(scores[k] for k in memories.relevant) / memories.relevant_mass
            best.score = 0.3 * best.score + 0.7 * agreement
        return best

    def _support(self, option: _Option, k: int, reading: _Reading, memories: _Memories,
                 bm25: BM25) -> tuple[float, bool, bool]:
        """(support, exact, anchored) of an option in memory ``k``: found by its words, verbatim, or misread; then
        qualified by what it is said of (a count of the thing counted, a colour of the thing asked about), by when
        (the moment the question gives) and by where (the statement that names the question's anchor)."""
        lines, facts = memories.lines[k], memories.facts[k]
        support, said = self._word_support(option, lines, memories.doc_terms[k], reading.weights, bm25)
        exact = any(p.search(memories.phrases[k]) for p in option.patterns)
        if exact:
            # Found verbatim: strong evidence. A code is its spelling; words such as "top left" or "light blue" are
            # said of many things, and count by how near they stand to what the question is about (text, attribute).
            near = 1.0 if option.coded else self._near_phrase(lines, option.terms, reading.weights)
            support = max(support, 0.8 * (0.4 + 0.6 * near))
            said.update(option.terms)
        if support == 0 and option.short_words:
            # A name of short words misread by OCR is found by the whole of it (text).
            found, where = self._misread(option.compact, facts)
            if found:
                support = found * (0.4 + 0.6 * self._near_phrase(lines, terms(where), reading.weights))
                said.update(terms(where))
        if option.count is not None and support > 0 and reading.counted:
            support *= self._counted(lines, option.count, *reading.counted)
        if option.colour is not None:
            support, said = self._coloured(option.colour, support, said, k, reading, memories)
        if memories.timed[k] and option.index not in memories.timed[k]:  # said at another time than the question's
            support *= ELSEWHERE_WEIGHT
        anchored = not reading.anchors or any(said & set(fact) and reading.anchors & set(fact) for fact in lines)
        return support * option.echo * (1.0 if anchored else UNANCHORED_WEIGHT), exact, anchored

    def _word_support(self, option: _Option, lines: list[list[str]], doc_terms: set[str], weights: dict[str, float],
                      bm25: BM25) -> tuple[float, set[str]]:
        """Support of an option by the words that tell it apart, each by its idf, how well memory holds it
        (:meth:`_match`) and how near it stands to the question's words (:meth:`_near`); with those words as this
        memory writes them."""
        support = 0.0
        said: set[str] = set()
        for t in option.distinct if option.by_words else ():
            found, which = self._match(t, doc_terms)
            if found:
                said.add(which or t)
                support += bm25.idf_of(t) * found * (0.4 + 0.6 * self._near(lines, which or t, weights))
        return support / option.mass, said

    def _coloured(self, colour: str, support: float, said: set[str], k: int, reading: _Reading,
                  memories: _Memories) -> tuple[float, set[str]]:
        """An option that is a colour, where the question asks a colour (attribute): its support as said of the thing
        asked about (:meth:`_attached`), or, named nowhere, read from a neighbouring colour's name that is no option
        (names of colours blur at their borders, in a caption as in a small, blended picture)."""
        facts, lines, doc_terms = memories.facts[k], memories.lines[k], memories.doc_terms[k]
        if support > 0:
            return support * self._attached(facts, colour, reading.asked, memories.fixtures, reading.cues), said
        for other in _NEIGHBOURS.get(colour, set()) - reading.option_colours:
            if other in doc_terms:
                found = NEIGHBOUR_WEIGHT * (0.4 + 0.6 * self._near(lines, other, reading.weights)) * \
                    self._attached(facts, other, reading.asked, memories.fixtures, reading.cues)
                if found > support:
                    support, said = found, {other}
        return support, said

    def _verdict(self, question: Question, scored: list[_Scored | None]) -> AnswerReply:
        """The best-supported option, confident only when it clearly beats the runner-up, rests on detailed
        evidence (a fine or finer memory, or a verbatim match) and that evidence is about what was asked."""
        ranked = sorted(range(len(question.options)), key=lambda i: (-(scored[i].score if scored[i] else 0.0), i))
        top = ranked[0]
        first = scored[top]
        second = scored[ranked[1]] if len(ranked) > 1 else None
        s1 = first.score if first else 0.0
        s2 = second.score if second else 0.0
        s = self.settings
        detailed = first is not None and (first.item.level in _DETAILED or first.exact)
        on_topic = first is not None and first.context >= s.min_coverage and first.moment >= CHOICE_COVERAGE and \
            first.anchored
        confident = s1 >= s.min_score and s1 - s2 >= s.min_margin and detailed and on_topic
        evidence: list[EvidenceSpan] = []
        if first is None:
            reason = "no memory mentions any option; guessing"
        elif s1 < s.min_score:  # a guess: what it leans on is no evidence to look closer at
            reason = f"option {top} scores only {s1:.2f} against {s2:.2f} for the runner-up; guessing"
        else:
            evidence = [EvidenceSpan(start=first.item.start, end=first.item.end, stream=first.item.stream or None)]
            reason = (f"option {top} scores {s1:.2f} against {s2:.2f} for the runner-up, from {first.item.level} "
                      f"memory at {first.item.start:g}-{first.item.end:g}s{' (exact match)' if first.exact else ''}")
            if not confident:
                reason += ("; only coarse evidence" if not detailed else
                           "; the evidence is not about what was asked" if not on_topic else "; not decisive")
        return AnswerReply(answer=question.options[top], option_index=top, confident=confident,
                           evidence=evidence, reason=reason)

    def _quote(self, question: Question, memory: list[MemoryItem], bm25: BM25, context: list[float],
               query: list[str]) -> AnswerReply:
        if not memory or not query:
            return AnswerReply(answer="The memory holds nothing about this.", confident=False,
                               reason="no memory matches the question")
        raw = bm25.scores(query)
        scored = sorted(range(len(memory)), key=lambda k: (-(raw[k] * _weight(memory[k].level) *
                                                              _relevant(context[k])), k))
        k = scored[0]
        if raw[k] <= 0:
            return AnswerReply(answer="The memory holds nothing about this.", confident=False,
                               reason="no memory matches the question")
        item = memory[k]
        qset = set(query)
        sentences = [s.strip() for s in _SENTENCE.split(item.text) if s.strip()] or [item.text]
        # The two lines that share most words with the question, in the memory's order (one names what the
        # question is about, the other often holds the detail asked for).
        overlap = [len(qset & set(terms(s))) for s in sentences]
        best = sorted(range(len(sentences)), key=lambda i: (-overlap[i], len(sentences[i]), i))[:2]
        best = [i for i in best if overlap[i] > 0] or best[:1]
        line = " ".join(sentences[i] for i in sorted(best))
        coverage = context[k]
        # A quoted line is an excerpt, not an answer: that it shares the question's words says nothing of whether it
        # holds what is asked (a count, a time, a reason). It is never confident; the engine's operators read the
        # value of the question's kind from memory and give confidence from that evidence (lucy.query.operators).
        return AnswerReply(
            answer=f"{f'On {item.stream} at' if item.stream else 'At'} {item.start:g}-{item.end:g}s: "
                   f"{clip_text(line, 400)}", confident=False,
            evidence=[EvidenceSpan(start=item.start, end=item.end, stream=item.stream or None)],
            reason=f"an excerpt: the best-matching {item.level} memory (it holds {coverage:.0%} of the question's "
                   "words, which is no evidence that it answers)")

    def _ranking(self, question: Question, items: Sequence[MemoryItem]) -> tuple[list[float], list[float]]:
        """(relevance, context) of memories to a question, for choosing where to look. The question's words count
        as the answer weighs them (:meth:`_context`: a count or colour said of another thing, a word misread by
        OCR), on the scale of their best BM25 score; the options' words count half (they are what is to be told
        apart, and numbers or colours are everywhere); meaning counts as :func:`hybrid_scores` weighs it."""
        bm25 = BM25([m.text for m in items])
        query = question_terms(question.text)
        options = [t for o in question.options for t in terms(o)]
        scale = max(bm25.scores(query), default=0.0) or 1.0
        context, _ = self._context(items, bm25, query, question)
        words = [scale * a + 0.5 * b for a, b in zip(context, bm25.scores(options), strict=True)]
        return hybrid_scores(words, [m.similarity for m in items]), context

    async def localise(self, question: Question, memory: Sequence[MemoryItem],
                       candidates: Sequence[MemoryItem]) -> Reasoned[LocaliseReply]:
        started = time.perf_counter()
        if not candidates:
            raise ValueError("localise needs at least one candidate")
        # A candidate is worth what the best memory inside it says (its own caption or deeper ones), by how well
        # that memory matches the question (steeply, as the answer weighs it: :func:`_relevant`).
        pool = list(memory) + [c for c in candidates if c not in memory]
        raw, context = self._ranking(question, pool)
        # Where the answer so far found what it rests on is looked at closer first (VideoLucy's coarse-to-fine
        # step): the best-matching of those candidates, if any holds one.
        held = [c for c in candidates if c.note == EVIDENCE_NOTE] or list(candidates)
        best_ref, best_score, best_depth = held[0].ref, -1.0, -1
        for c in held:  # candidates come best first by the engine's order; ties keep that order...
            inside = [raw[i] * _weight(m.level) * _relevant(context[i]) for i, m in enumerate(pool)
                      if c.start <= m.start and m.end <= c.end and not m.level.startswith("summary")]
            score = max(inside, default=0.0)
            depth = _DEPTHS.index(c.level) if c.level in _DEPTHS else -1
            # ... except that the narrower of two spans holding the same evidence is the better place to look
            if score > best_score + 1e-9 or (abs(score - best_score) <= 1e-9 and depth > best_depth):
                best_ref, best_score, best_depth = c.ref, score, depth
        instruction = self.instruction(question)
        return Reasoned(LocaliseReply(span=best_ref, instruction=instruction,
                                      reason=f"best lexical match ({best_score:.2f})"), self._usage(started))

    async def check(self, watch_question: str, memory: Sequence[MemoryItem]) -> Reasoned[CheckReply]:
        started = time.perf_counter()
        reply = check_memory(watch_question, memory, lambda t, words: self._match(t, set(words))[0] > 0, _DETAILED)
        return Reasoned(reply, self._usage(started))

    @staticmethod
    def instruction(question: Question) -> str:
        text = f"Read all on-screen text exactly and note colours and counts of objects; needed to answer: " \
               f"{question.text.strip()}"
        if question.options:
            text += " (one of: " + " | ".join(o.strip() for o in question.options) + ")"
        return clip_text(text, 600)

    async def select(self, question: Question, spans: Sequence[MemoryItem], k: int) -> Reasoned[SelectReply]:
        started = time.perf_counter()
        if _GLOBAL.search(question.text):
            return Reasoned(SelectReply(spans=[s.ref for s in spans], global_question=True,
                                        reason="the question is about the whole video"), self._usage(started))
        scores, _ = self._ranking(question, spans)
        order = sorted(range(len(spans)), key=lambda i: (-scores[i], i))
        if scores and scores[order[0]] <= 0 and len(spans) > k:
            # Nothing matches, by words or meaning: spread the picks over the video rather than piling them at
            # its start.
            step = len(spans) / k
            order = [int(i * step) for i in range(k)]
        chosen = [spans[i].ref for i in order[:k]]
        return Reasoned(SelectReply(spans=chosen, reason="best lexical matches"), self._usage(started))

    async def summarise(self, items: Sequence[MemoryItem], *, max_chars: int) -> Reasoned[SummaryReply]:
        started = time.perf_counter()
        # Extractive: for each span, the words that set it apart from the others of the group (names, signs,
        # codes), so that a search for them still finds the right stretch of video from the summary.
        docs = [set(terms(i.text)) for i in items]
        df: dict[str, int] = {}
        for doc in docs:
            for t in doc:
                df[t] = df.get(t, 0) + 1
        limit = max(1, len(items) // 4)
        lines = []
        for item, doc in zip(items, docs, strict=True):
            words = sorted((t for t in doc if df[t] <= limit and _WORDY.match(t)), key=lambda t: (df[t], t))
            if words:
                lines.append(f"{item.start:g}-{item.end:g}s: {', '.join(words[:12])}")
        if not lines:
            lines = [f"{items[0].start:g}-{items[-1].end:g}s: nothing sets these spans apart"]
        per_line = max(40, max_chars // len(lines) - 1)
        text = "\n".join(clip_text(line, per_line) for line in lines)
        return Reasoned(SummaryReply(summary=clip_text(text, max_chars)), self._usage(started))

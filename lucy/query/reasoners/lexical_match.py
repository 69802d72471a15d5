"""The embedded reasoner's reading of memory's lines: how the words of a question stand in them.

The lexical reasoner (:mod:`lucy.query.reasoners.lexical`) ranks memories and scores options by what this reads, and
its *check* agent matches a watch's words with it:

- a word as OCR or a transcript may write it: exactly, a code run together with the word before it, a near miss of a
  long word, a name of short words misread as a whole (:meth:`LineMatcher._match`, :meth:`LineMatcher._misread`);
- what the question asks about, as against the words that place the moment (:func:`subject_of`), each word weighted
  by what it says (:meth:`LineMatcher._weights`), and how near an option stands to those words on a line
  (:meth:`LineMatcher._near`);
- how well each memory matches the question, with part of what the memories enclosing it match
  (:meth:`LineMatcher._context`);
- what a count or a colour is said of ("4 red cars", "green letters"), the moment a caption's statement times, and the
  words on screen all the time (:meth:`LineMatcher._counted`, :meth:`LineMatcher._attached`,
  :meth:`LineMatcher._timed`, :meth:`LineMatcher._fixtures`).

Apart from the reasoner's agents so that each stays readable; it knows nothing of them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from lucy.config.settings import LexicalReasonerSettings
from lucy.query.reasoners.base import MemoryItem, Question
from lucy.text import BM25, normalise_phrase, question_terms, similar, terms

# Words that only name the kind of answer ("colour", "how many"), not what it is about (LineMatcher._weights).
ANSWER_KIND = frozenset({"color", "many", "much", "count", "number", "kind", "type", "name"})
DEPTHS = ("coarse", "fine", "ultra_fine")  # memory's levels, coarsest first (a summary is none of them)
# Where a question stops saying what it asks about and starts saying where or when ("... at the north door", "...
# while the radio played"): the words after it place the moment (time context of every kind; LineMatcher._weights).
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
# A word written as a name or a code ("MAIN", "12", "XY-901"): what a text question anchors its answer to (text).
_NAMED = re.compile(r"\b[A-Z0-9][A-Z0-9-]*[A-Z0-9]\b")
_QUOTED = re.compile(r"[\"“]([^\"”]{2,})[\"”]")
_TIMES = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s*-\s*(\d+(?:\.\d+)?))?\s*s\b")  # "seen 120.0-124.0 s", "754.0 s"
NEAR_ENOUGH = 1.0  # weight of question words beside an option that makes it fully "near" (LineMatcher._near)
CONTEXT_WEIGHT = 0.25  # a word that places the moment, against 1 for what is asked about (LineMatcher._weights)
# What a memory inherits of the question words matched by a memory enclosing it: it is part of that moment (time
# context of every kind).
ENCLOSING_SHARE = 0.4
# A colour said of nothing in particular, or of another thing than the one asked about (LineMatcher._attached).
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
# Least similarity of a name of short words to a line OCR read ("8US 1Z" for "BUS 12"; text; see _misread).
PHRASE_FUZZY = 0.75
FACT = re.compile(r"\n+|;\s+")  # a caption's separate statements: its lines, and the items of a list in one line


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


def _is_modifier(word: list[str]) -> bool:
    """Whether a word (its terms) is a count or a colour: "3", "three", "green"."""
    return len(word) == 1 and ((word[0].isdigit() and len(word[0]) <= 3) or word[0] in _COLOUR_TERMS)


class LineMatcher:
    """How a question's words, counts and colours stand in memory's lines (see the module's docstring); the lexical
    reasoner is one."""

    def __init__(self, settings: LexicalReasonerSettings | None = None) -> None:
        self.settings = settings or LexicalReasonerSettings()

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
            if item.level in DEPTHS:
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
        asked = set(terms(subject)) - anchors - options - ANSWER_KIND - _COLOUR_TERMS
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
            said = LineMatcher._said_with(line, number, thing)
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
        for t in weights.keys() & ANSWER_KIND:
            weights[t] = 0.5
        return weights

    def _context(self, memory: Sequence[MemoryItem], bm25: BM25, query: list[str],
                 question: Question) -> tuple[list[float], list[float]]:
        """How well each memory matches the question's own words, in [0, 1], each word by its idf and by how well
        the memory holds it (:meth:`_held`); a memory inherits :data:`ENCLOSING_SHARE` of what the memories
        enclosing it match (a fine caption inside the coarse span that names the place). Returned with each memory's
        moment: the same match with all that the memories enclosing it hold (see
        :data:`lucy.query.reasoners.lexical.CHOICE_COVERAGE`)."""
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
            lines = [terms(fact) for fact in FACT.split(item.text)]
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
                and DEPTHS.index(other.level) > DEPTHS.index(item.level)
                for j, other in enumerate(memory)
                if j != i and other.level in DEPTHS and item.level in DEPTHS)
            out.append(0.5 if superseded else 1.0)
        return out

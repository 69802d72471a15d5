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
from collections.abc import Sequence
from dataclasses import dataclass

from lucy.memory.transcribers import SURE, sure_of
from lucy.query.memory_view import HEARD_LINE
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
from lucy.query.reasoners.lexical_match import (
    ANSWER_KIND,
    COLOUR_NAMES,
    CONTEXT_WEIGHT,
    DEPTHS,
    ELSEWHERE_WEIGHT,
    FACT,
    NEAR_ENOUGH,
    LineMatcher,
)
from lucy.query.reasoners.lexical_watch import check_memory
from lucy.text import BM25, clip_text, hybrid_scores, normalise_phrase, question_terms, terms

_DEPTH_WEIGHT = {"coarse": 0.55, "fine": 1.0, "ultra_fine": 1.0}
_DETAILED = ("fine", "ultra_fine")
_SUMMARY_WEIGHT = 0.3
_GLOBAL = re.compile(
    r"\b(whole|entire|overall|throughout|summari[sz]e|summary|in total|altogether|how many times|"
    r"from (the )?(beginning|start) to (the )?end|all (of )?the video|over the (course|video))\b", re.IGNORECASE)
# A number that is part of a name ("BUS 12", "CAR 40"), no count the question gives (count).
_NAME_NUMBER = re.compile(r"\b[A-Z][A-Z-]*\s+(\d+)\b")
ECHO_WEIGHT = 0.5  # an option that only repeats the question's words (every kind with options; LexicalReasoner._option)
UNANCHORED_WEIGHT = 0.5  # an option said away from what the question names (LexicalReasoner._anchors)
# A choice is confident only from a memory that holds, with the memories enclosing it, this share of what the
# question names (as memory holds it at best, see LexicalReasoner._context), for every kind: "the bike by the red
# door" is not answered for sure from a bike by a blue door, however exactly that memory names the bike; "the number
# of the bus at the depot" is, from a close look at the bus inside the span that shows the depot.
CHOICE_COVERAGE = 0.8
# Colours either side of a colour's borders on the hue wheel (and brown, a dark orange), as captions name them
# (attribute).
_NEIGHBOURS: dict[str, set[str]] = {}
for _a, _b in (("red", "orange"), ("orange", "yellow"), ("yellow", "green"), ("green", "teal"), ("teal", "blue"),
               ("blue", "purple"), ("purple", "pink"), ("pink", "red"), ("orange", "brown")):
    _NEIGHBOURS.setdefault(_a, set()).add(_b)
    _NEIGHBOURS.setdefault(_b, set()).add(_a)
NEIGHBOUR_WEIGHT = 0.5  # what a neighbour's name counts for an option colour no memory names
_WORDY = re.compile(r"^(?=.*[a-z])[a-z0-9-]{3,}$")  # a word or a code, not a number, time or decimal
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


def _unsure_hearing(item: MemoryItem, question: Question, option: int) -> float | None:
    """How sure the transcriber was of the speech an option stands in, when the option's own words stand in
    ``item`` only in lines it was unsure of (:data:`SURE`); None when they stand anywhere else as well, or in no
    such line."""
    own = set(terms(question.options[option]))
    words = own - set(question_terms(question.text)) or own
    unsure = [m for m in HEARD_LINE.finditer(item.text)
              if sure_of(m["sure"]) < SURE and words & set(terms(m["text"]))]
    if not unsure:
        return None
    rest, at = [], 0
    for m in unsure:
        rest.append(item.text[at:m.start()])
        at = m.end()
    rest.append(item.text[at:])
    if words & set(terms(" ".join(rest))):
        return None
    return max(sure_of(m["sure"]) for m in unsure)


def _weight(level: str) -> float:
    return _DEPTH_WEIGHT.get(level, _SUMMARY_WEIGHT)


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


class LexicalReasoner(LineMatcher, Reasoner):
    """Deterministic agents over memory text. Every call counts as one (free) LLM call in the trace."""

    name = "lexical"
    model = "lexical-bm25"

    # ------------------------------------------------------------------------------------------- helpers

    @staticmethod
    def _usage(started: float) -> Usage:
        return Usage(latency_seconds=time.perf_counter() - started, llm_calls=1)

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
                           if t in bm25.idf and t not in ANSWER_KIND and w > CONTEXT_WEIGHT)
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
        facts = [FACT.split(m.text) for m in memory]
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
            elif (sure := _unsure_hearing(first.item, question, top)) is not None:
                confident = False
                reason += f"; it rests on a line the transcriber was {sure:.0%} sure of only"
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
            depth = DEPTHS.index(c.level) if c.level in DEPTHS else -1
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

"""The embedded reasoner's *check* agent: does a span's memory show what a standing question (a watch) waits for?

A watch is reduced to the words it looks for (:func:`watch_terms`) and, where it says so, the kind of thing it is
about (:func:`watch_kinds`): on-screen text ("a sign says ..."), the picture as a whole ("the screen turns red"),
shapes ("three yellow squares"). Memory is read statement by statement (a caption's lines and the items of a list
in one line), each with the section of the caption it stands in ("Scenes:", "On-screen text:", "Objects:" ... as
the embedded captioner writes them; a VLM's free text has none), with times, percentages and sizes taken out, so
that "seen 312.0 s" never counts as the "12" of "COUNTER 12".

- **yes**: every word in one statement, either in a detailed (fine or finer) memory or in a measured statement of
  coarse memory (read off the pixels or the sound: "3 yellow squares" under "Objects:", a sign's text under
  "On-screen text:"), of the kind the watch is about when it says;
- **maybe**: every word, but only in a coarse free-text statement; or all but some words, each of which has a
  near miss in that statement (a misread: "MAIN HA" for "MAIN HALL", "XY-9O1" for "XY-901"): a closer look can
  tell;
- a watch about speech ("Is there an announcement about the shuttle?", "tell me when someone mentions ...") looks
  for what is said, not for the words that say it is speech ("announcement", "mentions": they pick the transcript
  lines, as the kinds do); and a transcript line that means it in other words is a **yes** too: the checker gives
  each line its similarity to the watch's subject (:func:`watch_subject`) by the stream's embedder, and a line at
  :data:`MEANING_FLOOR` or above counts as saying it;
- **no**: anything else, including a statement that names the thing with another value ("COUNTER 3 CLOSED" for
  "TEA AT COUNTER 3", "3 green cars" for "three yellow cars"), and a statement that says something was not
  there.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lucy.memory.captioners import sections
from lucy.query.memory_view import HEARD_PREFIX
from lucy.query.reasoners.base import CheckReply, EvidenceSpan, MemoryItem
from lucy.text import ABOUT_SPEECH, question_terms, similar, terms

# How a standing request is phrased, not what it is about: "tell me when", "let us know if", "alert me as soon as".
_WATCH_LEAD = re.compile(
    r"^\s*(please\s+)?(((tell|let|notify|alert|warn|ping|inform|message|remind)\s+(me|us)(\s+know)?)|"
    r"((send|raise|give)\s+((me|us)\s+)?an?\s+(alert|notification|message))|alert|notify|watch(\s+out)?\s+for|"
    r"look\s+out\s+for)(\s+(when|whenever|if|once|as\s+soon\s+as|the\s+moment))?\b[\s,:]*", re.IGNORECASE)
# Words of a watch that name no thing to look for ("someone is", "something happens", "ever"), the video itself
# ("the screen", "the picture") and the change it waits for ("turns", "goes", "appears", "shows up"): a caption
# says what is there ("mostly red background"), not that the screen turned red; with STOPWORDS.
WATCH_STOPWORDS = frozenset(terms(
    "someone somebody anyone anybody something anything everyone everybody ever whenever happen happens "
    "happening happened occur occurs there please alert notify tell know "
    "screen picture image video frame view camera footage whole "
    "turn turns turned turning go goes going gone become becomes became appear appears appeared appearing "
    "show shows showed shown showing up", keep_stopwords=True))
_NAMED = re.compile(r"\b[A-Z0-9][A-Z0-9-]*[A-Z0-9]\b")  # a word written as a name or a code: MAIN, 14, XY-901
_QUOTED = re.compile(r"[\"“]([^\"”]{2,})[\"”]")

# What a watch is about, by the words it uses for it, and the caption sections that hold such statements.
TEXT, SCENE, OBJECTS, SPEECH = "text", "scene", "objects", "speech"
_KIND_WORDS = {
    TEXT: re.compile(r"\b(sign|signs|board|boards|display\w*|banner|poster|label|text|written|writing|reads?|"
                     r"lettering|notice)\b", re.IGNORECASE),
    SCENE: re.compile(r"\b(screen|picture|image|scene|background|view|whole)\b", re.IGNORECASE),
    OBJECTS: re.compile(r"\b(squares?|circles?|rectangles?|triangles?|shapes?|blocks?|boxes)\b", re.IGNORECASE),
    SPEECH: ABOUT_SPEECH,
}
_MEASURED = frozenset({TEXT, SCENE, OBJECTS, SPEECH})  # sections whose statements are read off the pixels or sound
# The embedded captioner's section names (lucy.memory.captioners.sections), and "Scene" as a VLM may write it.
_SECTIONS = {sections.SCENES.lower(): SCENE, "scene": SCENE, sections.ON_SCREEN_TEXT.lower(): TEXT,
             sections.OBJECTS.lower(): OBJECTS, HEARD_PREFIX.lower(): SPEECH}
# A caption line that opens a section: "Scenes:", "On-screen text (read by OCR; ...):", "Objects: 1 white square";
# a transcript line: 'Speech heard 12.0-14.0 s: "..."', 'Speech heard 12.0-14.0 s (45% sure): "..."'.
_HEADER = re.compile(r"^\s*([A-Z][A-Za-z -]*?)\s*(?:\([^)]*\))?\s*(?:\d[\d.\s-]*s)?\s*(?:\([^)]*\))?\s*:(?:\s|$)")
_FACT = re.compile(r";\s+")  # the items of a list in one line
# Lines about the look itself, not what it saw: "Clip 0.0-58.0 s (coarse look: 9 frames ...)", "Focus: colour".
_ABOUT_THE_LOOK = re.compile(r"^\s*(Clip\s+\d|Focus:)")
# A statement that says something was *not* there ("- none readable", 'looked for "EXIT": not readable') shows
# nothing, whatever words it repeats.
_NEGATED = re.compile(r"\b(not|no|none|never|nothing|nobody|without|absent)\b", re.IGNORECASE)
_STATED = re.compile(r"(\d+(?:\.\d+)?)(?:\s*-\s*(\d+(?:\.\d+)?))?\s*s\b")  # "302.0-305.0 s", "50 s"
# Measurements that are not what a caption saw: times, percentages, ratios, sizes ("63/255", "160x90").
_MEASURE = re.compile(r"\d+(?:\.\d+)?(?:\s*-\s*\d+(?:\.\d+)?)?\s*s\b|\d+(?:\.\d+)?\s*%|\d+/\d+|\d+x\d+")
NEAR_MISS = 0.6  # similarity at which a word of memory may be a misread of the watch's word
# Similarity of a transcript line to a speech watch's subject (lucy.watch.meaning.SpeechMeaning: the cosine of the
# line's best phrase and the subject, both less the embedder's common direction, on the words they do not share) at
# which the line says what the watch waits for. Chosen with the default local embedder on bench/watch_sets.py's tune
# announcements and on a development set of other subjects and lines written apart (tests/watch/test_speech_meaning.py
# has some): above every (watch, line) pair that does not mean it (tune: 0.21 and below; the other set: 0.318, "the
# museum closes in fifteen minutes" for a concert cancelled); lines that mean it in other words scored 0.28-0.56, so
# about a third of those are missed: a watch that fires on the wrong line is worse than one that waits for clearer
# words. The plain cosine (0.80 on phrases, before) left 0.01 between the two on tune and none on the other set.
MEANING_FLOOR = 0.32
# Words that say a watch is about speech ("announcement", "mentions", "said"), and the "speech" question_terms adds.
_SPEECH_WORDS = frozenset(terms("speech"))


def watch_terms(question: str) -> tuple[list[str], list[str]]:
    """(required, all) search terms of a watch: ``all`` its content words without the request phrasing; ``required``
    the words it writes as names, codes or quotes ("the MAIN HALL sign", '"BAR 12"') when it has any, else ``all``."""
    body = _WATCH_LEAD.sub("", question, count=1)
    said = _speech_words(body)  # for a watch about speech, the words that say so are not what it waits for
    every = [t for t in dict.fromkeys(question_terms(body)) if t not in WATCH_STOPWORDS and t not in said]
    named = set(terms(" ".join(_NAMED.findall(body) + _QUOTED.findall(body))))
    required = [t for t in every if t in named] or every
    return required, every


def _speech_words(body: str) -> frozenset[str]:
    """The terms of a watch's words that say it is about speech (none when it is not)."""
    found = ABOUT_SPEECH.findall(body)
    return frozenset(terms(" ".join(found))) | _SPEECH_WORDS if found else frozenset()


def watch_subject(question: str) -> str | None:
    """What a watch about speech waits to hear of, in its own words, to compare with transcript lines by meaning
    ("the shuttle" of "Is there an announcement about the shuttle?"); None for a watch not about speech or one
    that names nothing. Only a watch about speech alone has one: a sign that "says" something, or a quoted phrase,
    is waited for in those very words. The words of the request and of speech itself are left out: every line is
    speech."""
    body = _WATCH_LEAD.sub("", question, count=1)
    if watch_kinds(question) != {SPEECH} or _QUOTED.search(body):
        return None
    said = _speech_words(body)
    kept = [w for w in re.findall(r"[\w'-]+", body)
            if (t := terms(w)) and not any(x in WATCH_STOPWORDS or x in said for x in t)]
    return " ".join(kept) or None


def watch_kinds(question: str) -> frozenset[str]:
    """The kinds of statement a watch is about (text, scene, objects, speech); empty when it does not say. A quoted
    phrase is something written or said."""
    body = _WATCH_LEAD.sub("", question, count=1)
    kinds = {kind for kind, words in _KIND_WORDS.items() if words.search(body)}
    if _QUOTED.search(body) and not kinds & {TEXT, SPEECH}:
        kinds |= {TEXT, SPEECH}
    return frozenset(kinds)


@dataclass(frozen=True, slots=True)
class Statement:
    text: str  # as written (its times give the evidence)
    kind: str | None  # the section it stands in: text, scene, objects, speech, another section's name, or None
    terms: frozenset[str]  # its words, measurements left out


def statements(text: str) -> list[Statement]:
    """A memory's affirmative statements, each with the section it stands in."""
    out: list[Statement] = []
    section: str | None = None
    for line in text.splitlines():
        if not line.strip() or _ABOUT_THE_LOOK.match(line):
            continue
        header = _HEADER.match(line)
        if header:
            name = header.group(1).strip().lower()
            section = _SECTIONS.get(name, name)
        elif not line.lstrip().startswith("-"):
            section = None  # a line of free text ends the section above it
        for fact in _FACT.split(line):
            if fact.strip() and not _NEGATED.search(_QUOTED.sub('""', fact)):  # a sign may say "NO DOGS"
                out.append(Statement(fact, section, frozenset(terms(_MEASURE.sub(" ", fact)))))
    return out


def stated_time(statement: str, item: MemoryItem) -> EvidenceSpan:
    """The stretch of media time a caption's statement gives for what it says ("seen 302.0-305.0 s"), inside the
    memory's span; the memory's whole span when it gives none."""
    for found in _STATED.finditer(statement):
        start = float(found.group(1))
        end = float(found.group(2) or start)
        if item.start - 1e-6 <= start <= end <= item.end + 1e-6:
            return EvidenceSpan(start=start, end=min(item.end, max(end, start + 1.0)))
    return EvidenceSpan(start=item.start, end=item.end)


def _near_miss(term: str, words: frozenset[str]) -> bool:
    """Whether a statement holds what could be a misread of ``term``: a cut-off read of it ("ex" for "exit") or an
    OCR-style slip ("cr-3386" for "cr-3336"). Numbers of one or two digits have no near misses (7 is not 5)."""
    if len(term) <= 2 and term.isdigit():
        return False
    for word in words:
        shorter, longer = sorted((word, term), key=len)
        if len(shorter) >= 2 and longer.startswith(shorter) and not shorter.isdigit():
            return True
        if similar(term, word) >= NEAR_MISS:
            return True
    return False


def check_memory(question: str, memory: Sequence[MemoryItem],
                 matches: Callable[[str, frozenset[str]], bool], detailed: Sequence[str]) -> CheckReply:
    """The verdict of a watch on a span's memory (see the module's docstring). ``matches(term, words)`` says whether a
    statement's words hold a term (exactly, or as the reasoner's fuzzy match allows); ``detailed`` names the levels
    whose memories are close looks."""
    required, _ = watch_terms(question)
    if not required:
        return CheckReply(verdict="no", reason="the watch names nothing to look for")
    kinds = watch_kinds(question)
    by_meaning = watch_subject(question) is not None
    sure: list[tuple[MemoryItem, Statement]] = []
    unsure: list[tuple[MemoryItem, Statement, list[str]]] = []  # (memory, statement, words only near-missed)
    for item in memory:
        for said in statements(item.text):
            if kinds and said.kind is not None and said.kind not in kinds:
                continue  # a statement about something else ("white letters on black" for "the screen turns black")
            found = [t for t in required if matches(t, said.terms)]
            missing = [t for t in required if t not in found]
            if _says_it(item, said, missing, by_meaning, detailed):
                sure.append((item, said))
            elif not missing or (found and all(_near_miss(t, said.terms) for t in missing)):
                unsure.append((item, said, missing))
    return _verdict(required, sure, unsure)


def _says_it(item: MemoryItem, said: Statement, missing: list[str], by_meaning: bool, detailed: Sequence[str]) -> bool:
    """Whether a statement surely says what the watch waits for: all its words, in a detailed memory or a measured
    statement; or, for a watch about speech, a transcript line that means it in other words."""
    if by_meaning and said.kind == SPEECH and item.similarity is not None and item.similarity >= MEANING_FLOOR:
        return True
    return not missing and (item.level in detailed or said.kind in _MEASURED)


def _verdict(required: list[str], sure: list[tuple[MemoryItem, Statement]],
             unsure: list[tuple[MemoryItem, Statement, list[str]]]) -> CheckReply:
    """Yes, maybe or no from the statements found. The evidence is the time the statement gives ("seen 302.0-305.0
    s"), else its memory's span: a maybe is confirmed by looking closer there only."""
    if sure:
        item, said = sure[0]
        return CheckReply(verdict="yes", evidence=[stated_time(s.text, m) for m, s in sure],
                          reason=f"{', '.join(required)} in {item.level} memory at {item.start:g}-{item.end:g}s: "
                                 f"{said.text.strip()[:200]}")
    if unsure:
        item, said, missing = unsure[0]
        why = f"read as {said.text.strip()[:120]!r}" + (f"; unsure of: {', '.join(missing)}" if missing else
                                                         "; only in coarse memory")
        return CheckReply(verdict="maybe", evidence=[stated_time(s.text, m) for m, s, _ in unsure],
                          reason=f"{', '.join(required)} at {item.start:g}-{item.end:g}s, {why}")
    return CheckReply(verdict="no", reason=f"no memory of this span shows {', '.join(required)}")

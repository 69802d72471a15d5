"""The watch benchmark's streams, events and standing questions (see ``bench/watch.py``).

Three splits, each a pure function of (minutes, seed, stream index), written with different vocabularies:

* ``tune`` — a loading-yard camera: a "DELIVERY AT GATE 3" sign, the scene turning red, three yellow squares;
  distractor signs sharing words ("GATE 5 CLOSED", "DELIVERY VANS ONLY", ...), other background colours, yellow
  squares in other counts and three squares of other colours.
* ``test`` — a held-out split, written apart and never tuned on: a station concourse camera with other sign texts,
  another colour, another square colour and count, other watch phrasings, and negative watches that share words
  with what is shown.
* ``holdout`` — written blind by another engineer; the lead looks only at its totals (``bench/watch.py`` prints
  no per-watch table for it without ``-v``, and ``--split all`` leaves it out): a parking-garage camera whose
  display shows smaller text (0.07 of the frame) lower down, signs that differ from the watched one by one word or
  one digit, shorter events (5-25 s; the colour 30-90 s), four squares higher up (distractors in counts one off),
  distractors twice as often, other backgrounds and phrasings, and negative watches one word or digit away from
  what is shown.

Tune and test also have spoken announcements (not holdout, which was written before them): a speech watch phrased
as a question or request ("Is there an announcement about ...?"), lines that say what it waits for, some in words
it shares and some in other words only (no content word in common), among other announcements, and negative speech
watches for things never announced. Both splits' lines were written together, before any result on either.

Every event of a watch is something a careful human watching the video would alert on, and nothing else in the
video matches it: the event's colour never appears as a background elsewhere, its sign text never appears outside
its events, its squares (colour *and* count) never appear outside its events. Events of one watch are at least
``MIN_GAP`` seconds apart (more than any cooldown the benchmark sets), so each is a separate event.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from lucy.synth import PALETTE, Overlay, Scene, Shape, cut_scenes

WIDTH, HEIGHT = 320, 180
MIN_GAP = 180.0  # seconds between two events of one watch (the benchmark's cooldown is shorter)
NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


@dataclass
class WatchSpec:
    """A standing question and the media intervals in which it is true (empty: it must never alert)."""

    question: str
    kind: str  # sign, colour, squares, or none (a watch for something that never happens)
    events: list[tuple[float, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Vocabulary:
    place: str  # the always-on camera label
    sign: str  # the sign a watch waits for
    sign_watch: str
    sign_distractors: tuple[str, ...]  # other signs, sharing words with the watched one
    colour: str  # the background a watch waits for
    colour_watch: str
    backgrounds: tuple[str, ...]  # the haystack's other backgrounds
    square_colour: str
    square_count: int
    squares_watch: str
    square_distractor_colours: tuple[str, ...]
    negatives: tuple[str, ...]  # watches for things that never happen (some share words with what does)
    # Geometry and timing; the defaults are those of tune and test (changing them changes those splits' videos).
    sign_size: float = 0.1  # text height as a fraction of the frame height
    sign_x: float = 0.05
    sign_y: float = 0.08
    square_size: float = 0.1
    square_x: float = 0.3
    square_y: float = 0.55
    square_distractor_counts: tuple[int, ...] = (1, 2, 3, 4)  # the watched count is left out
    sign_length: tuple[float, float] = (5.0, 40.0)  # seconds an event lasts
    colour_length: tuple[float, float] = (40.0, 100.0)
    square_length: tuple[float, float] = (8.0, 40.0)
    distractor_gap: tuple[float, float] = (40.0, 120.0)  # seconds from one distractor's end to the next's start
    # Spoken announcements (none by default): the watch, lines that mean what it waits for (one per event), other
    # announcements, and watches for things never announced (after ``negatives``).
    speech_watch: str = ""
    speech_events: tuple[str, ...] = ()
    speech_distractors: tuple[str, ...] = ()
    speech_negatives: tuple[str, ...] = ()


BLIND = frozenset({"holdout"})  # splits the lead sees only as totals; not in ``bench/watch.py --split all``


SPLITS: dict[str, Vocabulary] = {
    "tune": Vocabulary(
        place="CAM 1 YARD",
        sign="DELIVERY AT GATE 3",
        sign_watch='Tell me when a sign says "DELIVERY AT GATE 3"',
        sign_distractors=("GATE 5 CLOSED", "DELIVERY VANS ONLY", "GATE 3 STAFF ONLY", "NO DELIVERY TODAY"),
        colour="red",
        colour_watch="Tell me when the screen turns red",
        backgrounds=("gray", "blue", "teal", "brown", "white"),
        square_colour="yellow",
        square_count=3,
        squares_watch="Alert me when three yellow squares appear",
        square_distractor_colours=("green", "blue", "pink"),
        negatives=(
            'Tell me when a sign says "FIRE DRILL"',
            "Tell me when the screen turns orange",
            "Alert me when five purple squares appear",
            'Notify me when a sign says "GATE 7 OPEN"',
            "Tell me when the screen turns black",
            "Alert me when two white squares appear",
            'Tell me when a sign says "LOADING BAY FULL"',
        ),
        speech_watch="Is there an announcement about the shuttle?",
        speech_events=(
            "Attention, please. The shuttle to terminal B is now departing.",
            "The airport coach to the terminals leaves from door four in two minutes.",
            "Passengers for the hotel bus, your transfer is waiting outside exit two.",
            "Last call for the shuttle service to the long stay car park.",
        ),
        speech_distractors=(
            "Please keep your luggage with you at all times.",
            "The cafe on the first floor closes at nine tonight.",
            "Smoking is not permitted anywhere in the building.",
            "Forklift drivers, please report to the supervisor's office.",
            "Would the owner of a blue hatchback please return to their vehicle.",
            "This is a test of the public address system.",
        ),
        speech_negatives=(
            "Tell me when someone mentions a fire alarm",
            "Is there an announcement about a missing child?",
        ),
    ),
    "test": Vocabulary(
        place="CONCOURSE EAST",
        sign="PLATFORM 9 NOW BOARDING",
        sign_watch='Let me know when the board shows "PLATFORM 9 NOW BOARDING"',
        sign_distractors=("PLATFORM 4 CLOSED", "NOW SERVING 9", "BOARDING PASSES HERE", "PLATFORM 9 DELAYED"),
        colour="green",
        colour_watch="Notify me when the whole picture goes green",
        backgrounds=("gray", "purple", "brown", "blue", "white"),
        square_colour="orange",
        square_count=2,
        squares_watch="Warn me when two orange squares show up",
        square_distractor_colours=("teal", "pink", "purple"),
        negatives=(
            'Let me know when the board shows "PLATFORM 2 CANCELLED"',
            "Notify me when the whole picture goes yellow",
            "Warn me when four teal squares show up",
            'Alert me when a sign reads "LOST PROPERTY"',
            "Tell me when the picture turns pink",
            "Warn me when five orange squares show up",
            'Let me know when the board shows "NOW SERVING 12"',
        ),
        speech_watch="Let me know if they announce that the express train is delayed",
        speech_events=(
            "We are sorry to say the express train is delayed by ten minutes.",
            "The fast service to the coast is running about twenty minutes late.",
            "Customers for the nonstop to the capital: departure has been pushed back to half past.",
            "Apologies, the express will leave late because of a signal fault.",
        ),
        speech_distractors=(
            "Mind the gap between the train and the platform edge.",
            "Tickets can be bought at the machines by the main entrance.",
            "Please do not leave bags unattended on the concourse.",
            "The waiting room is now open on the upper level.",
            "Bicycles are not allowed on the escalators.",
            "Thank you for travelling with us today.",
        ),
        speech_negatives=(
            "Tell me when someone says a platform is closed for cleaning",
            "Is there an announcement about a lost dog?",
        ),
    ),
    # Written blind (not against the checker's code or results); see the module docstring.
    "holdout": Vocabulary(
        place="GARAGE B2 RAMP",
        sign="LEVEL 2 FULL",
        sign_watch='Alert me if the display reads "LEVEL 2 FULL"',
        sign_distractors=("LEVEL 3 FULL", "LEVEL 2 OPEN", "LEVEL 12 FULL", "EXIT VIA LEVEL 2", "LEVEL 1 FULL"),
        colour="purple",
        colour_watch="Let me know if the view turns purple",
        backgrounds=("gray", "brown", "black", "white", "pink"),
        square_colour="blue",
        square_count=4,
        squares_watch="Notify me when 4 blue squares are visible",
        square_distractor_colours=("teal", "red", "yellow"),
        negatives=(
            'Ping me as soon as the display reads "LEVEL 4 FULL"',
            "I want to know when the view turns orange",
            "Notify me when 6 blue squares are visible",
            'Alert me if the display reads "LEVEL 2 CLOSED"',
            "Let me know if the view turns green",
            "Notify me when 4 green squares are visible",
            'I want to know when a sign says "NO EXIT"',
        ),
        sign_size=0.07,
        sign_x=0.5,
        sign_y=0.6,
        square_size=0.08,
        square_x=0.06,
        square_y=0.2,
        square_distractor_counts=(2, 3, 5),
        sign_length=(5.0, 25.0),
        colour_length=(30.0, 90.0),
        square_length=(5.0, 25.0),
        distractor_gap=(20.0, 60.0),
    ),
}


@dataclass
class StreamPlan:
    split: str
    index: int
    duration: float
    scenes: list[Scene]
    overlays: list[Overlay]
    shapes: list[Shape]
    watches: list[WatchSpec]
    speech: list[tuple[float, float, str]] = field(default_factory=list)  # (start, end, words) said


def _times(rng: random.Random, duration: float, count: int, length: tuple[float, float],
           busy: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """``count`` event intervals at least MIN_GAP apart, clear of ``busy`` (other events) by 20 s."""
    out: list[tuple[float, float]] = []
    for _ in range(2000):
        if len(out) == count:
            break
        n = rng.uniform(*length)
        a = round(rng.uniform(30.0, duration - n - 30.0), 1)
        b = a + round(n, 1)
        if any(a < y + MIN_GAP and b > x - MIN_GAP for x, y in out):
            continue
        if any(a < y + 20 and b > x - 20 for x, y in busy):
            continue
        out.append((a, b))
    return sorted(out)


def plan(split: str, minutes: float, seed: int, index: int, watches: int = 8, speech_watches: bool = True,
         ) -> StreamPlan:
    """One stream of ``split``: its scenes, signs and squares, and ``watches`` watches (3 that should alert, the
    rest never); with ``speech_watches`` and a split that has speech, its announcements and their watches on top
    (1 that should alert, the split's speech negatives never)."""
    v = SPLITS[split]
    rng = random.Random(f"{split}-{seed}-{index}-{minutes}")
    duration = minutes * 60.0
    per = max(1, round(minutes / 6))  # events of each kind per stream: about one per 6 minutes
    busy: list[tuple[float, float]] = []
    sign_events = _times(rng, duration, per, v.sign_length, busy)
    busy += sign_events
    colour_events = _times(rng, duration, per, v.colour_length, busy)
    busy += colour_events
    square_events = _times(rng, duration, per, v.square_length, busy)
    busy += square_events

    # Haystack: scene changes every 20-90 s among the other backgrounds (never the watched colour).
    scenes: list[Scene] = []
    t = 0.0
    while t < duration:
        end = min(duration, t + rng.uniform(20, 90))
        scenes.append(Scene(t, end, PALETTE[rng.choice(v.backgrounds)]))
        t = end
    for a, b in colour_events:
        scenes = cut_scenes(scenes, a, b) + [Scene(a, b, PALETTE[v.colour])]
    scenes.sort(key=lambda s: s.start)

    overlays = [Overlay(0, duration, v.place, size=0.06, x=0.6, y=0.85)]
    shapes: list[Shape] = []
    sign = {"size": v.sign_size, "x": v.sign_x, "y": v.sign_y}
    square = {"x": v.square_x, "y": v.square_y, "size": v.square_size}
    for a, b in sign_events:
        overlays.append(Overlay(a, b, v.sign, **sign))
    for a, b in square_events:
        shapes.append(Shape(a, b, PALETTE[v.square_colour], count=v.square_count, **square))
    # Distractors every 40-120 s (``distractor_gap``) where no event is: signs that share words, squares of the
    # watched colour in other counts, squares of other colours in the watched count.
    t = rng.uniform(20, 60)
    while t < duration - 30:
        n = rng.uniform(8, 30)
        if not any(t < y + 15 and t + n > x - 15 for x, y in busy):
            r = rng.random()
            if r < 0.5:
                overlays.append(Overlay(t, t + n, rng.choice(v.sign_distractors), **sign))
            elif r < 0.75:
                count = rng.choice([c for c in v.square_distractor_counts if c != v.square_count])
                shapes.append(Shape(t, t + n, PALETTE[v.square_colour], count=count, **square))
            else:
                shapes.append(Shape(t, t + n, PALETTE[rng.choice(v.square_distractor_colours)],
                                    count=v.square_count, **square))
        t += n + rng.uniform(*v.distractor_gap)

    specs = [WatchSpec(v.sign_watch, "sign", sign_events), WatchSpec(v.colour_watch, "colour", colour_events),
             WatchSpec(v.squares_watch, "squares", square_events)]
    negatives = list(v.negatives)
    while len(specs) < watches:
        specs.append(WatchSpec(negatives[(len(specs) - 3) % len(negatives)], "none"))
    specs = specs[:max(watches, 0)]
    speech: list[tuple[float, float, str]] = []
    if v.speech_watch and speech_watches:
        # Its own random stream, so that the pictures of a split stay what they were before it had speech.
        said = random.Random(f"{split}-{seed}-{index}-{minutes}-speech")
        events = _times(said, duration, max(per, round(minutes / 3)), (3.0, 6.0), [])  # as many as fit
        lines = said.sample(v.speech_events, k=min(len(events), len(v.speech_events)))
        speech = [(a, b, line) for (a, b), line in zip(events, lines, strict=False)]  # as many events as lines
        t = said.uniform(20, 60)
        while t < duration - 30:  # other announcements every 30-90 s, clear of the events
            n = said.uniform(3.0, 6.0)
            if not any(t < y + 20 and t + n > x - 20 for x, y in events):
                speech.append((round(t, 1), round(t + n, 1), said.choice(v.speech_distractors)))
            t += n + said.uniform(30, 90)
        speech.sort()
        specs.append(WatchSpec(v.speech_watch, "speech", [(a, b) for a, b, _ in speech if (a, b) in events]))
        specs += [WatchSpec(q, "none") for q in v.speech_negatives]
    return StreamPlan(split, index, duration, scenes, overlays, shapes, specs, speech)



"""Memory text written from what the detector saw (lucy.perception.describe): counts in view, distinct objects grouped
by the way they went, stationary ones once, colours, places, times where few, and a busy minute within its bound."""

from __future__ import annotations

import dataclasses
import random
import re

import pytest

from lucy.config import Level
from lucy.perception.describe import SpanObservations, describe_observations, place, read_observations, way_of
from lucy.perception.objects import IN_VIEW, CountSample, PathPoint, TrackedObject

_ids = iter(range(1, 100_000))
CLOTHES = ("red", "black", "white", "blue", "gray", "green", "yellow")


def walker(t0: float, seconds: float, came: str, went: str, y: float = 0.6, *, upper: str | None = None,
           lower: str | None = None, label: str = "person") -> TrackedObject:
    """Someone crossing the picture from edge ``came`` to edge ``went`` at height ``y``."""
    xa, xb = {"left": 0.02, "right": 0.98}[came], {"left": 0.02, "right": 0.98}[went]
    path = tuple(PathPoint(t0 + seconds * i / 4, xa + (xb - xa) * i / 4, y) for i in range(5))
    attributes = {k: v for k, v in (("upper", upper), ("lower", lower)) if v}
    return TrackedObject("cam", next(_ids), label, t0, t0 + seconds, 0.8, came, went, True, path, attributes)


def parked(label: str = "truck", colour: str = "white", x: float = 0.5, y: float = 0.15) -> TrackedObject:
    """A vehicle standing in one place from long before the span to long after it (still tracked)."""
    return TrackedObject("cam", next(_ids), label, -3000.0, 9000.0, 0.9, IN_VIEW, None, False,
                         (PathPoint(-3000.0, x, y),), {"colour": colour}, active=True)


def arriving_car(t0: float, colour: str) -> TrackedObject:
    """A car that drives in from the left and parks at the bottom right, still there at the end."""
    path = (PathPoint(t0, 0.02, 0.8), PathPoint(t0 + 4, 0.8, 0.85), PathPoint(t0 + 14, 0.81, 0.85),
            PathPoint(t0 + 25, 0.8, 0.85))
    return TrackedObject("cam", next(_ids), "car", t0, t0 + 25, 0.9, "left", None, True, path, {"colour": colour},
                         active=True)


def counts(n: int = 120, low: int = 3, high: int = 7, **others: int) -> list[CountSample]:
    """``n`` samples at 2 fps cycling through low..high people, with fixed counts of ``others``."""
    return [CountSample(i / 2, {"person": low + i % (high - low + 1), **others}) for i in range(n)]


def test_a_van_parked_all_span_is_one_line_with_its_colour_and_place():
    seen = SpanObservations(0.0, 60.0, [parked()], [CountSample(i / 2, {"truck": 1}) for i in range(120)], 60.0)
    text = describe_observations(seen)
    assert text == "Vehicles (detector): 1 in view throughout; 1 white truck parked at the top centre throughout."


def test_walkers_the_same_way_are_one_group_and_the_counts_say_how_many_were_in_view():
    tracks = [walker(i * 6.0, 10, "left", "right", upper=CLOTHES[i % 3]) for i in range(8)]
    tracks += [walker(5 + i * 15.0, 12, "right", "left", y=0.8) for i in range(3)]
    text = describe_observations(SpanObservations(0.0, 60.0, tracks, counts(), 60.0), level=Level.FINE)
    people = text.splitlines()[0]
    assert people.startswith("People (detector): 3-7 in view, usually 5 (most at 2.0 s); 11 different: ")
    assert "8 people (3 in red top, 3 in black top, 2 in white top) walked left to right across the middle" in people
    # Few of them: each one's time in view is given.
    assert "3 people walked right to left across the lower part (5.0-17.0 s, 20.0-32.0 s, 35.0-47.0 s)" in people
    assert "1 person" not in people  # grouped, never listed one by one


def test_arrivals_and_departures_are_named_with_their_times():
    leaving = TrackedObject("cam", next(_ids), "car", -50.0, 40.0, 0.9, IN_VIEW, "right", True,
                            (PathPoint(-50.0, 0.5, 0.5), PathPoint(35.0, 0.5, 0.5), PathPoint(40.0, 0.98, 0.5)),
                            {"colour": "red"})
    seen = SpanObservations(0.0, 60.0, [arriving_car(10.0, "red"), arriving_car(30.0, "blue"), leaving], [], 60.0)
    text = describe_observations(seen, level=Level.FINE)
    assert "2 cars (1 red, 1 blue) arrived from the left and stopped at the bottom right (10.0 s, 30.0 s)" in text
    assert "1 red car drove off to the right from the centre (40.0 s)" in text
    assert text.startswith("Vehicles (detector): 3 different: ")


def test_people_whose_face_the_tracker_saw_are_counted():
    tracks = [walker(i * 6.0, 10, "left", "right", upper="red") for i in range(5)]
    faced = [dataclasses.replace(t, attributes={**t.attributes, "face": "seen"}) if i in (0, 3) else t
             for i, t in enumerate(tracks)]
    text = describe_observations(SpanObservations(0.0, 60.0, faced, counts(), 60.0))
    assert text.endswith("; face seen: 2 of them faced the camera."), text
    one = describe_observations(SpanObservations(0.0, 60.0, faced[:1], counts(), 60.0))
    assert one.endswith("; face seen."), one
    assert "face" not in describe_observations(SpanObservations(0.0, 60.0, tracks, counts(), 60.0))
    car = dataclasses.replace(arriving_car(10.0, "red"), attributes={"colour": "red", "face": "seen"})
    assert "face" not in describe_observations(SpanObservations(0.0, 60.0, [car], [], 60.0))  # people's only


def test_a_track_is_described_within_the_span_it_is_read_for():
    track = walker(50.0, 20, "left", "right")  # 50-70 s: it came in during the first minute and left in the second
    assert way_of(track, 0.0, 60.0).words.startswith("from the left and")
    assert way_of(track, 60.0, 120.0).words == "off to the right from the centre"
    assert way_of(track, 60.0, 120.0).kind == "left"
    assert way_of(track, 40.0, 100.0).words == "left to right"


def test_places_are_thirds_of_the_picture():
    assert [place(0.1, 0.1), place(0.5, 0.1), place(0.5, 0.5), place(0.9, 0.9), place(0.2, 0.5)] == \
        ["top left", "top centre", "centre", "bottom right", "middle left"]


def busy_minute(seed: int) -> SpanObservations:
    """A crowded plaza minute: 90 people every which way in many clothes, 20 vehicles, dogs, a bicycle, benches."""
    rng = random.Random(seed)
    edges = ("left", "right", "top", "bottom")
    tracks = []
    for _ in range(90):
        came, went = rng.choice(edges), rng.choice(edges)
        t0 = rng.uniform(0, 55)
        path = tuple(PathPoint(t0 + k * 2, rng.random(), rng.random()) for k in range(4))
        tracks.append(TrackedObject("cam", next(_ids), "person", t0, t0 + rng.uniform(2, 20), 0.7, came, went,
                                    rng.random() > 0.1, path,
                                    {"upper": rng.choice(CLOTHES), "lower": rng.choice(CLOTHES), "face": "seen"}))
    for _ in range(20):
        t0 = rng.uniform(0, 55)
        label = rng.choice(("car", "truck", "bus", "motorcycle"))
        came, went = rng.choice(edges), rng.choice((*edges, IN_VIEW))
        path = (PathPoint(t0, rng.random(), rng.random()), PathPoint(t0 + 3, rng.random(), rng.random()))
        tracks.append(TrackedObject("cam", next(_ids), label, t0, t0 + rng.uniform(1, 10), 0.8, came, went, True,
                                    path, {"colour": rng.choice(CLOTHES)}))
    tracks += [parked(), parked("car", "red", 0.1, 0.9)]
    tracks += [walker(rng.uniform(0, 50), 6, "left", "right", label="dog") for _ in range(3)]
    tracks += [walker(12.0, 4, "right", "left", label="bicycle")]
    tracks += [TrackedObject("cam", next(_ids), "bench", -100.0, 500.0, 0.6, IN_VIEW, None, False,
                             (PathPoint(-100.0, 0.05 + i / 20, 0.8),), active=True) for i in range(4)]
    return SpanObservations(0.0, 60.0, tracks, counts(high=14, car=2, truck=1, dog=1), 60.0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_busy_minute_stays_short_and_repeats_nothing(seed):
    seen = busy_minute(seed)
    coarse = describe_observations(seen, level=Level.COARSE)
    fine = describe_observations(seen, level=Level.FINE)
    assert len(coarse) <= 900 and len(fine) <= 1400, (len(coarse), len(fine))
    for text in (coarse, fine):
        lines = text.splitlines()
        assert [line.split(" (")[0] for line in lines] == ["People", "Vehicles", "Dogs", "Benches", "Bicycles"]
        assert "1 white truck parked at the top centre throughout" in text  # the parked van keeps its line
        assert "4 benches stayed" in text  # identical things counted once
        groups = [g.strip() for line in lines for g in line.split(": ", 1)[1].split(";")]
        assert len(groups) == len(set(groups)), groups  # no statement twice
        people = lines[0]
        total = int(re.search(r"(\d+) different", people).group(1))
        assert total == 90
        shown = sum(int(n) for n in re.findall(r"(?:^|; |: )(\d+) (?:people|person|more)", people.split(": ", 1)[1]))
        assert shown == total  # every person is in some group, the rest folded into "n more in other ways"


def test_a_budget_is_kept_however_small():
    text = describe_observations(busy_minute(4), level=Level.COARSE, max_chars=200)
    assert len(text) <= 200 and text.endswith("…")


def test_nothing_seen_and_a_span_seen_in_part_say_so():
    assert describe_observations(SpanObservations(0.0, 60.0, [], [CountSample(i, {}) for i in range(60)], 60.0)) == \
        "Detector: nothing detected in the 60 frames it checked."
    part = describe_observations(SpanObservations(0.0, 60.0, [parked()], [], 30.0))
    assert part.splitlines()[-1] == "Detector: this span was looked at only up to 30.0 s."


class Observed:
    """An observation store over given tracks and counts (the protocol, without a database)."""

    def __init__(self, until: float | None, tracks=(), samples=()) -> None:
        self.until, self.tracks, self.samples = until, list(tracks), list(samples)
        self.asked: list[tuple[float | None, float | None]] = []

    def record_observations(self, observations) -> None:
        raise AssertionError("read only")

    def observed_until(self, stream: str) -> float | None:
        return self.until

    def next_track_id(self, stream: str) -> int:
        return 1

    def object_tracks(self, stream, *, label=None, start=None, end=None, limit=1000):
        self.asked.append((start, end))
        return [t for t in self.tracks if t.last_seen >= start and t.first_seen < end]

    def object_track(self, stream, track_id):
        return None

    def object_counts(self, stream, start, end):
        return [c for c in self.samples if start <= c.time < end]


def test_observations_are_read_only_where_the_detector_has_looked():
    van = parked()
    store = Observed(90.0, [van], [CountSample(10.0, {"truck": 1}), CountSample(70.0, {"truck": 1})])
    seen = read_observations(store, "cam", 60.0, 120.0)
    assert seen is not None and seen.tracks == [van] and [c.time for c in seen.counts] == [70.0]
    assert seen.until == 90.0 and not seen.complete
    assert read_observations(store, "cam", 90.0, 150.0) is None  # not reached yet: described as without a detector
    assert read_observations(Observed(None, [van]), "cam", 0.0, 60.0) is None  # never observed (detection off)
    assert read_observations(object(), "cam", 0.0, 60.0) is None  # a store that keeps no observations


def test_a_cyclist_is_one_passer_by_on_a_bicycle_and_the_bicycle_is_not_another():
    """The tracker marked the person riding (``riding: bicycle``) and the bicycle ridden: the people line says who
    rode and how; the bicycles line counts the bicycle without making it a second passer-by."""
    rider = walker(10.0, 6, "left", "right", upper="red")
    rider = dataclasses.replace(rider, attributes={**rider.attributes, "riding": "bicycle"})
    bike = dataclasses.replace(walker(10.0, 6, "left", "right", label="bicycle"), attributes={"ridden": "person"})
    walking = walker(30.0, 12, "right", "left")
    samples = [CountSample(10 + i / 2, {"person": 1, "bicycle": 1}) for i in range(12)]
    text = describe_observations(SpanObservations(0.0, 60.0, [rider, bike, walking], samples, 60.0),
                                 level=Level.FINE)
    people, bicycles = text.splitlines()
    assert "1 person in red top on a bicycle rode left to right" in people
    assert "1 person walked right to left" in people and "2 different" in people
    assert bicycles == "Bicycles (detector): 1 in view throughout; 1 ridden by a person."


def test_an_open_track_not_seen_for_a_while_before_the_span_ended_is_not_said_to_be_still_there():
    """The tracker keeps a lost object's record open for a while (it may be seen again): one last seen 9 s before
    the span's end was not in view at its end; one seen up to the last record's age (5 s) was."""
    path = (PathPoint(40.0, 0.02, 0.6), PathPoint(45.0, 0.4, 0.6), PathPoint(51.0, 0.5, 0.6))
    lost = TrackedObject("cam", next(_ids), "person", 40.0, 51.0, 0.8, "left", None, True, path, {}, active=True)
    seen = dataclasses.replace(lost, track_id=next(_ids), last_seen=56.0,
                               path=path[:2] + (PathPoint(56.0, 0.5, 0.6),))
    text = describe_observations(SpanObservations(0.0, 60.0, [lost], [], 60.0), level=Level.FINE)
    assert "came in from the left and was last seen at the centre (40.0 s)" in text
    text = describe_observations(SpanObservations(0.0, 60.0, [seen], [], 60.0), level=Level.FINE)
    assert "came in from the left and was still in view at the centre" in text

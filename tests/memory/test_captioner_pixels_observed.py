"""The pixels captioner with a detector's observations of the span: people and vehicles written from the tracks and
counts, its own people pass, shape list and moving blobs dropped, a large coloured sign kept once; without them, as
before."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from lucy.config import Level
from lucy.config.settings import PixelsCaptionerSettings
from lucy.ingest.frames import Clip
from lucy.memory.captioners.pixels import PixelsCaptioner
from lucy.memory.captioners.sections import MOVING_THINGS, OBJECTS, PEOPLE
from lucy.perception.describe import SpanObservations
from lucy.perception.objects import IN_VIEW, CountSample, PathPoint, TrackedObject


def plaza_clip(n: int = 30, start: float = 0.0) -> Clip:
    """640x360 frames 2 s apart: a gray square, a large red board at the top left, and a row of small blue squares
    sliding right (shapes the captioner lists and moving blobs it follows)."""
    frames = np.full((n, 360, 640, 3), 128, np.uint8)
    frames[:, 20:130, 20:220] = (200, 30, 30)  # the board: 200x110 px, 9.5% of the picture
    for i in range(n):
        for k in range(3):
            x = 250 + 8 * i + 40 * k
            frames[i, 250:266, x:x + 16] = (30, 60, 220)
    return Clip(frames, start + 2.0 * np.arange(n))


def observed(start: float = 0.0, end: float = 60.0) -> SpanObservations:
    walkers = [TrackedObject("cam", i + 1, "person", 4.0 * i, 4.0 * i + 8, 0.8, "left", "right", True,
                             (PathPoint(4.0 * i, 0.02, 0.6), PathPoint(4.0 * i + 8, 0.98, 0.6)),
                             {"upper": "red"}) for i in range(6)]
    van = TrackedObject("cam", 10, "truck", -500.0, 900.0, 0.9, IN_VIEW, None, False, (PathPoint(-500.0, 0.5, 0.2),),
                        {"colour": "white"}, active=True)
    counts = [CountSample(t / 2, {"person": 2 + t % 3, "truck": 1}) for t in range(int(start) * 2, int(end) * 2)]
    return SpanObservations(start, end, [*walkers, van], counts, end)


class NoPeoplePass:
    """Stands in for the HOG people detector: a span the detector observed must not run it."""

    calls = 0

    def detect(self, rgb):
        NoPeoplePass.calls += 1
        return []


@pytest.fixture(scope="module")
def captioner() -> PixelsCaptioner:
    return PixelsCaptioner(PixelsCaptionerSettings(ocr=False), max_in_flight=2)


def describe(captioner: PixelsCaptioner, clip: Clip, level: str, seen: SpanObservations | None):
    return asyncio.run(captioner.describe(clip, "Describe the clip.", level=Level(level),
                                          **({} if seen is None else {"observed": seen})))


def test_without_observations_the_caption_is_as_before(captioner):
    caption = describe(captioner, plaza_clip(), "coarse", None)
    assert f"\n{PEOPLE}: none detected." in caption.text  # its own people pass ran
    assert f"\n{OBJECTS}: " in caption.text and "blue square" in caption.text  # the shapes, as today
    assert "(detector)" not in caption.text and caption.extra["observed"] is False


@pytest.mark.parametrize("level", ["coarse", "fine"])
def test_observations_replace_the_people_pass_shapes_and_blobs(captioner, level, monkeypatch):
    monkeypatch.setattr(captioner, "people", NoPeoplePass())
    NoPeoplePass.calls = 0
    caption = describe(captioner, plaza_clip(), level, observed())
    text = caption.text
    assert NoPeoplePass.calls == 0  # the stored frames' people pass is not run
    lines = text.splitlines()
    people = next(line for line in lines if line.startswith("People (detector): "))
    assert "2-4 in view" in people and "6 people in red top walked left to right" in people
    assert "Vehicles (detector): 1 in view throughout; 1 white truck parked at the top centre throughout." in lines
    assert f"{PEOPLE}: none detected" not in text and f"{MOVING_THINGS}" not in text
    assert "blue square" not in text  # shapes that move: what the detector follows, not listed again
    board = [line for line in lines if line.startswith(f"{OBJECTS} ")]
    assert board == [f"{OBJECTS} (solid-coloured shapes that stay in place): 1 red rectangle (top left, 0.0-58.0 s)."]
    assert text.count("red rectangle") == 1  # the board once, not once per frame
    assert "Scenes:" in text and "gray background" in text  # the background stays
    assert caption.extra["observed"] is True and caption.extra["people"] == 4


def test_a_busy_coarse_caption_stays_within_its_bound(captioner, monkeypatch):
    monkeypatch.setattr(captioner, "people", NoPeoplePass())
    ways = [("left", "right"), ("right", "left"), ("top", "bottom"), ("left", "top"), ("bottom", "right")]
    tracks = [TrackedObject("cam", i, "person" if i % 4 else "car", i * 0.5, i * 0.5 + 9, 0.7, *ways[i % 5], True,
                            (PathPoint(i * 0.5, (i % 7) / 7, (i % 5) / 5), PathPoint(i * 0.5 + 9, 0.5, 0.5)),
                            {"upper": ("red", "black", "blue")[i % 3], "colour": "gray"}) for i in range(1, 120)]
    seen = SpanObservations(0.0, 60.0, tracks, [CountSample(t / 2, {"person": 5 + t % 4}) for t in range(120)], 60.0)
    text = describe(captioner, plaza_clip(), "coarse", seen).text
    assert len(text) <= 1500, len(text)
    assert "People (detector): 5-8 in view" in text and "90 different" in text


def test_a_few_still_shapes_stay_and_many_give_way_to_the_large_ones(captioner, monkeypatch):
    # Three small boxes on a shelf say something (how many boxes?); a real scene's dozens of flat patches do not.
    monkeypatch.setattr(captioner, "people", NoPeoplePass())
    boxes = np.full((20, 360, 640, 3), 128, np.uint8)
    for k in range(3):
        boxes[:, 280:300, 60 + 30 * k:80 + 30 * k] = (240, 140, 20)
    clip = Clip(boxes, 2.0 * np.arange(20))
    text = describe(captioner, clip, "fine", observed(0, 40)).text
    assert "3 orange squares (bottom left" in text
    clutter = boxes.copy()
    colours = [(240, 140, 20), (30, 60, 220), (30, 160, 40), (220, 220, 30), (200, 30, 30), (120, 40, 160),
               (20, 20, 20), (250, 250, 250)]
    for k, colour in enumerate(colours):  # eight patches of eight colours, far apart: eight groups
        clutter[:, 20 + 40 * (k % 4):36 + 40 * (k % 4), 300 + 160 * (k // 4):316 + 160 * (k // 4)] = colour
    text = describe(captioner, Clip(clutter, 2.0 * np.arange(20)), "fine", observed(0, 40)).text
    assert "orange square" not in text and "solid-coloured shapes that stay in place" not in text


def test_among_a_real_scenes_many_still_shapes_those_that_came_or_went_are_listed():
    from lucy.memory.captioners.pixels import FrameFacts, ObjectGroup, _still_objects

    def frame(t, extra=()):
        # Eight patches of the scene's texture there all along, one that flickers in and out of its colour's name.
        texture = [ObjectGroup(1, colour, "rectangle", place, 0.002) for colour, place in (
            ("black", "top left"), ("orange", "top right"), ("white", "top centre"), ("teal", "centre"),
            ("brown", "middle left"), ("gray", "middle right"), ("black", "bottom right"), ("white", "top right"))]
        flicker = [ObjectGroup(1, "yellow", "rectangle", "top left", 0.001)] if int(t) % 2 else []
        return FrameFacts(t, np.zeros(13), 100.0, np.zeros((4, 4), np.uint8), texture + flicker + list(extra))

    squares = ObjectGroup(4, "red", "square", "bottom left", 0.006)
    facts = [frame(t, [squares] if 37 <= t <= 39 else []) for t in range(30, 40)]
    listed = _still_objects(facts)
    assert listed.endswith("4 red squares (bottom left, 37.0-39.0 s).") and "rectangle" not in listed
    assert _still_objects([frame(t) for t in range(30, 40)]) == ""  # the scene alone: nothing came or went

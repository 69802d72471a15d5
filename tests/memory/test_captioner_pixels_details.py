"""What the pixels captioner says beyond counts, on small generated clips with known answers: where objects are,
the colour of on-screen letters, the background of each scene, and rows of squares with small gaps counted one
by one (at the fine 320x180 look and the coarse 160x90 one)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import av
import numpy as np
import pytest

from lucy.config import Level
from lucy.config.settings import PixelsCaptionerSettings
from lucy.ingest.frames import Clip
from lucy.memory.captioners.pixels import PixelsCaptioner, Thing, group_objects, text_colours
from lucy.synth import PALETTE, Overlay, Scene, Shape, write_video

INSTRUCTION = "Describe everything: the colours, counts of objects and all on-screen text."


def clip_of(path: Path) -> Clip:
    """The decoded frames of a generated video (what ingest would store), with their media times."""
    frames, times = [], []
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            frames.append(frame.to_ndarray(format="rgb24"))
            times.append(float(frame.time))
    return Clip(np.stack(frames), np.asarray(times))


def make(tmp_path: Path, name: str, background: str, **kwargs: object) -> Clip:
    return clip_of(write_video(tmp_path / f"{name}.mp4", duration=2, fps=1, width=320, height=180,
                               scenes=[Scene(0, 2, PALETTE[background])], **kwargs))  # type: ignore[arg-type]


def caption(captioner: PixelsCaptioner, clip: Clip, level: Level = Level.FINE) -> str:
    return asyncio.run(captioner.describe(clip, INSTRUCTION, level=level)).text


@pytest.fixture(scope="module")
def reader() -> PixelsCaptioner:
    return PixelsCaptioner(PixelsCaptionerSettings(people=False), max_in_flight=2)


@pytest.fixture(scope="module")
def counter() -> PixelsCaptioner:
    return PixelsCaptioner(PixelsCaptionerSettings(ocr=False, people=False), max_in_flight=2)


@pytest.mark.parametrize("background", ["gray", "blue", "brown"])
def test_text_lines_say_the_colour_of_their_letters(tmp_path, reader, background):
    clip = make(tmp_path, background, background, overlays=[
        Overlay(0, 2, "GATE 7", x=0.05, y=0.05, size=0.12, color=PALETTE["red"], box=None),
        Overlay(0, 2, "EXIT 12", x=0.55, y=0.35, size=0.12, color=PALETTE["yellow"], box=None),
        Overlay(0, 2, "LOBBY", x=0.05, y=0.55, size=0.12, color=PALETTE["white"], box=None)])
    text = caption(reader, clip)
    assert f'"GATE 7" (top left, red letters on {background}, seen 0.0-1.0 s)' in text, text
    assert f'"EXIT 12" (middle right, yellow letters on {background}, seen 0.0-1.0 s)' in text, text
    assert f'"LOBBY" (middle left, white letters on {background}, seen 0.0-1.0 s)' in text, text
    assert f"mostly {background} background (colours: {background}" in text


@pytest.mark.parametrize(("letters", "background"), [("orange", "gray"), ("pink", "white"), ("green", "yellow"),
                                                     ("teal", "white"), ("black", "orange"), ("black", "yellow")])
def test_letters_with_a_dark_outline_are_named_by_their_fill(tmp_path, reader, letters, background):
    """The test videos' letters have a dark anti-aliased rim, as subtitles and many signs have an outline: on a
    light ground the rim lies farthest from the ground, yet the letters' colour is their fill. Black letters
    stay black (their edges blend into a darker shade of the ground, which is no fill)."""
    clip = make(tmp_path, f"{letters}-{background}", background, overlays=[
        Overlay(0, 2, "LOADING DOCK", x=0.05, y=0.05, size=0.12, color=PALETTE[letters], box=None)])
    text = caption(reader, clip)
    assert f'"LOADING DOCK" (top left, {letters} letters on {background}, seen 0.0-1.0 s)' in text, text


def test_letters_on_a_plate_are_on_the_plate(tmp_path, reader):
    clip = make(tmp_path, "plate", "blue",
                overlays=[Overlay(0, 2, "PLATFORM 4", x=0.05, y=0.05, size=0.12, color=PALETTE["yellow"])])
    assert '"PLATFORM 4" (top left, yellow letters on black, seen 0.0-1.0 s)' in caption(reader, clip)


def test_anti_aliased_edges_are_not_named():
    """Red letters on blue blend to pink at their edges; white on blue to light blue: neither is the letters'
    colour. A stroke 1 px wide (all edge) gets no colour at all."""
    frame = np.zeros((40, 120, 3), np.uint8)
    frame[:] = PALETTE["blue"]
    blend = (np.asarray(PALETTE["red"]) * 0.5 + np.asarray(PALETTE["blue"]) * 0.5).astype(np.uint8)
    for x in range(10, 110, 12):  # vertical strokes 4 px wide with a blended pixel on each side
        frame[10:30, x - 1] = blend
        frame[10:30, x:x + 4] = PALETTE["red"]
        frame[10:30, x + 4] = blend
    frame[18:21, 10:18] = PALETTE["red"]  # a bar, as letters have
    assert text_colours(frame, (0.0, 0.0, 1.0, 1.0)) == ("red", "blue")
    thin = np.zeros_like(frame)
    thin[:] = PALETTE["blue"]
    thin[10:30, 10:110:6] = blend  # hairlines: only blends
    assert text_colours(thin, (0.0, 0.0, 1.0, 1.0))[0] is None


def test_objects_say_where_they_are(tmp_path, counter):
    green = PALETTE["green"]
    corners = [Shape(0, 2, green, 1, x=x, y=y, size=0.15) for x, y in ((0.03, 0.05), (0.85, 0.05),
                                                                        (0.03, 0.62), (0.85, 0.62))]
    text = caption(counter, make(tmp_path, "corners", "gray", shapes=corners))
    for place in ("top left", "top right", "bottom left", "bottom right"):
        assert f"1 green square ({place}, 0.0-1.0 s)" in text, text
    assert "4 green squares" not in text  # one colour in four places: four groups
    row = [Shape(0, 2, PALETTE["red"], 5, x=0.05, y=0.05, size=0.2)]  # 5 squares from left to right
    text = caption(counter, make(tmp_path, "row", "gray", shapes=row))
    assert "5 red squares (across the top, 0.0-1.0 s)" in text, text


def test_a_moving_object_keeps_one_line_with_its_places(tmp_path, counter):
    text = caption(counter, clip_of(write_video(tmp_path / "m.mp4", duration=30, fps=0.5, width=320, height=180,
                                                scenes=[Scene(0, 30, PALETTE["gray"])])))
    assert re.search(r"1 white square \(bottom left then bottom centre then bottom right[^)]*, 0\.0-\d+\.0 s\)",
                     text), text


@pytest.mark.parametrize("gap", [0.2, 0.3, 0.5])
@pytest.mark.parametrize("colour,background", [("green", "gray"), ("red", "blue"), ("yellow", "brown")])
def test_rows_of_squares_with_small_gaps_are_counted_one_by_one(tmp_path, counter, gap, colour, background):
    for n in (2, 3, 4, 5):
        side = int(0.12 * 180)
        step = side + round(gap * side)
        shapes = [Shape(0, 2, PALETTE[colour], 1, x=(20 + i * step) / 320, y=0.1, size=0.12) for i in range(n)]
        clip = make(tmp_path, f"row{n}", background, shapes=shapes)
        for level in (Level.FINE, Level.COARSE):  # 320x180, and shrunk to 160x90
            text = caption(counter, clip, level)
            found = re.findall(rf"(\d+) {colour} (square|rectangle)s? \(", text.split("Objects")[1])
            assert found == [(str(n), "square")], (n, level, text)


def test_groups_in_words():
    def thing(x0: float, y0: float) -> Thing:
        return Thing("green", "square", x0, y0, x0 + 0.05, y0 + 0.09)

    near = group_objects([thing(0.70, 0.05), thing(0.78, 0.05), thing(0.86, 0.05)], 16 / 9)
    assert [(g.words, g.place) for g in near] == [("3 green squares", "top right")]
    apart = group_objects([thing(0.05, 0.05), thing(0.05, 0.8)], 16 / 9)
    assert sorted(g.place for g in apart) == ["bottom left", "top left"]
    column = group_objects([thing(0.45, y) for y in (0.05, 0.2, 0.35, 0.5, 0.65, 0.8)], 16 / 9)
    assert [(g.words, g.place) for g in column] == [("6 green squares", "down the centre")]


def test_a_coarse_look_catches_a_brief_appearance_between_its_spread_frames(tmp_path, reader):
    """A sign and a row of squares shown for 3 s of a steady 60-s scene (no cut marks them), sampled at 0.5 fps as
    the live preset stores it: the 8 frames spread over the span step over them, the look at every frame does
    not."""
    video = write_video(tmp_path / "brief.mp4", duration=60, fps=0.5, width=320, height=180,
                        scenes=[Scene(0, 60, PALETTE["blue"])],
                        overlays=[Overlay(33, 36, "DOCK 14", x=0.05, y=0.05, size=0.12, box=None)],
                        shapes=[Shape(33, 36, PALETTE["yellow"], count=3, x=0.6, y=0.65, size=0.1)])
    clip = clip_of(video)
    text = caption(reader, clip, Level.COARSE)
    assert "DOCK 14" in text.replace("DOCK14", "DOCK 14"), text
    assert re.search(r"3 yellow squares \(bottom right", text), text
    # Without the brief appearance, the same scene's coarse caption has no sign and no squares.
    quiet = caption(reader, clip_of(write_video(tmp_path / "quiet.mp4", duration=60, fps=0.5, width=320, height=180,
                                                scenes=[Scene(0, 60, PALETTE["blue"])])), Level.COARSE)
    assert "DOCK" not in quiet and "yellow" not in quiet


@pytest.mark.parametrize("width,size", [(320, 0.1), (640, 0.05)])
def test_letters_keep_their_colour_through_half_resolution_colour(tmp_path, reader, width, size):
    """H.264 keeps colour at half the resolution of brightness (4:2:0): yellow letters leave a yellow halo on the
    grey around them, which is neither the ground nor a plate behind the letters (both sizes read "black letters on
    yellow" before)."""
    clip = clip_of(write_video(tmp_path / "halo.mp4", duration=2, fps=1, width=width, height=width * 9 // 16,
                               scenes=[Scene(0, 2, PALETTE["gray"])],
                               overlays=[Overlay(0, 2, "EXIT 7 NORTH", x=0.1, y=0.3, size=size,
                                                 color=PALETTE["yellow"], box=None)]))
    text = caption(reader, clip)
    assert re.search(r'"EXIT 7 NORTH" \([^)]*yellow letters on gray', text), text

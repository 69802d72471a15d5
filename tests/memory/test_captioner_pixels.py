"""The pixels captioner on generated video: text it reads, colours, cuts, counts and motion, coarse vs fine."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import numpy as np
import pytest

from lucy.config import Level, load_settings
from lucy.config.settings import PixelsCaptionerSettings
from lucy.errors import LucyError
from lucy.ingest import Ingestor, ZarrFrameStore
from lucy.ingest.frames import Clip
from lucy.memory.captioners.pixels import COLOURS, PixelsCaptioner, _quote, colour_names, label_components
from lucy.synth import PALETTE, Overlay, Scene, Shape, write_video
from lucy.wiring import open_frames

INSTRUCTION = "Describe everything: the colours, counts of objects and all on-screen text."


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> ZarrFrameStore:
    """30 s, 640x360: red / blue / yellow scenes; big text 0-12 s; small text 13-29 s; 3 green squares 21-29 s."""
    tmp = tmp_path_factory.mktemp("pixels")
    video = write_video(
        tmp / "v.mp4", duration=30, fps=10,
        scenes=[Scene(0, 10, PALETTE["red"]), Scene(10, 20, PALETTE["blue"]), Scene(20, 30, PALETTE["yellow"])],
        overlays=[Overlay(0, 12, "WELCOME TO LUCY", size=0.08),
                  Overlay(13, 29, "PLATFORM 4", x=0.1, y=0.4, size=0.025),
                  Overlay(13, 29, "EXIT 7B LEFT", x=0.55, y=0.62, size=0.03)],
        shapes=[Shape(21, 29, PALETTE["green"], count=3, y=0.3)])
    settings = load_settings(data=tmp / "data", preset="live")
    assert Ingestor(settings, str(video), "cam", frames=open_frames(settings)).run().complete
    return ZarrFrameStore.open(settings.data, "cam")


@pytest.fixture(scope="module")
def captioner() -> PixelsCaptioner:
    return PixelsCaptioner(PixelsCaptionerSettings(), max_in_flight=2)


def caption(captioner: PixelsCaptioner, clip: Clip, level: str, instruction: str = INSTRUCTION):
    return asyncio.run(captioner.describe(clip, instruction, level=Level(level)))


def squash(text: str) -> str:
    """Tesseract may drop the narrow spaces of small text: compare without spaces, case-blind."""
    return re.sub(r"\s+", "", text).lower()


def read_level(store: ZarrFrameStore, start: float, end: float, level: str) -> Clip:
    fps = load_settings(preset="live").levels.level(Level(level)).fps
    return store.read(start, end, fps)


def test_fine_reads_the_text_rendered_into_the_video(store, captioner):
    result = caption(captioner, read_level(store, 10, 20, "fine"), "fine")
    text = result.text
    assert result.frames == 10 and result.extra["frame_size"] == [640, 360]
    # shown until 12 s, sampled at 1 fps; white letters on the overlay's black plate
    assert '"WELCOME TO LUCY" (top left, white letters on black, seen 10.0-11.0 s)' in text
    assert "platform4" in squash(text) and "exit7bleft" in squash(text)
    assert re.search(r'"PLATFORM 4" \(middle left, (white letters on black, )?seen 13\.0-19\.0 s\)', text)
    assert result.model.startswith("lucy-pixels-1")


def test_coarse_misses_small_text_that_fine_finds(store, captioner):
    coarse = caption(captioner, read_level(store, 0, 30, "coarse"), "coarse")
    # 4 frames spread over the span, one keyframe per scene (3 scenes, cuts found on all 15 frames at 0.5 fps) and
    # the middle of the one brief appearance (the small text, on screen from 13 s in a scene of its own background)
    assert coarse.frames == 8 and coarse.extra["frame_size"] == [320, 180]
    assert coarse.extra["scenes"] == 3 and coarse.extra["frames_surveyed"] == 15
    assert "WELCOME TO LUCY" in coarse.text  # big text survives the coarse look
    assert "platform" not in squash(coarse.text) and "exit" not in squash(coarse.text)
    # A coarse frame did show the small text (it is on screen 13-29 s): the coarse look just cannot read it.
    assert re.search(r"1[3-9]\.\d|2[0-8]\.\d", coarse.text.split("On-screen text")[0])
    fine = caption(captioner, read_level(store, 20, 30, "fine"), "fine")
    assert "platform4" in squash(fine.text) and "exit7bleft" in squash(fine.text)


def test_colours_brightness_and_scene_cuts(store, captioner):
    text = caption(captioner, read_level(store, 0, 30, "fine"), "fine").text
    scenes = re.findall(r"^- ([\d.]+)-([\d.]+) s: mostly (\w+) background \(colours: [^)]*\); ([a-z ]+) \(", text,
                        re.MULTILINE)
    assert [s[2] for s in scenes] == ["red", "blue", "yellow"]
    assert [s[3] for s in scenes] == ["dim", "dim", "bright"]
    # Cuts are found on every frame (1 fps here), so each is placed to the second.
    assert re.findall(r"scene change at about ([\d.]+) s", text) == ["10.0", "20.0"]


def test_counts_squares_and_focuses_on_what_the_instruction_asks(store, captioner):
    clip = read_level(store, 20, 30, "fine")
    full = caption(captioner, clip, "fine").text
    assert re.search(r"3 green squares \(middle right, 2[12]\.0-28\.0 s\)", full)
    assert "1 white square" in full  # the moving square
    focused = caption(captioner, clip, "fine", "How many squares are on screen?").text
    lines = focused.splitlines()
    assert "Focus: objects" in lines[0] and lines[1].startswith("Objects")  # the asked-for section comes first
    assert re.search(r"2[12]\.0 s: [^;]*3 green squares \(middle right\)", focused)  # per-frame counts when asked
    assert "3 green squares" not in caption(captioner, read_level(store, 0, 10, "fine"), "fine").text


def test_quoted_terms_in_the_instruction_are_looked_for(store, captioner):
    clip = read_level(store, 10, 20, "fine")
    found = caption(captioner, clip, "fine", 'Is the sign "PLATFORM 4" readable, and does "BANANA" appear?').text
    assert re.search(r'looked for "PLATFORM 4": seen at 13\.0-19\.0 s', found)
    assert 'looked for "BANANA": not readable in these frames' in found
    assert found.splitlines()[1].startswith("On-screen text")  # a text question puts text first


def test_motion_is_measured_and_placed():
    still = Clip(np.full((6, 90, 160, 3), 120, np.uint8), np.arange(6, dtype=float))
    moving = np.full((6, 90, 160, 3), 120, np.uint8)
    for i in range(6):  # a 30x30 block crossing the top right
        moving[i, 5:35, 90 + i * 10:120 + i * 10] = 250
    cap = PixelsCaptioner(PixelsCaptionerSettings(ocr=False))
    assert "Motion: none (0.0%" in caption(cap, still, "fine").text
    text = caption(cap, Clip(moving, np.arange(6, dtype=float)), "fine").text
    share = float(re.search(r"Motion: \w+ \(([\d.]+)%", text).group(1))
    assert 3 <= share <= 12 and "mostly at the top right" in text
    assert "On-screen text" not in text  # OCR off: no claim about text either way


def test_video_motion_is_the_moving_square(store, captioner):
    text = caption(captioner, read_level(store, 10, 20, "fine"), "fine").text
    assert re.search(r"Motion: slight \([\d.]+% of the picture changes between sampled frames\), mostly at the "
                     r"bottom", text)


def test_deterministic_whatever_the_threading(store):
    clip = read_level(store, 10, 20, "fine")
    one = PixelsCaptioner(PixelsCaptionerSettings(), max_in_flight=1)
    two = PixelsCaptioner(PixelsCaptionerSettings(), max_in_flight=2)
    texts = [caption(c, clip, "fine").text for c in (one, two, two)]
    assert texts[0] == texts[1] == texts[2]
    assert two.cache_hits == len(clip)  # the second look at the same frames reused the first's analysis


def test_never_blocks_the_event_loop(store):
    clip = read_level(store, 0, 30, "fine")
    captioner = PixelsCaptioner(PixelsCaptionerSettings(), max_in_flight=2)  # a cold cache: real work

    async def run() -> tuple[float, float]:
        gaps: list[float] = []
        done = asyncio.Event()

        async def ticker() -> None:
            last = time.perf_counter()
            while not done.is_set():
                await asyncio.sleep(0.005)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        tick = asyncio.create_task(ticker())
        began = time.perf_counter()
        await captioner.describe(clip, INSTRUCTION, level=Level.FINE)
        took = time.perf_counter() - began
        done.set()
        await tick
        return took, max(gaps)

    took, worst = asyncio.run(run())
    assert took > 0.3  # 16 frames of OCR: long enough to notice a blocked loop
    # A stall is measured against how fast this machine ran the work: on a busy one (parallel tests, other jobs) every
    # 5 ms sleep can overshoot a little, in proportion; a blocked loop stalls for a good part of the whole job.
    assert worst < min(max(0.25, took / 20), took / 3), (took, worst)


def test_colour_names_survive_shading():
    for name, rgb in PALETTE.items():
        for shade in (0.75, 1.0, 1.15):
            pixel = np.clip(np.asarray(rgb) * shade, 0, 255).astype(np.uint8)[None, None]
            assert COLOURS[colour_names(pixel)[0, 0]] == name, (name, shade)


def test_components_are_four_connected_and_per_colour():
    classes = np.zeros((8, 10), np.int8)
    classes[1:3, 1:3] = 3  # a red block
    classes[3:5, 3:5] = 3  # touches the first only at a corner: separate
    classes[1:3, 6:9] = 7  # green, next to...
    classes[1:3, 9] = 9  # ...a blue column: separate colour, separate component
    labels = label_components(classes, background=0)
    assert len(set(labels[labels >= 0].tolist())) == 4
    assert labels[0, 0] == -1 and labels[1, 1] == labels[2, 2] != labels[3, 3]


def test_ocr_text_is_quoted_as_data():
    assert _quote('say "hi"\nthen\x07 obey') == "say 'hi' then obey"
    assert len(_quote("x" * 1000)) == 200


def test_missing_language_data_is_a_clear_error(tmp_path: Path):
    with pytest.raises(LucyError, match="tesseract-ocr-eng"):
        PixelsCaptioner(PixelsCaptionerSettings(ocr_engine="tesseract", tessdata_dir=str(tmp_path)))


def test_still_usable_after_aclose(store):
    cap = PixelsCaptioner(PixelsCaptionerSettings(), max_in_flight=1)
    clip = read_level(store, 0, 4, "ultra_fine")

    async def twice() -> tuple[str, str]:
        first = (await cap.describe(clip, INSTRUCTION, level=Level.ULTRA_FINE)).text
        await cap.aclose()
        cap._cache.clear()  # make the second look read the pixels again, with fresh engines
        second = (await cap.describe(clip, INSTRUCTION, level=Level.ULTRA_FINE)).text
        await cap.aclose()
        return first, second

    first, second = asyncio.run(twice())
    assert first == second and "WELCOME TO LUCY" in first


def test_coarse_looks_at_each_stage_of_a_brief_appearance(tmp_path: Path, captioner):
    """A sign shown for two seconds and, right after it, squares for two more, on the scene's own background (no
    cut marks them): the cheap look at every frame finds one appearance in two stages, and the coarse look reads
    both, though frames spread over the span step over them."""
    video = write_video(tmp_path / "stages.mp4", duration=60, fps=4, scenes=[Scene(0, 60, PALETTE["gray"])],
                        overlays=[Overlay(25, 27, "KIOSK 12", x=0.3, y=0.3, size=0.12, box=None)],
                        shapes=[Shape(27, 29, PALETTE["yellow"], count=4, x=0.05, y=0.8, size=0.1)])
    settings = load_settings(data=tmp_path / "data", preset="live")
    assert Ingestor(settings, str(video), "cam", frames=open_frames(settings)).run().complete
    store = ZarrFrameStore.open(settings.data, "cam")
    text = caption(captioner, read_level(store, 0, 60, "coarse"), "coarse").text
    assert '"KIOSK 12" (centre' in text and "4 yellow squares (bottom left, 28.0 s)" in text, text

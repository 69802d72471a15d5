"""Every scene reaches coarse memory; moving things are tracked and told in words; cut analysis on real clips."""

from __future__ import annotations

import asyncio
import re

import numpy as np

from lucy.config import Level, load_settings
from lucy.config.settings import PixelsCaptionerSettings
from lucy.ingest import Ingestor, ZarrFrameStore
from lucy.ingest.frames import Clip
from lucy.memory.captioners.base import pick_evenly
from lucy.memory.captioners.pixels import PixelsCaptioner
from lucy.perception import motion, scenes
from lucy.synth import PALETTE, Overlay, Scene, write_video
from lucy.wiring import open_frames


def describe(captioner: PixelsCaptioner, clip: Clip, level: Level, instruction: str = "Describe everything."):
    return asyncio.run(captioner.describe(clip, instruction, level=level))


def test_a_10_s_event_between_coarse_keyframes_reaches_the_coarse_caption(tmp_path):
    """60 s of a grey lobby; 22-32 s a purple scene with a sign. The 4 evenly spread coarse frames (0, 20, 38,
    58 s) all miss it; the cut analysis on every frame finds it and its keyframe is read."""
    video = write_video(tmp_path / "v.mp4", duration=60, fps=4, width=640, height=360,
                        scenes=[Scene(0, 22, PALETTE["gray"]), Scene(22, 32, PALETTE["purple"]),
                                Scene(32, 60, PALETTE["gray"])],
                        overlays=[Overlay(22, 32, "GATE 9 BOARDING", size=0.1, x=0.1, y=0.3)], shapes=[])
    settings = load_settings(data=tmp_path / "data", preset="live")
    assert Ingestor(settings, str(video), "cam", frames=open_frames(settings)).run().complete
    coarse = settings.levels.level(Level.COARSE)
    clip = ZarrFrameStore.open(settings.data, "cam").read(0, 60, coarse.fps)  # what the builder reads
    assert len(clip) == 30
    spread = [float(clip.times[i]) for i in pick_evenly(len(clip), PixelsCaptionerSettings().coarse_max_frames)]
    assert not any(22 <= t < 32 for t in spread)  # the old coarse look never saw the event

    caption = describe(PixelsCaptioner(PixelsCaptionerSettings()), clip, Level.COARSE)
    text = caption.text
    assert re.search(r"- 22\.0-30\.0 s: mostly purple", text), text
    assert "GATE 9 BOARDING" in text
    assert re.search(r'"GATE 9 BOARDING" \([^)]*seen 2[2-9]\.0', text)
    assert caption.extra["scenes"] == 3 and caption.extra["frames_surveyed"] == 30


def test_cuts_on_real_footage_follow_the_shots(clips):
    """bikes.mp4 is a montage: an overhead car roof, blurred traffic, a cyclist, a street railing, a walker."""
    frames = clips["bikes.mp4"][::5]  # 5 fps
    spans = scenes.split([scenes.signature(f) for f in frames])
    assert 3 <= len(spans) <= 12
    bounds = [s.first * 5 for s in spans[1:]]
    assert any(30 <= b <= 40 for b in bounds)  # roof -> man in the traffic (labelled frames 24 / 36)
    assert any(135 <= b <= 145 for b in bounds)  # blurred traffic -> the railing (frames 132 / 144)
    assert any(180 <= b <= 195 for b in bounds)  # railing -> walker by the bicycle (frames 180 / 192)
    one_shot = clips["bigbuckbunny.mp4"][::5]
    assert len(scenes.split([scenes.signature(f) for f in one_shot])) == 1


def test_a_moving_thing_is_tracked_and_told_in_words():
    frames = np.full((8, 180, 320, 3), 90, np.uint8)
    for i in range(8):  # a 30x30 block crossing the lower half, left to right
        frames[i, 120:150, 20 + i * 35:50 + i * 35] = (230, 200, 40)
    text = describe(PixelsCaptioner(PixelsCaptionerSettings(ocr=False)), Clip(frames, np.arange(8.0) * 2),
                    Level.FINE).text
    line = next(ln for ln in text.splitlines() if ln.startswith("Moving things"))
    assert "a moving object going left to right across the lower half, 0-14 s" in line
    assert "car" not in line and "person" not in line


def test_tracks_follow_nearest_centroids():
    a = [motion.Blob(0, 0.1, 0.5, 0.01), motion.Blob(0, 0.9, 0.2, 0.01)]
    b = [motion.Blob(1, 0.85, 0.25, 0.01), motion.Blob(1, 0.2, 0.5, 0.01)]
    c = [motion.Blob(2, 0.3, 0.5, 0.01)]
    tracks = motion.track([a, b, c])
    assert [[(p.x, p.y) for p in t.points] for t in tracks] == [[(0.1, 0.5), (0.2, 0.5), (0.3, 0.5)],
                                                                [(0.9, 0.2), (0.85, 0.25)]]
    assert motion.heading(tracks[0]) == "left to right across the middle"
    assert motion.heading(tracks[1]) is None  # barely moved

"""Captions written from the detect stage's observations wherever a span is captioned: the coarse builder and a
question's deeper captions read the span's tracks and counts from the memory store and hand them to a captioner that
sees them; a span the detector has not reached is captioned as without a detector."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np

from lucy.config import Level, load_settings
from lucy.config.settings import PixelsCaptionerSettings
from lucy.ingest import ZarrFrameStore
from lucy.memory.builder import CoarseBuilder
from lucy.memory.captioners.pixels import PixelsCaptioner
from lucy.perception.objects import IN_VIEW, CountSample, Observations, PathPoint, TrackedObject
from lucy.query.captioning import SpanCaptioner
from lucy.wiring import open_frames, open_memory

VAN = TrackedObject("cam", 1, "truck", 0.0, 130.0, 0.9, IN_VIEW, None, False, (PathPoint(0.0, 0.5, 0.15),),
                    {"colour": "white"}, active=True)


def setup(tmp_path: Path):
    settings = load_settings(data=tmp_path / "data", **{"memory.retry_initial_seconds": 0.05})
    store = ZarrFrameStore.create(settings.data, "cam", source="/v.mp4", source_id="c", live=False, width=64,
                                  height=64, stored_fps=2.0, codec="zstd", quality=90)
    store.append(np.full((360, 64, 64, 3), 90, np.uint8), np.arange(360) * 0.5)  # 0-179.5 s
    store.mark_finished(complete=True, lost=None)
    memory = open_memory(settings)
    # The detector has looked at the first 130 s: a white van parked at the top centre all along.
    memory.record_observations(Observations("cam", 130.0, [CountSample(t / 2, {"truck": 1}) for t in range(260)],
                                            [VAN]))
    return settings, memory


def test_the_builder_captions_observed_spans_from_the_observations(tmp_path):
    settings, memory = setup(tmp_path)
    captioner = PixelsCaptioner(PixelsCaptionerSettings(ocr=False))
    with CoarseBuilder(settings, "cam", memory, captioner, frames=open_frames(settings)) as builder:
        builder.on_commit()
        assert builder.drain(timeout=60)
    texts = {n.start: n.text for n in memory.nodes("cam", level="coarse")}
    assert sorted(texts) == [0.0, 60.0, 120.0]
    for start in (0.0, 60.0, 120.0):  # observed in whole or in part
        assert "Vehicles (detector): 1 in view throughout; 1 white truck parked at the top centre throughout." \
            in texts[start]
        assert "People: none detected" not in texts[start]  # its own people pass was not run
    assert "Detector: this span was looked at only up to 130.0 s." in texts[120.0]
    memory.close()


class View:
    """What the span captioner asks of a question's memory view: each level's fps and what was heard."""

    def fps(self, level: str) -> float:
        return 1.0

    def heard_in(self, start: float, end: float) -> list:
        return []


def test_a_questions_deeper_captions_are_written_from_the_observations_too(tmp_path):
    settings, memory = setup(tmp_path)
    captioner = PixelsCaptioner(PixelsCaptionerSettings(ocr=False))
    spans = SpanCaptioner(view=View(), frames=open_frames(settings).open("cam"), captioner=captioner, memory=memory,
                          slots=asyncio.Semaphore(2), expired_before=0.0, origin="question:1")

    async def both():
        return (await spans.caption(Level.FINE.value, 10.0, 20.0, "Describe.", None),
                await spans.caption(Level.FINE.value, 150.0, 160.0, "Describe.", None))

    seen, unseen = asyncio.run(both())
    assert "1 white truck parked at the top centre throughout" in seen.node.text
    # Past what the detector has looked at: as without a detector (its own people pass), nothing made up.
    assert "(detector)" not in unseen.node.text and "People: none detected." in unseen.node.text
    memory.close()

"""End to end on the embedded backends: a generated video whose small details coarse memory misses, the
pixels captioner building memory during ingest, and the lexical reasoner backtracking into deeper memory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from lucy.config import load_settings
from lucy.ingest import Ingestor
from lucy.memory.builder import CoarseBuilder
from lucy.memory.captioners.pixels import PixelsCaptioner
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.query.reasoners.lexical import LexicalReasoner
from lucy.synth import PALETTE, Overlay, Scene, Shape, write_video
from lucy.wiring import open_frames
from lucy.wiring.engine import open_engine

PLATES = ["KX-4281", "KX-4821", "QD-1190", "MV-3375"]
PLATE_Q = "What plate number was on the van at the HARBOR GATE?"
COUNT_Q = "How many orange squares were shown at the HARBOR GATE?"


def settings_for(data: Path):
    return load_settings(data=data, **{"ingest.frame_width": 320, "ingest.frame_height": 180,
                                       "captioner.pixels.coarse_max_frames": 8, "captioner.max_in_flight": 2})


def needle_video(path: Path) -> Path:
    """3 minutes of a gray lobby camera; 70-80 s: a blue HARBOR GATE scene with a small plate and 3 orange squares."""
    scenes = [Scene(0, 70, PALETTE["gray"]), Scene(70, 80, PALETTE["blue"]), Scene(80, 180, PALETTE["gray"])]
    overlays = [Overlay(70, 80, "HARBOR GATE", size=0.12, x=0.05, y=0.05),
                Overlay(70, 80, "VAN PLATE KX-4821", size=0.045, x=0.05, y=0.4),
                Overlay(0, 180, "CAM 3 LOBBY", size=0.06, x=0.6, y=0.85)]
    shapes = [Shape(70, 80, PALETTE["orange"], count=3, x=0.05, y=0.65, size=0.1)]
    return write_video(path, duration=180, fps=4, width=320, height=180, scenes=scenes, overlays=overlays,
                       shapes=shapes)


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    """The needle video ingested with coarse captions built by the continuous builder (pixels captioner)."""
    root = tmp_path_factory.mktemp("embedded")
    settings = settings_for(root / "data")
    video = needle_video(root / "needle.mp4")
    memory = SQLiteMemoryStore.for_data(settings)
    builder = CoarseBuilder(settings, "cam", memory, PixelsCaptioner(settings.captioner.pixels),
                            frames=open_frames(settings)).start()
    Ingestor(settings, str(video), "cam", on_commit=builder.on_commit, frames=open_frames(settings)).run()
    assert builder.drain(timeout=120)
    builder.stop()
    memory.close()
    return settings


async def ask(settings, question, options=()):
    captioner = PixelsCaptioner(settings.captioner.pixels)
    try:
        async with open_engine(settings, "cam", captioner=captioner, reasoner=LexicalReasoner()) as engine:
            return await engine.ask(question, options)
    finally:
        await captioner.aclose()


def test_coarse_memory_misses_the_detail(ingested):
    memory = SQLiteMemoryStore.for_data(ingested)
    coarse = memory.nodes("cam", level="coarse")
    assert [(n.start, n.end) for n in coarse] == [(0, 60), (60, 120), (120, 180)]
    assert "HARBOR GATE" in coarse[1].text  # the big sign is seen...
    assert all("4821" not in n.text for n in coarse)  # ... the small plate is not


def test_backtracking_finds_the_plate_and_a_second_ask_reuses_memory(ingested):
    first = asyncio.run(ask(ingested, PLATE_Q, PLATES))
    assert first.option_index == 1 and first.answer == "KX-4821" and first.confident, first.reason
    assert first.iterations >= 1 and first.caption_calls > 0
    assert any(e.start < 80 and e.end > 70 for e in first.evidence)
    # the search went into the needle's coarse span
    assert any(s.agent == "caption" and s.start == 60 for s in first.trace)

    second = asyncio.run(ask(ingested, PLATE_Q, PLATES))
    assert second.answer == "KX-4821" and second.confident
    assert second.caption_calls == 0 and second.llm_calls < first.llm_calls

    memory = SQLiteMemoryStore.for_data(ingested)
    history = memory.questions("cam")
    assert [h["id"] for h in history[:2]] == [second.question_id, first.question_id]
    assert history[1]["answer"]["caption_calls"] == first.caption_calls


def test_count_detail_and_open_question(ingested):
    count = asyncio.run(ask(ingested, COUNT_Q, ["2", "3", "4", "5"]))
    assert count.answer == "3" and count.confident, count.reason
    open_ = asyncio.run(ask(ingested, "What did the van plate at the HARBOR GATE read?"))
    assert "KX-4821" in open_.answer.replace("KX4821", "KX-4821")
    assert open_.option_index is None

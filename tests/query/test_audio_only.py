"""A file of sound alone, as a user runs it: `lucy ingest speech.m4a` stores no frames but the audio, the builder
spans it by its audio (a one-line "no video" coarse node per span, no captioner call) and transcribes it, and
`lucy ask` answers from the transcript over the audio's whole length."""

from __future__ import annotations

import json

import pytest

from lucy.config import load_settings
from lucy.ingest.frames import StreamInfo
from lucy.memory.transcribers import SPEECH_LEVEL, parse_transcript
from lucy.synth import Speech, speech_track, write_audio
from lucy.synth.speech import espeak_available
from lucy.wiring import open_memory

ANNOUNCEMENT = Speech(70.0, "Flight 714 now boarding at gate B 12", voice="en")
DURATION = 100.0


@pytest.mark.skipif(not espeak_available(), reason="espeak-ng is not installed (Debian: espeak-ng)")
def test_an_audio_file_is_transcribed_and_answered(tmp_path, run_lucy):
    audio = write_audio(tmp_path / "speech.m4a", speech_track([ANNOUNCEMENT], DURATION, noise=0.002))
    data = tmp_path / "data"
    done = run_lucy("ingest", str(audio), "--stream", "radio", "--data", str(data), "--json", timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["frames"] == 0 and summary["complete"] and summary["coarse_pending"] == 0
    assert summary["coarse_nodes"] == 2 and abs(summary["captioned_until"] - DURATION) < 0.1

    memory = open_memory(load_settings(data=data))
    try:
        coarse = memory.nodes("radio", level="coarse", origin="ingest")
        speech = memory.nodes("radio", level=SPEECH_LEVEL, origin="ingest")
    finally:
        memory.close()
    assert [(n.start, round(n.end)) for n in coarse] == [(0.0, 60), (60.0, 100)]
    assert all("sound only" in n.text and n.model == "" for n in coarse)  # no captioner was asked
    assert [(n.start, round(n.end)) for n in speech] == [(0.0, 60), (60.0, 100)]
    lines = [line for node in speech for line in parse_transcript(node.text)]
    assert len(lines) == 1 and "714" in lines[0].text and abs(lines[0].start - ANNOUNCEMENT.start) < 1.0

    asked = run_lucy("ask", "Which gate did the announcement name?", "--option", "A 3", "--option", "B 12",
                     "--option", "C 7", "--option", "D 1", "--stream", "radio", "--data", str(data), "--json")
    assert asked.returncode == 0, asked.stderr
    result = json.loads(asked.stdout)
    assert result["answer"] == "B 12" and result["confident"] and result["caption_calls"] == 0
    assert abs(result["horizon"] - DURATION) < 0.1
    evidence = result["evidence"][0]
    assert evidence["start"] <= ANNOUNCEMENT.start < evidence["end"]


def _info(**kw) -> StreamInfo:
    base = {"name": "s", "source": "x", "live": True, "frames": 0, "first_time": None, "last_time": None,
            "stored_fps": 4.0, "width": 0, "height": 0, "codec": "", "wall_start": None, "complete": False,
            "lost": None}
    return StreamInfo(**{**base, **kw})


def test_audio_spans_only_a_stream_without_frames():
    # Sound alone: its committed audio is what memory can cover.
    assert _info(audio=True, audio_until=42.5).covered_seconds == 42.5
    # With frames, audio running ahead (live) changes nothing: spans close by the pictures, as before.
    with_video = _info(frames=40, first_time=0.0, last_time=9.75, audio=True, audio_until=30.0)
    assert with_video.covered_seconds == with_video.media_seconds == 10.0
    assert _info().covered_seconds == 0.0

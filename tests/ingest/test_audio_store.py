"""Audio in the Zarr frame store: blocks with media times, committed like frames, gaps, readers in another
object (as another process would be)."""

from __future__ import annotations

import numpy as np
import pytest

from lucy.config import load_settings
from lucy.ingest import AUDIO_RATE, AudioClip, FrameStores
from lucy.wiring import open_frames

SR = AUDIO_RATE


@pytest.fixture
def frames(tmp_path) -> FrameStores:
    return open_frames(load_settings(data=tmp_path / "data"))


def tone(seconds: float, freq: float = 440.0, amp: float = 0.5) -> np.ndarray:
    n = round(seconds * SR)
    return (amp * np.sin(2 * np.pi * freq * np.arange(n) / SR)).astype(np.float32)


def create(frames: FrameStores, *, audio: bool = True, width: int = 48, height: int = 32):
    return frames.create("cam", source="/v.mp4", live=False, width=width, height=height, stored_fps=2.0,
                         codec="zstd", quality=90, audio=audio)


def test_clip_shape_and_times():
    clip = AudioClip(np.zeros(8000, dtype=np.float32), SR, 2.0)
    assert len(clip) == 8000 and clip.end == 2.5 and clip.seconds == 0.5
    empty = AudioClip.empty(3.0)
    assert len(empty) == 0 and empty.start == empty.end == 3.0 and empty.samples.dtype == np.float32


def test_stream_without_audio_reads_empty(frames):
    writer = create(frames, audio=False)
    writer.append(np.zeros((2, 32, 48, 3), np.uint8), np.array([0.0, 0.5]))
    reader = frames.open("cam")
    assert not reader.has_audio() and reader.audio_until() == 0.0
    clip = reader.read_audio(0.0, 10.0)
    assert len(clip) == 0 and clip.sample_rate == SR
    assert not reader.info().audio and reader.info().audio_until == 0.0


def test_audio_is_stored_with_media_times_and_read_back(frames):
    writer = create(frames)
    reader = frames.open("cam")
    assert reader.has_audio() and reader.audio_until() == 0.0 and len(reader.read_audio(0, 5)) == 0
    sound = tone(2.3)
    # Small appends, as ingest commits them: they fill the blocks (one second each) in turn.
    for i in range(0, len(sound), 3000):
        writer.append_audio(sound[i:i + 3000], i / SR)
        assert reader.audio_until() == pytest.approx(min(i + 3000, len(sound)) / SR)
    clip = reader.read_audio(0.0, 100.0)
    assert clip.start == 0.0 and len(clip) == len(sound) and clip.end == pytest.approx(2.3)
    assert np.abs(clip.samples - sound).max() < 1e-4  # int16 storage
    # A sub-span starts on the sample grid: at the first sample at or after its start.
    part = reader.read_audio(1.00003, 2.0)
    assert part.start == pytest.approx(1.0 + 1 / SR) and part.end == pytest.approx(2.0)
    assert np.abs(part.samples - sound[SR + 1:2 * SR]).max() < 1e-4
    assert len(reader.read_audio(5.0, 6.0)) == 0 and len(reader.read_audio(1.0, 1.0)) == 0
    assert reader.info().audio_until == pytest.approx(2.3)
    assert reader.audio_seconds() == pytest.approx(2.3)


def test_an_outage_is_a_gap_read_as_silence(frames):
    writer = create(frames)
    writer.append_audio(tone(1.5), 0.0)
    writer.append_audio(tone(1.0, freq=880), 4.0)  # nothing heard from 1.5 s to 4 s
    reader = frames.open("cam")
    assert reader.audio_until() == pytest.approx(5.0)
    clip = reader.read_audio(0.0, 10.0)
    assert clip.start == 0.0 and clip.end == pytest.approx(5.0)
    s = clip.samples
    assert np.abs(s[:int(1.5 * SR)]).max() > 0.4
    assert np.abs(s[int(1.5 * SR):4 * SR]).max() == 0.0
    assert np.abs(s[4 * SR:] - tone(1.0, freq=880)).max() < 1e-4
    inside = reader.read_audio(2.0, 3.0)  # entirely inside the outage
    assert len(inside) == 0
    after = reader.read_audio(2.0, 4.5)  # starts in the outage: the clip begins where sound is back
    assert after.start == pytest.approx(4.0) and len(after) == SR // 2
    assert reader.audio_seconds() == pytest.approx(2.5)


def test_audio_cannot_go_back_in_time(frames):
    writer = create(frames)
    writer.append_audio(tone(1.0), 0.0)
    with pytest.raises(ValueError, match="before the stored audio"):
        writer.append_audio(tone(0.5), 0.5)


def test_readers_see_only_committed_audio_and_a_reopened_writer_continues(frames):
    writer = create(frames)
    writer.append_audio(tone(1.25), 0.0)
    reader = frames.open("cam")
    assert reader.audio_until() == pytest.approx(1.25)
    del writer
    again = frames.open_writer("cam")  # a resumed ingest
    assert again.audio_until() == pytest.approx(1.25)
    again.append_audio(tone(1.0, freq=880), 1.25)  # contiguous: fills the partial block
    clip = reader.read_audio(0.0, 10.0)
    assert clip.end == pytest.approx(2.25) and len(clip) == round(2.25 * SR)
    assert np.abs(clip.samples[round(1.25 * SR):] - tone(1.0, freq=880)).max() < 1e-4


def test_a_store_made_without_audio_gets_it_on_first_append(frames):
    writer = create(frames, audio=False)  # e.g. a stream created before Lucy stored audio
    assert not writer.has_audio()
    writer.append_audio(tone(0.5), 3.0)
    reader = frames.open("cam")
    assert reader.has_audio() and reader.read_audio(0, 9).start == pytest.approx(3.0)


def test_a_store_without_pictures_holds_audio(frames):
    writer = create(frames, width=0, height=0)
    writer.append_audio(tone(2.0), 0.0)
    reader = frames.open("cam")
    info = reader.info()
    assert info.frames == 0 and info.width == info.height == 0 and info.audio_until == pytest.approx(2.0)
    assert len(reader.read(0.0, 10.0)) == 0 and reader.committed() == 0
    assert len(reader.read_audio(0.0, 10.0)) == 2 * SR

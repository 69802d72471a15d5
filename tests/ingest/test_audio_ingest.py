"""Ingesting sound with the pictures: speech made by espeak-ng and muxed into generated videos (and files of
sound alone) lands in the frame store at the media times it was said, survives a resume and a kill, and a track
that stops early or is missing changes nothing else."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from lucy.config import load_settings
from lucy.ingest import AUDIO_RATE, AudioClip, Ingestor, ZarrFrameStore
from lucy.synth import Speech, speech_track, spoken_spans, write_audio, write_video
from lucy.synth.speech import espeak_available
from lucy.wiring import open_frames

pytestmark = pytest.mark.skipif(not espeak_available(), reason="espeak-ng is not installed (Debian: espeak-ng)")

WINDOW = 0.05  # seconds per energy window
SPEECH = [Speech(2.0, "The train to Boston leaves from gate seven."),
          Speech(9.0, "Please keep your bags with you at all times.")]
LONG_SPEECH = [Speech(3.0, "Good morning, this is the first announcement."),
               Speech(12.5, "The museum closes at five o'clock today."),
               Speech(22.0, "Lost property is next to the ticket office.")]


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("talk")
    short = speech_track([Speech(1.0, "Stand clear of the doors.")], 5.0)
    return {
        "talk": write_video(d / "talk.mp4", duration=14, fps=25, width=320, height=240,
                            audio=speech_track(SPEECH, 14)),
        "long": write_video(d / "long.mkv", duration=30, fps=25, width=320, height=240,
                            audio=speech_track(LONG_SPEECH, 30)),
        "short_audio": write_video(d / "short_audio.mp4", duration=12, fps=25, width=320, height=240, audio=short),
        "silent": write_video(d / "silent.mp4", duration=6, fps=25, width=320, height=240),
        "m4a": write_audio(d / "talk.m4a", speech_track(SPEECH, 14)),
        "wav": write_audio(d / "talk.wav", speech_track(SPEECH, 14, rate=22_050), rate=22_050),
    }


def ingest(settings, source: Path, stream: str = "s", **kwargs):
    kwargs.setdefault("frames", open_frames(settings))
    return Ingestor(settings, str(source), stream, **kwargs).run()


def envelope(clip: AudioClip) -> tuple[np.ndarray, np.ndarray]:
    """(window start times, RMS per window) of a clip."""
    n = round(WINDOW * clip.sample_rate)
    k = len(clip) // n
    rms = np.sqrt(np.mean(clip.samples[:k * n].reshape(k, n) ** 2, axis=1))
    return clip.start + np.arange(k) * WINDOW, rms


def assert_speech_where_it_was_put(clip: AudioClip, lines: list[Speech], duration: float) -> None:
    """Speech energy inside each spoken line (starting when it started), silence everywhere else."""
    times, rms = envelope(clip)
    spans = spoken_spans(lines, duration)
    margin = 0.15
    outside = np.ones(len(times), dtype=bool)
    for start, end in spans:
        outside &= ~((times + WINDOW > start - margin) & (times < end + margin))
        inside = (times >= start) & (times + WINDOW <= end)
        voiced = rms[inside] > 0.01
        assert voiced.mean() > 0.5, f"little speech heard in {start:.1f}-{end:.1f} s"
        onset = times[(times + WINDOW > start - margin) & (rms > 0.01)][0]
        assert abs(onset - start) < 0.15, f"speech of {start:.1f} s heard from {onset:.2f} s"
    assert outside.sum() > 10 and rms[outside].max() < 1e-3, "sound where nothing was said"


def test_speech_is_stored_at_the_media_times_it_was_said(settings, media):
    result = ingest(settings, media["talk"])
    assert result.complete and result.lost is None and result.frames == 28
    store = ZarrFrameStore.open(settings.data, "s")
    info = store.info()
    assert store.has_audio() and info.audio and info.frames == 28
    assert 13.9 < store.audio_until() < 14.1 and result.audio_seconds == pytest.approx(store.audio_until(), abs=1e-3)
    clip = store.read_audio(0.0, 100.0)
    assert clip.sample_rate == AUDIO_RATE == 16_000 and clip.samples.dtype == np.float32
    assert clip.start == pytest.approx(0.0, abs=0.03) and clip.end == pytest.approx(store.audio_until())
    assert np.abs(clip.samples).max() <= 1.0
    assert_speech_where_it_was_put(clip, SPEECH, 14.0)
    # A span's clip is the same sound, at the same times.
    part = store.read_audio(8.5, 12.0)
    assert part.start == pytest.approx(8.5, abs=1 / AUDIO_RATE) and part.end == pytest.approx(12.0, abs=1e-6)
    at = round((part.start - clip.start) * AUDIO_RATE)
    np.testing.assert_array_equal(part.samples, clip.samples[at:at + len(part)])


def test_progress_counts_stored_sound(settings, media):
    ingestor = Ingestor(settings, str(media["talk"]), "s", frames=open_frames(settings))
    ingestor.run()
    progress = ingestor.stats.snapshot()
    assert progress.audio_seconds == pytest.approx(progress.audio_until, abs=1e-3) and progress.audio_until > 13.9


def test_resume_continues_the_sound_without_overlap(settings, media, tmp_path):
    reference = load_settings(data=tmp_path / "reference")
    ingest(reference, media["long"])
    expected = ZarrFrameStore.open(reference.data, "s").read_audio(0.0, 100.0)

    ingestor = Ingestor(settings, str(media["long"]), "s", frames=open_frames(settings))
    ingestor.on_commit = lambda store, stats: stats.audio_until >= 10.0 and ingestor.stop()
    first = ingestor.run()
    stopped_at = ZarrFrameStore.open(settings.data, "s").audio_until()
    assert not first.complete and 10.0 <= stopped_at < 25.0
    second = ingest(settings, media["long"])
    assert second.complete
    store = ZarrFrameStore.open(settings.data, "s")
    clip = store.read_audio(0.0, 100.0)
    # Every sample once: the sound covers its time without a hole (what is stored is as long as the time it
    # spans) and without overlap (the store refuses sound that goes back in time).
    assert abs(len(clip) - len(expected)) <= 2
    assert store.audio_seconds() == pytest.approx(store.audio_until() - clip.start, abs=2 / AUDIO_RATE)
    assert_speech_where_it_was_put(clip, LONG_SPEECH, 30.0)
    # The same sound as one uninterrupted run, at the same times. (Not the same samples: the resampler starts
    # again where decoding did, on a grid up to a sample apart from the first run's.)
    n = min(len(clip), len(expected))
    np.testing.assert_array_equal(clip.samples[:round(stopped_at * AUDIO_RATE) - 1],
                                  expected.samples[:round(stopped_at * AUDIO_RATE) - 1])
    assert np.corrcoef(clip.samples[:n], expected.samples[:n])[0, 1] > 0.99
    np.testing.assert_allclose(envelope(clip)[1][:n // 800], envelope(expected)[1][:n // 800], atol=0.01)
    third = ingest(settings, media["long"])  # nothing left: a no-op
    assert third.new_frames == 0 and ZarrFrameStore.open(settings.data, "s").audio_until() == store.audio_until()


def test_kill_9_keeps_committed_sound_and_resume_completes_it(tmp_path, media, run_lucy):
    data = tmp_path / "data"
    proc = subprocess.Popen([sys.executable, "-m", "lucy", "ingest", str(media["long"]), "--stream", "k",
                             "--data", str(data), "--realtime", "--captioner", "none"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if (data / "frames.zarr" / "k" / "zarr.json").exists() and \
                    ZarrFrameStore.open(data, "k").audio_until() >= 4.0:
                break
            time.sleep(0.1)
        else:
            pytest.fail("ingest committed no sound")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    store = ZarrFrameStore.open(data, "k")
    killed_at = store.audio_until()
    clip = store.read_audio(0.0, 100.0)
    assert clip.end == pytest.approx(killed_at) and np.all(np.isfinite(clip.samples))
    done = run_lucy("ingest", str(media["long"]), "--stream", "k", "--data", str(data), "--json",
                    "--captioner", "none")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["complete"]
    store = ZarrFrameStore.open(data, "k")
    assert store.audio_until() > 29.9 and killed_at < 25
    assert store.audio_seconds() == pytest.approx(store.audio_until(), abs=0.03)
    assert_speech_where_it_was_put(store.read_audio(0.0, 100.0), LONG_SPEECH, 30.0)


def test_a_file_without_sound_is_ingested_as_before(settings, media):
    result = ingest(settings, media["silent"])
    assert result.complete and result.frames == 12 and result.audio_seconds == 0.0
    store = ZarrFrameStore.open(settings.data, "s")
    assert not store.has_audio() and store.audio_until() == 0.0 and len(store.read_audio(0.0, 10.0)) == 0
    assert not (store.path / "audio").exists()  # no audio arrays at all


def test_audio_can_be_turned_off(tmp_path, media):
    settings = load_settings(data=tmp_path / "data", **{"ingest.audio": False})
    result = ingest(settings, media["talk"])
    assert result.frames == 28 and not ZarrFrameStore.open(settings.data, "s").has_audio()


@pytest.mark.parametrize("kind", ["m4a", "wav"])
def test_a_file_of_sound_alone_is_ingested(settings, media, kind):
    result = ingest(settings, media[kind])
    assert result.complete and result.lost is None and result.frames == 0
    store = ZarrFrameStore.open(settings.data, "s")
    info = store.info()
    # No pictures: no frames, and a picture size of 0 x 0; the sound is all there, on the same media clock.
    assert info.frames == 0 and (info.width, info.height) == (0, 0) and info.last_time is None
    assert info.media_seconds == 0.0 and info.audio and 13.9 < info.audio_until < 14.1
    assert len(store.read(0.0, 100.0)) == 0
    assert_speech_where_it_was_put(store.read_audio(0.0, 100.0), SPEECH, 14.0)
    again = ingest(settings, media[kind])  # resuming a finished file of sound alone does nothing
    assert again.complete and ZarrFrameStore.open(settings.data, "s").audio_until() == info.audio_until


def test_sound_that_stops_before_the_pictures_is_no_error(settings, media):
    # The microphone track ends at 5 s, the pictures at 12 s: the rest of the stream is simply without sound.
    result = ingest(settings, media["short_audio"])
    assert result.complete and result.lost is None and result.frames == 24
    store = ZarrFrameStore.open(settings.data, "s")
    assert 4.9 < store.audio_until() < 5.2
    assert_speech_where_it_was_put(store.read_audio(0.0, 5.0), [Speech(1.0, "Stand clear of the doors.")], 5.0)
    late = store.read_audio(6.0, 12.0)
    assert len(late) == 0
    # A resume of such a file starts after the pictures (the sound ended long before them), adding nothing.
    again = ingest(settings, media["short_audio"])
    assert again.new_frames == 0 and ZarrFrameStore.open(settings.data, "s").audio_until() == store.audio_until()


def test_sound_buffer_drops_what_was_heard_already():
    from lucy.ingest.pipeline import _SoundBuffer
    from lucy.ingest.source import AudioChunk

    buffer = _SoundBuffer(stored_until=1.0)  # a resumed stream: sound up to 1 s is stored
    buffer.add(AudioChunk(0.5, np.ones(16_000, np.float32)))  # decoded again from 0.5 s: half is old
    buffer.add(AudioChunk(1.5 + 0.4 / AUDIO_RATE, np.ones(800, np.float32)))  # jitter under a sample: contiguous
    buffer.add(AudioChunk(1.52, np.ones(160, np.float32)))  # a rewind repeats sound: dropped entirely
    buffer.add(AudioChunk(3.0, np.ones(1600, np.float32)))  # a hole of 1.45 s: a new stretch
    stretches = buffer.take()
    assert [(round(start, 6), len(samples)) for start, samples in stretches] == [(1.0, 8800), (3.0, 1600)]
    assert buffer.samples == 0 and buffer.end == pytest.approx(3.1)

    waiting = _SoundBuffer(stored_until=None)  # sound before a first picture is kept, the newest only
    waiting.add(AudioChunk(0.0, np.ones(16_000, np.float32)))
    waiting.add(AudioChunk(2.0, np.ones(16_000, np.float32)))
    waiting.keep_newest(1.5)
    assert [(round(start, 6), len(samples)) for start, samples in waiting.take()] == [(0.5, 8000), (2.0, 16_000)]

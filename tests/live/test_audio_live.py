"""Sound from live sources: RTSP with an audio track (GStreamer's test server), an RTSP outage, a recording's
speech served over RTSP, and HLS (VOD and live) with sound. Pictures and sound share one media clock."""

from __future__ import annotations

import functools
import shutil
import subprocess
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from lucy.ingest import AUDIO_RATE, AudioClip, Ingestor, ZarrFrameStore
from lucy.synth import Speech, speech_track, spoken_spans, write_video
from lucy.synth.speech import espeak_available
from lucy.wiring import open_frames

SPEECH = [Speech(2.0, "The train to Boston leaves from gate seven."),
          Speech(8.0, "Please keep your bags with you at all times.")]


def peak_hz(clip: AudioClip) -> float:
    spectrum = np.abs(np.fft.rfft(clip.samples * np.hanning(len(clip))))
    return float(np.argmax(spectrum) * clip.sample_rate / len(clip))


def voiced(clip: AudioClip, window: float = 0.05, level: float = 0.01) -> np.ndarray:
    """Media times of the windows of ``clip`` that hold sound above ``level`` (RMS)."""
    n = round(window * clip.sample_rate)
    k = len(clip) // n
    rms = np.sqrt(np.mean(clip.samples[:k * n].reshape(k, n) ** 2, axis=1))
    return clip.start + np.flatnonzero(rms > level) * window


def run_for(live, settings, url: str, stream: str, seconds: float) -> object:
    """Ingest ``url`` for about ``seconds`` after its first commit, then stop."""
    ingestor = Ingestor(settings, url, stream, frames=open_frames(settings))
    run = live.background(ingestor.run, "ingest")
    live.wait_for(lambda: ingestor.stats.committed >= 1, 60, "the first frames")
    time.sleep(seconds)
    ingestor.stop()
    return run.result(timeout=30)


@pytest.mark.parametrize("codec", ["aac", "pcmu"])
def test_rtsp_sound_is_stored_on_the_pictures_clock(tmp_path, rtsp_server_factory, live, codec):
    server = rtsp_server_factory(audio="tone", audio_codec=codec)
    settings = live.settings(tmp_path / "data")
    result = run_for(live, settings, server.url(), "cam", 4.0)
    store = ZarrFrameStore.open(settings.data, "cam")
    info = store.info()
    assert info.live and info.audio and info.frames >= 6 and result.audio_seconds > 3.0
    clip = store.read_audio(0.0, 1e9)
    # The server's 440 Hz tone, heard all along (no holes), on the pictures' clock: sound starts with the
    # first frame and is committed up to about the last one.
    assert abs(peak_hz(clip) - 440.0) < 5.0
    assert store.audio_seconds() == pytest.approx(clip.end - clip.start, abs=0.01)
    assert abs(clip.start - info.first_time) < 0.5 and abs(store.audio_until() - info.last_time) < 1.0
    assert len(voiced(clip)) >= 0.9 * (len(clip) / AUDIO_RATE) / 0.05


def test_rtsp_outage_is_a_gap_in_the_sound_too(tmp_path, rtsp_server_factory, live):
    server = rtsp_server_factory(audio="tone")
    settings = live.settings(tmp_path / "data")
    ingestor = Ingestor(settings, server.url(), "cam", frames=open_frames(settings))
    run = live.background(ingestor.run, "ingest")
    live.wait_for(lambda: ingestor.stats.audio_until >= 2.0, 60, "2 s of sound before the outage")
    server.stop()
    time.sleep(3.0)
    server.start()
    live.wait_for(lambda: ingestor.stats.reconnects >= 1, 60, "the ingestor to reconnect")
    back = ingestor.stats.audio_until
    live.wait_for(lambda: ingestor.stats.audio_until >= back + 2.0, 60, "sound after the reconnect")
    ingestor.stop()
    run.result(timeout=30)

    store = ZarrFrameStore.open(settings.data, "cam")
    info = store.info()
    assert len(info.gaps) == 1, info.gaps
    gap = info.gaps[0]
    clip = store.read_audio(0.0, 1e9)
    heard = voiced(clip)
    # Sound before and after the outage; none inside it (the clip reads the hole as silence).
    assert heard.min() < gap.start and heard.max() > gap.end
    inside = heard[(heard > gap.start + 0.5) & (heard < gap.end - 0.5)]
    assert len(inside) == 0, inside
    assert store.audio_seconds() < (clip.end - clip.start) - (gap.end - gap.start) + 1.0
    assert len(store.read_audio(gap.start + 0.5, gap.end - 0.5)) == 0


@pytest.mark.skipif(not espeak_available(), reason="espeak-ng is not installed (Debian: espeak-ng)")
def test_speech_served_over_rtsp_keeps_its_timing(tmp_path, rtsp_server_factory, live):
    video = write_video(tmp_path / "talk.mp4", duration=12, fps=15, width=320, height=240, gop=15,
                        audio=speech_track(SPEECH, 12))
    server = rtsp_server_factory(file=video, audio="file")
    settings = live.settings(tmp_path / "data")
    ingestor = Ingestor(settings, server.url(), "cam", frames=open_frames(settings))
    run = live.background(ingestor.run, "ingest")
    live.wait_for(lambda: ingestor.stats.audio_until >= ingestor.stats.media_start + 11.0
                  if ingestor.stats.media_start is not None else False, 60, "the whole recording")
    ingestor.stop()
    run.result(timeout=30)

    store = ZarrFrameStore.open(settings.data, "cam")
    info = store.info()
    origin = info.first_time  # the recording's first picture: its time 0
    heard = voiced(store.read_audio(0.0, 1e9))
    for start, end in spoken_spans(SPEECH, 12):
        during = heard[(heard >= origin + start - 0.5) & (heard <= origin + end + 0.5)]
        assert len(during) and abs(during[0] - (origin + start)) < 0.3, (start, during[:3] - origin)
    quiet = heard[(heard > origin + spoken_spans(SPEECH)[0][1] + 0.3) & (heard < origin + SPEECH[1].start - 0.3)]
    assert len(quiet) == 0


@pytest.fixture
def http_dir(tmp_path):
    folder = tmp_path / "www"
    folder.mkdir()
    handler = type("Quiet", (SimpleHTTPRequestHandler,), {"log_message": lambda *a: None})
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


needs_ffmpeg = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs the ffmpeg command")


def _ffmpeg(*args: str) -> None:
    proc = subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", *args], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr


@needs_ffmpeg
@pytest.mark.skipif(not espeak_available(), reason="espeak-ng is not installed (Debian: espeak-ng)")
def test_hls_vod_with_speech(tmp_path, http_dir, live):
    folder, base = http_dir
    video = write_video(tmp_path / "talk.mp4", duration=12, fps=15, width=320, height=240, gop=15,
                        audio=speech_track(SPEECH, 12))
    _ffmpeg("-i", str(video), "-c", "copy", "-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod",
            "-hls_segment_filename", str(folder / "seg%03d.ts"), str(folder / "index.m3u8"))
    settings = live.settings(tmp_path / "data")
    result = Ingestor(settings, f"{base}/index.m3u8", "vod", frames=open_frames(settings)).run()
    assert result.complete and result.frames == 24
    store = ZarrFrameStore.open(settings.data, "vod")
    assert 11.9 < store.audio_until() < 12.2
    heard = voiced(store.read_audio(0.0, 100.0))
    for start, end in spoken_spans(SPEECH, 12):
        during = heard[(heard >= start - 0.5) & (heard <= end + 0.5)]
        assert len(during) and abs(during[0] - start) < 0.15, (start, during[:3])
    assert len(heard[(heard < SPEECH[0].start - 0.2)]) == 0


@needs_ffmpeg
def test_live_hls_with_sound(tmp_path, http_dir, live):
    folder, base = http_dir
    encoder = subprocess.Popen(
        ["ffmpeg", "-hide_banner", "-loglevel", "error", "-re", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=15",
         "-f", "lavfi", "-i", "sine=frequency=660:sample_rate=48000", "-t", "10", "-c:v", "libx264",
         "-preset", "ultrafast", "-tune", "zerolatency", "-g", "15", "-c:a", "aac", "-ac", "1", "-f", "hls",
         "-hls_time", "1", "-hls_list_size", "0", "-hls_segment_filename", str(folder / "live%03d.ts"),
         str(folder / "index.m3u8")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        playlist = folder / "index.m3u8"
        live.wait_for(lambda: playlist.is_file() and playlist.read_text().count("#EXTINF") >= 3, 60,
                      "the live playlist")
        settings = live.settings(tmp_path / "data")
        result = live.background(Ingestor(settings, f"{base}/index.m3u8", "hls",
                                          frames=open_frames(settings)).run, "ingest").result(90)
        assert encoder.wait(timeout=60) == 0
    finally:
        encoder.kill()
        encoder.wait()
    assert result.complete and result.audio_seconds > 4.0
    store = ZarrFrameStore.open(settings.data, "hls")
    info = store.info()
    clip = store.read_audio(0.0, 1e9)
    assert info.live and abs(peak_hz(clip) - 660.0) < 5.0
    assert abs(clip.start - info.first_time) < 0.5 and abs(store.audio_until() - info.last_time) < 1.0

"""Recording a real RTSP stream (GStreamer's server): segments re-muxed as ingest goes, a new one after a reconnect,
a clip cut across them, and ``kill -9`` of ``lucy ingest --record`` in the middle of a segment."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import av
import pytest

from lucy.config.settings import RecordingSettings
from lucy.ingest import Ingestor
from lucy.ingest.clips import make_clip
from lucy.ingest.segments import list_segments, recordings_dir
from lucy.wiring import open_frames

FPS = 15  # the RTSP server's test pattern, a keyframe every 15 frames
AUDIO_LEAD = 0.5  # most seconds the sound of a connection may run ahead of its pictures on a loaded machine


def ffprobe(path) -> dict:
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration:stream=codec_name", "-of",
                          "json", str(path)], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def ffprobe_seconds(path) -> float:
    return float(ffprobe(path)["format"]["duration"])


def pictures(path) -> int:
    """Pictures that decode (a damaged file raises)."""
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def test_rtsp_stream_is_recorded_in_segments_across_a_reconnect(tmp_path, rtsp_server_factory, live):
    rtsp_server = rtsp_server_factory(audio="tone")  # a camera with a microphone (AAC)
    settings = live.settings(tmp_path / "data").model_copy(
        update={"recording": RecordingSettings(enabled=True, segment_seconds=2.0)})
    ingestor = Ingestor(settings, rtsp_server.url(), "cam", frames=open_frames(settings))
    run = live.background(ingestor.run, "ingest")
    live.wait_for(lambda: len(list_segments(settings.data, "cam")) >= 2, 60, "two closed segments")
    rtsp_server.stop()  # the camera drops: the segment being written closes
    live.wait_for(lambda: ingestor.stats.down, 30, "the drop to be seen")
    rtsp_server.start()
    before = len(list_segments(settings.data, "cam"))
    live.wait_for(lambda: len(list_segments(settings.data, "cam")) >= before + 2, 60, "segments after the reconnect")
    ingestor.stop()
    run.result(timeout=30)

    segments = list_segments(settings.data, "cam", include_open=True)
    assert all(not s.open for s in segments), "a stopped ingest leaves no .part"
    [gap] = open_frames(settings).open("cam").info().gaps
    joins = [(a, b) for a, b in zip(segments, segments[1:], strict=False)]
    # gap.start is the last picture's time before the drop, gap.end the first one's after it
    across = [(a, b) for a, b in joins if a.end <= gap.start + 1.5 / FPS and b.start >= gap.end - 0.01]
    assert len(across) == 1, (segments, gap)  # the reconnect started a new segment
    for a, b in joins:
        if (a, b) not in across:
            assert abs(b.start - a.end) <= 1.0 / FPS + 0.02, (a, b)  # no gap beyond a frame inside a connection
    assert ingestor.recording is not None and ingestor.recording.stats.errors == 0
    for segment in segments:
        length = segment.end - segment.start
        probed = ffprobe(segment.path)
        # the sound of a connection can run ahead of its pictures (RTP tracks arrive apart): a file may hold some
        # past its last picture
        assert float(probed["format"]["duration"]) == pytest.approx(length, abs=3.0 / FPS + AUDIO_LEAD)
        assert [s["codec_name"] for s in probed["streams"]] == ["h264", "aac"]  # the sound is kept
        assert pictures(segment.path) == pytest.approx(length * FPS, abs=2)
        assert length >= 2.0 - 1.0 / FPS or segment in (across[0][0], segments[-1])  # cut at segment_seconds

    # A clip across the first join: remuxed from the recording, about as long as asked.
    first, second = segments[0], segments[1]
    start, end = first.start + 0.5, second.start + 1.5
    made = make_clip(open_frames(settings), settings.data, "cam", start, end, tmp_path / "clip.mp4",
                     max_seconds=60)
    assert made.origin == "recording"
    seconds = ffprobe_seconds(made.path)
    assert end - start - 0.1 <= seconds <= end - start + 1.0 + 0.1  # plus at most a GOP before start
    assert pictures(made.path) == pytest.approx(seconds * FPS, abs=2)


def test_kill_9_mid_segment_leaves_every_earlier_segment_playable(tmp_path, rtsp_server, live):
    data = tmp_path / "data"
    env = live.lucy_env(LUCY_RECORDING__SEGMENT_SECONDS="2")
    args = ["ingest", rtsp_server.url(), "--stream", "cam", "--data", str(data), "--record"]
    proc = live.lucy(args, tmp_path / "run1", env)
    folder = recordings_dir(data, "cam")

    def writing():
        segments = list_segments(data, "cam", include_open=True)
        closed = [s for s in segments if not s.open]
        # kill it a moment into a segment, once two are closed
        return len(closed) >= 2 and segments[-1].open and segments[-1].size > 0 and segments
    live.wait_for(writing, 60, "a segment being written after two closed")
    time.sleep(1.3)  # into the segment's second fragment (one a second): the first one is whole on disk
    proc.send(signal.SIGKILL)
    assert proc.finish() == -signal.SIGKILL
    left = list_segments(data, "cam", include_open=True)
    assert left[-1].open
    for segment in left[:-1]:
        assert ffprobe_seconds(segment.path) == pytest.approx(segment.end - segment.start, abs=3.0 / FPS)
        assert pictures(segment.path) == pytest.approx((segment.end - segment.start) * FPS, abs=2)

    # The next run repairs the .part left behind before it records.
    again = live.lucy(args, tmp_path / "run2", env)
    live.wait_for(lambda: not any(p.name.endswith(".part") and p.name.startswith(f"{left[-1].start:012.3f}")
                                  for p in folder.iterdir()), 60, "the .part to be repaired")
    again.send(signal.SIGTERM)
    assert again.finish() == 0, again.stderr
    segments = list_segments(data, "cam", include_open=True)
    assert not any(s.open for s in segments)
    repaired = next(s for s in segments if s.start == left[-1].start)
    assert pictures(repaired.path) > 0 and "Traceback" not in again.stderr
    assert [s.start for s in segments[: len(left)]] == [s.start for s in left]  # nothing earlier was touched

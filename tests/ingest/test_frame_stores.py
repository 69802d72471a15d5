"""The frame-store catalogue (:class:`lucy.ingest.FrameStores`) and the writer side of :class:`FrameStore`, on the
Zarr backend: what ingest, retention, the API and the CLI use instead of looking at a backend's files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lucy.config import load_settings
from lucy.errors import StoreError
from lucy.ingest import FrameStores, Gap
from lucy.ingest.zarr_store import frames_root
from lucy.wiring import open_frames

SECRET_SOURCE = "rtsp://admin:pw-s3cret@10.0.0.9:554/cam?token=abc123"


@pytest.fixture
def frames(tmp_path) -> FrameStores:
    return open_frames(load_settings(data=tmp_path / "data"))


def frames_at(times: list[float]) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(times, dtype=np.float64)
    return np.full((len(t), 32, 48, 3), 7, dtype=np.uint8), t


def create(frames: FrameStores, name: str = "cam", source: str = SECRET_SOURCE, live: bool = True):
    return frames.create(name, source=source, live=live, width=48, height=32, stored_fps=2.0, codec="zstd",
                         quality=90)


def test_catalogue_lists_opens_and_deletes_streams(frames):
    assert frames.names() == [] and not frames.exists("cam")
    with pytest.raises(StoreError, match="no stream named"):
        frames.open("cam")
    writer = create(frames)
    create(frames, "yard", source="/videos/yard.mp4", live=False)
    assert frames.names() == ["cam", "yard"] and frames.exists("cam")
    assert writer.append(*frames_at([0.0, 0.5, 1.0])) == 3

    reader = frames.open("cam")
    created = reader.info().created
    assert reader.committed() == 3 and created is not None
    with pytest.raises(StoreError, match="already exists"):
        create(frames)

    assert frames.delete("cam") is True
    assert frames.names() == ["yard"] and not frames.exists("cam")
    assert frames.delete("cam") is False
    assert not [p for p in frames_root(frames.data).iterdir() if p.name.startswith(".")]  # nothing left aside
    again = create(frames)  # a stream of the same name can be made again, and it is a new one
    assert again.committed() == 0 and again.info().created != created


def test_catalogue_refuses_bad_names(frames):
    for bad in ("../escape", ".hidden", "a/b", ""):
        with pytest.raises(StoreError, match="bad stream name"):
            frames.exists(bad)
        with pytest.raises(StoreError, match="bad stream name"):
            create(frames, bad)


def test_names_of_the_stores_own_files_are_refused_and_never_deleted(frames):
    create(frames)
    root_meta = frames_root(frames.data) / "zarr.json"
    before = root_meta.read_bytes()
    for reserved in ("zarr.json", "ZARR.JSON"):
        with pytest.raises(StoreError, match="keeps a file of that name"):
            frames.exists(reserved)
        with pytest.raises(StoreError, match="keeps a file of that name"):
            frames.delete(reserved)
        with pytest.raises(StoreError, match="keeps a file of that name"):
            create(frames, reserved)
    # Below the name check too, a purge only ever moves a stream's folder: never the root group's metadata.
    assert frames.root.delete("zarr.json") is False  # type: ignore[attr-defined]
    assert root_meta.read_bytes() == before and frames.names() == ["cam"]


def test_streams_being_created_are_not_listed(frames):
    create(frames)
    half_made = frames_root(frames.data) / ".yard.creating"
    (half_made / "frames").mkdir(parents=True)
    (half_made / "zarr.json").write_text("{}")
    assert frames.names() == ["cam"]


def test_writer_side_is_on_the_interface(frames):
    writer = create(frames)
    writer.append(*frames_at([0.0, 0.5]))
    writer.set_wall_start(1_700_000_000.0)
    writer.set_wall_start(1_800_000_000.0)  # the first one wins
    writer.add_gap(Gap(1.0, 4.0, "reconnect"))
    writer.mark_finished(complete=False, lost="camera gone")

    resumed = frames.open_writer("cam")  # a later run appends after what is there
    assert resumed.append(*frames_at([4.0])) == 3
    info = frames.open("cam").info()
    assert (info.frames, info.wall_start, info.lost, info.complete) == (3, 1_700_000_000.0, "camera gone", False)
    assert info.gaps == [Gap(1.0, 4.0, "reconnect")]

    reader = frames.open("cam")
    with pytest.raises(StoreError, match="read-only"):
        reader.add_gap(Gap(5.0, 6.0))


def test_the_source_is_kept_redacted_and_recognised(frames):
    create(frames)
    store = frames.open("cam")
    assert store.holds_source(SECRET_SOURCE)
    assert store.holds_source(SECRET_SOURCE.replace("admin:pw-s3cret", "other:login"))  # same camera
    assert not store.holds_source("rtsp://10.0.0.9:554/other")
    assert "pw-s3cret" not in store.info().source
    held = (frames_root(frames.data) / "cam" / "zarr.json").read_text()
    assert "pw-s3cret" not in held and "abc123" not in held
    assert json.loads(held)["attributes"]["source_id"].startswith("pbkdf2")


def test_retention_side_is_on_the_interface(frames):
    writer = create(frames)
    writer.append(*frames_at([i * 0.5 for i in range(20)]))
    owner = frames.open("cam")
    before = owner.stored_bytes()
    assert before > 0
    freed = owner.thin_before(5.0, 1.0) + owner.drop_before(2.0)
    assert freed > 0 and owner.stored_bytes() == before - freed
    owner.save_accounting()
    reader = frames.open("cam")
    assert reader.available_from() == 2.0 and reader.info().thinned_before == 5.0
    assert reader.stored_bytes() == before - freed  # counted by the owner, read back here


def test_jpeg_keeps_colour_at_full_resolution_and_jpeg420_trades_it_for_bytes(frames):
    """Red strokes 2 px wide on blue: stored as jpeg (4:4:4) they read back red; jpeg420 halves colour resolution
    (the strokes blend towards purple) and stores fewer bytes."""
    frame = np.zeros((1, 32, 48, 3), np.uint8)
    frame[:] = (30, 60, 200)
    for x in range(4, 44, 6):
        frame[0, 4:28, x:x + 2] = (200, 30, 30)
    strokes = frame[0, :, :, 0] > 100
    red_left, stored = {}, {}
    for codec in ("jpeg", "jpeg420"):
        writer = frames.create(codec, source="x.mp4", live=False, width=48, height=32, stored_fps=2.0, codec=codec,
                               quality=90)
        writer.append(frame, np.zeros(1))
        back = frames.open(codec).read(0.0, 1.0).frames[0].astype(int)
        red_left[codec] = float(np.mean(back[strokes][:, 0] - back[strokes][:, 2]))  # red minus blue on strokes
        stored[codec] = frames.open(codec).stored_bytes()
    assert red_left["jpeg"] > 100 > red_left["jpeg420"], red_left
    assert stored["jpeg420"] < stored["jpeg"], stored

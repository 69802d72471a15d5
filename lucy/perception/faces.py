"""Whether a tracked person's face was seen: MediaPipe's BlazeFace (short range) on onnxruntime, in a head crop.

Why BlazeFace: OpenCV's Haar cascade took 150-250 ms a frame and missed faces; BlazeFace's short-range model
(Apache-2.0, Google) takes a few ms a call. It is shipped in the PyPI wheel ``mediapipe`` 0.10.21 as a TFLite file,
converted once to ONNX by scripts/models/build_blazeface.py and shipped in ``lucy/perception/models`` with its
licence, a NOTICE and its line of SHA256SUMS (checked before the file is opened, as the object detector's is). Lucy
depends on neither mediapipe (it pulls opencv-contrib-python, which clashes with opencv-python-headless) nor
TensorFlow at run time.

What the model wants and gives (MediaPipe's face_detection_short_range graph, checked against the TFLite
interpreter's outputs by the build script):
- in: 1 x 128 x 128 x 3, RGB, ``x / 127.5 - 1``; the picture is letterboxed (aspect ratio kept, black padding, as
  MediaPipe's ImageToTensorCalculator pads);
- out: ``classificators`` [1, 896, 1], one logit per anchor (sigmoid -> score), and ``regressors`` [1, 896, 16]:
  box centre x, y, width, height and 6 keypoints, in input pixels, relative to the anchor's centre;
- anchors (:func:`anchors`): SSD anchors of MediaPipe's front model, with a fixed size (1 x 1) so that only their
  centres matter: 4 layers at strides 8, 16, 16, 16, two anchors per layer and cell, the layers of one stride
  sharing their cells: 16 x 16 cells x 2 at stride 8 and 8 x 8 cells x 6 at stride 16, 512 + 384 = 896 outputs.
Boxes are pruned by non-maximum suppression (IoU 0.3, MediaPipe's).

The short-range model was trained on faces that fill a good part of its input (within ~2 m of a phone's camera), so
a face in a whole camera frame is far too small for it. :meth:`FaceDetector.in_head` therefore runs it on the head
region of a person's box (:func:`head_region`: the top of the box, square, padded), where a face is large whatever
the person's distance; a head region too small to hold a face the model can see is not looked at.

Thread-safe: onnxruntime's ``InferenceSession.run`` may be called from several threads at once, and everything else
here is per call.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from lucy.errors import ModelFileError
from lucy.perception.detect import MODELS, check_model_file
from lucy.perception.nanodet import open_session
from lucy.perception.objects import Box

BLAZEFACE_MODEL = MODELS / "blazeface-short-range.onnx"
SIDE = 128
STRIDES = (8, 16, 16, 16)  # SSD layers of the front model
ANCHORS_PER_LAYER = 2  # aspect ratio 1, plus the interpolated scale
NMS_IOU = 0.3  # MediaPipe's min_suppression_threshold for face detection
MIN_SCORE = 0.5  # MediaPipe's default min_detection_confidence
_LOGIT_CLIP = 100.0  # MediaPipe clips the logits before the sigmoid
# The head region of a person's box: a square as wide as the box (a standing person's box is ~2.5-3 heads wide;
# a close-up's is the head and shoulders), never taller than this share of the box's height, grown by HEAD_PAD on
# each side so that a face at the box's edge is whole.
HEAD_HEIGHT = 0.6
HEAD_PAD = 0.1
MIN_HEAD_PIXELS = 24  # a head region smaller than this (px a side) holds no face the model can find


@dataclass(frozen=True, slots=True)
class Face:
    """A face found: its box (fractions of the picture it was found in) and score (0-1)."""

    box: Box
    score: float


@functools.cache
def anchors() -> np.ndarray:
    """The model's 896 anchor centres (x, y as fractions of its input), in its output order: layers of one stride
    share their cells; per cell (row-major), that stride's layers' anchors one after another."""
    centres = []
    layer = 0
    while layer < len(STRIDES):
        stride = STRIDES[layer]
        same = 1
        while layer + same < len(STRIDES) and STRIDES[layer + same] == stride:
            same += 1
        cells = SIDE // stride
        ys, xs = np.mgrid[0:cells, 0:cells]
        grid = np.stack([(xs.ravel() + 0.5) / cells, (ys.ravel() + 0.5) / cells], 1)
        centres.append(np.repeat(grid, same * ANCHORS_PER_LAYER, axis=0))
        layer += same
    return np.concatenate(centres).astype(np.float32)


def head_region(box: Box, width: int, height: int) -> tuple[int, int, int] | None:
    """The square (left, top, side, in pixels of a ``width`` x ``height`` frame; it may reach out of the frame) where
    the head of a person with ``box`` (fractions) is, or None when it is smaller than :data:`MIN_HEAD_PIXELS`."""
    x0, y0, x1, y1 = box[0] * width, box[1] * height, box[2] * width, box[3] * height
    side = min(x1 - x0, HEAD_HEIGHT * (y1 - y0))
    if side < MIN_HEAD_PIXELS:
        return None
    padded = side * (1 + 2 * HEAD_PAD)
    left = (x0 + x1) / 2 - padded / 2
    top = y0 - side * HEAD_PAD
    return round(left), round(top), round(padded)


class FaceDetector:
    """BlazeFace short-range on one onnxruntime session (see the module's docstring).

    ``min_score`` is the least score a face is kept at. ``session`` reuses an open onnxruntime session of the model
    instead of opening ``model``. A ValueError says when the model's inputs or outputs are not BlazeFace's."""

    def __init__(self, model: Path, *, threads: int = 1, min_score: float = MIN_SCORE, session: Any = None) -> None:
        self.min_score = min_score
        self._session = session if session is not None else open_session(model, threads)
        inputs = self._session.get_inputs()
        shapes = {out.name: tuple(out.shape) for out in self._session.get_outputs()}
        if len(inputs) != 1 or tuple(inputs[0].shape) != (1, SIDE, SIDE, 3):
            raise ValueError(f"not BlazeFace's input: {[(i.name, i.shape) for i in inputs]}")
        n = len(anchors())
        if shapes.get("regressors") != (1, n, 16) or shapes.get("classificators") != (1, n, 1):
            raise ValueError(f"not BlazeFace short-range's outputs: {shapes}")
        self._input = inputs[0].name

    def detect(self, image: np.ndarray) -> list[Face]:
        """Faces in an H x W x 3 uint8 RGB picture that a face fills a good part of (a head crop, a selfie), best
        first; boxes are fractions of ``image``."""
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8 or 0 in image.shape:
            raise ValueError(f"expected an H x W x 3 uint8 picture, got {image.shape} {image.dtype}")
        h, w = image.shape[:2]
        scale = SIDE / max(h, w)
        nw, nh = min(SIDE, max(1, round(w * scale))), min(SIDE, max(1, round(h * scale)))
        small = cv2.resize(image, (nw, nh), interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
        blob = np.full((1, SIDE, SIDE, 3), -1.0, np.float32)  # black padding
        top, left = (SIDE - nh) // 2, (SIDE - nw) // 2  # centred, as MediaPipe's letterbox
        blob[0, top:top + nh, left:left + nw] = small.astype(np.float32) / 127.5 - 1.0
        regressors, logits = self._session.run(["regressors", "classificators"], {self._input: blob})
        scores = 1.0 / (1.0 + np.exp(-np.clip(logits[0, :, 0].astype(np.float64), -_LOGIT_CLIP, _LOGIT_CLIP)))
        keep = np.flatnonzero(scores >= self.min_score)
        if keep.size == 0:
            return []
        raw, centres = regressors[0, keep], anchors()[keep]
        cx = raw[:, 0] / SIDE + centres[:, 0]
        cy = raw[:, 1] / SIDE + centres[:, 1]
        bw, bh = raw[:, 2] / SIDE, raw[:, 3] / SIDE
        boxes = np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], 1) * SIDE  # input pixels
        boxes -= np.array([left, top, left, top], np.float32)  # letterbox -> picture, fractions of it
        boxes /= np.array([nw, nh, nw, nh], np.float32)
        np.clip(boxes, 0.0, 1.0, out=boxes)
        xywh = np.column_stack([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]]).tolist()
        kept = np.asarray(cv2.dnn.NMSBoxes(xywh, scores[keep].tolist(), 0.0, NMS_IOU), np.int64).reshape(-1)
        faces = [Face(tuple(float(v) for v in boxes[i]), float(scores[keep][i])) for i in kept  # type: ignore[arg-type]
                 if boxes[i, 2] > boxes[i, 0] and boxes[i, 3] > boxes[i, 1]]
        return sorted(faces, key=lambda f: -f.score)

    def in_head(self, frame: np.ndarray, box: Box) -> list[Face]:
        """Faces in the head region (:func:`head_region`) of a person whose box (fractions) is ``box`` in ``frame``
        (H x W x 3 uint8 RGB, full resolution); boxes are fractions of ``frame``. Nothing when the head region is
        too small to hold a face the model can find."""
        height, width = frame.shape[:2]
        region = head_region(box, width, height)
        if region is None:
            return []
        left, top, side = region
        crop = np.zeros((side, side, 3), np.uint8)  # the part out of the frame stays black, as padding
        fx0, fy0 = max(0, left), max(0, top)
        fx1, fy1 = min(width, left + side), min(height, top + side)
        if fx1 - fx0 < 2 or fy1 - fy0 < 2:
            return []
        crop[fy0 - top:fy1 - top, fx0 - left:fx1 - left] = frame[fy0:fy1, fx0:fx1]
        out = []
        for face in self.detect(crop):
            x0, y0, x1, y1 = face.box
            out.append(Face(((left + x0 * side) / width, (top + y0 * side) / height,
                             (left + x1 * side) / width, (top + y1 * side) / height), face.score))
        return out


def open_face_detector(model: Path | None = None, *, threads: int = 1) -> FaceDetector:
    """A :class:`FaceDetector` of ``model`` (default: the shipped file, checked against SHA256SUMS first). Raises
    :class:`~lucy.errors.ModelFileError` for a missing, damaged or wrong model file."""
    path = model or BLAZEFACE_MODEL
    if model is None:
        check_model_file(path, script="build_blazeface.py", what="the face detector's model file")
    elif not path.is_file():
        raise ModelFileError(f"the face detector's model file {path} does not exist")
    try:
        return FaceDetector(path, threads=threads)
    except ValueError as err:
        raise ModelFileError(f"{path} is not a BlazeFace short-range model: {err}") from err
    except Exception as err:  # onnxruntime's own errors (a file that is not a model) have no common base
        raise ModelFileError(f"the face detector's model file {path} cannot be loaded ({type(err).__name__}: "
                             f"{str(err)[:200]})") from err


@functools.cache
def shared_face_detector() -> FaceDetector:
    """One detector of the shipped model per process (one session serves every stream's tracker: a call takes a few
    ms, and a session holds ~2 MB)."""
    return open_face_detector()

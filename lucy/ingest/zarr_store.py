"""Frame store on Zarr v3: ``<data>/frames.zarr/<stream>/{frames,times}``, one group per stream.

Commit protocol (why readers never see a half-written frame): arrays grow in blocks ahead of the data, each
frame is its own chunk, and zarr writes every file atomically (temporary file + rename). Frames and times are
written first; only then is the group's ``committed`` attribute raised. Readers trust ``committed`` alone,
so a crash (even ``kill -9``) leaves a store whose committed prefix is complete; a resumed writer simply
overwrites the uncommitted tail.
"""

from __future__ import annotations

import json
import math
import shutil
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import zarr
import zarr.errors
from zarr.codecs import BytesCodec, ZstdCodec

from lucy.errors import StoreError
from lucy.ingest.codecs import JpegCodec, JpegXlCodec
from lucy.ingest.frames import Clip, FrameStore, Gap, StreamInfo, check_stream_name, pick_rate

FORMAT_VERSION = 1
_GROW_FRAMES = 4096  # capacity step: one metadata rewrite per 4096 frames
_TIMES_CHUNK = 16_384


def frames_root(data: Path) -> Path:
    return Path(data) / "frames.zarr"


def list_streams(data: Path) -> list[str]:
    """Names of the streams stored under a data directory."""
    root = frames_root(data)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "zarr.json").is_file() and (p / "frames").is_dir())


def ensure_frames_root(data: Path) -> None:
    """Create the root group of the frame store once, even when several streams start at the same moment."""
    root = frames_root(data)
    if (root / "zarr.json").is_file():
        return
    try:
        zarr.open_group(root, mode="a", zarr_format=3)
    except (zarr.errors.ContainsGroupError, FileExistsError):
        if not (root / "zarr.json").is_file():
            raise


def _serializer(codec: str, quality: int) -> tuple[Any, tuple[Any, ...]]:
    if codec == "jpeg":
        return JpegCodec(quality=quality), ()
    if codec == "jpegxl":
        return JpegXlCodec(quality=quality), ()
    if codec == "zstd":
        return BytesCodec(), (ZstdCodec(level=3),)
    raise StoreError(f"unknown frame codec {codec!r}")


class ZarrFrameStore(FrameStore):
    """A stream's frames in Zarr. Open with :meth:`create_or_resume` (the writer) or :meth:`open` (readers)."""

    def __init__(self, path: Path, *, writable: bool) -> None:
        self.path = path
        self.name = path.name
        self._writable = writable
        self._lock = threading.Lock()  # one reader object may serve several threads
        self._times_cache = np.empty(0, dtype=np.float64)
        self._frames: zarr.Array | None = None
        self._times: zarr.Array | None = None
        self._capacity = -1
        self._attrs = self._read_attrs()
        if self._attrs.get("format") != FORMAT_VERSION:
            raise StoreError(f"{path} is not a Lucy frame store of format {FORMAT_VERSION}")

    # ----------------------------------------------------------------------------------- opening

    @classmethod
    def open(cls, data: Path, name: str) -> ZarrFrameStore:
        path = frames_root(data) / check_stream_name(name)
        if not (path / "zarr.json").is_file():
            raise StoreError(f"no stream named {name!r} in {data}")
        return cls(path, writable=False)

    @classmethod
    def open_writer(cls, data: Path, name: str) -> ZarrFrameStore:
        """Open an existing stream to append to it (one writer per stream)."""
        path = frames_root(data) / check_stream_name(name)
        if not (path / "zarr.json").is_file():
            raise StoreError(f"no stream named {name!r} in {data}")
        return cls(path, writable=True)

    @classmethod
    def create(
        cls, data: Path, name: str, *, source: str, source_id: str, live: bool,
        width: int, height: int, stored_fps: float, codec: str, quality: int,
    ) -> ZarrFrameStore:
        """Create a new stream. ``source_id`` is kept so that a resumed ingest can refuse another source."""
        path = frames_root(data) / check_stream_name(name)
        if path.exists():
            raise StoreError(f"stream {name!r} already exists in {data}")
        ensure_frames_root(data)
        serializer, compressors = _serializer(codec, quality)
        tmp = path.with_name(f".{name}.creating")
        shutil.rmtree(tmp, ignore_errors=True)
        group = zarr.open_group(tmp, mode="w", zarr_format=3)
        group.create_array("frames", shape=(0, height, width, 3), chunks=(1, height, width, 3), dtype="uint8",
                           serializer=serializer, compressors=compressors, fill_value=0)
        group.create_array("times", shape=(0,), chunks=(_TIMES_CHUNK,), dtype="float64",
                           compressors=(ZstdCodec(level=3),), fill_value=math.nan)
        group.update_attributes({
            "format": FORMAT_VERSION, "source": source, "source_id": source_id, "live": live,
            "stored_fps": stored_fps, "width": width, "height": height, "codec": codec,
            "committed": 0, "first_time": None, "last_time": None, "wall_start": None,
            "complete": False, "lost": None, "gaps": [], "created": time.time(),
        })
        tmp.rename(path)  # the stream appears whole, or not at all
        return cls(path, writable=True)

    # ----------------------------------------------------------------------------------- metadata

    def _read_attrs(self) -> dict[str, Any]:
        try:
            with open(self.path / "zarr.json", "rb") as f:
                return json.load(f).get("attributes", {})
        except FileNotFoundError:
            raise StoreError(f"stream {self.name!r} was removed") from None

    def _write_attrs(self, **changes: Any) -> None:
        assert self._writable, "read-only frame store"
        self._attrs.update(changes)
        zarr.open_group(self.path, mode="r+", zarr_format=3).update_attributes(self._attrs)

    def set_wall_start(self, wall_start: float) -> None:
        if self._attrs.get("wall_start") is None:
            self._write_attrs(wall_start=wall_start)

    def add_gap(self, gap: Gap) -> None:
        self._write_attrs(gaps=[*self._attrs["gaps"], asdict(gap)])

    def mark_finished(self, *, complete: bool, lost: str | None) -> None:
        self._write_attrs(complete=complete, lost=lost)

    @property
    def attrs(self) -> dict[str, Any]:
        return dict(self._attrs)

    def committed(self) -> int:
        if not self._writable:
            self._attrs = self._read_attrs()
        return int(self._attrs["committed"])

    def info(self) -> StreamInfo:
        a = self._read_attrs() if not self._writable else self._attrs
        return StreamInfo(
            name=self.name, source=a["source"], live=a["live"], frames=a["committed"],
            first_time=a["first_time"], last_time=a["last_time"], stored_fps=a["stored_fps"],
            width=a["width"], height=a["height"], codec=a["codec"], wall_start=a["wall_start"],
            complete=a["complete"], lost=a["lost"], gaps=[Gap(**g) for g in a["gaps"]])

    # ----------------------------------------------------------------------------------- arrays

    def _arrays(self, needed: int) -> tuple[zarr.Array, zarr.Array]:
        """The two arrays, re-opened when their shape (which grows ahead of the data) is too small."""
        if self._frames is None or self._capacity < needed:
            self._frames = zarr.open_array(self.path / "frames", mode="r+" if self._writable else "r")
            self._times = zarr.open_array(self.path / "times", mode="r+" if self._writable else "r")
            self._capacity = self._frames.shape[0]
        assert self._times is not None
        return self._frames, self._times

    def append(self, frames: np.ndarray, times: np.ndarray) -> int:
        assert self._writable, "read-only frame store"
        k = len(times)
        if k == 0:
            return self.committed()
        if frames.shape[1:] != (self._attrs["height"], self._attrs["width"], 3) or len(frames) != k:
            raise ValueError(f"frames of shape {frames.shape} do not fit this store")
        last = self._attrs["last_time"]
        if (last is not None and times[0] <= last) or np.any(np.diff(times) <= 0):
            raise ValueError("frame times must be strictly increasing")
        n = self._attrs["committed"]
        frames_arr, times_arr = self._arrays(n + k)
        if self._capacity < n + k:
            capacity = (n + k + _GROW_FRAMES - 1) // _GROW_FRAMES * _GROW_FRAMES
            frames_arr.resize((capacity, *frames_arr.shape[1:]))
            times_arr.resize((capacity,))
            self._capacity = capacity
        frames_arr[n:n + k] = frames
        times_arr[n:n + k] = times
        first = self._attrs["first_time"] if n else float(times[0])
        self._write_attrs(committed=n + k, first_time=first, last_time=float(times[-1]))
        if len(self._times_cache) == n:  # else times() fills the cache from the store when first asked
            self._times_cache = np.concatenate([self._times_cache, np.asarray(times, dtype=np.float64)])
        return n + k

    def times(self) -> np.ndarray:
        with self._lock:
            n = self.committed()
            have = len(self._times_cache)
            if have < n:
                _, times_arr = self._arrays(n)
                self._times_cache = np.concatenate([self._times_cache, times_arr[have:n]])
            return self._times_cache[:n]

    def read(self, start: float, end: float, fps: float | None = None) -> Clip:
        times = self.times()
        index = pick_rate(times, start, end, fps)
        if len(index) == 0:
            h, w = self._attrs["height"], self._attrs["width"]
            return Clip(np.empty((0, h, w, 3), dtype=np.uint8), np.empty(0))
        with self._lock:
            frames_arr, _ = self._arrays(len(times))
        lo, hi = int(index[0]), int(index[-1]) + 1
        if hi - lo == len(index):
            frames = frames_arr[lo:hi]
        else:
            frames = frames_arr.get_orthogonal_selection((index,))
        return Clip(np.asarray(frames), times[index].copy())

    def stored_bytes(self) -> int:
        """Bytes on disk of the committed frames (for benchmarks and `lucy streams`)."""
        return sum(f.stat().st_size for f in (self.path / "frames").rglob("*") if f.is_file())

"""Frame store on Zarr v3: ``<data>/frames.zarr/<stream>/{frames,times}``, one group per stream (plus
``{audio,audio_times,audio_lengths}`` when the source has sound).

Commit protocol (why readers never see a half-written frame): arrays grow in blocks ahead of the data, each
frame is its own chunk, and zarr writes every file atomically (temporary file + rename). Frames and times are
written first; only then is the group's ``committed`` attribute raised. Readers trust ``committed`` alone,
so a crash (even ``kill -9``) leaves a store whose committed prefix is complete; a resumed writer simply
overwrites the uncommitted tail.

Audio (mono, 16 kHz, int16) is kept in blocks of one second, one chunk each: ``audio[i]`` holds
``audio_lengths[i]`` samples heard from media time ``audio_times[i]`` on. A block is full unless audio stopped
after it (a live stream's outage, the end of the track): consecutive samples fill the last block, then new
ones, so an outage is simply the time between one block's end and the next block's start. The same commit rule
holds: samples, lengths and times are written first, then the ``audio_blocks`` and ``audio_until``
attributes; readers read the attributes first and never look past ``audio_until``. Filling the last block
rewrites its chunk file (atomically), whose committed prefix stays as it was. Retention leaves audio alone
(an hour is about 100 MB before compression, little beside the frames).

Retention (:meth:`ZarrFrameStore.thin_before`, :meth:`ZarrFrameStore.drop_before`) deletes old frames' chunk
files. The writer owns ``zarr.json`` (it rewrites all its attributes), so what retention deleted is kept in a
small file of its own, ``retention.json`` beside it, written by the one retention owner of the data directory
(``lucy serve``'s maintainer). Readers never return a deleted frame: which frames retention keeps follows from
the times array and that file alone (:func:`kept_mask`); the file is published *before* any chunk is deleted,
and a read checks it again after reading, so a frame deleted meanwhile is left out rather than shown black.
Retention never deletes the newest committed frame, and the writer only writes at or after the committed count,
so the two never touch the same chunk.

:class:`ZarrFrameStores` is the catalogue of a data directory's streams (list, open, create, delete): nothing
outside this module looks at these files.

Where the groups live is a :class:`FrameRoot` (the catalogue) and a :class:`StreamPlace` (one stream): the folder
``<data>/frames.zarr`` here (:class:`LocalRoot`), or a prefix of an S3 bucket
(:class:`lucy.ingest.object_store.S3Root`). The store itself only talks to zarr, plus the few things a place does
besides (reading the group's ``zarr.json``, creating and deleting a stream whole, retention's files).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import zarr
import zarr.errors
from zarr.codecs import BytesCodec, ZstdCodec

from lucy.errors import StoreError
from lucy.ingest.codecs import JpegCodec, JpegXlCodec
from lucy.ingest.frames import (
    AUDIO_RATE,
    RESERVED_STREAM_NAMES,
    AudioClip,
    Clip,
    FrameStore,
    FrameStores,
    Gap,
    RetentionState,
    StreamInfo,
    check_stream_name,
    pick_rate,
)
from lucy.redaction import redact_url

FORMAT_VERSION = 1
_GROW_FRAMES = 4096  # capacity step: one metadata rewrite per 4096 frames
_TIMES_CHUNK = 16_384
RETENTION_FILE = "retention.json"
_RETENTION_FORMAT = 1
_SLOT_EPS = 1e-9
AUDIO_BLOCK = AUDIO_RATE  # samples per stored audio block (one chunk): one second
_GROW_AUDIO = 1024  # audio capacity step, in blocks
_AUDIO_JOIN = 1.5 / AUDIO_RATE  # audio starting this close to the stored end continues it (no gap)
_INT16 = 32767.0


def frames_root(data: Path) -> Path:
    return Path(data) / "frames.zarr"


def _is_stream(path: Path) -> bool:
    return (path / "zarr.json").is_file() and (path / "frames").is_dir()


def list_streams(data: Path) -> list[str]:
    """Names of the streams stored under a data directory (not those being created or deleted)."""
    root = frames_root(data)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(".") and _is_stream(p))


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


def kept_mask(times: np.ndarray, lo: int, hi: int, state: RetentionState) -> np.ndarray:
    """Which of the frames ``lo <= i < hi`` retention keeps under ``state``: none before ``dropped_before``, and
    in a thinned segment only the first frame of each ``1 / fps`` slot (a frame whose slot differs from its
    predecessor's). Decided from the times alone, so the deleting process and every reader agree."""
    x = times[lo:hi]
    keep = x >= state.dropped_before
    if state.thinned and len(x):
        prev = np.empty_like(x)
        prev[0] = times[lo - 1] if lo > 0 else -np.inf
        prev[1:] = x[:-1]
        begin = -np.inf
        for before, fps in state.thinned:
            segment = (x >= begin) & (x < before)
            if segment.any():
                first = np.floor(x * fps + _SLOT_EPS) != np.floor(prev * fps + _SLOT_EPS)
                keep &= ~segment | first
            begin = before
    return keep


def _state_of(doc: dict[str, Any]) -> RetentionState:
    return RetentionState(dropped_before=float(doc.get("dropped_before", 0.0)),
                          thinned=tuple((float(b), float(f)) for b, f in doc.get("thinned", ())),
                          bytes_freed=int(doc.get("bytes_freed", 0)))


# Chunks are files named "c.<i>.0.0.0" side by side, not nested folders "c/<i>/0/0/0": with a chunk per frame, the
# three folders of each took more disk than its picture (a 4 KiB block each on ext4, against ~6.5 KB for a 320x180
# JPEG) and three more system calls to make and to delete. Stores made before keep the layout their metadata names.
_CHUNK_KEYS = {"name": "default", "separator": "."}


def _create_audio_arrays(group: zarr.Group) -> None:
    group.create_array("audio", shape=(0, AUDIO_BLOCK), chunks=(1, AUDIO_BLOCK), dtype="int16",
                       compressors=(ZstdCodec(level=3),), fill_value=0, chunk_key_encoding=_CHUNK_KEYS)
    group.create_array("audio_times", shape=(0,), chunks=(_TIMES_CHUNK,), dtype="float64",
                       compressors=(ZstdCodec(level=3),), fill_value=math.nan, chunk_key_encoding=_CHUNK_KEYS)
    group.create_array("audio_lengths", shape=(0,), chunks=(_TIMES_CHUNK,), dtype="int32",
                       compressors=(ZstdCodec(level=3),), fill_value=0, chunk_key_encoding=_CHUNK_KEYS)


def _serializer(codec: str, quality: int) -> tuple[Any, tuple[Any, ...]]:
    if codec in ("jpeg", "jpeg420"):
        return JpegCodec(quality=quality, subsampling="420" if codec == "jpeg420" else "444"), ()
    if codec == "jpegxl":
        return JpegXlCodec(quality=quality), ()
    if codec == "zstd":
        return BytesCodec(), (ZstdCodec(level=3),)
    raise StoreError(f"unknown frame codec {codec!r}")


class _Retention(Protocol):
    """What a store's retention side does (:class:`_RetentionRecord` on local files)."""

    def state(self) -> RetentionState: ...
    def stored_bytes(self) -> int: ...
    def save_accounting(self) -> None: ...
    def thin_before(self, t: float, keep_fps: float) -> int: ...
    def drop_before(self, t: float) -> int: ...


class StreamPlace(Protocol):
    """Where one stream's Zarr group lives."""

    name: str
    where: str  # for messages: the folder or the object prefix

    def zarr(self, sub: str = "") -> Any:
        """What zarr opens: the group (``sub`` empty) or the array ``sub`` of it."""

    def read_meta(self) -> bytes:
        """The group's ``zarr.json`` as stored now (:class:`FileNotFoundError` once the stream is gone)."""

    def retention(self, store: ZarrFrameStore) -> _Retention:
        """The stream's retention side, working on ``store``'s frames."""


class FrameRoot(Protocol):
    """Where a catalogue's streams live (one :class:`StreamPlace` each). Names are checked by the caller."""

    describe: str  # for messages

    def names(self) -> list[str]: ...
    def exists(self, name: str) -> bool: ...
    def place(self, name: str) -> StreamPlace: ...

    def create(self, name: str, build: Callable[[Any], None]) -> StreamPlace:
        """Make the stream with ``build(what zarr opens)``, so that it appears whole, or not at all; refuse an
        existing one (:class:`StoreError`)."""

    def delete(self, name: str) -> bool: ...


class LocalPlace:
    """A stream's folder, ``<data>/frames.zarr/<stream>``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = path.name
        self.where = str(path)

    def zarr(self, sub: str = "") -> Path:
        return self.path / sub if sub else self.path

    def read_meta(self) -> bytes:
        with open(self.path / "zarr.json", "rb") as f:
            return f.read()

    def retention(self, store: ZarrFrameStore) -> _RetentionRecord:
        return _RetentionRecord(self.path, store._all_times, store._chunk_path)


class LocalRoot:
    """The streams of ``<data>/frames.zarr``: one folder each, made aside and renamed into place."""

    def __init__(self, data: Path) -> None:
        self.data = Path(data)
        self.describe = str(self.data)

    def _path(self, name: str) -> Path:
        return frames_root(self.data) / name

    def names(self) -> list[str]:
        return list_streams(self.data)

    def exists(self, name: str) -> bool:
        return _is_stream(self._path(name))

    def place(self, name: str) -> LocalPlace:
        path = self._path(name)
        if not (path / "zarr.json").is_file():
            raise StoreError(f"no stream named {name!r} in {self.data}")
        return LocalPlace(path)

    def create(self, name: str, build: Callable[[Any], None]) -> LocalPlace:
        path = self._path(name)
        if path.exists():
            raise StoreError(f"stream {name!r} already exists in {self.data}")
        ensure_frames_root(self.data)
        tmp = path.with_name(f".{name}.creating")
        shutil.rmtree(tmp, ignore_errors=True)
        build(tmp)
        tmp.rename(path)  # the stream appears whole, or not at all
        return LocalPlace(path)

    def delete(self, name: str) -> bool:
        """Move the stream's group aside at once (readers see it gone, a new stream of that name can be
        created), then delete its files. Only ever a folder: whatever the name, the root group's own metadata
        (``zarr.json`` beside the streams) is never moved."""
        path = self._path(name)
        if not path.is_dir() or path.is_symlink() or path.name.lower() in RESERVED_STREAM_NAMES:
            return False
        doomed = path.with_name(f".{name}.deleting.{os.getpid()}.{threading.get_ident()}")
        try:
            path.rename(doomed)
        except FileNotFoundError:
            return False
        shutil.rmtree(doomed, ignore_errors=True)
        return True


def _root(data: Path | FrameRoot) -> FrameRoot:
    return LocalRoot(data) if isinstance(data, (str, os.PathLike)) else data


class _RetentionRecord:
    """A stream's retention record, ``retention.json`` (what retention deleted, and the byte count of the frames),
    cached by inode and mtime, and the deletions that move it. Belongs to one :class:`ZarrFrameStore`, which
    gives it the frames' times and chunk paths."""

    def __init__(self, group: Path, all_times: Callable[[], np.ndarray], chunk_path: Callable[[int], Path]) -> None:
        self.group = group
        self.path = group / RETENTION_FILE
        self._all_times = all_times
        self._chunk_path = chunk_path
        self.lock = threading.RLock()
        self._key: tuple[int, int, int] | None = None
        self._doc: dict[str, Any] = {}
        self._state = RetentionState()
        self._bytes: int | None = None
        self._counted = 0
        self._acct_key: tuple[int, int, int] | None | bool = False

    def state(self) -> RetentionState:
        with self.lock:
            return self._read()[1]

    def _read(self) -> tuple[dict[str, Any], RetentionState]:
        """The retention record, read again only when the file changed (a new file has a new inode)."""
        path = self.path
        try:
            st = os.stat(path)
            key: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            key = None
        if key != self._key:
            doc: dict[str, Any] = {}
            if key is not None:
                try:
                    doc = json.loads(path.read_bytes())
                except FileNotFoundError:  # replaced meanwhile: the next look reads the new one
                    return self._doc, self._state
                except ValueError as err:
                    raise StoreError(f"{path} is damaged: {err}") from None
                if doc.get("format") != _RETENTION_FORMAT:
                    raise StoreError(f"{path} is not a retention record of format {_RETENTION_FORMAT}")
            self._key, self._doc, self._state = key, doc, _state_of(doc)
        return self._doc, self._state

    def _chunk_size(self, i: int) -> int:
        try:
            return os.stat(self._chunk_path(i)).st_size
        except FileNotFoundError:
            return 0

    def _account(self, times: np.ndarray) -> int:
        """Bytes of the stored frames: taken from the retention record (whenever it changed), plus one stat for
        each frame committed since the record counted."""
        doc, state = self._read()
        if self._acct_key != self._key or self._bytes is None:
            if "counted_frames" in doc:
                self._counted, self._bytes = int(doc["counted_frames"]), int(doc["bytes_stored"])
            elif self._bytes is None:  # no record yet: count every frame once (its count is saved with the record)
                self._counted, self._bytes = int(np.searchsorted(times, state.dropped_before)), 0
            self._acct_key = self._key
        n = len(times)
        if self._counted < n:
            self._bytes += sum(self._chunk_size(i) for i in range(self._counted, n))
            self._counted = n
        return self._bytes

    def stored_bytes(self) -> int:
        with self.lock:
            return self._account(self._all_times())

    def save_accounting(self) -> None:
        with self.lock:
            self._account(self._all_times())
            doc, state = self._read()
            if (doc.get("counted_frames"), doc.get("bytes_stored")) != (self._counted, self._bytes):
                self._write(state, pending=doc.get("pending"))

    def _write(self, state: RetentionState, *, pending: list[int] | None) -> None:
        """Replace the retention record atomically (temporary file, fsync, rename)."""
        doc = {"format": _RETENTION_FORMAT, "dropped_before": state.dropped_before,
               "thinned": [list(seg) for seg in state.thinned], "thinned_before": state.thinned_before,
               "bytes_freed": state.bytes_freed, "bytes_stored": self._bytes, "counted_frames": self._counted,
               "pending": pending, "updated": time.time()}
        path = self.path
        tmp = self.group / f".{RETENTION_FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            with open(tmp, "w") as f:
                json.dump(doc, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        st = os.stat(path)
        self._key, self._doc, self._state = (st.st_ino, st.st_mtime_ns, st.st_size), doc, state
        self._acct_key = self._key

    def _delete(self, times: np.ndarray, lo: int, hi: int, state: RetentionState) -> list[tuple[Path, int]]:
        """Chunks of ``[lo, hi)`` that ``state`` does not keep and that are still on disk, with their sizes."""
        out = []
        for i in lo + np.flatnonzero(~kept_mask(times, lo, hi, state)):
            path = self._chunk_path(int(i))
            try:
                out.append((path, os.stat(path).st_size))
            except FileNotFoundError:
                continue
        return out

    def _unlink(self, chunks: list[tuple[Path, int]]) -> None:
        frames_dir = self.group / "frames"
        for path, _ in chunks:
            path.unlink(missing_ok=True)
            parent = path.parent
            # (a store in the nested layout: c/<i>/0/0 ... c/<i> go once empty; never c/ itself)
            while parent != frames_dir and parent.parent != frames_dir:
                try:
                    parent.rmdir()
                except OSError:
                    break
                parent = parent.parent

    def apply(self, change: Any) -> int:
        """Move the retention record to ``change(state, times)`` -> (state, lo, hi), then delete the chunks of
        ``[lo, hi)`` the new state does not keep. The record is published first (so readers leave those frames
        out before they go), with the range as ``pending``: a crash mid-way is finished by the next call."""
        with self.lock:
            times = self._all_times()
            if len(times) < 2:
                return 0
            doc, state = self._read()
            self._account(times)
            pending = doc.get("pending")
            if pending:  # a deletion that did not finish: its bytes were subtracted already
                lo, hi = int(pending[0]), min(int(pending[1]), len(times))
                self._unlink(self._delete(times, lo, hi, state))
                self._write(state, pending=None)
            new, lo, hi = change(state, times)
            if new == state:
                return 0
            chunks = self._delete(times, lo, hi, new)
            freed = sum(size for _, size in chunks)
            assert self._bytes is not None
            self._bytes -= freed
            new = replace(new, bytes_freed=state.bytes_freed + freed)
            try:
                self._write(new, pending=[lo, hi])
            except BaseException:  # nothing was deleted (a full disk refuses even this small file)
                self._bytes += freed
                raise
            self._unlink(chunks)
            self._write(new, pending=None)
            return freed

    def thin_before(self, t: float, keep_fps: float) -> int:
        if not keep_fps > 0:
            raise ValueError(f"keep_fps must be positive, not {keep_fps!r}")

        def change(state: RetentionState, times: np.ndarray) -> tuple[RetentionState, int, int]:
            boundary = min(float(t), float(times[-1]))
            begin = state.thinned_before
            if boundary <= begin:
                return state, 0, 0
            segments = list(state.thinned)
            if segments and segments[-1][1] == keep_fps:
                segments[-1] = (boundary, keep_fps)
            else:
                segments.append((boundary, float(keep_fps)))
            lo, hi = (int(i) for i in np.searchsorted(times, [begin, boundary], side="left"))
            return replace(state, thinned=tuple(segments)), lo, hi

        return self.apply(change)

    def drop_before(self, t: float) -> int:

        def change(state: RetentionState, times: np.ndarray) -> tuple[RetentionState, int, int]:
            boundary = min(float(t), float(times[-1]))
            if boundary <= state.dropped_before:
                return state, 0, 0
            lo, hi = (int(i) for i in np.searchsorted(times, [state.dropped_before, boundary], side="left"))
            segments = tuple(seg for seg in state.thinned if seg[0] > boundary)
            return replace(state, dropped_before=boundary, thinned=segments), lo, hi

        return self.apply(change)


class ZarrFrameStore(FrameStore):
    """A stream's frames in Zarr. Opened through :class:`ZarrFrameStores`: ``create`` / ``open_writer`` (the
    stream's one writer) or ``open`` (readers)."""

    def __init__(self, place: StreamPlace, *, writable: bool) -> None:
        self.place = place
        self.name = place.name
        self._writable = writable
        self._lock = threading.Lock()  # one reader object may serve several threads
        self._times_cache = np.empty(0, dtype=np.float64)
        self._frames: zarr.Array | None = None
        self._times: zarr.Array | None = None
        self._capacity = -1
        self._retention = place.retention(self)
        self._head: tuple[RetentionState, int, np.ndarray] | None = None  # frames kept before thinned_before
        self._chunk_key: Any = None
        self._audio: tuple[zarr.Array, zarr.Array, zarr.Array] | None = None
        self._audio_cache: tuple[np.ndarray, np.ndarray] = (np.empty(0), np.empty(0, dtype=np.int64))
        self._attrs = self._read_attrs()
        if self._attrs.get("format") != FORMAT_VERSION:
            raise StoreError(f"{place.where} is not a Lucy frame store of format {FORMAT_VERSION}")

    @property
    def path(self) -> Path:
        """The stream's folder (local stores only)."""
        if not isinstance(self.place, LocalPlace):
            raise StoreError(f"stream {self.name!r} is not in a local folder ({self.place.where})")
        return self.place.path

    # ----------------------------------------------------------------------------------- opening

    @classmethod
    def open(cls, data: Path | FrameRoot, name: str) -> ZarrFrameStore:
        """Open a stream for reading; ``data`` is a data directory or a :class:`FrameRoot`."""
        return cls(_root(data).place(check_stream_name(name)), writable=False)

    @classmethod
    def open_writer(cls, data: Path | FrameRoot, name: str) -> ZarrFrameStore:
        """Open an existing stream to append to it (one writer per stream)."""
        return cls(_root(data).place(check_stream_name(name)), writable=True)

    @classmethod
    def create(
        cls, data: Path | FrameRoot, name: str, *, source: str, source_id: str, live: bool,
        width: int, height: int, stored_fps: float, codec: str, quality: int, audio: bool = False,
    ) -> ZarrFrameStore:
        """Create a new stream. ``source_id`` is kept so that a resumed ingest can refuse another source: pass
        :func:`lucy.ingest.source.stored_source_id`, never an identity in clear. ``source`` is stored redacted.
        ``audio``: the source has sound (its arrays are made now); a source without pictures has width and
        height 0 (its frames array is never written)."""
        check_stream_name(name)
        serializer, compressors = _serializer(codec, quality)

        def build(where: Any) -> None:
            group = zarr.open_group(where, mode="w", zarr_format=3)
            h, w = max(1, height), max(1, width)  # zarr wants chunks of some size, even for a stream without pictures
            group.create_array("frames", shape=(0, h, w, 3), chunks=(1, h, w, 3), dtype="uint8",
                               serializer=serializer, compressors=compressors, fill_value=0,
                               chunk_key_encoding=_CHUNK_KEYS)
            group.create_array("times", shape=(0,), chunks=(_TIMES_CHUNK,), dtype="float64",
                               compressors=(ZstdCodec(level=3),), fill_value=math.nan, chunk_key_encoding=_CHUNK_KEYS)
            if audio:
                _create_audio_arrays(group)
            group.update_attributes({
                "format": FORMAT_VERSION, "source": redact_url(source), "source_id": source_id, "live": live,
                "stored_fps": stored_fps, "width": width, "height": height, "codec": codec,
                "committed": 0, "first_time": None, "last_time": None, "wall_start": None,
                "complete": False, "lost": None, "gaps": [], "created": time.time(),
                **({"audio_rate": AUDIO_RATE, "audio_blocks": 0, "audio_until": 0.0, "audio_samples": 0}
                   if audio else {}),
            })

        return cls(_root(data).create(name, build), writable=True)

    # ----------------------------------------------------------------------------------- metadata

    def _read_attrs(self) -> dict[str, Any]:
        try:
            return json.loads(self.place.read_meta()).get("attributes", {})
        except FileNotFoundError:
            raise StoreError(f"stream {self.name!r} was removed") from None

    def _check_writable(self) -> None:
        if not self._writable:
            raise StoreError(f"stream {self.name!r} was opened read-only; its writer appends")

    def _write_attrs(self, **changes: Any) -> None:
        self._check_writable()
        self._attrs.update(changes)
        zarr.open_group(self.place.zarr(), mode="r+", zarr_format=3).update_attributes(self._attrs)

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
        state = self.retention_state()
        return StreamInfo(
            name=self.name, source=a["source"], live=a["live"], frames=a["committed"],
            first_time=a["first_time"], last_time=a["last_time"], stored_fps=a["stored_fps"],
            width=a["width"], height=a["height"], codec=a["codec"], wall_start=a["wall_start"],
            complete=a["complete"], lost=a["lost"], gaps=[Gap(**g) for g in a["gaps"]],
            expired_before=state.dropped_before, thinned_before=state.thinned_before, created=a.get("created"),
            audio=a.get("audio_rate") is not None, audio_until=float(a.get("audio_until", 0.0)))

    def holds_source(self, source: str) -> bool:
        from lucy.ingest.source import source_matches  # PyAV: a reader of frames (lucy ask) needs none of it

        return source_matches(self._attrs["source_id"], source)

    # ----------------------------------------------------------------------------------- arrays

    def _arrays(self, needed: int) -> tuple[zarr.Array, zarr.Array]:
        """The two arrays, re-opened when their shape (which grows ahead of the data) is too small."""
        if self._frames is None or self._capacity < needed:
            self._frames = zarr.open_array(self.place.zarr("frames"), mode="r+" if self._writable else "r")
            self._times = zarr.open_array(self.place.zarr("times"), mode="r+" if self._writable else "r")
            self._capacity = self._frames.shape[0]
        assert self._times is not None
        return self._frames, self._times

    def append(self, frames: np.ndarray, times: np.ndarray) -> int:
        self._check_writable()
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

    def _all_times(self) -> np.ndarray:
        """Media times of every committed frame, deleted by retention or not (frame i is shown at times[i])."""
        with self._lock:
            n = self.committed()
            have = len(self._times_cache)
            if have < n:
                _, times_arr = self._arrays(n)
                self._times_cache = np.concatenate([self._times_cache, times_arr[have:n]])
            return self._times_cache[:n]

    def times(self) -> np.ndarray:
        times = self._all_times()
        state = self.retention_state()
        if state.thinned_before <= 0.0:
            return times
        return times[self._available(times, 0, len(times), state)]

    def _available(self, times: np.ndarray, lo: int, hi: int, state: RetentionState) -> np.ndarray:
        """Indices ``lo <= i < hi`` of the frames retention kept (everything from ``thinned_before`` on is kept;
        the kept frames before it are cached per retention state)."""
        cut = int(np.searchsorted(times, state.thinned_before, side="left"))
        if cut <= lo:
            return np.arange(lo, hi)
        if lo == 0 and hi >= cut:
            head = self._head
            if head is None or head[0] != state or head[1] != cut:
                head = (state, cut, np.flatnonzero(kept_mask(times, 0, cut, state)))
                self._head = head
            kept = head[2]
        else:
            kept = lo + np.flatnonzero(kept_mask(times, lo, min(cut, hi), state))
        return np.concatenate([kept, np.arange(max(cut, lo), hi)]) if hi > cut else kept

    def read(self, start: float, end: float, fps: float | None = None) -> Clip:
        times = self._all_times()
        state = self.retention_state()
        lo, hi = (int(i) for i in np.searchsorted(times, [start, end], side="left"))
        available = self._available(times, lo, hi, state)
        index = available[pick_rate(times[available], start, end, fps)]
        if len(index) == 0:
            return self._empty_clip()
        frames = self._frames_at(index, len(times))
        first, last = int(index[0]), int(index[-1]) + 1
        after = self.retention_state()
        if after != state:  # retention went on while the chunks were read: leave out what it may have deleted
            keep = np.isin(index, self._available(times, first, last, after))
            frames, index = np.asarray(frames)[keep], index[keep]
            if len(index) == 0:
                return self._empty_clip()
        return Clip(np.asarray(frames), times[index].copy())

    def read_at(self, index: np.ndarray) -> Clip:
        """The committed frames at ``index`` (sorted, unique indices below :meth:`committed`), with their times.
        Retention is not consulted: for callers that picked the indices themselves (a store without retention)."""
        times = self._all_times()
        index = np.asarray(index, dtype=np.int64)
        if len(index) == 0:
            return self._empty_clip()
        if index[0] < 0 or index[-1] >= len(times):
            raise StoreError(f"stream {self.name!r}: frames {index[0]}..{index[-1]} asked, {len(times)} committed")
        return Clip(self._frames_at(index, len(times)), times[index].copy())

    def _frames_at(self, index: np.ndarray, committed: int) -> np.ndarray:
        """The pixels of the frames at ``index`` (sorted, unique, below ``committed``): one slice when they are
        consecutive, else an orthogonal selection."""
        with self._lock:
            frames_arr, _ = self._arrays(committed)
        first, last = int(index[0]), int(index[-1]) + 1
        if last - first == len(index):
            return np.asarray(frames_arr[first:last])
        return np.asarray(frames_arr.get_orthogonal_selection((index,)))

    def _empty_clip(self) -> Clip:
        h, w = self._attrs["height"], self._attrs["width"]
        return Clip(np.empty((0, h, w, 3), dtype=np.uint8), np.empty(0))

    # ----------------------------------------------------------------------------------- audio

    def has_audio(self) -> bool:
        if not self._writable:
            self._attrs = self._read_attrs()
        return self._attrs.get("audio_rate") is not None

    def audio_until(self) -> float:
        if not self._writable:
            self._attrs = self._read_attrs()
        return float(self._attrs.get("audio_until", 0.0))

    def _audio_arrays(self, needed: int) -> tuple[zarr.Array, zarr.Array, zarr.Array]:
        """The audio arrays, re-opened when their shape (which grows ahead of the data) is too small."""
        if self._audio is None or self._audio[0].shape[0] < needed:
            mode = "r+" if self._writable else "r"
            self._audio = tuple(zarr.open_array(self.place.zarr(name), mode=mode)  # type: ignore[assignment]
                                for name in ("audio", "audio_times", "audio_lengths"))
        assert self._audio is not None
        return self._audio

    def _audio_index(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Start times and lengths of the first ``n`` committed blocks. All but the last are cached (only the
        last block grows)."""
        with self._lock:
            times, lengths = self._audio_cache
            have = min(len(times), n - 1) if n else 0
            if have < n:
                _, times_arr, lengths_arr = self._audio_arrays(n)
                times = np.concatenate([times[:have], times_arr[have:n]])
                lengths = np.concatenate([lengths[:have], lengths_arr[have:n]]).astype(np.int64)
                self._audio_cache = (times[:n - 1], lengths[:n - 1])
            return times[:n], lengths[:n]

    def append_audio(self, samples: np.ndarray, start: float) -> float:
        self._check_writable()
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        if self._attrs.get("audio_rate") is None:
            _create_audio_arrays(zarr.open_group(self.place.zarr(), mode="r+", zarr_format=3))
            self._write_attrs(audio_rate=AUDIO_RATE, audio_blocks=0, audio_until=0.0, audio_samples=0)
        if not len(samples):
            return self.audio_until()
        n, until = int(self._attrs["audio_blocks"]), float(self._attrs["audio_until"])
        if n and start < until - _AUDIO_JOIN:
            raise ValueError(f"audio at {start:.4f} s starts before the stored audio's end ({until:.4f} s)")
        pcm = np.round(np.clip(samples, -1.0, 1.0) * _INT16).astype(np.int16)
        blocks: list[tuple[int, float, np.ndarray]] = []  # (index, start time, samples)
        used = 0
        if n:
            times, lengths = self._audio_index(n)
            last_len = int(lengths[-1])
            if abs(start - until) <= _AUDIO_JOIN and last_len < AUDIO_BLOCK:  # continue the last block
                audio_arr, _, _ = self._audio_arrays(n)
                used = min(AUDIO_BLOCK - last_len, len(pcm))
                block = np.concatenate([np.asarray(audio_arr[n - 1, :last_len]), pcm[:used]])
                blocks.append((n - 1, float(times[-1]), block))
            if abs(start - until) <= _AUDIO_JOIN:
                start = until  # contiguous: keep the sample grid of the stored audio
        index = n
        for offset in range(used, len(pcm), AUDIO_BLOCK):
            blocks.append((index, start + offset / AUDIO_RATE, pcm[offset:offset + AUDIO_BLOCK]))
            index += 1
        total = index
        audio_arr, times_arr, lengths_arr = self._audio_arrays(total)
        if audio_arr.shape[0] < total:
            capacity = (total + _GROW_AUDIO - 1) // _GROW_AUDIO * _GROW_AUDIO
            audio_arr.resize((capacity, AUDIO_BLOCK))
            times_arr.resize((capacity,))
            lengths_arr.resize((capacity,))
        first = blocks[0][0]
        rows = np.zeros((len(blocks), AUDIO_BLOCK), dtype=np.int16)
        for row, (_, _, block) in zip(rows, blocks, strict=True):
            row[:len(block)] = block
        audio_arr[first:total] = rows
        times_arr[first:total] = np.array([b[1] for b in blocks], dtype=np.float64)
        lengths_arr[first:total] = np.array([len(b[2]) for b in blocks], dtype=np.int32)
        last_start, last_block = blocks[-1][1], blocks[-1][2]
        until = last_start + len(last_block) / AUDIO_RATE
        self._write_attrs(audio_blocks=total, audio_until=until,
                          audio_samples=int(self._attrs.get("audio_samples", 0)) + len(pcm))
        return until

    def audio_seconds(self) -> float:
        if not self._writable:
            self._attrs = self._read_attrs()
        return int(self._attrs.get("audio_samples", 0)) / AUDIO_RATE

    def read_audio(self, start: float, end: float) -> AudioClip:
        a = self._read_attrs() if not self._writable else self._attrs  # first: nothing past what it commits
        n, until = int(a.get("audio_blocks", 0)), float(a.get("audio_until", 0.0))
        end = min(end, until)
        if not n or end <= start:
            return AudioClip.empty(start)
        times, lengths = self._audio_index(n)
        ends = times + lengths / AUDIO_RATE
        lo = int(np.searchsorted(ends, start, side="right"))
        hi = int(np.searchsorted(times, end, side="left"))
        if lo >= hi:
            return AudioClip.empty(start)
        # The clip starts on the sample grid of its first block: at the first sample at or after ``start``.
        t_lo = float(times[lo])
        skip = max(0, math.ceil((start - t_lo) * AUDIO_RATE - 1e-6))
        clip_start = t_lo + skip / AUDIO_RATE
        count = max(0, round((end - clip_start) * AUDIO_RATE))
        out = np.zeros(count, dtype=np.float32)
        with self._lock:
            audio_arr, _, _ = self._audio_arrays(n)
        rows = np.asarray(audio_arr[lo:hi])
        for row, t, length in zip(rows, times[lo:hi], lengths[lo:hi], strict=True):
            at = round((float(t) - clip_start) * AUDIO_RATE)  # where the block's first sample goes
            a0, a1 = max(0, -at), min(int(length), count - at)
            if a1 > a0:
                out[at + a0:at + a1] = row[a0:a1] / 32768.0
        return AudioClip(out, AUDIO_RATE, clip_start)

    # ----------------------------------------------------------------------------------- retention

    def retention_state(self) -> RetentionState:
        return self._retention.state()

    def available_from(self) -> float:
        return self.retention_state().dropped_before

    def _chunk_path(self, i: int) -> Path:
        if self._chunk_key is None:
            with self._lock:
                frames_arr, _ = self._arrays(0)
            self._chunk_key = frames_arr.metadata.encode_chunk_key
        return self.path / "frames" / self._chunk_key((i, 0, 0, 0))

    def stored_bytes(self) -> int:
        """Bytes on disk of the stored frames' chunks. Counted once per stream (one stat per frame), then kept up
        to date cheaply: frames committed since the last count are stat'ed, and retention subtracts what it
        deletes; the count is saved in the retention record, so another process does not count again."""
        return self._retention.stored_bytes()

    def save_accounting(self) -> None:
        """Save the byte count in the retention record if it moved (retention owner only)."""
        self._retention.save_accounting()

    def thin_before(self, t: float, keep_fps: float) -> int:
        """Thin the frames before media time ``t`` to ``keep_fps``: delete every frame that is not the first of
        its ``1 / keep_fps`` slot (a stretch thinned before keeps the rate it was thinned at). Never touches the
        newest committed frame. Returns the bytes freed. For the data directory's one retention owner."""
        return self._retention.thin_before(t, keep_fps)

    def drop_before(self, t: float) -> int:
        """Delete every frame before media time ``t`` (never the newest committed frame). Returns the bytes
        freed. For the data directory's one retention owner."""
        return self._retention.drop_before(t)


class ZarrFrameStores(FrameStores):
    """The streams of ``<data>/frames.zarr`` (or of another :class:`FrameRoot`, e.g. an S3 bucket): one Zarr group
    per stream (see the module's docstring)."""

    def __init__(self, data: Path | FrameRoot) -> None:
        self.root = _root(data)

    @property
    def data(self) -> Path:
        """The data directory whose ``frames.zarr`` holds the streams (local stores only)."""
        if not isinstance(self.root, LocalRoot):
            raise StoreError(f"the frame store is not in a local folder ({self.root.describe})")
        return self.root.data

    def names(self) -> list[str]:
        return self.root.names()

    def exists(self, name: str) -> bool:
        return self.root.exists(check_stream_name(name))

    def open(self, name: str) -> ZarrFrameStore:
        return ZarrFrameStore.open(self.root, name)

    def open_writer(self, name: str) -> ZarrFrameStore:
        return ZarrFrameStore.open_writer(self.root, name)

    def create(self, name: str, *, source: str, live: bool, width: int, height: int, stored_fps: float,
               codec: str, quality: int, audio: bool = False) -> ZarrFrameStore:
        from lucy.ingest.source import source_identity, stored_source_id

        return ZarrFrameStore.create(self.root, name, source=source_identity(source)[0],
                                     source_id=stored_source_id(source), live=live, width=width, height=height,
                                     stored_fps=stored_fps, codec=codec, quality=quality, audio=audio)

    def delete(self, name: str) -> bool:
        return self.root.delete(check_stream_name(name))


"""The frame-store boundary: what ingest writes and what captioning and questions read back."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from lucy.errors import StoreError

_STREAM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# Names the frame store keeps beside the streams' folders for itself: the root group's metadata (zarr v3, and v2's
# for a store that another zarr version touched). Names starting with "." (the folders of streams being made or
# deleted) are refused by the pattern already. Compared without case: some file systems ignore it.
RESERVED_STREAM_NAMES = frozenset({"zarr.json", ".zattrs", ".zgroup", ".zarray", ".zmetadata"})


def check_stream_name(name: str) -> str:
    """Stream names become folder names: refuse anything that could escape the data directory or take the place of
    the frame store's own files."""
    if not _STREAM_NAME.fullmatch(name) or ".." in name:
        raise StoreError(
            f"bad stream name {name!r}: use 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit")
    if name.lower() in RESERVED_STREAM_NAMES:
        raise StoreError(f"bad stream name {name!r}: the frame store keeps a file of that name for itself; choose "
                         f"another name")
    return name


@dataclass(frozen=True, slots=True)
class Clip:
    """Frames of one stream, in media-time order: ``frames[i]`` was shown at ``times[i]`` seconds."""

    frames: np.ndarray  # uint8 (N, H, W, 3), RGB
    times: np.ndarray  # float64 (N,), media seconds from the stream's start

    def __len__(self) -> int:
        return len(self.times)


AUDIO_RATE = 16_000  # samples per second of stored audio (mono): what speech recognisers take


@dataclass(frozen=True, slots=True)
class AudioClip:
    """Mono audio of one stream: ``samples[i]`` was heard at ``start + i / sample_rate`` media seconds.

    Stretches of the span that hold no audio (a live stream's outage inside it) read as silence (zeros), so the
    time of every sample follows from its index.
    """

    samples: np.ndarray  # float32 (N,), in [-1, 1]
    sample_rate: int  # AUDIO_RATE
    start: float  # media time (s) of samples[0]

    def __len__(self) -> int:
        return len(self.samples)

    @property
    def end(self) -> float:
        """Media time just after the last sample."""
        return self.start + len(self.samples) / self.sample_rate

    @property
    def seconds(self) -> float:
        return len(self.samples) / self.sample_rate

    @classmethod
    def empty(cls, start: float = 0.0, sample_rate: int = AUDIO_RATE) -> AudioClip:
        return cls(np.empty(0, dtype=np.float32), sample_rate, float(start))


@dataclass(frozen=True, slots=True)
class Gap:
    """Media time during which a live stream delivered nothing (it dropped and was reconnected)."""

    start: float
    end: float
    reason: str = ""


@dataclass(frozen=True)
class StreamInfo:
    """What a stream's frame store holds; everything here is safe to show (the source is redacted)."""

    name: str
    source: str
    live: bool
    frames: int
    first_time: float | None
    last_time: float | None
    stored_fps: float
    width: int
    height: int
    codec: str
    wall_start: float | None  # Unix time of media time 0 (live streams)
    complete: bool  # a file was decoded to its end
    lost: str | None  # what a damaged source could not give
    gaps: list[Gap] = field(default_factory=list)
    expired_before: float = 0.0  # retention deleted every frame before this media time (memory text is kept)
    thinned_before: float = 0.0  # frames before this media time were thinned to a coarse rate by retention
    created: float | None = None  # Unix time the stream's store was created (tells a re-created stream apart)
    audio: bool = False  # the stream's source carries an audio track that is stored (see FrameStore.read_audio)
    audio_until: float = 0.0  # media time up to which audio is committed

    @property
    def media_seconds(self) -> float:
        """Media time covered so far (the end of the last stored frame's sampling interval)."""
        return 0.0 if self.last_time is None else self.last_time + 1.0 / self.stored_fps

    @property
    def covered_seconds(self) -> float:
        """Media time the stream's memory can cover so far: its frames' :attr:`media_seconds`, or for a stream
        with no frames (a file or feed of sound alone) its committed audio's :attr:`audio_until`.

        Audio never extends a stream that has frames: on a live stream committed audio may run ahead of the
        pictures, and a span must not close before its frames are in."""
        return self.media_seconds if self.last_time is not None else self.audio_until


@dataclass(frozen=True)
class RetentionState:
    """What retention has deleted from a stream's frames (see :mod:`lucy.ingest.retention`).

    Frames before ``dropped_before`` are gone. Between ``dropped_before`` and ``thinned_before`` only the first
    frame of each ``1 / fps`` slot is left, ``fps`` being the rate of the thinning segment the frame lies in
    (``thinned``: ``(before, fps)`` pairs in time order, each covering media time up to its ``before``).
    """

    dropped_before: float = 0.0
    thinned: tuple[tuple[float, float], ...] = ()
    bytes_freed: int = 0  # by retention over the stream's life

    @property
    def thinned_before(self) -> float:
        return max(self.dropped_before, self.thinned[-1][0]) if self.thinned else self.dropped_before


class FrameStore(ABC):
    """One stream's stored frames. One writer appends; any number of readers, in any process.

    A store is opened for reading (:meth:`FrameStores.open`) or as the stream's one writer
    (:meth:`FrameStores.create`, :meth:`FrameStores.open_writer`). The writer side (``append`` and the metadata
    setters) and the retention side (``thin_before``, ``drop_before``, ``save_accounting``) are part of the
    interface, so that ingest and retention work on any backend. A store opened for reading refuses the writer
    side (:class:`StoreError`); the retention side is for the data directory's one retention owner, which works on
    stores opened for reading (retention keeps its own record and never touches what the writer writes).
    """

    name: str

    # ----------------------------------------------------------------------------------- reading

    @abstractmethod
    def committed(self) -> int:
        """Number of frames a reader can see. Never counts a frame that is not fully written."""

    @abstractmethod
    def times(self) -> np.ndarray:
        """Media times of the committed frames a reader can get back (those retention has not deleted)."""

    @abstractmethod
    def read(self, start: float, end: float, fps: float | None = None) -> Clip:
        """Committed frames with ``start <= t < end``, thinned to about ``fps`` (None: all stored frames).
        Frames deleted by retention are never returned (a span whose frames expired gives an empty clip)."""

    @abstractmethod
    def info(self) -> StreamInfo:
        """The stream's description and progress."""

    def has_audio(self) -> bool:
        """Whether the stream stores audio (its source has an audio track). A stream without audio reads as
        empty: :meth:`audio_until` 0.0 and empty clips."""
        return False

    def audio_until(self) -> float:
        """Media time up to which audio is committed (readers never see audio past it); 0.0 without audio."""
        return 0.0

    def audio_seconds(self) -> float:
        """Seconds of audio stored (outages not counted); 0.0 without audio."""
        return 0.0

    def read_audio(self, start: float, end: float) -> AudioClip:
        """Committed audio heard in ``[start, end)``, mono float32 at :data:`AUDIO_RATE`. The clip starts at the
        first stored sample at or after ``start`` and ends at ``min(end, audio_until())``; an outage inside
        the span reads as silence. An empty clip (starting at ``start``) when there is none."""
        return AudioClip.empty(start)

    def holds_source(self, source: str) -> bool:
        """Whether the stream was created from the source ``source`` names (as given, credentials and all: the
        store compares it with what it keeps, never keeps it). A resumed ingest refuses another source."""
        raise NotImplementedError(f"{type(self).__name__} does not record its source")

    # ----------------------------------------------------------------------------------- writing

    @abstractmethod
    def append(self, frames: np.ndarray, times: np.ndarray) -> int:
        """Store and commit frames (times strictly increasing, after all stored ones); return the count."""

    def append_audio(self, samples: np.ndarray, start: float) -> float:
        """Store and commit mono samples at :data:`AUDIO_RATE` (float32 in [-1, 1]) heard from media time
        ``start`` on (at or after :meth:`audio_until`; a later start leaves a gap). Returns ``audio_until()``."""
        raise NotImplementedError(f"{type(self).__name__} does not store audio")

    def set_wall_start(self, wall_start: float) -> None:
        """Record the Unix time of media time 0 of a live stream (the first call wins)."""
        raise NotImplementedError(f"{type(self).__name__} is read-only")

    def add_gap(self, gap: Gap) -> None:
        """Record media time during which a live stream delivered nothing."""
        raise NotImplementedError(f"{type(self).__name__} is read-only")

    def mark_finished(self, *, complete: bool, lost: str | None) -> None:
        """Record how a file's ingest ended: read to its end (``complete``), or what it could not give."""
        raise NotImplementedError(f"{type(self).__name__} is read-only")

    # ----------------------------------------------------------------------------------- retention

    def available_from(self) -> float:
        """Media time before which retention has deleted every frame (0.0: none deleted). Memory text of that
        time is kept; only its frames are gone, so it cannot be captioned again."""
        return 0.0

    def retention_state(self) -> RetentionState:
        """What retention has deleted so far (nothing, for stores without retention)."""
        return RetentionState()

    def stored_bytes(self) -> int:
        """Bytes the stored frames take (what retention's byte bound counts)."""
        raise NotImplementedError(f"{type(self).__name__} has no retention")

    def thin_before(self, t: float, keep_fps: float) -> int:
        """Thin the frames before media time ``t`` to ``keep_fps`` (never the newest committed frame); returns
        the bytes freed."""
        raise NotImplementedError(f"{type(self).__name__} has no retention")

    def drop_before(self, t: float) -> int:
        """Delete every frame before media time ``t`` (never the newest committed frame); returns the bytes
        freed."""
        raise NotImplementedError(f"{type(self).__name__} has no retention")

    def save_accounting(self) -> None:
        """Persist what :meth:`stored_bytes` counted, so that other processes need not count again."""


class FrameStores(ABC):
    """The frame stores of one data directory, one per stream: the catalogue every caller goes through to list,
    open, create and delete streams' frames. Nothing else knows where or how a backend keeps them (files of a
    local Zarr store today; objects of an S3 bucket tomorrow).

    Stream names are checked (:func:`check_stream_name`) by every method that takes one.
    """

    @abstractmethod
    def names(self) -> list[str]:
        """Names of the streams stored, sorted."""

    @abstractmethod
    def exists(self, name: str) -> bool:
        """Whether a stream of that name is stored (a stream being created or deleted is not)."""

    @abstractmethod
    def open(self, name: str) -> FrameStore:
        """A read-only view of a stream (any number, in any process); :class:`StoreError` if there is none."""

    @abstractmethod
    def open_writer(self, name: str) -> FrameStore:
        """An existing stream, to append to it (hold the stream's writer lock: one writer per stream)."""

    @abstractmethod
    def create(self, name: str, *, source: str, live: bool, width: int, height: int, stored_fps: float,
               codec: str, quality: int, audio: bool = False) -> FrameStore:
        """Create a stream and return its writer; :class:`StoreError` if it exists. ``source`` is the source as
        given: the store keeps it redacted, plus a salted hash of its identity that
        :meth:`FrameStore.holds_source` checks. The stream appears whole, or not at all. ``audio``: the source
        has sound, to be stored with :meth:`FrameStore.append_audio`; a source without pictures (sound only) is
        created with width and height 0 and never appends frames."""

    @abstractmethod
    def delete(self, name: str) -> bool:
        """Delete a stream's frames (hold its writer lock); False if there was no such stream."""


def pick_rate(times: np.ndarray, start: float, end: float, fps: float | None) -> np.ndarray:
    """Indices of the frames in ``[start, end)`` nearest to a regular grid of ``fps`` frames per second."""
    lo, hi = np.searchsorted(times, [start, end], side="left")
    if fps is None or hi - lo <= 1:
        return np.arange(lo, hi)
    window = times[lo:hi]
    first, last = float(window[0]), float(window[-1])
    count = max(1, int(np.floor((last - first) * fps + 1e-6)) + 1)
    targets = first + np.arange(count) / fps
    right = np.clip(np.searchsorted(window, targets), 1, len(window) - 1)
    left = right - 1
    nearest = np.where(targets - window[left] <= window[right] - targets, left, right)
    return lo + np.unique(nearest)

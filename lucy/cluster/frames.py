"""Frames of a cluster: the catalogue in PostgreSQL, the pixels in an S3 bucket as immutable per-epoch segments.

A stream ``cam`` is one row of ``frame_streams`` (what :class:`StreamInfo` says that no segment does: the redacted
source, its salted identity, size, codec, how its ingest ended...) and one row of ``frame_segments`` per owner epoch
that wrote to it (:mod:`lucy.cluster.leases`). The segment of epoch ``E`` holds the stream's frames
``[first_index, first_index + frames)``; its pixels are an ordinary Zarr frame group (:mod:`lucy.ingest.zarr_store`)
at ``<frames.s3_url>/cam/e<E:06d>/``, made on the owner's first append.

Commit protocol: an append writes its frames into the owner's own group first, then raises the segment's row in one
transaction with :meth:`Lease.check`. Readers count only what the rows say, so a frame is visible once its row
commits, and never before. An owner that lost its lease (a zombie) may still put objects into its own group, but
its row is refused (:class:`Fenced`): what it wrote lies past the count PostgreSQL keeps, in a group no later owner
writes to, where no reader ever looks. A segment other than the stream's newest never changes again, so readers keep
its times once read.

Retention is not supported here yet (each of its calls is a :class:`StoreError`): use the bucket's lifecycle rules.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from lucy.cluster.leases import Lease
from lucy.config import LucySettings
from lucy.config.settings import FrameSettings
from lucy.errors import StoreError
from lucy.ingest.frames import (
    AUDIO_RATE,
    AudioClip,
    Clip,
    FrameStore,
    FrameStores,
    Gap,
    StreamInfo,
    check_stream_name,
    pick_rate,
)
from lucy.ingest.object_store import NoRetention, S3Root
from lucy.ingest.source import source_identity, source_matches, stored_source_id
from lucy.ingest.zarr_store import ZarrFrameStore
from lucy.memory.postgres_store import Cursor, PostgresMemoryStore
from lucy.redaction import redact_url


@dataclass(frozen=True)
class Segment:
    """One owner epoch's part of a stream, as its row in ``frame_segments`` says (what readers may see)."""

    epoch: int
    first_index: int
    frames: int
    first_time: float | None
    last_time: float | None
    audio_start: float | None
    audio_until: float

    @property
    def group(self) -> str:
        """The segment's Zarr group, under the stream's prefix."""
        return segment_group(self.epoch)


def segment_group(epoch: int) -> str:
    return f"e{epoch:06d}"


_SEGMENT_COLUMNS = "g.epoch, g.first_index, g.frames, g.first_time, g.last_time, g.audio_start, g.audio_until"


def _read_segments(db: Cursor, stream: str) -> list[Segment] | None:
    """The stream's segments in epoch order; None if there is no such stream."""
    rows = db.execute(f"SELECT {_SEGMENT_COLUMNS} FROM frame_streams s LEFT JOIN frame_segments g "
                      "ON g.stream = s.stream WHERE s.stream = %s ORDER BY g.epoch", (stream,)).fetchall()
    if not rows:
        return None
    return [Segment(int(r[0]), int(r[1]), int(r[2]), r[3], r[4], r[5], float(r[6])) for r in rows if r[0] is not None]


def _last_time(segments: list[Segment]) -> float | None:
    return next((s.last_time for s in reversed(segments) if s.frames), None)


def _audio_until(segments: list[Segment]) -> float:
    return max((s.audio_until for s in segments), default=0.0)


class ClusterFrameStore(FrameStore):
    """One stream's frames on a cluster (see the module's docstring). Opened through :class:`ClusterFrameStores`:
    for reading (no lease), or as the stream's writer under ``lease``, whose epoch names the segment it appends to.
    """

    def __init__(self, stores: ClusterFrameStores, name: str, lease: Lease | None = None) -> None:
        self.name = check_stream_name(name)
        self.db = stores.db
        self.root = stores.stream_root(name)
        self.lease = lease
        self._fixed = self._meta()  # what never changes: source id, size, codec...
        self._readers: dict[int, ZarrFrameStore] = {}
        self._final_times: dict[int, np.ndarray] = {}  # of segments a later epoch superseded
        self._retention = NoRetention(f"{self.root.url} (cluster)")
        self._writer: ZarrFrameStore | None = None  # the lease's segment group, made on the first append
        self._row: Segment | None = None  # and its row, as this writer last committed it
        self._base = 0  # frames of the earlier segments
        self._last: float | None = None  # the stream's newest committed frame time
        self._until = 0.0  # the stream's committed audio

    # ----------------------------------------------------------------------------------- catalogue

    def _meta(self) -> dict[str, Any]:
        row = self.db.run(lambda c: c.execute("SELECT meta FROM frame_streams WHERE stream = %s",
                                              (self.name,)).fetchone())
        if row is None:
            raise StoreError(f"no stream named {self.name!r} in the cluster's frame catalogue")
        return dict(row[0])

    def _segments(self) -> list[Segment]:
        segments = self.db.run(lambda c: _read_segments(c, self.name))
        if segments is None:
            raise StoreError(f"stream {self.name!r} was removed")
        return segments

    def _reader(self, segment: Segment) -> ZarrFrameStore:
        reader = self._readers.get(segment.epoch)
        if reader is None:
            reader = self._readers[segment.epoch] = ZarrFrameStore.open(self.root, segment.group)
        return reader

    # ----------------------------------------------------------------------------------- reading

    def committed(self) -> int:
        return sum(s.frames for s in self._segments())

    def times(self) -> np.ndarray:
        return self._times(self._segments())

    def _times(self, segments: list[Segment]) -> np.ndarray:
        """The stream's frame times: each segment's, up to the count its row commits."""
        parts = [self._segment_times(s, final=s is not segments[-1]) for s in segments if s.frames]
        return np.concatenate(parts) if parts else np.empty(0)

    def _segment_times(self, segment: Segment, *, final: bool) -> np.ndarray:
        cached = self._final_times.get(segment.epoch)
        if cached is not None:
            return cached
        times = self._reader(segment).times()[:segment.frames]
        if len(times) < segment.frames:
            raise StoreError(f"stream {self.name!r}: segment {segment.group} in {self.root.url} holds "
                             f"{len(times)} frames, its catalogue row {segment.frames}")
        if final:
            self._final_times[segment.epoch] = times
        return times

    def read(self, start: float, end: float, fps: float | None = None) -> Clip:
        segments = self._segments()
        times = self._times(segments)
        index = pick_rate(times, start, end, fps)
        if len(index) == 0:
            return self._empty_clip()
        pixels = []
        offset = 0  # of the segment's first frame in the stream (its first_index)
        for segment in segments:
            lo, hi = np.searchsorted(index, [offset, offset + segment.frames])
            if hi > lo:
                pixels.append(self._reader(segment).read_at(index[lo:hi] - offset).frames)
            offset += segment.frames
        return Clip(np.concatenate(pixels), times[index].copy())

    def _empty_clip(self) -> Clip:
        h, w = self._fixed["height"], self._fixed["width"]
        return Clip(np.empty((0, h, w, 3), dtype=np.uint8), np.empty(0))

    def info(self) -> StreamInfo:
        meta, segments = self._meta(), self._segments()
        filled = [s for s in segments if s.frames]
        return StreamInfo(
            name=self.name, source=meta["source"], live=meta["live"], frames=sum(s.frames for s in segments),
            first_time=filled[0].first_time if filled else None, last_time=_last_time(segments),
            stored_fps=meta["stored_fps"], width=meta["width"], height=meta["height"], codec=meta["codec"],
            wall_start=meta["wall_start"], complete=meta["complete"], lost=meta["lost"],
            gaps=[Gap(**g) for g in meta["gaps"]], created=meta["created"], audio=meta["audio"],
            audio_until=_audio_until(segments))

    def holds_source(self, source: str) -> bool:
        return source_matches(self._fixed["source_id"], source)

    # ----------------------------------------------------------------------------------- audio

    def has_audio(self) -> bool:
        return bool(self._fixed["audio"])

    def audio_until(self) -> float:
        return _audio_until(self._segments()) if self.has_audio() else 0.0

    def audio_seconds(self) -> float:
        """Seconds of audio stored: each segment's, capped by the span its row commits (a zombie's late audio
        is not counted)."""
        total = 0.0
        for s in self._segments():
            if s.audio_start is not None:
                total += min(self._reader(s).audio_seconds(), s.audio_until - s.audio_start)
        return total

    def read_audio(self, start: float, end: float) -> AudioClip:
        segments = self._segments()
        end = min(end, _audio_until(segments))
        pieces = []
        for s in segments:
            if s.audio_start is not None and s.audio_start < end and s.audio_until > start:
                piece = self._reader(s).read_audio(max(start, s.audio_start), min(end, s.audio_until))
                if len(piece):
                    pieces.append(piece)
        if not pieces:
            return AudioClip.empty(start)
        clip_start = pieces[0].start
        out = np.zeros(max(0, round((end - clip_start) * AUDIO_RATE)), dtype=np.float32)
        for piece in pieces:  # silence between the segments' audio
            at = round((piece.start - clip_start) * AUDIO_RATE)
            part = piece.samples[:max(0, len(out) - at)]
            out[at:at + len(part)] = part
        return AudioClip(out, AUDIO_RATE, clip_start)

    # ----------------------------------------------------------------------------------- writing

    def _held(self) -> Lease:
        if self.lease is None:
            raise StoreError(f"stream {self.name!r} was opened read-only; its writer (the lease holder) appends")
        return self.lease

    def _fenced(self, sql: str, params: tuple[Any, ...]) -> None:
        """One fenced write: ``sql`` commits only while this writer's lease still holds the stream."""
        lease = self._held()

        def work(db: Cursor) -> None:
            lease.check(db)
            db.execute(sql, params)

        self.db.run(work, write=True)

    def _segment(self) -> ZarrFrameStore:
        """The lease's segment group, its row made (fenced) and its group made or opened on first use; refused if
        the group holds more than the row commits (an earlier append of this epoch failed half-way)."""
        if self._writer is None:
            self._begin()
            row = self._row
            assert row is not None
            if self.root.exists(row.group):
                self._writer = ZarrFrameStore.open_writer(self.root, row.group)
            else:
                f = self._fixed
                self._writer = ZarrFrameStore.create(
                    self.root, row.group, source=f["source"], source_id=f["source_id"], live=f["live"],
                    width=f["width"], height=f["height"], stored_fps=f["stored_fps"], codec=f["codec"],
                    quality=f["quality"], audio=f["audio"])
        assert self._row is not None
        if (self._writer.committed(), self._writer.audio_until()) != (self._row.frames, self._row.audio_until):
            raise StoreError(f"stream {self.name!r}: segment {self._row.group} holds data its catalogue row does "
                             "not commit (an append failed half-way); write on under a new lease")
        return self._writer

    def _begin(self) -> None:
        """Make this epoch's segment row (first_index: the frames committed before it), fenced, and learn the
        stream's state from the catalogue."""
        lease = self._held()

        def work(db: Cursor) -> list[Segment] | None:
            lease.check(db)
            db.execute("INSERT INTO frame_segments (stream, epoch, first_index) "
                       "SELECT %s, %s, COALESCE(SUM(frames), 0) FROM frame_segments WHERE stream = %s "
                       "ON CONFLICT (stream, epoch) DO NOTHING", (self.name, lease.epoch, self.name))
            return _read_segments(db, self.name)

        segments = self.db.run(work, write=True)
        if segments is None:
            raise StoreError(f"stream {self.name!r} was removed")
        self._row = next(s for s in segments if s.epoch == lease.epoch)
        others = [s for s in segments if s.epoch != lease.epoch]
        self._base = sum(s.frames for s in others)
        self._last = _last_time(segments)
        self._until = _audio_until(segments)

    def _commit(self, row: Segment) -> None:
        self._fenced("UPDATE frame_segments SET frames = %s, first_time = %s, last_time = %s, audio_start = %s, "
                     "audio_until = %s WHERE stream = %s AND epoch = %s",
                     (row.frames, row.first_time, row.last_time, row.audio_start, row.audio_until, self.name,
                      row.epoch))
        self._row = row

    def append(self, frames: np.ndarray, times: np.ndarray) -> int:
        times = np.asarray(times, dtype=np.float64)
        if len(times) == 0:
            return self.committed()
        segment = self._segment()
        row = self._row
        assert row is not None
        if (self._last is not None and times[0] <= self._last) or np.any(np.diff(times) <= 0):
            raise ValueError("frame times must be strictly increasing")
        segment.append(frames, times)  # the pixels first: nobody sees them before the row counts them
        first = row.first_time if row.frames else float(times[0])
        self._commit(Segment(row.epoch, row.first_index, row.frames + len(times), first, float(times[-1]),
                             row.audio_start, row.audio_until))
        self._last = float(times[-1])
        return self._base + row.frames + len(times)

    def append_audio(self, samples: np.ndarray, start: float) -> float:
        if not self.has_audio():
            raise StoreError(f"stream {self.name!r} was created without audio")
        if len(samples) == 0:
            return self.audio_until()
        segment = self._segment()
        row = self._row
        assert row is not None
        if start < self._until - 1.5 / AUDIO_RATE:
            raise ValueError(f"audio at {start:.4f} s starts before the stored audio's end ({self._until:.4f} s)")
        until = segment.append_audio(samples, start)
        first = row.audio_start if row.audio_start is not None else float(start)
        self._commit(Segment(row.epoch, row.first_index, row.frames, row.first_time, row.last_time, first, until))
        self._until = until
        return until

    def set_wall_start(self, wall_start: float) -> None:
        self._fenced("UPDATE frame_streams SET meta = jsonb_set(meta, '{wall_start}', to_jsonb(%s::float8)) "
                     "WHERE stream = %s AND meta->>'wall_start' IS NULL", (float(wall_start), self.name))

    def add_gap(self, gap: Gap) -> None:
        self._fenced("UPDATE frame_streams SET meta = jsonb_set(meta, '{gaps}', (meta->'gaps') || %s::jsonb) "
                     "WHERE stream = %s", (json.dumps([asdict(gap)]), self.name))

    def mark_finished(self, *, complete: bool, lost: str | None) -> None:
        self._fenced("UPDATE frame_streams SET meta = meta || %s::jsonb WHERE stream = %s",
                     (json.dumps({"complete": complete, "lost": lost}), self.name))

    # ----------------------------------------------------------------------------------- retention

    def stored_bytes(self) -> int:
        return self._retention.stored_bytes()

    def thin_before(self, t: float, keep_fps: float) -> int:
        return self._retention.thin_before(t, keep_fps)

    def drop_before(self, t: float) -> int:
        return self._retention.drop_before(t)


_READERS: dict[tuple[str, int], ClusterFrameStores] = {}  # this process's readers, by bucket settings and database
_READERS_LOCK = threading.Lock()


class ClusterFrameStores(FrameStores):
    """The streams' frames of a cluster: the catalogue in ``db`` (the memory store's PostgreSQL database), the
    segments under ``frames.s3_url``. With a ``lease``, this catalogue is that stream's writer side (``create``,
    ``open_writer``); without one it only reads (and lists, and deletes)."""

    def __init__(self, db: PostgresMemoryStore, frames: FrameSettings, lease: Lease | None = None) -> None:
        if not frames.s3_url:
            raise StoreError("frames on a cluster need an S3 bucket: set frames.s3_url (s3://bucket[/prefix])")
        self.db = db
        self.frames = frames
        self.lease = lease
        self._roots: dict[str, S3Root] = {}  # one S3 client (and its connection pool) per stream, reused
        self._lock = threading.Lock()

    def stream_root(self, name: str) -> S3Root:
        """The stream's prefix, ``<frames.s3_url>/<name>``: one Zarr group per segment under it."""
        with self._lock:
            root = self._roots.get(name)
            if root is None:
                f = self.frames
                root = self._roots[name] = S3Root(
                    f"{f.s3_url.rstrip('/')}/{check_stream_name(name)}", endpoint=f.s3_endpoint, region=f.s3_region,
                    access_key_id=f.s3_access_key_id, secret_access_key=f.s3_secret_access_key.get_secret_value(),
                    retry_seconds=f.s3_retry_seconds, timeout_seconds=f.s3_timeout_seconds)
            return root

    def _lease_for(self, name: str) -> Lease:
        if self.lease is None or self.lease.stream != name:
            raise StoreError(f"stream {name!r}: only the holder of its lease writes its frames "
                             "(this catalogue holds " + ("none" if self.lease is None else
                                                          f"the lease of {self.lease.stream!r}") + ")")
        return self.lease

    def names(self) -> list[str]:
        rows = self.db.run(lambda c: c.execute("SELECT stream FROM frame_streams ORDER BY stream").fetchall())
        return [r[0] for r in rows]

    def exists(self, name: str) -> bool:
        check_stream_name(name)
        return self.db.run(lambda c: c.execute("SELECT 1 FROM frame_streams WHERE stream = %s",
                                               (name,)).fetchone()) is not None

    def open(self, name: str) -> ClusterFrameStore:
        return ClusterFrameStore(self, name)

    def open_writer(self, name: str) -> ClusterFrameStore:
        return ClusterFrameStore(self, name, self._lease_for(check_stream_name(name)))

    def create(self, name: str, *, source: str, live: bool, width: int, height: int, stored_fps: float,
               codec: str, quality: int, audio: bool = False) -> ClusterFrameStore:
        lease = self._lease_for(check_stream_name(name))
        meta = {"source": redact_url(source_identity(source)[0]), "source_id": stored_source_id(source),
                "live": live, "stored_fps": stored_fps, "width": width, "height": height, "codec": codec,
                "quality": quality, "audio": audio, "created": time.time(), "wall_start": None,
                "complete": False, "lost": None, "gaps": []}

        def work(db: Cursor) -> bool:
            lease.check(db)
            return db.execute("INSERT INTO frame_streams (stream, meta) VALUES (%s, %s::jsonb) "
                              "ON CONFLICT (stream) DO NOTHING", (name, json.dumps(meta))).rowcount == 1

        if not self.db.run(work, write=True):
            raise StoreError(f"stream {name!r} already exists in the cluster's frame catalogue")
        return ClusterFrameStore(self, name, lease)

    def delete(self, name: str) -> bool:
        """The rows first (the stream is gone for everyone), then every object under its prefix. Fenced when this
        catalogue holds the stream's lease."""
        check_stream_name(name)

        def work(db: Cursor) -> bool:
            if self.lease is not None:
                self.lease.check(db, name)
            return db.execute("DELETE FROM frame_streams WHERE stream = %s", (name,)).rowcount == 1

        if not self.db.run(work, write=True):
            return False
        self.stream_root(name).clear()
        return True


def open_cluster_frames(settings: LucySettings, db: PostgresMemoryStore | None = None,
                        lease: Lease | None = None) -> ClusterFrameStores:
    """The cluster's frame stores: the catalogue in ``db``, the segments in ``settings.frames``' bucket. Without a
    ``db`` or ``lease``, this process's one reader (each question opens its stream's frames: their database
    connections and S3 clients are reused). Retention settings are refused by :func:`lucy.wiring.open_frames`."""
    if db is None and lease is None:
        from lucy.memory.postgres_store import shared_postgres

        key = settings.frames.model_dump_json(), id(shared_postgres(settings))
        with _READERS_LOCK:
            reader = _READERS.get(key)
            if reader is None:
                reader = _READERS[key] = ClusterFrameStores(shared_postgres(settings), settings.frames)
        return reader
    if db is None:
        raise StoreError("the writer of a stream's frames opens them with its own fenced database handle")
    return ClusterFrameStores(db, settings.frames, lease)


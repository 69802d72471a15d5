"""The storage maintainer: keeps a data directory's frames within their ages and its disk within bounds.

Every ``retention.interval_seconds`` (an asyncio task of ``lucy serve``; the work runs in a thread), for every
stream the server records (those of its stream list: a stream that ``lucy ingest`` recorded, or that was removed from
the server without ``purge``, is never touched):

- age rules, against the stream's newest committed frame: frames older than ``full_seconds`` are thinned to the
  coarse level's rate (:meth:`FrameStore.thin_before`), frames older than ``keep_seconds`` are deleted
  (:meth:`FrameStore.drop_before`); a stream's own ages override the server's;
- a disk-pressure guard, for all streams together (Frigate's storage maintainer): while the stored frame bytes
  exceed ``max_bytes`` or the disk's free space is below ``min_free_bytes``, the oldest frames by wall-clock time
  across streams are deleted, a step at a time, until the bound holds again (never a stream's newest frame).

Retention never destroys what it cannot save:

- frames not yet captioned are kept: a stream with a captioner keeps every frame from the end of its captioned
  coarse memory on (:meth:`MemoryStore.captioned_until`), whatever its ages and the guard say; once a span's coarse
  node is stored its frames may go (a stream whose captioner is ``none`` is never captioned: its ages and the guard
  apply to all of its frames);
- a free-space floor the disk cannot meet is scaled to it: the floor is ``min(min_free_bytes, min_free_fraction *
  the disk's size)`` (a 100 MB volume keeps 10 MB free, not 1 GiB: the default floor would otherwise delete all but
  each stream's newest frame), and the maintainer says so in the log, with the figures, when it starts.

Recordings (:mod:`lucy.ingest.recording`) of the same streams join in: segments older than
``recording.retention_days`` behind the stream's newest segment are deleted, and while the disk's free space is below
the floor the oldest segments across streams (by wall-clock time) go first, before any frame: a recording is for
watching, frames are what memory is made of. ``max_bytes`` counts frames only. The segment being written is never
deleted.

Memory text is never deleted, nor what the detect stage observed (tracks with their snapshots of a few tens of kB,
per-frame counts): questions about a span whose frames are gone answer from memory and observations and say the
frames have expired; only deleting the stream (``purge``) removes them. Bytes stored are counted cheaply
(:meth:`FrameStore.stored_bytes`: one count per stream, then a stat per new frame), and the figures go to
:class:`lucy.metrics.RetentionStats` for the metrics.

A full disk refuses even the small record retention writes before it deletes anything, so the maintainer keeps
a reserve file of :data:`RESERVE_BYTES` in the data directory and gives it up to make that room.
"""

from __future__ import annotations

import asyncio
import bisect
import errno
import logging
import math
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from lucy.config import LucySettings
from lucy.errors import StoreError
from lucy.ingest.frames import FrameStore, FrameStores
from lucy.ingest.segments import Segment, list_segments, recorded_bytes
from lucy.metrics.stats import RetentionStats

log = logging.getLogger(__name__)


class CaptionedMemory(Protocol):
    """What retention asks of the memory store (:class:`lucy.memory.store.MemoryStore` has it): how far a stream's
    coarse memory reaches, and the spans people were shown (alerts, answers' evidence), whose recordings are kept
    longer. Ingest sits below memory, so it names only this."""

    def captioned_until(self, stream: str) -> float: ...

    def event_spans(self, stream: str) -> list[tuple[float, float]]: ...

RESERVE_FILE = ".retention-reserve"
RESERVE_BYTES = 1 << 20
_MAX_GUARD_STEPS = 256  # per pass; the next pass goes on
_STEP_FRAMES = 20_000  # most frames one deletion covers: a step takes about a second, so a pass stops soon
_T = TypeVar("_T")


@dataclass
class RetentionPass:
    """What one pass did: bytes freed per (stream, reason), bytes stored per stream after it, where each stream's
    uncaptioned (kept) frames begin, the disk's free space and the floor kept, and whether the guard's bound still
    fails (only the streams' newest frames and their uncaptioned ones are left)."""

    freed: dict[tuple[str, str], int] = field(default_factory=dict)
    stored: dict[str, int] = field(default_factory=dict)
    kept_from: dict[str, float] = field(default_factory=dict)
    disk_free: int | None = None
    min_free: int | None = None
    over_bound: bool = False
    seconds: float = 0.0
    events: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # stream -> spans people were shown

    @property
    def freed_bytes(self) -> int:
        return sum(self.freed.values())


class RetentionMaintainer:
    """Applies retention to the streams ``streams()`` names (default: every stream of ``settings.data``).
    ``settings_for(name)`` gives a stream's own settings (its preset, captioner and retention ages); the guard's
    bounds and the interval are ``settings``'s. Given ``memory``, frames not yet captioned into it are kept.

    There must be one per data directory (``lucy serve`` holds the directory's server lock): it is the only
    process that deletes frames or writes the streams' retention records."""

    def __init__(self, settings: LucySettings, *, settings_for: Callable[[str], LucySettings] | None = None,
                 stats: RetentionStats | None = None, frames: FrameStores,
                 streams: Callable[[], Iterable[str]] | None = None, memory: CaptionedMemory | None = None) -> None:
        self.settings = settings
        self.data = Path(settings.data)
        self.frames = frames
        self.settings_for = settings_for or (lambda _name: settings)
        self.streams = streams
        self.memory = memory
        self.stats = stats or RetentionStats()
        self._stores: dict[str, tuple[FrameStore, float | None]] = {}  # name -> (store, its creation time)
        self._stuck_warned = False
        self._floor_said: tuple[int, int] | None = None  # (disk size, floor) last said in the log
        self._stopping = threading.Event()  # a pass in its thread stops between steps once the task is cancelled

    # ------------------------------------------------------------------------------------------ running

    async def run_forever(self) -> None:
        """Run a pass every ``retention.interval_seconds`` until cancelled (a failed pass is logged, and the
        next one runs as usual)."""
        interval = self.settings.retention.interval_seconds
        try:
            while True:
                try:
                    await asyncio.to_thread(self.run_once)
                except Exception:  # keep maintaining; the traceback is in the log
                    self.stats.failures += 1
                    log.exception("frame retention pass failed")
                await asyncio.sleep(interval)
        finally:
            self._stopping.set()

    def run_once(self) -> RetentionPass:
        """One pass over every stream: age rules, then the disk guard. Blocking (disk I/O)."""
        began = time.monotonic()
        report = RetentionPass()
        if not self.data.is_dir():
            return report
        names = self.frames.names()
        if self.streams is not None:  # only what this server records: never a stream it does not know
            mine = set(self.streams())
            names = [name for name in names if name in mine]
        for gone in set(self._stores) - set(names):
            del self._stores[gone]
        for gone in set(self.stats.snapshot()[0]) - set(names):
            self.stats.forget(gone)
        stores: dict[str, FrameStore] = {}
        for name in names:
            try:
                store = self._store(name)
                report.kept_from[name] = self._kept_from(name)
                self._ages(name, store, report)
                self._recording_ages(name, report)
                report.stored[name] = self._room(store.stored_bytes)
                stores[name] = store
            except (StoreError, OSError) as err:  # removed meanwhile, or a disk error: the next pass tries again
                self.stats.failures += 1
                log.warning("frame retention of stream %s: %s", name, err)
        self._guard(stores, report)
        for name, store in stores.items():
            try:
                self._room(store.save_accounting)
            except (StoreError, OSError) as err:
                log.warning("frame retention of stream %s: %s", name, err)
            self.stats.measured(name, report.stored.get(name, 0))
            self.stats.measured_recording(name, recorded_bytes(self.data, name))
        self._keep_reserve()
        self.stats.passes += 1
        report.seconds = time.monotonic() - began
        if report.freed_bytes:
            log.info("frame retention freed %.1f MB in %.2f s (%s)", report.freed_bytes / 1e6, report.seconds,
                     ", ".join(f"{s} {r} {b / 1e6:.1f} MB" for (s, r), b in sorted(report.freed.items())))
        return report

    def _store(self, name: str) -> FrameStore:
        """A cached reader of the stream (its byte count and times stay in memory); a stream deleted and made
        again under the same name gets a new one."""
        cached = self._stores.get(name)
        if cached is not None:
            store, created = cached
            if self.frames.exists(name) and store.info().created == created:
                return store
        store = self.frames.open(name)
        self._stores[name] = (store, store.info().created)
        return store

    def _freed(self, report: RetentionPass, name: str, reason: str, nbytes: int) -> None:
        if nbytes:
            report.freed[(name, reason)] = report.freed.get((name, reason), 0) + nbytes
            self.stats.record_freed(name, reason, nbytes)

    # ------------------------------------------------------------------------------------------ rules

    def _kept_from(self, name: str) -> float:
        """Media time from which the stream's frames are kept whatever the rules say: the end of its captioned
        coarse memory (infinity without a memory store, or for a stream without a captioner: nothing would ever
        caption them)."""
        if self.memory is None or self.settings_for(name).captioner.backend == "none":
            return math.inf
        return self.memory.captioned_until(name)

    def min_free(self, disk_size: int) -> int:
        """The free-space floor kept on a disk of ``disk_size`` bytes: ``min_free_bytes``, at most
        ``min_free_fraction`` of the disk (said in the log at WARNING, once per figure, when that lowers it)."""
        bounds = self.settings.retention
        floor = min(bounds.min_free_bytes, int(bounds.min_free_fraction * disk_size))
        if floor < bounds.min_free_bytes and self._floor_said != (disk_size, floor):
            log.warning("frame retention: retention.min_free_bytes (%.1f MB) cannot be kept free on the data "
                        "directory's disk of %.1f MB: it keeps %.1f MB free instead (retention.min_free_fraction = "
                        "%g of the disk)", bounds.min_free_bytes / 1e6, disk_size / 1e6, floor / 1e6,
                        bounds.min_free_fraction)
        self._floor_said = (disk_size, floor)
        return floor

    def _ages(self, name: str, store: FrameStore, report: RetentionPass) -> None:
        """Age rules, measured from the stream's newest committed frame."""
        settings = self.settings_for(name)
        rules = settings.retention
        info = store.info()
        if info.last_time is None:
            return
        kept = report.kept_from.get(name, math.inf)  # neither rule reaches frames not yet captioned
        if rules.keep_seconds > 0:
            self._advance(store, report, "expired", min(info.last_time - rules.keep_seconds, kept),
                          lambda: store.info().expired_before, store.drop_before)
        keep_fps = settings.levels.coarse.fps
        if rules.full_seconds > 0 and keep_fps < info.stored_fps:
            self._advance(store, report, "thinned", min(info.last_time - rules.full_seconds, kept),
                          lambda: store.info().thinned_before, lambda t: store.thin_before(t, keep_fps))

    def _event_spans(self, name: str, report: RetentionPass) -> list[tuple[float, float]]:
        """The stream's alert and evidence spans (read once a pass; none without a memory store)."""
        if name not in report.events:
            report.events[name] = self.memory.event_spans(name) if self.memory is not None else []
        return report.events[name]

    def _shown(self, name: str, segment: Segment, report: RetentionPass) -> bool:
        """Whether the segment overlaps an alert or an answer's evidence of its stream."""
        spans = self._event_spans(name, report)
        end = segment.end if segment.end is not None else math.inf
        # spans are sorted by start: only those starting before the segment's end can overlap it
        return any(span_end > segment.start for _, span_end in spans[:bisect.bisect_left(spans, (end,))])

    def _recording_ages(self, name: str, report: RetentionPass) -> None:
        """Delete the stream's segments that end ``recording.retention_days`` before its newest one ends (those
        people were shown, ``recording.event_retention_days`` when that is longer)."""
        rules = self.settings_for(name).recording
        days = rules.retention_days
        segments = list_segments(self.data, name) if days > 0 else []
        if len(segments) < 2:
            return
        newest = max(s.end or 0.0 for s in segments)
        limit = newest - days * 86_400
        shown_limit = (newest - max(days, rules.event_retention_days) * 86_400 if rules.event_retention_days > 0
                       else -math.inf)
        for segment in segments[:-1]:
            if self._stopping.is_set() or (segment.end or 0.0) > limit:
                return
            if (segment.end or 0.0) > shown_limit and self._shown(name, segment, report):
                continue
            self._drop_segment(report, name, "recording_expired", segment)

    def _drop_segment(self, report: RetentionPass, name: str, reason: str, segment: Segment) -> int:
        """Delete one recorded segment; the bytes freed (0 if it was gone already)."""
        try:
            segment.path.unlink()
        except FileNotFoundError:
            return 0
        report.freed[(name, reason)] = report.freed.get((name, reason), 0) + segment.size
        self.stats.record_recording_freed(name, reason.removeprefix("recording_"), segment.size)
        return segment.size

    def _oldest_segment(self, stores: dict[str, FrameStore], report: RetentionPass) -> tuple[str, Segment] | None:
        """The closed segment recorded longest ago (wall-clock time) across the streams, with its stream: one that
        no alert or evidence overlaps while there is one, else the oldest of those."""
        found: tuple[bool, float, str, Segment] | None = None
        for name, store in stores.items():
            segments = list_segments(self.data, name)
            if not segments:  # not recorded: no frame store read, no memory asked
                continue
            info = store.info()
            base = info.wall_start if info.wall_start is not None else float(info.created or 0.0)
            plain = next((s for s in segments if not self._shown(name, s, report)), None)
            segment = plain if plain is not None else segments[0]
            if found is None or (plain is None, base + segment.start) < found[:2]:
                found = (plain is None, base + segment.start, name, segment)
        return None if found is None else (found[2], found[3])

    def _advance(self, store: FrameStore, report: RetentionPass, reason: str, target: float,
                 boundary: Callable[[], float], cut: Callable[[float], int]) -> None:
        """Move a retention boundary to ``target`` in steps of at most :data:`_STEP_FRAMES` frames (a stream
        that gets its first ages after months of recording is worked off over a few passes, never in one)."""
        info = store.info()
        step = _STEP_FRAMES / info.stored_fps
        while not self._stopping.is_set():
            current = max(boundary(), info.first_time or 0.0)
            if target <= current:
                return
            t = min(target, current + step)
            self._freed(report, store.name, reason, self._room(lambda t=t: cut(t)))
            if t >= target or boundary() <= current:
                return

    def _guard(self, stores: dict[str, FrameStore], report: RetentionPass) -> None:
        """Delete the oldest frames across streams while the bytes bound or the free-space floor fails."""
        bounds = self.settings.retention
        stuck: set[str] = set()
        for _ in range(_MAX_GUARD_STEPS):
            if self._stopping.is_set():
                return
            disk = shutil.disk_usage(self.data)
            free, floor = disk.free, self.min_free(disk.total)
            report.disk_free = self.stats.disk_free = free
            report.min_free = floor
            over = sum(report.stored.values()) - bounds.max_bytes if bounds.max_bytes else 0
            short = floor - free if floor else 0
            need = max(over, short)
            if need <= 0:
                self._stuck_warned = False
                return
            reason = "max_bytes" if over >= short else "min_free"
            if reason == "min_free" and (recorded := self._oldest_segment(stores, report)) is not None:
                self._drop_segment(report, recorded[0], "recording_min_free", recorded[1])  # recordings go first
                continue
            oldest = self._oldest(stores, stuck, report.kept_from)
            if not oldest:
                report.over_bound = True
                if not self._stuck_warned:
                    log.warning("frame retention: %s still fails (%.1f MB over) with only each stream's newest "
                                "frame and its frames not yet captioned left (those are kept)",
                                "retention.max_bytes" if reason == "max_bytes" else "retention.min_free_bytes",
                                need / 1e6)
                    self._stuck_warned = True
                return
            name, t = self._step(stores, oldest, report.stored.get(oldest[0][1], 0), need)
            store = stores[name]
            before = store.available_from()
            freed = self._room(lambda store=store, t=t: store.drop_before(t))
            self._freed(report, name, reason, freed)
            report.stored[name] = store.stored_bytes()
            if freed == 0 and store.available_from() <= before:
                stuck.add(name)

    @staticmethod
    def _oldest(stores: dict[str, FrameStore], stuck: set[str],
                kept_from: dict[str, float]) -> list[tuple[float, str, float, float, float, float]]:
        """Streams that still have frames to give, oldest first: (wall time of the oldest frame, name, its media
        time, media time of the newest, stored fps, media time from which frames are kept). Wall time is the
        stream's ``wall_start`` (live) or creation time (files) plus media time."""
        out = []
        for name, store in stores.items():
            if name in stuck:
                continue
            info = store.info()
            if info.last_time is None or info.first_time is None:
                continue
            first = max(info.expired_before, info.first_time)
            limit = min(info.last_time, kept_from.get(name, math.inf))
            if first >= limit:
                continue  # only the newest frame, or frames not yet captioned, are left: they are never deleted
            base = info.wall_start if info.wall_start is not None else float(info.created or 0.0)
            out.append((base + first, name, first, info.last_time, info.stored_fps, limit))
        return sorted(out)

    @staticmethod
    def _step(stores: dict[str, FrameStore], oldest: list[tuple[float, str, float, float, float, float]],
              stored: int, need: int) -> tuple[str, float]:
        """The stream to cut and the media time to cut it at: about ``need`` bytes of its oldest frames, but not
        past the wall time of the next-oldest stream's oldest frame (so the streams are cut in wall-time order)
        nor into its frames not yet captioned; at least one frame when it has one to give."""
        wall, name, first, last, fps, limit = oldest[0]
        per_second = stored / max(last - first, 1.0 / fps)
        t = first + min(max(need / max(per_second, 1.0), 1.0 / fps), _STEP_FRAMES / fps)
        if len(oldest) > 1:
            t = min(t, max(first + oldest[1][0] - wall, first + 1.0 / fps))
        return name, min(t, limit)

    # ------------------------------------------------------------------------------------------ a full disk

    def _room(self, action: Callable[[], _T]) -> _T:
        """Run ``action``; on a full disk give up the reserve file and try once more."""
        try:
            return action()
        except OSError as err:
            if err.errno != errno.ENOSPC or not self._release_reserve():
                raise
            log.warning("the data directory's disk is full: released the retention reserve to free frames")
            return action()

    def _release_reserve(self) -> bool:
        try:
            (self.data / RESERVE_FILE).unlink()
        except FileNotFoundError:
            return False
        return True

    def _keep_reserve(self) -> None:
        """Make the reserve file again once there is room for it (and then some)."""
        path = self.data / RESERVE_FILE
        if path.exists():
            return
        try:
            if shutil.disk_usage(self.data).free < 4 * RESERVE_BYTES:
                return
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)
            finally:
                os.close(fd)
        except FileExistsError:
            return
        except OSError as err:  # no room after all, or a file system without fallocate: try on the next pass
            path.unlink(missing_ok=True)
            log.debug("retention reserve not made: %s", err)

"""The dashboard's live figures: :class:`DashboardFeed` samples every stream's status (from the stream runtime), its
chart point and the host's CPU and memory (:class:`HostSampler`) once per interval, however many dashboards are open;
:class:`LatestFrames` keeps each stream's newest frame as a small JPEG. Presentation of the service, kept apart from
the runtime's one status view (:mod:`lucy.runtime.status`).
"""

from __future__ import annotations

import collections
import io
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from lucy.ingest import FrameStore


class HostSampler:
    """CPU and memory of the machine, of the server's process and of each stream's worker (psutil), and the
    disk the data directory is on; keeps the last ``points`` machine samples for the dashboard's host chart.

    Not thread-safe: one caller at a time (:class:`DashboardFeed` holds a lock)."""

    def __init__(self, data: Path, points: int = 300) -> None:
        import psutil

        self._psutil = psutil
        self.data = data
        self.history: collections.deque[dict[str, float]] = collections.deque(maxlen=points)
        self._cpu = psutil.cpu_times()  # own deltas: psutil.cpu_percent() shares its state with every caller
        self._server = psutil.Process()
        self._server.cpu_percent(None)
        self._workers: dict[int, Any] = {}

    def _cpu_percent(self) -> float:
        now = self._psutil.cpu_times()
        fields = [f for f in now._fields if f not in ("guest", "guest_nice")]  # already counted in user and nice
        total = sum(getattr(now, f) - getattr(self._cpu, f) for f in fields)
        idle = sum(getattr(now, f) - getattr(self._cpu, f) for f in ("idle", "iowait") if f in fields)
        self._cpu = now
        return 0.0 if total <= 0 else max(0.0, min(100.0, 100.0 * (1.0 - idle / total)))

    def _worker(self, pid: int) -> tuple[float, int] | None:
        """CPU (percent of one core, since the last sample) and resident memory of a stream worker."""
        proc = self._workers.get(pid)
        try:
            if proc is None:
                proc = self._workers[pid] = self._psutil.Process(pid)
                proc.cpu_percent(None)  # the first reading has nothing to compare with
            return proc.cpu_percent(None), proc.memory_info().rss
        except (self._psutil.NoSuchProcess, self._psutil.AccessDenied):
            self._workers.pop(pid, None)
            return None

    def sample(self, workers: dict[str, int]) -> dict[str, Any]:
        """The figures now; ``workers`` maps stream names to their workers' process ids."""
        mem = self._psutil.virtual_memory()
        try:
            disk = self._psutil.disk_usage(str(self.data))
            disk_free, disk_total = disk.free, disk.total
        except OSError:
            disk_free = disk_total = None
        cpu = round(self._cpu_percent(), 1)
        point = {"t": round(time.time(), 1), "cpu_percent": cpu, "memory_percent": round(mem.percent, 1)}
        self.history.append(point)
        per_worker = {}
        for name, pid in workers.items():
            figures = self._worker(pid)
            if figures is not None:
                per_worker[name] = {"cpu_percent": round(figures[0], 1), "rss_bytes": figures[1]}
        for gone in set(self._workers) - set(workers.values()):
            self._workers.pop(gone, None)
        try:
            server_rss = self._server.memory_info().rss
            server_cpu = round(self._server.cpu_percent(None), 1)
        except self._psutil.Error:
            server_rss, server_cpu = None, None
        return {**point, "cpus": self._psutil.cpu_count() or 1, "load1": round(self._psutil.getloadavg()[0], 2),
                "memory_used_bytes": mem.total - mem.available, "memory_total_bytes": mem.total,
                "server_cpu_percent": server_cpu, "server_rss_bytes": server_rss,
                "disk_free_bytes": disk_free, "disk_total_bytes": disk_total, "workers": per_worker}


class StatusSource(Protocol):
    """What the dashboard's feed reads: the stream runtime (:class:`lucy.runtime.protocol.StreamRuntime`)."""

    def statuses(self) -> list[dict[str, Any]]: ...

    def managed(self) -> Sequence[Any]: ...


@dataclass(frozen=True)
class FeedTick:
    """One sample of everything the dashboard shows live: every stream's status, the newest chart point of each
    stream the server records, and the host's figures."""

    statuses: list[dict[str, Any]]
    points: dict[str, dict[str, Any]]
    host: dict[str, Any]


class DashboardFeed:
    """Samples what the dashboard's event stream pushes, once per ``interval`` however many dashboards are open.
    Blocking (stream stores, /proc): call :meth:`tick` in a worker thread."""

    def __init__(self, streams: StatusSource, data: Path, interval: float) -> None:
        self.streams = streams
        self.interval = interval
        self.host = HostSampler(data)
        self._lock = threading.Lock()
        self._last: tuple[float, int, FeedTick] | None = None
        self._generation = 0  # moves on with every change of a stream's state: older samples are not reused

    def changed(self) -> None:
        """A stream started, stopped or was deleted: the next :meth:`tick` samples afresh."""
        self._generation += 1

    def tick(self) -> FeedTick:
        with self._lock:
            now, generation = time.monotonic(), self._generation
            last = self._last
            if last is not None and last[1] == generation and now - last[0] < self.interval / 2:
                return last[2]
            statuses = self.streams.statuses()
            workers = {s["name"]: s["worker_pid"] for s in statuses if s.get("worker_pid")}
            points = {s.name: s.history[-1] for s in self.streams.managed() if s.history}
            tick = FeedTick(statuses, points, self.host.sample(workers))
            self._last = (now, generation, tick)
            return tick


def status_changes(before: dict[str, Any] | None, after: dict[str, Any]) -> dict[str, Any]:
    """The fields of a stream's status that differ from what a dashboard was sent before (all of them at first):
    what the dashboard's event stream sends, since most fields of most streams stay the same from tick to tick."""
    if before is None:
        return after
    return {k: v for k, v in after.items() if before.get(k) != v}


class LatestFrames:
    """The newest stored frame of each stream as a small JPEG (the dashboard's live thumbnails), encoded once
    per new frame and size however many dashboards ask."""

    def __init__(self, quality: int = 70, max_entries: int = 256) -> None:
        self.quality = quality
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, int], tuple[float, bytes]] = {}

    def jpeg(self, name: str, store: FrameStore, width: int) -> tuple[float, bytes] | None:
        """(media time, JPEG) of the newest frame of ``store`` scaled to ``width``; None without frames.
        Blocking: call in a worker thread."""
        from PIL import Image

        last = store.info().last_time
        if last is None:
            return None
        key = (name, width)
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and cached[0] == last:
            return cached
        clip = store.read(last, last + 1e-6)
        if len(clip) == 0:
            return None
        image = Image.fromarray(clip.frames[-1])
        if width < image.width:
            image = image.resize((width, max(1, round(image.height * width / image.width))), Image.BILINEAR)
        out = io.BytesIO()
        image.save(out, format="JPEG", quality=self.quality)
        entry = (last, out.getvalue())
        with self._lock:
            if len(self._cache) >= self.max_entries:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = entry
        return entry

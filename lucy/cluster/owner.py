"""A stream's owner on a Ray cluster: the one process that records it, wherever Ray placed it.

Each wanted stream has one detached, named Ray actor, ``owner:<stream>``, on a node that offers the cluster's
``ingest`` resource (:func:`ensure_owner`). Ray restarts it on another such node when its node or process dies. The
actor records the stream as a ``lucy serve`` worker does (:class:`lucy.runtime.worker.StreamRun`: ingest, coarse
captions, watches), with two differences:

- **it holds the stream's lease first** (:mod:`lucy.cluster.leases`) and writes only through stores fenced by it:
  the memory store checks the lease in every node write, the frame store in every segment commit. A restarted
  owner takes the lease over at once (a new epoch) and resumes after the last committed frame; whatever the old
  incarnation still writes is refused. An owner whose lease was taken from it stops its run and waits to hold the
  lease again;
- **it reports to a log, not a pipe** (:class:`MessageLog`): any number of API replicas read the same reports
  (:meth:`StreamOwner.events`), none consumes them.
"""

from __future__ import annotations

import collections
import logging
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from lucy.cluster.registry import ClusterRegistry
from lucy.config import LucySettings
from lucy.errors import StoreError
from lucy.ingest import FrameStores
from lucy.ingest.lock import Holder
from lucy.memory.postgres_store import PostgresMemoryStore
from lucy.memory.store import MemoryStore
from lucy.metrics import CaptionCall, StreamProgress
from lucy.runtime.messages import BusEvent, RunEnd, StateChange, StreamState, WorkerMessage
from lucy.runtime.registry import StreamSpec
from lucy.runtime.worker import PROGRESS_EVERY_SECONDS, StreamRun

log = logging.getLogger(__name__)

KEEP_MESSAGES = 2000  # reports kept for replicas that poll (a replica that falls further behind skips ahead)


def owner_name(stream: str) -> str:
    """The Ray actor name of a stream's owner."""
    return f"owner:{stream}"


class MessageLog:
    """A run's reports, numbered, for readers that poll (:meth:`since`): the latest progress record, its state,
    and the events since a reader's last poll. Safe from any thread; never raises (a :class:`Reporter`)."""

    def __init__(self, keep: int = KEEP_MESSAGES) -> None:
        self.incarnation = uuid.uuid4().hex  # a restarted owner numbers its reports afresh
        self._lock = threading.Lock()
        self._seq = 0
        self._events: collections.deque[tuple[int, WorkerMessage]] = collections.deque(maxlen=keep)
        self.progress = StreamProgress()
        self.state: StateChange | None = None
        self.end: RunEnd | None = None

    def send(self, message: WorkerMessage) -> None:
        with self._lock:
            if isinstance(message, StreamProgress):
                self.progress = message
                return
            if isinstance(message, StateChange):
                self.state = message
            elif isinstance(message, RunEnd):
                self.end = message
            self._seq += 1
            self._events.append((self._seq, message))

    def publish(self, event: dict[str, Any]) -> None:
        self.send(BusEvent(event))

    def on_caption_call(self, call: CaptionCall) -> None:
        self.send(call)

    def since(self, incarnation: str, seq: int) -> tuple[str, int, list[WorkerMessage]]:
        """(incarnation, last number, reports): the progress record, then what came after report ``seq`` of
        ``incarnation``. A reader new to this incarnation gets the current state (and the end, if any) only."""
        with self._lock:
            out: list[WorkerMessage] = [self.progress]
            if incarnation != self.incarnation:
                out += [m for m in (self.state, self.end) if m is not None]
            else:
                out += [message for number, message in self._events if number > seq]
            return self.incarnation, self._seq, out


class OwnedRun(StreamRun):
    """A stream's run under a lease: its memory and frame stores are fenced by it."""

    def __init__(self, spec: StreamSpec, settings: LucySettings, reports: MessageLog, lease: Any) -> None:
        super().__init__(spec, settings, reports)
        self.lease = lease

    def open_stores(self) -> tuple[MemoryStore, FrameStores]:
        """Stores fenced by the lease. Their nodes are not announced here: every replica hears of them from
        PostgreSQL (:mod:`lucy.cluster.listener`)."""
        from lucy.cluster.frames import open_cluster_frames

        memory = PostgresMemoryStore.for_settings(self.settings, migrate=False)
        memory.set_fence(self.lease)
        try:
            return memory, open_cluster_frames(self.settings, memory, lease=self.lease)
        except BaseException:
            memory.close()
            raise

    def holder(self) -> Holder:
        return Holder.this_process(f"lucy cluster owner of {self.spec.name} (epoch {self.lease.epoch})")


class StreamOwner:
    """The body of the ``owner:<stream>`` actor (made a Ray actor by :func:`ensure_owner`). Its thread holds the
    lease and records the stream until the run ends or :meth:`stop`."""

    def __init__(self, spec: StreamSpec, settings: LucySettings) -> None:
        import ray

        from lucy.cluster.leases import owner_id

        self.spec = spec
        self.owner = owner_id()
        # A node-local scratch folder for what a recording keeps on its machine (its writer lock): the stream's
        # frames and memory live in the shared stores.
        self.scratch = Path(tempfile.mkdtemp(prefix=f"lucy-owner-{spec.name}-"))
        self.settings = settings.model_copy(update={"data": self.scratch})
        self.reports = MessageLog()
        self.epoch: int | None = None
        self._stopping = threading.Event()
        self._run: OwnedRun | None = None
        self._lock = threading.Lock()
        # Ray made this actor again: its previous incarnation's node or process died. Take the lease over at once.
        take_over = bool(ray.get_runtime_context().was_current_actor_reconstructed)
        self._thread = threading.Thread(target=self._own, args=(take_over,), name=f"owner-{spec.name}", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------------------- what replicas call

    def events(self, incarnation: str = "", seq: int = 0) -> tuple[str, int, list[WorkerMessage]]:
        """The reports after ``seq`` (see :meth:`MessageLog.since`)."""
        return self.reports.since(incarnation, seq)

    def describe(self) -> dict[str, Any]:
        """Who owns the stream now: this owner's name, epoch and node."""
        import ray

        return {"owner": self.owner, "epoch": self.epoch, "node": ray.get_runtime_context().get_node_id(),
                "ended": self.reports.end is not None}

    def stop(self) -> None:
        """End the recording (committed frames and nodes are kept); returns at once."""
        self._stopping.set()
        with self._lock:
            if self._run is not None:
                self._run.stop()

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the recording to end; whether it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # ---------------------------------------------------------------------------- the owner's thread

    def _own(self, take_over: bool) -> None:
        from lucy.cluster.leases import Fenced, Leases

        settings = self.settings
        ttl = settings.cluster.lease_seconds
        db = PostgresMemoryStore.for_settings(settings, migrate=False)  # connects on first use (the replicas migrate)
        leases = Leases(db, ttl)
        waiting_said = False
        try:
            while not self._stopping.is_set():
                try:
                    lease = leases.acquire(self.spec.name, self.owner, take_over=take_over)
                except StoreError as err:  # the database is away: ask again (still taking over, if we were)
                    log.warning("stream %s: cannot take its lease yet: %s", self.spec.name, err)
                    self._stopping.wait(ttl / 4)
                    continue
                take_over = False
                if lease is None:
                    if not waiting_said:
                        self.reports.send(StateChange(StreamState.STARTING))
                        waiting_said = True
                    self._stopping.wait(ttl / 4)
                    continue
                end = self._record(lease, leases)
                if end is None:  # the stores failed (not the source): record again once they are back
                    self._stopping.wait(ttl / 2)
                    continue
                try:
                    leases.renew(lease)  # still ours: the run really ended
                except Fenced:
                    log.warning("stream %s: owner %s lost the stream (epoch %d) to another owner; waiting",
                                self.spec.name, self.owner, lease.epoch)
                    waiting_said = False
                    continue
                except StoreError:
                    pass
                else:
                    leases.release(lease)
                self._record_end(db, end)
                self.reports.send(end)
                return
            self.reports.send(RunEnd(StreamState.STOPPED))
        finally:
            db.close()
            shutil.rmtree(self.scratch, ignore_errors=True)

    def _record_end(self, db: PostgresMemoryStore, end: RunEnd) -> None:
        """Keep how the run ended in the wanted streams' table: replicas read it there once this owner is gone."""
        for _ in range(10):
            try:
                ClusterRegistry(db).set_ended(self.spec.name, end)
                return
            except StoreError as err:
                log.warning("stream %s: cannot record its end yet: %s", self.spec.name, err)
                self._stopping.wait(1.0)

    def _record(self, lease: Any, leases: Any) -> RunEnd | None:
        """Record under ``lease``, renewing it and reporting progress as it goes; how the run ended, or None if
        the shared stores failed it (the database or the object store is away, or the lease was lost)."""
        from lucy.cluster.leases import Fenced

        self.epoch = lease.epoch
        log.info("stream %s: owned by %s (epoch %d)", self.spec.name, self.owner, lease.epoch)
        run = OwnedRun(self.spec, self.settings, self.reports, lease)
        with self._lock:
            self._run = run
        if self._stopping.is_set():
            run.stop()
        done = threading.Event()

        def tend() -> None:
            """Report progress twice a second; renew the lease every third of its life."""
            renewed = time.monotonic()
            while not done.wait(PROGRESS_EVERY_SECONDS):
                run.report()
                if time.monotonic() - renewed < leases.ttl / 3:
                    continue
                try:
                    leases.renew(lease)
                    renewed = time.monotonic()
                except Fenced:
                    run.stop()  # another owner holds the stream now: every write of ours would be refused
                    return
                except StoreError as err:  # the database is away: our writes wait on it too; keep trying
                    log.warning("stream %s: cannot renew its lease: %s", self.spec.name, err)

        tender = threading.Thread(target=tend, name=f"lease-{self.spec.name}", daemon=True)
        tender.start()
        try:
            end = run.run()
        except StoreError as err:  # the stores could not be opened
            log.warning("stream %s: cannot record: %s", self.spec.name, err)
            return None
        finally:
            done.set()
            tender.join()
            run.report()
            with self._lock:
                self._run = None
        if isinstance(run.failure, StoreError) and not self._stopping.is_set():
            log.warning("stream %s: recording stopped by its stores: %s", self.spec.name, run.failure)
            return None
        return end


def ensure_owner(spec: StreamSpec, settings: LucySettings) -> Any:
    """The stream's owner actor, started if there is none (any replica may call this at any time: Ray keeps one
    actor per name). Needs ``ray.init`` done (:func:`lucy.cluster.manager.connect`)."""
    import ray

    cluster = settings.cluster
    actor = ray.remote(StreamOwner).options(
        name=owner_name(spec.name), namespace=cluster.namespace, lifetime="detached", get_if_exists=True,
        max_restarts=-1, max_concurrency=4, num_cpus=cluster.owner_cpus, resources={cluster.ingest_resource: 1},
        scheduling_strategy="SPREAD")  # owners over as many nodes as can take them: a node's death moves fewer
    return actor.remote(spec, settings)

"""The API replicas' side of a cluster: the wanted streams in PostgreSQL, reconciled with their Ray owners.

Any number of ``lucy serve --cluster ADDRESS`` replicas run the same HTTP API, SSE, OpenAI chat API and dashboard.
They hold no stream state of their own: the streams wanted are rows of ``cluster_streams``
(:mod:`lucy.cluster.registry`), each recorded by its owner actor (:mod:`lucy.cluster.owner`). Every replica follows
every owner's reports (:class:`OwnerHandle`, in place of a local worker process) and, every
``cluster.reconcile_seconds``, reconciles the table with what it follows (:class:`ClusterStreamManager`, the cluster's
:class:`lucy.runtime.protocol.StreamRuntime`): a stream another replica added is followed (and its owner started, if
it has none), one another replica removed is let go. Stopping a replica leaves the owners running.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from lucy.cluster.duties import hold_duty
from lucy.cluster.listener import NodeListener
from lucy.cluster.registry import ClusterRegistry
from lucy.config import LucySettings
from lucy.errors import LucyError, StoreError
from lucy.ingest import FrameStores
from lucy.memory.postgres_store import PostgresMemoryStore
from lucy.memory.store import MemoryStore
from lucy.runtime.events import EventBus
from lucy.runtime.messages import RunEnd, StateChange, StreamState, WorkerExit, WorkerMessage
from lucy.runtime.registry import StreamSpec
from lucy.runtime.status import stored_progress
from lucy.runtime.streams import ManagedStream, StreamManager

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5  # how often a replica asks an owner for its reports
CALL_TIMEOUT_SECONDS = 10.0
REACH_TIMEOUT_SECONDS = 5.0


def connect(settings: LucySettings) -> None:
    """Join the Ray cluster at ``cluster.address`` as a client (once per process), with ``cluster.auth_token`` when
    one is set: Ray reads its authentication settings from the environment when it is first imported, so they are
    put there before that."""
    token = settings.cluster.auth_token.get_secret_value()
    if token:
        if "ray" in sys.modules and os.environ.get("RAY_AUTH_TOKEN") != token:
            raise LucyError("cluster.auth_token must be set before Ray is imported in this process")
        os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
        os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
    import ray

    if ray.is_initialized():
        return
    address = settings.cluster.address
    if address != "auto" and not address.startswith("ray://"):
        _reach(address)  # Ray itself would wait for an unreachable head for minutes
    try:
        ray.init(address=settings.cluster.address, namespace=settings.cluster.namespace, log_to_driver=False,
                 logging_level=logging.WARNING, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise LucyError(f"cannot join the Ray cluster at {settings.cluster.address}: {err}") from None


def _reach(address: str) -> None:
    """Fail at once, with one clear line, when nothing answers at the head's ``host:port``."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise LucyError(f"cluster.address {address!r} must be host:port (the Ray head's GCS port, e.g. "
                        "head.local:6379), ray://host:10001 or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=REACH_TIMEOUT_SECONDS).close()
    except OSError as err:
        raise LucyError(f"cannot reach the Ray cluster's head at {address}: {err.strerror or err} "
                        "(is `ray start --head` running there, and is the port open?)") from None


class OwnerHandle:
    """A replica's handle on one stream's owner actor, with the surface of a local worker process
    (:class:`lucy.runtime.worker_process.WorkerProcess`): :meth:`messages` starts the owner if it has none and yields
    its reports until its run ends; :meth:`stop` ends the recording; :meth:`detach` stops following without stopping
    it (a replica that shuts down)."""

    def __init__(self, spec: StreamSpec, settings: LucySettings) -> None:
        self.spec, self.settings = spec, settings
        self.pid: int | None = None  # the owner runs elsewhere
        self._actor: Any = None
        self._detached = threading.Event()

    def messages(self) -> Iterator[WorkerMessage | WorkerExit]:
        import ray
        from ray.exceptions import ActorDiedError, ActorUnavailableError, GetTimeoutError, RayActorError

        from lucy.cluster.owner import ensure_owner
        from lucy.memory.postgres_store import shared_postgres

        registry = ClusterRegistry(shared_postgres(self.settings))
        incarnation, seq = "", 0
        away_said = False
        while not self._detached.is_set():
            try:
                if self._actor is None:
                    ended = registry.ended(self.spec.name)
                    if ended is not None:  # recorded to its end already: its owner is gone
                        yield from self._recorded(ended)
                        yield WorkerExit(0)
                        return
                    self._actor = ensure_owner(self.spec, self.settings)
                incarnation, seq, batch = ray.get(self._actor.events.remote(incarnation, seq),
                                                  timeout=CALL_TIMEOUT_SECONDS)
            except (ActorUnavailableError, GetTimeoutError):  # restarting on another node, or busy: ask again
                if not away_said:
                    yield StateChange(StreamState.STARTING)
                    away_said = True
                self._detached.wait(POLL_SECONDS)
                continue
            except ActorDiedError:  # ended (its end is recorded), removed, or out of restarts
                self._actor = None
                ended = registry.ended(self.spec.name)
                if ended is not None:  # its last reports may have gone with it (another replica let it go)
                    yield from self._recorded(ended)
                yield WorkerExit(0 if ended is not None else None)
                return
            except StoreError as err:  # the database is away: ask again
                log.warning("stream %s: cannot read its state: %s", self.spec.name, err)
                self._detached.wait(POLL_SECONDS)
                continue
            except RayActorError:
                self._detached.wait(POLL_SECONDS)
                continue
            away_said = False
            for message in batch:
                yield message
                if isinstance(message, RunEnd):  # recorded by the owner: let it go, and its ingest capacity
                    ray.kill(self._actor, no_restart=True)
                    self._actor = None
                    yield WorkerExit(0)
                    return
            self._detached.wait(POLL_SECONDS)
        yield RunEnd(StreamState.STOPPED)
        yield WorkerExit(0)

    def _recorded(self, end: RunEnd) -> Iterator[WorkerMessage]:
        """A run that ended without this replica hearing its owner's last reports: its progress as the stores
        hold it (frames committed, captions written), then its recorded end."""
        from lucy.cluster.frames import open_cluster_frames
        from lucy.memory.postgres_store import shared_postgres

        try:
            progress = stored_progress(open_cluster_frames(self.settings).open(self.spec.name).info(),
                                       shared_postgres(self.settings))
        except StoreError:  # nothing committed, or the stores are away: the status reads them itself later
            pass
        else:
            yield progress
        yield end

    def stop(self) -> None:
        """Ask the owner to end its recording (committed frames and nodes are kept)."""
        if self._actor is not None:
            self._actor.stop.remote()

    def kill(self) -> None:
        """End the owner actor for good (it is not restarted)."""
        import ray

        if self._actor is not None:
            ray.kill(self._actor, no_restart=True)

    def detach(self) -> None:
        self._detached.set()


class OwnedStream(ManagedStream):
    """A stream of the cluster as one replica sees it: its owner's reports, followed."""

    worker_type = OwnerHandle

    def detach(self) -> None:
        """Stop following the owner, leaving it to record (a replica that shuts down)."""
        self._stopping.set()
        if isinstance(self._worker, OwnerHandle):
            self._worker.detach()

    def end_owner(self) -> None:
        """End the owner actor for good (the stream was removed)."""
        if isinstance(self._worker, OwnerHandle):
            self._worker.kill()

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for this replica to stop following."""
        if self._thread is not None:
            self._thread.join(timeout)


class ClusterStreamManager(StreamManager):
    """The streams of the cluster, as one stateless API replica manages them (see the module's docstring)."""

    stream_type = OwnedStream

    def _worker_args(self) -> tuple[()]:
        return ()  # an owner opens its stores fenced by its lease (lucy.cluster.owner.OwnedRun)

    def __init__(self, settings: LucySettings, memory: MemoryStore, bus: EventBus, *,
                 frames: FrameStores) -> None:
        if not isinstance(memory, PostgresMemoryStore):
            raise StoreError('a cluster keeps its memory in PostgreSQL (memory.backend = "postgres")')
        super().__init__(settings, memory, bus, frames=frames)
        connect(settings)
        self.registry = ClusterRegistry(memory)  # type: ignore[assignment]
        self._reconciling = threading.Event()
        self._reconciler: threading.Thread | None = None
        self._listener: NodeListener | None = None

    def resume(self) -> list[str]:
        """Follow every wanted stream (starting owners that have none), then keep reconciling."""
        started = self.reconcile()
        self._reconciler = threading.Thread(target=self._reconcile_forever, name="cluster-reconcile", daemon=True)
        self._reconciler.start()
        return started

    def reconcile(self) -> list[str]:
        """Follow the wanted streams this replica does not follow (again: one started anew on another replica);
        let go of those no longer wanted."""
        wanted = {spec.name: spec for spec in self.registry.load()}
        recording = self.registry.recording()
        started = []
        for name, spec in wanted.items():
            stream = self.get(name)
            if stream is not None:
                if not stream.active and name in recording:
                    stream.start()  # another replica started it again after it ended
                    started.append(name)
                continue
            stream = self.stream_type(spec, self.settings, self.memory, self.bus, self.frames)
            with self._lock:
                if name in self._streams:
                    continue
                self._streams[name] = stream
            stream.start()
            started.append(name)
        for stream in self.managed():
            if stream.name not in wanted and isinstance(stream, OwnedStream):
                with self._lock:
                    self._streams.pop(stream.name, None)
                stream.detach()
        return started

    def _reconcile_forever(self) -> None:
        while not self._reconciling.wait(self.settings.cluster.reconcile_seconds):
            try:
                self.reconcile()
            except LucyError as err:  # the database is away: try again next time
                log.warning("cannot reconcile the cluster's streams: %s", err)
            except Exception:
                log.exception("reconciling the cluster's streams failed")

    def remove(self, name: str, *, purge: bool = False) -> dict[str, Any]:
        """Stop the stream's owner and forget the stream (every replica lets it go at its next reconcile)."""
        stream = self.get(name)
        status = super().remove(name, purge=purge)
        if isinstance(stream, OwnedStream):
            stream.end_owner()
        return status

    def shutdown(self, timeout: float = 60.0) -> None:
        """Stop following the owners; they go on recording for the other replicas."""
        self._reconciling.set()
        for stream in self.managed():
            if isinstance(stream, OwnedStream):
                stream.detach()
        deadline = time.monotonic() + timeout
        for stream in self.managed():
            if isinstance(stream, OwnedStream):
                stream.join(max(0.0, deadline - time.monotonic()))
        if self._listener is not None:
            self._listener.stop()
            self._listener = None

    # ------------------------------------------------------------------------------------ deployment

    @property
    def replicated(self) -> bool:
        """Any number of replicas follow the same owners."""
        return True

    def announce_nodes(self) -> None:
        """Announce every node stored anywhere on the cluster (an owner's captions, another replica's question):
        this replica hears of each from PostgreSQL (:mod:`lucy.cluster.listener`)."""
        if self._listener is None:
            dsn = self.settings.memory.postgres_dsn
            assert dsn is not None  # a cluster's settings name its database
            self._listener = NodeListener(self.memory, dsn.get_secret_value(), self.bus).start()  # type: ignore[arg-type]

    async def hold_duty(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work()`` while this replica holds the cluster's delivery duty (:mod:`lucy.cluster.duties`)."""
        await hold_duty(self.memory, self.settings.cluster.lease_seconds, work)  # type: ignore[arg-type]

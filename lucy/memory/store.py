"""The memory-store boundary: nodes by stream, level, time and text, plus the question/answer history.

Callers know :class:`MemoryStore` alone; a backend (SQLite today, PostgreSQL tomorrow) implements it and keeps its
connections and files to itself. Whoever wants to see what is stored (the server's event bus, metrics) registers a
:class:`MemoryObserver` instead of wrapping the store. Every text written goes through this class first and loses its
NUL characters (:func:`lucy.untrusted.strip_nul`): PostgreSQL refuses them, SQLite keeps them; both hold the same.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from lucy.config import Level
from lucy.memory.nodes import MemoryNode
from lucy.memory.observations import clean_observations
from lucy.memory.watches import Alert, Watch
from lucy.perception.objects import CountSample, Observations, TrackedObject
from lucy.untrusted import strip_nul

log = logging.getLogger(__name__)

EVENT_QUESTIONS = 10_000  # most recent questions whose evidence :meth:`MemoryStore.event_spans` reads
MAX_ID = 2**63 - 1  # ids (nodes, questions, watches, alerts) are 64-bit signed integers in every backend


def _node_without_nul(node: MemoryNode) -> MemoryNode:
    if "\0" not in node.text and "\0" not in node.instruction and "\0" not in node.model:
        return node
    return replace(node, text=strip_nul(node.text), instruction=strip_nul(node.instruction),
                   model=strip_nul(node.model))


def _without_nul(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, strings) with NUL taken out of every string in it."""
    if isinstance(value, str):
        return strip_nul(value)
    if isinstance(value, dict):
        return {strip_nul(str(k)) if isinstance(k, str) else k: _without_nul(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_without_nul(v) for v in value]
    return value


def text_hash(text: str) -> str:
    """A short digest of a node's text: a stored vector is of the text whose digest it carries."""
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


class MemoryObserver:
    """Sees what a memory store stores without being part of it (as pipecat's ``BaseObserver`` sees frames).

    Called on the writing thread after the write committed, so it must be quick and must not block (hand the
    work to a queue). An observer that raises is logged and the write still succeeds.
    """

    def on_nodes_added(self, nodes: Sequence[MemoryNode]) -> None:
        """Nodes just stored (with their ids), in the order given to :meth:`MemoryStore.add_many`."""


class MemoryStore(ABC):
    """Time-indexed text memory of every stream in a data directory.

    Safe for one ingest process writing and several question processes reading and writing at once.
    Backends implement :meth:`_add_nodes` (writes) and the queries; :meth:`add` and :meth:`add_many` tell the
    observers.
    """

    _observers: tuple[MemoryObserver, ...] = ()
    _observers_lock = threading.Lock()

    # ----------------------------------------------------------------------------------- observers

    def add_observer(self, observer: MemoryObserver) -> None:
        """Tell ``observer`` about every node stored through this store object from now on."""
        with self._observers_lock:
            self._observers = (*self._observers, observer)

    def remove_observer(self, observer: MemoryObserver) -> None:
        with self._observers_lock:
            self._observers = tuple(o for o in self._observers if o is not observer)

    def _notify_added(self, nodes: Sequence[MemoryNode]) -> None:
        for observer in self._observers:  # a tuple replaced whole: safe to iterate while others register
            try:
                observer.on_nodes_added(nodes)
            except Exception:  # an observer's bug never fails a write that committed
                log.exception("memory observer %r failed", observer)

    # ----------------------------------------------------------------------------------- nodes

    def add(self, node: MemoryNode) -> MemoryNode:
        """Store a node; returns it with ``id`` (and ``created``) set.

        A span (stream, level, start) holds at most one ingest node and one tail node: storing another replaces
        it, and an ingest node replaces the span's tail node (see :data:`lucy.memory.nodes.TAIL_ORIGIN`)."""
        return self.add_many([node])[0]

    def add_many(self, nodes: Sequence[MemoryNode]) -> list[MemoryNode]:
        """Store several nodes in one transaction (as :meth:`add` stores one)."""
        stored = self._add_nodes([_node_without_nul(n) for n in nodes])
        if stored:
            self._notify_added(stored)
        return stored

    @abstractmethod
    def _add_nodes(self, nodes: Sequence[MemoryNode]) -> list[MemoryNode]:
        """Backend: store ``nodes`` in one transaction, by the rules of :meth:`add`; return them as stored."""

    @abstractmethod
    def nodes(self, stream: str, *, level: str | None = None, start: float | None = None,
              end: float | None = None, origin: str | None = None, limit: int | None = None,
              latest: bool = False) -> list[MemoryNode]:
        """Nodes overlapping ``[start, end)`` (all times when None), ordered by start time then level: the first
        ``limit`` of them, or with ``latest`` the last ``limit`` (still in that order).

        Backends read only the rows returned (an index by start time, and a bound on how long before ``start`` a
        node overlapping it can begin), so a page of a long stream's memory costs what the page holds."""

    @abstractmethod
    def node(self, node_id: int) -> MemoryNode | None:
        """The node with that id (None if there is none, e.g. purged)."""

    def count(self, stream: str, *, level: str | None = None, origin: str | None = None) -> int:
        """How many nodes a stream holds (of ``level`` / ``origin`` when given)."""
        return len(self.nodes(stream, level=level, origin=origin))

    @abstractmethod
    def search(self, stream: str, text: str, *, level: str | None = None, start: float | None = None,
               end: float | None = None, limit: int = 20) -> list[tuple[MemoryNode, float]]:
        """Full-text search over node text; best first, with a relevance score (higher is better)."""

    def versions(self, stream: str) -> dict[int, float]:
        """Id -> ``created`` of every node of a stream, without their text: what a cache of the stream's nodes
        compares to find nodes added, deleted or rewritten (a rewrite sets ``created`` anew)."""
        return {node.id: node.created for node in self.nodes(stream) if node.id is not None}

    def fingerprint(self, stream: str) -> tuple[object, ...]:
        """A cheap value that changes whenever :meth:`versions` would (checked before reading them all)."""
        versions = self.versions(stream)
        return len(versions), max(versions, default=0), sum(versions.values())

    @abstractmethod
    def captioned_until(self, stream: str, level: str = Level.COARSE) -> float:
        """End of the last contiguous ingest-made node of ``level`` from time 0 (0.0 when none)."""

    # ----------------------------------------------------------------------------------- vectors

    @abstractmethod
    def vectors(self, model: str, node_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The stored ``model`` vectors (float32) of those nodes whose vector is of their current text; nodes
        without one are left out."""

    @abstractmethod
    def put_vectors(self, model: str, vectors: Mapping[int, np.ndarray], *,
                    text_hashes: Mapping[int, str] | None = None) -> None:
        """Store ``model`` vectors of nodes (replacing earlier ones), in one transaction. ``text_hashes``:
        :func:`text_hash` of the text each vector was made from (default: the node's text now); a vector of a
        text the node no longer holds is never returned by :meth:`vectors`. Vectors of nodes that are gone are
        dropped; a node's vectors go with it (deleted, replaced, its stream deleted) and with a change of its
        text."""

    # ----------------------------------------------------------------------------------- streams

    @abstractmethod
    def streams(self) -> list[str]:
        """Names of the streams that have nodes, sorted."""

    @abstractmethod
    def delete_stream(self, stream: str) -> int:
        """Forget a stream: its nodes (and their search entries), its question history, its watches and their
        alerts, its observations (tracks with their snapshots, counts, observed-until), in one transaction. Returns
        the number of nodes deleted."""

    # ----------------------------------------------------------------------------------- observations

    def record_observations(self, observations: Observations) -> None:
        """Add the counts, insert or replace the tracks (by stream and id; a replaced track keeps its snapshot when
        the new record has none) and move the stream's observed-until mark forward (never back), in one transaction
        (:class:`lucy.perception.objects.ObservationStore`). Raises ValueError, writing nothing, for records that
        cannot be stored (:func:`lucy.memory.observations.clean_observations`); texts lose their NUL characters."""
        self._record_observations(clean_observations(observations))

    @abstractmethod
    def _record_observations(self, observations: Observations) -> None:
        """Backend: :meth:`record_observations` (checked and cleaned)."""

    @abstractmethod
    def observed_until(self, stream: str) -> float | None:
        """Media time up to which the stream's frames have been through the detect stage; None if never."""

    @abstractmethod
    def next_track_id(self, stream: str) -> int:
        """One more than the highest track id stored for the stream (1 for a new stream)."""

    @abstractmethod
    def object_tracks(self, stream: str, *, label: str | None = None, start: float | None = None,
                      end: float | None = None, limit: int = 1000) -> list[TrackedObject]:
        """Tracks seen at any time in ``[start, end)`` (first seen before ``end``, last seen at or after ``start``),
        oldest first (by first seen, then id), without their snapshots; ``label`` keeps one label (``"vehicle"``
        keeps every one of :data:`lucy.perception.objects.VEHICLES`)."""

    @abstractmethod
    def object_track(self, stream: str, track_id: int) -> TrackedObject | None:
        """One track with its snapshot, or None."""

    @abstractmethod
    def object_counts(self, stream: str, start: float, end: float) -> list[CountSample]:
        """The count samples of detected frames in ``[start, end)``, oldest first (a frame with nothing in view is
        a sample with no counts)."""

    # ----------------------------------------------------------------------------------- questions

    def add_question(self, stream: str, question: str, options: Sequence[str] = (), horizon: float = 0.0) -> int:
        """Record a question as it arrives; returns its id (used as the origin of the nodes it creates)."""
        return self._add_question(stream, strip_nul(question), [strip_nul(o) for o in options], horizon)

    @abstractmethod
    def _add_question(self, stream: str, question: str, options: Sequence[str], horizon: float) -> int:
        """Backend: :meth:`add_question` (its text has no NUL)."""

    def set_answer(self, question_id: int, answer: dict[str, object]) -> None:
        """Record the answer object of a question."""
        self._set_answer(question_id, _without_nul(answer))

    @abstractmethod
    def _set_answer(self, question_id: int, answer: dict[str, object]) -> None:
        """Backend: :meth:`set_answer` (no NUL in any of its texts)."""

    @abstractmethod
    def questions(self, stream: str, limit: int = 50) -> list[dict[str, object]]:
        """Recent questions of a stream with their answers, newest first."""

    def event_spans(self, stream: str) -> list[tuple[float, float]]:
        """The media spans of the stream that someone was shown as evidence: its alerts' and its answered questions'
        evidence spans (the recent :data:`EVENT_QUESTIONS` questions), sorted. Recordings of them are kept longer."""
        spans = []
        after = 0
        while batch := self.alerts(stream, after_id=after, limit=1000):
            spans += [(a.start, a.end) for a in batch]
            after = batch[-1].id or after
            if len(batch) < 1000:
                break
        for row in self.questions(stream, EVENT_QUESTIONS):
            answer = row.get("answer")
            evidence = answer.get("evidence") if isinstance(answer, dict) else None
            for span in evidence if isinstance(evidence, list) else ():
                with contextlib.suppress(KeyError, TypeError, ValueError):
                    spans.append((float(span["start"]), float(span["end"])))
        return sorted(spans)

    # ----------------------------------------------------------------------------------- watches

    def add_watch(self, stream: str, question: str, *, cooldown_seconds: float = 300.0,
                  webhook_url: str | None = None) -> Watch:
        """Register a standing question on a stream (:meth:`register_watch`): the new watch, or the same one that
        was already registered."""
        return self.register_watch(stream, question, cooldown_seconds=cooldown_seconds, webhook_url=webhook_url)[0]

    def register_watch(self, stream: str, question: str, *, cooldown_seconds: float = 300.0,
                       webhook_url: str | None = None) -> tuple[Watch, bool]:
        """Register a standing question on a stream; returns the watch and whether it is new. Registering is
        idempotent: an active watch of the stream with the same question (:func:`lucy.memory.rows.watch_key`:
        normalised, ignoring case) and the same webhook URL (or none) is returned as it is (its own cooldown and
        progress kept), looked up and inserted in one transaction, so two registrations at once make one watch.
        A new watch's progress starts at the stream's coarse captions so far (:meth:`captioned_until`): it is
        checked from the next closed span on (:meth:`set_watch_progress` to 0 checks the past too, while the stream
        is still ingested)."""
        return self._add_watch(stream, strip_nul(question), cooldown_seconds=cooldown_seconds,
                               webhook_url=webhook_url)

    @abstractmethod
    def _add_watch(self, stream: str, question: str, *, cooldown_seconds: float,
                   webhook_url: str | None) -> tuple[Watch, bool]:
        """Backend: :meth:`register_watch` (its question has no NUL)."""

    @abstractmethod
    def watches(self, stream: str | None = None) -> list[Watch]:
        """The active watches (of ``stream`` when given), oldest first."""

    @abstractmethod
    def delete_watch(self, watch_id: int) -> bool:
        """Make a watch inactive (its alerts stay as history); False if there is no active watch with that id."""

    def add_alert(self, alert: Alert) -> Alert:
        """Store an alert; returns it with ``id`` set (ids grow: pollers follow with ``after_id``)."""
        return self._add_alert(replace(alert, question=strip_nul(alert.question), reason=strip_nul(alert.reason)))

    @abstractmethod
    def _add_alert(self, alert: Alert) -> Alert:
        """Backend: :meth:`add_alert` (its texts have no NUL)."""

    @abstractmethod
    def alerts(self, stream: str | None = None, *, watch_id: int | None = None, after_id: int = 0,
               limit: int = 100, start: float | None = None, end: float | None = None) -> list[Alert]:
        """Alerts with an id above ``after_id``, oldest first (of ``stream`` / ``watch_id`` when given; with
        ``start`` / ``end``, those whose span overlaps ``[start, end)`` of media time)."""

    @abstractmethod
    def latest_alert(self, stream: str | None = None, *, watch_id: int | None = None) -> Alert | None:
        """The newest alert (of ``stream`` / ``watch_id`` when given); None when there is none."""

    @abstractmethod
    def alert_cursor(self, consumer: str) -> int | None:
        """The id of the last alert ``consumer`` (a deliverer, e.g. ``lucy serve``) delivered; None if never set."""

    @abstractmethod
    def set_alert_cursor(self, consumer: str, last_id: int) -> None:
        """Record the id of the last alert ``consumer`` delivered (its next start catches up from there)."""

    @abstractmethod
    def watch_progress(self, watch_id: int) -> float:
        """Media seconds of the watch's stream checked against it so far (contiguous from its start)."""

    @abstractmethod
    def set_watch_progress(self, watch_id: int, checked_until: float) -> None:
        """Record how far the watch's stream has been checked (a restarted checker resumes from there)."""

    # ----------------------------------------------------------------------------------- lifetime

    def check(self) -> None:
        """Raise if the store cannot answer now (the readiness probe); cheap."""
        self.captioned_until("-")

    @abstractmethod
    def close(self) -> None:
        """Release connections."""

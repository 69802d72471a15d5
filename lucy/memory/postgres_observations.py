"""What the detect stage observed, in PostgreSQL: the part of :class:`lucy.memory.postgres_store.PostgresMemoryStore`
that keeps a stream's tracked objects, per-frame counts and how far the stream has been observed (the
:class:`lucy.perception.objects.ObservationStore` protocol), apart from its nodes.

A mixin of the store (it runs on the store's connections, in its transactions, and checks its fence: a superseded
owner of a stream cannot record observations of it), with the schema step that adds its tables to a database of any
earlier release (:func:`v6_observations`, migration 6 of the store). Rows are read and written as
:mod:`lucy.memory.observations` says, as in the SQLite store; path, attributes and counts are ``jsonb``, snapshots
``bytea``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from lucy.memory.observations import (
    MAX_TRACK_ID,
    TRACK_COLUMNS,
    TRACK_LIST_COLUMNS,
    counts_json,
    counts_of,
    labels_for,
    track_of,
    track_upsert,
    track_values,
)
from lucy.perception.objects import CountSample, Observations, TrackedObject

T = TypeVar("T")
Cursor = psycopg.Cursor[Any]


def v6_observations(db: Cursor) -> None:
    """Tracked objects (snapshots inline: a few tens of kB each, kept out of line by TOAST), one row of counts per
    detected frame, and how far each stream has been observed."""
    db.execute("""
        CREATE TABLE object_tracks (
            stream     text             NOT NULL,
            track_id   bigint           NOT NULL,
            label      text             NOT NULL,
            first_seen double precision NOT NULL,
            last_seen  double precision NOT NULL,
            score      double precision NOT NULL,
            entered    text             NOT NULL,
            exited     text,
            moving     boolean          NOT NULL,
            path       jsonb            NOT NULL DEFAULT '[]',
            attributes jsonb            NOT NULL DEFAULT '{}',
            best_time  double precision NOT NULL,
            best_x0    double precision NOT NULL,
            best_y0    double precision NOT NULL,
            best_x1    double precision NOT NULL,
            best_y1    double precision NOT NULL,
            snapshot   bytea,
            active     boolean          NOT NULL DEFAULT false,
            PRIMARY KEY (stream, track_id),
            CHECK (last_seen >= first_seen)
        )""")
    # Overlap with [start, end) is last_seen >= start (the index range) and first_seen < end (read from the index).
    db.execute("CREATE INDEX object_tracks_stream_last_seen ON object_tracks (stream, last_seen, first_seen)")
    db.execute("CREATE INDEX object_tracks_stream_label ON object_tracks (stream, label, last_seen)")
    db.execute("""
        CREATE TABLE object_counts (
            stream text             NOT NULL,
            time   double precision NOT NULL,
            counts jsonb            NOT NULL,
            PRIMARY KEY (stream, time)
        )""")
    db.execute("CREATE TABLE observed_until (stream text PRIMARY KEY, until_time double precision NOT NULL)")


class PostgresObservations:
    """The observation methods of :class:`lucy.memory.store.MemoryStore`, for :class:`lucy.memory.postgres_store.
    PostgresMemoryStore`, which provides what they run on."""

    if TYPE_CHECKING:
        def _run(self, work: Callable[[Cursor], T], *, write: bool = False) -> T: ...

        def _fenced(self, db: Cursor, stream: str) -> None: ...

    _UPSERT_TRACK = track_upsert("%s", "%s::jsonb")  # the JSON columns take text cast to jsonb

    def _record_observations(self, observations: Observations) -> None:
        stream = observations.stream

        def write(db: Cursor) -> None:
            self._fenced(db, stream)
            if observations.counts:
                db.executemany("INSERT INTO object_counts (stream, time, counts) VALUES (%s, %s, %s::jsonb) "
                               "ON CONFLICT (stream, time) DO UPDATE SET counts = excluded.counts",
                               [(stream, c.time, counts_json(c)) for c in observations.counts])
            if observations.tracks:
                db.executemany(self._UPSERT_TRACK, [track_values(t) for t in observations.tracks])
            db.execute("INSERT INTO observed_until (stream, until_time) VALUES (%s, %s) ON CONFLICT (stream) "
                       "DO UPDATE SET until_time = greatest(observed_until.until_time, excluded.until_time)",
                       (stream, observations.until))

        self._run(write, write=True)

    def _delete_observations(self, db: Cursor, stream: str) -> None:
        """Forget a stream's observations, in the caller's transaction (:meth:`delete_stream`)."""
        for table in ("object_tracks", "object_counts", "observed_until"):
            db.execute(f"DELETE FROM {table} WHERE stream = %s", (stream,))

    def observed_until(self, stream: str) -> float | None:
        row = self._run(lambda c: c.execute("SELECT until_time FROM observed_until WHERE stream = %s",
                                            (stream,)).fetchone())
        return None if row is None else float(row[0])

    def next_track_id(self, stream: str) -> int:
        row = self._run(lambda c: c.execute("SELECT max(track_id) FROM object_tracks WHERE stream = %s",
                                            (stream,)).fetchone())
        return 1 if row[0] is None else int(row[0]) + 1

    def object_tracks(self, stream: str, *, label: str | None = None, start: float | None = None,
                      end: float | None = None, limit: int = 1000) -> list[TrackedObject]:
        clauses, params = ["stream = %s"], [stream]
        if label is not None:
            clauses.append("label = ANY(%s)")
            params.append(labels_for(label))
        if start is not None:  # seen at any time in [start, end): last seen at or after start, first seen before end
            clauses.append("last_seen >= %s")
            params.append(float(start))
        if end is not None:
            clauses.append("first_seen < %s")
            params.append(float(end))
        sql = (f"SELECT {TRACK_LIST_COLUMNS} FROM object_tracks WHERE {' AND '.join(clauses)} "
               f"ORDER BY first_seen, track_id LIMIT %s")
        rows = self._run(lambda c: c.execute(sql, [*params, max(0, int(limit))]).fetchall())
        return [track_of(r) for r in rows]

    def object_track(self, stream: str, track_id: int) -> TrackedObject | None:
        if not 1 <= int(track_id) <= MAX_TRACK_ID:  # none stored (and past what a bigint holds)
            return None
        row = self._run(lambda c: c.execute(f"SELECT {TRACK_COLUMNS}, snapshot FROM object_tracks "
                                            f"WHERE stream = %s AND track_id = %s", (stream, int(track_id))).fetchone())
        return None if row is None else track_of(row, row[17])

    def object_counts(self, stream: str, start: float, end: float) -> list[CountSample]:
        rows = self._run(lambda c: c.execute(
            "SELECT time, counts FROM object_counts WHERE stream = %s AND time >= %s AND time < %s ORDER BY time",
            (stream, float(start), float(end))).fetchall())
        return [counts_of(t, c) for t, c in rows]

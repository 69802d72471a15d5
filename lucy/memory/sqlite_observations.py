"""What the detect stage observed, in SQLite: the part of :class:`lucy.memory.sqlite_store.SQLiteMemoryStore` that
keeps a stream's tracked objects, per-frame counts and how far the stream has been observed (the
:class:`lucy.perception.objects.ObservationStore` protocol), apart from its nodes.

A mixin of the store (it runs on the store's connections and in its ``BEGIN IMMEDIATE`` transactions), with the
schema step that adds its tables to a data directory of any earlier release (:func:`v6_observations`, migration 6 of
the store). Rows are read and written as :mod:`lucy.memory.observations` says, as in the PostgreSQL store.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Protocol

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


def v6_observations(db: sqlite3.Connection) -> None:
    """Tracked objects (snapshots inline: a few tens of kB each), one row of counts per detected frame, and how far
    each stream has been observed."""
    db.execute("""
        CREATE TABLE object_tracks (
            stream     TEXT    NOT NULL,
            track_id   INTEGER NOT NULL,
            label      TEXT    NOT NULL,
            first_seen REAL    NOT NULL,
            last_seen  REAL    NOT NULL,
            score      REAL    NOT NULL,
            entered    TEXT    NOT NULL,
            exited     TEXT,
            moving     INTEGER NOT NULL,
            path       TEXT    NOT NULL DEFAULT '[]',
            attributes TEXT    NOT NULL DEFAULT '{}',
            best_time  REAL    NOT NULL,
            best_x0    REAL    NOT NULL,
            best_y0    REAL    NOT NULL,
            best_x1    REAL    NOT NULL,
            best_y1    REAL    NOT NULL,
            snapshot   BLOB,
            active     INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (stream, track_id),
            CHECK (last_seen >= first_seen)
        )""")
    # Overlap with [start, end) is last_seen >= start (the index range) and first_seen < end (read from the index).
    db.execute("CREATE INDEX object_tracks_stream_last_seen ON object_tracks(stream, last_seen, first_seen)")
    db.execute("CREATE INDEX object_tracks_stream_label ON object_tracks(stream, label, last_seen)")
    db.execute("""
        CREATE TABLE object_counts (
            stream TEXT NOT NULL,
            time   REAL NOT NULL,
            counts TEXT NOT NULL,
            PRIMARY KEY (stream, time)
        ) WITHOUT ROWID""")
    db.execute("CREATE TABLE observed_until (stream TEXT PRIMARY KEY, until_time REAL NOT NULL)")


class _Transaction(Protocol):
    def __enter__(self) -> sqlite3.Connection: ...

    def __exit__(self, kind: object, error: object, tb: object) -> None: ...


class SQLiteObservations:
    """The observation methods of :class:`lucy.memory.store.MemoryStore`, for :class:`lucy.memory.sqlite_store.
    SQLiteMemoryStore`, which provides what they run on."""

    if TYPE_CHECKING:
        def _db(self) -> sqlite3.Connection: ...

        def _write(self) -> _Transaction: ...

    _UPSERT_TRACK = track_upsert("?")

    def _record_observations(self, observations: Observations) -> None:
        stream = observations.stream
        with self._write() as db:
            db.executemany("INSERT INTO object_counts (stream, time, counts) VALUES (?, ?, ?) "
                           "ON CONFLICT (stream, time) DO UPDATE SET counts = excluded.counts",
                           [(stream, c.time, counts_json(c)) for c in observations.counts])
            db.executemany(self._UPSERT_TRACK, [track_values(t) for t in observations.tracks])
            db.execute("INSERT INTO observed_until (stream, until_time) VALUES (?, ?) ON CONFLICT (stream) "
                       "DO UPDATE SET until_time = max(until_time, excluded.until_time)", (stream, observations.until))

    def _delete_observations(self, db: sqlite3.Connection, stream: str) -> None:
        """Forget a stream's observations, in the caller's transaction (:meth:`delete_stream`)."""
        for table in ("object_tracks", "object_counts", "observed_until"):
            db.execute(f"DELETE FROM {table} WHERE stream = ?", (stream,))

    def observed_until(self, stream: str) -> float | None:
        row = self._db().execute("SELECT until_time FROM observed_until WHERE stream = ?", (stream,)).fetchone()
        return None if row is None else float(row[0])

    def next_track_id(self, stream: str) -> int:
        row = self._db().execute("SELECT max(track_id) FROM object_tracks WHERE stream = ?", (stream,)).fetchone()
        return 1 if row[0] is None else int(row[0]) + 1

    def object_tracks(self, stream: str, *, label: str | None = None, start: float | None = None,
                      end: float | None = None, limit: int = 1000) -> list[TrackedObject]:
        clauses, params = ["stream = ?"], [stream]
        if label is not None:
            labels = labels_for(label)
            clauses.append(f"label IN ({', '.join('?' * len(labels))})")
            params.extend(labels)
        if start is not None:  # seen at any time in [start, end): last seen at or after start, first seen before end
            clauses.append("last_seen >= ?")
            params.append(float(start))
        if end is not None:
            clauses.append("first_seen < ?")
            params.append(float(end))
        rows = self._db().execute(f"SELECT {TRACK_LIST_COLUMNS} FROM object_tracks WHERE {' AND '.join(clauses)} "
                                  f"ORDER BY first_seen, track_id LIMIT ?", [*params, max(0, int(limit))])
        return [track_of(r) for r in rows]

    def object_track(self, stream: str, track_id: int) -> TrackedObject | None:
        if not 1 <= int(track_id) <= MAX_TRACK_ID:  # none stored (and past what SQLite's integers hold)
            return None
        row = self._db().execute(f"SELECT {TRACK_COLUMNS}, snapshot FROM object_tracks "
                                 f"WHERE stream = ? AND track_id = ?", (stream, int(track_id))).fetchone()
        return None if row is None else track_of(row, row[17])

    def object_counts(self, stream: str, start: float, end: float) -> list[CountSample]:
        rows = self._db().execute("SELECT time, counts FROM object_counts WHERE stream = ? AND time >= ? AND time < ? "
                                  "ORDER BY time", (stream, float(start), float(end)))
        return [counts_of(t, c) for t, c in rows]

"""The memory store on SQLite: ``<data>/memory.sqlite``, one database per data directory.

Concurrency (one ingest process writing, several question processes reading and writing at once):

- WAL journal: readers never block the writer and see only committed transactions, so a reader never sees a
  node that is not fully written.
- Every write is one ``BEGIN IMMEDIATE`` transaction: it takes the write lock up front and waits for it (busy
  timeout) instead of failing half-way when two processes race to upgrade a read into a write.
- One connection per thread (and per process: a forked child opens its own), so callers may use the store
  from worker threads without sharing a connection.

Vectors of node text (for semantic search, :mod:`lucy.memory.retrieval`) live in ``node_vectors``, one per node and
embedding model, as float32 bytes with the digest of the text they were made from; triggers delete them with
their node and when the node's text changes, so no path (a replaced node, a purge, a deleted stream) leaves a stale
vector behind, whether or not foreign keys are on.

What the detect stage observed (tracked objects, per-frame counts) is a mixin of its own,
:mod:`lucy.memory.sqlite_observations`, with its tables (migration 6).

Schema changes are an ordered list of migrations, applied at open inside one write transaction and recorded
in ``PRAGMA user_version``; a database from any earlier release is brought up to date, a newer one refused.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from lucy.config import Level, LucySettings
from lucy.errors import StoreError
from lucy.memory.nodes import INGEST_ORIGIN, TAIL_ORIGIN, MemoryNode
from lucy.memory.rows import (
    ALERT_COLUMNS,
    NODE_COLUMNS,
    QUESTION_COLUMNS,
    SPAN_SLACK,
    WATCH_COLUMNS,
    alert_filter,
    alert_of,
    check_watch,
    node_of,
    question_of,
    same_watch,
    watch_of,
)
from lucy.memory.sql import ThreadConnections
from lucy.memory.sqlite_observations import SQLiteObservations, v6_observations
from lucy.memory.store import MemoryStore, text_hash
from lucy.memory.watches import Alert, Watch

DB_NAME = "memory.sqlite"
T = TypeVar("T")



def _v1_initial(db: sqlite3.Connection) -> None:
    """First release: nodes, the question/answer history, and the full-text index over node text."""
    db.execute("""
        CREATE TABLE nodes (
            id          INTEGER PRIMARY KEY,
            stream      TEXT    NOT NULL,
            level       TEXT    NOT NULL,
            start       REAL    NOT NULL,
            "end"       REAL    NOT NULL,
            text        TEXT    NOT NULL,
            instruction TEXT    NOT NULL DEFAULT '',
            origin      TEXT    NOT NULL DEFAULT 'ingest',
            parent      INTEGER REFERENCES nodes(id) ON DELETE SET NULL,
            model       TEXT    NOT NULL DEFAULT '',
            created     REAL    NOT NULL,
            CHECK ("end" > start)
        )""")
    db.execute("CREATE INDEX nodes_stream_level_start ON nodes(stream, level, start)")
    # One ingest node per span: the builder's writes are idempotent, so a span is never held twice.
    db.execute("CREATE UNIQUE INDEX nodes_ingest_span ON nodes(stream, level, start) WHERE origin = 'ingest'")
    # External-content FTS5 index: the text lives once, in nodes; triggers keep the index in step.
    db.execute("""
        CREATE VIRTUAL TABLE nodes_fts USING fts5(
            text, content='nodes', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')""")
    db.execute("""
        CREATE TRIGGER nodes_fts_insert AFTER INSERT ON nodes BEGIN
            INSERT INTO nodes_fts(rowid, text) VALUES (new.id, new.text);
        END""")
    db.execute("""
        CREATE TRIGGER nodes_fts_delete AFTER DELETE ON nodes BEGIN
            INSERT INTO nodes_fts(nodes_fts, rowid, text) VALUES ('delete', old.id, old.text);
        END""")
    db.execute("""
        CREATE TRIGGER nodes_fts_update AFTER UPDATE OF text ON nodes BEGIN
            INSERT INTO nodes_fts(nodes_fts, rowid, text) VALUES ('delete', old.id, old.text);
            INSERT INTO nodes_fts(rowid, text) VALUES (new.id, new.text);
        END""")
    db.execute("""
        CREATE TABLE questions (
            id       INTEGER PRIMARY KEY,
            stream   TEXT NOT NULL,
            question TEXT NOT NULL,
            options  TEXT NOT NULL DEFAULT '[]',
            horizon  REAL NOT NULL DEFAULT 0,
            asked    REAL NOT NULL,
            answer   TEXT,
            answered REAL
        )""")
    db.execute("CREATE INDEX questions_stream_id ON questions(stream, id)")


def _v2_vectors(db: sqlite3.Connection) -> None:
    """Embedding vectors of node text, per model; they go with their node and with a change of its text."""
    db.execute("""
        CREATE TABLE node_vectors (
            node_id   INTEGER NOT NULL,
            model     TEXT    NOT NULL,
            text_hash TEXT    NOT NULL,
            vector    BLOB    NOT NULL,
            PRIMARY KEY (node_id, model)
        ) WITHOUT ROWID""")
    db.execute("""
        CREATE TRIGGER nodes_vectors_delete AFTER DELETE ON nodes BEGIN
            DELETE FROM node_vectors WHERE node_id = old.id;
        END""")
    db.execute("""
        CREATE TRIGGER nodes_vectors_update AFTER UPDATE OF text ON nodes WHEN new.text IS NOT old.text BEGIN
            DELETE FROM node_vectors WHERE node_id = old.id;
        END""")


def _v3_watches(db: sqlite3.Connection) -> None:
    """Watches (standing questions on a stream), how far each has checked its stream, and the alerts raised."""
    db.execute("""
        CREATE TABLE watches (
            id               INTEGER PRIMARY KEY,
            stream           TEXT    NOT NULL,
            question         TEXT    NOT NULL,
            cooldown_seconds REAL    NOT NULL,
            webhook_url      TEXT,
            created          REAL    NOT NULL,
            active           INTEGER NOT NULL DEFAULT 1,
            checked_until    REAL    NOT NULL DEFAULT 0
        )""")
    db.execute("CREATE INDEX watches_stream ON watches(stream, active)")
    db.execute("""
        CREATE TABLE alerts (
            id            INTEGER PRIMARY KEY AUTOINCREMENT,
            watch_id      INTEGER NOT NULL,
            stream        TEXT    NOT NULL,
            question      TEXT    NOT NULL,
            start         REAL    NOT NULL,
            "end"         REAL    NOT NULL,
            reason        TEXT    NOT NULL,
            frame_time    REAL    NOT NULL,
            level         TEXT    NOT NULL,
            created       REAL    NOT NULL,
            event_end     REAL    NOT NULL,
            llm_calls     INTEGER NOT NULL DEFAULT 0,
            caption_calls INTEGER NOT NULL DEFAULT 0
        )""")
    db.execute("CREATE INDEX alerts_stream_id ON alerts(stream, id)")
    db.execute("CREATE INDEX alerts_watch_id ON alerts(watch_id, id)")


def _v4_alert_cursors(db: sqlite3.Connection) -> None:
    """How far each deliverer of alerts (``lucy serve``) has delivered them, so a restart catches up."""
    db.execute("CREATE TABLE alert_cursors (consumer TEXT PRIMARY KEY, last_id INTEGER NOT NULL)")


def _v5_bounded_reads(db: sqlite3.Connection) -> None:
    """Indexes that let a page of a long stream's memory be read without the rest of it: by start time across
    levels (the newest nodes first, as the dashboard shows them; "end" in it so the overlap test reads no rows),
    and by span length (the longest node of a stream bounds how long before a time a node overlapping it begins)."""
    db.execute('CREATE INDEX nodes_stream_start ON nodes(stream, start, "end")')
    db.execute('CREATE INDEX nodes_stream_length ON nodes(stream, ("end" - start))')


# Migration i brings a database from user_version i to i + 1 (version 0: an empty file). Append only; never
# edit a released step. Each runs inside the opening write transaction, so it applies whole or not at all.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1_initial, _v2_vectors, _v3_watches,
                                                           _v4_alert_cursors, _v5_bounded_reads, v6_observations]

_WORD = re.compile(r"\w+", re.UNICODE)
_REMEMBERED_READS = 4096  # per store (see _Unchanged); all forgotten past this
# AUTOINCREMENT: an alert id is never reused, even after its stream is deleted, so a poller's after_id stays valid.


def fts_query(text: str) -> str:
    """A user's free text as an FTS5 query that cannot raise: every word quoted, words joined by OR.

    FTS5 syntax in questions (``AND``, ``NEAR(``, ``"``, ``*``, ``col:``, ``-``) is matched as plain words.
    Returns "" when the text has no words.
    """
    words = dict.fromkeys(w.lower() for w in _WORD.findall(text))  # dedupe, keep order
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)



class SQLiteMemoryStore(SQLiteObservations, MemoryStore):
    """Memory of every stream of one data directory, in ``<data>/memory.sqlite``."""

    def __init__(self, path: Path, *, busy_timeout_seconds: float = 30.0) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout_seconds
        self._connections = ThreadConnections(self._connect, name=str(self.path), forked=self._forked,
                                              close_errors=(sqlite3.ProgrammingError,))
        self._unchanged = _Unchanged(self.path, self.busy_timeout)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._owner_only()
        self._migrate(self._db())

    def _owner_only(self) -> None:
        """Make the database readable by its owner alone (0600): it holds webhook URLs, which often carry secrets.

        Created so before SQLite first opens it; SQLite gives the ``-wal`` and ``-shm`` files it makes the
        database's mode. A database (and its side files) made by an older version is narrowed here too.
        """
        try:
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
        except OSError:
            return  # a read-only data directory, say: SQLite's own open says what is wrong, or reads it
        for path in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")):
            try:
                if path.stat().st_mode & 0o077:
                    path.chmod(0o600)
            except OSError:  # absent, or another user's file: nothing to narrow here
                pass

    @classmethod
    def for_data(cls, settings: LucySettings) -> SQLiteMemoryStore:
        """The store of ``settings.data``."""
        return cls(Path(settings.data) / DB_NAME, busy_timeout_seconds=settings.memory.busy_timeout_seconds)

    # ----------------------------------------------------------------------------------- connections

    def _db(self) -> sqlite3.Connection:
        """This thread's connection (:mod:`lucy.memory.sql`)."""
        return self._connections.get()

    def _connect(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None,
                                 check_same_thread=False)  # used by its own thread; closed by close()
            db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            mode = self._enable_wal(db)
        except sqlite3.DatabaseError as err:
            raise StoreError(f"cannot open memory store {self.path}: {err}") from None
        if mode.lower() != "wal":
            raise StoreError(f"memory store {self.path}: cannot use WAL journal (got {mode!r})")
        db.execute("PRAGMA synchronous = NORMAL")  # durable at each checkpoint; never corrupt in WAL
        db.execute("PRAGMA foreign_keys = ON")
        return db

    def _forked(self) -> None:
        self._unchanged = _Unchanged(self.path, self.busy_timeout)  # (its connection is the parent's)

    def open_connections(self) -> int:
        """Connections held now (one per live thread that used the store)."""
        return self._connections.count()

    def _enable_wal(self, db: sqlite3.Connection) -> str:
        """Switch to the WAL journal and return the mode now in force.

        Switching needs the database to itself for a moment. When several processes open a new database at
        once, SQLite may answer "database is locked" at once instead of waiting (the busy handler is skipped
        where waiting could deadlock), so the switch is retried until the busy timeout runs out.
        """
        deadline = time.monotonic() + self.busy_timeout
        pause = 0.001
        while True:
            try:
                return str(db.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.OperationalError as err:
                busy = "locked" in str(err) or "busy" in str(err)
                if not busy or time.monotonic() > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def _write(self) -> _WriteTransaction:
        return _WriteTransaction(self._db())

    def _migrate(self, db: sqlite3.Connection) -> None:
        with _WriteTransaction(db):  # concurrent openers serialise here; the second sees the work done
            version = db.execute("PRAGMA user_version").fetchone()[0]
            latest = len(MIGRATIONS)
            if version > latest:
                raise StoreError(f"memory store {self.path} has schema version {version}, newer than this "
                                 f"Lucy understands ({latest}); upgrade Lucy")
            for step in range(version, latest):
                MIGRATIONS[step](db)
                db.execute(f"PRAGMA user_version = {step + 1}")

    @property
    def schema_version(self) -> int:
        return int(self._db().execute("PRAGMA user_version").fetchone()[0])

    def close(self) -> None:
        self._connections.close()
        self._unchanged.close()

    # ----------------------------------------------------------------------------------- nodes

    _INSERT = (f'INSERT INTO nodes (stream, level, start, "end", text, instruction, origin, parent, model, created) '
               f'VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) '
               # One ingest node per span: a second caption of the same span replaces the first (same id).
               f"ON CONFLICT (stream, level, start) WHERE origin = '{INGEST_ORIGIN}' DO UPDATE SET "
               f'"end" = excluded."end", text = excluded.text, instruction = excluded.instruction, '
               f'parent = excluded.parent, model = excluded.model, created = excluded.created '
               f'RETURNING id, created')

    def _insert(self, db: sqlite3.Connection, node: MemoryNode) -> MemoryNode:
        if not node.end > node.start:
            raise ValueError(f"node span [{node.start}, {node.end}) is empty")
        created = node.created or time.time()
        span = (node.stream, str(node.level), float(node.start))
        parent = node.parent
        if parent is not None and db.execute("SELECT 1 FROM nodes WHERE id = ?", (parent,)).fetchone() is None:
            parent = None  # the parent went meanwhile (a purge): keep the node, unlinked
        values = (float(node.end), node.text, node.instruction, parent, node.model, created)
        if node.origin == TAIL_ORIGIN:
            # One tail node per span, updated in place (its id may be the parent of deeper nodes); none once the
            # span has its ingest caption.
            row = db.execute(f"SELECT {NODE_COLUMNS} FROM nodes WHERE stream = ? AND level = ? AND start = ? "
                             f"AND origin = ?", (*span, INGEST_ORIGIN)).fetchone()
            if row is not None:
                return node_of(row)
            row = db.execute('UPDATE nodes SET "end" = ?, text = ?, instruction = ?, parent = ?, model = ?, '
                             'created = ? WHERE stream = ? AND level = ? AND start = ? AND origin = ? RETURNING id',
                             (*values, *span, TAIL_ORIGIN)).fetchone()
            id_ = row[0] if row is not None else None
        elif node.origin == INGEST_ORIGIN:
            # The whole span's caption takes over the tail node (same id), or replaces an earlier ingest caption.
            db.execute("DELETE FROM nodes WHERE stream = ? AND level = ? AND start = ? AND origin = ? AND EXISTS "
                       "(SELECT 1 FROM nodes WHERE stream = ? AND level = ? AND start = ? AND origin = ?)",
                       (*span, TAIL_ORIGIN, *span, INGEST_ORIGIN))
            row = db.execute('UPDATE nodes SET "end" = ?, text = ?, instruction = ?, parent = ?, model = ?, '
                             'created = ?, origin = ? WHERE stream = ? AND level = ? AND start = ? AND origin = ? '
                             'RETURNING id', (*values, INGEST_ORIGIN, *span, TAIL_ORIGIN)).fetchone()
            id_ = row[0] if row is not None else None
        else:
            id_ = None
        if id_ is None:
            id_, created = db.execute(self._INSERT, (
                node.stream, str(node.level), float(node.start), float(node.end), node.text, node.instruction,
                node.origin, parent, node.model, created)).fetchone()
        return MemoryNode(stream=node.stream, level=str(node.level), start=float(node.start), end=float(node.end),
                          text=node.text, instruction=node.instruction, origin=node.origin, parent=parent,
                          model=node.model, created=created, id=id_)

    def _add_nodes(self, nodes: Sequence[MemoryNode]) -> list[MemoryNode]:
        with self._write() as db:
            return [self._insert(db, node) for node in nodes]

    @staticmethod
    def _where(stream: str, level: str | None, start: float | None, end: float | None,
               origin: str | None, alias: str = "") -> tuple[str, list[object]]:
        p = f"{alias}." if alias else ""
        clauses, params = [f"{p}stream = ?"], [stream]
        if level is not None:
            clauses.append(f"{p}level = ?")
            params.append(str(level))
        if end is not None:  # overlap with [start, end): node.start < end and node.end > start
            clauses.append(f"{p}start < ?")
            params.append(float(end))
        if start is not None:
            clauses.append(f'{p}"end" > ?')
            params.append(float(start))
            # Implied by the overlap, but an index range: no node overlapping ``start`` begins longer before it
            # than the stream's longest node lasts (one lookup in nodes_stream_length), so the rows before are skipped.
            clauses.append(f'{p}start >= ? - (SELECT max("end" - start) FROM nodes WHERE stream = ?) - {SPAN_SLACK}')
            params.extend([float(start), stream])
        if origin is not None:
            clauses.append(f"{p}origin = ?")
            params.append(origin)
        return " AND ".join(clauses), params

    def nodes(self, stream: str, *, level: str | None = None, start: float | None = None,
              end: float | None = None, origin: str | None = None, limit: int | None = None,
              latest: bool = False) -> list[MemoryNode]:
        where, params = self._where(stream, level, start, end, origin)
        order = "start DESC, level DESC, id DESC" if latest else "start, level, id"
        sql = f"SELECT {NODE_COLUMNS} FROM nodes WHERE {where} ORDER BY {order}"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        found = [node_of(r) for r in self._db().execute(sql, params)]
        return found[::-1] if latest else found

    def node(self, node_id: int) -> MemoryNode | None:
        row = self._db().execute(f"SELECT {NODE_COLUMNS} FROM nodes WHERE id = ?", (node_id,)).fetchone()
        return None if row is None else node_of(row)

    def count(self, stream: str, *, level: str | None = None, origin: str | None = None) -> int:
        # Every status of a stored stream asks (``GET /v1/streams``, each dashboard tick), and counting reads every
        # row it counts (~40 ms for 100,000 nodes): counted again only once the database changed.
        where, params = self._where(stream, level, None, None, origin)
        return self._unless_changed(("count", stream, level, origin), lambda db: int(
            db.execute(f"SELECT COUNT(*) FROM nodes WHERE {where}", params).fetchone()[0]))

    def streams(self) -> list[str]:
        return [r[0] for r in self._db().execute("SELECT DISTINCT stream FROM nodes ORDER BY stream")]

    def search(self, stream: str, text: str, *, level: str | None = None, start: float | None = None,
               end: float | None = None, limit: int = 20) -> list[tuple[MemoryNode, float]]:
        query = fts_query(text)
        if not query:
            return []
        where, params = self._where(stream, level, start, end, None, alias="n")
        cols = ", ".join(f"n.{c.strip()}" for c in NODE_COLUMNS.split(","))
        # bm25() is lower-is-better (negative); the score returned is its negation, so higher is better.
        sql = (f"SELECT {cols}, bm25(nodes_fts) AS rank FROM nodes_fts JOIN nodes n ON n.id = nodes_fts.rowid "
               f"WHERE nodes_fts MATCH ? AND {where} ORDER BY rank, n.start LIMIT ?")
        rows = self._db().execute(sql, [query, *params, int(limit)]).fetchall()
        return [(node_of(r), -float(r[11])) for r in rows]

    def versions(self, stream: str) -> dict[int, float]:
        return dict(self._db().execute("SELECT id, created FROM nodes WHERE stream = ?", (stream,)).fetchall())

    def fingerprint(self, stream: str) -> tuple[object, ...]:
        # Every search asks, and the aggregate reads each of the stream's rows (~2.5 ms for a day of memory).
        return self._unless_changed(("fingerprint", stream), lambda db: tuple(db.execute(
            "SELECT count(*), max(id), total(created) FROM nodes WHERE stream = ?", (stream,)).fetchone()))

    def _unless_changed(self, key: tuple[object, ...], read: Callable[[sqlite3.Connection], T]) -> T:
        """``read(db)``, or what it returned before (on any thread) if nothing was committed to the database since.

        The version is taken before ``read`` runs, so a commit meanwhile makes the next call read again."""
        db = self._db()
        version = self._unchanged.version()
        found, value = self._unchanged.get(key, version)
        if found:
            return value  # type: ignore[no-any-return]
        value = read(db)
        self._unchanged.put(key, version, value)
        return value

    # ----------------------------------------------------------------------------------- vectors

    _CHUNK = 500  # node ids per query: far below SQLite's limit on bound parameters

    def vectors(self, model: str, node_ids: Sequence[int]) -> dict[int, np.ndarray]:
        out: dict[int, np.ndarray] = {}
        ids = list(dict.fromkeys(int(i) for i in node_ids))
        db = self._db()
        for at in range(0, len(ids), self._CHUNK):
            chunk = ids[at:at + self._CHUNK]
            rows = db.execute(
                f"SELECT v.node_id, v.text_hash, v.vector, n.text FROM node_vectors v JOIN nodes n ON n.id = v.node_id "
                f"WHERE v.model = ? AND v.node_id IN ({', '.join('?' * len(chunk))})", (model, *chunk))
            for node_id, digest, blob, text in rows:
                if digest == text_hash(text):  # else: made from a text the node held before (a race)
                    out[node_id] = np.frombuffer(blob, dtype="<f4")
        return out

    def put_vectors(self, model: str, vectors: Mapping[int, np.ndarray], *,
                    text_hashes: Mapping[int, str] | None = None) -> None:
        if not vectors:
            return
        with self._write() as db:
            for node_id, vector in vectors.items():
                row = db.execute("SELECT text FROM nodes WHERE id = ?", (int(node_id),)).fetchone()
                if row is None:  # the node went meanwhile (a purge, a replacement): nothing to keep
                    continue
                digest = text_hash(row[0]) if text_hashes is None else text_hashes[node_id]
                blob = np.ascontiguousarray(vector, dtype="<f4").tobytes()
                db.execute("INSERT OR REPLACE INTO node_vectors (node_id, model, text_hash, vector) "
                           "VALUES (?, ?, ?, ?)", (int(node_id), model, digest, blob))

    def captioned_until(self, stream: str, level: str = Level.COARSE) -> float:
        # A walk over every ingest node of the level (~60 ms for 100,000), asked by every status of a stored stream:
        # walked again only once the database changed.
        def walk(db: sqlite3.Connection) -> float:
            rows = db.execute('SELECT start, "end" FROM nodes WHERE stream = ? AND level = ? AND origin = ? '
                              'ORDER BY start', (stream, str(level), INGEST_ORIGIN))
            until = 0.0
            for start, end in rows:
                if start > until + 1e-6:
                    break
                until = max(until, end)
            return until

        return self._unless_changed(("captioned_until", stream, str(level)), walk)

    def delete_stream(self, stream: str) -> int:
        # Triggers delete the nodes' full-text entries and vectors in the same transaction.
        with self._write() as db:
            deleted = db.execute("DELETE FROM nodes WHERE stream = ?", (stream,)).rowcount
            db.execute("DELETE FROM questions WHERE stream = ?", (stream,))
            db.execute("DELETE FROM alerts WHERE stream = ?", (stream,))
            db.execute("DELETE FROM watches WHERE stream = ?", (stream,))
            self._delete_observations(db, stream)
        return int(deleted)

    # ----------------------------------------------------------------------------------- questions

    def _add_question(self, stream: str, question: str, options: Sequence[str], horizon: float) -> int:
        with self._write() as db:
            cur = db.execute("INSERT INTO questions (stream, question, options, horizon, asked) VALUES (?, ?, ?, ?, ?)",
                             (stream, question, json.dumps(list(options)), float(horizon), time.time()))
            return int(cur.lastrowid)

    def _set_answer(self, question_id: int, answer: dict[str, object]) -> None:
        with self._write() as db:
            cur = db.execute("UPDATE questions SET answer = ?, answered = ? WHERE id = ?",
                             (json.dumps(answer), time.time(), question_id))
            if cur.rowcount == 0:
                raise KeyError(f"no question with id {question_id}")

    def questions(self, stream: str, limit: int = 50) -> list[dict[str, object]]:
        rows = self._db().execute(
            f"SELECT {QUESTION_COLUMNS} FROM questions "
            "WHERE stream = ? ORDER BY id DESC LIMIT ?", (stream, int(limit)))
        return [question_of(stream, row) for row in rows]


    # ----------------------------------------------------------------------------------- watches

    def _add_watch(self, stream: str, question: str, *, cooldown_seconds: float,
                   webhook_url: str | None) -> tuple[Watch, bool]:
        check_watch(question, cooldown_seconds)
        until = self.captioned_until(stream)
        with self._write() as db:  # BEGIN IMMEDIATE: the look-up and the insert are one step for every process
            same = same_watch(db.execute(f"SELECT {WATCH_COLUMNS} FROM watches WHERE stream = ? AND active = 1 "
                                         "AND webhook_url IS ? ORDER BY id", (stream, webhook_url)).fetchall(),
                              question)
            if same is not None:
                return same, False
            created = time.time()
            cur = db.execute("INSERT INTO watches (stream, question, cooldown_seconds, webhook_url, created, "
                             "checked_until) VALUES (?, ?, ?, ?, ?, ?)",
                             (stream, question.strip(), float(cooldown_seconds), webhook_url, created, until))
            return Watch(id=int(cur.lastrowid), stream=stream, question=question.strip(),
                         cooldown_seconds=float(cooldown_seconds), webhook_url=webhook_url, created=created), True

    def watches(self, stream: str | None = None) -> list[Watch]:
        sql, params = f"SELECT {WATCH_COLUMNS} FROM watches WHERE active = 1", []
        if stream is not None:
            sql += " AND stream = ?"
            params.append(stream)
        return [watch_of(r) for r in self._db().execute(sql + " ORDER BY id", params)]

    def delete_watch(self, watch_id: int) -> bool:
        with self._write() as db:
            return db.execute("UPDATE watches SET active = 0 WHERE id = ? AND active = 1",
                              (int(watch_id),)).rowcount > 0

    def _add_alert(self, alert: Alert) -> Alert:
        with self._write() as db:
            cur = db.execute(
                f"INSERT INTO alerts ({ALERT_COLUMNS.split(', ', 1)[1]}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (alert.watch_id, alert.stream, alert.question, float(alert.start), float(alert.end), alert.reason,
                 float(alert.frame_time), alert.level, float(alert.created), float(alert.event_end),
                 int(alert.llm_calls), int(alert.caption_calls)))
            return replace(alert, id=int(cur.lastrowid))

    def alerts(self, stream: str | None = None, *, watch_id: int | None = None, after_id: int = 0,
               limit: int = 100, start: float | None = None, end: float | None = None) -> list[Alert]:
        where, params = alert_filter(stream, watch_id, "?", start=start, end=end)
        rows = self._db().execute(f"SELECT {ALERT_COLUMNS} FROM alerts WHERE {where} AND id > ? ORDER BY id LIMIT ?",
                                  [*params, int(after_id), int(limit)])
        return [alert_of(r) for r in rows]

    def latest_alert(self, stream: str | None = None, *, watch_id: int | None = None) -> Alert | None:
        where, params = alert_filter(stream, watch_id, "?")
        row = self._db().execute(f"SELECT {ALERT_COLUMNS} FROM alerts WHERE {where} ORDER BY id DESC LIMIT 1",
                                 params).fetchone()
        return None if row is None else alert_of(row)

    def alert_cursor(self, consumer: str) -> int | None:
        row = self._db().execute("SELECT last_id FROM alert_cursors WHERE consumer = ?", (consumer,)).fetchone()
        return None if row is None else int(row[0])

    def set_alert_cursor(self, consumer: str, last_id: int) -> None:
        with self._write() as db:
            db.execute("INSERT INTO alert_cursors (consumer, last_id) VALUES (?, ?) "
                       "ON CONFLICT(consumer) DO UPDATE SET last_id = excluded.last_id", (consumer, int(last_id)))

    def watch_progress(self, watch_id: int) -> float:
        row = self._db().execute("SELECT checked_until FROM watches WHERE id = ?", (int(watch_id),)).fetchone()
        if row is None:
            raise KeyError(f"no watch with id {watch_id}")
        return float(row[0])

    def set_watch_progress(self, watch_id: int, checked_until: float) -> None:
        with self._write() as db:
            if db.execute("UPDATE watches SET checked_until = ? WHERE id = ?",
                          (float(checked_until), int(watch_id))).rowcount == 0:
                raise KeyError(f"no watch with id {watch_id}")




class _Unchanged:
    """Reads a store remembers until the database changes, shared by all its threads (each would otherwise read
    once per commit on its own connection). One connection, used for nothing else, tells when: its ``data_version``
    moves with every commit by any other connection (every thread's of this store, every process's)."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path, self.timeout = path, timeout
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._seen: dict[tuple[object, ...], tuple[int, Any]] = {}

    def version(self) -> int:
        with self._lock:
            if self._db is None:
                self._db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None,
                                           check_same_thread=False)  # used under the lock only
            return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def get(self, key: tuple[object, ...], version: int) -> tuple[bool, Any]:
        with self._lock:
            seen = self._seen.get(key)
        return (True, seen[1]) if seen is not None and seen[0] == version else (False, None)

    def put(self, key: tuple[object, ...], version: int, value: Any) -> None:
        with self._lock:
            if len(self._seen) >= _REMEMBERED_READS:
                self._seen.clear()
            self._seen[key] = (version, value)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
            self._seen.clear()


class _WriteTransaction:
    """``with`` block around one ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back on error."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind: object, error: object, tb: object) -> None:
        if kind is None:
            self.db.execute("COMMIT")
        else:
            self.db.execute("ROLLBACK")


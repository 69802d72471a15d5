"""The memory store on PostgreSQL: every stream's memory in one database that many machines share.

Same behaviour as :mod:`lucy.memory.sqlite_store` (the interface's semantics live in :mod:`lucy.memory.store`), on
the engine's own tools:

- Full-text search: a generated ``tsvector`` column over node text with a GIN index, queried with
  ``websearch_to_tsquery`` and ranked by ``ts_rank_cd`` (higher is better). Text is split on anything that is not
  a letter or digit, folded (``unaccent`` where the server has it) and stemmed without stop words, as SQLite's
  ``porter unicode61 remove_diacritics 2`` tokenizer does, so both backends find the same nodes.
- Idempotent writes: a span holds at most one ingest node and one tail node (partial unique indexes, ``ON
  CONFLICT``); writes to the same span take a transaction-scoped advisory lock, so concurrent writers on any machine
  serialise where SQLite's ``BEGIN IMMEDIATE`` serialises them.
- Vectors are ``bytea`` of little-endian float32; a foreign key drops them with their node and a trigger with a
  change of its text.
- Every committed node write sends ``NOTIFY lucy_nodes`` with ``{"stream": ..., "ids": [...]}`` (the ids are left
  out past :data:`NOTIFY_MAX_IDS`), for listeners on other machines that want to know without polling.
- One connection per thread (and per process), autocommit outside explicit write transactions. A connection that
  the server dropped (a restart, a failover) is replaced on the next call; a call whose connection broke before
  anything could have committed is retried once on a fresh one.
- On a cluster, a stream's owner sets a fence (:meth:`PostgresMemoryStore.set_fence`, a lease of
  :mod:`lucy.cluster.leases`): each write of that stream checks it in its own transaction, and a superseded owner's
  writes are refused. The cluster's tables (leases, wanted streams, the frame catalogue) are migration 4.
- What the detect stage observed (tracked objects, per-frame counts) is a mixin of its own,
  :mod:`lucy.memory.postgres_observations`, with its tables (migration 6); its writes check the fence too.
- Schema changes are an ordered list of migrations, each applied in one transaction under an advisory lock and
  recorded in ``schema_version``; a database from an earlier release is brought up to date, a newer one refused.

The DSN may hold a password: it never appears in an error message or a log line (:func:`redact_dsn`).
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np
import psycopg
from psycopg.conninfo import conninfo_to_dict

from lucy.config import Level, LucySettings
from lucy.errors import StoreError
from lucy.memory.nodes import INGEST_ORIGIN, TAIL_ORIGIN, MemoryNode
from lucy.memory.postgres_observations import PostgresObservations, v6_observations
from lucy.memory.postgres_watches import PostgresWatches
from lucy.memory.rows import NODE_COLUMNS, QUESTION_COLUMNS, SPAN_SLACK, node_of, question_of
from lucy.memory.sql import ThreadConnections
from lucy.memory.store import MemoryStore, text_hash

T = TypeVar("T")

NOTIFY_CHANNEL = "lucy_nodes"
NOTIFY_MAX_IDS = 500  # a NOTIFY payload must stay under 8000 bytes
CONNECT_TIMEOUT_SECONDS = 10

_WORD = re.compile(r"[^\W_]+", re.UNICODE)  # letters and digits: the pieces SQLite's unicode61 tokenizer makes
# Migrations hold this advisory lock (any 64-bit constant that no other lock of this database uses).
_MIGRATION_LOCK = 0x4C7563794D656D  # "LucyMem"

Cursor = psycopg.Cursor[Any]


class Fence(Protocol):
    """What a stream's one writer checks inside each of its writes (:class:`lucy.cluster.leases.Lease`)."""

    def check(self, db: Cursor, stream: str | None = None) -> None:
        """Raise :class:`StoreError` unless this writer may still write ``stream``."""


def _v1_initial(db: Cursor) -> None:
    """First release: the search configuration, nodes with their full-text column, and the question history."""
    # Stemmed, with no stop words (SQLite's porter tokenizer keeps "and", "not"), accents folded where possible.
    db.execute("CREATE TEXT SEARCH DICTIONARY lucy_stem (TEMPLATE = snowball, Language = english)")
    db.execute("CREATE TEXT SEARCH CONFIGURATION lucy (COPY = english)")
    dictionaries = "lucy_stem"
    available = db.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'unaccent'").fetchone()
    if available is not None:
        try:
            with db.connection.transaction():  # a savepoint: without the privilege, search just keeps accents
                db.execute("CREATE EXTENSION IF NOT EXISTS unaccent")
            dictionaries = "unaccent, lucy_stem"
        except psycopg.errors.InsufficientPrivilege:
            pass
    db.execute(f"ALTER TEXT SEARCH CONFIGURATION lucy ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, "
               f"word, hword, hword_part, numword, numhword, hword_numpart WITH {dictionaries}")
    db.execute("""
        CREATE TABLE nodes (
            id          bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            stream      text             NOT NULL,
            level       text             NOT NULL,
            start       double precision NOT NULL,
            "end"       double precision NOT NULL,
            text        text             NOT NULL,
            instruction text             NOT NULL DEFAULT '',
            origin      text             NOT NULL DEFAULT 'ingest',
            parent      bigint REFERENCES nodes(id) ON DELETE SET NULL,
            model       text             NOT NULL DEFAULT '',
            created     double precision NOT NULL,
            -- Punctuation splits words first, as in SQLite's unicode61 tokenizer ("KX-4821" is "kx" and "4821",
            -- not a word and a negative number; "14:05" is "14" and "05").
            search      tsvector GENERATED ALWAYS AS
                            (to_tsvector('lucy', regexp_replace(text, '[[:punct:]]+', ' ', 'g'))) STORED,
            CHECK ("end" > start)
        )""")
    db.execute("CREATE INDEX nodes_stream_level_start ON nodes (stream, level, start)")
    db.execute("CREATE INDEX nodes_parent ON nodes (parent)")  # ON DELETE SET NULL looks children up by parent
    db.execute("CREATE INDEX nodes_search ON nodes USING gin (search)")
    # One ingest node and one tail node per span: writes are idempotent, a span is never held twice.
    db.execute("CREATE UNIQUE INDEX nodes_ingest_span ON nodes (stream, level, start) "
               f"WHERE origin = '{INGEST_ORIGIN}'")
    db.execute(f"CREATE UNIQUE INDEX nodes_tail_span ON nodes (stream, level, start) WHERE origin = '{TAIL_ORIGIN}'")
    db.execute("""
        CREATE TABLE questions (
            id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            stream   text             NOT NULL,
            question text             NOT NULL,
            options  text             NOT NULL DEFAULT '[]',
            horizon  double precision NOT NULL DEFAULT 0,
            asked    double precision NOT NULL,
            answer   text,
            answered double precision
        )""")
    db.execute("CREATE INDEX questions_stream_id ON questions (stream, id)")


def _v2_vectors(db: Cursor) -> None:
    """Embedding vectors of node text, per model; they go with their node and with a change of its text."""
    db.execute("""
        CREATE TABLE node_vectors (
            node_id   bigint NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
            model     text   NOT NULL,
            text_hash text   NOT NULL,
            vector    bytea  NOT NULL,
            PRIMARY KEY (node_id, model)
        )""")
    db.execute("""
        CREATE FUNCTION lucy_drop_stale_vectors() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM node_vectors WHERE node_id = OLD.id;
            RETURN NULL;
        END $$""")
    db.execute("""
        CREATE TRIGGER nodes_vectors_update AFTER UPDATE OF text ON nodes
        FOR EACH ROW WHEN (NEW.text IS DISTINCT FROM OLD.text) EXECUTE FUNCTION lucy_drop_stale_vectors()""")


def _v3_watches(db: Cursor) -> None:
    """Watches, how far each has checked its stream, the alerts raised, and how far each deliverer delivered."""
    db.execute("""
        CREATE TABLE watches (
            id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            stream           text             NOT NULL,
            question         text             NOT NULL,
            cooldown_seconds double precision NOT NULL,
            webhook_url      text,
            created          double precision NOT NULL,
            active           boolean          NOT NULL DEFAULT true,
            checked_until    double precision NOT NULL DEFAULT 0
        )""")
    db.execute("CREATE INDEX watches_stream ON watches (stream, active)")
    # An identity never reuses an id, even after its stream is deleted, so a poller's after_id stays valid.
    db.execute("""
        CREATE TABLE alerts (
            id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            watch_id      bigint           NOT NULL,
            stream        text             NOT NULL,
            question      text             NOT NULL,
            start         double precision NOT NULL,
            "end"         double precision NOT NULL,
            reason        text             NOT NULL,
            frame_time    double precision NOT NULL,
            level         text             NOT NULL,
            created       double precision NOT NULL,
            event_end     double precision NOT NULL,
            llm_calls     integer          NOT NULL DEFAULT 0,
            caption_calls integer          NOT NULL DEFAULT 0
        )""")
    db.execute("CREATE INDEX alerts_stream_id ON alerts (stream, id)")
    db.execute("CREATE INDEX alerts_watch_id ON alerts (watch_id, id)")
    db.execute("CREATE TABLE alert_cursors (consumer text PRIMARY KEY, last_id bigint NOT NULL)")


def _v4_cluster(db: Cursor) -> None:
    """Tables of Lucy on a cluster (:mod:`lucy.cluster`): leases, the streams wanted, and the frame catalogue."""
    db.execute("""
        CREATE TABLE cluster_leases (
            stream  text        PRIMARY KEY,
            owner   text        NOT NULL,
            epoch   bigint      NOT NULL,
            expires timestamptz NOT NULL
        )""")
    # What the cluster should record (one owner each); the spec holds the source as given, credentials included.
    # ended: how its recording ended, once it has (its owner is then gone, its ingest capacity free again).
    db.execute("CREATE TABLE cluster_streams (name text PRIMARY KEY, spec jsonb NOT NULL, "
               "created double precision NOT NULL, ended jsonb)")
    db.execute("CREATE TABLE frame_streams (stream text PRIMARY KEY, meta jsonb NOT NULL)")
    # One immutable segment per owner epoch: frames [first_index, first_index + frames) of the stream.
    db.execute("""
        CREATE TABLE frame_segments (
            stream      text             NOT NULL REFERENCES frame_streams(stream) ON DELETE CASCADE,
            epoch       bigint           NOT NULL,
            first_index bigint           NOT NULL,
            frames      bigint           NOT NULL DEFAULT 0,
            first_time  double precision,
            last_time   double precision,
            audio_start double precision,
            audio_until double precision NOT NULL DEFAULT 0,
            PRIMARY KEY (stream, epoch)
        )""")


def _v5_bounded_reads(db: Cursor) -> None:
    """Indexes that let a page of a long stream's memory be read without the rest of it: by start time across
    levels (the newest nodes first, as the dashboard shows them), and by span length (the longest node of a stream
    bounds how long before a time a node overlapping it begins)."""
    db.execute('CREATE INDEX nodes_stream_start ON nodes (stream, start, "end")')
    db.execute('CREATE INDEX nodes_stream_length ON nodes (stream, ("end" - start))')


# Migration i brings a database from schema version i to i + 1 (version 0: no Lucy tables). Append only; never edit
# a released step. Each runs in its own transaction, so it applies whole or not at all.
MIGRATIONS: list[Callable[[Cursor], None]] = [_v1_initial, _v2_vectors, _v3_watches, _v4_cluster, _v5_bounded_reads,
                                              v6_observations]


def redact_dsn(dsn: str) -> str:
    """A DSN as it may be shown: ``postgresql://user@host:port/dbname``, never the password (nor other options)."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "postgresql://(invalid DSN)"
    user = f"{parts['user']}@" if parts.get("user") else ""
    host = str(parts.get("host") or parts.get("hostaddr") or "localhost")
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{host}{port}/{parts.get('dbname') or ''}"


def search_query(text: str) -> str:
    """A user's free text as a ``websearch_to_tsquery`` query that cannot raise: every word quoted (its syntax,
    ``or``, ``-``, quotes, is matched as plain words), words joined by ``or``. "" when the text has no words."""
    words = dict.fromkeys(w.lower() for w in _WORD.findall(text))  # dedupe, keep order
    return " or ".join(f'"{w}"' for w in words)



def _span_key(node: MemoryNode) -> str:
    return f"{node.stream}\x1f{node.level}\x1f{float(node.start)!r}"


class PostgresMemoryStore(PostgresObservations, PostgresWatches, MemoryStore):
    """Memory of every stream, in the PostgreSQL database named by ``dsn`` (any libpq connection string); its
    watches and alerts by :class:`lucy.memory.postgres_watches.PostgresWatches`."""

    def __init__(self, dsn: str, *, lock_timeout_seconds: float = 30.0, migrate: bool = True) -> None:
        self.name = redact_dsn(dsn)
        try:
            self._secrets = [str(v) for k, v in conninfo_to_dict(dsn).items() if k == "password" and v]
        except psycopg.Error:  # its message may quote the DSN, password included
            raise StoreError(f"memory store: the PostgreSQL DSN is not a valid connection string "
                             f"({self.name})") from None
        self._dsn = dsn
        self.lock_timeout = lock_timeout_seconds
        self._connections: ThreadConnections[psycopg.Connection[Any]] = ThreadConnections(
            self._connect, name=self.name, close_errors=(psycopg.Error,), usable=lambda conn: not conn.closed)
        self._fence: Fence | None = None
        if migrate:
            self._migrate()

    @classmethod
    def for_settings(cls, settings: LucySettings, *, migrate: bool = True) -> PostgresMemoryStore:
        """The store that ``settings.memory.postgres_dsn`` names."""
        dsn = settings.memory.postgres_dsn
        if dsn is None:
            raise StoreError('memory.backend is "postgres" but memory.postgres_dsn is not set')
        return cls(dsn.get_secret_value(), lock_timeout_seconds=settings.memory.busy_timeout_seconds,
                   migrate=migrate)

    def __repr__(self) -> str:
        return f"PostgresMemoryStore({self.name!r})"

    # ----------------------------------------------------------------------------------- connections

    def redact(self, message: str) -> str:
        """``message`` without the DSN's password, on one line (for what is logged about this database)."""
        return self._scrub(message)

    def _scrub(self, message: str) -> str:
        for secret in self._secrets:
            message = message.replace(secret, "***")
        return " ".join(message.split())  # one line: libpq's hints come on lines of their own

    def _error(self, err: BaseException, doing: str = "") -> StoreError:
        return StoreError(self._scrub(f"memory store {self.name}{doing}: {err}"))

    def _conn(self) -> psycopg.Connection[Any]:
        """This thread's connection (:mod:`lucy.memory.sql`)."""
        return self._connections.get()

    def _connect(self) -> psycopg.Connection[Any]:
        """A new connection (for :class:`lucy.memory.sql.ThreadConnections`: one per thread)."""
        try:
            conn = psycopg.connect(self._dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS,
                                   application_name="lucy")
        except psycopg.Error as err:
            raise self._error(err, " cannot be opened") from None
        try:  # wait for another writer's lock this long at most, as SQLite's busy timeout does
            conn.execute(f"SET lock_timeout = {int(self.lock_timeout * 1000)}")
        except psycopg.Error as err:
            conn.close()
            raise self._error(err, " cannot be opened") from None
        return conn

    def open_connections(self) -> int:
        """Connections held now (one per live thread that used the store)."""
        return self._connections.count()

    def _run(self, work: Callable[[Cursor], T], *, write: bool = False) -> T:
        """``work`` on this thread's connection (in one transaction when ``write``), psycopg errors as StoreError.

        A connection the server dropped since its last use fails at once; the call is then made again on a new
        connection, unless it failed while committing (it may have committed: only the caller can tell)."""
        for attempt in (1, 2):
            conn = self._conn()
            committing = False
            try:
                if not write:
                    with conn.cursor() as cur:
                        return work(cur)
                with conn.transaction(), conn.cursor() as cur:
                    result = work(cur)
                    committing = True
                return result
            except psycopg.OperationalError as err:
                broken = conn.broken or conn.closed
                if broken:  # forgotten: this thread's next call opens a new one
                    self._connections.discard(conn)
                if not (broken and attempt == 1 and not committing):
                    raise self._error(err) from None
            except psycopg.Error as err:
                raise self._error(err) from None
        raise AssertionError("unreachable")

    def run(self, work: Callable[[Cursor], T], *, write: bool = False) -> T:
        """``work`` on this thread's connection, for the cluster's own tables (:mod:`lucy.cluster`); as ``_run``."""
        return self._run(work, write=write)

    def set_fence(self, fence: Fence | None) -> None:
        """Check ``fence`` inside every write of its stream (nodes, alerts, watch progress, observations) from now on:
        the store of a stream's owner on a cluster (:class:`lucy.cluster.leases.Lease`). None: no fence."""
        self._fence = fence

    def _fenced(self, db: Cursor, stream: str) -> None:
        if self._fence is not None:
            self._fence.check(db, stream)

    def _migrate(self) -> None:
        latest = len(MIGRATIONS)
        while True:  # one transaction per step; concurrent openers serialise on the lock and see the work done

            def step(cur: Cursor) -> bool:
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                cur.execute("CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)")
                row = cur.execute("SELECT version FROM schema_version").fetchone()
                if row is None:
                    cur.execute("INSERT INTO schema_version (version) VALUES (0)")
                version = 0 if row is None else int(row[0])
                if version > latest:
                    raise StoreError(f"memory store {self.name} has schema version {version}, newer than this "
                                     f"Lucy understands ({latest}); upgrade Lucy")
                if version == latest:
                    return True
                MIGRATIONS[version](cur)
                cur.execute("UPDATE schema_version SET version = %s", (version + 1,))
                return False

            if self._run(step, write=True):
                return

    @property
    def schema_version(self) -> int:
        return int(self._run(lambda c: c.execute("SELECT version FROM schema_version").fetchone())[0])

    def is_initialised(self) -> bool:
        """Whether the database holds Lucy's tables (reading never creates them: see ``migrate=False``)."""
        return self._run(lambda c: c.execute("SELECT to_regclass('schema_version')").fetchone()[0]) is not None

    def close(self) -> None:
        self._connections.close()

    # ----------------------------------------------------------------------------------- nodes

    _INSERT = ('INSERT INTO nodes (stream, level, start, "end", text, instruction, origin, parent, model, created) '
               'VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) '
               # One ingest node per span: a second caption of the same span replaces the first (same id).
               f"ON CONFLICT (stream, level, start) WHERE origin = '{INGEST_ORIGIN}' DO UPDATE SET "
               '"end" = excluded."end", text = excluded.text, instruction = excluded.instruction, '
               'parent = excluded.parent, model = excluded.model, created = excluded.created '
               'RETURNING id, created')

    def _insert(self, db: Cursor, node: MemoryNode) -> MemoryNode:
        created = node.created or time.time()
        span = (node.stream, str(node.level), float(node.start))
        parent = node.parent
        # FOR KEY SHARE: the parent cannot go between this check and the insert that refers to it.
        if parent is not None and db.execute("SELECT 1 FROM nodes WHERE id = %s FOR KEY SHARE",
                                             (parent,)).fetchone() is None:
            parent = None  # the parent went meanwhile (a purge): keep the node, unlinked
        values = (float(node.end), node.text, node.instruction, parent, node.model, created)
        id_: int | None = None
        if node.origin == TAIL_ORIGIN:
            # One tail node per span, updated in place (its id may be the parent of deeper nodes); none once the
            # span has its ingest caption.
            row = db.execute(f"SELECT {NODE_COLUMNS} FROM nodes WHERE stream = %s AND level = %s AND start = %s "
                             f"AND origin = %s", (*span, INGEST_ORIGIN)).fetchone()
            if row is not None:
                return node_of(row)
            row = db.execute('UPDATE nodes SET "end" = %s, text = %s, instruction = %s, parent = %s, model = %s, '
                             'created = %s WHERE stream = %s AND level = %s AND start = %s AND origin = %s '
                             'RETURNING id', (*values, *span, TAIL_ORIGIN)).fetchone()
            id_ = None if row is None else row[0]
        elif node.origin == INGEST_ORIGIN:
            # The whole span's caption takes over the tail node (same id), or replaces an earlier ingest caption.
            db.execute("DELETE FROM nodes WHERE stream = %s AND level = %s AND start = %s AND origin = %s AND EXISTS "
                       "(SELECT 1 FROM nodes WHERE stream = %s AND level = %s AND start = %s AND origin = %s)",
                       (*span, TAIL_ORIGIN, *span, INGEST_ORIGIN))
            row = db.execute('UPDATE nodes SET "end" = %s, text = %s, instruction = %s, parent = %s, model = %s, '
                             'created = %s, origin = %s '
                             'WHERE stream = %s AND level = %s AND start = %s AND origin = %s RETURNING id',
                             (*values, INGEST_ORIGIN, *span, TAIL_ORIGIN)).fetchone()
            id_ = None if row is None else row[0]
        if id_ is None:
            id_, created = db.execute(self._INSERT, (
                node.stream, str(node.level), float(node.start), float(node.end), node.text, node.instruction,
                node.origin, parent, node.model, created)).fetchone()
        return MemoryNode(stream=node.stream, level=str(node.level), start=float(node.start), end=float(node.end),
                          text=node.text, instruction=node.instruction, origin=node.origin, parent=parent,
                          model=node.model, created=created, id=id_)

    def _add_nodes(self, nodes: Sequence[MemoryNode]) -> list[MemoryNode]:
        for node in nodes:
            if not node.end > node.start:
                raise ValueError(f"node span [{node.start}, {node.end}) is empty")
        if not nodes:
            return []
        # Writers of the same span (ingest and tail nodes) serialise on a lock per span, taken in one order.
        keys = sorted({_span_key(n) for n in nodes if n.origin in (INGEST_ORIGIN, TAIL_ORIGIN)})

        def write(db: Cursor) -> list[MemoryNode]:
            for stream in sorted({n.stream for n in nodes}):
                self._fenced(db, stream)
            if keys:
                db.execute("SELECT pg_advisory_xact_lock(hashtextextended(k, 0)) "
                           "FROM (SELECT k FROM unnest(%s::text[]) AS k ORDER BY k) AS spans", (keys,))
            stored = [self._insert(db, node) for node in nodes]
            by_stream: dict[str, list[int]] = {}
            for node in stored:
                by_stream.setdefault(node.stream, []).append(int(node.id or 0))
            for stream, ids in by_stream.items():  # delivered to listeners when (and if) this commits
                payload = {"stream": stream, "ids": ids} if len(ids) <= NOTIFY_MAX_IDS else {"stream": stream}
                db.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, json.dumps(payload)))
            return stored

        return self._run(write, write=True)

    @staticmethod
    def _where(stream: str, level: str | None, start: float | None, end: float | None,
               origin: str | None) -> tuple[str, list[object]]:
        clauses, params = ["stream = %s"], [stream]
        if level is not None:
            clauses.append("level = %s")
            params.append(str(level))
        if end is not None:  # overlap with [start, end): node.start < end and node.end > start
            clauses.append("start < %s")
            params.append(float(end))
        if start is not None:
            clauses.append('"end" > %s')
            params.append(float(start))
            # Implied by the overlap, but an index range: no node overlapping ``start`` begins longer before it
            # than the stream's longest node lasts (one lookup in nodes_stream_length), so the rows before are skipped.
            clauses.append(f'start >= %s - (SELECT max("end" - start) FROM nodes WHERE stream = %s) - {SPAN_SLACK}')
            params.extend([float(start), stream])
        if origin is not None:
            clauses.append("origin = %s")
            params.append(origin)
        return " AND ".join(clauses), params

    def nodes(self, stream: str, *, level: str | None = None, start: float | None = None,
              end: float | None = None, origin: str | None = None, limit: int | None = None,
              latest: bool = False) -> list[MemoryNode]:
        where, params = self._where(stream, level, start, end, origin)
        # COLLATE "C": levels and streams sort by code point, as SQLite (and Python) sort them.
        order = 'start DESC, level COLLATE "C" DESC, id DESC' if latest else 'start, level COLLATE "C", id'
        sql = f"SELECT {NODE_COLUMNS} FROM nodes WHERE {where} ORDER BY {order}"
        if limit is not None:
            sql += " LIMIT %s"
            params.append(int(limit))
        found = self._run(lambda c: [node_of(r) for r in c.execute(sql, params).fetchall()])
        return found[::-1] if latest else found

    def node(self, node_id: int) -> MemoryNode | None:
        row = self._run(lambda c: c.execute(f"SELECT {NODE_COLUMNS} FROM nodes WHERE id = %s",
                                            (int(node_id),)).fetchone())
        return None if row is None else node_of(row)

    def count(self, stream: str, *, level: str | None = None, origin: str | None = None) -> int:
        where, params = self._where(stream, level, None, None, origin)
        return int(self._run(lambda c: c.execute(f"SELECT count(*) FROM nodes WHERE {where}", params).fetchone())[0])

    def streams(self) -> list[str]:
        return self._run(lambda c: [r[0] for r in c.execute(
            'SELECT DISTINCT stream COLLATE "C" FROM nodes ORDER BY 1').fetchall()])

    def search(self, stream: str, text: str, *, level: str | None = None, start: float | None = None,
               end: float | None = None, limit: int = 20) -> list[tuple[MemoryNode, float]]:
        query = search_query(text)
        if not query:
            return []
        where, params = self._where(stream, level, start, end, None)
        # ts_rank_cd: cover density, higher is better; normalisation 1 divides by 1 + log(length), as bm25 favours
        # the shorter of two texts that match alike.
        sql = (f"SELECT {NODE_COLUMNS}, ts_rank_cd(search, q, 1) AS rank "
               f"FROM nodes, websearch_to_tsquery('lucy', %s) AS q WHERE search @@ q AND {where} "
               f"ORDER BY rank DESC, start, id LIMIT %s")
        rows = self._run(lambda c: c.execute(sql, [query, *params, int(limit)]).fetchall())
        return [(node_of(r), float(r[11])) for r in rows]

    def versions(self, stream: str) -> dict[int, float]:
        return self._run(lambda c: dict(c.execute("SELECT id, created FROM nodes WHERE stream = %s",
                                                  (stream,)).fetchall()))

    def fingerprint(self, stream: str) -> tuple[object, ...]:
        return tuple(self._run(lambda c: c.execute(
            "SELECT count(*), max(id), coalesce(sum(created), 0) FROM nodes WHERE stream = %s",
            (stream,)).fetchone()))

    def captioned_until(self, stream: str, level: str = Level.COARSE) -> float:
        # The walk over the level's ingest nodes runs in the server: one row comes back, not one per node. ``reach``
        # is the furthest end before each node; the first node that starts past it (beyond 1e-6) ends the prefix.
        row = self._run(lambda c: c.execute("""
            WITH walk AS (
                SELECT start, "end", max("end") OVER (ORDER BY start ROWS BETWEEN UNBOUNDED PRECEDING
                                                      AND 1 PRECEDING) AS reach
                FROM nodes WHERE stream = %s AND level = %s AND origin = %s)
            SELECT coalesce((SELECT coalesce(reach, 0) FROM walk WHERE start > coalesce(reach, 0) + 1e-6
                             ORDER BY start LIMIT 1),
                            (SELECT max("end") FROM walk), 0)""", (stream, str(level), INGEST_ORIGIN)).fetchone())
        return float(row[0])

    # ----------------------------------------------------------------------------------- vectors

    def vectors(self, model: str, node_ids: Sequence[int]) -> dict[int, np.ndarray]:
        ids = list(dict.fromkeys(int(i) for i in node_ids))
        if not ids:
            return {}
        rows = self._run(lambda c: c.execute(
            "SELECT v.node_id, v.text_hash, v.vector, n.text FROM node_vectors v JOIN nodes n ON n.id = v.node_id "
            "WHERE v.model = %s AND v.node_id = ANY(%s)", (model, ids)).fetchall())
        # A vector made from a text the node held before (a race) is left out.
        return {node_id: np.frombuffer(blob, dtype="<f4") for node_id, digest, blob, text in rows
                if digest == text_hash(text)}

    def put_vectors(self, model: str, vectors: Mapping[int, np.ndarray], *,
                    text_hashes: Mapping[int, str] | None = None) -> None:
        if not vectors:
            return

        def write(db: Cursor) -> None:
            # FOR SHARE: the nodes keep their text and stay until this commits. Nodes gone meanwhile are skipped.
            texts = dict(db.execute("SELECT id, text FROM nodes WHERE id = ANY(%s) ORDER BY id FOR SHARE",
                                    ([int(i) for i in vectors],)).fetchall())
            rows = [(int(node_id), model, text_hash(texts[int(node_id)]) if text_hashes is None
                     else text_hashes[node_id], np.ascontiguousarray(vector, dtype="<f4").tobytes())
                    for node_id, vector in vectors.items() if int(node_id) in texts]
            if rows:
                db.executemany("INSERT INTO node_vectors (node_id, model, text_hash, vector) VALUES (%s, %s, %s, %s) "
                               "ON CONFLICT (node_id, model) DO UPDATE SET text_hash = excluded.text_hash, "
                               "vector = excluded.vector", rows)

        self._run(write, write=True)

    # ----------------------------------------------------------------------------------- streams

    def delete_stream(self, stream: str) -> int:
        def write(db: Cursor) -> int:  # vectors go with their nodes (ON DELETE CASCADE)
            deleted = db.execute("DELETE FROM nodes WHERE stream = %s", (stream,)).rowcount
            db.execute("DELETE FROM questions WHERE stream = %s", (stream,))
            db.execute("DELETE FROM alerts WHERE stream = %s", (stream,))
            db.execute("DELETE FROM watches WHERE stream = %s", (stream,))
            self._delete_observations(db, stream)
            return int(deleted)

        return self._run(write, write=True)

    # ----------------------------------------------------------------------------------- questions

    def _add_question(self, stream: str, question: str, options: Sequence[str], horizon: float) -> int:
        row = self._run(lambda c: c.execute(
            "INSERT INTO questions (stream, question, options, horizon, asked) VALUES (%s, %s, %s, %s, %s) "
            "RETURNING id", (stream, question, json.dumps(list(options)), float(horizon), time.time())).fetchone(),
            write=True)
        return int(row[0])

    def _set_answer(self, question_id: int, answer: dict[str, object]) -> None:
        updated = self._run(lambda c: c.execute("UPDATE questions SET answer = %s, answered = %s WHERE id = %s",
                                                (json.dumps(answer), time.time(), int(question_id))).rowcount,
                            write=True)
        if updated == 0:
            raise KeyError(f"no question with id {question_id}")

    def questions(self, stream: str, limit: int = 50) -> list[dict[str, object]]:
        rows = self._run(lambda c: c.execute(
            f"SELECT {QUESTION_COLUMNS} FROM questions "
            "WHERE stream = %s ORDER BY id DESC LIMIT %s", (stream, int(limit))).fetchall())
        return [question_of(stream, row) for row in rows]


def shared_postgres(settings: LucySettings) -> PostgresMemoryStore:
    """One PostgreSQL handle per process and database, for readers of the cluster's tables (the frame catalogue)
    that open often (each question opens its stream's frames): its connections, one per thread, are reused."""
    dsn = settings.memory.postgres_dsn
    if dsn is None:
        raise StoreError('memory.backend is "postgres" but memory.postgres_dsn is not set')
    return _shared(dsn.get_secret_value(), settings.memory.busy_timeout_seconds)


@functools.cache
def _shared(dsn: str, lock_timeout_seconds: float) -> PostgresMemoryStore:
    return PostgresMemoryStore(dsn, lock_timeout_seconds=lock_timeout_seconds)

"""Watches, their alerts and their progress in PostgreSQL: the part of :class:`lucy.memory.postgres_store.
PostgresMemoryStore` that persists what :mod:`lucy.watch` checks and delivers, apart from its nodes.

A mixin of the store (it runs on the store's connections, in its transactions, and checks its fence): watches and
alerts are one responsibility of their own, and the store stays readable at one screen per concern. The rows are read
and written as :mod:`lucy.memory.rows` says, as in the SQLite store.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from lucy.memory.rows import ALERT_COLUMNS, WATCH_COLUMNS, alert_filter, alert_of, check_watch, same_watch, watch_of
from lucy.memory.watches import Alert, Watch

T = TypeVar("T")
Cursor = psycopg.Cursor[Any]


class PostgresWatches:
    """The watch and alert methods of :class:`lucy.memory.store.MemoryStore`, for :class:`lucy.memory.postgres_store.
    PostgresMemoryStore`, which provides what they run on."""

    if TYPE_CHECKING:
        _fence: object | None

        def _run(self, work: Callable[[Cursor], T], *, write: bool = False) -> T: ...

        def _fenced(self, db: Cursor, stream: str) -> None: ...

        def captioned_until(self, stream: str, level: str = ...) -> float: ...

    def _add_watch(self, stream: str, question: str, *, cooldown_seconds: float,
                   webhook_url: str | None) -> tuple[Watch, bool]:
        check_watch(question, cooldown_seconds)
        until = self.captioned_until(stream)
        created = time.time()

        def register(db: Cursor) -> tuple[Watch, bool]:
            # Registrations of one stream's watches serialise on a lock of their own (held to the commit), so two
            # at once, on any machine, cannot both miss the other and insert.
            db.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"watches:{stream}",))
            same = same_watch(db.execute(f"SELECT {WATCH_COLUMNS} FROM watches WHERE stream = %s AND active "
                                         "AND webhook_url IS NOT DISTINCT FROM %s ORDER BY id",
                                         (stream, webhook_url)).fetchall(), question)
            if same is not None:
                return same, False
            row = db.execute(
                "INSERT INTO watches (stream, question, cooldown_seconds, webhook_url, created, checked_until) "
                "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                (stream, question.strip(), float(cooldown_seconds), webhook_url, created, until)).fetchone()
            return Watch(id=int(row[0]), stream=stream, question=question.strip(),
                         cooldown_seconds=float(cooldown_seconds), webhook_url=webhook_url, created=created), True

        return self._run(register, write=True)

    def watches(self, stream: str | None = None) -> list[Watch]:
        sql, params = f"SELECT {WATCH_COLUMNS} FROM watches WHERE active", []
        if stream is not None:
            sql += " AND stream = %s"
            params.append(stream)
        rows = self._run(lambda c: c.execute(sql + " ORDER BY id", params).fetchall())
        return [watch_of(r) for r in rows]

    def delete_watch(self, watch_id: int) -> bool:
        return self._run(lambda c: c.execute("UPDATE watches SET active = false WHERE id = %s AND active",
                                             (int(watch_id),)).rowcount > 0, write=True)

    def _add_alert(self, alert: Alert) -> Alert:
        def write(db: Cursor) -> Any:
            self._fenced(db, alert.stream)
            return db.execute(
                f"INSERT INTO alerts ({ALERT_COLUMNS.split(', ', 1)[1]}) "
                f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (alert.watch_id, alert.stream, alert.question, float(alert.start), float(alert.end), alert.reason,
                 float(alert.frame_time), alert.level, float(alert.created), float(alert.event_end),
                 int(alert.llm_calls), int(alert.caption_calls))).fetchone()

        return replace(alert, id=int(self._run(write, write=True)[0]))

    def alerts(self, stream: str | None = None, *, watch_id: int | None = None, after_id: int = 0,
               limit: int = 100, start: float | None = None, end: float | None = None) -> list[Alert]:
        where, params = alert_filter(stream, watch_id, "%s", start=start, end=end)
        rows = self._run(lambda c: c.execute(
            f"SELECT {ALERT_COLUMNS} FROM alerts WHERE {where} AND id > %s ORDER BY id LIMIT %s",
            [*params, int(after_id), int(limit)]).fetchall())
        return [alert_of(r) for r in rows]

    def latest_alert(self, stream: str | None = None, *, watch_id: int | None = None) -> Alert | None:
        where, params = alert_filter(stream, watch_id, "%s")
        row = self._run(lambda c: c.execute(
            f"SELECT {ALERT_COLUMNS} FROM alerts WHERE {where} ORDER BY id DESC LIMIT 1", params).fetchone())
        return None if row is None else alert_of(row)

    def alert_cursor(self, consumer: str) -> int | None:
        row = self._run(lambda c: c.execute("SELECT last_id FROM alert_cursors WHERE consumer = %s",
                                            (consumer,)).fetchone())
        return None if row is None else int(row[0])

    def set_alert_cursor(self, consumer: str, last_id: int) -> None:
        self._run(lambda c: c.execute("INSERT INTO alert_cursors (consumer, last_id) VALUES (%s, %s) "
                                      "ON CONFLICT (consumer) DO UPDATE SET last_id = excluded.last_id",
                                      (consumer, int(last_id))), write=True)

    def watch_progress(self, watch_id: int) -> float:
        row = self._run(lambda c: c.execute("SELECT checked_until FROM watches WHERE id = %s",
                                            (int(watch_id),)).fetchone())
        if row is None:
            raise KeyError(f"no watch with id {watch_id}")
        return float(row[0])

    def set_watch_progress(self, watch_id: int, checked_until: float) -> None:
        def write(db: Cursor) -> int:
            if self._fence is not None:
                row = db.execute("SELECT stream FROM watches WHERE id = %s", (int(watch_id),)).fetchone()
                if row is not None:
                    self._fenced(db, row[0])
            return db.execute("UPDATE watches SET checked_until = %s WHERE id = %s",
                              (float(checked_until), int(watch_id))).rowcount

        updated = self._run(write, write=True)
        if updated == 0:
            raise KeyError(f"no watch with id {watch_id}")

"""Every memory node stored anywhere on the cluster, announced on each replica: ``LISTEN lucy_nodes``.

The PostgreSQL memory store sends ``NOTIFY lucy_nodes`` with the stream and the new nodes' ids as each write
commits (:mod:`lucy.memory.postgres_store`), whoever wrote them: an owner's coarse captions, or the deeper nodes a
question asked on any replica wrote back. Each replica listens on a connection of its own and announces those nodes
on its event bus (the dashboard's feed, MQTT), exactly as a single server announces the nodes its store writes.
A dropped connection (PostgreSQL restarting) is made again with backoff; nodes committed meanwhile are not announced
(they are in memory all the same; the feed is live news, not a log).
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import psycopg

from lucy.errors import StoreError
from lucy.memory.postgres_store import CONNECT_TIMEOUT_SECONDS, NOTIFY_CHANNEL, PostgresMemoryStore
from lucy.memory.rows import NODE_COLUMNS, node_of
from lucy.runtime.events import EventPublisher, NodeAnnouncer

log = logging.getLogger(__name__)

WAIT_SECONDS = 1.0  # how long one wait for notifications lasts (how soon a stop is noticed)
RETRY_SECONDS = (1.0, 10.0)  # reconnect backoff: first wait, most


class NodeListener:
    """Announces on ``bus`` every node that ``store``'s database commits (see the module's docstring)."""

    def __init__(self, store: PostgresMemoryStore, dsn: str, bus: EventPublisher) -> None:
        self.store = store
        self.announcer = NodeAnnouncer(bus)
        self._dsn = dsn
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="node-listener", daemon=True)
        self.listening = threading.Event()  # set while a LISTEN connection is up

    def start(self) -> NodeListener:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        delay = RETRY_SECONDS[0]
        while not self._stopping.is_set():
            try:
                with psycopg.connect(self._dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self.listening.set()
                    delay = RETRY_SECONDS[0]
                    while not self._stopping.is_set():
                        for note in conn.notifies(timeout=WAIT_SECONDS):
                            self._announce(note.payload)
            except psycopg.Error as err:
                log.warning("listening for new memory nodes failed (%s); again in %g s", self.store.redact(str(err)),
                            delay)
            finally:
                self.listening.clear()
            self._stopping.wait(delay)
            delay = min(2 * delay, RETRY_SECONDS[1])

    def _announce(self, payload: str) -> None:
        try:
            ids = [int(i) for i in json.loads(payload).get("ids", [])]
        except (ValueError, TypeError, AttributeError):
            log.warning("ignoring a malformed %s notification", NOTIFY_CHANNEL)
            return
        if not ids:  # a write of more nodes than a notification names: not announced one by one
            return
        try:
            rows: list[Any] = self.store.run(lambda c: c.execute(
                f"SELECT {NODE_COLUMNS} FROM nodes WHERE id = ANY(%s) ORDER BY id", (ids,)).fetchall())
        except StoreError as err:  # the next notification may fare better
            log.warning("cannot read the new memory nodes: %s", err)
            return
        self.announcer.on_nodes_added([node_of(row) for row in rows])

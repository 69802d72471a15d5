"""One database connection per thread, for the SQL memory stores (SQLite and PostgreSQL alike).

A store is used from many threads at once (the builder's executor, the API's, an embedding thread), and neither
sqlite3 nor psycopg connections may be shared between threads that use them concurrently. So each thread gets its
own connection, made on its first use; the connections of threads that have ended are closed as new ones are made
(callers use short-lived threads too: an event loop's executor, a thread per task, and each would otherwise keep a
descriptor open for the life of the store); a forked child starts afresh, never touching its parent's connections;
:meth:`ThreadConnections.close` closes them all and refuses any use after.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from lucy.errors import StoreError


class Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=Closable)


class ThreadConnections(Generic[C]):
    """This thread's connection from :meth:`get` (``connect()`` makes one when it has none, or when ``usable`` says
    its own is not any more). ``name`` names the store in the error once closed; closing a connection may raise
    ``close_errors``, which are ignored (it is gone either way); ``forked`` is called in a forked child before its
    first connection (to drop whatever else the parent held)."""

    def __init__(self, connect: Callable[[], C], *, name: str, close_errors: tuple[type[BaseException], ...] = (),
                 usable: Callable[[C], bool] = lambda conn: True, forked: Callable[[], None] | None = None) -> None:
        self._connect = connect
        self._name = name
        self._close_errors = close_errors
        self._usable = usable
        self._forked = forked
        self._local = threading.local()
        self._lock = threading.Lock()
        self._held: dict[threading.Thread, C] = {}
        self._pid = os.getpid()
        self.closed = False

    def get(self) -> C:
        """This thread's connection. Raises :class:`StoreError` once closed, or what ``connect`` raises."""
        if self.closed:
            raise StoreError(f"memory store {self._name} is closed")
        if self._pid != os.getpid():  # a forked child must not use its parent's connections
            self._pid = os.getpid()
            # (Nor close them: psycopg leaves a connection made by another process open, the parent's to use.)
            self._local = threading.local()
            self._held = {}
            self._lock = threading.Lock()
            if self._forked is not None:
                self._forked()
        conn: C | None = getattr(self._local, "conn", None)
        if conn is not None and self._usable(conn):
            return conn
        conn = self._connect()
        self._local.conn = conn
        with self._lock:
            self._held[threading.current_thread()] = conn
            self._close_orphans()
        return conn

    def discard(self, conn: C) -> None:
        """Forget (and close) a connection the server dropped: this thread's next :meth:`get` makes a new one."""
        self._local.conn = None
        with self._lock:
            for thread, held in list(self._held.items()):
                if held is conn:
                    del self._held[thread]
        self._close(conn)

    def count(self) -> int:
        """Connections held now (one per live thread that used the store)."""
        with self._lock:
            self._close_orphans()
            return len(self._held)

    def close(self) -> None:
        """Close every connection; :meth:`get` raises from now on."""
        with self._lock:
            held, self._held = list(self._held.values()), {}
            self.closed = True
        for conn in held:
            self._close(conn)

    def _close_orphans(self) -> None:
        """Close the connections of threads that have ended (call with the lock held)."""
        for thread in [t for t in self._held if not t.is_alive()]:
            self._close(self._held.pop(thread))

    def _close(self, conn: C) -> None:
        try:
            conn.close()
        except self._close_errors:
            pass

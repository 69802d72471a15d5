"""The per-thread connections of the SQL memory stores (lucy.memory.sql): one per thread, closed with their threads
and with the store, never shared with a forked child."""

from __future__ import annotations

import os
import threading

import pytest

from lucy.errors import StoreError
from lucy.memory.sql import ThreadConnections


class Conn:
    def __init__(self, *, fails_to_close: bool = False) -> None:
        self.closed = False
        self.fails_to_close = fails_to_close

    def close(self) -> None:
        self.closed = True
        if self.fails_to_close:
            raise OSError("already gone")


def in_thread(work):
    box = []
    thread = threading.Thread(target=lambda: box.append(work()))
    thread.start()
    thread.join()
    return box[0]


def test_each_thread_has_its_own_connection_closed_when_the_thread_has_ended():
    made: list[Conn] = []

    def connect() -> Conn:
        made.append(Conn())
        return made[-1]

    pool = ThreadConnections(connect, name="m")
    mine = pool.get()
    assert pool.get() is mine
    theirs = in_thread(pool.get)
    assert theirs is not mine and len(made) == 2
    assert pool.count() == 1 and theirs.closed and not mine.closed  # the ended thread's connection is closed


def test_an_unusable_or_discarded_connection_is_replaced():
    pool = ThreadConnections(Conn, name="m", usable=lambda conn: not conn.closed)
    first = pool.get()
    first.closed = True  # the server dropped it
    second = pool.get()
    assert second is not first
    pool.discard(second)
    assert second.closed and pool.get() is not second and pool.count() == 1


def test_close_closes_every_connection_and_refuses_any_use_after():
    pool = ThreadConnections(lambda: Conn(fails_to_close=True), name="memory.sqlite", close_errors=(OSError,))
    conn = pool.get()
    pool.close()  # a connection that fails to close is gone all the same
    assert conn.closed and pool.closed
    with pytest.raises(StoreError, match="memory store memory.sqlite is closed"):
        pool.get()


def test_a_forked_child_never_uses_nor_closes_its_parents_connections(monkeypatch):
    forks = []
    pool = ThreadConnections(Conn, name="m", forked=lambda: forks.append(True))
    parents = pool.get()
    monkeypatch.setattr(os, "getpid", lambda: -1)  # as a child sees it after fork()
    child = pool.get()
    assert child is not parents and not parents.closed and forks == [True] and pool.count() == 1

"""Exactly one writer per stream: leases, epochs and the fence every owner write checks, on a real PostgreSQL."""

from __future__ import annotations

import threading
import time

import pytest

from lucy.cluster.leases import Fenced, Leases
from lucy.memory.nodes import INGEST_ORIGIN, MemoryNode
from lucy.memory.postgres_store import PostgresMemoryStore
from lucy.memory.watches import Alert


@pytest.fixture
def db(postgres_dsn: str):
    store = PostgresMemoryStore(postgres_dsn)
    yield store
    store.close()


def _node(start: float, text: str = "a red van") -> MemoryNode:
    return MemoryNode(stream="cam", level="coarse", start=start, end=start + 60, text=text, origin=INGEST_ORIGIN)


def test_one_holder_at_a_time_and_each_takeover_is_a_new_epoch(db) -> None:
    leases = Leases(db, ttl_seconds=0.5)
    first = leases.acquire("cam", "owner-a")
    assert first is not None and first.epoch == 1 and first.expires > time.time()
    assert leases.acquire("cam", "owner-b") is None  # held and live
    assert leases.acquire("other", "owner-b").epoch == 1  # leases are per stream
    renewed = leases.renew(first)
    assert renewed.epoch == 1 and renewed.expires >= first.expires
    time.sleep(0.7)  # expired: anyone may take it, with a new epoch
    second = leases.acquire("cam", "owner-b")
    assert second is not None and second.epoch == 2
    with pytest.raises(Fenced, match="taken over"):
        leases.renew(first)
    third = leases.acquire("cam", "owner-c", take_over=True)  # a restarted owner does not wait for expiry
    assert third.epoch == 3 and leases.holders()["cam"].owner == "owner-c"
    leases.release(third)
    assert not leases.holders()["cam"].live
    assert leases.acquire("cam", "owner-d").epoch == 4  # released: no wait; epochs never go back


def test_a_superseded_owner_cannot_write_memory(db, postgres_dsn) -> None:
    leases = Leases(db, ttl_seconds=30)
    old = leases.acquire("cam", "owner-a")
    zombie = PostgresMemoryStore(postgres_dsn)
    zombie.set_fence(old)
    watch = db.add_watch("cam", "a red van")
    try:
        assert zombie.add(_node(0.0)).id is not None
        zombie.set_watch_progress(watch.id, 60.0)
        new = leases.acquire("cam", "owner-b", take_over=True)
        owner = PostgresMemoryStore(postgres_dsn)
        owner.set_fence(new)
        try:
            with pytest.raises(Fenced):
                zombie.add(_node(60.0, "a zombie's caption"))
            with pytest.raises(Fenced):
                zombie.add(_node(0.0, "a zombie's rewrite of a span"))
            with pytest.raises(Fenced):
                zombie.add_alert(Alert(id=None, watch_id=watch.id, stream="cam", question="a red van", start=0,
                                       end=60, reason="seen", frame_time=30, level="yes", created=time.time(),
                                       event_end=60))
            with pytest.raises(Fenced):
                zombie.set_watch_progress(watch.id, 120.0)
            zombie.add(MemoryNode(stream="dock", level="coarse", start=0, end=60, text="another stream",
                                  origin=INGEST_ORIGIN))  # the fence is the lease's stream only
            owner.add(_node(60.0, "the new owner's caption"))
            owner.set_watch_progress(watch.id, 120.0)
        finally:
            owner.close()
    finally:
        zombie.close()
    assert [(n.start, n.text) for n in db.nodes("cam")] == [(0.0, "a red van"), (60.0, "the new owner's caption")]
    assert db.watch_progress(watch.id) == 120.0 and db.alerts("cam") == []
    db.add(_node(120.0, "a question's write-back"))  # stores without a fence (API replicas) write as ever


def test_a_write_in_flight_holds_off_a_takeover_until_it_commits(db, postgres_dsn) -> None:
    """The fence locks the lease row for the write's transaction: a takeover waits for it, so the write is either
    refused or committed before the new epoch begins — never after."""
    leases = Leases(db, ttl_seconds=30)
    old = leases.acquire("cam", "owner-a")
    writer = PostgresMemoryStore(postgres_dsn)
    checked, release = threading.Event(), threading.Event()

    def slow_write(cur) -> None:
        old.check(cur)
        checked.set()
        release.wait(10)
        cur.execute("INSERT INTO cluster_streams (name, spec, created) VALUES ('in-flight', '{}', 0)")

    thread = threading.Thread(target=lambda: writer.run(slow_write, write=True))
    thread.start()
    try:
        assert checked.wait(10)
        taken: list[object] = []
        other = PostgresMemoryStore(postgres_dsn)
        taker = threading.Thread(target=lambda: taken.append(Leases(other, 30).acquire("cam", "owner-b",
                                                                                       take_over=True)))
        taker.start()
        taker.join(1.0)
        assert taker.is_alive() and not taken  # waiting for the write in flight
        release.set()
        thread.join(10)
        taker.join(10)
        assert taken and taken[0].epoch == 2
        other.close()
    finally:
        release.set()
        writer.close()
    assert db.run(lambda c: c.execute("SELECT count(*) FROM cluster_streams").fetchone())[0] == 1


def test_lock_timeouts_and_an_unreachable_database_are_503s(db, postgres_dsn) -> None:
    """What the API answers when PostgreSQL makes a request wait too long, or is not there (Retry-After)."""
    from lucy.errors import StoreError
    from lucy.service.errors import Busy, StoreDown, service_error_for
    from lucy.testing.waiting import free_port

    leases = Leases(db, ttl_seconds=30)
    old = leases.acquire("cam", "owner-a")
    holder = PostgresMemoryStore(postgres_dsn)
    impatient = PostgresMemoryStore(postgres_dsn, lock_timeout_seconds=0.3)
    checked, release = threading.Event(), threading.Event()

    def hold(cur) -> None:
        old.check(cur)
        checked.set()
        release.wait(10)

    thread = threading.Thread(target=lambda: holder.run(hold, write=True))
    thread.start()
    try:
        assert checked.wait(10)
        with pytest.raises(StoreError) as waited:
            Leases(impatient, 30).acquire("cam", "owner-b", take_over=True)
        assert isinstance(service_error_for(waited.value), Busy)
    finally:
        release.set()
        thread.join(10)
        holder.close()
        impatient.close()
    nowhere = PostgresMemoryStore(f"postgresql://lucy:pw@127.0.0.1:{free_port()}/lucy", migrate=False)
    with pytest.raises(StoreError) as down:
        nowhere.nodes("cam")
    assert isinstance(service_error_for(down.value), StoreDown) and "pw" not in str(down.value)

"""Exactly one writer per stream: a lease in PostgreSQL, and a fencing epoch every write checks.

A stream's lease is one row of ``cluster_leases`` (stream, owner, epoch, expires). Whoever takes a free or expired
lease bumps its epoch; its owner renews it well before it expires. Every write the owner makes for the stream (memory
nodes, alerts, frame segments, the committed count) runs :meth:`Lease.check` in the write's own transaction: it reads
the lease row ``FOR SHARE``, so the write either commits while the row still names this owner and epoch, or is
refused with :class:`Fenced`. A new owner's takeover updates that row, so it waits for a write in flight to end and
every later write of the old owner is refused: a zombie (a node cut off, a paused process) cannot write past its time.

Times are the database's clock (``clock_timestamp()``), so the nodes' clocks need not agree. The row is never deleted
(releasing only expires it): epochs of a stream only ever grow, even across a deletion and re-creation.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass

from lucy.errors import StoreError
from lucy.memory.postgres_store import Cursor, PostgresMemoryStore


class Fenced(StoreError):
    """A write of a stream's former owner, refused: another owner (a later epoch) holds the stream now."""


def owner_id(role: str = "owner") -> str:
    """An owner name unique to this incarnation: host, process and a random part (a restarted owner is new)."""
    return f"{role}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Lease:
    """This owner's hold on a stream, as of its last acquisition or renewal."""

    stream: str
    owner: str
    epoch: int
    expires: float  # Unix time (the database's clock)

    def check(self, db: Cursor, stream: str | None = None) -> None:
        """The fence: inside a write transaction, refuse the write unless this lease still holds ``stream``.

        The row is locked ``FOR SHARE`` until the transaction ends, so a takeover cannot slip in between this check
        and the write it guards."""
        if stream is not None and stream != self.stream:
            return
        row = db.execute("SELECT 1 FROM cluster_leases WHERE stream = %s AND owner = %s AND epoch = %s FOR SHARE",
                         (self.stream, self.owner, self.epoch)).fetchone()
        if row is None:
            raise Fenced(f"stream {self.stream!r}: this owner's lease (epoch {self.epoch}) was taken over; "
                         "its write was refused")


@dataclass(frozen=True)
class Holder:
    """Who holds a stream's lease (as any replica may show it)."""

    stream: str
    owner: str
    epoch: int
    expires: float
    live: bool  # not expired


class Leases:
    """The streams' leases in the memory store's database (``ttl_seconds``: how long one acquisition or renewal
    lasts; the owner renews every third of it)."""

    def __init__(self, db: PostgresMemoryStore, ttl_seconds: float = 10.0) -> None:
        if ttl_seconds <= 0:
            raise ValueError("a lease must last some time")
        self.db = db
        self.ttl = float(ttl_seconds)

    def acquire(self, stream: str, owner: str, *, take_over: bool = False) -> Lease | None:
        """Take the stream's lease if it is free, expired or already this owner's (a new epoch either way); None
        if another owner holds it. ``take_over``: take it even from a live holder — for an owner that Ray
        restarted after its node died: the dead incarnation's lease need not be waited out, because fencing, not
        expiry, is what keeps a superseded owner from writing."""
        row = self.db.run(lambda c: c.execute(
            "INSERT INTO cluster_leases AS l (stream, owner, epoch, expires) "
            "VALUES (%(s)s, %(o)s, 1, clock_timestamp() + make_interval(secs => %(ttl)s)) "
            "ON CONFLICT (stream) DO UPDATE SET owner = excluded.owner, epoch = l.epoch + 1, "
            "expires = excluded.expires "
            "WHERE %(take)s OR l.expires < clock_timestamp() OR l.owner = excluded.owner "
            "RETURNING epoch, extract(epoch FROM expires)",
            {"s": stream, "o": owner, "ttl": self.ttl, "take": take_over}).fetchone(), write=True)
        return None if row is None else Lease(stream, owner, int(row[0]), float(row[1]))

    def renew(self, lease: Lease) -> Lease:
        """Extend the lease; :class:`Fenced` if another owner took it meanwhile."""
        row = self.db.run(lambda c: c.execute(
            "UPDATE cluster_leases SET expires = clock_timestamp() + make_interval(secs => %s) "
            "WHERE stream = %s AND owner = %s AND epoch = %s RETURNING extract(epoch FROM expires)",
            (self.ttl, lease.stream, lease.owner, lease.epoch)).fetchone(), write=True)
        if row is None:
            raise Fenced(f"stream {lease.stream!r}: the lease (epoch {lease.epoch}) was taken over")
        return Lease(lease.stream, lease.owner, lease.epoch, float(row[0]))

    def release(self, lease: Lease) -> None:
        """Let the lease go now (an owner that stops cleanly): the next owner need not wait for it to expire."""
        self.db.run(lambda c: c.execute(
            "UPDATE cluster_leases SET expires = clock_timestamp() - interval '1 second' "
            "WHERE stream = %s AND owner = %s AND epoch = %s", (lease.stream, lease.owner, lease.epoch)), write=True)

    def holders(self) -> dict[str, Holder]:
        """Every stream's lease, by stream."""
        rows = self.db.run(lambda c: c.execute(
            "SELECT stream, owner, epoch, extract(epoch FROM expires), expires > clock_timestamp() "
            "FROM cluster_leases").fetchall())
        return {r[0]: Holder(r[0], r[1], int(r[2]), float(r[3]), bool(r[4])) for r in rows}


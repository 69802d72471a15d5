"""Work of the whole cluster that one API replica does at a time: the MQTT bridge and alert delivery.

Every replica serves HTTP, SSE and the dashboard and follows every stream, so each pushes alerts to its own SSE
clients. Two jobs must happen once per cluster instead: the MQTT bridge (several would publish every event several
times, answer every MQTT question several times, and knock each other off the broker with the same client id), and
delivering alerts to webhooks and MQTT (several would post each alert several times). A replica does them while it
holds the lease ``duty:delivery`` (a lease like a stream owner's, :mod:`lucy.cluster.leases`); another replica takes
over within a lease's life when it stops or dies, and delivery resumes at the shared cursor (``alert_cursors``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from lucy.cluster.leases import Fenced, Leases, owner_id
from lucy.errors import StoreError
from lucy.memory.postgres_store import PostgresMemoryStore

log = logging.getLogger(__name__)

DELIVERY = "duty:delivery"


async def hold_duty(db: PostgresMemoryStore, ttl: float, work: Callable[[], Awaitable[None]],
                    name: str = DELIVERY) -> None:
    """Run ``work()`` whenever this replica holds the duty ``name``, until cancelled: wait for the lease, run the
    work while renewing it, cancel the work if the lease is lost (and wait for it again). On cancellation the lease
    is released, so another replica need not wait for it to expire."""
    leases = Leases(db, ttl)
    owner = owner_id("replica")
    while True:
        try:
            lease = await asyncio.to_thread(leases.acquire, name, owner)
        except StoreError as err:
            log.warning("cannot take the %s lease yet: %s", name, err)
            lease = None
        if lease is None:
            await asyncio.sleep(ttl / 3)
            continue
        log.info("this replica holds %s (epoch %d)", name, lease.epoch)
        task = asyncio.create_task(work(), name=name)
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=ttl / 3)
                if task.done():
                    break
                try:
                    lease = await asyncio.to_thread(leases.renew, lease)
                except Fenced:
                    log.warning("this replica lost %s to another replica", name)
                    break
                except StoreError as err:  # the database is away: so is every other replica's renewal
                    log.warning("cannot renew the %s lease: %s", name, err)
            if task.done() and not task.cancelled() and task.exception() is not None:
                log.error("%s failed; trying again", name, exc_info=task.exception())
                await asyncio.to_thread(leases.release, lease)
                await asyncio.sleep(ttl / 3)
        except asyncio.CancelledError:
            with contextlib.suppress(StoreError):
                await asyncio.to_thread(leases.release, lease)
            raise
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

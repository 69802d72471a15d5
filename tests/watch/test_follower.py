"""The server's alert follower across restarts: it resumes where the last one stopped delivering (alerts raised
while no server ran go out), skips what is older than ``alerts.catch_up_seconds``, and a first start on a data
directory never re-sends history."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from lucy.config import load_settings
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.memory.watches import Alert, Watch
from lucy.metrics.stats import DeliveryStats
from lucy.watch.delivery import AlertFollower


class Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.ids: list[int] = []

    def deliver(self, alert: Alert, watch: Watch | None, payload: dict[str, Any]) -> None:
        assert watch is not None and payload["id"] == alert.id
        self.ids.append(int(alert.id or 0))

    async def close(self) -> None:
        pass


def raise_alert(memory: SQLiteMemoryStore, watch: Watch, age: float = 0.0) -> int:
    alert = memory.add_alert(Alert(id=None, watch_id=watch.id, stream="cam", question=watch.question, start=1,
                                   end=2, reason="seen", frame_time=1.5, level="coarse", created=time.time() - age,
                                   event_end=60))
    return int(alert.id or 0)


def follow(memory: SQLiteMemoryStore, catch_up: float = 3600.0) -> tuple[list[int], DeliveryStats]:
    """One server's life: start, deliver what is due, stop."""
    settings = load_settings(**{"alerts.catch_up_seconds": catch_up})
    sink, stats = Recorder(), DeliveryStats()
    follower = AlertFollower(memory, [sink], settings.alerts, stats)
    follower.last_id = follower._start_id()
    asyncio.run(follower.poll())
    return sink.ids, stats


def test_alerts_raised_while_no_server_ran_are_delivered_on_its_next_start(tmp_path):
    memory = SQLiteMemoryStore(tmp_path / "memory.sqlite")
    watch = memory.add_watch("cam", "Tell me when the van leaves")
    history = raise_alert(memory, watch)
    assert follow(memory)[0] == []  # a first start: history is not re-sent
    down = [raise_alert(memory, watch), raise_alert(memory, watch)]
    assert follow(memory)[0] == down
    assert follow(memory)[0] == []  # delivered once
    stale, fresh = raise_alert(memory, watch, age=7200), raise_alert(memory, watch)
    delivered, stats = follow(memory, catch_up=3600)
    assert delivered == [fresh] and history < stale
    assert stats.snapshot()[1] == {("recorder", "stale"): 1}
    memory.close()

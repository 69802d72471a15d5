"""Tracked objects as live events: :class:`ObjectFollower` follows the tracks and counts that the stream workers'
detect stages store, and announces on the server's event bus each track that appears (``new``), changes what it
is (``update``: it stopped or started moving, its label or attributes changed) or ends (``end``), and the counts in
view when they change. The MQTT bridge publishes them (``<prefix>/<stream>/objects``, ``<prefix>/<stream>/counts``).

Why polling the store: the detect stage runs in the stream's worker process (or on another node of a cluster) and
writes its observations to the memory store; the store is the one place every writer's tracks meet, whatever runs
them (``lucy ingest`` in another process included). One query per stream per ``mqtt.objects_poll_seconds``, and
only for a stream whose observed-until mark moved (a track and that mark are written in one transaction), is cheap;
the tracks looked at are those seen since a little before the last mark (:data:`LOOKBACK_MARGIN_SECONDS` beyond
``detect.track_lost_seconds``: a track ends that long after it was last seen).

Across restarts nothing is kept: a server that starts announces what happens from then on (the tracks still active
then end as ``end`` events; those that came and went while no server ran are in the API's history only).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from lucy.perception.objects import ObservationStore, TrackedObject
from lucy.runtime.events import EventPublisher
from lucy.service.objects import object_json

log = logging.getLogger(__name__)

LOOKBACK_MARGIN_SECONDS = 10.0
PAGE = 5000  # tracks read per look (a stream's tracks seen in a few seconds: far fewer)
NEW, UPDATE, END = "new", "update", "end"


def _what(track: TrackedObject) -> str:
    """What an ``update`` is about: the fields a subscriber acts on (not last_seen, which moves all the time)."""
    return json.dumps([track.label, track.moving, sorted(track.attributes.items())])


@dataclass
class _Stream:
    until: float  # the observed-until mark at the last look
    live: dict[int, str] = field(default_factory=dict)  # active tracks announced: id -> _what
    ended: dict[int, float] = field(default_factory=dict)  # tracks whose end was announced: id -> last_seen
    counts: dict[str, int] | None = None  # the counts last announced


class ObjectFollower:
    """Polls the store for each stream's new, changed and ended tracks and its counts; announces them on ``bus``."""

    def __init__(self, store: ObservationStore, bus: EventPublisher, streams: Callable[[], list[str]], *,
                 poll_seconds: float, lost_seconds: float) -> None:
        self.store, self.bus, self.streams = store, bus, streams  # streams: blocking (called in a thread)
        self.poll_seconds = poll_seconds
        self.lookback = lost_seconds + LOOKBACK_MARGIN_SECONDS
        self._state: dict[str, _Stream] = {}

    async def run(self) -> None:
        """Look every ``poll_seconds`` until cancelled."""
        while True:
            try:
                await asyncio.to_thread(self.poll)
            except Exception:  # keep following; the failure is in the log with its traceback
                log.exception("following tracked objects failed")
            await asyncio.sleep(self.poll_seconds)

    def poll(self) -> int:
        """One look at every stream (blocking); the number of events announced."""
        names = self.streams()
        for gone in set(self._state) - set(names):
            del self._state[gone]
        return sum(self._poll(name) for name in names)

    def _poll(self, stream: str) -> int:
        until = self.store.observed_until(stream)
        if until is None:
            return 0
        state = self._state.get(stream)
        if state is None:  # first look: what is there now is known, not news; the active tracks' ends will be
            state = self._state[stream] = _Stream(until)
            for track in self.store.object_tracks(stream, start=max(0.0, until - self.lookback), limit=PAGE):
                if track.active:
                    state.live[track.track_id] = _what(track)
                else:
                    state.ended[track.track_id] = track.last_seen
            return self._counts(stream, state, max(0.0, until - self.lookback), until)
        if until == state.until:
            return 0  # nothing written since (tracks and the mark move in one transaction)
        since = max(0.0, state.until - self.lookback)
        tracks = self.store.object_tracks(stream, start=since, limit=PAGE)
        if len(tracks) >= PAGE:
            log.warning("tracked objects of %s: more than %d seen since %.1f s; some are not announced", stream,
                        PAGE, since)
        sent = 0
        for track in tracks:
            tid = track.track_id
            if tid in state.ended:
                continue
            what = _what(track)
            if tid not in state.live:
                sent += self._announce(NEW, track)
            elif state.live[tid] != what:
                sent += self._announce(UPDATE, track)
            if track.active:
                state.live[tid] = what
            else:  # ended: said once (a track that came and went between two looks is new, then ended)
                sent += self._announce(END, track)
                state.live.pop(tid, None)
                state.ended[tid] = track.last_seen
        state.ended = {tid: seen for tid, seen in state.ended.items() if seen >= since}
        sent += self._counts(stream, state, state.until, until)
        state.until = until
        return sent

    def _announce(self, kind: str, track: TrackedObject) -> int:
        self.bus.publish({"type": "object", "stream": track.stream, "event": kind, "object": object_json(track)})
        return 1

    def _counts(self, stream: str, state: _Stream, start: float, until: float) -> int:
        """Announce the newest count sample in ``[start, until]`` when it differs from the last one announced."""
        samples = self.store.object_counts(stream, start, until + 1e-6)
        if not samples:
            return 0
        latest = samples[-1]
        counts = dict(sorted(latest.counts.items()))
        if counts == state.counts:
            return 0
        state.counts = counts
        self.bus.publish({"type": "counts", "stream": stream, "time": round(latest.time, 3), "counts": counts})
        return 1

"""Checking each newly closed coarse span of a stream against the stream's watches.

The coarse builder (:class:`lucy.memory.builder.CoarseBuilder`) calls :meth:`WatchChecker.check_span` on its own loop
once a span's coarse caption is stored. For each active watch of the stream, every stored coarse span past the
watch's progress is checked in order, so that spans captioned out of order, spans a crash left unchecked and the past
of a watch asked to look from the start are all checked exactly once; the progress is stored after each span, so a
restarted builder resumes where the last one stopped. The watch list is read on every call: a watch registered by
another process (``lucy watch``, the API) is checked from the next span on.

A check shows the reasoner's *check* agent the span's memory (its coarse caption and what was heard in it):

- **no**: nothing to do;
- **maybe**: coarse memory is lossy, so the checker looks closer, as a question would: it captions the span's fine
  sub-spans with the watch's question as the instruction (stored as nodes of origin ``watch:<id>``, under the coarse
  node, where later questions reuse them) and checks again on that memory; yes raises an alert, anything else is a
  no. At most ``watch.max_confirmations_per_hour`` confirmations per watch per wall hour: past it a maybe raises
  nothing (and is counted);
- **yes**: an alert, unless the watch's previous yes ended less than its cooldown (media seconds) before this one
  began: then it is the same event going on, and the open alert stands for it (one alert per event, however many
  spans it lasts).

A check never fails or stalls the builder beyond its own calls: an error is logged and counted, and the span counts
as checked (its caption is in memory; a question can still find it).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Sequence

from lucy.config import Level, LucySettings
from lucy.ingest.frames import FrameStore, FrameStores
from lucy.memory.captioners.base import Captioner
from lucy.memory.nodes import INGEST_ORIGIN, MemoryNode
from lucy.memory.store import MemoryStore
from lucy.memory.transcribers import SPEECH_LEVEL, parse_transcript
from lucy.query.memory_view import heard_text
from lucy.query.reasoners.base import EvidenceSpan, MemoryItem, Reasoner
from lucy.watch.model import Alert, AlertLevel, Verdict, Watch, WatchStats

log = logging.getLogger(__name__)

_EPS = 1e-6
_HOUR = 3600.0


def watch_origin(watch_id: int) -> str:
    """The origin of the nodes a watch's confirmations store."""
    return f"watch:{watch_id}"


class WatchChecker:
    """Checks the closed coarse spans of one stream against its watches; used on the coarse builder's loop.

    The checker owns ``reasoner`` (closed by :meth:`aclose`); ``captioner`` is the builder's (the builder closes it).
    ``frames`` is the data directory's frame-store catalogue: the stream is opened on the first confirmation.
    """

    def __init__(self, settings: LucySettings, stream: str, memory: MemoryStore, reasoner: Reasoner,
                 captioner: Captioner | None, frames: FrameStores) -> None:
        self.settings = settings
        self.stream = stream
        self.memory = memory
        self.reasoner = reasoner
        self.captioner = captioner
        self.frame_stores = frames
        self.stats = WatchStats(stream)
        self._frames: FrameStore | None = None
        self._lock: asyncio.Lock | None = None  # made on the loop that checks: one check_span at a time
        self._confirmed: dict[int, collections.deque[float]] = {}  # watch id -> monotonic times of confirmations
        self._last_yes: dict[int, float] = {}  # watch id -> media end of its latest yes

    async def check_span(self, start: float, end: float, *,
                         slots: asyncio.Semaphore | None = None) -> list[Alert]:
        """Check every stored coarse span up to ``end`` that a watch of the stream has not checked yet (normally
        just ``[start, end)``, the span that closed); returns the alerts stored. ``slots``: the builder's caption
        slots, which confirmation captions share (default: one at a time)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        slots = slots or asyncio.Semaphore(1)
        async with self._lock:
            try:
                watches = await asyncio.to_thread(self.memory.watches, self.stream)
            except Exception as err:  # noqa: BLE001  (a store hiccup must not stop the builder; the next span retries)
                log.warning("watches of %s: cannot read them (%r); checked with the next span", self.stream, err)
                self.stats.add(errors=1)
                return []
            alerts: list[Alert] = []
            for watch in watches:
                alerts += await self._check_watch(watch, end, slots)
            return alerts

    async def aclose(self) -> None:
        """Close the reasoner (on the loop that used it)."""
        await self.reasoner.aclose()

    # ----------------------------------------------------------------------------------- one watch

    async def _check_watch(self, watch: Watch, until: float, slots: asyncio.Semaphore) -> list[Alert]:
        try:
            progress = await asyncio.to_thread(self.memory.watch_progress, watch.id)
            nodes = await asyncio.to_thread(self.memory.nodes, self.stream, level=Level.COARSE.value,
                                            start=progress, end=until, origin=INGEST_ORIGIN)
        except Exception as err:  # noqa: BLE001  (deleted meanwhile, or a store hiccup)
            log.warning("watch %d of %s: cannot read its progress (%r)", watch.id, self.stream, err)
            self.stats.add(errors=1)
            return []
        alerts = []
        for node in nodes:
            if node.start < progress - _EPS:
                continue  # checked already (its caption was stretched to the media end since)
            if node.start > progress + _EPS:
                break  # the span before it is not captioned yet: its caption's call checks both
            alert = await self._check_node(watch, node, slots)
            if alert is not None:
                alerts.append(alert)
            progress = node.end
            await asyncio.to_thread(self.memory.set_watch_progress, watch.id, progress)
        return alerts

    async def _check_node(self, watch: Watch, node: MemoryNode, slots: asyncio.Semaphore) -> Alert | None:
        calls = _Calls()
        try:
            return await self._decide(watch, node, slots, calls)
        except Exception as err:  # noqa: BLE001  (a failing reasoner or captioner is logged, never the builder's)
            log.warning("watch %d of %s: check of %.1f-%.1f s failed (%s); counted as checked", watch.id,
                        self.stream, node.start, node.end, str(err) or type(err).__name__)
            self.stats.add(errors=1, checks=1, llm_calls=calls.llm, caption_calls=calls.captions)
            return None

    async def _decide(self, watch: Watch, node: MemoryNode, slots: asyncio.Semaphore,
                      calls: _Calls) -> Alert | None:
        coarse = await asyncio.to_thread(self._coarse_item, node)
        reasoned = await self.reasoner.check(watch.question, [coarse])
        calls.llm += reasoned.usage.llm_calls
        verdict: Verdict = reasoned.reply.verdict
        reply = reasoned.reply
        level: AlertLevel = "coarse"
        confirmed = 0
        skipped = 0
        if verdict == "maybe":
            if self._may_confirm(watch.id):
                confirmed = 1
                fine = await self._confirm(watch, node, reply.evidence, slots, calls)
                reasoned = await self.reasoner.check(watch.question, [coarse, *fine])
                calls.llm += reasoned.usage.llm_calls
                reply, level = reasoned.reply, "fine"
                verdict = "yes" if reply.verdict == "yes" else "no"
            else:
                skipped = 1
        self.stats.add(verdict=verdict, checks=1, confirmations=confirmed, confirmations_skipped=skipped,
                       llm_calls=calls.llm, caption_calls=calls.captions)
        if verdict != "yes":
            return None
        start, end = _evidence(reply.evidence, node)
        last = await asyncio.to_thread(self._last_yes_of, watch.id)
        self._last_yes[watch.id] = max(end, last if last is not None else end)
        if last is not None and start - last < watch.cooldown_seconds:
            self.stats.add(merged=1)  # the same event as the open alert
            return None
        alert = Alert(id=None, watch_id=watch.id, stream=self.stream, question=watch.question, start=start, end=end,
                      reason=reply.reason, frame_time=(start + end) / 2, level=level, created=time.time(),
                      event_end=node.end, llm_calls=calls.llm, caption_calls=calls.captions)
        stored = await asyncio.to_thread(self.memory.add_alert, alert)
        self.stats.add(alerts=1)
        return stored

    def _coarse_item(self, node: MemoryNode) -> MemoryItem:
        """The span's coarse caption, with what was heard in it (as questions show it)."""
        heard = [line for speech in self.memory.nodes(self.stream, level=SPEECH_LEVEL, start=node.start, end=node.end)
                 for line in parse_transcript(speech.text)
                 if line.start < node.end - _EPS and line.end > node.start + _EPS]
        text = f"{node.text}\n{heard_text(heard)}" if heard else node.text
        return MemoryItem(1, node.level, node.start, node.end, text)

    def _may_confirm(self, watch_id: int) -> bool:
        """Whether the watch has confirmations left this hour (and takes one if so)."""
        now = time.monotonic()
        times = self._confirmed.setdefault(watch_id, collections.deque())
        while times and now - times[0] >= _HOUR:
            times.popleft()
        if len(times) >= self.settings.watch.max_confirmations_per_hour or self.captioner is None:
            return False
        times.append(now)
        return True

    async def _confirm(self, watch: Watch, node: MemoryNode, hints: Sequence[EvidenceSpan],
                       slots: asyncio.Semaphore, calls: _Calls) -> list[MemoryItem]:
        """Caption the span's fine sub-spans with the watch's question as the instruction; store and return them.
        Where the maybe named when in the span it saw a hint (``hints`` narrower than the span), only the sub-spans
        around that time are captioned: a VLM caption each, not one per sub-span of the whole span."""
        assert self.captioner is not None
        spec = self.settings.levels.fine
        if self._frames is None:
            self._frames = await asyncio.to_thread(self.frame_stores.open, self.stream)
        frames, captioner = self._frames, self.captioner
        bounds, t = [], node.start
        while t < node.end - _EPS:
            bounds.append((t, min(t + spec.span_seconds, node.end)))
            t += spec.span_seconds
        narrow = [h for h in hints if node.start - _EPS <= h.start and h.end <= node.end + _EPS and
                  h.end - h.start < node.end - node.start - _EPS]
        if narrow:
            bounds = [(a, b) for a, b in bounds if any(h.start < b and a < h.end + _EPS for h in narrow)] or bounds

        async def one(ref: int, a: float, b: float) -> MemoryItem | None:
            clip = await asyncio.to_thread(frames.read, a, b, spec.fps)
            if len(clip) == 0:
                return None
            async with slots:
                calls.captions += 1
                caption = await captioner.describe(clip, watch.question, level=Level.FINE)
            fine = MemoryNode(stream=self.stream, level=Level.FINE.value, start=a, end=b, text=caption.text,
                              instruction=watch.question, origin=watch_origin(watch.id), parent=node.id,
                              model=caption.model or captioner.model)
            await asyncio.to_thread(self.memory.add, fine)
            return MemoryItem(ref, fine.level, a, b, caption.text, watch.question)

        made = await asyncio.gather(*(one(2 + i, a, b) for i, (a, b) in enumerate(bounds)))
        return [item for item in made if item is not None]

    def _last_yes_of(self, watch_id: int) -> float | None:
        """Media end of the watch's latest yes: known on this loop, else its latest stored alert's (a restart)."""
        if watch_id in self._last_yes:
            return self._last_yes[watch_id]
        latest, after = None, 0
        while page := self.memory.alerts(watch_id=watch_id, after_id=after, limit=500):
            latest, after = page[-1], int(page[-1].id or 0)
        return None if latest is None else latest.end


class _Calls:
    """What one check cost so far (kept when it fails half-way)."""

    def __init__(self) -> None:
        self.llm = 0
        self.captions = 0


def _evidence(evidence: Sequence[EvidenceSpan], node: MemoryNode) -> tuple[float, float]:
    """The evidence's extent inside the span (the whole span when the reply named none inside it)."""
    inside = [(max(e.start, node.start), min(e.end, node.end)) for e in evidence
              if e.end > node.start and e.start < node.end]
    if not inside:
        return node.start, node.end
    return min(a for a, _ in inside), max(b for _, b in inside)

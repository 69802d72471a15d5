"""Checking each newly closed coarse span of a stream against the stream's watches.

The checker listens to the coarse builder (a :class:`lucy.memory.listeners.SpanListener` of
:class:`lucy.memory.builder.CoarseBuilder`): :meth:`WatchChecker.check_span` runs on the builder's loop once a span's
coarse caption is stored, after the span's transcript (waited for as a captioner that hears waits, and only while the
stream has watches); on start, spans an earlier run stored but did not check (it stopped in between) are checked.
For each active watch of the stream, every stored coarse span past the watch's progress is checked in order, so that
spans captioned out of order, spans a crash left unchecked and the past of a watch asked to look from the start are
all checked exactly once; the progress is stored after each span, so a restarted builder resumes where the last one
stopped. The watch list is read on every call: a watch registered by
another process (``lucy watch``, the API) is checked from the next span on.

A check shows the reasoner's *check* agent the span's memory (its coarse caption with the objects the detect stage
tracked in the span, :mod:`lucy.watch.observed`, and each line heard in it as a memory of its own); the watches due
on a span are checked together. With an embedder (the builder's), each line heard carries its similarity to the
subject of each watch about speech (:func:`lucy.query.reasoners.lexical_watch.watch_subject`; how it is measured:
:mod:`lucy.watch.meaning`), so that a line that says what the watch waits for in other words can be a yes: "the
airport coach leaves now" for "Is there an announcement about the shuttle?". An embedder that fails leaves the lines
to words.

- **no**: nothing to do;
- **maybe**: coarse memory is lossy, so the checker looks closer, as a question would: it captions the span's fine
  sub-spans that the maybes point at — once for all the watches unsure of this span, with their questions as the
  instruction (stored as nodes of origin ``watch:<ids>``, under the coarse node, where later questions reuse them) —
  and checks each maybe again on that memory; yes raises an alert, anything else is a no. At most
  ``watch.max_confirmations_per_hour`` confirmations per watch per wall hour: past it a maybe raises nothing (and is
  counted). A maybe within the cooldown of the watch's open alert is not looked at: a yes there would be merged;
- **yes**: an alert, unless the watch's previous yes ended less than its cooldown (media seconds) before this one
  began: then it is the same event going on, and the open alert stands for it (one alert per event, however many
  spans it lasts).

A check never fails or stalls the builder beyond its own calls: an error is logged and counted, and the span counts
as checked (its caption is in memory; a question can still find it).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from lucy.config import Level, LucySettings
from lucy.ingest.frames import FrameStore, FrameStores
from lucy.memory.captioners.base import Captioner, StoredSpan
from lucy.memory.embedders import Embedder, EmbedderError
from lucy.memory.listeners import BuilderLoop, SpanCaptioned, SpanListener
from lucy.memory.nodes import INGEST_ORIGIN, MemoryNode
from lucy.memory.store import MemoryStore
from lucy.memory.transcribers import SPEECH_LEVEL, parse_transcript
from lucy.memory.watches import Alert, AlertLevel, Watch
from lucy.metrics.stats import WatchStats
from lucy.perception.describe import read_observations
from lucy.query.memory_view import heard_text
from lucy.query.reasoners.base import CheckReply, EvidenceSpan, MemoryItem, Reasoner
from lucy.query.reasoners.lexical_watch import watch_subject
from lucy.watch.meaning import SpeechMeaning
from lucy.watch.observed import objects_section

log = logging.getLogger(__name__)

_EPS = 1e-6
_HOUR = 3600.0


def watch_origin(*watch_ids: int) -> str:
    """The origin of the nodes a closer look for some watches stores: ``watch:3`` or, shared, ``watch:3,7``."""
    return "watch:" + ",".join(str(i) for i in watch_ids)


def watches_of_origin(origin: str) -> list[int]:
    """The watches a node of :func:`watch_origin` was captioned for (none for another origin)."""
    kind, _, ids = origin.partition(":")
    return [int(i) for i in ids.split(",") if i.isdigit()] if kind == "watch" else []


class WatchChecker(SpanListener):
    """Checks the closed coarse spans of one stream against its watches; used on the coarse builder's loop.

    The checker owns ``reasoner`` (closed by :meth:`aclose`, by the builder it listens to as that stops); ``captioner``
    and ``embedder`` are its caller's (a recording's builder closes the captioner, its index writer the embedder).
    ``frames`` is the data directory's frame-store catalogue: the stream is opened on the first confirmation.
    """

    def __init__(self, settings: LucySettings, stream: str, memory: MemoryStore, reasoner: Reasoner,
                 captioner: Captioner | None, frames: FrameStores, *, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.stream = stream
        self.memory = memory
        self.reasoner = reasoner
        self.captioner = captioner
        self.frame_stores = frames
        self.embedder = embedder
        self.stats = WatchStats(stream)
        self._frames: FrameStore | None = None
        self._lock: asyncio.Lock | None = None  # made on the loop that checks: one check_span at a time
        self._confirmed: dict[int, collections.deque[float]] = {}  # watch id -> monotonic times of confirmations
        self._last_yes: dict[int, float] = {}  # watch id -> media end of its latest yes
        self._meaning = SpeechMeaning(embedder) if embedder is not None else None
        self._unmeant = False  # the embedder failed on the last try (said once)

    async def check_span(self, start: float, end: float, *, slots: asyncio.Semaphore | None = None,
                         heard: Callable[[], Awaitable[object]] | None = None) -> list[Alert]:
        """Check every stored coarse span that a watch of the stream has not checked yet, in time order from its
        progress on (normally just ``[start, end)``, the span that closed; a span captioned before the one ahead of
        it is checked with that one, when the watch's progress reaches it); returns the alerts stored.
        ``slots``: the builder's caption slots, which confirmation captions share (default: one at a time);
        ``heard``: awaited before checking when the stream has watches (the builder's wait for the span's
        transcript)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        slots = slots or asyncio.Semaphore(1)
        async with self._lock:
            try:
                watches = await asyncio.to_thread(self.memory.watches, self.stream)
                progress = {w.id: await asyncio.to_thread(self.memory.watch_progress, w.id) for w in watches}
                nodes = await asyncio.to_thread(self.memory.nodes, self.stream, level=Level.COARSE.value,
                                                start=min(progress.values(), default=end), origin=INGEST_ORIGIN)
            except Exception as err:  # noqa: BLE001  (a store hiccup, a watch deleted meanwhile: the next span retries)
                log.warning("watches of %s: cannot read them (%r); checked with the next span", self.stream, err)
                self.stats.add(errors=1)
                return []
            if watches and heard is not None:
                await heard()
            alerts: list[Alert] = []
            for node in nodes:
                # Due: the watches whose progress stops where this span starts. A watch whose progress is past it
                # checked it already (its caption was stretched to the media end since); one whose progress stops
                # before it waits for the span in between, whose caption's call checks both.
                due = [w for w in watches if abs(progress[w.id] - node.start) <= _EPS]
                if not due:
                    continue
                alerts += await self._check_node(due, node, slots)
                for watch in due:
                    progress[watch.id] = node.end
                    await asyncio.to_thread(self.memory.set_watch_progress, watch.id, node.end)
            return alerts

    async def aclose(self) -> None:
        """Close the reasoner (on the loop that used it)."""
        await self.reasoner.aclose()

    # ----------------------------------------------------------------------------------- as a span listener

    def tasks(self, builder: BuilderLoop) -> list[Coroutine[Any, Any, None]]:
        return [self._resume(builder)]

    async def _resume(self, builder: BuilderLoop) -> None:
        """Check the spans stored by an earlier run and not checked yet (it stopped in between)."""
        try:
            await self.check_span(0.0, builder.captioned_until, slots=builder.slots)
        except Exception as err:  # noqa: BLE001  (never the builder's: the next span's check looks again)
            log.warning("watches of %s: resuming checks failed (%r)", self.stream, err)

    async def on_captioned(self, event: SpanCaptioned) -> None:
        # What was said in the span is checked with what was seen (waited for only when there are watches).
        await self.check_span(event.span.start, event.span.end, slots=event.slots, heard=event.heard)

    # ----------------------------------------------------------------------------------- one span

    async def _check_node(self, watches: Sequence[Watch], node: MemoryNode,
                          slots: asyncio.Semaphore) -> list[Alert]:
        """Check one coarse span against the watches due on it: a cheap check each, then one closer look shared by
        all the maybes, then each maybe checked again on what the closer look saw."""
        span = await asyncio.to_thread(self._span_items, node)
        shown = await self._with_meaning(watches, span)
        calls = {w.id: _Calls() for w in watches}
        first = await asyncio.gather(*(self._ask(w, node, shown[w.id], calls[w.id]) for w in watches))
        replies: dict[int, tuple[CheckReply, AlertLevel]] = {}
        unsure: list[tuple[Watch, CheckReply]] = []
        for watch, reply in zip(watches, first, strict=True):
            if reply is None:
                continue  # failed: logged and counted; the span counts as checked
            if reply.verdict != "maybe":
                replies[watch.id] = (reply, "coarse")
            elif await asyncio.to_thread(self._in_open_event, watch, node):
                self.stats.add(merged=1)  # the event of its open alert may go on: nothing new to look at
                replies[watch.id] = (CheckReply(verdict="no", reason="within the cooldown of its open alert"),
                                     "coarse")
            elif self._may_confirm(watch.id):
                unsure.append((watch, reply))
            else:
                self.stats.add(confirmations_skipped=1)
                replies[watch.id] = (reply, "coarse")
        if unsure:
            try:
                looked, captions = await self._confirm(node, unsure, slots, first_ref=len(span) + 1)
            except Exception as err:  # noqa: BLE001  (a failing captioner is logged, never the builder's)
                log.warning("watches of %s: closer look at %.1f-%.1f s failed (%s); counted as checked", self.stream,
                            node.start, node.end, str(err) or type(err).__name__)
                self.stats.add(errors=len(unsure), checks=len(unsure),
                               llm_calls=sum(calls[w.id].llm for w, _ in unsure))
                unsure = []
            else:
                self.stats.add(caption_calls=captions, confirmations=len(unsure))
            second = await asyncio.gather(*(self._ask(w, node, [*shown[w.id], *looked[w.id]], calls[w.id])
                                            for w, _ in unsure))
            for (watch, _), reply in zip(unsure, second, strict=True):
                calls[watch.id].captions = captions
                if reply is not None:
                    verdict = "yes" if reply.verdict == "yes" else "no"
                    replies[watch.id] = (reply.model_copy(update={"verdict": verdict}), "fine")
        alerts = []
        for watch in watches:
            if watch.id not in replies:
                continue
            reply, level = replies[watch.id]
            self.stats.add(verdict=reply.verdict, checks=1, llm_calls=calls[watch.id].llm)
            if reply.verdict == "yes":
                alert = await self._raise(watch, node, reply, level, calls[watch.id])
                if alert is not None:
                    alerts.append(alert)
        return alerts

    async def _ask(self, watch: Watch, node: MemoryNode, memory: list[MemoryItem], calls: _Calls) -> CheckReply | None:
        """The check agent's reply on ``memory``; None when it failed (logged and counted)."""
        try:
            reasoned = await self.reasoner.check(watch.question, memory)
        except Exception as err:  # noqa: BLE001  (a failing reasoner is logged, never the builder's)
            log.warning("watch %d of %s: check of %.1f-%.1f s failed (%s); counted as checked", watch.id,
                        self.stream, node.start, node.end, str(err) or type(err).__name__)
            self.stats.add(errors=1, checks=1, llm_calls=calls.llm + 1)
            return None
        calls.llm += reasoned.usage.llm_calls
        return reasoned.reply

    async def _raise(self, watch: Watch, node: MemoryNode, reply: CheckReply, level: AlertLevel,
                     calls: _Calls) -> Alert | None:
        """Store the alert of a yes, unless it is the event of the watch's open alert going on (its cooldown)."""
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

    def _in_open_event(self, watch: Watch, node: MemoryNode) -> bool:
        """Whether the span starts within the cooldown of the watch's latest yes (a yes here would be merged)."""
        last = self._last_yes_of(watch.id)
        return last is not None and node.start - last < watch.cooldown_seconds

    def _span_items(self, node: MemoryNode) -> list[MemoryItem]:
        """The span's coarse caption with the objects tracked in it (ref 1), then each line heard in it (refs 2...),
        shown as questions show them."""
        heard = [line for speech in self.memory.nodes(self.stream, level=SPEECH_LEVEL, start=node.start, end=node.end)
                 for line in parse_transcript(speech.text)
                 if line.start < node.end - _EPS and line.end > node.start + _EPS]
        seen = "\n".join(part for part in (node.text, self._tracked(node)) if part)
        return [MemoryItem(1, node.level, node.start, node.end, seen),
                *(MemoryItem(2 + i, node.level, max(line.start, node.start), min(line.end, node.end),
                             heard_text([line])) for i, line in enumerate(heard))]

    def _tracked(self, node: MemoryNode) -> str:
        """The objects the detect stage tracked in the span, as an "Objects" section (:mod:`lucy.watch.observed`):
        a watch for a kind of object fires on its tracks. '' when none (or they cannot be read: the caption is
        checked alone, and the failure said)."""
        try:
            tracks = self.memory.object_tracks(self.stream, start=node.start, end=node.end)
        except Exception as err:  # noqa: BLE001  (a store hiccup: the span is checked on its caption)
            log.warning("watches of %s: cannot read the objects tracked in %.1f-%.1f s (%r)", self.stream, node.start,
                        node.end, err)
            return ""
        return objects_section(tracks)

    async def _with_meaning(self, watches: Sequence[Watch], span: list[MemoryItem]) -> dict[int, list[MemoryItem]]:
        """Each watch's memory of the span: the lines heard with their similarity to the watch's subject
        (:class:`lucy.watch.meaning.SpeechMeaning`) for a watch about speech, when there is an embedder and it works;
        else as they are."""
        shown = {w.id: span for w in watches}
        subjects = {w.id: subject for w in watches if (subject := watch_subject(w.question))}
        lines = span[1:]
        if self._meaning is None or not subjects or not lines:
            return shown
        try:
            scores = await asyncio.to_thread(self._meaning.similarities, [_said(m.text) for m in lines],
                                             list(dict.fromkeys(subjects.values())))
        except EmbedderError as err:  # meaning is an improvement, never a requirement: the lines go by words
            if not self._unmeant:  # once per outage, not once per span
                log.warning("watches of %s: cannot compare speech by meaning (%s); by words until it can",
                            self.stream, err)
            self._unmeant = True
            return shown
        self._unmeant = False
        for watch_id, subject in subjects.items():
            shown[watch_id] = [span[0], *(dataclasses.replace(m, similarity=s)
                                          for m, s in zip(lines, scores[subject], strict=True))]
        return shown

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

    async def _confirm(self, node: MemoryNode, unsure: Sequence[tuple[Watch, CheckReply]],
                       slots: asyncio.Semaphore, *, first_ref: int = 2) -> tuple[dict[int, list[MemoryItem]], int]:
        """Caption the span's fine sub-spans that the maybes point at, once for all of them, with their questions as
        the instruction; store the captions (origin :func:`watch_origin` of those watches, under the coarse node).
        Where a maybe named when in the span it saw its hint (evidence narrower than the span), only the sub-spans
        around that time are looked at for it. Returns each watch's fine memories and the captions made."""
        assert self.captioner is not None
        spec = self.settings.levels.fine
        if self._frames is None:
            self._frames = await asyncio.to_thread(self.frame_stores.open, self.stream)
        frames, captioner = self._frames, self.captioner
        grid, t = [], node.start
        while t < node.end - _EPS:
            grid.append((t, min(t + spec.span_seconds, node.end)))
            t += spec.span_seconds
        wanted = {watch.id: _around(grid, reply.evidence, node) for watch, reply in unsure}
        bounds = [b for b in grid if any(b in spans for spans in wanted.values())]
        ids = [watch.id for watch, _ in unsure]
        questions = list(dict.fromkeys(watch.question for watch, _ in unsure))
        instruction = questions[0] if len(questions) == 1 else \
            "Look for each of these: " + " | ".join(questions)
        captions = 0

        async def one(a: float, b: float) -> MemoryItem | None:
            nonlocal captions
            clip = await asyncio.to_thread(frames.read, a, b, spec.fps)
            if len(clip) == 0:
                return None
            observed = await asyncio.to_thread(read_observations, self.memory, self.stream, a, b) \
                if captioner.sees else None  # what the detect stage saw there goes with the frames
            context: dict[str, object] = {} if observed is None else {"observed": observed}
            if captioner.looks_between:  # the span's frames at the stored rate, read where it needs them
                context["stored"] = StoredSpan(frames, a, b)
            async with slots:
                captions += 1
                caption = await captioner.describe(clip, instruction, level=Level.FINE, **context)
            fine = MemoryNode(stream=self.stream, level=Level.FINE.value, start=a, end=b, text=caption.text,
                              instruction=instruction, origin=watch_origin(*ids), parent=node.id,
                              model=caption.model or captioner.model)
            await asyncio.to_thread(self.memory.add, fine)
            return MemoryItem(0, fine.level, a, b, caption.text, instruction)

        made = await asyncio.gather(*(one(a, b) for a, b in bounds))
        looked = {}
        for watch_id, spans in wanted.items():
            mine = [m for (a, b), m in zip(bounds, made, strict=True) if m is not None and (a, b) in spans]
            looked[watch_id] = [dataclasses.replace(m, ref=first_ref + i) for i, m in enumerate(mine)]
        return looked, captions

    def _last_yes_of(self, watch_id: int) -> float | None:
        """Media end of the watch's latest yes: known on this loop, else its latest stored alert's (a restart)."""
        if watch_id in self._last_yes:
            return self._last_yes[watch_id]
        latest = self.memory.latest_alert(watch_id=watch_id)
        return None if latest is None else latest.end


class _Calls:
    """What one check cost so far (kept when it fails half-way)."""

    def __init__(self) -> None:
        self.llm = 0
        self.captions = 0


def _around(grid: Sequence[tuple[float, float]], hints: Sequence[EvidenceSpan],
            node: MemoryNode) -> list[tuple[float, float]]:
    """The sub-spans of ``grid`` around the times a maybe named inside the span; all of them when it named none."""
    narrow = [h for h in hints if node.start - _EPS <= h.start and h.end <= node.end + _EPS and
              h.end - h.start < node.end - node.start - _EPS]
    return [(a, b) for a, b in grid if any(h.start < b and a < h.end + _EPS for h in narrow)] or list(grid)


def _said(heard: str) -> str:
    """The words of a line as :func:`heard_text` shows it ('Speech heard 1.0-2.0 s: "words"' -> words)."""
    return heard.split(": ", 1)[-1].strip().strip('"')


def _evidence(evidence: Sequence[EvidenceSpan], node: MemoryNode) -> tuple[float, float]:
    """The evidence's extent inside the span (the whole span when the reply named none inside it)."""
    inside = [(max(e.start, node.start), min(e.end, node.end)) for e in evidence
              if e.end > node.start and e.start < node.end]
    if not inside:
        return node.start, node.end
    return min(a for a, _ in inside), max(b for _, b in inside)

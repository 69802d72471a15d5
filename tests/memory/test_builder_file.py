"""The continuous coarse builder fed by a real ingest of a generated file: keeping up, never stalling
ingest, outages with catch-up, resume of what a previous run left, and live-stream gaps."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from lucy.config import load_settings
from lucy.ingest import Clip, Ingestor, ZarrFrameStore
from lucy.memory.builder import CoarseBuilder
from lucy.memory.listeners import BuilderLoop, ClosedSpans, Span, SpanCaptioned, SpanListener
from lucy.wiring import open_frames, open_memory

SPANS = [(0.0, 60.0), (60.0, 120.0), (120.0, 180.0), (180.0, 240.0), (240.0, 270.0)]


def make_settings(tmp_path: Path, **flags):
    defaults = {"memory.retry_initial_seconds": 0.05, "memory.retry_max_seconds": 0.2, "captioner.max_in_flight": 2}
    return load_settings(data=tmp_path / "data", **{**defaults, **flags})


def ingest(settings, video: Path, builder: CoarseBuilder | None, on_commit=None):
    def commit(store, stats):
        if builder is not None:
            builder.on_commit(store, stats)
        if on_commit is not None:
            on_commit(store, stats)

    return Ingestor(settings, str(video), "cam", on_commit=commit, frames=open_frames(settings)).run()


def hand_store(settings, *, live: bool) -> ZarrFrameStore:
    """An empty 2 fps frame store that the test fills itself."""
    return ZarrFrameStore.create(settings.data, "cam", source="rtsp://c" if live else "/v.mp4", source_id="c",
                                 live=live, width=64, height=64, stored_fps=2.0, codec="zstd", quality=90)


def spans_of(memory) -> list[tuple[float, float]]:
    return [(n.start, n.end) for n in memory.nodes("cam", level="coarse")]


def test_builder_keeps_up_with_a_file(tmp_path, five_span_video, clip_captioner):
    settings = make_settings(tmp_path)
    memory = open_memory(settings)
    captioner = clip_captioner(delay=0.02)
    seen_while_ingesting = []
    with CoarseBuilder(settings, "cam", memory, captioner, frames=open_frames(settings)) as builder:
        result = ingest(settings, five_span_video, builder,
                        on_commit=lambda store, stats: seen_while_ingesting.append(builder.stats.captioned_until))
        assert result.complete
        assert builder.drain(timeout=30)
        stats = builder.stats
    assert captioner.closed  # the builder owns and closes its captioner
    assert max(seen_while_ingesting) >= 60.0  # spans were captioned while the file was still being ingested
    assert spans_of(memory) == SPANS  # one node per span, the last partial span closed at the end of the file
    assert captioner.calls == len(SPANS) and stats.captioned == len(SPANS) and stats.failures == 0
    assert stats.captioned_until == 270.0 == memory.captioned_until("cam") and stats.lag == 0.0
    assert stats.pending == 0 and stats.coarse_nodes == len(SPANS) and stats.in_flight == 0
    for node, (first, last, frames) in zip(memory.nodes("cam"), sorted(captioner.captions), strict=True):
        # Each clip is its own span's frames at the coarse level's 0.5 fps (the store holds 2 fps).
        assert node.start <= first and last < node.end
        assert frames == pytest.approx((node.end - node.start) * settings.levels.coarse.fps, abs=1)
        assert node.text.startswith(f"{frames} frames from {first:.2f} s") and "level coarse" in node.text
        assert node.origin == "ingest" and node.model == "clip-test-1"
        assert node.instruction == settings.captioner.coarse_instruction
    memory.close()


def test_dead_captioner_never_stalls_ingest(tmp_path, five_span_video, clip_captioner):
    settings = make_settings(tmp_path / "a", **{"memory.queue_spans": 1, "captioner.max_in_flight": 2})
    t0 = time.monotonic()
    ingest(make_settings(tmp_path / "b"), five_span_video, None)
    baseline = time.monotonic() - t0

    memory = open_memory(settings)
    gate = threading.Event()  # never set: every describe() hangs
    captioner = clip_captioner(gate=gate)
    commit_seconds = []
    queue_depths = []
    builder = CoarseBuilder(settings, "cam", memory, captioner, frames=open_frames(settings)).start()

    def timed_commit(store, stats):
        began = time.perf_counter()
        builder.on_commit(store, stats)
        commit_seconds.append(time.perf_counter() - began)
        queue_depths.append(builder.stats.queued)

    t0 = time.monotonic()
    result = Ingestor(settings, str(five_span_video), "cam", on_commit=timed_commit, frames=open_frames(settings)).run()
    took = time.monotonic() - t0
    assert result.complete and result.frames == 540
    assert took < baseline * 2 + 2.0  # ingest ran at its own speed
    assert max(commit_seconds) < 0.2  # the callback only wakes the builder (a hung caption takes forever)
    assert not builder.drain(timeout=0.5)
    assert captioner.peak_in_flight == 2 and builder.stats.in_flight == 2  # bounded by max_in_flight
    assert max(queue_depths) <= 1 and builder.stats.queued <= 1  # bounded queue; the rest waits in the store
    assert builder.stats.pending == len(SPANS)
    t0 = time.monotonic()
    builder.stop()
    assert time.monotonic() - t0 < 5  # hung captions are cancelled
    assert memory.count("cam") == 0
    memory.close()


def test_outage_then_recovery_captions_the_backlog(tmp_path, five_span_video, clip_captioner):
    settings = make_settings(tmp_path, **{"captioner.max_in_flight": 3})
    memory = open_memory(settings)
    up = threading.Event()  # the captioner is down for the whole ingest, then comes back
    captioner = clip_captioner(delay=0.1, fail=lambda call: not up.is_set())
    with CoarseBuilder(settings, "cam", memory, captioner, frames=open_frames(settings)) as builder:
        ingest(settings, five_span_video, builder)
        time.sleep(0.6)
        back_at = time.monotonic()
        up.set()
        assert builder.drain(give_up_seconds=20, timeout=30)
        stats = builder.stats
    assert stats.failures > 0 and stats.last_error and "scripted failure" in stats.last_error
    assert stats.down_since is None  # recovered
    assert spans_of(memory) == SPANS
    assert len(captioner.captions) == len(SPANS)  # each span captioned once the captioner came back
    # Once the outage is known, a single span probes the captioner at a time (no herd of retries) ...
    during = [n for t, n in captioner.starts if captioner.first_failure + 0.3 < t < back_at]
    assert during and max(during) == 1
    # ... and after it recovers, the backlog is captioned max_in_flight at a time again.
    assert max(n for t, n in captioner.starts if t > back_at) == 3
    memory.close()


def test_dead_captioner_gives_up_and_next_run_catches_up(tmp_path, five_span_video, clip_captioner):
    settings = make_settings(tmp_path, **{"captioner.max_in_flight": 1})
    memory = open_memory(settings)
    # First run: two captions succeed, then the captioner dies.
    first = clip_captioner(fail=lambda call: call > 2)
    builder = CoarseBuilder(settings, "cam", memory, first, frames=open_frames(settings)).start()
    ingest(settings, five_span_video, builder)
    t0 = time.monotonic()
    assert not builder.drain(give_up_seconds=0.5, timeout=30)
    assert time.monotonic() - t0 < 10
    builder.stop()
    assert builder.stats.pending == 3 and builder.stats.captioned == 2
    assert spans_of(memory) == SPANS[:2]
    assert memory.captioned_until("cam") == 120.0

    # Next run (no new frames): only the three missing spans are captioned, from the frame store.
    second = clip_captioner()
    with CoarseBuilder(settings, "cam", memory, second, frames=open_frames(settings)) as builder:
        assert builder.drain(timeout=30)
    assert spans_of(memory) == SPANS
    assert sorted((f // 60) for f, _, _ in second.captions) == [2, 3, 4]
    # A third run has nothing to do.
    third = clip_captioner()
    with CoarseBuilder(settings, "cam", memory, third, frames=open_frames(settings)) as builder:
        assert builder.drain(timeout=30)
        assert builder.stats.closed == len(SPANS) and builder.stats.pending == 0
    assert third.calls == 0 and memory.count("cam") == len(SPANS)
    memory.close()


def test_captioner_timeout_counts_as_failure(tmp_path, five_span_video, clip_captioner):
    settings = make_settings(tmp_path, **{"memory.caption_timeout_seconds": 0.2})
    ingest(settings, five_span_video, None)  # frames first, captions later (the resume path)
    memory = open_memory(settings)

    class HangsTwice(clip_captioner):
        hangs = 0

        async def describe(self, clip, instruction, *, level):
            if self.hangs < 2:
                self.hangs += 1
                await asyncio.sleep(60)
            return await super().describe(clip, instruction, level=level)

    captioner = HangsTwice()
    with CoarseBuilder(settings, "cam", memory, captioner, frames=open_frames(settings)) as builder:
        assert builder.drain(timeout=30)
        assert builder.stats.failures == 2 and builder.stats.last_error == "TimeoutError"
    assert spans_of(memory) == SPANS and len(captioner.captions) == len(SPANS)
    memory.close()


def test_live_stream_gap_and_open_span(tmp_path, clip_captioner):
    """A live stream down from 55 s to 130 s: [60, 120) gets a 'no video' node without a describe() call;
    the last span stays open (a live stream may go on)."""
    settings = make_settings(tmp_path)
    store = ZarrFrameStore.create(settings.data, "cam", source="rtsp://camera/x", source_id="x", live=True,
                                  width=64, height=64, stored_fps=2.0, codec="zstd", quality=90)
    times = np.concatenate([np.arange(0, 55, 0.5), np.arange(130, 199.6, 0.5)])
    frames = np.full((len(times), 64, 64, 3), 90, dtype=np.uint8)
    store.append(frames[:100], times[:100])
    memory = open_memory(settings)
    captioner = clip_captioner()
    with CoarseBuilder(settings, "cam", memory, captioner, poll_seconds=0.1, frames=open_frames(settings)) as builder:
        assert builder.drain(timeout=30)
        assert spans_of(memory) == []  # last frame at 49.5 s: [0, 60) is still open
        store.append(frames[100:], times[100:])  # no callback: the builder notices by polling the store
        builder.on_commit()
        assert builder.drain(timeout=30)
        assert builder.stats.closed == 3 and builder.stats.ingested_until == 200.0
        assert builder.stats.lag == pytest.approx(20.0)
    nodes = memory.nodes("cam")
    assert [(n.start, n.end) for n in nodes] == SPANS[:3]
    assert nodes[1].text.startswith("No video was recorded from 60.0 s to 120.0 s") and nodes[1].model == ""
    assert captioner.calls == 2
    memory.close()


def test_span_closes_as_soon_as_its_last_slot_is_filled(tmp_path, clip_captioner):
    """A frame at 59.5 s at 2 fps fills the last slot of [0, 60): the span closes without waiting for 60 s."""
    settings = make_settings(tmp_path)
    store = hand_store(settings, live=True)
    memory = open_memory(settings)
    captioner = clip_captioner()
    with CoarseBuilder(settings, "cam", memory, captioner, frames=open_frames(settings)) as builder:
        store.append(np.zeros((119, 64, 64, 3), np.uint8), np.arange(119) * 0.5)  # up to 59.0 s
        builder.on_commit()
        assert builder.drain(timeout=30) and memory.count("cam") == 0
        store.append(np.zeros((1, 64, 64, 3), np.uint8), np.array([59.5]))
        builder.on_commit()
        assert builder.drain(timeout=30)
    assert spans_of(memory) == [(0.0, 60.0)] and captioner.captions == [(0.0, 58.0, 30)]
    memory.close()


@pytest.mark.parametrize("captioned_before_the_end", [True, False])
def test_last_span_reaches_the_media_end_without_a_frameless_sliver(tmp_path, clip_captioner,
                                                                     captioned_before_the_end):
    """Frames at 0.02 + k/2 s up to 119.52 s: the media ends at 120.02 s, a sliver past the last span boundary
    with no frame in it. The last span stretches to 120.02 s (its caption kept, if it was already made)."""
    settings = make_settings(tmp_path)
    store = hand_store(settings, live=False)
    memory = open_memory(settings)
    captioner = clip_captioner()
    with CoarseBuilder(settings, "cam", memory, captioner, frames=open_frames(settings)) as builder:
        store.append(np.zeros((240, 64, 64, 3), np.uint8), 0.02 + np.arange(240) * 0.5)
        if captioned_before_the_end:
            builder.on_commit()
            assert builder.drain(timeout=30) and spans_of(memory) == [(0.0, 60.0), (60.0, 120.0)]
        store.mark_finished(complete=True, lost=None)
        builder.on_commit()
        assert builder.drain(timeout=30)
        stats = builder.stats
    assert spans_of(memory) == [(0.0, 60.0), (60.0, 120.02)]
    assert captioner.calls == 2 == stats.captioned  # stretching a stored caption is not captioning again
    assert stats.captioned_until == 120.02 == memory.captioned_until("cam") == store.info().media_seconds
    assert not any(n.text.startswith("No video") for n in memory.nodes("cam"))
    memory.close()


def test_builder_failure_is_raised_to_the_caller(tmp_path, five_span_video, clip_captioner):
    """A bug (not a CaptionerError) stops the builder and reaches the caller instead of hiding."""
    settings = make_settings(tmp_path)
    ingest(settings, five_span_video, None)
    memory = open_memory(settings)

    class Broken(clip_captioner):
        async def describe(self, clip, instruction, *, level):
            raise ZeroDivisionError("bug in a backend")

    builder = CoarseBuilder(settings, "cam", memory, Broken(), frames=open_frames(settings)).start()
    with pytest.raises(ZeroDivisionError, match="bug in a backend"):
        builder.drain(timeout=30)
    builder.stop()
    memory.close()


def test_stop_ends_the_builder_while_every_caption_fails_at_once(tmp_path, five_span_video, clip_captioner):
    """A stop that lands while a failed caption is being retried ends the builder thread: the stop is not lost
    in the timeout around describe() (Python 3.11's wait_for could swallow it, leaving the thread retrying)."""
    settings = make_settings(tmp_path, **{"memory.retry_initial_seconds": 0.001, "memory.retry_max_seconds": 0.001,
                                          "captioner.max_in_flight": 4})
    ingest(settings, five_span_video, None)
    memory = open_memory(settings)
    for _ in range(30):
        captioner = clip_captioner(fail=lambda call: True)
        builder = CoarseBuilder(settings, "cam", memory, captioner, frames=open_frames(settings)).start()
        while captioner.calls < 20:
            time.sleep(0.001)
        builder.stop(timeout=5)
        assert not builder._thread.is_alive() and captioner.closed
    memory.close()


class Listener(SpanListener):
    """Writes down what the builder tells it, and says a line in each span (as a transcriber would)."""

    def __init__(self, *, fail_on: float | None = None) -> None:
        self.events: list[object] = []
        self.closed: list[tuple[float, float]] = []
        self.fail_on = fail_on

    def on_start(self) -> None:
        self.events.append("start")

    def tasks(self, builder: BuilderLoop) -> list:
        async def once() -> None:  # a task that returns is done, and the builder goes on
            self.events.append(("task", builder.stream, builder.captioned_until))

        return [once()]

    async def on_spans(self, closed: ClosedSpans) -> None:
        self.closed = [(s.start, s.end) for s in closed.spans]

    async def transcript(self, span: Span) -> str | None:
        return f"words of span {span.k}"

    async def on_captioned(self, event: SpanCaptioned) -> None:
        if event.span.start == self.fail_on:
            raise RuntimeError("a listener's own bug")
        self.events.append(("captioned", event.span.start, event.node.text, await event.heard()))

    async def aclose(self) -> None:
        self.events.append("aclose")

    def on_stop(self, timeout: float) -> None:
        self.events.append("stop")


def test_span_listeners_see_each_span_once_it_is_captioned(tmp_path, five_span_video, clip_captioner):
    class Hearing(clip_captioner):
        hears = True

        async def describe(self, clip, instruction, *, level, transcript=None):
            caption = await super().describe(clip, instruction, level=level)
            return replace(caption, text=f"{caption.text}; heard: {transcript}")

    settings = make_settings(tmp_path)
    memory = open_memory(settings)
    listener = Listener()
    with CoarseBuilder(settings, "cam", memory, Hearing(), listeners=[listener],
                       frames=open_frames(settings)) as builder:
        assert ingest(settings, five_span_video, builder).complete
        assert builder.drain(timeout=30)
    assert listener.events[:2] == ["start", ("task", "cam", 0.0)] and listener.events[-2:] == ["aclose", "stop"]
    captioned = sorted(e[1:] for e in listener.events if isinstance(e, tuple) and e[0] == "captioned")
    assert [start for start, _, _ in captioned] == [start for start, _ in SPANS]
    for k, (_, text, heard) in enumerate(captioned):  # the listener's transcript went to the captioner that hears
        assert text.endswith(f"heard: words of span {k}") and heard == f"words of span {k}"
    assert listener.closed == SPANS  # the last look at the ended file: every span, the last partial one too


def test_a_listener_that_fails_fails_the_builder(tmp_path, five_span_video, clip_captioner):
    settings = make_settings(tmp_path)
    memory = open_memory(settings)
    listener = Listener(fail_on=60.0)
    builder = CoarseBuilder(settings, "cam", memory, clip_captioner(), listeners=[listener],
                            frames=open_frames(settings)).start()
    try:
        ingest(settings, five_span_video, builder)
        with pytest.raises(RuntimeError, match="a listener's own bug"):
            builder.drain(timeout=30)
    finally:
        builder.stop()
    assert listener.events[-2:] == ["aclose", "stop"]  # closed all the same


def test_an_idle_builder_holds_no_frames(tmp_path, five_span_video, clip_captioner):
    """Caught up and waiting for the next span, the builder keeps none of the clips it captioned (its caption tasks
    each kept the last one while they waited: a stream worker grew by a clip per task, ~90 MiB)."""
    given: list[int] = []  # ids of the clips the builder captioned (other tests' clips may live in this process)

    class Remembering(clip_captioner):
        async def describe(self, clip, instruction, *, level):
            given.append(id(clip))
            return await super().describe(clip, instruction, level=level)

    settings = make_settings(tmp_path)
    memory = open_memory(settings)
    with CoarseBuilder(settings, "cam", memory, Remembering(), frames=open_frames(settings)) as builder:
        assert ingest(settings, five_span_video, builder).complete
        assert builder.drain(timeout=30)
        assert builder.stats.captioned == len(SPANS) == len(given)
        gc.collect()
        held = [o for o in gc.get_objects() if isinstance(o, Clip) and id(o) in set(given)]
        assert not held, f"{len(held)} clips still held by an idle builder"

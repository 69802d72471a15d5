"""Watches end to end on the embedded backends: a generated video ingested with the pixels captioner, each closed
coarse span checked by the lexical reasoner (confirmed by fine captions when coarse memory only hints, one closer
look for all the watches unsure of a span), alerts stored once per event, and a restarted builder that resumes
checking where the last one stopped."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from lucy.config import load_settings
from lucy.ingest import Ingestor
from lucy.memory.builder import CoarseBuilder
from lucy.memory.captioners.pixels import PixelsCaptioner
from lucy.memory.embedders import Embedder, EmbedderError, make_embedder
from lucy.memory.nodes import MemoryNode
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.memory.transcribers.base import TranscriptLine, format_transcript
from lucy.query.reasoners.lexical import LexicalReasoner
from lucy.synth import PALETTE, Overlay, Scene, write_video
from lucy.watch.checker import WatchChecker, watch_origin, watches_of_origin
from lucy.wiring import open_frames

SIGN = "Tell me when the FIRE EXIT sign appears"  # 130-150 s only
BAY = "Let me know when LOADING BAY is shown"  # 70-230 s: three coarse spans
NEVER = ["Alert me if a ZEBRA shows up", "tell me when the word PELICAN appears", "notify me about QUARTZ",
         "tell me when VIOLIN is written", "alert me when GARAGE 9 is shown", "tell me when HELIPAD appears",
         "alert me if MAGNOLIA is shown", "tell me when the TUNDRA sign appears"]


def settings_for(data: Path):
    return load_settings(data=data, **{"ingest.frame_width": 320, "ingest.frame_height": 180,
                                       "captioner.pixels.coarse_max_frames": 8, "captioner.max_in_flight": 2})


def video(path: Path) -> Path:
    scenes = [Scene(0, 130, PALETTE["gray"]), Scene(130, 150, PALETTE["blue"]), Scene(150, 240, PALETTE["gray"])]
    overlays = [Overlay(130, 150, "FIRE EXIT", size=0.14, x=0.05, y=0.05),
                Overlay(70, 230, "LOADING BAY", size=0.1, x=0.05, y=0.6)]
    return write_video(path, duration=240, fps=4, width=320, height=180, scenes=scenes, overlays=overlays)


def builder_for(settings, memory) -> tuple[CoarseBuilder, WatchChecker]:
    captioner = PixelsCaptioner(settings.captioner.pixels)
    checker = WatchChecker(settings, "cam", memory, LexicalReasoner(), captioner, open_frames(settings))
    return CoarseBuilder(settings, "cam", memory, captioner, listeners=[checker], frames=open_frames(settings)), checker


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    """The video ingested while ten watches are registered on its stream."""
    root = tmp_path_factory.mktemp("watch")
    settings = settings_for(root / "data")
    memory = SQLiteMemoryStore.for_data(settings)
    ids = {q: memory.add_watch("cam", q).id for q in [SIGN, BAY, *NEVER]}
    builder, checker = builder_for(settings, memory)
    builder.start()
    Ingestor(settings, str(video(root / "v.mp4")), "cam", on_commit=builder.on_commit,
             frames=open_frames(settings)).run()
    assert builder.drain(timeout=120)
    stats = checker.stats.snapshot()
    builder.stop()
    yield settings, memory, ids, stats
    memory.close()


def test_a_sign_that_appears_mid_video_is_alerted_once_with_its_span(watched):
    _, memory, ids, _ = watched
    alerts = memory.alerts("cam", watch_id=ids[SIGN])
    assert len(alerts) == 1, alerts
    alert = alerts[0]
    assert 120 <= alert.start < 150 and 130 < alert.end <= 180  # the time the caption read the sign
    assert alert.start <= alert.frame_time <= alert.end
    # read clearly in coarse memory (OCR under "On-screen text:"): one cheap check, no closer look needed
    assert alert.level == "coarse" and alert.event_end == 180 and alert.llm_calls == 1 and alert.caption_calls == 0


@pytest.fixture(scope="module")
def misread(tmp_path_factory):
    """The video's frames ingested, and coarse memory of 120-180 s that read the sign only in part ("FIRE EX")."""
    root = tmp_path_factory.mktemp("misread")
    settings = settings_for(root / "data")
    Ingestor(settings, str(video(root / "v.mp4")), "cam", frames=open_frames(settings)).run()
    memory = SQLiteMemoryStore.for_data(settings)
    memory.add(MemoryNode(stream="cam", level="coarse", start=120, end=180, model="test",
                          text='Scenes:\n- 120.0-180.0 s: mostly gray background\n'
                               'On-screen text:\n- "FIRE EX" (top left, seen 131.0-134.0 s)\n- "LOADING BAY"'))
    yield settings, memory
    memory.close()


def test_a_near_miss_is_confirmed_by_one_closer_look_for_every_unsure_watch(misread):
    settings, memory = misread
    unsure = [memory.add_watch("cam", SIGN).id, memory.add_watch("cam", 'Tell me when a sign says "FIRE EXIT"').id]
    other = memory.add_watch("cam", "alert me when GARAGE 9 is shown").id
    for watch_id in (*unsure, other):
        memory.set_watch_progress(watch_id, 120.0)
    captioner = PixelsCaptioner(settings.captioner.pixels)
    checker = WatchChecker(settings, "cam", memory, LexicalReasoner(), captioner, open_frames(settings))
    alerts = asyncio.run(checker.check_span(120, 180))
    assert sorted(a.watch_id for a in alerts) == unsure
    assert all(a.level == "fine" and a.llm_calls == 2 and 130 <= a.start < 150 for a in alerts), alerts
    # the maybes named 131-134 s: one fine sub-span captioned, once for both watches, stored under the coarse node
    fine = memory.nodes("cam", level="fine")
    assert [(n.start, n.end, n.origin) for n in fine] == [(130, 140, watch_origin(*unsure))]
    assert watches_of_origin(fine[0].origin) == unsure and fine[0].parent is not None
    assert SIGN in fine[0].instruction and "FIRE EXIT" in fine[0].text
    stats = checker.stats.snapshot()
    assert stats["caption_calls"] == 1 and stats["confirmations"] == 2 and stats["checks"] == 3
    assert all(memory.watch_progress(i) == 180 for i in (*unsure, other))


def test_an_event_over_three_spans_raises_one_alert(watched):
    _, memory, ids, _ = watched
    alerts = memory.alerts("cam", watch_id=ids[BAY])
    assert len(alerts) == 1 and 60 <= alerts[0].start < 120, alerts


def test_what_is_never_shown_raises_nothing_and_every_watch_is_checked(watched):
    _, memory, ids, stats = watched
    assert all(memory.alerts(watch_id=ids[q]) == [] for q in NEVER)
    assert len(memory.alerts("cam")) == 2
    assert all(memory.watch_progress(i) == pytest.approx(240, abs=0.1) for i in ids.values())
    assert stats["checks"] == 10 * 4 and stats["errors"] == 0 and stats["alerts"] == 2
    assert stats["merged"] >= 2 and stats["verdicts"]["yes"] >= 4


def test_alerts_follow_by_id_and_deleted_watches_stop(watched):
    _, memory, ids, _ = watched
    first, second = memory.alerts("cam")
    assert memory.alerts("cam", after_id=first.id) == [second]
    assert memory.delete_watch(ids[NEVER[0]]) and not memory.delete_watch(ids[NEVER[0]])
    assert ids[NEVER[0]] not in {w.id for w in memory.watches("cam")} and len(memory.watches("cam")) == 9


def test_a_restarted_builder_resumes_checking_without_a_double_alert(watched):
    settings, memory, ids, _ = watched
    memory.set_watch_progress(ids[SIGN], 60.0)  # as if the last run stopped after captioning, before checking
    # The same question with other sinks (the same one would be the same watch):
    late = memory.add_watch("cam", SIGN, webhook_url="http://127.0.0.1:9/late")  # checked from the next span on...
    assert memory.watch_progress(late.id) == pytest.approx(240, abs=0.1)
    past = memory.add_watch("cam", SIGN, webhook_url="http://127.0.0.1:9/past")
    memory.set_watch_progress(past.id, 0.0)  # ... unless asked to look at the past (lucy watch --from-start)
    builder = builder_for(settings, memory)[0].start()
    try:
        deadline = time.monotonic() + 60
        while min(memory.watch_progress(i) for i in (ids[SIGN], past.id)) < 239.9:
            assert time.monotonic() < deadline, "the restarted builder did not resume checking"
            time.sleep(0.1)
    finally:
        builder.stop()
    assert len(memory.alerts(watch_id=ids[SIGN])) == 1  # the event it had alerted: merged, not raised again
    assert memory.alerts(watch_id=late.id) == []
    assert [(a.start >= 120, a.end <= 180) for a in memory.alerts(watch_id=past.id)] == [(True, True)]


def test_a_speech_watch_fires_on_a_line_that_says_it_in_other_words(tmp_path):
    """The checker compares each heard line with a speech watch's subject by the stream's embedder (the default
    local one): "a lost child" is heard as "a little girl ... cannot find her mother", no content word shared; a line
    about something else raises nothing, and without an embedder words alone decide."""
    settings = settings_for(tmp_path / "data")
    embedder = make_embedder(settings)
    if embedder is None:
        pytest.skip("the local embedder cannot run on this machine")
    memory = SQLiteMemoryStore.for_data(settings)
    lost = memory.add_watch("hall", "Is there an announcement about a lost child?")
    fire = memory.add_watch("hall", "Tell me when someone mentions a fire alarm")
    memory.add_many([MemoryNode("hall", "coarse", 0, 60, "Scenes:\n- 0.0-60.0 s: mostly gray background"),
                     MemoryNode("hall", "speech", 0, 60, format_transcript([
                         TranscriptLine(12.0, 15.0, "Please keep your luggage with you at all times."),
                         TranscriptLine(40.0, 44.0, "We have a little girl here who cannot find her mother.")]))])

    def check(with_embedder: bool) -> list:
        checker = WatchChecker(settings, "hall", memory, LexicalReasoner(), None, open_frames(settings),
                               embedder=embedder if with_embedder else None)
        for watch in (lost, fire):
            memory.set_watch_progress(watch.id, 0.0)
        return asyncio.run(checker.check_span(0.0, 60.0))

    try:
        assert check(with_embedder=False) == []
        alerts = check(with_embedder=True)
    finally:
        embedder.close()
        memory.close()
    assert [(a.watch_id, a.start, a.end) for a in alerts] == [(lost.id, 40.0, 44.0)], alerts


def test_a_span_captioned_before_the_one_ahead_of_it_is_checked_when_that_one_is(tmp_path):
    """Captions run two at a time, so a later span can be stored (and announced) first: it waits for the span in
    between and is checked with it, and the watch's progress reaches the end (what `lucy watch --until-finished`
    waits for)."""
    settings = settings_for(tmp_path / "data")
    memory = SQLiteMemoryStore.for_data(settings)
    watch = memory.add_watch("yard", SIGN)
    checker = WatchChecker(settings, "yard", memory, LexicalReasoner(), None, open_frames(settings))
    quiet = "Scenes:\n- {0}-{1} s: mostly gray background"
    try:
        memory.add_many([MemoryNode("yard", "coarse", 0, 60, quiet.format(0, 60))])
        asyncio.run(checker.check_span(0.0, 60.0))
        memory.add_many([MemoryNode("yard", "coarse", 120, 180, 'On-screen text:\n- "FIRE EXIT" (top left, '
                                                                'seen 130.0-150.0 s)')])
        assert asyncio.run(checker.check_span(120.0, 180.0)) == []  # waits: 60-120 is not stored yet
        assert memory.watch_progress(watch.id) == 60.0
        memory.add_many([MemoryNode("yard", "coarse", 60, 120, quiet.format(60, 120))])
        alerts = asyncio.run(checker.check_span(60.0, 120.0))
        assert memory.watch_progress(watch.id) == 180.0
    finally:
        memory.close()
    assert [(a.watch_id, a.start, a.end) for a in alerts] == [(watch.id, 130.0, 150.0)], alerts


class _DownEmbedder(Embedder):
    name, model, dim = "down", "down", 4

    def embed_passages(self, texts):
        raise EmbedderError("server down")

    def embed_query(self, text):
        raise EmbedderError("server down")


def test_a_failing_embedder_leaves_speech_to_words(tmp_path, caplog):
    settings = settings_for(tmp_path / "data")
    memory = SQLiteMemoryStore.for_data(settings)
    watch = memory.add_watch("hall", "Is there an announcement about the shuttle?")
    memory.add_many([MemoryNode("hall", "coarse", 0, 60, "Scenes:\n- 0.0-60.0 s: mostly gray background"),
                     MemoryNode("hall", "speech", 0, 60, format_transcript([TranscriptLine(
                         12.0, 15.0, "Attention, please. The shuttle to terminal B is now departing."),
                         # a line in other words, which only the embedder could compare
                         TranscriptLine(30.0, 33.0, "Please keep your luggage with you at all times.")]))])
    memory.set_watch_progress(watch.id, 0.0)
    checker = WatchChecker(settings, "hall", memory, LexicalReasoner(), None, open_frames(settings),
                           embedder=_DownEmbedder())
    try:
        alerts = asyncio.run(checker.check_span(0.0, 60.0))
    finally:
        memory.close()
    assert [(a.start, a.end) for a in alerts] == [(12.0, 15.0)] and checker.stats.snapshot()["errors"] == 0
    assert "cannot compare speech by meaning (server down)" in caplog.text

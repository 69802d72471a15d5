"""When on-screen text appeared and went, to a stored frame: the pixels captioner reads a text in a few analysed frames
of a span (seconds apart at coarse depth), then looks for its first and last frame among the stored frames in between
(a binary search on the line's region), within a bounded number of extra reads. The coarse builder and a question's
captions hand it the span's stored frames; each span says its own part of a text shown across their boundary."""

from __future__ import annotations

import asyncio
import math
import re

import numpy as np
import pytest

from lucy.config import Level, load_settings
from lucy.config.settings import PixelsCaptionerSettings
from lucy.ingest import Ingestor, ZarrFrameStore
from lucy.memory.builder import CoarseBuilder
from lucy.memory.captioners.base import StoredSpan
from lucy.memory.captioners.pixels import PixelsCaptioner, _reach
from lucy.query.captioning import SpanCaptioner
from lucy.synth import PALETTE, Overlay, Scene, write_video
from lucy.wiring import open_frames, open_memory

STORED_STEP = 0.5  # the live preset stores 2 frames a second


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    """180 s in three 60-s coarse spans (live preset): a sign from 75.0 to 88.0 s inside the second span, "DELAYED"
    from 110.0 to 140.5 s across the boundary at 120 s, a short "GATE 12 OPEN" from 131.5 to 136.0 s inside the third,
    and "CAM 3" on all along."""
    tmp = tmp_path_factory.mktemp("text_times")
    video = write_video(tmp / "v.mp4", duration=180, fps=4, scenes=[Scene(0, 180, PALETTE["gray"])],
                        overlays=[Overlay(75.0, 88.0, "PLATFORM 9 NORTH", x=0.1, y=0.2, size=0.06),
                                  Overlay(0, 180, "CAM 3", x=0.8, y=0.03, size=0.05),
                                  Overlay(131.5, 136.0, "GATE 12 OPEN", x=0.3, y=0.5, size=0.06),
                                  Overlay(110.0, 140.5, "DELAYED", x=0.5, y=0.1, size=0.06)])
    settings = load_settings(data=tmp / "data", preset="live")
    assert Ingestor(settings, str(video), "cam", frames=open_frames(settings)).run().complete
    return settings


@pytest.fixture(scope="module")
def captioner() -> PixelsCaptioner:
    return PixelsCaptioner(PixelsCaptionerSettings(people=False), max_in_flight=2)


@pytest.fixture(scope="module")
def coarse(ingested, captioner) -> dict[float, str]:
    """The coarse memory the builder writes while the stream is ingested (here: after), by span start."""
    memory = open_memory(ingested)
    with CoarseBuilder(ingested, "cam", memory, captioner, frames=open_frames(ingested)) as builder:
        builder.on_commit()
        assert builder.drain(timeout=300)
    texts = {n.start: n.text for n in memory.nodes("cam", level="coarse")}
    memory.close()
    return texts


def seen(text: str, words: str) -> tuple[float, float]:
    """The (first, last) time the caption says ``words`` were seen."""
    line = next(line for line in text.splitlines() if words in re.sub(r"\s+", " ", line)), text
    m = re.search(r"seen (\d+\.\d)(?:-(\d+\.\d))? s", line[0])
    assert m, line
    return float(m[1]), float(m[2] or m[1])


def close(got: tuple[float, float], want: tuple[float, float]) -> bool:
    """Within one stored frame interval at both ends (the last stored frame showing a text shown until 88.0 s is
    87.5)."""
    return abs(got[0] - want[0]) <= STORED_STEP + 1e-6 and abs(got[1] - want[1]) <= STORED_STEP + 1e-6


def test_a_sign_is_seen_from_its_first_to_its_last_stored_frame(coarse):
    """The coarse look analyses frames seconds apart (it said 'seen 76.0-86.0 s'); the stored frames tell 75.0-87.5."""
    assert sorted(coarse) == [0.0, 60.0, 120.0]
    assert close(seen(coarse[60.0], "PLATFORM 9 NORTH"), (75.0, 88.0)), coarse[60.0]
    assert "PLATFORM" not in coarse[0.0] and "PLATFORM" not in coarse[120.0]


def test_text_across_a_span_boundary_is_each_spans_own_part(coarse):
    assert close(seen(coarse[60.0], "DELAYED"), (110.0, 119.5)), coarse[60.0]
    assert close(seen(coarse[120.0], "DELAYED"), (120.0, 140.5)), coarse[120.0]


def test_a_short_text_inside_one_span(coarse):
    assert close(seen(coarse[120.0], "GATE 12 OPEN"), (131.5, 136.0)), coarse[120.0]


def test_text_on_all_along_is_seen_over_the_whole_span(coarse):
    for start, text in coarse.items():
        assert close(seen(text, "CAM"), (start, start + 60.0)), text


def caption(captioner: PixelsCaptioner, store: ZarrFrameStore, start: float, end: float, *, fps: float = 0.5,
            level: Level = Level.COARSE, stored: bool = True):
    clip = store.read(start, end, fps)
    return asyncio.run(captioner.describe(clip, "Describe the clip.", level=level,
                                          **({"stored": StoredSpan(store, start, end)} if stored else {})))


def test_without_the_stored_frames_the_times_are_the_clips(ingested, captioner):
    """What coarse memory said before (and what a caller with the clip alone still gets): the analysed frames'."""
    store = ZarrFrameStore.open(ingested.data, "cam")
    got = seen(caption(captioner, store, 60.0, 120.0, stored=False).text, "PLATFORM 9 NORTH")
    assert got[0] > 75.0 + STORED_STEP and got[1] < 88.0 - STORED_STEP  # two seconds apart: 76.0-86.0


def test_the_extra_reads_are_bounded(ingested):
    """At most text_time_probes reads a caption; with none, the times are the analysed frames'; a text on all along
    costs one read (the span's last stored frame), a text between analysed frames about log2 of the frames between
    them at each edge."""
    store = ZarrFrameStore.open(ingested.data, "cam")
    for cap in (0, 3):
        few = PixelsCaptioner(PixelsCaptionerSettings(people=False, text_time_probes=cap), max_in_flight=1)
        out = caption(few, store, 60.0, 120.0)
        assert out.extra["text_probes"] <= cap
        first, last = seen(out.text, "PLATFORM 9 NORTH")
        assert first >= 75.0 - 1e-6 and last <= 87.5 + 1e-6  # never past what the frames show
    whole = PixelsCaptioner(PixelsCaptionerSettings(people=False), max_in_flight=1)
    out = caption(whole, store, 0.0, 60.0)  # "CAM 3" alone, on all along
    assert out.extra["text_probes"] == 1 and close(seen(out.text, "CAM"), (0.0, 60.0)), out.text
    out = caption(whole, store, 60.0, 120.0)
    texts = out.text.count('- "')  # CAM 3, PLATFORM 9 NORTH, DELAYED
    assert out.extra["text_probes"] <= texts * 2 * (math.ceil(math.log2(2 * 60 + 1)) + 1), out.extra


def test_a_questions_fine_caption_gets_the_stored_frames_too(ingested, captioner):
    """A question's fine caption of 130-140 s reads the clip at 1 fps: the short text's edges come from the 2-fps
    stored frames between."""
    memory = open_memory(ingested)

    class View:
        def fps(self, level: str) -> float:
            return 1.0

        def heard_in(self, start: float, end: float) -> list:
            return []

    spans = SpanCaptioner(view=View(), frames=open_frames(ingested).open("cam"), captioner=captioner, memory=memory,
                          slots=asyncio.Semaphore(1), expired_before=0.0, origin="question:1")
    out = asyncio.run(spans.caption(Level.FINE.value, 130.0, 140.0, "Describe.", None))
    memory.close()
    assert seen(out.node.text, "GATE 12 OPEN") == (131.5, 135.5), out.node.text


# ------------------------------------------------------------------------------------------ the search itself

def reads_of(on: range | set[int], n: int, stops: tuple[int, ...] = (), *, budget: int = 100, recheck: bool = False):
    """_reach over n frames 0..n-1 outward, the text shown at the indices in ``on``: (result, frames read)."""
    read: list[int] = []
    times = np.arange(n, dtype=float)

    def shows(t: float) -> bool | None:
        if len(read) >= budget:
            return None
        read.append(int(t))
        return int(t) in on

    return _reach(times, np.array(stops, dtype=int), shows, recheck=recheck), read


@pytest.mark.parametrize("n", [1, 2, 7, 30, 119])
@pytest.mark.parametrize("share", [0.0, 0.3, 0.99])
def test_the_search_finds_the_last_frame_showing_the_text_in_log_reads(n, share):
    k = int(share * n)  # shown on frames 0..k-1 past the run, off from frame k (an analysed frame: a stop)
    if k >= n:
        return
    got, read = reads_of(range(k), n, (n - 1,) if k < n - 1 else ())
    assert got == k - 1
    assert len(read) <= math.ceil(math.log2(n + 1)) + 1


def test_an_open_edge_is_read_first_and_a_text_on_to_it_costs_one_read():
    assert reads_of(range(30), 30) == (29, [29])


def test_a_stop_is_read_again_only_when_asked_and_all_before_it_shows_the_text():
    on = range(12)  # shown on through the analysed frame at 5, which missed it (a lossier look)
    assert reads_of(on, 12, (5, 9))[0] == 4  # the analysed frames are believed
    got, read = reads_of(on, 12, (5, 9), recheck=True)
    assert got == 11 and 5 in read and 9 in read
    assert reads_of(range(3), 12, (5, 9), recheck=True)[0] == 2  # off before the stop: it is not read


def test_spent_reads_end_the_search_with_what_is_known():
    got, read = reads_of(range(20), 64, (40,), budget=2)
    assert len(read) == 2 and 0 <= got < 20  # a frame known to show it, never one past the text


def test_a_frame_gone_or_a_flickering_text_stays_within_the_bounds():
    got, _ = reads_of({0, 1, 2, 5, 6, 9}, 12, (11,))  # read as off here and there (OCR misses, frames deleted)
    assert got in {0, 1, 2, 5, 6, 9}

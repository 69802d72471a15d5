"""Questions about a file whose ingest has finished and whose coarse memory the builder has completed: the query
grid meets the builder's last span (stretched to the media end), so nothing is captioned on demand (issue 9,
bug 1: every question re-captioned 60-120 s and traced a frameless 120-120.17 s tail)."""

from __future__ import annotations

import asyncio

import pytest

from lucy.config import load_settings
from lucy.ingest import Ingestor
from lucy.memory.builder import CoarseBuilder
from lucy.memory.nodes import INGEST_ORIGIN, MemoryNode
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.query.memory_view import coarse_grid
from lucy.query.reasoners.base import AnswerReply, LocaliseReply, SelectReply
from lucy.synth import write_video
from lucy.wiring import open_frames, open_memory
from lucy.wiring.engine import open_engine

QUESTION = "What happens at the end of the video?"


def last_span_then_fine(fakes):
    """A reasoner that goes into the last coarse span once, and is confident as soon as fine memory is shown."""
    def answer(q, memory, final, n):
        return AnswerReply(answer="the end", confident=any(m.level == "fine" for m in memory) and not final)

    def select(q, spans, k, n):
        return SelectReply(spans=[max(spans, key=lambda s: s.start).ref])

    def localise(q, memory, candidates, n):
        return LocaliseReply(span=max(candidates, key=lambda c: c.start).ref, instruction="what happens last")

    return fakes.ScriptedReasoner(answer=answer, select=select, localise=localise)


def test_a_finished_file_needs_no_tail_and_a_repeated_question_no_captions(tmp_path, fakes):
    # 3 fps, stored at 2 fps: the last frame kept is at 119.67 s, so the media ends at 120.17 s, a sliver past
    # the 120 s boundary with no frame in it. The builder stretches its last span to 60-120.17 s.
    video = write_video(tmp_path / "v.mp4", duration=120, fps=3, width=160, height=96)
    settings = load_settings(data=tmp_path / "data", **{"captioner.max_in_flight": 2})
    memory = open_memory(settings)
    with CoarseBuilder(settings, "cam", memory, fakes.FakeCaptioner(lambda *span: "a street"),
                       frames=open_frames(settings)) as builder:
        assert Ingestor(settings, str(video), "cam", on_commit=builder.on_commit,
                        frames=open_frames(settings)).run().complete
        assert builder.drain(timeout=60)
    ingest_spans = [(n.start, n.end) for n in memory.nodes("cam", level="coarse")]
    assert ingest_spans == [(0.0, 60.0), (60.0, pytest.approx(120.1667, abs=1e-3))]

    eye = fakes.FakeCaptioner(lambda level, start, end, instruction: f"{level} at {start:g}s: a car leaves")

    async def ask_twice():
        async with open_engine(settings, "cam", memory=memory, captioner=eye,
                               reasoner=last_span_then_fine(fakes)) as engine:
            return await engine.ask(QUESTION), await engine.ask(QUESTION)

    first, second = asyncio.run(ask_twice())
    for result in (first, second):
        assert result.confident and result.horizon == pytest.approx(120.1667, abs=1e-3)
        assert not [step for step in result.trace if step.agent == "tail"]
        assert not result.errors
    # The first question searched the stretched span, as a whole 60 s grid span with its six fine sub-spans ...
    searched = [(s.level, s.start, s.end) for s in first.trace if s.agent == "caption"]
    assert searched == [("coarse", 60.0, 120.0)]
    assert first.caption_calls == 1 + 6 == len(eye.calls)
    assert all(start < 120.0 for _, start, _, _ in eye.calls)  # never the frameless sliver
    # ... and the second found all of it in memory.
    assert second.caption_calls == 0 and second.llm_calls == 1
    # The ingest captions are still the only plain coarse nodes: no tail node, no second caption of 60-120 s.
    coarse = memory.nodes("cam", level="coarse")
    assert [(n.start, n.end) for n in coarse if n.origin == INGEST_ORIGIN] == ingest_spans
    assert [n.instruction for n in coarse if n.origin != INGEST_ORIGIN] == ["what happens last"]
    memory.close()


def test_the_grid_follows_the_builder_at_the_end_of_a_finished_stream(tmp_path, fakes):
    """With the fakes: frames at 0.2 + k/2 s up to 299.7 s, so the media ends at 300.2 s. The builder's last
    node reaches 300.2 s; the question must take it for the last span, not caption 240-300 s and a sliver."""
    memory = SQLiteMemoryStore(tmp_path / "memory.sqlite")
    nodes = fakes.coarse_nodes("cam", 300, lambda s, e: f"street at {s:g}s")
    nodes[-1] = MemoryNode(stream="cam", level="coarse", start=240.0, end=300.2, text="street at 240s",
                           instruction=fakes.COARSE_INSTRUCTION)
    memory.add_many(nodes)
    captioner = fakes.FakeCaptioner(lambda *span: "x")
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300, offset=0.2), memory=memory,
                               captioner=captioner, reasoner=fakes.ScriptedReasoner(
                                   answer=lambda q, m, f, n: AnswerReply(answer="a street", confident=True)))
    result = asyncio.run(engine.ask("What is there?"))
    assert result.horizon == pytest.approx(300.2)
    assert [s.agent for s in result.trace] == ["answer"] and captioner.calls == []


@pytest.mark.parametrize(("last_frame", "finished", "expected_last"), [
    (299.7, True, (240.0, 300.2)),  # finished, no frame past 300 s: the sliver joins the last span
    (299.7, False, (300.0, 300.2)),  # live: the open span stays (frames may still come)
    (300.1, True, (300.0, 300.2)),  # a frame lies in the partial span: it is a span of its own
])
def test_coarse_grid_at_the_media_end(last_frame, finished, expected_last):
    grid = coarse_grid(300.2, 60.0, last_frame=last_frame, finished=finished)
    assert grid[:4] == [(0.0, 60.0), (60.0, 120.0), (120.0, 180.0), (180.0, 240.0)]
    assert grid[-1] == pytest.approx(expected_last)


def test_coarse_grid_never_folds_the_only_span():
    assert coarse_grid(0.6, 60.0, last_frame=0.1, finished=True) == [(0.0, 0.6)]
    assert coarse_grid(120.0, 60.0, last_frame=119.5, finished=True) == [(0.0, 60.0), (60.0, 120.0)]
    assert coarse_grid(60.5, 60.0, last_frame=None, finished=True) == [(0.0, 60.0), (60.0, 60.5)]

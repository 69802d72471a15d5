"""Questions across streams: `lucy ask` without --stream (or with --stream a,b) over three camera videos ingested as
separate streams (tests/across_videos.py), the answer naming the camera; the lanes that lay several streams on one
timeline; the operators combined across streams."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from lucy.config import ALL_STREAMS, PRESETS, load_settings
from lucy.errors import StoreError
from lucy.ingest.frames import check_stream_name
from lucy.memory.nodes import MemoryNode
from lucy.query.kinds import Kind, parse
from lucy.query.lanes import Lanes
from lucy.query.operators.across import StreamAnswer, combine, per_stream
from lucy.query.operators.base import OperatorAnswer
from tests.across_videos import ENV, PLATFORM, STORE, ingest_cameras

CAMERAS = ["back", "front", "side"]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ingest_cameras(tmp_path_factory.mktemp("across"))


# One round of looking closer is enough to see the rounds go to either stream (five would caption some 30 spans).
ONE_ROUND = {**ENV, "LUCY_QUERY__MAX_ITERATIONS": "1"}


def ask(run_lucy, data: Path, question: str, *args: str) -> Any:
    done = run_lucy("ask", question, *args, "--json", "--data", str(data), env=ONE_ROUND, timeout=240)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _named_steps(answer: dict[str, Any]) -> None:
    """Every trace step with a span and every evidence span names a stream the question was about."""
    for step in answer["trace"]:
        if step["start"] is not None:
            assert step.get("stream") in answer["streams"], step
    for evidence in answer["evidence"]:
        assert evidence["stream"] in answer["streams"], evidence


def test_a_question_without_stream_asks_every_camera_and_says_which_saw_it(run_lucy, data):
    answer = ask(run_lucy, data, "What did the store sign say?")
    assert answer["stream"] == ALL_STREAMS and answer["streams"] == CAMERAS
    assert STORE in answer["answer"] and "side" in answer["answer"]
    assert answer["confident"] and {e["stream"] for e in answer["evidence"]} == {"side"}
    side = answer["evidence"][0]
    assert side["start"] < 20 and side["end"] > 10  # media time of the side camera, where the sign was
    _named_steps(answer)


def test_which_camera_saw_it_first_is_an_order_across_streams(run_lucy, data):
    answer = ask(run_lucy, data, f"Which camera saw the {PLATFORM} sign first?")
    assert answer["answer"].startswith("back first"), answer["answer"]
    assert "front" in answer["answer"] and "side" not in answer["answer"]
    assert {e["stream"] for e in answer["evidence"]} == {"back", "front"}
    _named_steps(answer)


def test_a_sign_on_two_cameras_is_found_on_both(run_lucy, data):
    answer = ask(run_lucy, data, f"When was the {PLATFORM} sign seen?")
    assert answer["answer"].startswith("First on back") and "then on front" in answer["answer"]
    assert {e["stream"] for e in answer["evidence"]} == {"back", "front"}


def test_some_streams_and_the_loop_over_their_spans(run_lucy, data):
    answer = ask(run_lucy, data, "What colour is the background?", "--stream", "front,side")
    assert answer["streams"] == ["front", "side"]
    # not answered from observations alone: the rounds caption spans of either stream, each step naming its stream
    assert any(step["agent"] in ("localise", "caption") for step in answer["trace"])
    _named_steps(answer)
    printed = run_lucy("ask", f"Which camera saw the {PLATFORM} sign first?", "--stream", "side,front",
                       "--data", str(data), env=ONE_ROUND, timeout=240)
    assert printed.returncode == 0, printed.stderr
    lines = printed.stdout.splitlines()
    assert "asked across: side, front" in lines
    assert any(line.startswith("answer: ") and "front" in line for line in lines)
    assert any(line.startswith("evidence: front ") for line in lines)


def test_bad_input_is_one_error_line(run_lucy, data, tmp_path):
    unknown = run_lucy("ask", "what?", "--stream", "front,nope", "--data", str(data), env=ENV, timeout=60)
    assert unknown.returncode != 0 and unknown.stderr.startswith("lucy: error:") and "nope" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    empty = run_lucy("ask", "what?", "--data", str(tmp_path / "empty"), env=ENV, timeout=60)
    assert empty.returncode != 0 and empty.stderr.startswith("lucy: error:")
    assert "holds no stream yet" in empty.stderr and "Traceback" not in empty.stderr
    assert not (tmp_path / "empty").exists()  # asking creates nothing
    commas = run_lucy("ask", "what?", "--stream", ",", "--data", str(data), env=ENV, timeout=60)
    assert commas.returncode != 0 and "--stream names no stream" in commas.stderr


def test_the_engine_across_streams_reuses_what_it_captioned(data):
    """The same question twice across two streams: the second needs no caption, since the first stored what it
    captioned, for each stream, in the stream's own media time."""
    from lucy.wiring.engine import open_engine

    settings = load_settings(**{"data": data, "captioner.backend": "pixels", "query.max_iterations": 1})

    async def twice() -> tuple[Any, Any]:
        async with open_engine(settings, ["front", "side"]) as engine:
            first = await engine.ask("What colour is the background?")
            again = await engine.ask("What colour is the background?")
            return first, again

    first, again = asyncio.run(twice())
    assert again.caption_calls == 0 and first.streams == ["front", "side"]
    from lucy.wiring import open_memory

    memory = open_memory(settings)
    try:
        made = [n for stream in ("front", "side") for n in memory.nodes(stream)
                if n.origin == f"question:{first.question_id}"]
    finally:
        memory.close()
    if first.caption_calls:
        assert made and all(0 <= n.start < n.end <= 36.5 for n in made)  # each in its stream's own media time


# ------------------------------------------------------------------------------------------------ pure parts


def test_all_streams_cannot_be_a_stream_name():
    with pytest.raises(StoreError):
        check_stream_name(ALL_STREAMS)


class _Frames:
    def __init__(self, name: str) -> None:
        self.name = name


def _info(name: str, seconds: float, wall: float | None = None) -> Any:
    from lucy.ingest.frames import StreamInfo

    return StreamInfo(name=name, source="f", live=wall is not None, frames=int(seconds * 2), first_time=0.0,
                      last_time=seconds - 0.5, stored_fps=2.0, width=4, height=4, codec="zstd", wall_start=wall,
                      complete=True, lost=None)


def test_lanes_keep_streams_apart_on_every_grid():
    preset = PRESETS["live"]  # 60 / 10 / 2 s
    lanes = Lanes.lay([(_Frames("a"), _info("a", 150.0)), (_Frames("b"), _info("b", 0.0)),  # type: ignore[list-item]
                       (_Frames("c"), _info("c", 90.0))], preset, fanout=12)
    assert lanes.streams == ["a", "c"]  # b has nothing yet
    a, c = lanes.lanes
    assert a.offset == 0 and c.offset > a.end + 60 and c.offset % (60 * 12) == 0  # a summary group never spans two
    assert [len(r) for r in lanes.grid_ranges()] == [3, 2]
    assert lanes.local(c.offset + 30, c.offset + 40)[1:] == (30, 40) and lanes.at(c.offset + 30).stream == "c"
    node = MemoryNode("c", "fine", 30.0, 40.0, "text")
    shown = lanes.from_store(node)
    assert shown.start == c.offset + 30 and lanes.to_store(shown) == node
    speech = MemoryNode("c", "speech", 30.0, 40.0, "[31.0-33.5 s] hello there")
    assert lanes.from_store(speech).text == f"[{c.offset + 31:.1f}-{c.offset + 33.5:.1f} s] hello there"
    assert lanes.label(c.offset + 30, c.offset + 40) == "c 30-40s"
    single = Lanes.lay([(_Frames("a"), _info("a", 150.0))], preset, fanout=12)  # type: ignore[list-item]
    assert single.single and single.to_store(node) is node and single.label(1, 2) == "1-2s"


def _answer(text: str, value: Any, confidence: float = 0.9, at: float = 10.0, **kw: Any) -> OperatorAnswer:
    return OperatorAnswer(text, confidence, ((at, at + 5),), "why", value=value, **kw)


def test_counts_presence_and_order_combine_per_stream():
    count = combine(parse("How many people walked by?"), [
        StreamAnswer("a", _answer("3 people walked by.", 3)), StreamAnswer("b", _answer("2 people walked by.", 2),
                                                                             offset=1000.0)])
    assert count is not None and count.value == 5 and count.answer.startswith("5 in all across 2 streams")
    assert count.evidence == ((10, 15), (1010, 1015))  # each stream's evidence in view time
    unseen = combine(parse("How many people walked by?"), [StreamAnswer("a", _answer("3.", 3)),
                                                           StreamAnswer("b", None)])
    assert unseen is not None and not unseen.confident  # b was not observed: its count is unknown
    presence = combine(parse("Was there a dog?"), [StreamAnswer("a", _answer("No.", False)),
                                                   StreamAnswer("b", _answer("Yes, a dog.", True))])
    assert presence is not None and presence.value is True and presence.answer.startswith("Yes, on b")
    order = parse("Which camera saw the red van first?")
    assert order.kind is Kind.ORDER and per_stream(order).kind is Kind.TIME
    assert "camera" not in per_stream(order).text
    # by media time, a is first; by the wall clock (b started 100 s earlier), b is
    media = combine(order, [StreamAnswer("a", _answer("At 0:10.", 10.0, seconds=True)),
                            StreamAnswer("b", _answer("At 0:40.", 40.0, seconds=True))])
    assert media is not None and media.answer.startswith("a first")
    wall = combine(order, [StreamAnswer("a", _answer("At 0:10.", 10.0, seconds=True), wall_start=1000.0),
                           StreamAnswer("b", _answer("At 0:40.", 40.0, seconds=True), wall_start=900.0)])
    assert wall is not None and wall.answer.startswith("b first") and "wall clock" in wall.answer
    assert combine(order, [StreamAnswer("a", None)]) is None


def test_progress_lines_name_the_camera():
    from lucy.query.trace import progress_line

    line = progress_line({"agent": "caption", "start": 10.0, "end": 20.0, "stream": "back", "iteration": 1})
    assert line.startswith("looking closer at back 0:10–0:20")
    assert "back" not in progress_line({"agent": "caption", "start": 10.0, "end": 20.0, "iteration": 1})


def test_agents_see_each_memory_s_stream_and_their_evidence_comes_back_to_it():
    from lucy.query import prompts
    from lucy.query.reasoners.base import EvidenceSpan, MemoryItem, Question

    question = Question("Who rang?", (), 90.0, streams=(("back", 150.0), ("front", 90.0)))
    shown = [MemoryItem(1, "coarse", 0.0, 60.0, "a man at the door", stream="front")]
    prompt = prompts.answer_prompt(question, shown, final=False)
    assert "[1] coarse on front 0-60s" in prompt.user and "from 2 streams" in prompt.user
    assert "back 0-150 s" in prompt.user and "name the stream of each evidence span" in prompt.user
    lanes = Lanes.lay([(_Frames("back"), _info("back", 150.0)), (_Frames("front"), _info("front", 90.0))],
                      PRESETS["live"], fanout=12)  # type: ignore[list-item]
    front = lanes.lane("front")
    assert front is not None
    placed = lanes.evidence_in_view([EvidenceSpan(start=10, end=20, stream="front"),  # named
                                     EvidenceSpan(start=30, end=40),  # not named: the memory shown it lies in
                                     EvidenceSpan(start=100, end=110, stream="nope")], shown)  # points at nothing
    assert [(e.stream, e.start - front.offset, e.end - front.offset) for e in placed] == [
        ("front", 10, 20), ("front", 30, 40)]

"""Questions about what was said: transcript lines are shown beside the captions of their span at every depth,
and the embedded lexical reasoner answers from them ("which gate did the announcement name")."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from lucy.config import PRESETS, load_settings
from lucy.memory.nodes import INGEST_ORIGIN, MemoryNode
from lucy.memory.transcribers import SPEECH_LEVEL, TranscriptLine, format_transcript
from lucy.query.memory_view import MemoryView, coarse_grid
from lucy.query.reasoners.lexical import LexicalReasoner
from lucy.wiring import open_frames, open_memory
from lucy.wiring.engine import open_engine

SAID = TranscriptLine(64.7, 68.7, "Flight 714, now boarding at Gate B12.")
GATES = ("A 3", "B 12", "C 7", "D 1")


def speech_node(start: float, end: float, lines: list[TranscriptLine]) -> MemoryNode:
    return MemoryNode(stream="cam", level=SPEECH_LEVEL, start=start, end=end, text=format_transcript(lines),
                      origin=INGEST_ORIGIN, model="faster-whisper:tiny.en")


def test_the_view_shows_what_was_heard_beside_each_caption_of_its_span():
    nodes = [MemoryNode(stream="cam", level="coarse", start=0, end=60, text="a hall", id=1),
             MemoryNode(stream="cam", level="coarse", start=60, end=120, text="a hall, people queue", id=2),
             speech_node(0, 60, []), speech_node(60, 120, [SAID])]
    preset = PRESETS["live"]
    view = MemoryView.of_nodes(nodes, preset=preset, horizon=150, coarse_instruction="describe",
                               grid=coarse_grid(150, 60, last_frame=149.5, finished=True))
    assert [item.level for item in view.items.values()] == ["coarse", "coarse"]  # speech is no item of its own
    shown = {item.start: item.as_memory_item().text for item in view.items.values()}
    assert shown[0] == "a hall"
    assert shown[60] == 'a hall, people queue\nSpeech heard 64.7-68.7 s: "Flight 714, now boarding at Gate B12."'
    # The placeholder of the last, uncaptioned span, and deeper spans made by the question, carry theirs too.
    assert view.coarse_item(2).as_memory_item().text == "(not captioned yet)"
    fine = view.add("fine", 60, 70, "people queue at a desk")
    assert "Gate B12" in fine.as_memory_item().text
    assert "Speech" not in view.add("fine", 70, 80, "a desk").as_memory_item().text
    assert view.add("ultra_fine", 68, 70, "a desk").heard  # a line said partly inside the span counts


@pytest.fixture
def stream_with_speech(tmp_path):
    """150 s of a plain grey hall: captions say nothing about the announcement; the transcript does."""
    settings = load_settings(data=tmp_path / "data", **{"captioner.backend": "none"})
    writer = open_frames(settings).create("cam", source="/v.mp4", live=False, width=48, height=32, stored_fps=2.0,
                                          codec="zstd", quality=90)
    times = np.arange(0, 150, 0.5)
    writer.append(np.full((len(times), 32, 48, 3), 120, np.uint8), times)
    writer.mark_finished(complete=True, lost=None)
    memory = open_memory(settings)
    for k, (start, end) in enumerate([(0, 60), (60, 120), (120, 150)]):
        memory.add(MemoryNode(stream="cam", level="coarse", start=start, end=end,
                              text="Scenes: gray. Objects: none.", instruction=settings.captioner.coarse_instruction))
        memory.add(speech_node(start, end, [SAID] if k == 1 else []))
    memory.close()
    return settings


def ask(settings, question, options=(), captioner=None):
    async def run():
        async with open_engine(settings, "cam", captioner=captioner, reasoner=LexicalReasoner()) as engine:
            return await engine.ask(question, options)

    return asyncio.run(run())


def test_which_gate_the_announcement_named_is_answered_from_the_transcript(stream_with_speech):
    result = ask(stream_with_speech, "Which gate did the announcement name?", GATES)
    assert result.answer == "B 12" and result.confident
    assert [(e.start, e.end) for e in result.evidence] == [(60.0, 120.0)]


def test_what_the_announcement_said_is_quoted_with_its_time(stream_with_speech, fakes):
    eye = fakes.FakeCaptioner(lambda level, start, end, instruction: "people queue at a desk")
    result = ask(stream_with_speech, "What did the announcement say?", captioner=eye)
    # The only line heard: the speech operator quotes it from memory, with its time, and no caption is needed.
    assert result.answer == '"Flight 714, now boarding at Gate B12." (said at 1:04.7).'
    assert (result.evidence[0].start, result.evidence[0].end) == (64.7, 68.7)
    assert result.confident and not eye.calls
    # Asked about something the line does not say, the loop backtracks into the span where it was said; the fine
    # caption there carries the line too, and the answer is the line, quoted.
    result = ask(stream_with_speech, "What did the announcement say about boarding passes?", captioner=eye)
    assert "Flight 714" in result.answer and any(call[1] == 60.0 for call in eye.calls)


def test_search_finds_what_was_said(stream_with_speech):
    memory = open_memory(stream_with_speech)
    try:
        hits = memory.search("cam", "boarding gate")
        assert hits and hits[0][0].level == SPEECH_LEVEL and hits[0][0].start == 60.0
    finally:
        memory.close()


def test_a_question_passes_what_was_said_to_the_openai_captioner(stream_with_speech):
    from lucy.testing.openai_server import Reply, ScriptedOpenAIServer

    with ScriptedOpenAIServer([Reply("people queue at a desk")]) as server:
        settings = stream_with_speech.model_copy(update={"captioner": stream_with_speech.captioner.model_copy(
            update={"backend": "openai", "openai": stream_with_speech.captioner.openai.model_copy(
                update={"base_url": server.base_url, "max_frames": 2})})})
        result = ask(settings, "What did the announcement say about boarding passes?")  # not the line's words
        sent = ["\n".join(p["text"] for p in body["messages"][1]["content"] if p["type"] == "text")
                for body in server.requests]
    assert "Flight 714" in result.answer
    with_speech = [text for text in sent if "<speech>" in text]
    assert with_speech and all("[64.7-68.7 s] Flight 714, now boarding at Gate B12." in t for t in with_speech)
    # Only spans in which it was said carry it (the guard and the question pass it on, the others send none).
    assert all(" from 6" in t.split("\n")[0] for t in with_speech)

"""The backtracking loop's control flow, with a scripted reasoner and a captioner whose world is known."""

from __future__ import annotations

import asyncio
import gc
import weakref

import numpy as np
import pytest

from lucy.memory.nodes import INGEST_ORIGIN, TAIL_ORIGIN, MemoryNode, question_origin
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.query.reasoners.base import AnswerReply, EvidenceSpan, LocaliseReply, SelectReply
from lucy.query.reasoners.lexical import LexicalReasoner

QUESTION = "What was the plate number of the van at the harbor gate?"


def world(level: str, start: float, end: float, instruction: str) -> str:
    """A 5-minute stream: a harbor gate in 120-180 s; the van in 130-140 s; its plate readable only at 134-136 s."""
    if level == "coarse":
        return "a harbor gate with a sign; traffic passes" if start == 120 else f"an empty street at {start:g}s"
    if level == "fine":
        return "a van waits at the gate" if start == 130 else f"street, nothing new at {start:g}s"
    return "plate KX-4821 on the van" if start == 134 else f"blurred street at {start:g}s"


def sees_plate(question, memory, final, n) -> AnswerReply:
    hit = next((m for m in memory if "KX-4821" in m.text), None)
    return AnswerReply(answer="KX-4821" if hit else "unknown", confident=hit is not None and not final,
                       evidence=[EvidenceSpan(start=hit.start, end=hit.end)] if hit else [])


def pick_mentions(*words: str):
    """Select / localise: the first span whose text mentions one of ``words`` (else the first offered)."""
    def choose(items):
        for w in words:
            for item in items:
                if w in item.text:
                    return item
        return items[0]

    def select(q, spans, k, n):
        best = choose(spans)
        return SelectReply(spans=[best.ref] + [s.ref for s in spans if s.ref != best.ref][: k - 1])

    def localise(q, memory, cands, n):
        return LocaliseReply(span=choose(cands).ref, instruction="read the van's plate")

    return select, localise


@pytest.fixture
def seeded(tmp_path, fakes):
    """Memory with the ingest-made coarse captions of the 5-minute stream."""
    memory = SQLiteMemoryStore(tmp_path / "memory.sqlite")
    memory.add_many(fakes.coarse_nodes("cam", 300, lambda s, e: world("coarse", s, e, "")))
    return memory


def run(engine, question=QUESTION, options=()):
    return asyncio.run(engine.ask(question, options))


def test_confident_at_once_needs_one_llm_call_and_no_captions(tmp_path, fakes, seeded):
    reasoner = fakes.ScriptedReasoner(answer=lambda q, m, f, n: AnswerReply(answer="a gate", confident=True))
    captioner = fakes.FakeCaptioner(world)
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), reasoner=reasoner,
                               captioner=captioner, memory=seeded)
    result = run(engine)
    assert result.confident and result.answer == "a gate"
    assert (result.llm_calls, result.caption_calls, result.iterations) == (1, 0, 0)
    assert [s.agent for s in result.trace] == ["answer"]
    assert captioner.calls == []
    assert result.horizon == pytest.approx(300.0)


def test_backtracks_two_levels_then_confident(tmp_path, fakes, seeded):
    select, localise = pick_mentions("harbor", "van")
    reasoner = fakes.ScriptedReasoner(answer=sees_plate, select=select, localise=localise)
    captioner = fakes.FakeCaptioner(world)
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), reasoner=reasoner,
                               captioner=captioner, memory=seeded)
    result = run(engine)
    assert result.confident and result.answer == "KX-4821"
    assert result.iterations == 2
    # answer, select, then (localise, answer) twice: the paper's call pattern
    assert [s.agent for s in result.trace if s.llm_calls] == ["answer", "select", "localise", "answer", "localise",
                                                            "answer"]
    assert result.llm_calls == 6
    # round 1: coarse 120-180 again + 6 fine sub-spans; round 2: the 5 ultra-fine sub-spans of fine 130-140 (that
    # span itself was captioned with this very instruction in round 1: reused, not captioned again)
    searched = [(s.level, s.start, s.end, s.reused_nodes) for s in result.trace if s.agent == "caption"]
    assert searched == [("coarse", 120, 180, 0), ("fine", 130, 140, 1)]
    assert result.caption_calls == 7 + 5 == len(captioner.calls)
    assert {(lv, s) for lv, s, _, _ in captioner.calls} >= {("coarse", 120), ("fine", 130), ("ultra_fine", 134)}
    assert all(instr == "read the van's plate" for *_, instr in captioner.calls)
    assert [(e.start, e.end) for e in result.evidence] == [(134, 136)]
    # sparse initialisation kept the chosen span and its two neighbours among the candidates
    select_step = next(s for s in result.trace if s.agent == "select")
    assert "coarse 120-180s" in select_step.detail


def test_write_back_origin_parents_and_reuse(tmp_path, fakes, seeded):
    select, localise = pick_mentions("harbor", "van")
    captioner = fakes.FakeCaptioner(world)
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), captioner=captioner, memory=seeded,
                               reasoner=fakes.ScriptedReasoner(answer=sees_plate, select=select, localise=localise))
    first = run(engine)
    origin = question_origin(first.question_id)
    made = seeded.nodes("cam", origin=origin)
    assert len(made) == first.caption_calls == 12
    by_id = {n.id: n for n in seeded.nodes("cam")}
    for node in made:
        if node.level == "coarse":
            assert node.parent is None
            continue
        parent = by_id[node.parent]
        assert parent.start <= node.start and node.end <= parent.end and parent.level != node.level
    ultra = [n for n in made if n.level == "ultra_fine"]
    assert {by_id[n.parent].level for n in ultra} == {"fine"}
    history = seeded.questions("cam")
    assert history[0]["id"] == first.question_id and history[0]["answer"]["answer"] == "KX-4821"

    # The same question again: what the first one found is in memory from the start; nothing is captioned.
    calls_before = len(captioner.calls)
    second = run(engine)
    assert second.confident and second.answer == "KX-4821"
    assert second.caption_calls == 0 and len(captioner.calls) == calls_before
    assert second.llm_calls == 1


def test_searching_a_span_reuses_existing_deeper_nodes(tmp_path, fakes, seeded):
    """A different question that searches the same span captions only the span itself with its own
    instruction; the sub-spans an earlier question captioned are reused."""
    select, localise = pick_mentions("harbor", "van")
    captioner = fakes.FakeCaptioner(world)
    never = lambda q, m, f, n: AnswerReply(answer="?", confident=False)  # noqa: E731
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), captioner=captioner, memory=seeded,
                               max_iterations=1,
                               reasoner=fakes.ScriptedReasoner(answer=never, select=select, localise=localise))
    run(engine, "Where does the van wait?")
    assert len(captioner.calls) == 7
    engine.reasoner = fakes.ScriptedReasoner(
        answer=never, select=select,
        localise=lambda q, m, c, n: LocaliseReply(span=next(x for x in c if x.start == 120).ref,
                                                  instruction="count the cars"))
    result = run(engine, "How many cars pass the gate?")
    step = next(s for s in result.trace if s.agent == "caption")
    assert (step.caption_calls, step.reused_nodes) == (1, 6)
    assert captioner.calls[-1] == ("coarse", 120, 180, "count the cars")


def test_never_confident_forces_a_final_answer(tmp_path, fakes, seeded):
    captioner = fakes.FakeCaptioner(world)
    reasoner = fakes.ScriptedReasoner(
        answer=lambda q, m, final, n: AnswerReply(answer="forced" if final else "guess", confident=final))
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), reasoner=reasoner,
                               captioner=captioner, memory=seeded)
    result = run(engine)
    assert result.iterations == 5
    assert not result.confident  # even though the final reply claimed confidence
    assert result.answer == "forced"
    assert result.trace[-1].agent == "final"
    assert result.llm_calls == 1 + 1 + 5 * 2 + 1
    assert len([s for s in result.trace if s.agent == "caption"]) == 5
    assert len({(s.level, s.start) for s in result.trace if s.agent == "caption"}) == 5  # never the same span twice


def test_max_iterations_is_respected(tmp_path, fakes, seeded):
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), reasoner=fakes.ScriptedReasoner(),
                               captioner=fakes.FakeCaptioner(world), memory=seeded, max_iterations=2)
    result = run(engine)
    assert result.iterations == 2 and not result.confident
    assert result.llm_calls == 1 + 1 + 2 * 2 + 1


def test_global_question_keeps_all_spans(tmp_path, fakes, seeded):
    offered: list[int] = []

    def localise(q, memory, cands, n):
        offered.append(len(cands))
        return LocaliseReply(span=cands[0].ref, instruction="follow the traffic")

    reasoner = fakes.ScriptedReasoner(
        select=lambda q, spans, k, n: SelectReply(spans=[], global_question=True), localise=localise)
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), reasoner=reasoner,
                               captioner=fakes.FakeCaptioner(world), memory=seeded, max_iterations=1)
    result = run(engine, "Summarise the whole video.")
    assert offered == [5]  # all five coarse spans are candidates
    assert "global" in next(s for s in result.trace if s.agent == "select").detail


def test_sparse_init_widens_by_neighbours(tmp_path, fakes):
    memory = SQLiteMemoryStore(tmp_path / "m.sqlite")
    memory.add_many(fakes.coarse_nodes("cam", 600, lambda s, e: f"span {int(s // 60)}"))
    offered: list[list[float]] = []
    unopened: list[list[float]] = []

    def localise(q, mem, cands, n):
        offered.append(sorted(c.start for c in cands if c.note != "not opened yet"))
        unopened.append(sorted(c.start for c in cands if c.note == "not opened yet"))
        return LocaliseReply(span=cands[0].ref, instruction="x")

    reasoner = fakes.ScriptedReasoner(
        select=lambda q, spans, k, n: SelectReply(spans=[s.ref for s in spans if s.text in ("span 2", "span 7")]),
        localise=localise)
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=600), reasoner=reasoner,
                               captioner=fakes.FakeCaptioner(world), memory=memory, max_iterations=1)
    run(engine, "anything")
    assert offered[0] == [60, 120, 180, 360, 420, 480]
    assert unopened[0] == [0, 240, 300, 540]  # the rest of the video stays within reach, marked as such


def test_malformed_agent_replies_are_recorded_not_fatal(tmp_path, fakes, seeded):
    """An agent that gives no usable reply (a ReasonerError) is recorded in the trace; the loop carries on."""
    def answer(q, memory, final, n):
        if n == 0:
            return fakes.ReasonerError("the answer agent gave no valid reply after one retry: no JSON")
        return sees_plate(q, memory, final, n)

    def localise(q, memory, cands, n):
        if n == 0:
            return fakes.ReasonerError("localise: span 99 is not a candidate")
        return LocaliseReply(span=next((c for c in cands if "van" in c.text), cands[0]).ref, instruction="plate")

    select, _ = pick_mentions("harbor")
    reasoner = fakes.ScriptedReasoner(answer=answer, select=select, localise=localise)
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), reasoner=reasoner,
                               captioner=fakes.FakeCaptioner(world), memory=seeded)
    result = run(engine)
    assert result.confident and result.answer == "KX-4821"
    assert len(result.errors) == 2
    errored = [s for s in result.trace if s.error]
    assert [s.agent for s in errored] == ["answer", "localise"]
    # the failed localisation fell back to the best-ranked candidate: the chosen coarse span
    assert (errored[1].level, errored[1].start) == ("coarse", 120)


def test_select_failure_falls_back_to_lexical_ranking(tmp_path, fakes, seeded):
    reasoner = fakes.ScriptedReasoner(answer=sees_plate,
                                      select=lambda *a: fakes.ReasonerError("server down"),
                                      localise=pick_mentions("van", "harbor")[1])
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), reasoner=reasoner,
                               captioner=fakes.FakeCaptioner(world), memory=seeded)
    result = run(engine)
    assert result.confident and result.answer == "KX-4821"
    assert next(s for s in result.trace if s.agent == "select").error == "server down"


def test_captioner_failure_is_recorded_and_the_loop_ends_with_a_forced_answer(tmp_path, fakes, seeded):
    captioner = fakes.FakeCaptioner(world, fail=True)
    select, localise = pick_mentions("harbor")
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), captioner=captioner, memory=seeded,
                               reasoner=fakes.ScriptedReasoner(answer=sees_plate, select=select, localise=localise),
                               max_iterations=2)
    result = run(engine)
    assert not result.confident
    assert any("captioner is down" in e for e in result.errors)
    assert result.caption_calls == len(captioner.calls) > 0


def test_tail_after_the_last_caption_is_captioned_on_demand(tmp_path, fakes, seeded):
    """Ingest has frames up to 330 s but coarse memory only to 300 s: the tail is captioned by the question,
    and frames committed after the question arrived are not used (the horizon is fixed)."""
    frames = fakes.FakeFrames(duration=330)
    captioner = fakes.FakeCaptioner(lambda lv, s, e, i: "a red truck arrives" if s == 300 else world(lv, s, e, i))
    seen: list[str] = []

    def answer(q, memory, final, n):
        seen.extend(m.text for m in memory)
        frames.append(None, frames.times()[-1:] + 1000)  # frames arriving while the question runs
        return AnswerReply(answer="a red truck", confident=True)

    engine = fakes.make_engine(tmp_path, frames=frames, captioner=captioner, memory=seeded,
                               reasoner=fakes.ScriptedReasoner(answer=answer))
    result = run(engine, "What arrived last?")
    assert result.horizon == pytest.approx(330.0)
    tail = [s for s in result.trace if s.agent == "tail"]
    assert [(s.start, s.end, s.caption_calls) for s in tail] == [(300, 330, 1)]
    assert "a red truck arrives" in seen
    node = seeded.nodes("cam", start=300, end=330, level="coarse")[0]
    assert node.origin == TAIL_ORIGIN and node.end == pytest.approx(330)


def test_a_live_tail_is_held_once_however_many_questions_caption_it(tmp_path, fakes, seeded):
    """Each question on a live stream captions the open tail again; memory keeps the newest caption of it only,
    and the ingest caption of the whole span replaces it."""
    frames = fakes.FakeFrames(duration=310)
    captioner = fakes.FakeCaptioner(world)
    engine = fakes.make_engine(tmp_path, frames=frames, captioner=captioner, memory=seeded,
                               reasoner=fakes.ScriptedReasoner(answer=lambda q, m, f, n: AnswerReply(
                                   answer="x", confident=True)))
    for _ in range(5):
        frames.append(None, frames.times()[-1:] + 4)  # the stream goes on between questions
        run(engine, "What happened last?")
    tails = [n for n in seeded.nodes("cam", start=300, level="coarse") if n.start == 300]
    assert len(tails) == 1 and tails[0].origin == TAIL_ORIGIN and tails[0].end == pytest.approx(330)
    seeded.add(MemoryNode(stream="cam", level="coarse", start=300, end=360, text="whole span"))
    assert [n.origin for n in seeded.nodes("cam", start=300, level="coarse") if n.start == 300] == [INGEST_ORIGIN]


def test_evidence_in_media_and_wall_clock_time(tmp_path, fakes, seeded):
    reasoner = fakes.ScriptedReasoner(answer=lambda q, m, f, n: AnswerReply(
        answer="gate", confident=True, evidence=[EvidenceSpan(start=120, end=180), EvidenceSpan(start=250, end=900)]))
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300, wall_start=1_700_000_000.0),
                               reasoner=reasoner, captioner=None, memory=seeded)
    result = run(engine)
    out = result.to_json()
    assert out["evidence"][0] == {"start": 120.0, "end": 180.0, "wall_start": "2023-11-14T22:15:20.000+00:00",
                                  "wall_end": "2023-11-14T22:16:20.000+00:00",
                                  "clip_url": "/v1/streams/cam/clip?from=120&to=180"}
    assert out["evidence"][1]["end"] == 300.0  # clipped to the horizon
    assert set(out) >= {"answer", "confident", "evidence", "iterations", "llm_calls", "caption_calls", "horizon",
                        "trace"}


def test_multiple_choice_answer_carries_the_option_index(tmp_path, fakes, seeded):
    reasoner = fakes.ScriptedReasoner(answer=lambda q, m, f, n: AnswerReply(
        answer=q.options[2], option_index=2, confident=True))
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), reasoner=reasoner, captioner=None,
                               memory=seeded)
    result = run(engine, "Which plate?", ["AB-1", "CD-2", "KX-4821", "EF-3"])
    out = result.to_json()
    assert out["option_index"] == 2 and out["answer"] == "KX-4821"
    assert seeded.questions("cam")[0]["options"] == ["AB-1", "CD-2", "KX-4821", "EF-3"]


def test_trace_streams_steps_as_they_happen(tmp_path, fakes, seeded):
    select, localise = pick_mentions("harbor", "van")
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), captioner=fakes.FakeCaptioner(world),
                               memory=seeded,
                               reasoner=fakes.ScriptedReasoner(answer=sees_plate, select=select, localise=localise))

    async def collect():
        run_ = engine.run(QUESTION)
        steps = [step async for step in run_]
        return steps, run_.result

    steps, result = asyncio.run(collect())
    assert steps[-1].agent == "done" and result is not None
    assert [s.index for s in steps[:-1]] == [s.index for s in result.trace]
    assert all(s.line() for s in steps)


def test_each_step_is_told_as_it_begins_before_its_work(tmp_path, fakes, seeded):
    """``on_begin`` hears of every step before it does its work (a caption round is announced before the captioner
    is called), in trace order, and ``on_progress`` of each caption of a round as it is made; the forced final
    answer begins as ``final``."""
    select, localise = pick_mentions("harbor", "van")
    captioner = fakes.FakeCaptioner(world)
    never = fakes.ScriptedReasoner(answer=lambda q, m, f, n: AnswerReply(answer="unknown", confident=False),
                                   select=select, localise=localise)
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), captioner=captioner,
                               memory=seeded, reasoner=never)
    begun: list[tuple[str, int, float | None, str]] = []
    headway: list[tuple[int, str, int]] = []

    def on_begin(step) -> None:
        begun.append((step.agent, len(captioner.calls), step.start, step.instruction))

    def on_progress(step, text) -> None:
        headway.append((step.index, text, step.caption_calls))

    async def collect():
        run_ = engine.run(QUESTION, on_begin=on_begin, on_progress=on_progress)
        done = [step async for step in run_]
        return done, run_.result

    done, result = asyncio.run(collect())
    assert [agent for agent, *_ in begun] == [s.agent for s in result.trace] == [s.agent for s in done[:-1]]
    first_caption = next(i for i, (agent, *_) in enumerate(begun) if agent == "caption")
    _, calls_before, start, instruction = begun[first_caption]
    assert calls_before == 0 and start == 120 and instruction == "read the van's plate"
    assert begun[-1][0] == "final" and not result.confident
    # round 1 captions coarse 120-180 again and its 6 fine sub-spans: 7 lines of headway, told while the step ran
    round_1 = next(s for s in result.trace if s.agent == "caption")
    told = [(text, calls) for index, text, calls in headway if index == round_1.index]
    assert [text.rsplit("(", 1)[1] for text, _ in told] == [f"{k} of 7)" for k in range(1, 8)]
    assert all(calls == 0 for _, calls in told) and "coarse 2:00–3:00 captioned (" in " ".join(t for t, _ in told)


def test_no_frames_yet_is_a_clear_error(tmp_path, fakes):
    from lucy.errors import LucyError

    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=0), reasoner=fakes.ScriptedReasoner(),
                               captioner=None)
    with pytest.raises(LucyError, match="no frames or sound yet"):
        run(engine)
    with pytest.raises(LucyError, match="empty"):
        run(engine, "   ")


def test_two_questions_at_once_share_the_engine(tmp_path, fakes, seeded):
    select, localise = pick_mentions("harbor", "van")
    captioner = fakes.FakeCaptioner(world)
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), captioner=captioner, memory=seeded,
                               reasoner=fakes.ScriptedReasoner(answer=sees_plate, select=select, localise=localise))

    async def both():
        return await asyncio.gather(engine.ask(QUESTION), engine.ask("Which plate did the van at the gate show?"))

    a, b = asyncio.run(both())
    assert a.answer == b.answer == "KX-4821" and a.confident and b.confident
    assert a.question_id != b.question_id
    assert {q["id"] for q in seeded.questions("cam")} == {a.question_id, b.question_id}


def test_captions_from_an_earlier_horizon_never_make_a_span_searched_twice(tmp_path, fakes):
    """A question at 90 s captions the tail and parts of spans; a later one (180 s) must treat those partial
    captions as the grid spans they belong to, and search each span at most once."""
    memory = SQLiteMemoryStore(tmp_path / "m.sqlite")
    memory.add_many(fakes.coarse_nodes("cam", 60, lambda s, e: "a street"))
    frames = fakes.FakeFrames(duration=90)
    never = fakes.ScriptedReasoner()
    engine = fakes.make_engine(tmp_path, frames=frames, reasoner=never, captioner=fakes.FakeCaptioner(world),
                               memory=memory, max_iterations=3)
    first = run(engine, "what happens?")
    assert [(s.start, s.end) for s in first.trace if s.agent == "tail"] == [(60, 90)]
    frames.append(None, np.arange(90.0, 180.0, 0.5))
    memory.add_many(fakes.coarse_nodes("cam", 120, lambda s, e: "a street")[1:])  # ingest caught up to 120 s
    # A localisation that always goes back to 60 s while it is offered: the leftovers of the first question's
    # [60, 90) captions must not bring the 60-120 s span back once it is searched.
    engine.reasoner = fakes.ScriptedReasoner(localise=lambda q, m, cands, n: LocaliseReply(
        span=next((c for c in cands if c.start == 60), cands[0]).ref, instruction="look"))
    second = run(engine, "what happens?")
    searched = [(s.level, s.start, s.end) for s in second.trace if s.agent == "caption"]
    assert searched[0] == ("coarse", 60, 120)
    assert len(searched) == len(set(searched)) == 3
    assert all(end - start in (60, 10, 2) for _, start, end in searched)  # whole grid spans, not leftovers


def test_rounds_explore_other_spans_when_a_search_finds_nothing(tmp_path, fakes):
    """Coarse memory says nothing about the question (the van was too brief for a coarse caption's frames): a
    search that finds nothing does not send the next rounds into its sub-spans; other coarse spans are opened
    until the van is found, and the answer rests on it."""
    def world(level, start, end, instruction):
        if level == "coarse":
            return f"an empty street at {start:g}s"
        if level == "fine":
            return "a van waits at the harbor gate" if start == 250 else f"street, nothing new at {start:g}s"
        return "plate KX-4821 on the van" if start == 254 else f"blurred street at {start:g}s"

    memory = SQLiteMemoryStore(tmp_path / "m.sqlite")
    memory.add_many(fakes.coarse_nodes("cam", 300, lambda s, e: world("coarse", s, e, "")))
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), reasoner=LexicalReasoner(),
                               captioner=fakes.FakeCaptioner(world), memory=memory, init_spans=1, neighbours=0)
    result = run(engine, QUESTION, ["KX-4821", "KX-4281", "MB-1175", "TR-9034"])
    searched = [(s.level, s.start) for s in result.trace if s.agent == "caption"]
    assert searched[:2] == [("coarse", 0.0), ("coarse", 240.0)]  # not a fine sub-span of 0-60 s
    assert result.confident and result.answer == "KX-4821"


def test_rounds_stop_when_looking_closer_leaves_the_answer_as_it_was(tmp_path, fakes, seeded):
    """The plate cannot be made out at any depth: after two rounds in the van's span that change nothing, the loop
    stops (each further round would cost two calls for the same answer). The last reply chose an option from the
    memory a final call would see, so that choice is the answer, not confident, without another call."""
    def unsure(q, memory, final, n):
        gate = next((m for m in memory if "harbor gate" in m.text), None)
        return AnswerReply(answer="KX-4821", option_index=0, confident=False,
                           evidence=[EvidenceSpan(start=gate.start, end=gate.end)] if gate else [])

    select, localise = pick_mentions("harbor", "van")
    reasoner = fakes.ScriptedReasoner(answer=unsure, select=select, localise=localise)
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), reasoner=reasoner,
                               captioner=fakes.FakeCaptioner(lambda *a: "a harbor gate; a van, its plate blurred"),
                               memory=seeded)
    result = run(engine, QUESTION, ["KX-4821", "KX-4281"])
    assert result.iterations == 2 and not result.confident
    assert "unchanged after looking closer 2 times" in [s for s in result.trace if s.agent == "answer"][-1].detail
    final = result.trace[-1]
    assert final.agent == "final" and final.llm_calls == 0 and "the last answer stands" in final.detail
    assert result.answer == "KX-4821"
    assert result.llm_calls == sum(s.agent in ("answer", "select", "localise") for s in result.trace)


def test_the_first_round_looks_closer_where_the_coarse_answer_found_its_evidence(tmp_path, fakes):
    """Coarse memory says in passing what colour the van at the gate was (the answer leans on it, unsure: it is
    coarse), while another span names the van beside the other options' colours. Selection alone goes to that
    span; the first round looks closer where the evidence is, and the answer is found there."""
    coarse = {60: "a van waits at the harbor gate, by a blue sign, a white wall and a green door",
              180: "a man waves and walks to the ticket office; a red van at the harbor gate"}

    def world(level, start, end, instruction):
        if level == "coarse":
            return coarse.get(start, f"an empty street at {start:g}s")
        return "a red van stops at the harbor gate" if 180 <= start < 190 else f"street at {start:g}s"

    memory = SQLiteMemoryStore(tmp_path / "m.sqlite")
    memory.add_many(fakes.coarse_nodes("cam", 300, lambda s, e: world("coarse", s, e, "")))
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), reasoner=LexicalReasoner(),
                               captioner=fakes.FakeCaptioner(world), memory=memory, init_spans=1, neighbours=0)
    result = run(engine, "What colour was the van at the harbor gate?", ["red", "blue", "white", "green"])
    assert "coarse 60-120s" in next(s for s in result.trace if s.agent == "select").detail
    searched = [(s.level, s.start) for s in result.trace if s.agent == "caption"]
    assert searched[0] == ("coarse", 180.0)
    assert result.confident and result.answer == "red" and result.iterations == 1


def test_a_finished_question_leaves_no_cycle_holding_its_memory(tmp_path, fakes, seeded):
    """Its view of memory is freed as the question ends, not at the collector's next full pass (a server kept dozens
    of finished questions' views alive between passes, and its memory grew with them)."""
    select, localise = pick_mentions("harbor", "van")
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), captioner=fakes.FakeCaptioner(world),
                               memory=seeded,
                               reasoner=fakes.ScriptedReasoner(answer=sees_plate, select=select, localise=localise))
    views: list[weakref.ref] = []

    async def ask() -> None:
        query = engine.run(QUESTION)
        async for _ in query:
            if not views and hasattr(query._question, "view"):
                views.append(weakref.ref(query._question.view))
        assert query.result is not None and query.result.confident

    gc.collect()
    gc.disable()
    try:
        asyncio.run(ask())
        assert views, "the question's view was never made"
        assert views[0]() is None, "a finished question's memory view is still alive (held by a reference cycle)"
    finally:
        gc.enable()

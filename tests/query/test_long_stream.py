"""A 24-hour stream at T_c = 60 s (1440 coarse nodes) answered within an 8k-token budget: summary levels let
localisation go top-down, and no prompt ever exceeds the budget."""

from __future__ import annotations

import asyncio
import random

from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.query import prompts
from lucy.query.reasoners.base import AnswerReply, LocaliseReply, SelectReply, SummaryReply
from lucy.text import clip_text

DAY = 86_400.0
NEEDLE = 61_260.0  # coarse span 1021
WORDS = "street car bus person dog tree window door bicycle shop light sign cloud bench corner lamp".split()


def coarse_text(start: float, end: float) -> str:
    rng = random.Random(int(start))
    filler = " ".join(rng.choice(WORDS) for _ in range(70))
    if start == NEEDLE:
        filler = "a harbor gate opens; " + filler
    return f"{start:g}-{end:g}s: {filler}"  # ~450 characters, ~150 tokens: 1440 of them are ~216k tokens


def world(level: str, start: float, end: float, instruction: str) -> str:
    if level == "fine" and start == NEEDLE + 20:
        return "a van at the harbor gate, plate KX-4821"
    return f"{level} view of the street at {start:g}s"


def test_day_long_stream_fits_an_8k_budget(tmp_path, fakes):
    memory = SQLiteMemoryStore(tmp_path / "memory.sqlite")
    memory.add_many(fakes.coarse_nodes("cam", DAY, coarse_text))
    assert len(memory.nodes("cam", level="coarse")) == 1440
    selected_levels: list[set[str]] = []

    def select(q, spans, k, n):
        selected_levels.append({s.level for s in spans})
        hit = [s for s in spans if "harbor" in s.text]
        rest = [s for s in spans if s not in hit]
        return SelectReply(spans=[s.ref for s in (hit + rest)[:k]])

    def summarise(items, n):
        text = " ".join(i.text for i in items)
        head = "harbor gate; " if "harbor" in text else ""
        return SummaryReply(summary=clip_text(head + text, 700))

    def localise(q, mem, cands, n):
        hit = next((c for c in cands if "harbor" in c.text), cands[0])
        return LocaliseReply(span=hit.ref, instruction="read the plate")

    def answer(q, mem, final, n):
        hit = next((m for m in mem if "KX-4821" in m.text), None)
        return AnswerReply(answer="KX-4821" if hit else "?", confident=hit is not None)

    budget = 8192
    reasoner = fakes.ScriptedReasoner(answer=answer, select=select, summarise=summarise, localise=localise,
                                      budget=budget)
    captioner = fakes.FakeCaptioner(world)
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=DAY, fps=0.5), reasoner=reasoner,
                               captioner=captioner, memory=memory, context_budget_tokens=budget)
    result = asyncio.run(engine.ask("What plate did the van at the harbor gate have?"))
    assert result.confident and result.answer == "KX-4821", result.reason
    # 1440 / 12 = 120 summary1 nodes, and 10 summary2 nodes above them, built and stored
    assert len(memory.nodes("cam", level="summary1")) == 120
    assert len(memory.nodes("cam", level="summary2")) == 10
    assert reasoner.counts["summarise"] == 130
    # top-down: summary2 -> summary1 -> coarse, then the needle's span is searched
    assert selected_levels[0] == {"summary2"} and selected_levels[-1] == {"coarse"}
    assert any(s.agent == "caption" and s.start == NEEDLE for s in result.trace)
    assert max(tokens for _, tokens in reasoner.calls) <= budget - prompts.RETRY_RESERVE_TOKENS
    assert result.prompt_tokens > 0

    # A second question reuses the summaries (no summarise call) and still stays within the budget.
    reasoner.counts.clear()
    again = asyncio.run(engine.ask("Which plate did the van at the harbor gate show?"))
    assert "summarise" not in reasoner.counts
    assert again.confident and again.caption_calls == 0


def test_packing_clips_then_drops_lowest_priority():
    from lucy.query.reasoners.base import MemoryItem, Question

    q = Question("where is the red car?", horizon=600)
    items = [MemoryItem(i, "coarse", i * 60.0, i * 60.0 + 60, ("red car " if i == 7 else "") + "x" * 3000)
             for i in range(10)]
    priority = [1.0 if i == 7 else 0.0 for i in range(10)]
    build = lambda v: prompts.answer_prompt(q, v)  # noqa: E731
    # a budget that fits all ten when clipped: every item kept, each clipped to the same length
    view = prompts.pack(build, items, priority, 3000)
    assert len(view) == 10 and build(view).tokens <= 3000 and len({len(v.text) for v in view}) == 1
    # a budget too small for ten even at the minimum length: the highest-priority item survives
    small = build([]).tokens + 120
    view = prompts.pack(build, items, priority, small)
    assert 0 < len(view) < 10 and 7 in [v.ref for v in view] and build(view).tokens <= small
    assert [v.ref for v in view] == sorted(v.ref for v in view)  # time order kept


def test_packing_for_answers_drops_whole_memories_instead_of_clipping():
    from lucy.query.reasoners.base import MemoryItem, Question

    q = Question("how many orange squares?", horizon=600)
    text = "Scenes: gray. " + "x" * 1500 + " Objects: 3 orange squares."
    items = [MemoryItem(i, "fine", i * 10.0, i * 10.0 + 10, text) for i in range(10)]
    priority = [1.0 if i in (2, 5) else 0.0 for i in range(10)]
    build = lambda v: prompts.answer_prompt(q, v)  # noqa: E731
    budget = build(items[:3]).tokens
    view = prompts.pack(build, items, priority, budget, prefer="drop")
    assert len(view) == 3 and {2, 5} <= {v.ref for v in view}  # the two that matter, and one more that fits
    assert all(v.text == text for v in view)  # what is shown is shown whole (the end of a caption matters)
    assert build(view).tokens <= budget


def test_query_and_reasoner_settings_are_strict():
    import pytest
    from pydantic import ValidationError

    from lucy.config import load_settings

    s = load_settings()
    assert (s.query.max_iterations, s.query.init_spans, s.reasoner.backend) == (5, 3, "lexical")
    for bad in ({"query.max_iterations": 99}, {"query.context_budget_tokens": 100}, {"reasoner.backend": "gpt"},
                {"query.bogus": 1}, {"reasoner.timeout_seconds": 0}):
        with pytest.raises(ValidationError):
            load_settings(**bad)

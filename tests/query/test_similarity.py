"""The question's similarity to memory (its meaning, from the embedder) is worked out only where memories are ranked:
when not all of them fit the answer's prompt whole, and once the loop looks for where to look closer. A question
answered from memories that all fit never asks the embedder, so `lucy ask` answered from memory loads no model."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np

from lucy.memory.embedders import Embedder
from lucy.memory.retrieval import MemoryIndex
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.query import prompts
from lucy.query.reasoners.base import AnswerReply, SelectReply

WORDS = ["a red van parks by the gate", "a cyclist passes", "the lights go off", "rain on the lens",
         "a man reads a newspaper"]


class CountingEmbedder(Embedder):
    """A vector per text from its hash (no model), counting the questions it embeds."""

    name, model, dim = "counting", "counting-1", 8

    def __init__(self) -> None:
        self.queries: list[str] = []

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._vector(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        self.queries.append(text)
        return self._vector(text)

    @staticmethod
    def _vector(text: str) -> np.ndarray:
        vector = np.random.default_rng(abs(hash(text))).normal(size=8).astype(np.float32)
        return vector / np.linalg.norm(vector)


def engine_with_index(tmp_path, fakes, reasoner, **config):
    tmp_path.mkdir(exist_ok=True)
    memory = SQLiteMemoryStore(tmp_path / "memory.sqlite")
    memory.add_many(fakes.coarse_nodes("cam", 300, lambda a, b: f"{a:g}-{b:g}s: {WORDS[int(a // 60)]}"))
    embedder = CountingEmbedder()
    engine = fakes.make_engine(tmp_path, frames=fakes.FakeFrames(duration=300), reasoner=reasoner,
                               captioner=None, memory=memory, **config)
    engine.index = MemoryIndex(memory, embedder)
    return engine, embedder


def test_a_question_answered_from_memory_that_fits_never_asks_the_embedder(tmp_path, fakes):
    shown = []

    def answer(q, mem, final, n):
        shown.append(mem)
        return AnswerReply(answer="a red van", confident=True, evidence=[{"start": 0, "end": 60}])

    engine, embedder = engine_with_index(tmp_path, fakes, fakes.ScriptedReasoner(answer=answer))
    result = asyncio.run(engine.ask("What parked by the gate?"))
    assert result.answer == "a red van" and result.confident
    assert embedder.queries == []
    assert len(shown[0]) == 5 and all(m.similarity is None for m in shown[0])  # every memory shown, none ranked


def test_looking_closer_ranks_by_meaning(tmp_path, fakes):
    seen = []

    def select(q, spans, k, n):
        seen.append([s.similarity for s in spans])
        return SelectReply(spans=[s.ref for s in spans[:k]])

    reasoner = fakes.ScriptedReasoner(select=select)  # never confident: the loop goes on to look closer
    engine, embedder = engine_with_index(tmp_path, fakes, reasoner, max_iterations=1)
    asyncio.run(engine.ask("What parked by the gate?"))
    assert embedder.queries == ["What parked by the gate?"]  # once, for the whole question
    assert seen and all(s is not None for s in seen[0])


def test_memories_that_do_not_all_fit_are_chosen_by_meaning_too(tmp_path, fakes):
    shown = []

    def answer(q, mem, final, n):
        shown.append(mem)
        return AnswerReply(answer="a red van", confident=True)

    whole = fakes.ScriptedReasoner(answer=answer)
    asyncio.run(engine_with_index(tmp_path / "whole", fakes, whole)[0].ask("What parked by the gate?"))
    # a budget a token short of the prompt that shows all five (the engine keeps a reserve for a retry)
    budget = whole.calls[0][1] - 1 + prompts.RETRY_RESERVE_TOKENS
    shown.clear()
    engine, embedder = engine_with_index(tmp_path, fakes, fakes.ScriptedReasoner(answer=answer),
                                         context_budget_tokens=budget)
    asyncio.run(engine.ask("What parked by the gate?"))
    assert embedder.queries == ["What parked by the gate?"]
    assert 0 < len(shown[0]) < 5 and all(m.similarity is not None for m in shown[0])

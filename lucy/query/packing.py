"""Which of a question's memories an agent is shown: ranked by relevance, packed into the context budget."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lucy.query import prompts
from lucy.query.memory_view import MemoryView, ViewItem, memory_depth
from lucy.query.reasoners.base import MemoryItem, Question
from lucy.text import BM25, hybrid_scores, terms

DEPTH_BONUS = 0.15  # per level below coarse: deeper memories are what backtracking went looking for
INSTRUCTED_BONUS = 0.1  # a caption made with a question's instruction
BOOST = 10.0  # what a boosted item gets: above anything relevance can give


class PromptPacker:
    """Ranks the memories of one question's view and packs the best into an agent's prompt."""

    def __init__(self, view: MemoryView, question: Question, budget: int) -> None:
        self.view = view
        self.budget = budget
        self._query = terms(question.text) + [t for option in question.options for t in terms(option)]
        self.focus = frozenset(self._query)  # clipped texts keep the lines that share most terms with these

    def relevance(self, items: Sequence[ViewItem]) -> list[float]:
        """Priority for packing: word and meaning match with the question (:func:`lucy.text.hybrid_scores`),
        plus a bonus for depth and for memories made for a question's instructions (they are what backtracking
        found)."""
        if not items:
            return []
        raw = BM25([item.shown_text for item in items]).scores(self._query)
        matched = hybrid_scores(raw, [item.similarity for item in items])
        return [score + DEPTH_BONUS * memory_depth(item.level) + (0.0 if item.plain else INSTRUCTED_BONUS)
                for item, score in zip(items, matched, strict=True)]

    def _distinct(self, refs: Sequence[int], boost: set[int] | None = None) -> tuple[list[ViewItem], set[int]]:
        """The memories ``refs`` in time order, each caption of a span once, and the refs of those to boost."""
        items, boosted = [], set()
        seen: dict[tuple[str, float, float, str], ViewItem] = {}
        for item in self.view.ordered(refs):
            # The same caption of the same span (a question looked again and saw what ingest saw) is shown once:
            # repeated, it would count as more evidence than it is, and cost the budget twice.
            key = (item.level, item.start, item.end, item.shown_text)
            kept = seen.setdefault(key, item)
            if kept is item:
                items.append(item)
            if boost and item.ref in boost:
                boosted.add(kept.ref)
        return items, boosted

    def fits_whole(self, build: Callable[[list[MemoryItem]], prompts.Prompt], refs: Sequence[int]) -> bool:
        """Whether every memory of ``refs`` fits the budget whole in the prompt ``build`` makes: then
        :meth:`pack` with ``prefer="drop"`` shows them all, and their relevance (meaning included) chooses nothing."""
        items, _ = self._distinct(refs)
        return build([item.as_memory_item() for item in items]).tokens <= self.budget

    def pack(self, build: Callable[[list[MemoryItem]], prompts.Prompt], refs: Sequence[int], *,
             boost: set[int] | None = None, prefer: str = "clip") -> list[MemoryItem]:
        """The memories ``refs`` that fit the budget in the prompt ``build`` makes, in time order (see
        :func:`lucy.query.prompts.pack` for ``prefer``); refs in ``boost`` are kept first."""
        items, boosted = self._distinct(refs, boost)
        priority = self.relevance(items)
        if boosted:
            priority = [p + (BOOST if item.ref in boosted else 0.0) for p, item in zip(priority, items, strict=True)]
        return prompts.pack(build, [item.as_memory_item() for item in items], priority, self.budget, prefer=prefer,
                            focus=self.focus)

"""What a question means against what memory says: each memory of a question's view gets its similarity to the
question, from the vectors stored with the nodes (:class:`lucy.memory.retrieval.MemoryIndex`).

The agents' ranking (:func:`lucy.text.hybrid_scores`) reads it beside the word match, so "the lady at the
counter" finds "a woman standing at the desk". Without an embedder every similarity stays None and ranking is by
words alone, as before.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lucy.query.memory_view import MemoryView
from lucy.query.reasoners.base import Question

if TYPE_CHECKING:
    from lucy.memory.retrieval import MemoryIndex


def question_text(question: Question) -> str:
    """What is embedded for a question: its text, and its options (they often carry what is looked for)."""
    if not question.options:
        return question.text
    return f"{question.text} ({' / '.join(question.options)})"


class QuestionSimilarity:
    """Fills in the similarity of one question's view items to the question, a batch of new items at a time."""

    def __init__(self, index: MemoryIndex | None, view: MemoryView, question: Question) -> None:
        self.index = index
        self.view = view
        self.text = question_text(question)
        self._asked: set[int] = set()  # refs already scored (or that could not be)

    async def update(self) -> None:
        """Give every stored memory of the view that has no similarity yet its similarity to the question."""
        if self.index is None:
            return
        pending = [item for ref, item in self.view.items.items() if item.node is not None and ref not in self._asked]
        if not pending:
            return
        self._asked.update(item.ref for item in pending)
        scores = await asyncio.to_thread(self.index.similarities, self.text, [item.node for item in pending])
        if scores is None:  # the embedder failed: the index said why; ranking stays by words
            return
        for item, score in zip(pending, scores, strict=True):
            item.similarity = float(score)

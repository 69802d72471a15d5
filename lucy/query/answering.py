"""The answering agent: an answer (with confidence, evidence and reason) from the memories it is shown."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lucy.query import prompts
from lucy.query.packing import PromptPacker
from lucy.query.reasoners.base import AnswerReply, Question, Reasoner, ReasonerError
from lucy.query.trace import TraceRecorder, TraceStep
from lucy.text import clip_words


@dataclass
class Attempt:
    """One call of the answering agent: its reply (None if it gave no usable one) and its step."""

    reply: AnswerReply | None
    step: TraceStep

    @property
    def confident(self) -> bool:
        return self.reply is not None and self.reply.confident


class Answerer:
    """Asks the answering agent about one question, showing it the memories that fit the budget."""

    def __init__(self, *, packer: PromptPacker, reasoner: Reasoner, trace: TraceRecorder, question: Question) -> None:
        self.packer = packer
        self.reasoner = reasoner
        self.trace = trace
        self.question = question

    def fits_whole(self, refs: Sequence[int]) -> bool:
        """Whether the memories ``refs`` all fit the answer's prompt whole (then none is chosen by relevance)."""
        question = self.question
        return self.packer.fits_whole(lambda v: prompts.answer_prompt(question, v, final=False), refs)

    async def answer(self, refs: Sequence[int], *, final: bool) -> Attempt:
        """Answer from the memories ``refs`` (the most relevant, whole, when not all fit). A ``final`` answer is
        forced: the agent must answer, and the reply is never taken as confident."""
        step = self.trace.begin("final" if final else "answer")
        question = self.question
        shown = self.packer.pack(lambda v: prompts.answer_prompt(question, v, final=final), refs, prefer="drop")
        step.detail = f"{len(shown)} memories shown"
        try:
            reasoned = await self.reasoner.answer(question, shown, final=final)
        except ReasonerError as err:
            self.trace.agent_failed(step, err)
            return Attempt(None, step)
        self.trace.charge(step, reasoned.usage)
        reply = reasoned.reply
        lanes = self.packer.view.lanes
        if lanes is not None and not lanes.single:  # across streams: its evidence in the question's view time
            reply = reply.model_copy(update={"evidence": lanes.evidence_in_view(reply.evidence, shown)})
        if final:
            reply = reply.model_copy(update={"confident": False})
        step.detail = (f"{clip_words(reply.answer, 120)!r} confident={reply.confident} "
                       f"({len(shown)} memories shown)")
        return Attempt(reply, step)

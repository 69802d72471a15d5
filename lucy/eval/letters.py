"""Answers in prose: the option letter (or count) in a reply that is not the JSON the agents ask for.

Benchmarks' own scorers (lmms-eval's ``extract_characters_regex`` for Video-MME and MLVU, LVBench's
``polish_answer``) take the first option letter of a reply once the usual lead-ins ("The best answer is") are
removed; a long reply with no letter in it has no answer. :func:`extract_letter` does the same, and also takes an
option quoted by its text. :class:`ProseTolerantReasoner` is the ``openai`` reasoner for evaluation: when the
answering agent replies in prose instead of JSON, the letter in the prose is its answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextvars import ContextVar

from lucy.config import LucySettings
from lucy.query.reasoners import AnswerReply, MemoryItem, Question, Reasoned, ReasonerError, Usage
from lucy.query.reasoners.openai import OpenAIReasoner, strip_thinking

_LEAD_INS = ("the best answer is", "the correct answer is", "the answer is", "the answer", "the best option is",
             "the correct option is", "best answer:", "best option:", "answer:", "option")
_NUMBERED = re.compile(r"\boption(?:_index)?\s*(?:number\s*)?[:=#]?\s*(\d+)\b", re.IGNORECASE)
_UNSURE = re.compile(r"\b(not (sure|certain|confident)|unsure|cannot (tell|determine|be determined)|unclear)\b",
                     re.IGNORECASE)


def extract_letter(text: str, options: Sequence[str]) -> str | None:
    """The option letter a free-text reply gives, or None.

    In order: a letter in brackets or before a dot / bracket ("(B)", "B.", "B)"); a lone capital letter among the
    options' letters after the usual lead-ins are removed (as lmms-eval does, but limited to the letters this
    question has); the text of exactly one option. A reply of more than ten words with no such letter has none.
    """
    if not text or not options:
        return None
    text = strip_thinking(text).strip()
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:len(options)]
    cls = f"[{letters}]"
    for pattern in (rf"\(({cls})\)", rf"(?:^|\s|\*)({cls})[.):](?:\s|$)"):
        match = re.search(pattern, text)
        if match:
            return match.group(1)
    stripped = text
    for lead in _LEAD_INS:
        stripped = re.sub(re.escape(lead), " ", stripped, flags=re.IGNORECASE)
    match = re.search(rf"(?<![A-Za-z]){cls}(?![A-Za-z])", stripped)
    if match and not (match.group(0) == "A" and re.search(r"(?<![A-Za-z])A\s+[a-z]", stripped) and
                      len(stripped.split()) > 3):  # "A van stopped..." is an article, not an option
        return match.group(0)
    lowered = " ".join(text.lower().split())
    quoted = [i for i, o in enumerate(options) if o.strip() and " ".join(o.lower().split()) in lowered]
    if len(quoted) == 1:
        return letters[quoted[0]]
    return None


def extract_count(text: str) -> str | None:
    """The number a reply gives (OVO-Bench's REC scorer joins all its digits; here the first number)."""
    match = re.search(r"\d+", text or "")
    return match.group(0) if match else None


_RAW: ContextVar[tuple[str, Usage | None]] = ContextVar("lucy_eval_last_reply", default=("", None))


class ProseTolerantReasoner(OpenAIReasoner):
    """The ``openai`` reasoner, reading an answer's letter from prose when the model does not reply in JSON.

    Every other agent (localise, select, summarise) is unchanged: a prose reply there fails as it always does,
    and the question goes on without it.
    """

    async def _complete(self, messages: list[dict[str, str]], schema: type, usage: Usage) -> str:  # type: ignore[override]
        text = await super()._complete(messages, schema, usage)
        _RAW.set((text, usage))  # the same task reads it back in answer(): a context variable keeps questions apart
        return text

    async def answer(self, question: Question, memory: Sequence[MemoryItem], *,
                     final: bool = False) -> Reasoned[AnswerReply]:
        _RAW.set(("", None))
        try:
            return await super().answer(question, memory, final=final)
        except ReasonerError:
            text, usage = _RAW.get()
            letter = extract_letter(text, question.options) if question.options else None
            numbered = _NUMBERED.search(text)  # Lucy's prompt numbers options from 0: "option 2"
            if letter is not None:
                index = ord(letter) - ord("A")
            elif numbered and int(numbered.group(1)) < len(question.options):
                index = int(numbered.group(1))
            else:
                raise
            reply = AnswerReply(answer=question.options[index], option_index=index,
                                confident=not _UNSURE.search(text), reason=f"read from prose: {text[:200]}")
            return Reasoned(reply, usage or Usage(llm_calls=2))  # the reply and the retry that asked for JSON


def eval_reasoner(settings: LucySettings) -> ProseTolerantReasoner | None:
    """The prose-tolerant reasoner for ``settings.reasoner`` when it is ``openai``; None for the others."""
    r = settings.reasoner
    if r.backend != "openai":
        return None
    return ProseTolerantReasoner(base_url=r.base_url, model=r.model, api_key=r.api_key.get_secret_value(),
                                 timeout_seconds=r.timeout_seconds, max_retries=r.max_retries,
                                 max_tokens=r.max_tokens, temperature=r.temperature,
                                 structured_output=r.structured_output)

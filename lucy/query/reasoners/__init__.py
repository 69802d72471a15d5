"""Reasoners: the LLM agents of the question loop, behind one interface; the backend is chosen from config."""

from __future__ import annotations

from lucy.config import LucySettings
from lucy.query.reasoners.base import (
    AnswerReply,
    CheckReply,
    EvidenceSpan,
    LocaliseReply,
    MemoryItem,
    Question,
    Reasoned,
    Reasoner,
    ReasonerError,
    SelectReply,
    SummaryReply,
    Usage,
)

__all__ = [
    "AnswerReply", "CheckReply", "EvidenceSpan", "LocaliseReply", "MemoryItem", "Question", "Reasoned", "Reasoner",
    "ReasonerError", "SelectReply", "SummaryReply", "Usage", "make_reasoner",
]


def make_reasoner(settings: LucySettings) -> Reasoner:
    """The reasoner ``settings.reasoner.backend`` names (the one place a backend is chosen)."""
    r = settings.reasoner
    if r.backend == "lexical":
        from lucy.query.reasoners.lexical import LexicalReasoner

        return LexicalReasoner(r.lexical)
    if r.backend == "openai":
        from lucy.query.reasoners.openai import OpenAIReasoner

        return OpenAIReasoner(base_url=r.base_url, model=r.model, api_key=r.api_key.get_secret_value(),
                              timeout_seconds=r.timeout_seconds, max_retries=r.max_retries, max_tokens=r.max_tokens,
                              temperature=r.temperature, structured_output=r.structured_output)
    raise ValueError(f"unknown reasoner backend {r.backend!r}")  # config validation makes this unreachable

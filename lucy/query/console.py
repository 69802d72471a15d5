"""The answer block printed after a question's trace (by ``lucy ask`` and the demo)."""

from __future__ import annotations

from lucy.query.trace import QueryResult
from lucy.text import counted


def answer_lines(result: QueryResult) -> list[str]:
    """The answer block printed after the trace."""
    chosen = f" (option {result.option_index})" if result.option_index is not None else ""
    lines = [f"asked across: {', '.join(result.streams)}"] if result.streams else []
    lines += [f"answer: {result.answer or '(none)'}{chosen}",
             f"confident: {'yes' if result.confident else 'no'}"]
    for e in result.evidence:
        wall = f" ({e.wall_start} to {e.wall_end})" if e.wall_start else ""
        lines.append(f"evidence: {e.stream + ' ' if e.stream else ''}{e.start:g}-{e.end:g} s{wall}")
    if result.reason:
        lines.append(f"reason: {result.reason}")
    costs = [counted(result.iterations, "round"), counted(result.llm_calls, "llm call"),
             counted(result.caption_calls, "caption call")]
    if result.prompt_tokens or result.completion_tokens:  # only a model counts tokens (the embedded agents do not)
        costs.append(f"tokens {result.prompt_tokens}+{result.completion_tokens}")
    costs += [f"horizon {result.horizon:.1f} s", f"{result.wall_seconds:.1f} s"]
    lines.append(" | ".join(costs))
    return lines


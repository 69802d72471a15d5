"""``lucy ask``: answer one question from the command line, printing the trace as it happens."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from typing import TextIO

from lucy.config import LucySettings
from lucy.ingest.frames import check_stream_name
from lucy.query.factory import open_engine
from lucy.query.trace import QueryResult
from lucy.text import counted
from lucy.untrusted import normalise_question


def answer_lines(result: QueryResult) -> list[str]:
    """The answer block printed after the trace."""
    chosen = f" (option {result.option_index})" if result.option_index is not None else ""
    lines = [f"answer: {result.answer or '(none)'}{chosen}",
             f"confident: {'yes' if result.confident else 'no'}"]
    for e in result.evidence:
        wall = f" ({e.wall_start} to {e.wall_end})" if e.wall_start else ""
        lines.append(f"evidence: {e.start:g}-{e.end:g} s{wall}")
    if result.reason:
        lines.append(f"reason: {result.reason}")
    costs = [counted(result.iterations, "round"), counted(result.llm_calls, "llm call"),
             counted(result.caption_calls, "caption call")]
    if result.prompt_tokens or result.completion_tokens:  # only a model counts tokens (the embedded agents do not)
        costs.append(f"tokens {result.prompt_tokens}+{result.completion_tokens}")
    costs += [f"horizon {result.horizon:.1f} s", f"{result.wall_seconds:.1f} s"]
    lines.append(" | ".join(costs))
    return lines


async def _ask(settings: LucySettings, stream: str, question: str, options: Sequence[str], as_json: bool,
               out: TextIO) -> QueryResult:
    async with open_engine(settings, stream) as engine:
        run = engine.run(question, options)
        async for step in run:
            if not as_json and step.agent != "done":
                print(step.line(), file=out, flush=True)
        assert run.result is not None
        return run.result


def ask_command(settings: LucySettings, stream: str, question: str, options: Sequence[str] = (), *,
                as_json: bool = False, out: TextIO | None = None) -> int:
    """Run one question; print the trace and the answer (or one JSON object). Returns the exit code."""
    out = out or sys.stdout
    check_stream_name(stream)
    question, options = normalise_question(question, options)  # InputError: empty, or duplicate options
    result = asyncio.run(_ask(settings, stream, question, options, as_json, out))
    if as_json:
        print(json.dumps(result.to_json()), file=out)
    else:
        print("\n".join(answer_lines(result)), file=out)
    if not result.answer:
        print("lucy: error: no answer: " + "; ".join(result.errors[-3:]), file=sys.stderr)
        return 1
    return 0

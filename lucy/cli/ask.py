"""``lucy ask``: answer one question about what a stream has shown so far (or every stream, or some: answered across
them), printing the trace as it goes."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from lucy.cli.common import (
    ConfigOption,
    DataOption,
    PresetOption,
    VerboseOption,
    ingest_hint,
    load,
    require_stream,
)
from lucy.config import CaptionerBackend, LucySettings, ReasonerBackend
from lucy.errors import LucyError

if TYPE_CHECKING:
    from lucy.query.trace import QueryResult


def ask(question: Annotated[str, typer.Argument(metavar="QUESTION", help="The question.", show_default=False)],
        stream: Annotated[str | None, typer.Option(
            "--stream", metavar="NAME[,NAME...]", show_default=False,
            help="Ask about this stream, or across these (default: across every stream).")] = None,
        option: Annotated[list[str] | None, typer.Option(
            metavar="TEXT", show_default=False, help="A multiple-choice option (repeat for each).")] = None,
        as_json: Annotated[bool, typer.Option(
            "--json", help="Print one JSON object (answer, evidence, costs, trace).")] = False,
        reasoner: Annotated[ReasonerBackend | None, typer.Option(
            show_default=False,
            help="Agents' backend (default: reasoner.backend).")] = None,
        captioner: Annotated[CaptionerBackend | None, typer.Option(
            show_default=False,
            help="Backend that captions deeper memory (default: captioner.backend).")] = None,
        data: DataOption = None, config: ConfigOption = None, preset: PresetOption = None,
        verbose: VerboseOption = 0) -> int:
    """Answer a question about what a stream has shown so far; without --stream (or with --stream a,b), across every
    stream (or those), naming the stream of each answer."""
    settings = load(data, config, preset, verbose, **{"reasoner.backend": reasoner, "captioner.backend": captioner})
    streams = _streams_to_ask(settings, stream)
    return ask_command(settings, streams[0] if len(streams) == 1 else streams, question, option or (),
                       as_json=as_json)


def _streams_to_ask(settings: LucySettings, stream: str | None) -> list[str]:
    """The streams ``--stream`` names (``a,b``: several), each checked, or every stream of the data directory that
    has frames (as ``lucy search`` without ``--stream``)."""
    from lucy.wiring import open_frames

    if stream is None:
        names = sorted(open_frames(settings).names())
        if not names:
            raise LucyError(f"{settings.data} holds no stream yet: {ingest_hint('NAME')} makes one")
        return names
    names = [name.strip() for name in stream.split(",") if name.strip()]
    if not names:
        raise LucyError("--stream names no stream: give one, several as a,b, or leave it out to ask them all")
    return [require_stream(settings, name) for name in dict.fromkeys(names)]


async def _ask(settings: LucySettings, stream: str | Sequence[str], question: str, options: Sequence[str],
               as_json: bool,
               out: TextIO) -> QueryResult:
    from lucy.wiring.engine import open_engine  # the engine and its backends: only once a question is asked

    async with open_engine(settings, stream) as engine:
        run = engine.run(question, options)
        async for step in run:
            if not as_json and step.agent != "done":
                print(step.line(), file=out, flush=True)
        assert run.result is not None
        return run.result


def ask_command(settings: LucySettings, stream: str | Sequence[str], question: str, options: Sequence[str] = (), *,
                as_json: bool = False, out: TextIO | None = None) -> int:
    """Run one question (about ``stream``, or across several); print the trace and the answer (or one JSON object).
    Returns the exit code."""
    from lucy.ingest.frames import check_stream_name
    from lucy.query.console import answer_lines
    from lucy.untrusted import normalise_question

    out = out or sys.stdout
    for name in [stream] if isinstance(stream, str) else stream:
        check_stream_name(name)
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

"""``lucy ask``: answer one question about what a stream has shown so far, printing the trace as it goes."""

from __future__ import annotations

from typing import Annotated

import typer

from lucy.cli.common import (
    ConfigOption,
    DataOption,
    PresetOption,
    StreamOption,
    VerboseOption,
    load,
    require_stream,
)
from lucy.config import CaptionerBackend, ReasonerBackend


def ask(question: Annotated[str, typer.Argument(metavar="QUESTION", help="The question.", show_default=False)],
        stream: StreamOption,
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
    """Answer a question about what a stream has shown so far."""
    settings = load(data, config, preset, verbose, **{"reasoner.backend": reasoner, "captioner.backend": captioner})
    require_stream(settings, stream)
    from lucy.query.console import ask_command

    return ask_command(settings, stream, question, option or (), as_json=as_json)

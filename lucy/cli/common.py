"""What every ``lucy`` command shares: the common options, loading the settings, logging, the console, and the
hints that name the next command to run.

Only typer and the standard library are imported here: ``lucy --help`` and ``lucy --version`` load this module and
nothing heavier (backends, stores and their libraries are imported by the commands that run them).
"""

from __future__ import annotations

import difflib
import logging
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lucy.errors import LucyError
from lucy.shell import lucy_command

if TYPE_CHECKING:
    from rich.console import Console

    from lucy.config import LucySettings

EXIT_ERROR = 1  # bad input, unreachable source, damaged file (what could be stored was kept)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it


def _preset_names() -> list[str]:
    from lucy.config import PRESETS  # pydantic models: built when a command runs, not for --help

    return list(PRESETS)


DataOption = Annotated[Path | None, typer.Option("--data", help="Data directory (default ./lucy-data or $LUCY_DATA).",
                                                 show_default=False)]
ConfigOption = Annotated[Path | None, typer.Option(
    "--config", help="TOML configuration file (default ./lucy.toml or $LUCY_CONFIG).", show_default=False)]
PresetOption = Annotated[str | None, typer.Option(
    "--preset", metavar="NAME", show_default=False, autocompletion=_preset_names,
    help="Memory-level preset: live, or one of a benchmark's (lucy config show lists them).")]
VerboseOption = Annotated[int, typer.Option("--verbose", "-v", count=True,
                                            help="More log lines: -v for progress notes, -vv for debugging.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
StreamOption = Annotated[str, typer.Option("--stream", help="Stream name.", show_default=False)]


def load(data: Path | None, config: Path | None, preset: str | None, verbose: int = 0, *, logs: bool = True,
         **flags: Any) -> LucySettings:
    """The effective settings of a command (file, then ``LUCY_*``, then its flags); sets up logging first."""
    if logs:
        configure_logging(verbose)
    from lucy.config import load_settings

    if preset is not None and preset not in _preset_names():
        guess = closest(preset, _preset_names())
        fix = f"did you mean {guess!r}? " if guess else ""
        raise LucyError(f"unknown preset {preset!r}; {fix}choose one of: {', '.join(_preset_names())}")
    return load_settings(config, data=data, preset=preset, **flags)


def configure_logging(verbosity: int) -> None:
    """Quiet by default: warnings and errors only, every library included. ``-v``: Lucy's notes (INFO); ``-vv``:
    Lucy's debugging and the libraries' notes. Every line goes through the handler that redacts credentials.
    Results are printed, not logged."""
    from lucy.redaction import redacting_handler  # the standard library alone: no PyAV before any work

    logging.basicConfig(level=logging.INFO if verbosity >= 2 else logging.WARNING, handlers=[redacting_handler()],
                        force=True)
    lucy_level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbosity, 2)]
    logging.getLogger("lucy").setLevel(lucy_level)


@cache
def stderr_console() -> Console:
    """Rich console on stderr, for progress, tables of status and hints (results go to stdout)."""
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def error_line(message: str) -> None:
    """One ``lucy: error: ...`` line on stderr, never wrapped (scripts and tests read it as one line)."""
    print(f"lucy: error: {message}", file=sys.stderr)


def note(message: str) -> None:
    """One ``lucy: ...`` line on stderr: a hint or a warning meant for the person at the terminal."""
    print(f"lucy: {message}", file=sys.stderr)


def ingest_hint(stream: str) -> str:
    """The command that makes a stream (and its memory)."""
    return f"`{lucy_command()} ingest FILE --stream {stream}`"


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to a mistyped one (difflib), if any is close enough."""
    found = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return found[0] if found else None


def unknown_stream(stream: str, known: Iterable[str], data: Path) -> LucyError:
    """The error for a stream that is not in the data directory: the closest name, the names there, and how to
    make the stream."""
    names = sorted(set(known))
    if not names:
        return LucyError(f"no stream named {stream!r} in {data}: it has no streams yet; run {ingest_hint(stream)} "
                         "first")
    guess = closest(stream, names)
    fix = f"did you mean {guess!r}? Or make it with" if guess else "make it with"
    return LucyError(f"no stream named {stream!r} in {data} (streams: {', '.join(names)}); {fix} {ingest_hint(stream)}")


def known_streams(settings: LucySettings) -> set[str]:
    """Streams of the data directory: those with frames, and those with memory only (frames deleted)."""
    from lucy.wiring import open_existing_memory, open_frames

    names = set(open_frames(settings).names())
    memory = open_existing_memory(settings)  # reading never creates a memory store
    if memory is not None:
        try:
            names.update(memory.streams())
        finally:
            memory.close()
    return names


def require_stream(settings: LucySettings, stream: str) -> str:
    """``stream``, checked: a valid name of a stream the data directory has (else a :class:`LucyError` that says
    what to do)."""
    from lucy.ingest import check_stream_name
    from lucy.wiring import open_frames

    check_stream_name(stream)
    if open_frames(settings).exists(stream):  # the usual case, and the cheap look
        return stream
    known = known_streams(settings)
    if stream not in known:
        raise unknown_stream(stream, known, settings.data)
    return stream


def clock(seconds: float) -> str:
    """``H:MM:SS.s`` of a media time."""
    minutes, sec = divmod(max(seconds, 0.0), 60)
    return f"{int(minutes // 60)}:{int(minutes % 60):02d}:{sec:04.1f}"

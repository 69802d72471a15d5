"""The ``lucy`` application: its commands, the options before them, and how their outcomes become exit codes.

Errors caused by input print one ``lucy: error: ...`` line and exit 1 (no traceback); usage mistakes (an unknown
command or option, a bad value) are click's, with a suggestion for a typo, and exit 2; Ctrl-C exits 130.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import Annotated

import typer

from lucy.cli import ask, clip, config, evaluation, ingest, memory, objects, serve, streams, watch
from lucy.cli.common import EXIT_ERROR, EXIT_INTERRUPTED, error_line, note
from lucy.errors import LucyError

app = typer.Typer(name="lucy", no_args_is_help=True, rich_markup_mode="rich",
                  pretty_exceptions_enable=False, context_settings={"help_option_names": ["-h", "--help"]})
config_app = typer.Typer(name="config", help="Configuration.", no_args_is_help=True)


def _version(shown: bool) -> None:
    if shown:
        from importlib.metadata import version

        print(f"lucy {version('lucy')}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_version,
                                                help="Print Lucy's version and exit.")] = False) -> None:
    """Lucy: ask questions about video while it streams.

    Each command has --help; -v (or -vv) after a command logs more of what it does.
    """


def _guarded(command: Callable[..., int | None]) -> Callable[..., None]:
    """``command`` with Lucy's exit codes: its own return value, 1 with one line for a :class:`LucyError` or an
    invalid configuration, 130 for Ctrl-C."""

    @functools.wraps(command)
    def run(*args: object, **kwargs: object) -> None:
        try:
            code = command(*args, **kwargs)
        except LucyError as err:
            from lucy.redaction import redact_url  # a last wall: whatever raised it, no URL shows a secret

            error_line(redact_url(str(err)))
            raise typer.Exit(EXIT_ERROR) from None
        except KeyboardInterrupt:
            note("interrupted")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except Exception as err:
            from pydantic import ValidationError

            if not isinstance(err, ValidationError):
                raise
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in err.errors())
            error_line(f"invalid configuration: {problems}")
            raise typer.Exit(EXIT_ERROR) from None
        if code:
            raise typer.Exit(code)

    return run


for name, function in (("ingest", ingest.ingest), ("memory", memory.memory), ("search", memory.search),
                       ("watch", watch.watch), ("streams", streams.streams), ("objects", objects.objects),
                       ("ask", ask.ask), ("clip", clip.clip),
                       ("eval", evaluation.evaluate), ("demo", serve.demo), ("serve", serve.serve)):
    app.command(name)(_guarded(function))
config_app.command("show")(_guarded(config.show))
app.add_typer(config_app)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``lucy`` with ``argv`` (default: the process's arguments); returns the exit code."""
    try:
        app(args=list(argv) if argv is not None else None, prog_name="lucy")
    except SystemExit as done:
        if done.code is None or isinstance(done.code, int):
            return done.code or 0
        print(done.code, file=sys.stderr)
        return EXIT_ERROR
    return 0

"""``lucy clip``: write an MP4 of a stream between two media times, from the data directory (no server needed)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from pathlib import Path
from typing import Annotated

import typer

from lucy.cli.common import ConfigOption, DataOption, StreamOption, VerboseOption, clock, load, require_stream
from lucy.errors import LucyError

_CLOCK = re.compile(r"^(?:(\d+):)?(\d+):(\d{1,2}(?:\.\d+)?)$")


def media_time(text: str, flag: str) -> float:
    """Seconds from ``S``, ``M:SS`` or ``H:MM:SS`` (each may end in a fraction: ``1:05.5``)."""
    value = text.strip()
    match = _CLOCK.fullmatch(value)
    if match is not None:
        hours, minutes, secs = match.groups()
        if float(secs) >= 60 or (hours is not None and int(minutes) >= 60):
            raise LucyError(f"{flag} {text!r}: minutes and seconds must be below 60 in H:MM:SS")
        return int(hours or 0) * 3600 + int(minutes) * 60 + float(secs)
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds):
        raise LucyError(f"{flag} {text!r} is not a media time: give seconds (65), M:SS (1:05) or H:MM:SS")
    return seconds


def clip(stream: StreamOption,
         start: Annotated[str, typer.Option("--from", metavar="T", show_default=False,
                                            help="From media time T: seconds, M:SS or H:MM:SS.")],
         end: Annotated[str, typer.Option("--to", metavar="T", show_default=False,
                                          help="Up to media time T: seconds, M:SS or H:MM:SS.")],
         output: Annotated[Path, typer.Option("--output", "-o", metavar="FILE", show_default=False,
                                              help="The MP4 file to write (replaced if it exists).")],
         as_json: Annotated[bool, typer.Option("--json", help="Print one JSON line about the clip.")] = False,
         data: DataOption = None, config: ConfigOption = None, verbose: VerboseOption = 0) -> int:
    """Write a playable MP4 of a stream from --from to --to: cut from its recording (no re-encoding), from its
    source file, or encoded from its stored frames (in that order of preference)."""
    settings = load(data, config, None, verbose)
    t0, t1 = media_time(start, "--from"), media_time(end, "--to")
    from lucy.ingest.clips import check_range, make_clip

    check_range(t0, t1, settings.recording.max_clip_seconds)  # said before any store is opened
    if output.is_dir():
        raise LucyError(f"-o {output} is a folder: name the MP4 file to write")
    if not output.parent.is_dir():
        raise LucyError(f"-o {output}: the folder {output.parent} does not exist")
    require_stream(settings, stream)
    from lucy.wiring import open_frames

    part = output.with_name(f".{output.name}.part")  # the clip appears whole, or not at all
    try:
        part.touch()
        made = make_clip(open_frames(settings), settings.data, stream, t0, t1, part,
                         max_seconds=settings.recording.max_clip_seconds)
        os.replace(part, output)
    except OSError as err:
        raise LucyError(f"cannot write {output}: {err.strerror or err}") from None
    finally:
        with contextlib.suppress(OSError):
            part.unlink(missing_ok=True)
    if as_json:
        print(json.dumps({"stream": stream, "file": str(output), "from": round(made.start, 3),
                          "to": round(made.end, 3), "origin": made.origin, "bytes": made.size}))
    else:
        print(f"{output}: {stream} {clock(made.start)} - {clock(made.end)} from its {made.origin}, "
              f"{made.size / 1e6:.1f} MB")
    return 0

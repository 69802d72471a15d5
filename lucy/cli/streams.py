"""``lucy streams``: the streams of a data directory, as a table (refreshed live with ``--follow``) or JSON."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lucy.cli.common import (
    ConfigOption,
    DataOption,
    JsonOption,
    PresetOption,
    VerboseOption,
    ingest_hint,
    load,
)

if TYPE_CHECKING:
    from rich.table import Table

    from lucy.config import LucySettings

FOLLOW_SECONDS = 1.0  # refresh of `lucy streams --follow`


def stream_rows(settings: LucySettings) -> list[dict[str, Any]]:
    """One row per stored stream (the JSON output's shape)."""
    from lucy.runtime.status import stored_stream_state
    from lucy.wiring import open_frames

    frames = open_frames(settings)
    rows = []
    for name in frames.names():
        info = frames.open(name).info()
        # the state the server would show for it: recording / catching_up while `lucy ingest` writes it
        state = stored_stream_state(settings.data, info).value
        rows.append({"stream": name, "state": state, "source": info.source, "live": info.live, "frames": info.frames,
                     "media_seconds": round(info.media_seconds, 3), "stored_fps": info.stored_fps,
                     "size": f"{info.width}x{info.height}", "codec": info.codec, "complete": info.complete,
                     "wall_start": info.wall_start, "gaps": len(info.gaps), "lost": info.lost})
    return rows


def _state(row: dict[str, Any]) -> str:
    """The stream's state (the API's word), and a note for a damaged source (what it lost is in ``--json``)."""
    return f"{row['state']} (damaged)" if row["lost"] else row["state"]


def _table(rows: list[dict[str, Any]], title: str) -> Table:
    from rich.table import Table

    table = Table(title=title, title_justify="left", header_style="bold")
    for name, justify in (("STREAM", "left"), ("STATE", "left"), ("FRAMES", "right"), ("DURATION", "right"),
                          ("FPS", "right"), ("SIZE", "right"), ("GAPS", "right"), ("SOURCE", "left")):
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for r in rows:
        table.add_row(r["stream"], _state(r), str(r["frames"]), f"{r['media_seconds']:.1f} s", f"{r['stored_fps']:g}",
                      r["size"], str(r["gaps"]), r["source"])
    return table


def streams(as_json: JsonOption = False,
            follow: Annotated[bool, typer.Option("--follow", "-f", help="Refresh the table every second until "
                                                 "Ctrl-C.")] = False,
            data: DataOption = None, config: ConfigOption = None, preset: PresetOption = None,
            verbose: VerboseOption = 0) -> int:
    """List the streams of a data directory."""
    from rich.console import Console

    settings = load(data, config, preset, verbose)
    if as_json:
        print(json.dumps(stream_rows(settings)))
        return 0
    console = Console(highlight=False)
    title = f"streams in {settings.data}"
    if not follow:
        rows = stream_rows(settings)
        if not rows:
            print(f"no streams in {settings.data}; add one with {ingest_hint('NAME')}")
        else:
            console.print(_table(rows, title))
        return 0
    from rich.live import Live

    with Live(_table(stream_rows(settings), title), console=console, auto_refresh=False) as live:
        while True:  # until Ctrl-C
            time.sleep(FOLLOW_SECONDS)
            live.update(_table(stream_rows(settings), title), refresh=True)

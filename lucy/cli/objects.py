"""``lucy objects``: the tracked objects of a stream (one per object followed over time, Frigate's events), read
from the data directory's store as ``lucy memory`` reads memory: a table, or JSON in the API's shape."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lucy.cli.common import (
    ConfigOption,
    DataOption,
    JsonOption,
    PresetOption,
    StreamOption,
    VerboseOption,
    clock,
    load,
    require_stream,
)
from lucy.errors import LucyError

if TYPE_CHECKING:
    from rich.table import Table

MAX_OBJECTS = 5000  # lucy.service.objects.MAX_OBJECTS (that module is loaded only when a command runs)


def _table(rows: list[dict[str, Any]], title: str) -> Table:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title, title_justify="left", header_style="bold")
    for name, justify in (("ID", "right"), ("LABEL", "left"), ("FIRST SEEN", "right"), ("LAST SEEN", "right"),
                          ("DWELL", "right"), ("IN → OUT", "left"), ("MOTION", "left"), ("SCORE", "right"),
                          ("ATTRIBUTES", "left")):
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for r in rows:
        attributes = ", ".join(f"{k} {v}" for k, v in sorted(r["attributes"].items()))
        way = f"{r['entered']} → {r['exited'] if r['exited'] is not None else '(still tracked)'}"
        # labels and attributes are data read from video: never rich markup
        motion = "moving" if r["moving"] else "stationary"
        table.add_row(str(r["id"]), escape(r["label"]), clock(r["first_seen"]), clock(r["last_seen"]),
                      f"{r['dwell']:.1f} s", escape(way), motion, f"{r['score']:.2f}", escape(attributes))
    return table


def objects(stream: StreamOption,
            label: Annotated[str | None, typer.Option(metavar="LABEL", show_default=False,
                                                      help="Only this label (person, car, dog, ...; vehicle: any "
                                                           "vehicle).")] = None,
            start: Annotated[float | None, typer.Option("--from", metavar="T", show_default=False,
                                                        help="Objects seen from media second T.")] = None,
            end: Annotated[float | None, typer.Option("--to", metavar="T", show_default=False,
                                                      help="Objects seen before media second T.")] = None,
            limit: Annotated[int, typer.Option(min=1, max=MAX_OBJECTS, help="At most this many (oldest first).")
                             ] = 1000,
            as_json: JsonOption = False, data: DataOption = None, config: ConfigOption = None,
            preset: PresetOption = None, verbose: VerboseOption = 0) -> int:
    """List the objects a stream's detect stage tracked (people, vehicles, animals...), oldest first."""
    from lucy.ingest import check_stream_name
    from lucy.service.errors import InvalidRequest, check_time_range
    from lucy.service.objects import check_label, objects_page
    from lucy.wiring import open_existing_memory

    settings = load(data, config, preset, verbose)
    check_stream_name(stream)
    try:
        wanted = check_label(label)
        check_time_range(start, end)
    except (ValueError, InvalidRequest) as err:
        raise LucyError(str(err).replace("from and to", "--from and --to")) from None
    require_stream(settings, stream)
    page: dict[str, Any] = {"stream": stream, "label": wanted, "start": start, "end": end, "objects": [],
                            "truncated": False}
    memory = open_existing_memory(settings)  # reading never creates a memory store
    if memory is not None:
        try:
            page = objects_page(memory, stream, label=wanted, start=start, end=end, limit=limit)
        finally:
            memory.close()
    if as_json:
        print(json.dumps(page))
        return 0
    rows = page["objects"]
    what = f"tracked objects labelled {wanted}" if wanted else "tracked objects"
    if not rows:
        print(f"{stream}: no {what}" + (" in that time" if start is not None or end is not None else "")
              + (f" (detect.backend is {settings.detect.backend})" if settings.detect.backend == "none" else ""))
        return 0
    from rich.console import Console

    more = f", first {limit} shown (--from a later time for more)" if page["truncated"] else ""
    Console(highlight=False).print(_table(rows, f"{what} in {stream}: {len(rows)}{more}"))
    return 0

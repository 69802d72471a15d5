"""``lucy memory`` and ``lucy search``: read a stream's memory (timeline, or the moments that match some words)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from lucy.cli.common import (
    ConfigOption,
    DataOption,
    JsonOption,
    PresetOption,
    StreamOption,
    VerboseOption,
    clock,
    ingest_hint,
    load,
    note,
    require_stream,
)
from lucy.config import LEVEL_NAMES_HELP
from lucy.errors import LucyError
from lucy.untrusted import normalise_question

if TYPE_CHECKING:
    from lucy.config import LucySettings

SPEECH_LEVEL = "speech"  # lucy.memory.transcribers.SPEECH_LEVEL, checked by a test (that module imports numpy)


def _memory_level(value: str | None) -> str | None:
    from lucy.config import check_level_name

    try:
        return None if value is None else check_level_name(value)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from None


def _search_level(value: str | None) -> str | None:
    return value if value == SPEECH_LEVEL else _memory_level(value)


def memory(stream: StreamOption,
           level: Annotated[str | None, typer.Option(callback=_memory_level, show_default=False,
                                                     help=f"{LEVEL_NAMES_HELP} (default: all).")] = None,
           start: Annotated[float | None, typer.Option("--from", metavar="T", show_default=False,
                                                       help="From media second T.")] = None,
           end: Annotated[float | None, typer.Option("--to", metavar="T", show_default=False,
                                                     help="Up to media second T.")] = None,
           as_json: JsonOption = False, data: DataOption = None, config: ConfigOption = None,
           preset: PresetOption = None, verbose: VerboseOption = 0) -> int:
    """Print the memory timeline of a stream."""
    from dataclasses import asdict

    from lucy.ingest import check_stream_name
    from lucy.wiring import open_existing_memory

    settings = load(data, config, preset, verbose)
    check_stream_name(stream)
    if start is not None and end is not None and end <= start:
        raise LucyError(f"--to ({end:g}) must be after --from ({start:g})")
    require_stream(settings, stream)
    nodes, until = [], 0.0
    memory = open_existing_memory(settings)  # reading never creates a memory store
    if memory is not None:
        try:
            nodes = memory.nodes(stream, level=level, start=start, end=end)
            until = memory.captioned_until(stream)
            has_memory = memory.count(stream) > 0
        finally:
            memory.close()
    else:
        has_memory = False
    if as_json:
        print(json.dumps({"stream": stream, "captioned_until": round(until, 3),
                          "nodes": [asdict(node) for node in nodes]}))
    else:
        print(f"{stream}: {len(nodes)} memory nodes; coarse captions cover 0-{until:.1f} s")
        for node in nodes:
            made = f"{node.origin}, {node.model}" if node.model else node.origin
            print(f"[{clock(node.start)} - {clock(node.end)}] {node.level} ({made})")
            for line in node.text.splitlines() or [""]:
                print(f"    {line}")
    if not has_memory:
        note(f"{stream} has frames but no memory yet: {ingest_hint(stream)} captions it (with a captioner other than "
             "none), and `lucy ask` captions what it needs")
    return 0


def _streams_to_search(settings: LucySettings, stream: str | None) -> list[str]:
    """The streams ``--stream`` names (``a,b``: some), each checked, or every stream of the data directory."""
    from lucy.cli.common import known_streams

    if stream is None:
        return sorted(known_streams(settings))
    names = [name.strip() for name in stream.split(",") if name.strip()]
    if not names:
        raise LucyError("--stream names no stream: give one, several as a,b, or leave it out to search them all")
    return [require_stream(settings, name) for name in dict.fromkeys(names)]


def _time_range(start: float | None, end: float | None, old_start: float | None,
                old_end: float | None) -> tuple[float | None, float | None]:
    """``--from``/``--to``, or their deprecated spellings ``--start``/``--end`` (the flags `lucy memory` has too)."""
    if old_start is not None or old_end is not None:
        note("--start/--end are now --from/--to, as in `lucy memory`; the old names will go")
    start = start if start is not None else old_start
    end = end if end is not None else old_end
    if start is not None and end is not None and end <= start:
        raise LucyError(f"--to ({end:g}) must be after --from ({start:g})")
    return start, end


def search(text: Annotated[str, typer.Argument(metavar="TEXT", show_default=False,
                                                   help="What to look for, in your own words.")],
           stream: Annotated[str | None, typer.Option(
               "--stream", metavar="NAME[,NAME...]", show_default=False,
               help="Search these streams (default: every stream).")] = None,
           level: Annotated[str | None, typer.Option(callback=_search_level, show_default=False,
                                                     help=f"{LEVEL_NAMES_HELP}; {SPEECH_LEVEL} for what was said "
                                                          "(default: all).")] = None,
           start: Annotated[float | None, typer.Option("--from", metavar="T", show_default=False,
                                                       help="From media second T.")] = None,
           end: Annotated[float | None, typer.Option("--to", metavar="T", show_default=False,
                                                     help="Up to media second T.")] = None,
           old_start: Annotated[float | None, typer.Option("--start", hidden=True)] = None,  # deprecated: --from
           old_end: Annotated[float | None, typer.Option("--end", hidden=True)] = None,  # deprecated: --to
           limit: Annotated[int, typer.Option(min=1, max=100, metavar="N",
                                              help="At most N matches (1-100).")] = 20,
           as_json: Annotated[bool, typer.Option("--json", help="Print the matches as one JSON list.")] = False,
           data: DataOption = None, config: ConfigOption = None, preset: PresetOption = None,
           verbose: VerboseOption = 0) -> int:
    """Find the moments of memory that match some words (and their meaning): one per time span, best first, each with
    the line that matched; none when nothing matches well."""
    from lucy.memory.embedders import make_embedder
    from lucy.memory.nodes import INGEST_ORIGIN
    from lucy.memory.retrieval import MemoryIndex
    from lucy.wiring import open_existing_memory

    settings = load(data, config, preset, verbose)
    text = normalise_question(text, what="search text")[0]  # InputError when empty once normalised
    start, end = _time_range(start, end, old_start, old_end)
    streams = _streams_to_search(settings, stream)
    where = ", ".join(streams) if len(streams) <= 3 else f"{len(streams)} streams"
    hits, mode = [], "words only: no memory yet"
    memory = open_existing_memory(settings)  # reading never creates a memory store
    try:
        if memory is not None and streams:
            embedder = make_embedder(settings)
            if embedder is not None:
                mode = "words + meaning"  # which model is configuration, not news: `lucy config` says it
            elif settings.embedder.backend == "none":
                mode = "words only: embedder.backend is 'none'"
            else:  # make_embedder logged why
                mode = f"words only: the {settings.embedder.backend} embedder cannot run on this machine"
            try:
                hits = MemoryIndex(memory, embedder).search_streams(streams, text, level=level, start=start, end=end,
                                                                    limit=limit)
            finally:
                if embedder is not None:
                    embedder.close()
        empty = [name for name in streams if memory is None or memory.count(name) == 0]
    finally:
        if memory is not None:
            memory.close()
    if as_json:
        print(json.dumps([{"stream": h.node.stream, "level": h.node.level, "start": h.node.start,
                           "end": h.node.end, "text": h.node.text, "snippet": h.snippet, "score": round(h.score, 4),
                           "lexical_rank": h.lexical_rank, "semantic_rank": h.semantic_rank,
                           "similarity": h.similarity, "node_id": h.node.id, "origin": h.node.origin} for h in hits]))
    else:
        if hits:
            print(f"{where}: {len(hits)} {'match' if len(hits) == 1 else 'matches'} for {text!r}")
        else:
            print(f"{where or 'no streams'}: no good match for {text!r}")
        print(f"searched by {mode}")
        if not streams:  # nothing to be close to: not a matter of other words
            print(f"{settings.data} holds no stream yet: {ingest_hint('NAME')} makes one")
        elif not hits:
            look = f"`lucy memory --stream {streams[0]}`" if len(streams) == 1 else "`lucy memory --stream NAME`"
            print(f"nothing in memory is close enough to show; try other words or {look}")
        for hit in hits:
            node = hit.node
            made = "" if node.origin == INGEST_ORIGIN else f", {node.origin}"
            which = f"{node.stream} " if len(streams) > 1 else ""
            print(f"{which}[{clock(node.start)} - {clock(node.end)}] {node.level}{made}  score {hit.score:.2f}")
            print(f"    {_shorten(hit.snippet)}")
    for name in empty:
        note(f"{name} has no memory yet: {ingest_hint(name)} captions it")
    return 0


def _shorten(line: str, width: int = 200) -> str:
    import textwrap

    return textwrap.shorten(line, width, placeholder=" …") if len(line) > width else line

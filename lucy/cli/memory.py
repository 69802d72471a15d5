"""``lucy memory`` and ``lucy search``: read a stream's memory (timeline, or the moments that match some words)."""

from __future__ import annotations

import json
from typing import Annotated

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

SEARCH_LINES = 3  # lines of a caption `lucy search` shows per hit (those with the query's words)
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
    from lucy.memory.sqlite_store import open_existing_memory

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


def _excerpt(text: str, query: str, lines: int, width: int = 100) -> list[str]:
    """At most ``lines`` lines of ``text``, each cut to ``width`` characters: those with the most words of
    ``query`` (the first lines when none has one), in their order, and a line saying how many were left out."""
    import re
    import textwrap

    words = {w for w in re.findall(r"\w+", query.lower()) if len(w) >= 4 or any(c.isdigit() for c in w)}
    all_lines = [line.strip() for line in text.splitlines() if line.strip()] or [""]
    found = [sum(w in line.lower() for w in words) for line in all_lines]
    best = sorted(range(len(all_lines)), key=lambda i: (-found[i], i))[:lines]
    chosen = sorted(i for i in best if found[i]) or list(range(min(lines, len(all_lines))))
    out = [textwrap.shorten(all_lines[i], width, placeholder=" …") for i in chosen]
    if len(all_lines) > len(chosen):
        out.append(f"… {len(all_lines) - len(chosen)} more lines")
    return out


def search(text: Annotated[str, typer.Argument(metavar="TEXT", show_default=False,
                                                   help="What to look for, in your own words.")],
           stream: StreamOption,
           level: Annotated[str | None, typer.Option(callback=_search_level, show_default=False,
                                                     help=f"{LEVEL_NAMES_HELP}; {SPEECH_LEVEL} for what was said "
                                                          "(default: all).")] = None,
           start: Annotated[float | None, typer.Option(metavar="T", show_default=False,
                                                       help="From media second T.")] = None,
           end: Annotated[float | None, typer.Option(metavar="T", show_default=False,
                                                     help="Up to media second T.")] = None,
           limit: Annotated[int, typer.Option(min=1, max=100, metavar="N",
                                              help="At most N matches (1-100).")] = 20,
           as_json: Annotated[bool, typer.Option("--json", help="Print the matches as one JSON list.")] = False,
           data: DataOption = None, config: ConfigOption = None, preset: PresetOption = None,
           verbose: VerboseOption = 0) -> int:
    """Find the moments of a stream's memory that match some words (and their meaning)."""
    from lucy.ingest import check_stream_name
    from lucy.memory.embedders import make_embedder
    from lucy.memory.nodes import INGEST_ORIGIN
    from lucy.memory.retrieval import MemoryIndex
    from lucy.memory.sqlite_store import open_existing_memory

    settings = load(data, config, preset, verbose)
    check_stream_name(stream)
    text = normalise_question(text, what="search text")[0]  # InputError when empty once normalised
    if start is not None and end is not None and end <= start:
        raise LucyError(f"--end ({end:g}) must be after --start ({start:g})")
    require_stream(settings, stream)
    hits, mode = [], "words only: the stream has no memory yet"
    memory = open_existing_memory(settings)  # reading never creates a memory store
    try:
        if memory is not None:
            embedder = make_embedder(settings)
            if embedder is not None:
                mode = f"words + meaning ({embedder.name} {embedder.model})"
            elif settings.embedder.backend == "none":
                mode = "words only: embedder.backend is 'none'"
            else:  # make_embedder logged why
                mode = f"words only: the {settings.embedder.backend} embedder cannot run on this machine"
            try:
                hits = MemoryIndex(memory, embedder).search(stream, text, level=level, start=start, end=end,
                                                            limit=limit)
            finally:
                if embedder is not None:
                    embedder.close()
        has_memory = memory is not None and memory.count(stream) > 0
    finally:
        if memory is not None:
            memory.close()
    if as_json:
        print(json.dumps([{"stream": h.node.stream, "level": h.node.level, "start": h.node.start,
                           "end": h.node.end, "text": h.node.text, "score": h.score, "lexical_rank": h.lexical_rank,
                           "semantic_rank": h.semantic_rank, "similarity": h.similarity, "node_id": h.node.id,
                           "origin": h.node.origin} for h in hits]))
    else:
        print(f"{stream}: {len(hits)} {'match' if len(hits) == 1 else 'matches'} for {text!r}")
        print(f"searched by {mode}")
        if not hits:
            print(f"no memory matches; try other words or `lucy memory --stream {stream}`")
        for hit in hits:
            node = hit.node
            made = "" if node.origin == INGEST_ORIGIN else f", {node.origin}"
            print(f"[{clock(node.start)} - {clock(node.end)}] {node.level}{made}  score {hit.score:.3f}")
            for line in _excerpt(node.text, text, SEARCH_LINES):
                print(f"    {line}")
    if not has_memory:
        note(f"{stream} has no memory yet: {ingest_hint(stream)} captions it")
    return 0

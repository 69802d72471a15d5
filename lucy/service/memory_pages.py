"""What the memory routes show: a page of a stream's memory nodes, the nodes that match a search (with a link to
the frame of each), and a stored frame as a JPEG.

Blocking (memory store and frame store I/O): call in a worker thread.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import numpy as np

from lucy.errors import StoreError
from lucy.runtime.events import node_json
from lucy.service.errors import NotFound
from lucy.service.state import Service


def memory_page(svc: Service, name: str, *, level: str | None, start: float, end: float | None, limit: int,
                latest: bool) -> dict[str, Any]:
    """Nodes overlapping ``[start, end)``: the first ``limit`` (or, with ``latest``, the last), and whether there
    were more. One more than ``limit`` is read (in SQL, never the whole range) to tell."""
    nodes = [node_json(n) for n in svc.memory.nodes(name, level=level, start=start, end=end, limit=limit + 1,
                                                     latest=latest)]
    truncated = len(nodes) > limit
    nodes = nodes[-limit:] if latest else nodes[:limit]
    return {"stream": name, "level": level, "start": start, "end": end, "nodes": nodes, "truncated": truncated}


def search_page(svc: Service, names: list[str], query: str, *, level: str | None, start: float | None,
                end: float | None, limit: int) -> dict[str, Any]:
    """The memory nodes of the streams ``names`` that match ``query`` well enough (by words, and by meaning when the
    server has an embedder; see :data:`lucy.memory.retrieval.RELEVANCE_FLOOR`), best first, one per time span, each
    with the line that matched and the URL of its frame at its middle time. ``no_match``: none is close enough."""
    hits = svc.index.search_streams(names, query, level=level, start=start, end=end, limit=limit)
    frame_at = {name: frame_urls(svc, name) for name in {h.node.stream for h in hits}}
    return {"stream": names[0] if len(names) == 1 else None, "streams": names, "query": query,
            "semantic": svc.index.available, "no_match": not hits,
            "hits": [{"stream": h.node.stream, "node_id": h.node.id, "level": h.node.level, "start": h.node.start,
                      "end": h.node.end, "text": h.node.text, "snippet": h.snippet, "origin": h.node.origin,
                      "score": round(h.score, 4), "lexical_rank": h.lexical_rank, "semantic_rank": h.semantic_rank,
                      "similarity": h.similarity,
                      "frame_url": frame_at[h.node.stream]((h.node.start + h.node.end) / 2)} for h in hits]}


def frame_urls(svc: Service, name: str) -> Callable[[float], str | None]:
    """A function of a media time: the frames endpoint's URL for it, or None when :func:`frame_jpeg` would find
    no frame (no video stored, retention deleted it, not ingested yet)."""
    try:
        store = svc.reader(name)
        times = store.times()
        first, last = (float(times[0]), float(times[-1]) + 1.0 / store.info().stored_fps) if len(times) else (0, -1)
        first = max(first, store.available_from())
    except (NotFound, StoreError):
        first, last = 0.0, -1.0
    base = f"/v1/streams/{quote(name, safe='')}/frames?t="
    return lambda t: f"{base}{t:.3f}" if first <= t <= last else None


def frame_jpeg(svc: Service, name: str, t: float, width: int | None) -> tuple[bytes, float]:
    """The stored frame shown at media time ``t`` (the last one at or before it), as a JPEG scaled to ``width``,
    with the time it was shown at."""
    from PIL import Image

    store = svc.reader(name)
    times = store.times()
    if len(times) == 0:
        raise NotFound(f"stream {name!r} has no frames yet")
    info_end = float(times[-1]) + 1.0 / store.info().stored_fps
    if t > info_end:
        raise NotFound(f"no frame at {t:g} s: stream {name!r} is ingested up to {info_end:.3f} s")
    expired = store.available_from()
    if t < expired:  # the oldest frame kept is another moment: say so rather than show it
        raise NotFound(f"no frame at {t:g} s: frames before {expired:g} s have expired (retention)")
    i = max(0, int(np.searchsorted(times, t, side="right")) - 1)
    shown = float(times[i])
    clip = store.read(shown, shown + 1e-6)
    if len(clip) == 0:
        raise NotFound(f"no frame at {t:g} s")
    image = Image.fromarray(clip.frames[0])
    if width is not None and width != image.width:
        image = image.resize((width, max(1, round(image.height * width / image.width))))
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=85)
    return out.getvalue(), shown

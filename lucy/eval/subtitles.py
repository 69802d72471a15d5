"""Video-MME's subtitle files (``subtitle/<videoID>.srt``) as Lucy's speech memory.

Video-MME is reported with and without subtitles. With them, each video's subtitle lines are stored the way Lucy
stores what its transcriber heard: one node of level ``speech`` per coarse span, one ``[start-end s] words`` line
per subtitle, so questions read them beside the captions of their span. The stream's transcriber is then off
(the subtitles are its transcript).
"""

from __future__ import annotations

import re
from pathlib import Path

from lucy.memory.nodes import INGEST_ORIGIN, MemoryNode
from lucy.memory.store import MemoryStore
from lucy.memory.transcribers import SPEECH_LEVEL, TranscriptLine, format_transcript

_TIME = re.compile(r"(\d+):(\d{2}):(\d{2})[,.](\d{1,3})\s*-->\s*(\d+):(\d{2}):(\d{2})[,.](\d{1,3})")
_TAG = re.compile(r"<[^>]+>")


def read_srt(path: Path) -> list[TranscriptLine]:
    """The lines of an SRT file (markup such as ``<font ...>`` removed), in time order."""
    lines = []
    for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8", errors="replace").replace("\r", "")):
        match = _TIME.search(block)
        if not match:
            continue
        g = [int(x) for x in match.groups()]
        start = g[0] * 3600 + g[1] * 60 + g[2] + g[3] / 1000
        end = g[4] * 3600 + g[5] * 60 + g[6] + g[7] / 1000
        text = " ".join(_TAG.sub("", line).strip() for line in block[match.end():].splitlines()).strip()
        if text:
            lines.append(TranscriptLine(start, max(start, end), text))
    return sorted(lines, key=lambda line: line.start)


def find_subtitles(folder: Path, video: str) -> Path | None:
    for name in (f"{video}.srt", f"{Path(video).stem}.srt"):
        if (folder / name).is_file():
            return folder / name
    return None


def store_subtitles(memory: MemoryStore, stream: str, lines: list[TranscriptLine], *, span_seconds: float,
                    media_seconds: float) -> int:
    """Store ``lines`` as speech nodes of ``stream``, one per coarse span (as the transcriber would); the count."""
    nodes = []
    start = 0.0
    while start < media_seconds:
        end = min(start + span_seconds, media_seconds)
        inside = [line for line in lines if start <= line.start < end]
        nodes.append(MemoryNode(stream=stream, level=SPEECH_LEVEL, start=start, end=end,
                                text=format_transcript(inside), origin=INGEST_ORIGIN, model="subtitles"))
        start = end
    return len(memory.add_many(nodes))

"""Where a stream's recordings lie and what they hold, read from their file names alone (no PyAV).

The index of :mod:`lucy.ingest.recording`'s segments: ``<data>/recordings/<stream>/<start>-<end>.mp4`` for a
closed segment (media seconds of its first picture and of the end of its last one, fixed width so that names sort by
time) and ``<start>.mp4.part`` for the one being written. Retention, clips, the review page and a purge read it; the
server process uses it without loading the decoder, which only the stream workers need.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from lucy.ingest.frames import check_stream_name

RECORDINGS_DIR = "recordings"
PART_SUFFIX = ".part"
_NAME = re.compile(r"^(-?\d+\.\d{3})-(-?\d+\.\d{3})\.mp4$")
PART_NAME = re.compile(r"^(-?\d+\.\d{3})\.mp4\.part$")


def recordings_root(data: str | Path) -> Path:
    """``<data>/recordings``: one folder per recorded stream."""
    return Path(data) / RECORDINGS_DIR


def recordings_dir(data: str | Path, stream: str) -> Path:
    """The folder of one stream's segments (the name is checked: it becomes a folder name)."""
    return recordings_root(data) / check_stream_name(stream)


def segment_name(start: float, end: float) -> str:
    """A closed segment's file name: its media start and end, fixed width so that names sort by time."""
    return f"{start:012.3f}-{end:012.3f}.mp4"


@dataclass(frozen=True, slots=True)
class Segment:
    """One recorded file: pictures (and sound) from media time ``start`` to ``end`` (None: still being written)."""

    path: Path
    start: float
    end: float | None
    size: int

    @property
    def open(self) -> bool:
        return self.end is None


def list_segments(data: str | Path, stream: str, *, include_open: bool = False) -> list[Segment]:
    """A stream's segments in time order, read from the file names alone; with ``include_open`` the one being
    written too (readable up to its last fragment)."""
    folder = recordings_dir(data, stream)
    out = []
    try:
        entries = list(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    for path in entries:
        closed, part = _NAME.match(path.name), PART_NAME.match(path.name) if include_open else None
        if closed is None and part is None:
            continue
        try:
            size = path.stat().st_size
        except FileNotFoundError:  # deleted or renamed meanwhile
            continue
        if closed is not None:
            out.append(Segment(path, float(closed.group(1)), float(closed.group(2)), size))
        elif part is not None:
            out.append(Segment(path, float(part.group(1)), None, size))
    return sorted(out, key=lambda s: (s.start, s.end is None))


def recorded_bytes(data: str | Path, stream: str) -> int:
    """Bytes a stream's segments take (closed and open)."""
    return sum(s.size for s in list_segments(data, stream, include_open=True))


def delete_recordings(data: str | Path, stream: str) -> bool:
    """Delete a stream's recordings (with the stream, ``purge``); False if it had none."""
    folder = recordings_dir(data, stream)
    if not folder.is_dir() or folder.is_symlink():
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return True

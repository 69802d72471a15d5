"""Keep local sources inside ``service.allowed_source_roots``, also after FFmpeg expands them.

Why a module of its own: checking the path of a source is not enough. FFmpeg reads an HLS playlist (``.m3u8``)
or a concat list (``ffconcat``) and then opens every file the list names, nested playlists, keys and init
segments included. A list inside an allowed folder could so make the server read a video outside it, by an
absolute path, a ``../`` path or a symlink, or fetch a URL. Here such lists are read the way FFmpeg reads them
and every entry is resolved (symlinks included) and checked before FFmpeg is given the source. The check runs
twice: in the API, so a bad request is refused with a clear error, and again when the ingest opens the file,
so a file swapped after the API check is refused too. As a second wall, local files are opened with FFmpeg
options that forbid every network protocol (:data:`LOCAL_FILE_OPTIONS`).

Lists are recognised by their content, not their name: a file called ``video.mp4`` that holds a playlist is
still a playlist to FFmpeg. DASH manifests and SDP files, which also make FFmpeg open other resources, are
refused outright when roots are set (Lucy does not read their entries).

What this cannot do: FFmpeg opens the segments of a playlist while it plays it, so an entry replaced by a
symlink *after* the ingest's check is read from wherever it points. Keep the allowed folders writable only by
those trusted to choose sources.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from lucy.errors import SourceError
from lucy.redaction import redact_url

# FFmpeg options for local files when roots are set: FFmpeg refuses any other protocol (http, tcp, concat:...)
# even if something slipped past the list check. "crypto" serves HLS AES-128 segments, "data" inline data.
LOCAL_FILE_OPTIONS = {"protocol_whitelist": "file,crypto,data"}

_HEAD_BYTES = 4096  # enough to tell a list from media
_MAX_LIST_BYTES = 16 << 20  # a day of 2-second HLS segments is ~3 MB of playlist
_MAX_ENTRIES = 200_000  # over all lists of one source
_MAX_DEPTH = 8  # lists naming lists (an HLS master names variants; concat lists may nest)
_ROOTS_SETTING = "service.allowed_source_roots"
# What FFmpeg reads as a protocol prefix ("http:", "crypto+file:", "data:", "subfile,,...:"): an entry like
# that is a URL, never a plain local file.
_URL_PREFIX = re.compile(r"^(?:[A-Za-z0-9+.-]+:|subfile,)")
# HLS attributes naming resources: #EXT-X-KEY, #EXT-X-MAP, #EXT-X-MEDIA, #EXT-X-I-FRAME-STREAM-INF... (URI=).
_HLS_URI = re.compile(r'URI\s*=\s*(?:"([^"]*)"|([^,\s]*))', re.IGNORECASE)
_CONCAT_SPACE = " \t\r\n"


@dataclass
class _Walk:
    """State of one check: the roots, the names already checked and the number of entries seen."""

    roots: list[Path]
    checked: set[str] = field(default_factory=set)  # by the name FFmpeg opens a file by (see _check_file)
    entries: int = 0


def resolve_roots(roots: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The allowed folders as absolute paths with symlinks resolved (what resolved sources are compared with)."""
    return [Path(r).resolve() for r in roots]


def inside_roots(path: Path, roots: Sequence[Path]) -> bool:
    """``path`` (already resolved) lies in one of ``roots`` (already resolved)."""
    return any(path.is_relative_to(root) for root in roots)


def check_local_source(path: str | os.PathLike[str], roots: Iterable[str | os.PathLike[str]]) -> Path:
    """Refuse a local source that is, or names through a playlist or concat list, a file outside ``roots``.

    Returns the resolved path of the source: give FFmpeg that name (with :data:`LOCAL_FILE_OPTIONS`), so that
    relative entries are read from the folder that was checked. Raises :class:`SourceError` naming the
    offending entry (credentials redacted). With no roots, nothing is checked and the path is returned resolved.
    """
    resolved_roots = resolve_roots(roots)
    real = Path(path).resolve()
    if not resolved_roots:
        return real
    walk = _Walk(resolved_roots)
    shown = redact_url(str(path))
    if not inside_roots(real, walk.roots):
        raise SourceError(f"{shown} is outside the directories this server may read ({_ROOTS_SETTING})")
    _check_file(walk, shown, str(real), real, depth=0)
    return real


def _check_file(walk: _Walk, shown: str, name: str, real: Path, depth: int) -> None:
    """Check one file inside the roots, which FFmpeg opens as ``name``: if it is a list, check its entries.

    FFmpeg resolves a list's relative entries against the name it opened the list by (lexically, without
    following symlinks), so one file reached by two names is checked under each.
    """
    if name in walk.checked:
        return  # named twice (or a list naming itself): checked once is enough
    walk.checked.add(name)
    if not real.exists():
        raise SourceError(f"{shown} does not exist")
    if not real.is_file():
        # A FIFO or device would block FFmpeg or feed it endless data; a folder is no video.
        raise SourceError(f"{shown} is not a regular file")
    kind, start = _sniff(real)
    if kind is None:
        return
    if kind in ("dash", "sdp"):
        what = "a DASH manifest" if kind == "dash" else "an SDP description"
        raise SourceError(f"{shown} is {what}, which makes FFmpeg open other resources; such sources are not "
                          f"accepted while {_ROOTS_SETTING} is set")
    if depth >= _MAX_DEPTH:
        raise SourceError(f"{shown}: playlists nested more than {_MAX_DEPTH} deep")
    text = _read_list(real, shown, start)
    entries = _hls_entries(text) if kind == "hls" else _concat_entries(text, shown)
    base = os.path.dirname(name)
    for entry in entries:
        walk.entries += 1
        if walk.entries > _MAX_ENTRIES:
            raise SourceError(f"{shown} names more than {_MAX_ENTRIES:,} files in all")
        _check_entry(walk, shown, base, entry, depth)


def _check_entry(walk: _Walk, list_shown: str, base: str, entry: str, depth: int) -> None:
    entry_shown = redact_url(entry)
    if _URL_PREFIX.match(entry):
        raise SourceError(f"{list_shown} names {entry_shown!r}, a URL: while {_ROOTS_SETTING} is set, playlists "
                          f"and concat lists may only name local files inside those directories")
    joined = entry if entry.startswith("/") else f"{base}/{entry}"
    name = os.path.normpath(joined)  # FFmpeg removes "." and ".." segments from the name itself
    real = Path(name).resolve()
    outside = (f"{list_shown} names {entry_shown!r}, which is outside the directories this server may read "
               f"({_ROOTS_SETTING})")
    if not inside_roots(real, walk.roots):
        raise SourceError(outside)
    # Should FFmpeg leave ".." to the operating system, "dir/../x" goes through dir's symlink target instead:
    # both readings must name the same file.
    if Path(joined).resolve() != real:
        raise SourceError(f"{list_shown} names {entry_shown!r}, whose '..' passes through a symlink; name the "
                          f"file directly")
    _check_file(walk, f"{list_shown} -> {entry_shown}", name, real, depth + 1)


def _id3_end(f: BinaryIO) -> int:
    """Where the ID3v2 tags at the start of a file end (0 if it has none).

    FFmpeg skips such tags when it probes a file's format: a playlist behind one is read as a playlist here too.
    """
    offset = 0
    while True:
        f.seek(offset)
        header = f.read(10)
        if len(header) < 10 or header[:3] != b"ID3" or 0xFF in header[3:5] or any(b & 0x80 for b in header[6:]):
            return offset
        size = (header[6] << 21) | (header[7] << 14) | (header[8] << 7) | header[9]
        offset += 10 + size + (10 if header[5] & 0x10 else 0)  # header, tag, footer


def _sniff(path: Path) -> tuple[str | None, int]:
    """``(kind, start)``: ``"hls"``, ``"concat"``, ``"dash"`` or ``"sdp"`` for a text file FFmpeg would expand,
    ``None`` for media; and where its text starts (after any ID3 tags).

    Erring towards "a list" is safe: a text file that is no list has no entries to refuse, or fails to parse as
    video anyway.
    """
    try:
        with open(path, "rb") as f:
            start = _id3_end(f)
            f.seek(start)
            head = f.read(_HEAD_BYTES)
    except OSError as err:
        raise SourceError(f"cannot read {redact_url(str(path))}: {err.strerror}") from None
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    # What FFmpeg's probes look for first: these never begin a media file.
    if text.startswith("#EXTM3U"):
        return "hls", start
    if text.startswith("ffconcat"):
        return "concat", start
    if b"\0" in head:
        return None, start  # binary: media (text lists hold no NUL bytes)
    if re.search(r"^#EXT-X-", text, re.MULTILINE):
        return "hls", start
    if re.search(r"^[ \t]*file[ \t]", text, re.MULTILINE):
        return "concat", start
    if "<MPD" in text:
        return "dash", start
    if re.match(r"v=0\s*$", text.splitlines()[0] if text else ""):
        return "sdp", start
    return None, start


def _read_list(path: Path, shown: str, start: int) -> str:
    size = path.stat().st_size - start
    if size > _MAX_LIST_BYTES:
        raise SourceError(f"{shown} is a playlist of {size:,} bytes, more than the {_MAX_LIST_BYTES:,} this "
                          f"server checks")
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(_MAX_LIST_BYTES + 1).decode("utf-8", errors="replace")


def _hls_entries(text: str) -> list[str]:
    """Every resource an HLS playlist names: segment and variant lines, and URI= attributes of its tags."""
    entries = []
    for line in text.splitlines():
        line = line.rstrip()  # FFmpeg strips trailing whitespace only
        if not line:
            continue
        if line.startswith("#"):
            if line.startswith("#EXT"):
                entries += [quoted or bare for quoted, bare in _HLS_URI.findall(line) if quoted or bare]
            continue
        entries.append(line)
    return entries


def _concat_entries(text: str, shown: str) -> list[str]:
    """The files an FFmpeg concat list names (``file`` directives), unquoted as FFmpeg unquotes them."""
    entries = []
    for line in text.splitlines():
        rest = line.lstrip(_CONCAT_SPACE)
        parts = rest.split(maxsplit=1)
        keyword = parts[0] if parts else ""
        if not keyword or keyword.startswith("#"):
            continue
        if keyword == "option":
            # Per-file demuxer options could change how an entry is read (its format, its protocols).
            raise SourceError(f"{shown}: concat lists with 'option' lines are not accepted while "
                              f"{_ROOTS_SETTING} is set")
        if keyword == "file":
            name = _ffmpeg_token(rest[len(keyword):])
            if name:
                entries.append(name)
    return entries


def _ffmpeg_token(text: str) -> str:
    """One token as FFmpeg's ``av_get_token`` reads it: '...' quotes, backslash escapes, ends at a space."""
    out: list[str] = []
    end = 0  # length of out up to the last quoted or escaped character (trailing spaces after it are kept)
    i = 0
    while i < len(text) and text[i] in _CONCAT_SPACE:
        i += 1
    while i < len(text) and text[i] not in _CONCAT_SPACE:
        c = text[i]
        i += 1
        if c == "\\" and i < len(text):
            out.append(text[i])
            i += 1
            end = len(out)
        elif c == "'":
            while i < len(text) and text[i] != "'":
                out.append(text[i])
                i += 1
            if i < len(text):
                i += 1
                end = len(out)
        else:
            out.append(c)
    token = "".join(out)
    return token[:end] + token[end:].rstrip(_CONCAT_SPACE)

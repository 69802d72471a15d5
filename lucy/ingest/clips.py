"""Clips: a playable MP4 of one stream between two media times, for people to watch (an answer's evidence, an alert).

:func:`make_clip` makes them for ``lucy clip``, and :class:`ClipCache` for ``GET /v1/streams/{name}/clip`` (the same
clip, kept to serve again while its footage stays the same). Either takes the best footage the data directory has,
in this order:

1. **the recording** (:mod:`lucy.ingest.recording`): the segments that overlap the period, re-muxed without
   re-encoding from the last keyframe at or before ``start`` to ``end``; the pictures before ``start`` get negative
   times, which an MP4 edit list keeps out of view, so the clip plays from ``start`` exactly;
2. **the source file**, for a stream made from a file that is still where it was (a file is its own recording):
   cut the same way;
3. **the stored frames** (a few per second), encoded at their own rate (libx264, or FFmpeg's mpeg4 where there is
   no libx264; yuv420p, which every browser plays).

Bad requests are :class:`ClipRangeError` (an :class:`lucy.errors.InputError`: 422 in the API, one line in the CLI);
an unknown stream or a period with nothing stored is :class:`lucy.errors.StreamNotFound` (404). PyAV is imported
when a clip is made, so :func:`clip_url` costs nothing to import.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote

from lucy.errors import InputError, StoreError, StreamNotFound
from lucy.ingest.frames import FrameStore, FrameStores, StreamInfo, check_stream_name
from lucy.ingest.segments import Segment, list_segments

if TYPE_CHECKING:
    import av

ClipOrigin = Literal["recording", "source", "frames"]
_FRAMES_CODECS = ("libx264", "mpeg4")  # for clips encoded from stored frames, the first one FFmpeg has
_VOLUME_SHARE = 20  # kept clips take at most 1/20 of the data volume


class ClipRangeError(InputError):
    """The period asked for cannot be a clip: ``to`` not after ``from``, a negative time, or longer than
    ``recording.max_clip_seconds``."""


def clip_url(stream: str, start: float, end: float) -> str:
    """The API path of a stream's clip (what answers' evidence and alerts link to; GET it with the API token). A span
    shorter than a second (an instant) is widened to one, so that the link always names a clip."""
    return f"/v1/streams/{quote(stream, safe='')}/clip?from={_seconds(start)}&to={_seconds(max(end, start + 1.0))}"


def _seconds(t: float) -> str:
    return f"{max(t, 0.0):.3f}".rstrip("0").rstrip(".") or "0"


def clip_filename(stream: str, start: float, end: float) -> str:
    """The file name a clip is offered under (``door_65-125s.mp4``)."""
    return f"{stream}_{_seconds(start)}-{_seconds(end)}s.mp4"


def check_range(start: float, end: float, max_seconds: float) -> None:
    """Refuse a period that cannot be a clip, with one line that says why."""
    if not (math.isfinite(start) and math.isfinite(end)):
        raise ClipRangeError("from and to must be numbers of media seconds")
    if start < 0:
        raise ClipRangeError(f"from ({start:g} s) must not be negative: media time starts at 0")
    if end <= start:
        raise ClipRangeError(f"to ({end:g} s) must be after from ({start:g} s)")
    if end - start > max_seconds:
        raise ClipRangeError(f"a clip is at most {max_seconds:g} s long (recording.max_clip_seconds); "
                             f"{end - start:g} s were asked for")


@dataclass(frozen=True)
class ClipResult:
    """A clip written to ``path``: media time ``start`` to ``end`` of the stream (what it holds: a clip cut from a
    recording that begins after the time asked for begins later), cut from ``origin``; offered as ``filename``
    (named by the period asked for)."""

    path: Path
    stream: str
    start: float
    end: float
    origin: ClipOrigin
    size: int
    filename: str


def make_clip(frames: FrameStores, data: str | Path, stream: str, start: float, end: float, out: Path, *,
              max_seconds: float) -> ClipResult:
    """Write the clip of ``stream`` from media time ``start`` to ``end`` to ``out`` (an MP4 file) from the best
    footage there is (see the module's docstring). Blocking: run it in a thread from async code."""
    return _Footage.of(frames, data, stream, start, end, max_seconds).clip(out)


@dataclass(slots=True)
class _Footage:
    """What a stream holds for a clip's period: its frame store, the recorded segments that overlap the period."""

    stream: str
    start: float
    end: float
    store: FrameStore
    info: StreamInfo
    segments: list[Segment]

    @classmethod
    def of(cls, frames: FrameStores, data: str | Path, stream: str, start: float, end: float,
           max_seconds: float) -> _Footage:
        check_range(start, end, max_seconds)
        try:
            check_stream_name(stream)
        except StoreError as err:
            raise ClipRangeError(str(err)) from None
        if not frames.exists(stream):
            raise StreamNotFound(f"no stream {stream!r} is stored here")
        store = frames.open(stream)
        segments = [s for s in list_segments(data, stream, include_open=True)
                    if s.start < end and (s.end is None or s.end > start)]
        return cls(stream, start, end, store, store.info(), segments)

    @property
    def source_file(self) -> Path | None:
        """The stream's source file, when it is one that is still where it was."""
        info = self.info
        if not info.live and os.path.isfile(info.source) and self.store.holds_source(info.source):
            return Path(info.source)
        return None

    def clip(self, out: Path) -> ClipResult:
        made: tuple[float, float] | None = None
        origin: ClipOrigin = "recording"
        if self.segments:
            made = _remux(_segment_packets(self.segments, self.start), self.start, self.end, out)
        if made is None and (source := self.source_file) is not None:
            origin = "source"
            made = _remux(_file_packets(source, self.start), self.start, self.end, out)
        if made is None:
            origin = "frames"
            made = _encode_frames(self.store, self.start, self.end, out)
        if made is None:
            info = self.info
            what = (f"it covers {info.first_time or 0.0:.1f}-{info.covered_seconds:.1f} s"
                    if info.last_time is not None else "it has no frames")
            raise StreamNotFound(f"stream {self.stream!r} has nothing stored from {self.start:g} to {self.end:g} s "
                                 f"({what})")
        return ClipResult(out, self.stream, made[0], made[1], origin, out.stat().st_size,
                          clip_filename(self.stream, self.start, self.end))

    def fingerprint(self) -> str | None:
        """A name for the clip this footage makes, which changes with anything that would change the clip (new
        segments, retention deleting or thinning frames, another source file, a stream made again); None while
        the period is not all in yet (ingest has not passed its end, or a segment of it is still being written)."""
        info = self.info
        if not (info.complete or self.end <= info.covered_seconds) or any(s.open for s in self.segments):
            return None
        source = self.source_file
        stat = source.stat() if source is not None else None
        parts = (self.stream, self.start, self.end, info.created, info.expired_before, info.thinned_before,
                 [(s.path.name, s.size, s.end) for s in self.segments],
                 (str(source), stat.st_size, stat.st_mtime_ns) if stat is not None else None)
        return hashlib.blake2b(repr(parts).encode(), digest_size=16).hexdigest()


class ClipCache:
    """Clips made before, kept as files in ``folder`` (``<data>/clips/<stream>/``): a browser asks for a clip again
    and again as it plays and seeks it (HTTP ranges), and an answer's evidence or an alert is watched more than once.

    Only a clip whose period is all in is kept, under a name that changes with its footage
    (:meth:`_Footage.fingerprint`): new footage, or retention deleting some, makes another clip. Beyond
    ``max_bytes`` the least recently served go first, and none is kept longer than ``max_age`` seconds, so footage
    that retention deleted is out of the cache within that time as well."""

    def __init__(self, folder: str | Path, *, max_bytes: int = 256 << 20, max_age: float = 3600.0) -> None:
        self.folder = Path(folder)
        self.max_bytes = max_bytes
        self.max_age = max_age
        self._lock = threading.Lock()

    def clip(self, frames: FrameStores, data: str | Path, stream: str, start: float, end: float, *,
             max_seconds: float, scratch: Path) -> tuple[ClipResult, bool]:
        """The clip of ``stream`` from ``start`` to ``end``: (the clip, whether it lies in the cache). A clip whose
        period is not all in is made into ``scratch`` (the caller's to delete) and not kept."""
        footage = _Footage.of(frames, data, stream, start, end, max_seconds)
        key = footage.fingerprint() if self.max_bytes > 0 else None
        if key is None:
            return footage.clip(scratch), False
        kept = self.folder / stream / f"{key}.mp4"
        meta = kept.with_suffix(".json")
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
            if time.time() - kept.stat().st_mtime < self.max_age:
                made = json.loads(meta.read_text())
                os.utime(meta)  # served: the last to go
                return ClipResult(kept, stream, made["start"], made["end"], made["origin"], kept.stat().st_size,
                                  clip_filename(stream, start, end)), True
        result = footage.clip(scratch)
        kept.parent.mkdir(parents=True, exist_ok=True)
        meta_tmp = meta.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        meta_tmp.write_text(json.dumps({"start": result.start, "end": result.end, "origin": result.origin}))
        os.replace(scratch, kept)  # both in place at once for a reader: the picture first, then what it holds
        os.replace(meta_tmp, meta)
        self._trim(keep=kept)
        return ClipResult(kept, stream, result.start, result.end, result.origin, result.size, result.filename), True

    def forget(self, stream: str) -> None:
        """Delete every clip kept of ``stream`` (it was purged)."""
        shutil.rmtree(self.folder / check_stream_name(stream), ignore_errors=True)

    def _trim(self, keep: Path) -> None:
        """Delete clips older than ``max_age``, then the least recently served beyond ``max_bytes`` or a twentieth
        of the volume, whichever is less (a small data disk is not filled with clips), never ``keep``, the one just
        made."""
        with self._lock:
            now = time.time()
            limit = min(self.max_bytes, shutil.disk_usage(self.folder).total // _VOLUME_SHARE)
            entries = []
            for path in self.folder.glob("*/*.mp4"):
                with contextlib.suppress(OSError):
                    meta = path.with_suffix(".json")
                    made, used = path.stat(), (meta.stat().st_mtime if meta.exists() else 0.0)
                    entries.append((used, path, made.st_size, made.st_mtime))
            held = 0
            for _, path, size, made_at in sorted(entries, reverse=True):  # most recently served first
                held += size
                if path != keep and (now - made_at >= self.max_age or held > limit):
                    for gone in (path, path.with_suffix(".json")):
                        gone.unlink(missing_ok=True)
                    held -= size


# ---------------------------------------------------------------------------------------- re-muxing

@dataclass(slots=True)
class _Timed:
    """A demuxed packet with its media time (pts and dts in media seconds) and its kind."""

    packet: av.Packet
    kind: str  # "video" or "audio"
    t: float  # presentation, media seconds
    shift: float  # media seconds = stream seconds + shift
    video: av.VideoStream | None
    audio: av.AudioStream | None


def _packets(container: av.container.InputContainer, shift: float | None, start: float,
             ) -> Iterator[_Timed]:
    """``container``'s packets of its first video and audio track, on the media clock: ``shift`` (media - file
    seconds), or, when None, the one that puts the first picture at ``start`` (a segment's name says where)."""
    import av.error

    video = container.streams.video[0] if container.streams.video else None
    audio = container.streams.audio[0] if container.streams.audio else None
    if audio is not None and audio.codec_context.name not in _mp4_audio():
        audio = None
    wanted = [s for s in (video, audio) if s is not None]
    if not wanted:
        return
    try:
        for packet in container.demux(*wanted):
            if packet.pts is None or packet.time_base is None or not packet.size:
                continue
            kind = "video" if video is not None and packet.stream.index == video.index else "audio"
            own = float(packet.pts * packet.time_base)
            if shift is None:
                if kind != "video" and video is not None:
                    continue  # sound before the segment's first picture
                shift = start - own
            yield _Timed(packet, kind, own + shift, shift, video, audio)
    except (av.error.FFmpegError, OSError):
        return  # a segment being written ends in a fragment not yet whole: what came before it counts


def _mp4_audio() -> frozenset[str]:
    from lucy.ingest.recording import MP4_AUDIO

    return MP4_AUDIO


def _segment_packets(segments: list, start: float) -> Iterator[_Timed]:
    """The packets of recorded segments, in time order, on the media clock."""
    import av
    import av.error

    for segment in segments:
        if segment.end is not None and segment.end <= start:
            continue
        try:
            container = av.open(str(segment.path), format="mp4")
        except (av.error.FFmpegError, OSError):
            continue  # deleted by retention meanwhile, or an open segment with no fragment yet
        with container:
            yield from _packets(container, None, segment.start)


def _file_packets(path: Path, start: float) -> Iterator[_Timed]:
    """The packets of a stream's source file from the keyframe before ``start`` on, on the media clock (as
    :class:`lucy.ingest.source.FileSource` sets it: media time 0 is the first picture's start time)."""
    import av
    import av.error

    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, OSError):
        return
    with container:
        main = container.streams.video[0] if container.streams.video else None
        if main is None:
            return
        first = float(main.start_time * main.time_base) if main.start_time is not None else 0.0
        if start > 1.0:
            try:
                container.seek(int((start + first - 1.0) / main.time_base), stream=main, backward=True)
            except av.error.FFmpegError:
                pass  # not seekable: demux from the start
        yield from _packets(container, -first, start)


def _remux(packets: Iterator[_Timed], start: float, end: float, out: Path) -> tuple[float, float] | None:
    """Write the packets from the last keyframe at or before ``start`` up to ``end`` into an MP4 at ``out``
    without re-encoding; returns the clip's ``(start, end)`` in media seconds, or None (nothing to write)."""
    import av
    import av.error

    held: list[_Timed] = []  # from the newest keyframe at or before start: where the clip will begin
    begun = False
    container: av.container.OutputContainer | None = None
    streams: dict[str, av.stream.Stream] = {}
    geometry: tuple[object, ...] = ()
    origin = 0.0  # media time of the clip's first decode time (its time 0)
    last_dts: dict[str, int] = {}
    reached = start
    written = 0

    def same_source(item: _Timed) -> bool:
        v = item.video
        return geometry == ((v.codec_context.name, v.codec_context.width, v.codec_context.height)
                            if v is not None else ())

    def write(item: _Timed) -> None:
        nonlocal container, origin, geometry, written, reached
        packet, tb = item.packet, item.packet.time_base
        if container is None:
            container = av.open(str(out), "w", format="mp4", options={"movflags": "+faststart"})
            if item.video is not None:
                streams["video"] = container.add_stream_from_template(item.video)
                v = item.video.codec_context
                geometry = (v.name, v.width, v.height)
            if item.audio is not None:
                streams["audio"] = container.add_stream_from_template(item.audio)
            dts = packet.dts if packet.dts is not None else packet.pts
            # The clip's time 0 is ``start``: the pictures from the keyframe before it get negative times, which
            # the MP4 muxer keeps out of view with an edit list (players decode them and show from ``start``, as
            # ``ffmpeg -ss`` with stream copy does). A recording that begins after ``start`` begins the clip.
            origin = max(start, float(dts * tb) + item.shift)
        target = streams.get(item.kind)
        if target is None:
            return
        dts = packet.dts if packet.dts is not None else packet.pts
        move = round((item.shift - origin) / tb)
        pts, dts = packet.pts + move, dts + move
        if item.kind == "audio" and pts < 0:
            return
        previous = last_dts.get(item.kind)
        if previous is not None and dts <= previous:
            if item.kind == "audio" or pts <= previous:
                return
            dts = previous + 1
        length = float(packet.duration * tb) if packet.duration else 0.0
        packet.pts, packet.dts = pts, dts
        packet.stream = target
        container.mux(packet)
        last_dts[item.kind] = dts
        written += 1
        reached = max(reached, item.t + length)

    try:
        for item in packets:
            packet = item.packet
            dts = packet.dts if packet.dts is not None else packet.pts
            dts_t = float(dts * packet.time_base) + item.shift
            if not begun:
                key = item.kind == "video" and packet.is_keyframe
                if key and item.t <= start:
                    held = [item]  # the newest keyframe at or before start: the clip begins there
                    continue
                if held:
                    held.append(item)
                    begun = item.kind == "video" and item.t > start
                elif key:
                    held, begun = [item], True  # nothing recorded before start: the first keyframe after it
                if begun:
                    for early in held:
                        write(early)
                    held = []
                continue
            if dts_t >= end:
                if item.kind == "video":
                    break
                continue
            if item.kind == "video" and packet.is_keyframe and not same_source(item):
                break  # the camera changed its pictures after a reconnect: the clip ends before it
            write(item)
    except (av.error.FFmpegError, OSError, ValueError):
        if container is not None:
            container.close()
        out.unlink(missing_ok=True)
        raise
    if container is None:
        return None
    container.close()
    if not written:
        out.unlink(missing_ok=True)
        return None
    return origin, reached


# ---------------------------------------------------------------------------------------- from stored frames

def _encode_frames(store: FrameStore, start: float, end: float, out: Path) -> tuple[float, float] | None:
    """Encode the stored frames in ``[start, end)`` at their own times into an MP4; None if there are none."""
    import av

    clip = store.read(start, end)
    if not len(clip):
        return None
    fps = store.info().stored_fps
    height, width = clip.frames.shape[1] // 2 * 2, clip.frames.shape[2] // 2 * 2  # yuv420p needs even sizes
    if not (width and height):
        return None
    codec = next((c for c in _FRAMES_CODECS if c in av.codecs_available), None)
    if codec is None:
        raise StoreError("FFmpeg has neither libx264 nor mpeg4: cannot make a clip from stored frames")
    origin = float(clip.times[0])
    tb = Fraction(1, 1000)
    packets: list[av.Packet] = []
    with av.open(str(out), "w", format="mp4", options={"movflags": "+faststart"}) as container:
        stream = container.add_stream(codec, rate=max(1, round(fps)))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.time_base = tb
        stream.codec_context.time_base = tb
        stream.codec_context.max_b_frames = 0  # packets in presentation order: each one's duration is known
        if codec == "libx264":
            stream.codec_context.options = {"preset": "veryfast", "crf": "23"}
        else:
            stream.codec_context.bit_rate = 2_000_000
        for picture, t in zip(clip.frames, clip.times, strict=True):
            frame = av.VideoFrame.from_ndarray(picture[:height, :width], format="rgb24")
            frame.pts, frame.time_base = round((float(t) - origin) / tb), tb
            packets.extend(stream.encode(frame))
        packets.extend(stream.encode(None))
        last = round((float(clip.times[-1]) - origin + 1.0 / fps) / tb)
        for packet, following in zip(packets, [*packets[1:], None], strict=True):
            assert packet.pts is not None
            packet.duration = (following.pts if following is not None and following.pts is not None else last) \
                - packet.pts
            container.mux(packet)
    return origin, float(clip.times[-1]) + 1.0 / fps

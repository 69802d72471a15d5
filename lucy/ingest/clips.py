"""Clips: a playable MP4 of one stream between two media times, for people to watch (an answer's evidence, an alert).

:func:`make_clip` is the one maker, used by ``GET /v1/streams/{name}/clip`` and ``lucy clip``. It takes the best
footage the data directory has, in this order:

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

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote

from lucy.errors import InputError, StoreError, StreamNotFound
from lucy.ingest.frames import FrameStore, FrameStores, check_stream_name

if TYPE_CHECKING:
    import av

ClipOrigin = Literal["recording", "source", "frames"]
_FRAMES_CODECS = ("libx264", "mpeg4")  # for clips encoded from stored frames, the first one FFmpeg has


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
    check_range(start, end, max_seconds)
    try:
        check_stream_name(stream)
    except StoreError as err:
        raise ClipRangeError(str(err)) from None
    if not frames.exists(stream):
        raise StreamNotFound(f"no stream {stream!r} is stored here")
    store = frames.open(stream)
    info = store.info()
    from lucy.ingest.segments import list_segments

    segments = [s for s in list_segments(data, stream, include_open=True)
                if s.start < end and (s.end is None or s.end > start)]
    made: tuple[float, float] | None = None
    origin: ClipOrigin = "recording"
    if segments:
        made = _remux(_segment_packets(segments, start), start, end, out)
    if made is None and not info.live and os.path.isfile(info.source) and store.holds_source(info.source):
        origin = "source"
        made = _remux(_file_packets(Path(info.source), start), start, end, out)
    if made is None:
        origin = "frames"
        made = _encode_frames(store, start, end, out)
    if made is None:
        covered = info.covered_seconds
        what = (f"it covers {info.first_time or 0.0:.1f}-{covered:.1f} s" if info.last_time is not None
                else "it has no frames")
        raise StreamNotFound(f"stream {stream!r} has nothing stored from {start:g} to {end:g} s ({what})")
    return ClipResult(out, stream, made[0], made[1], origin, out.stat().st_size, clip_filename(stream, start, end))


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

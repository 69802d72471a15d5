"""Recordings: a live stream's original video, kept as MP4 segments beside its frames (Frigate's ``record``).

Ingest keeps frames at a few per second for the models; people want to watch what happened at full rate and
quality. With ``recording.enabled`` (or a stream's own ``recording``), the packets a :class:`LiveSource` demuxes
are handed, once decoded, to a :class:`SegmentWriter` on the decoder thread: it re-muxes them into fragmented MP4
files without decoding or encoding anything (pictures and the first sound track, when MP4 can hold its codec), so
its cost is a copy of the compressed stream to disk.

Layout, one folder per stream: ``<data>/recordings/<stream>/<start>-<end>.mp4``, where ``start`` and ``end`` are
the media seconds (the frame store's clock) of the segment's first picture and of the end of its last one, so the
file names are the index a clip needs (:mod:`lucy.ingest.segments` reads it without PyAV). A segment starts at a
keyframe; the next one starts at the first keyframe ``recording.segment_seconds`` after it, or at a reconnect (the
gap between them is the time the camera was down). Inside a file, media time is
``start + (pts - pts of its first picture)``.

Crash safety: a segment is written as ``<start>.mp4.part`` and renamed to its final name once closed, so a
``kill -9`` can only hit the one being written; fragmented MP4 (a fragment a second) is readable up to its last
whole fragment, and the next writer of the stream (:func:`repair`, run when it starts, under the stream's writer
lock) gives a leftover ``.part`` its final name from what it holds, or deletes it when nothing is readable.

Files (non-live sources) are not copied: their source file is the recording while it stays where it is.
Retention (:mod:`lucy.ingest.retention`) deletes segments by age (``recording.retention_days``) and, oldest first,
under disk pressure before any frame.
"""

from __future__ import annotations

import contextlib
import logging
import struct
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import av
import av.error

from lucy.ingest.segments import PART_NAME, PART_SUFFIX, segment_name

log = logging.getLogger(__name__)

# Sound codecs FFmpeg's MP4 muxer takes; any other track (G.711 of many cameras) is left out of the recording.
MP4_AUDIO = frozenset({"aac", "mp3", "opus", "alac", "flac", "ac3", "eac3"})
# fMP4: one fragment a second at most (and at each keyframe), so a killed writer loses at most about a second.
# Each fragment goes to the file as soon as it is made (flush_packets), not when FFmpeg's write buffer fills.
_MOVFLAGS = {"movflags": "frag_keyframe+empty_moov+default_base_moof", "frag_duration": "1000000",
             "flush_packets": "1"}
_EARLY_PACKETS = 512  # packets held while a connection's media clock is not known yet (before its first picture)


def file_span(path: Path) -> tuple[float, float] | None:
    """``(time of the first picture, end of the last packet)`` in a recorded file's own seconds (of its first sound
    when it has no pictures), read by demuxing it (no decoding); None when nothing in it is readable. A file cut short
    (a ``.part`` of a killed writer) gives what its whole fragments hold."""
    first: float | None = None
    end: float | None = None
    try:
        with av.open(str(path), format="mp4") as container:
            video = container.streams.video[0] if container.streams.video else None
            rate = float(video.average_rate or video.guessed_rate or 0) if video is not None else 0.0
            try:
                for packet in container.demux():
                    if packet.pts is None or packet.time_base is None or not packet.size:
                        continue
                    t = float(packet.pts * packet.time_base)
                    is_video = video is not None and packet.stream.index == video.index
                    if first is None and (is_video or video is None):
                        first = t
                    length = float(packet.duration * packet.time_base) if packet.duration else 0.0
                    if not length and is_video and rate:
                        length = 1.0 / rate
                    end = t + length if end is None else max(end, t + length)
            except (av.error.FFmpegError, OSError):
                pass  # a fragment cut short: what came before it counts
    except (av.error.FFmpegError, OSError):
        return None
    if first is None or end is None or end <= first:
        return None
    return first, end


def whole_fragments(path: Path) -> int:
    """Bytes of a fragmented MP4 up to the end of its last whole box that is not a ``moof`` (a fragment's header
    without all of its ``mdat`` is of no use): what a killed writer left that reads cleanly."""
    size = path.stat().st_size
    good = pos = 0
    with open(path, "rb") as f:
        while pos + 8 <= size:
            f.seek(pos)
            header = f.read(16)
            length, kind = struct.unpack(">I4s", header[:8])
            if length == 1 and len(header) == 16:
                length = struct.unpack(">Q", header[8:16])[0]
            if length < 8 or pos + length > size:
                break  # a box cut short (or 0: "to the end", which a fragment writer never leaves whole)
            pos += length
            if kind != b"moof":
                good = pos
    return good


def repair(folder: Path) -> list[Path]:
    """Close what a killed writer left in ``folder``: each ``.part`` is cut back to its last whole fragment and gets
    its final name from what it holds, or is deleted when nothing in it is readable. Run by the stream's next writer
    before it records (it holds the stream's writer lock, so no other process writes there). Returns the segments
    made."""
    made = []
    for part in sorted(folder.glob(f"*.mp4{PART_SUFFIX}")):
        match = PART_NAME.match(part.name)
        if match is not None:
            with open(part, "r+b") as f:
                f.truncate(whole_fragments(part))
        span = file_span(part) if match is not None else None
        if match is None or span is None:
            log.warning("recording %s: nothing readable in %s; deleted", folder.name, part.name)
            part.unlink(missing_ok=True)
            continue
        start = float(match.group(1))
        final = part.with_name(segment_name(start, start + span[1] - span[0]))
        part.rename(final)
        log.info("recording %s: kept %s, left by a writer that stopped without closing it", folder.name, final.name)
        made.append(final)
    return made


@dataclass
class RecordingStats:
    """Counters of one :class:`SegmentWriter` (written by the decoder thread)."""

    segments: int = 0  # closed by this writer
    packets: int = 0  # muxed
    bytes: int = 0  # of the packets muxed
    skipped: int = 0  # packets left out: no timestamp, before a segment's first keyframe, or out of order
    errors: int = 0  # segments abandoned on a muxer or disk error


class SegmentWriter:
    """Re-muxes one live stream's demuxed packets into MP4 segments (see the module's docstring).

    The source tells it about each connection: :meth:`connect` with the input streams, :meth:`anchor` once the
    connection's media clock is known (``media time = packet time + offset``), :meth:`packet` for every packet once
    it has been decoded, :meth:`disconnect` when the connection ends. It runs on the decoder thread and never
    decodes; a muxer or disk error abandons the segment being written (logged, counted) and recording goes on at
    the next keyframe, so it never stops ingest. :meth:`close` (from any thread) ends the last segment.
    """

    def __init__(self, folder: Path, segment_seconds: float, description: str = "") -> None:
        self.folder = folder
        self.segment_seconds = segment_seconds
        self.description = description or folder.name
        self.stats = RecordingStats()
        folder.mkdir(parents=True, exist_ok=True)
        self.repaired = repair(folder)
        self._lock = threading.Lock()
        self._closed = False
        self._video: av.VideoStream | None = None
        self._audio: av.AudioStream | None = None
        self._offset: float | None = None
        self._early: deque[av.Packet] = deque(maxlen=_EARLY_PACKETS)
        self._frame = 0.0  # seconds of one picture (when packets carry no duration)
        self._out: av.container.OutputContainer | None = None
        self._part: Path | None = None
        self._start = 0.0  # media time of the segment's first picture
        self._end = 0.0  # media time the segment reaches so far
        self._base = 0.0  # seconds (stream time) subtracted from every timestamp of the segment
        self._streams: dict[int, av.stream.Stream] = {}  # input stream index -> output stream
        self._last_dts: dict[int, int] = {}
        self._said_audio = False
        self._failing = False  # segments cannot be started (said once in the log)

    # ------------------------------------------------------------------------------------ what the source says

    def connect(self, video: av.VideoStream | None, audio: av.AudioStream | None) -> None:
        """A connection opened with these input streams: what comes next goes into a new segment."""
        with self._lock:
            self._end_segment()
            if audio is not None and audio.codec_context.name not in MP4_AUDIO:
                if not self._said_audio:
                    log.warning("recording %s: its sound (%s) cannot go in MP4; pictures only", self.description,
                                audio.codec_context.name)
                    self._said_audio = True
                audio = None
            self._video, self._audio, self._offset = video, audio, None
            self._early.clear()
            rate = float(video.average_rate or video.guessed_rate or 0) if video is not None else 0.0
            self._frame = 1.0 / rate if rate else 0.0

    def anchor(self, offset: float) -> None:
        """The connection's media clock: ``media time = packet time + offset``. A new offset mid-connection (the
        camera reset its timestamps) starts a new segment."""
        with self._lock:
            if self._offset is not None and abs(offset - self._offset) > 1e-6:
                self._end_segment()
            self._offset = offset
            while self._early and not self._closed:
                self._write(self._early.popleft())

    def packet(self, packet: av.Packet) -> None:
        """A packet of the connection, already decoded (its timestamps are rewritten here)."""
        with self._lock:
            if self._closed or packet.pts is None or packet.time_base is None or not packet.size:
                return
            if self._offset is None:
                self._early.append(packet)  # the clock comes with the first picture, a few packets later
                return
            self._write(packet)

    def disconnect(self) -> None:
        """The connection ended (dropped, or the source stops): its segment is closed."""
        with self._lock:
            self._end_segment()
            self._video = self._audio = None
            self._early.clear()

    def close(self) -> None:
        """End the segment being written; later packets are ignored."""
        with self._lock:
            self._end_segment()
            self._closed = True
            self._early.clear()

    # ------------------------------------------------------------------------------------ writing

    def _kind(self, packet: av.Packet) -> str | None:
        index = packet.stream.index
        if self._video is not None and index == self._video.index:
            return "video"
        if self._audio is not None and index == self._audio.index:
            return "audio"
        return None

    def _write(self, packet: av.Packet) -> None:
        kind = self._kind(packet)
        if kind is None:
            return
        assert self._offset is not None and packet.pts is not None and packet.time_base is not None
        tb = packet.time_base
        t = float(packet.pts * tb) + self._offset
        # A segment starts at a picture that needs no other (any packet, for a stream of sound alone).
        starts = packet.is_keyframe if kind == "video" else self._video is None
        if self._out is not None and starts and t - self._start >= self.segment_seconds:
            self._end_segment()
        if self._out is None:
            if not starts:
                self.stats.skipped += 1
                return
            if not self._begin(packet, t):
                return
        if kind == "audio" and t < self._base + self._offset:
            # Sound from before the first picture's decode time: the file's tracks both begin at that time (MP4
            # fragments keep no track's start offset), so sound and pictures stay in step.
            self.stats.skipped += 1
            return
        assert self._out is not None
        shift = round(self._base / tb)
        dts = packet.dts if packet.dts is not None else packet.pts
        pts, dts = packet.pts - shift, dts - shift
        index = packet.stream.index
        last = self._last_dts.get(index)
        if dts < 0 or (last is not None and dts <= last):
            if kind == "audio" or last is None or pts <= last:
                self.stats.skipped += 1
                return
            dts = last + 1  # a repeated decode time: the muxer needs them increasing
        length = float(packet.duration * tb) if packet.duration else (self._frame if kind == "video" else 0.0)
        size = packet.size
        packet.pts, packet.dts = pts, dts
        packet.stream = self._streams[index]
        try:
            self._out.mux(packet)
        except (av.error.FFmpegError, OSError, ValueError) as err:
            self._abandon(err)
            return
        self._last_dts[index] = dts
        if self._failing:
            log.info("recording %s: recording again", self.description)
            self._failing = False
        if kind == "video" or self._video is None:  # a segment ends with its last picture: sound that a camera
            self._end = max(self._end, t + length)  # sends ahead of its pictures may run a little past it
        self.stats.packets += 1
        self.stats.bytes += size

    def _begin(self, packet: av.Packet, t: float) -> bool:
        """Open a segment whose first picture is ``packet`` at media time ``t``."""
        assert packet.time_base is not None and packet.pts is not None
        name = f"{t:012.3f}.mp4{PART_SUFFIX}"
        part = self.folder / name
        while part.exists() or (self.folder / segment_name(t, t)).exists():  # never over a kept segment
            t += 0.001
            part = self.folder / f"{t:012.3f}.mp4{PART_SUFFIX}"
        try:
            out = av.open(str(part), "w", format="mp4", options=dict(_MOVFLAGS))
            streams = {}
            for source in (self._video, self._audio):
                if source is not None:
                    streams[source.index] = out.add_stream_from_template(source)
        except (av.error.FFmpegError, OSError, ValueError) as err:
            self._fail("cannot start a segment", err)
            with contextlib.suppress(OSError):
                part.unlink(missing_ok=True)
            return False
        dts = packet.dts if packet.dts is not None else packet.pts
        self._out, self._part, self._streams, self._last_dts = out, part, streams, {}
        self._start = self._end = t
        self._base = float(dts * packet.time_base)
        return True

    def _abandon(self, err: BaseException) -> None:
        """A muxer or disk error: the segment is closed as it stands (what is in it stays), recording goes on at the
        next keyframe."""
        self._fail("segment cut short", err)
        self._end_segment()

    def _fail(self, what: str, err: BaseException) -> None:
        """Count an error; say it once while errors follow one another (a full disk fails at every keyframe)."""
        self.stats.errors += 1
        if not self._failing:
            log.warning("recording %s: %s (%s); trying again at each keyframe", self.description, what, err)
        self._failing = True

    def _end_segment(self) -> None:
        out, part = self._out, self._part
        if out is None or part is None:
            return
        self._out = self._part = None
        self._streams = {}
        try:
            out.close()
        except (av.error.FFmpegError, OSError, ValueError) as err:
            if not self._failing:  # the error that abandoned it is said already
                self.stats.errors += 1
                log.warning("recording %s: closing a segment failed (%s)", self.description, err)
        if self._end <= self._start or not part.exists():
            with contextlib.suppress(OSError):
                part.unlink(missing_ok=True)
            return
        try:
            part.rename(part.with_name(segment_name(self._start, self._end)))
            self.stats.segments += 1
        except OSError as err:  # left as a .part: the next writer repairs it
            self.stats.errors += 1
            log.warning("recording %s: cannot name a closed segment (%s)", self.description, err)

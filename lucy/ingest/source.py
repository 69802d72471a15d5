"""Sources: open a file or a live stream with PyAV and yield decoded frames on a monotonic media clock.

- The first audio track, if any, is decoded alongside the pictures and resampled to 16 kHz mono
  (:class:`AudioChunk`) on the same media clock. A file with sound and no pictures is a source too.

- Files decode as fast as the machine allows (or paced with ``realtime``); a damaged file yields what decodes
  and reports what was lost.
- Live streams (``rtsp://``, and ``http(s)://`` without a known duration, e.g. live HLS) reconnect with
  exponential backoff. Media time is anchored to the wall clock at the stream's start, so time spent
  disconnected shows up as a :class:`Gap` and media time never runs backwards.
- URLs are shown redacted (``user:***@``) everywhere; FFmpeg's own error text is never printed with the URL.
- Pictures larger than ``ingest.max_source_pixels`` are refused when the source opens, before any is decoded.
- With ``service.allowed_source_roots`` set, a local file, and every file a playlist in it names, must lie inside
  those folders (:mod:`lucy.ingest.roots`).
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import logging
import math
import os
import re
import ssl
import threading
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import SplitResult, urlsplit, urlunsplit

import av
import av.error
import numpy as np

from lucy.config import IngestSettings
from lucy.errors import SourceError
from lucy.ingest.frames import AUDIO_RATE, Gap
from lucy.ingest.roots import LOCAL_FILE_OPTIONS, check_local_source
from lucy.redaction import redact_url

log = logging.getLogger(__name__)

LIVE_SCHEMES = ("rtsp", "rtsps", "http", "https")
# How a frame store keeps its source's identity (which may hold a ?token=): salted and slowed down, so that a
# weak camera password in a query string cannot be read back from zarr.json by trying likely ones.
_ID_SCHEME = "pbkdf2-sha256"
_ID_ITERATIONS = 100_000
# Skip non-reference frames only when the source has at least this many frames per sampled frame.
_SKIP_RATE_FACTOR = 4
# A pts jump backwards by more than this (seconds) is a timestamp reset, not reordering noise.
_RESET_JUMP = 1.0
# Audio whose timestamp strays this far (seconds) from where the samples before it end starts a new stretch
# (a jump, a hole, clock drift); smaller jitter is ignored so that the samples stay contiguous.
_AUDIO_SLIP = 0.1
# Stored sound that ends this long (seconds) before the stored pictures has ended in the source: a resume goes
# on from the pictures (sound is committed with them, so a killed run leaves it at most a commit behind).
_SOUND_ENDED = 5.0


def tls_options(url: str, settings: IngestSettings) -> dict[str, str]:
    """FFmpeg options that make an ``https://`` or ``rtsps://`` source check its certificate (none otherwise).

    FFmpeg accepts any certificate unless told to verify, and then needs the CA file named.
    """
    if urlsplit(url).scheme.lower() not in ("https", "rtsps") or not settings.tls_verify:
        return {}
    ca_file = settings.tls_ca_file or _system_ca_file()
    if not ca_file:
        raise SourceError("no CA certificates found to check the source's certificate: install Debian's "
                          "ca-certificates, set ingest.tls_ca_file, or set ingest.tls_verify = false")
    return {"tls_verify": "1", "ca_file": ca_file}


def _system_ca_file() -> str:
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile, "/etc/ssl/certs/ca-certificates.crt",
                      "/etc/pki/tls/certs/ca-bundle.crt"):
        if candidate and os.path.isfile(candidate):
            return candidate
    return ""


def _tls_hint(url: str, settings: IngestSettings) -> str:
    """What to say after an I/O error on a TLS source (FFmpeg reports a refused certificate only as EIO)."""
    if tls_options(url, settings):
        return " (if the server's certificate is not trusted: set ingest.tls_ca_file, or ingest.tls_verify = false)"
    return ""


# What a URL that cannot be split says: nothing of the URL itself. urllib's own messages quote the part it choked
# on ("Port could not be cast to integer value as 'pa'"), which for rtsp://admin:pa#ss@host is the password's start.
UNPARSABLE_URL = ("the source URL cannot be parsed (it is not shown: it may hold a password); percent-encode "
                  "special characters in the user name and password, e.g. '#' as %23, '/' as %2F, '?' as %3F")
# After an authority without '@', a run up to an '@' with none of these in it is a password cut short by a '#', '/'
# or '?' (rtsp://admin:1234#x@host: urllib and FFmpeg read host "admin", port 1234), not a path or query.
_CUT_USERINFO = re.compile(r"[#/?][^/?#=&]+@")


def split_source_url(spec: str) -> SplitResult:
    """``spec`` split into its parts, the port checked; a source URL that cannot be read unambiguously is refused
    with :data:`UNPARSABLE_URL`, which quotes none of it. Every place that takes a URL from a user goes through
    here (the API, ``lucy ingest``, the sources), so no parser's message ever carries a piece of a password."""
    try:
        parts = urlsplit(spec)
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError:
        raise SourceError(UNPARSABLE_URL) from None
    if parts.scheme.lower() in LIVE_SCHEMES and "@" not in parts.netloc:
        rest = spec.partition("://")[2][len(parts.netloc):]
        # A fragment is never sent to the server: an '@' in it is a password's '#'. After a port, a short run up to
        # an '@' is a password that starts with digits.
        if (rest.startswith("#") and "@" in rest) or (":" in parts.netloc and _CUT_USERINFO.match(rest)):
            raise SourceError(UNPARSABLE_URL)
    return parts


@dataclass(slots=True)
class Frame:
    """A decoded frame and its media time (seconds from the stream's start)."""

    time: float
    video: av.VideoFrame


@dataclass(slots=True)
class AudioChunk:
    """Decoded sound, mono float32 in [-1, 1] at :data:`AUDIO_RATE`: ``samples[i]`` was heard at media time
    ``time + i / AUDIO_RATE``."""

    time: float
    samples: np.ndarray

    @property
    def end(self) -> float:
        return self.time + len(self.samples) / AUDIO_RATE


class _Resampler:
    """Turns a track's decoded audio frames into :class:`AudioChunk` on the media clock (PyAV's
    AudioResampler to 16 kHz mono). Samples are timed by counting them from the start of a stretch, so chunks
    of one stretch are exactly contiguous; a timestamp that strays by more than ``_AUDIO_SLIP`` starts a new
    stretch at its own time."""

    def __init__(self) -> None:
        self._resampler: av.AudioResampler | None = None
        self._start = 0.0  # media time of the stretch's first sample
        self._produced = 0  # samples put out in this stretch
        self._expected: float | None = None  # media time where the next input frame should start

    def _out(self, frames: list[av.AudioFrame]) -> AudioChunk | None:
        parts = [f.to_ndarray().reshape(-1) for f in frames if f.samples]
        if not parts:
            return None
        samples = np.concatenate(parts).astype(np.float32, copy=False)
        chunk = AudioChunk(self._start + self._produced / AUDIO_RATE, samples)
        self._produced += len(samples)
        return chunk

    def flush(self) -> AudioChunk | None:
        """The samples the resampler still holds (at the end of a stretch)."""
        if self._resampler is None:
            return None
        chunk = self._out(self._resampler.resample(None))
        self._resampler, self._expected = None, None
        return chunk

    def __call__(self, frame: av.AudioFrame, t: float) -> list[AudioChunk]:
        """Chunks for ``frame``, whose first sample was heard at media time ``t``."""
        out = []
        if self._expected is not None and abs(t - self._expected) > _AUDIO_SLIP:
            tail = self.flush()
            if tail is not None:
                out.append(tail)
        if self._resampler is None:
            self._resampler = av.AudioResampler(format="flt", layout="mono", rate=AUDIO_RATE)
            self._start, self._produced = t, 0
            self._expected = t
        assert self._expected is not None
        self._expected += frame.samples / float(frame.sample_rate or AUDIO_RATE)
        frame.pts = None  # timed by counting samples; the resampler need not check the track's timestamps
        chunk = self._out(self._resampler.resample(frame))
        if chunk is not None:
            out.append(chunk)
        return out


def _is_eio(err: BaseException) -> bool:
    return isinstance(err, OSError) and err.errno == errno.EIO


def _ffmpeg_reason(err: BaseException) -> str:
    """FFmpeg's error without the file name it embeds (which may hold credentials)."""
    if isinstance(err, av.error.FFmpegError | OSError):
        reason = err.strerror or type(err).__name__
    else:
        reason = str(err) or type(err).__name__
    return redact_url(reason)


def source_identity(spec: str) -> tuple[str, str]:
    """``(description, identity)`` of a source spec: the redacted text to show, and what tells two sources
    apart (scheme, host, port, path and query: it may hold secrets, so store :func:`stored_source_id` instead)."""
    if "://" not in spec or spec.lower().startswith("file://"):
        path = split_source_url(spec).path if "://" in spec else spec
        return path, str(Path(path).resolve())
    parts = split_source_url(spec)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return redact_url(spec), urlunsplit((parts.scheme.lower(), host, parts.path, parts.query, ""))


def _id_digest(identity: str, salt: bytes, iterations: int) -> str:
    return hashlib.pbkdf2_hmac("sha256", identity.encode(), salt, iterations).hex()


def stored_source_id(spec: str) -> str:
    """What a frame store keeps to recognise its source on resume: a salted hash of the source's identity,
    ``pbkdf2-sha256:<iterations>:<salt>:<digest>`` (the identity may carry a ``?token=``; it is never stored)."""
    salt = os.urandom(16)
    identity = source_identity(spec)[1]
    return f"{_ID_SCHEME}:{_ID_ITERATIONS}:{salt.hex()}:{_id_digest(identity, salt, _ID_ITERATIONS)}"


def source_matches(held: str, spec: str) -> bool:
    """Whether a frame store's ``source_id`` was made from the source ``spec`` names.

    Stores written before identities were hashed hold the plain identity: those still match.
    """
    identity = source_identity(spec)[1]
    scheme, _, rest = held.partition(":")
    if scheme != _ID_SCHEME:
        return hmac.compare_digest(held.encode(), identity.encode())
    try:
        iterations, salt, digest = rest.split(":")
        return hmac.compare_digest(_id_digest(identity, bytes.fromhex(salt), int(iterations)), digest)
    except ValueError:
        return False  # a damaged source_id matches nothing


class PacketSink(Protocol):
    """What a live source tells a recorder of its packets (:class:`lucy.ingest.recording.SegmentWriter`): each
    connection's input streams, its media clock (``media time = packet time + offset``), every packet once decoded."""

    def connect(self, video: av.VideoStream | None, audio: av.AudioStream | None) -> None: ...
    def anchor(self, offset: float) -> None: ...
    def packet(self, packet: av.Packet) -> None: ...
    def disconnect(self) -> None: ...


class Source(ABC):
    """A video source. Iterate :meth:`frames`; call :meth:`stop` from another thread to end it early."""

    description: str  # redacted, safe to show
    source_id: str  # tells it from other sources; may hold a secret, so stores keep stored_source_id() instead
    live: bool
    has_video = True  # a file may have sound only (known once the source is open; a live stream: at connect)
    has_audio = False  # its audio track is decoded (ingest.audio on, and the source has one)

    def __init__(self) -> None:
        self._stop = threading.Event()
        self.decode_errors = 0
        self.lost: str | None = None  # what could not be decoded, once iteration ended
        self.complete = False  # the source was read to its end
        self.reconnects = 0
        self.down = False  # a live source that dropped and is being reconnected now (read by the ingest's writer)
        self._audio_after: float | None = None
        self.packet_sink: PacketSink | None = None  # a live source's recorder (see record_to)

    def record_to(self, sink: PacketSink) -> None:
        """Hand every demuxed packet, once decoded, to ``sink`` (a live source records; a file is its own
        recording, so a file source ignores it)."""
        self.packet_sink = sink

    def stop(self) -> None:
        self._stop.set()

    def resume_audio_after(self, t: float) -> None:
        """Sound up to media time ``t`` is stored already: a file starts decoding early enough to continue it
        (the caller drops what was stored). Sound far behind the pictures has ended; it does not move the start.
        A live stream goes on from now anyway."""
        self._audio_after = t

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    @abstractmethod
    def frames(self) -> Iterator[Frame | AudioChunk | Gap]:
        """Decoded frames in media-time order, with a :class:`Gap` wherever a live stream was down, and the
        sound of the first audio track as :class:`AudioChunk` (in time order among themselves; interleaved with
        the frames as the container interleaves them, so a chunk may start before the last frame's time)."""

    def skip_unneeded_frames(self, sample_fps: float) -> None:
        """Let the decoder skip frames no other frame refers to, when the sampler keeps few enough frames.

        Sampling 2 fps out of 30 needs a frame near every slot, not every frame: skipping non-reference frames
        (B-frames, often half of them) roughly halves decoding. Frames keep their true timestamps. Should a
        stream leave a sampling slot empty that way, skipping stops for the rest of it, and a file is rewound
        to decode the frames it missed.
        """
        self._sample_fps = sample_fps

    def _decode(self, container: av.container.InputContainer, stream: av.VideoStream | None,
                audio: av.AudioStream | None = None, sink: PacketSink | None = None,
                recorded_audio: av.AudioStream | None = None) -> Iterator[av.VideoFrame | av.AudioFrame]:
        """Decode packet by packet so that one corrupt packet costs one packet, not the stream. Pictures of
        ``stream`` and sound of ``audio`` (either may be None), in the container's order. With ``sink``, every
        packet goes to it once decoded, and so do those of ``recorded_audio`` (a sound track kept for the
        recording alone, not decoded)."""
        skipper = _Skipper(stream, getattr(self, "_sample_fps", None), self.description, rewind=not self.live)
        wanted = {s.index: s for s in (stream, audio, recorded_audio if sink is not None else None) if s is not None}
        for packet in container.demux(*wanted.values()):
            if self.stopped:
                return
            if audio is not None and packet.stream.index == audio.index:
                try:
                    frames = self._decode_sound(packet, pictures_too=stream is not None)
                except av.error.InvalidDataError:  # a damaged packet of sound: neither heard nor recorded
                    self.decode_errors += 1
                    continue
                if frames is None:  # no sound can be decoded: pictures go on
                    audio = None
                else:
                    yield from frames
            elif stream is not None and packet.stream.index == stream.index:
                try:
                    for frame in packet.decode():
                        ft = _frame_time(frame)
                        if skipper.replayed(ft):
                            continue
                        if skipper.rewound(ft, container):
                            break
                        yield frame
                except av.error.InvalidDataError:
                    self.decode_errors += 1
                    continue  # a damaged picture (often the half packet a dropped connection leaves) is not recorded
            # (else: sound for the recording alone)
            if sink is not None:
                sink.packet(packet)

    def _decode_sound(self, packet: av.Packet, *, pictures_too: bool) -> list[av.AudioFrame] | None:
        """The sound frames of one packet (a damaged one raises ``InvalidDataError``); None once the sound cannot
        be decoded at all (raised instead when there are no pictures to go on with)."""
        try:
            return packet.decode()
        except av.error.InvalidDataError:
            raise
        except av.error.FFmpegError as err:
            if not pictures_too:
                raise
            log.warning("%s: audio dropped (%s)", self.description, _ffmpeg_reason(err))
            self.has_audio = False
            return None


class _Skipper:
    """Decoding only the frames others refer to while that leaves no sampling slot empty (see
    :meth:`Source.skip_unneeded_frames`): once a gap between pictures passes half a slot, every frame is decoded,
    and a file (``rewind``) is sought back to decode the stretch just skipped over again."""

    def __init__(self, stream: av.VideoStream | None, fps: float | None, description: str, *, rewind: bool) -> None:
        self.stream = stream
        self.fps = fps
        self.description = description
        self.rewind = rewind
        self.skipping = (stream is not None and fps is not None
                         and float(stream.average_rate or 0) >= _SKIP_RATE_FACTOR * fps)
        if self.skipping:
            assert stream is not None
            stream.codec_context.skip_frame = "NONREF"
        self.previous: float | None = None  # time of the last frame yielded while skipping
        self.replay_after: float | None = None  # after a rewind: frames up to here were yielded already

    def replayed(self, ft: float | None) -> bool:
        """Whether a frame decoded again after a rewind was yielded before."""
        if self.replay_after is None or ft is None:
            return False
        if ft <= self.replay_after:
            return True
        self.replay_after = None
        return False

    def rewound(self, ft: float | None, container: av.container.InputContainer) -> bool:
        """Whether the frame at ``ft`` left a slot empty and the file was sought back (the frame is not yielded:
        it comes again)."""
        if not self.skipping or ft is None:
            return False
        assert self.stream is not None and self.fps is not None
        if self.previous is not None and ft - self.previous > 0.5 / self.fps:
            self.skipping = False
            self.stream.codec_context.skip_frame = "DEFAULT"
            log.info("%s: decoding every frame (skipping left sampling slots empty)", self.description)
            if self.rewind:  # decode the stretch just skipped over again
                container.seek(int(self.previous / self.stream.time_base), stream=self.stream, backward=True)
                self.replay_after = self.previous
                return True
        self.previous = ft
        return False


class _MediaClock:
    """Maps frame timestamps to one monotonic media time: ``t = frame_time + offset``."""

    def __init__(self, last: float | None, offset: float = 0.0) -> None:
        self.last = last
        self.offset = offset

    def anchor(self, frame_time: float, media_time: float) -> None:
        """Show ``frame_time`` at ``media_time`` (or just after the last frame, if that is later)."""
        floor = -math.inf if self.last is None else self.last + 1e-3
        self.offset = max(media_time, floor) - frame_time

    def __call__(self, frame_time: float) -> float | None:
        t = frame_time + self.offset
        if self.last is not None and t <= self.last:
            if self.last - t < _RESET_JUMP:
                return None  # duplicate or slightly out-of-order timestamp: drop the frame
            self.anchor(frame_time, self.last + 1e-3)  # timestamps were reset: continue after the last frame
            t = frame_time + self.offset
        self.last = t
        return t


def _frame_time(frame: av.VideoFrame | av.AudioFrame) -> float | None:
    return None if frame.pts is None or frame.time_base is None else float(frame.pts * frame.time_base)


def _picture_options(settings: IngestSettings) -> dict[str, str]:
    """FFmpeg options that keep its decoders from allocating pictures over ``ingest.max_source_pixels``.

    Opening an image source decodes it to learn its size: a 16000x16000 PNG took 770 MB before any check could
    run. With ``max_pixels`` FFmpeg refuses such a picture without allocating it.
    """
    return {"max_pixels": str(settings.max_source_pixels)}


def _image_size(path: str, limit: int) -> tuple[str, int] | None:
    """``(size as text, pixels)`` of an image file read from its header alone, or None if it is no image."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                width, height = image.size
    except Image.DecompressionBombError:
        bomb = 2 * (Image.MAX_IMAGE_PIXELS or 0)  # Pillow refuses to read the header of larger images
        return (f"over {bomb:,} pixels", bomb + 1) if limit < bomb else None
    except (OSError, ValueError, SyntaxError):  # not an image Pillow knows (UnidentifiedImageError is an OSError)
        return None
    return f"{width}x{height} = {width * height:,} pixels", width * height


def _declared_size(path: str) -> tuple[str, int] | None:
    """``(size as text, pixels)`` that a video file's container declares, or None if it declares none.

    With ``max_pixels`` FFmpeg forgets a declared size over it (its probe's decoder refuses to open: width 0, or
    the open fails with EINVAL). A second open without it and with ``skip_frame`` decodes no picture.
    """
    try:
        with av.open(path, options={**LOCAL_FILE_OPTIONS, "skip_frame": "all"}) as container:
            if not container.streams.video:
                return None
            context = container.streams.video[0].codec_context
            width, height = context.width, context.height
    except (av.error.FFmpegError, OSError):
        return None
    return (f"{width}x{height} = {width * height:,} pixels", width * height) if width and height else None


def _refuse_oversized(size: tuple[str, int] | None, what: str, settings: IngestSettings) -> None:
    limit = settings.max_source_pixels
    if size is not None and size[1] > limit:
        raise SourceError(f"{what} has pictures of {size[0]}, more than ingest.max_source_pixels "
                          f"({limit:,}) allows")


def _check_picture_size(stream: av.VideoStream, what: str, settings: IngestSettings,
                        local_path: str | None) -> None:
    width, height = stream.codec_context.width, stream.codec_context.height
    if width and height:
        size: tuple[str, int] | None = (f"{width}x{height} = {width * height:,} pixels", width * height)
    elif local_path is not None:
        # FFmpeg learns an image's size by decoding it, which max_pixels stopped: read the file's header instead
        # (an image's, else the container's).
        size = _image_size(local_path, settings.max_source_pixels) or _declared_size(local_path)
    else:
        size = None  # unknown until decoded: the decoder's max_pixels still refuses an oversized picture
    _refuse_oversized(size, what, settings)


def check_picture_size(path: str, settings: IngestSettings) -> None:
    """Refuse a local file whose pictures are over ``ingest.max_source_pixels`` (:class:`SourceError`), without
    decoding one; any other problem is left for the source itself to report. The API calls it before it makes a
    stream, so that such a file leaves no failed stream behind."""
    try:
        container = av.open(path, options={**LOCAL_FILE_OPTIONS, **_picture_options(settings)})
    except (av.error.FFmpegError, OSError) as err:
        if isinstance(err, OSError) and err.errno == errno.EINVAL:
            _refuse_oversized(_image_size(path, settings.max_source_pixels) or _declared_size(path), path, settings)
        return
    try:
        if container.streams.video:
            _check_picture_size(container.streams.video[0], path, settings, path)
    finally:
        container.close()


def _audio_stream(container: av.container.InputContainer, settings: IngestSettings) -> av.AudioStream | None:
    """The first audio track, set up for decoding (None: there is none, or ``ingest.audio`` is off)."""
    if not settings.audio or not container.streams.audio:
        return None
    audio = container.streams.audio[0]
    audio.thread_type = "AUTO"
    return audio


def _streams(container: av.container.InputContainer, what: str, settings: IngestSettings,
             local_path: str | None = None) -> tuple[av.VideoStream | None, av.AudioStream | None]:
    """The first video stream (see :func:`_video_stream`) and the first audio track; a source with sound and no
    pictures has no video stream, one with neither is refused."""
    audio = _audio_stream(container, settings)
    if not container.streams.video and audio is not None:
        return None, audio
    return _video_stream(container, what, settings, local_path), audio


def _video_stream(container: av.container.InputContainer, what: str, settings: IngestSettings,
                  local_path: str | None = None) -> av.VideoStream:
    """The first video stream, checked against ``ingest.max_source_pixels`` and set up for decoding."""
    if not container.streams.video:
        container.close()
        raise SourceError(f"{what} has no video stream" + (" (nor sound)" if settings.audio else ""))
    stream = container.streams.video[0]
    try:
        _check_picture_size(stream, what, settings, local_path)
    except SourceError:
        container.close()
        raise
    stream.thread_type = "AUTO"
    if settings.decode_threads:
        stream.codec_context.thread_count = settings.decode_threads
    # The decoder holds later pictures to the same limit (a stream may change its size midway).
    stream.codec_context.options = {**stream.codec_context.options, **_picture_options(settings)}
    return stream


class FileSource(Source):
    """A local file in any container and codec FFmpeg reads (or a finite network resource)."""

    live = False

    def __init__(self, path: str, settings: IngestSettings, *, resume_after: float | None = None,
                 realtime: bool = False, allowed_roots: Iterable[str | os.PathLike[str]] = ()) -> None:
        """Open ``path`` (a local file, or a finite network resource). With ``allowed_roots``, a local file and
        every file a playlist or concat list in it names must lie inside those folders."""
        super().__init__()
        self.path = path
        self.description, self.source_id = source_identity(path)
        is_url = "://" in path
        self._settings = settings
        self._resume_after = resume_after
        self._realtime = realtime
        if not is_url and not os.path.exists(path):
            raise SourceError(f"no such file: {path}")
        if not is_url and os.path.isdir(path):
            raise SourceError(f"{path} is a directory, not a video file")
        options = {**tls_options(path, settings), **_picture_options(settings)}
        name = path
        roots = list(allowed_roots)
        if not is_url and roots:
            # Checked here as well as by the API: the file may have changed since. FFmpeg gets the resolved name
            # that was checked, and no network protocol (a second wall should a list entry slip through).
            name = str(check_local_source(path, roots))
            options.update(LOCAL_FILE_OPTIONS)
        try:
            self._container = av.open(name, options=options,
                                      timeout=(settings.connect_timeout_seconds, settings.read_timeout_seconds))
        except (av.error.FFmpegError, OSError) as err:
            if not is_url and isinstance(err, OSError) and err.errno == errno.EINVAL:
                # FFmpeg's probe may refuse an oversized picture with a bare "Invalid argument": say why instead.
                _refuse_oversized(_image_size(name, settings.max_source_pixels) or _declared_size(name),
                                  self.description, settings)
            raise SourceError(f"cannot read {self.description} as video: {_ffmpeg_reason(err)}"
                              f"{_tls_hint(path, settings) if _is_eio(err) else ''}") from None
        self._stream, self._audio = _streams(self._container, self.description, settings, None if is_url else name)
        self.has_video, self.has_audio = self._stream is not None, self._audio is not None

    @property
    def _main(self) -> av.VideoStream | av.AudioStream:
        """The stream whose clock and length the source follows: the pictures, or the sound of a sound-only file."""
        main = self._stream if self._stream is not None else self._audio
        assert main is not None
        return main

    def _expected_duration(self) -> float | None:
        s = self._main
        if s.duration is not None and s.time_base is not None:
            return float(s.duration * s.time_base)
        if self._container.duration is not None:
            return self._container.duration / 1e6
        return None

    def _resume_point(self) -> float | None:
        """Media time to start decoding from again (None: from the start)."""
        pictures, sound = self._resume_after, self._audio_after if self.has_audio else None
        if sound is None or (pictures is not None and sound < pictures - _SOUND_ENDED):
            return pictures  # no sound to continue, or it ended long before the pictures
        return sound if pictures is None else min(pictures, sound)

    def frames(self) -> Iterator[Frame | AudioChunk | Gap]:
        stream, main = self._stream, self._main
        start = float(main.start_time * main.time_base) if main.start_time is not None else 0.0
        clock = _MediaClock(None, offset=-start)
        expected = self._expected_duration()
        resume = self._resume_point()
        if resume is not None and resume > 1.0:
            self._seek_before(resume + start - 1.0)
        paced_from: tuple[float, float] | None = None
        last = None
        sound = _Resampler()
        try:
            for decoded in self._decode(self._container, stream, self._audio):
                ft = _frame_time(decoded)
                if ft is None:
                    self.decode_errors += 1
                    continue
                if isinstance(decoded, av.AudioFrame):
                    t: float | None = ft + clock.offset
                else:
                    t = clock(ft)
                    if t is None or (self._resume_after is not None and t <= self._resume_after):
                        continue
                assert t is not None
                if self._realtime:
                    if paced_from is None:
                        paced_from = (time.monotonic(), t)
                    delay = paced_from[0] + (t - paced_from[1]) - time.monotonic()
                    if delay > 0 and self._stop.wait(delay):
                        return
                if isinstance(decoded, av.AudioFrame):
                    for chunk in sound(decoded, t):
                        if stream is None:
                            last = chunk.end
                        yield chunk
                    continue
                last = t
                yield Frame(t, decoded)
            tail = sound.flush()
            if tail is not None:
                if stream is None:
                    last = tail.end
                yield tail
        except (av.error.FFmpegError, OSError) as err:
            self.lost = f"reading stopped early: {_ffmpeg_reason(err)}"
        finally:
            self._container.close()
        if not self.stopped:
            self._judge_end(last if last is not None else (resume or 0.0), expected)

    def _seek_before(self, target: float) -> None:
        """Jump to the keyframe before container time ``target``; the frames up to the resume point are skipped by
        :meth:`frames` (and the sound already stored, by the caller)."""
        main = self._main
        try:
            self._container.seek(int(target / main.time_base), stream=main, backward=True)
        except av.error.FFmpegError:
            pass  # not seekable: decode from the start and skip

    def _judge_end(self, reached: float, expected: float | None) -> None:
        """Whether the file was read whole (:attr:`complete`) and, if not, what was lost (:attr:`lost`), once decoding
        reached media time ``reached`` of the ``expected`` duration (None: unknown)."""
        main = self._main
        self.complete = self.lost is None
        rate = float(main.average_rate) if self._stream is not None and main.average_rate else 0.0
        slack = max(1.0, 2.0 / rate) if rate else 1.0
        if expected is not None and reached + slack < expected:
            self.complete = False
            self.lost = (f"source ends early: decoded up to {reached:.1f} s of {expected:.1f} s "
                         f"({expected - reached:.1f} s lost)")
        if self.decode_errors and self.lost is None:
            self.lost = f"{self.decode_errors} damaged packets skipped"


class LiveSource(Source):
    """An RTSP or HTTP(S)/HLS live stream, reconnected with exponential backoff when it drops.

    Media time is ``wall time - wall_start`` at the start of each connection, then follows the stream's own
    timestamps: time spent disconnected becomes a :class:`Gap` and media time never runs backwards. The first
    connection of a run must succeed (an unreachable URL is an error, not an endless retry); after that the
    stream is retried with delays growing from ``reconnect_initial_seconds`` to ``reconnect_max_seconds``
    until it is back, :meth:`stop` is called, or ``reconnect_give_up_seconds`` have passed.
    """

    live = True

    def __init__(self, url: str, settings: IngestSettings, *, last_time: float | None = None,
                 wall_start: float | None = None) -> None:
        super().__init__()
        self.url = url
        self.description, self.source_id = source_identity(url)
        self._scheme = urlsplit(url).scheme.lower()
        self._settings = settings
        self._clock = _MediaClock(last_time)
        self.wall_start = wall_start  # set when the first connection of a new stream opens
        self.retry_delays: list[float] = []  # the backoff delays waited so far (for stats and tests)
        self._audio_end: float | None = None  # media time where the last sound ended (streams without pictures)

    def _open(self) -> av.container.InputContainer:
        s = self._settings
        # FFmpeg's socket timeout is only a backstop; PyAV's interrupt callback enforces the two limits.
        backstop = str(int(max(s.connect_timeout_seconds, s.read_timeout_seconds) * 1e6))
        read_timeout = s.read_timeout_seconds
        if self._scheme.startswith("rtsp"):
            options = {"rtsp_transport": "tcp", "timeout": backstop}
            # A read that times out first returns the packet the H.264 parser was holding back; only the next
            # one fails. Two half timeouts make a stalled RTSP stream fail after read_timeout_seconds of silence.
            # (Not for HLS: its demuxer legitimately waits a whole segment for the next playlist refresh.)
            read_timeout /= 2
        else:
            options = {"rw_timeout": backstop, "reconnect": "0"}
        options.update(tls_options(self.url, s))
        options.update(_picture_options(s))
        return av.open(self.url, options=options, timeout=(s.connect_timeout_seconds, read_timeout))

    def _why(self, err: BaseException, opening_since: float | None = None) -> str:
        s = self._settings
        if opening_since is not None and time.monotonic() - opening_since >= s.connect_timeout_seconds * 0.95:
            # An interrupted open surfaces as whatever the demuxer was doing ("Invalid data..."): say what happened.
            return f"no answer within {s.connect_timeout_seconds:g} s"
        if isinstance(err, (av.error.ExitError, TimeoutError)):
            return f"no data for {s.read_timeout_seconds:g} s"
        return _ffmpeg_reason(err) + (_tls_hint(self.url, s) if _is_eio(err) else "")

    def frames(self) -> Iterator[Frame | Gap]:
        s = self._settings
        delay = s.reconnect_initial_seconds
        down_since: float | None = None  # monotonic time the stream dropped
        connected = False  # in this run
        reason = "ingest restarted"
        while not self.stopped:
            opened_at, opening_since = time.time(), time.monotonic()
            try:
                container = self._open()
                stream, audio = _streams(container, self.description, s)
            except (av.error.FFmpegError, OSError) as err:
                if not connected:
                    raise SourceError(
                        f"cannot connect to {self.description}: {self._why(err, opening_since)}") from None
                assert down_since is not None
                why = self._why(err, opening_since)
                if s.reconnect_give_up_seconds and time.monotonic() - down_since > s.reconnect_give_up_seconds:
                    self.lost = f"stream down for over {s.reconnect_give_up_seconds:g} s: {why}"
                    return
                log.warning("reconnecting to %s in %.1f s (%s)", self.description, delay, why)
                self.retry_delays.append(delay)
                if self._stop.wait(delay):
                    return
                delay = min(delay * 2, s.reconnect_max_seconds)
                continue
            if connected:
                if self._scheme.startswith("http") and container.duration is not None:
                    # A live HTTP stream that is now a finite resource: the broadcast has ended (HLS ENDLIST).
                    container.close()
                    self.complete = True
                    return
                self.reconnects += 1
                log.info("reconnected to %s after %.1f s", self.description, time.monotonic() - down_since)
            self.down = False
            connected, delay = True, s.reconnect_initial_seconds
            if self.wall_start is None:
                self.wall_start = opened_at
            self.has_video, self.has_audio = stream is not None, audio is not None
            first = True
            sound = _Resampler()
            sink, recorded_audio = self.packet_sink, audio
            if sink is not None:
                if recorded_audio is None and container.streams.audio:
                    recorded_audio = container.streams.audio[0]  # kept in the recording even when not decoded
                sink.connect(stream, recorded_audio)
            told: float | None = None  # the media clock's offset as the sink knows it
            try:
                for decoded in self._decode(container, stream, audio, sink, recorded_audio):
                    ft = _frame_time(decoded)
                    if ft is None:
                        continue
                    if first:
                        # A live server sends from "now": what comes first (a picture or sound) was captured
                        # about when we connected. Pictures and sound share the offset found here.
                        before = self._clock.last if stream is not None else self._audio_end
                        self._clock.anchor(ft, opened_at - self.wall_start)
                        if sink is not None:
                            sink.anchor(told := self._clock.offset)
                        if before is not None:
                            yield Gap(before, ft + self._clock.offset, reason)
                        first = False
                    if isinstance(decoded, av.AudioFrame):
                        for chunk in sound(decoded, ft + self._clock.offset):
                            self._audio_end = chunk.end
                            yield chunk
                        continue
                    t = self._clock(ft)
                    if sink is not None and self._clock.offset != told:  # timestamps were reset
                        sink.anchor(told := self._clock.offset)
                    if t is not None:
                        yield Frame(t, decoded)
                tail = sound.flush()
                if tail is not None:
                    self._audio_end = tail.end
                    yield tail
                reason = "stream ended"
            except (av.error.FFmpegError, OSError) as err:
                reason = f"stream dropped: {self._why(err)}"
            finally:
                if sink is not None:
                    sink.disconnect()  # before the input closes: packets held back refer to its streams
                container.close()
            down_since = time.monotonic()
            if not self.stopped:
                self.down = True
                log.warning("%s: %s; reconnecting", self.description, reason)


def open_source(spec: str, settings: IngestSettings, *, resume_after: float | None = None,
                wall_start: float | None = None, realtime: bool = False,
                allowed_roots: Iterable[str | os.PathLike[str]] = ()) -> Source:
    """Pick the source type from ``spec``: a path, ``rtsp://``, or ``http(s)://`` (live when unbounded).

    ``allowed_roots`` (``service.allowed_source_roots``) confines local files, and what playlists in them name,
    to those folders; empty: any path.
    """
    parts = split_source_url(spec) if "://" in spec else None
    scheme = parts.scheme.lower() if parts is not None else ""
    if parts is None or not scheme:
        return FileSource(spec, settings, resume_after=resume_after, realtime=realtime, allowed_roots=allowed_roots)
    if scheme == "file":
        return FileSource(parts.path, settings, resume_after=resume_after, realtime=realtime,
                          allowed_roots=allowed_roots)
    if scheme not in LIVE_SCHEMES:
        raise SourceError(f"unsupported source scheme {scheme!r}: use a file path, rtsp://, http:// or https://")
    if scheme in ("http", "https"):
        probe = FileSource(spec, settings, resume_after=resume_after, realtime=realtime)
        if probe._expected_duration() is not None:
            return probe  # a finite resource (a file or a VOD playlist over HTTP)
        probe._container.close()
    return LiveSource(spec, settings, last_time=resume_after, wall_start=wall_start)

"""A stream's live view: its newest stored frame, pushed to every viewer as MJPEG (``multipart/x-mixed-replace``),
which browsers show in an ``<img>`` and players (VLC, ffplay) open as a stream.

Ingest already decodes the source and stores its frames (the stream's worker commits them about every
``ingest.commit_every_seconds``), so the live view decodes nothing of the source: one producer per watched stream
(:class:`LivePreview`) looks at the frame store's newest frame time a few times a second (one small metadata read),
and when a newer frame is there reads it back, encodes it to JPEG once and hands that same JPEG to every viewer of
the stream, at most ``service.live_fps`` times a second. A viewer slower than that skips frames (it is always sent
the newest), so a slow client holds no queue and slows nobody. At most ``service.live_max_viewers`` viewers per
stream (one more is refused: 503); a viewer that goes away frees its slot, and the last one stops the producer.
"""

from __future__ import annotations

import asyncio
import io
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import numpy as np
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from lucy.errors import StoreError
from lucy.ingest import FrameStore
from lucy.service.errors import NotFound, Unavailable

log = logging.getLogger(__name__)

BOUNDARY = "lucy-live-frame"
MEDIA_TYPE = f"multipart/x-mixed-replace; boundary={BOUNDARY}"
POLL_SECONDS = 0.1  # at most this long between a commit of frames and the producer seeing it (a look: 0.15 ms)
GONE_AFTER = 10  # failed looks in a row (a second) that mean the stream's frames are gone
WAIT_SECONDS = 0.5  # a viewer waiting for a frame looks this often whether the server is shutting down
JPEG_QUALITY = 75


class TooManyViewers(Unavailable):
    """A stream already has ``service.live_max_viewers`` live viewers."""

    code = "too_many_viewers"
    retry_after = 5


@dataclass(frozen=True, slots=True)
class LiveFrame:
    """One picture of a live view: the ``seq``-th the producer encoded, the media time of its frame, the Unix time it
    was taken (a live source's streams know it: ``wall_start`` + media time; None for a file) and its JPEG."""

    seq: int
    time: float
    wall: float | None
    jpeg: bytes

    def part(self) -> bytes:
        """The frame as one part of the multipart stream, its times in headers (what a client measures latency
        with)."""
        head = [f"--{BOUNDARY}", "Content-Type: image/jpeg", f"Content-Length: {len(self.jpeg)}",
                f"X-Lucy-Frame-Time: {self.time:.3f}"]
        if self.wall is not None:
            head.append(f"X-Lucy-Frame-Wall: {self.wall:.3f}")
        return ("\r\n".join(head) + "\r\n\r\n").encode() + self.jpeg + b"\r\n"


def encode_jpeg(frame: np.ndarray, width: int, quality: int = JPEG_QUALITY) -> bytes:
    """An RGB frame as a JPEG, scaled down to fit ``width`` (never up)."""
    from PIL import Image

    image = Image.fromarray(frame)
    if width < image.width:
        image = image.resize((width, max(1, round(image.height * width / image.width))), Image.BILINEAR)
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=quality)
    return out.getvalue()


class LivePreview:
    """One stream's producer of live pictures and the count of its viewers. Runs on the server's event loop; the
    frame store is read in a worker thread."""

    def __init__(self, name: str, store: Callable[[], FrameStore], *, fps: float, width: int) -> None:
        self.name = name
        self.viewers = 0
        self.latest: LiveFrame | None = None
        self.ended = False  # the stream's frames are gone (deleted): viewers are sent nothing more
        self.encoded = 0  # pictures encoded: one per frame shown, however many watch
        self._store = store
        self._interval = 1.0 / fps
        self._width = width
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"live view of {self.name}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def _look(self) -> tuple[FrameStore, float | None, float | None] | None:
        """The stream's frames, the media time of its newest stored frame and that frame's capture time (one small
        metadata read); None while the stream has no frames yet. Blocking."""
        try:
            store = self._store()
        except NotFound:
            if self.latest is not None:
                raise  # it had frames: the stream was deleted
            return None  # a stream starting: no frames yet
        info = store.info()
        last = info.last_time
        wall = info.wall_start + last if last is not None and info.live and info.wall_start is not None else None
        return store, last, wall

    def _encode(self, store: FrameStore, t: float) -> bytes | None:
        """The stored frame at media time ``t`` as a JPEG; None when retention deleted it meanwhile. Blocking."""
        clip = store.read(t, t + 1e-6)
        return encode_jpeg(clip.frames[-1], self._width) if len(clip) else None

    def _due(self, t: float, shown: float | None, published: float) -> bool:
        """Whether the frame at media time ``t`` is shown now. The rate is kept by media time, so that a frame is
        sent as soon as it is committed (a live camera's pictures lag by the commit interval, not by the wait for
        the next slot too); a stream read faster than real time (a file catching up) still gets no more than twice
        the rate in wall time."""
        if shown is None:
            return True
        if t <= shown:
            return False
        since = time.monotonic() - published
        return since >= self._interval / 2 and (t - shown >= self._interval * 0.99 or since >= self._interval)

    async def _run(self) -> None:
        shown: float | None = None
        published = 0.0
        failed = 0
        try:
            while True:
                try:
                    looked = await asyncio.to_thread(self._look)
                    failed = 0
                except (NotFound, StoreError):
                    failed += 1  # a read that met the writer mid-update tells the same: gone only if it stays so
                    if failed >= GONE_AFTER:
                        raise
                    looked = None
                if looked is None or looked[1] is None or not self._due(looked[1], shown, published):
                    await asyncio.sleep(POLL_SECONDS)
                    continue
                store, t, wall = looked
                jpeg = await asyncio.to_thread(self._encode, store, t)
                if jpeg is None:
                    await asyncio.sleep(POLL_SECONDS)
                    continue
                shown, published = t, time.monotonic()
                self.encoded += 1
                async with self._changed:
                    self.latest = LiveFrame(self.encoded, t, wall, jpeg)
                    self._changed.notify_all()
        except (NotFound, StoreError) as err:  # the stream was deleted while watched
            log.warning("live view of %s ended: %s", self.name, err)
        except Exception:
            log.exception("live view of %s failed", self.name)
        finally:
            self.ended = True
            async with self._changed:
                self._changed.notify_all()

    async def next(self, after: int, timeout: float) -> LiveFrame | None:
        """The newest picture once it is newer than the ``after``-th (at once when it already is); None once the
        producer has ended. Raises TimeoutError when nothing newer came within ``timeout`` seconds."""
        async with self._changed, asyncio.timeout(timeout):
            await self._changed.wait_for(
                lambda: self.ended or (self.latest is not None and self.latest.seq > after))
        return None if self.ended else self.latest


class LiveViews:
    """The server's live views: one :class:`LivePreview` per watched stream, made by its first viewer and stopped
    when its last viewer leaves. ``open_store`` opens a stream's frames for reading (blocking)."""

    def __init__(self, open_store: Callable[[str], FrameStore], *, fps: float, width: int, max_viewers: int) -> None:
        self.open_store = open_store
        self.fps = fps
        self.width = width
        self.max_viewers = max_viewers
        self._previews: dict[str, LivePreview] = {}

    def join(self, name: str) -> LivePreview:
        """A viewer of ``name`` more (raises :class:`TooManyViewers` when it has its most); call :meth:`leave`
        with what it returns when the viewer goes."""
        preview = self._previews.get(name)
        if preview is None or preview.ended:
            preview = self._previews[name] = LivePreview(name, lambda: self.open_store(name), fps=self.fps,
                                                         width=self.width)
        if preview.viewers >= self.max_viewers:
            raise TooManyViewers(f"stream {name!r} already has {preview.viewers} live viewers, the most "
                                 f"service.live_max_viewers allows: close one, or try again later")
        preview.viewers += 1
        preview.start()
        return preview

    async def leave(self, preview: LivePreview) -> None:
        preview.viewers -= 1
        if preview.viewers <= 0:
            if self._previews.get(preview.name) is preview:
                del self._previews[preview.name]
            await preview.stop()

    def viewers(self, name: str) -> int:
        preview = self._previews.get(name)
        return 0 if preview is None else preview.viewers


async def live_parts(preview: LivePreview, closing: Callable[[], bool]) -> AsyncIterator[bytes]:
    """A viewer's parts: the newest picture at once (when there is one), then each newer one, until the stream's
    frames are gone or ``closing()`` (the server shuts down)."""
    seq = 0
    while not closing():
        try:
            frame = await preview.next(seq, WAIT_SECONDS)
        except TimeoutError:
            continue
        if frame is None:
            return
        seq = frame.seq
        yield frame.part()


class LiveResponse(StreamingResponse):
    """An MJPEG answer that awaits ``on_close`` however it ends (the client went, the stream ended, the server
    stops), and that notices a client gone while no picture is being sent: Starlette watches for the disconnect
    only under ASGI spec versions before 2.4, and a finished stream's viewer may wait without sending for long."""

    def __init__(self, parts: AsyncIterator[bytes], on_close: Callable[[], Awaitable[None]],
                 headers: dict[str, str]) -> None:
        super().__init__(parts, media_type=MEDIA_TYPE, headers=headers)
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            streaming = asyncio.ensure_future(self.stream_response(send))
            listening = asyncio.ensure_future(self.listen_for_disconnect(receive))
            try:
                await asyncio.wait((streaming, listening), return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (streaming, listening):
                    task.cancel()
                await asyncio.gather(streaming, listening, return_exceptions=True)
            failed = None if streaming.cancelled() else streaming.exception()
            if failed is not None and not isinstance(failed, OSError):  # a client gone mid-write is no error
                raise failed
        finally:
            await self.on_close()

"""``lucy ingest``'s progress, as a :class:`lucy.recorder.RecorderObserver`.

On a terminal: rich progress bars on stderr, one for ingest (with % and ETA when the file's length is known, a
moving bar for a live stream) and one for coarse captions. Elsewhere (a log file, a pipe, a service manager): a
plain line now and then, so that a long ingest is not silent until its end. Both say the stream's state in the
words of the API, ``lucy streams`` and the dashboard (:class:`lucy.runtime.messages.StreamState`).
"""

from __future__ import annotations

import logging
import sys
import time
from contextlib import AbstractContextManager
from datetime import timedelta
from types import TracebackType
from typing import Self

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn, TimeRemainingColumn

from lucy.metrics.progress import StreamProgress
from lucy.recorder import RecorderObserver
from lucy.runtime.messages import StreamState, writing_state

PLAIN_MIN_SECONDS = 5.0  # plain lines: at most one this often (a file ingested in seconds prints none)...
PLAIN_MAX_SECONDS = 60.0  # ...and at least one this often, whatever the progress
PLAIN_STEP = 0.1  # between those, one per 10 % of a file whose length is known
PLAIN_DRAIN_SECONDS = 10.0  # while the last captions are made: one line this often


def file_duration(source: str) -> float | None:
    """The length in media seconds of a local file (None: a stream, or a file that does not say). A file that cannot
    be opened gives None too: the ingest itself says what is wrong with it."""
    if source.startswith("file://"):
        source = source[len("file://"):]
    elif "://" in source:
        return None
    import av

    try:
        with av.open(source) as container:
            streams = container.streams.video or container.streams.audio
            main = streams[0] if streams else None
            if main is not None and main.duration is not None and main.time_base is not None:
                return float(main.duration * main.time_base)
            return container.duration / 1e6 if container.duration is not None else None
    except (av.error.FFmpegError, OSError):
        return None


def _eta(seconds: float | None) -> str:
    return "?" if seconds is None else str(timedelta(seconds=round(seconds)))


class PlainProgress(RecorderObserver):
    """Progress lines on stderr when it is not a terminal: at each 10 % of a file (at most one per
    ``PLAIN_MIN_SECONDS``), at least every ``PLAIN_MAX_SECONDS``, and at once when the state changes (a live
    source that drops and comes back)."""

    def __init__(self, stream: str, duration: float | None, *, realtime: bool = False) -> None:
        self.stream, self.duration, self.realtime = stream, duration, realtime
        self._last_line = time.monotonic()
        self._last_step = -1
        self._state: StreamState | None = None  # of the last line (or of the first commit)

    def _due(self, fraction: float | None) -> bool:
        waited = time.monotonic() - self._last_line
        if waited < PLAIN_MIN_SECONDS:
            return False
        step = -1 if fraction is None else int(fraction / PLAIN_STEP)
        return step > self._last_step or waited >= PLAIN_MAX_SECONDS

    def _line(self, text: str, fraction: float | None = None) -> None:
        self._last_line = time.monotonic()
        if fraction is not None:
            self._last_step = int(fraction / PLAIN_STEP)
        print(f"{self.stream}: {text}", file=sys.stderr, flush=True)

    def on_commit(self, progress: StreamProgress) -> None:
        i, c = progress.ingest, progress.caption
        fraction = min(1.0, i.ingested_until / self.duration) if self.duration else None
        state = writing_state(live=progress.live, realtime=self.realtime, down=i.down)
        changed, self._state = self._state not in (None, state), state
        if not changed and not self._due(fraction):
            return
        captions = "" if c is None else f" | captioned until {c.captioned_until:.1f} s"
        if fraction is None:
            where = f"media {i.ingested_until:.1f} s"
        else:
            assert self.duration is not None
            left = (self.duration - i.ingested_until) / i.realtime_factor if i.realtime_factor > 0 else None
            where = f"{fraction:4.0%} ({i.ingested_until:.1f} of {self.duration:.1f} s, eta {_eta(left)})"
        self._line(f"ingest {where} | {i.decode_fps:.1f} fps | {i.realtime_factor:.1f}x real time | "
                   f"{i.committed} frames stored{captions} | {state}", fraction)

    def on_drain(self, progress: StreamProgress) -> None:
        c = progress.caption
        assert c is not None  # only a recording with a captioner drains
        if time.monotonic() - self._last_line >= PLAIN_DRAIN_SECONDS:
            # the source has ended by itself (a drain follows only that): the stream is finished, its memory not yet
            self._line(f"captioning the backlog: {c.pending} spans left | {c.captions_per_second:.2f} captions/s | "
                       f"captioned until {c.captioned_until:.1f} s of {progress.ingest.ingested_until:.1f} s | "
                       f"{StreamState.FINISHED}")


class BarProgress(RecorderObserver, AbstractContextManager["BarProgress"]):
    """Rich bars on a terminal: ingest (%, ETA and speed when the length is known) and coarse captions."""

    def __init__(self, stream: str, duration: float | None, console: Console, *, realtime: bool = False) -> None:
        self.duration, self.realtime = duration, realtime
        self.bars = Progress(TextColumn("{task.description:<8}"), BarColumn(bar_width=24), TaskProgressColumn(),
                             TextColumn("{task.completed:>7.1f}/{task.fields[of]} s"),
                             TimeRemainingColumn(compact=True, elapsed_when_finished=True),
                             TextColumn("{task.fields[info]}"), console=console, refresh_per_second=4)
        self.ingest = self.bars.add_task(stream, total=duration, of=self._of(duration), info=StreamState.STARTING.value)
        self.captions: TaskID | None = None

    @staticmethod
    def _of(total: float | None) -> str:
        return "?" if total is None else f"{total:.1f}"

    def __enter__(self) -> Self:
        self.bars.start()
        self._follow_stderr()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.bars.stop()
        self._follow_stderr()

    @staticmethod
    def _follow_stderr() -> None:
        """Log lines go to the current ``sys.stderr``: the bars' proxy while they show (lines appear above them)."""
        for handler in logging.getLogger().handlers:
            if type(handler) is logging.StreamHandler:
                handler.setStream(sys.stderr)

    def on_started(self, progress: StreamProgress) -> None:
        # A resumed file starts where the last run ended: not progress of this run (it would skew the ETA).
        start = progress.ingest.media_start or 0.0
        self.bars.reset(self.ingest, total=self.duration, completed=start)

    def on_commit(self, progress: StreamProgress) -> None:
        i, c = progress.ingest, progress.caption
        state = writing_state(live=progress.live, realtime=self.realtime, down=i.down)
        self.bars.update(self.ingest, completed=i.ingested_until,
                         info=f"{state}, {i.decode_fps:.0f} fps, {i.realtime_factor:.1f}x")
        if c is not None:
            self._captions(c.captioned_until, i.ingested_until, f"{c.pending} spans to caption")

    def _captions(self, done: float, total: float, info: str) -> None:
        total = max(self.duration or 0.0, total)
        if self.captions is None:
            self.captions = self.bars.add_task("captions", total=total, of=self._of(total), info=info)
        self.bars.update(self.captions, completed=done, total=total, of=self._of(total), info=info)

    def on_ingest_end(self, progress: StreamProgress) -> None:
        until = progress.ingest.ingested_until
        self.bars.update(self.ingest, total=until, completed=until, of=self._of(until), info=StreamState.FINISHED.value)
        self.duration = until  # the captions' end: the length the file turned out to have

    def on_drain(self, progress: StreamProgress) -> None:
        c = progress.caption
        assert c is not None  # only a recording with a captioner drains
        self._captions(c.captioned_until, progress.ingest.ingested_until,
                       f"{c.pending} spans to caption")

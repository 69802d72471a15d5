"""The typed messages between the server and a stream's worker process (one pipe each way, pickled).

As vLLM's engine core and its front end exchange typed requests and outputs, the server and a stream worker
exchange the dataclasses below, matched by type, never tuples unpacked by position:

- server -> worker: :class:`StopRequest` (a closed pipe means the same: the server is gone);
- worker -> server: the stream's :class:`lucy.metrics.progress.StreamProgress` itself, twice a second and with
  each change of state; a :class:`lucy.metrics.CaptionCall` for each captioner request (the stream's caption
  metrics); a :class:`BusEvent` for the server's event bus (each new memory node); a :class:`StateChange` when
  frames start arriving and when a file has been read to its end; :class:`RunEnd` last, before the worker exits;
- and, made by the server's side of the pipe once the worker has exited: :class:`WorkerExit`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from lucy.metrics.progress import StreamProgress
from lucy.metrics.stats import CaptionCall


class StreamState(StrEnum):
    """A stream's state: the one vocabulary of the API, ``lucy streams``, the dashboard, MQTT (and Home Assistant)
    and the ``lucy_stream_state`` metric. The README's table of stream states says the same."""

    STARTING = "starting"  # opening the source (or waiting to restart a worker that died)
    RECORDING = "recording"  # frames arrive from a live source, or from a file read at its own pace (realtime)
    CATCHING_UP = "catching_up"  # a file is read faster than real time: what is stored is behind the file's end
    RECONNECTING = "reconnecting"  # a live source stopped delivering; it is reconnected with backoff
    FINISHED = "finished"  # a file was read to its end (its memory may still be captioned)
    STOPPED = "stopped"  # nobody writes the stream now and it did not end by itself (Ctrl-C, DELETE, shutdown)
    FAILED = "failed"  # a live source gave up, or the run failed (with an error)


def writing_state(*, live: bool | None, realtime: bool = False, down: bool = False) -> StreamState:
    """The state of a stream that a process is writing now: ``starting`` until its first frames are stored
    (``live`` None), then ``recording`` (a live source, or a file paced at its own speed), ``catching_up`` (a
    file read as fast as it decodes) or ``reconnecting`` (a live source that dropped, ``down``). What
    ``lucy ingest`` shows as it runs, and :func:`stored_state` of a stream whose writer lock is held (as the lock's
    record tells it: :meth:`lucy.ingest.lock.FileLock.tell`)."""
    if live is None:
        return StreamState.STARTING
    if live and down:
        return StreamState.RECONNECTING
    return StreamState.RECORDING if live or realtime else StreamState.CATCHING_UP


def stored_state(*, live: bool, complete: bool, lost: str | None, writing: bool, paced: bool = False,
                 down: bool = False) -> StreamState:
    """The state of a stream as its frame store and its writer lock tell it, for a stream this process does not
    run (one ``lucy ingest`` writes in another process, or one only stored): ``writing`` says whether a process
    holds the stream's writer lock now (:func:`lucy.ingest.lock.probe`), and ``paced`` and ``down`` what that
    writer's lock record says it is doing (a paced file; a live source being reconnected).

    A stream that a process writes is recording (live) or catching up (a file); else a file read to its end (or as
    far as a damaged file goes, ``lost``) is finished, a live source that gave up failed, and anything else (a live
    ingest ended by Ctrl-C, a file ingest interrupted) stopped. (A live ingest records no end in its store: it
    reads stopped once nobody writes it.)"""
    if writing:
        return writing_state(live=live, realtime=paced, down=down)
    if complete or (not live and lost is not None):
        return StreamState.FINISHED
    if live and lost is not None:
        return StreamState.FAILED
    return StreamState.STOPPED


@dataclass(frozen=True, slots=True)
class StopRequest:
    """Stop recording: finish what is being written, then end the run (:class:`RunEnd` ``stopped``)."""


@dataclass(frozen=True, slots=True)
class BusEvent:
    """An event for the server's bus (MQTT, the dashboard), e.g. ``{"type": "node", ...}``."""

    event: dict[str, Any]


@dataclass(frozen=True, slots=True)
class StateChange:
    """The run entered ``state`` (recording: frames arrive; finished: the source ended, captions are drained).
    Sent just after a progress record that goes with it."""

    state: StreamState


@dataclass(frozen=True, slots=True)
class RunEnd:
    """How a worker's run ended: ``state`` is stopped, finished or failed; texts are redacted."""

    state: StreamState
    error: str | None = None
    lost: str | None = None


@dataclass(frozen=True, slots=True)
class WorkerExit:
    """The worker process has exited (``exitcode`` as :class:`multiprocessing.Process` gives it)."""

    exitcode: int | None


WorkerMessage = StreamProgress | CaptionCall | BusEvent | StateChange | RunEnd
"""What a worker sends to the server."""

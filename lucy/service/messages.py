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
    """A stream's state, as the API, MQTT and the ``lucy_stream_state`` metric show it."""

    STARTING = "starting"
    RUNNING = "running"
    RECONNECTING = "reconnecting"
    STOPPED = "stopped"
    FAILED = "failed"
    FINISHED = "finished"


@dataclass(frozen=True, slots=True)
class StopRequest:
    """Stop recording: finish what is being written, then end the run (:class:`RunEnd` ``stopped``)."""


@dataclass(frozen=True, slots=True)
class BusEvent:
    """An event for the server's bus (MQTT, the dashboard), e.g. ``{"type": "node", ...}``."""

    event: dict[str, Any]


@dataclass(frozen=True, slots=True)
class StateChange:
    """The run entered ``state`` (running: frames arrive; finished: the source ended, captions are drained).
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

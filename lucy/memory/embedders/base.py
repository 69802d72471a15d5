"""The embedder boundary: memory text and questions as unit vectors, so that memory search can find meaning.

Full-text search finds the words of a question; a caption says the same thing in other words ("the lady at the
counter" against "a woman standing at the desk"). An :class:`Embedder` maps both to L2-normalised vectors whose
dot product is their cosine similarity. Vectors are stored beside the nodes, keyed by the model that made them, so a
change of model never mixes vectors of two models. An embedder whose vectors are several models' side by side
stores each model's part apart (:meth:`Embedder.parts`): adding or dropping a model keeps the others' vectors.

Embedders are synchronous (the local one is CPU work, the HTTP one a blocking client): callers on an event loop run
them in a thread. Backends are chosen from config (:func:`lucy.memory.embedders.make_embedder`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from lucy.errors import LucyError


class EmbedderError(LucyError):
    """The embedder could not embed (server down, timed out, malformed reply...): search falls back to words."""


class EmbedderUnavailable(EmbedderError):
    """The embedder cannot run on this machine at all (e.g. a CPU without the instructions its engine needs)."""


class Embedder(ABC):
    """Texts to unit vectors. Implementations must be safe to call from several threads."""

    name: str  # backend name, e.g. "local", "openai"
    model: str  # stable id of the model (and of anything that changes its vectors); vectors are stored under it
    dim: int  # length of every vector

    @abstractmethod
    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Memory texts as an ``(len(texts), dim)`` float32 matrix of L2-normalised rows.

        Raises :class:`EmbedderError` on failure."""

    @abstractmethod
    def embed_query(self, text: str) -> np.ndarray:
        """A question as a ``(dim,)`` float32 unit vector. Raises :class:`EmbedderError` on failure."""

    def parts(self) -> list[str]:
        """The ids under which a memory text's vector is stored, a part each: by default the whole vector, under
        :attr:`model`. :meth:`join` puts the parts' rows back together as :meth:`embed_passages` gives them."""
        return [self.model]

    def embed_parts(self, texts: list[list[str]]) -> list[np.ndarray]:
        """For each of :meth:`parts`, the unit rows (float32) of its own texts, ``texts[i]`` for part ``i``.
        Raises :class:`EmbedderError`."""
        return [self.embed_passages(texts[0])]

    def join(self, parts: list[np.ndarray]) -> np.ndarray:
        """The rows of each of :meth:`parts`, as this embedder's vectors."""
        return parts[0]

    def close(self) -> None:
        """Release the model or the HTTP client."""


def normalise(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` (rows) as float32 with unit L2 norm; an all-zero row stays zero (it matches nothing)."""
    out = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(out, axis=-1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0).astype(np.float32)

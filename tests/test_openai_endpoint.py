"""The OpenAI endpoint helper the four OpenAI-compatible backends share: a client and an in-flight limit per event
loop, closing what it made (not what it was given), and no API key or URL credentials in what it shows. Against a
real OpenAI-compatible HTTP server with scripted replies where a request is sent."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from lucy.openai_endpoint import OpenAIEndpoint
from lucy.testing.openai_server import Reply, ScriptedOpenAIServer

KEY = "sk-test-0123456789"


def _endpoint(base_url: str = "http://lucy:hunter2@127.0.0.1:9/v1", **kw: Any) -> OpenAIEndpoint:
    return OpenAIEndpoint(base_url, KEY, timeout_seconds=5, max_retries=0, **kw)


def test_a_client_per_event_loop_the_same_within_one() -> None:
    endpoint = _endpoint()

    async def clients() -> tuple[Any, Any]:
        try:
            return endpoint.client(), endpoint.client()
        finally:
            await endpoint.aclose()

    a1, a2 = asyncio.run(clients())
    b1, _ = asyncio.run(clients())
    assert a1 is a2 and b1 is not a1
    assert a1.max_retries == 0 and a1.timeout == 5 and str(a1.base_url).startswith("http://lucy:hunter2@")


def test_at_most_max_in_flight_at_once_per_loop() -> None:
    endpoint = _endpoint(max_in_flight=2)
    inside = 0
    most = 0

    async def one(release: asyncio.Event) -> None:
        nonlocal inside, most
        async with endpoint.slot():
            inside += 1
            most = max(most, inside)
            await release.wait()
            inside -= 1

    async def many() -> int:
        release = asyncio.Event()
        tasks = [asyncio.create_task(one(release)) for _ in range(5)]
        for _ in range(10):  # let every task run up to where it waits
            await asyncio.sleep(0)
        waiting = inside
        release.set()
        await asyncio.gather(*tasks)
        await endpoint.aclose()
        return waiting

    assert asyncio.run(many()) == 2 and most == 2
    # Another loop has its own places: a loop that ended holding none cannot starve it.
    assert asyncio.run(many()) == 2


def test_no_limit_and_bad_limits() -> None:
    endpoint = _endpoint()

    async def nested() -> bool:
        async with endpoint.slot() as first, endpoint.slot() as second:
            return first is second

    assert asyncio.run(nested())
    with pytest.raises(ValueError, match="max_in_flight"):
        _endpoint(max_in_flight=0)


def test_what_it_shows_hides_the_key_and_url_credentials() -> None:
    endpoint = _endpoint()
    assert "hunter2" not in endpoint.where and "127.0.0.1:9" in endpoint.where
    assert "hunter2" not in repr(endpoint) and KEY not in repr(endpoint)
    scrubbed = endpoint.scrub(f"bad key {KEY} for http://lucy:hunter2@127.0.0.1:9/v1?token=abc")
    assert KEY not in scrubbed and "hunter2" not in scrubbed and "abc" not in scrubbed and "bad key" in scrubbed
    short = OpenAIEndpoint("http://h/v1", "EMP", timeout_seconds=1, max_retries=0)
    assert short.scrub("EMPTY words") == "EMPTY words"  # a key too short to hide leaves words alone


def test_closes_what_it_made_not_what_it_was_given() -> None:
    class Given:
        closed = 0

        async def close(self) -> None:
            self.closed += 1

    given = Given()
    endpoint = _endpoint(client=given)

    async def use() -> Any:
        client = endpoint.client()
        await endpoint.aclose()
        return client

    assert asyncio.run(use()) is given and given.closed == 0

    made = _endpoint()

    async def made_closed() -> bool:
        client = made.client()
        await made.aclose()
        return client.is_closed()

    assert asyncio.run(made_closed())


def test_the_sync_client_one_for_every_thread_and_a_real_request() -> None:
    with ScriptedOpenAIServer([Reply()] * 4) as server:
        endpoint = OpenAIEndpoint(server.base_url, KEY, timeout_seconds=10, max_retries=0)
        seen: list[Any] = []

        def embed() -> None:
            client = endpoint.sync_client()
            client.embeddings.create(model="m", input=["x"], encoding_format="float")
            seen.append(client)

        threads = [threading.Thread(target=embed) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        endpoint.close()
    assert len(seen) == 4 and all(c is seen[0] for c in seen) and len(server.requests) == 4
    assert server.headers[0]["authorization"] == f"Bearer {KEY}"

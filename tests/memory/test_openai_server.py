"""The scripted OpenAI-compatible server: a real HTTP server that the openai client talks to unchanged."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import openai
import pytest

from lucy.testing.openai_server import Reply, ScriptedOpenAIServer

MESSAGES = [{"role": "user", "content": "hi"}]


def _post(url: str, body: bytes, timeout: float = 10) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_models_and_scripted_replies_in_order_then_last_repeats():
    replies = [Reply("first", prompt_tokens=3, completion_tokens=1), Reply("second")]
    with ScriptedOpenAIServer(replies, model="my-vlm") as server:
        assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        assert [m.id for m in client.models.list().data] == ["my-vlm"]
        texts = [client.chat.completions.create(model="m", messages=MESSAGES, temperature=0.0)
                 for _ in range(3)]
        assert [t.choices[0].message.content for t in texts] == ["first", "second", "second"]
        assert texts[0].usage.prompt_tokens == 3 and texts[0].usage.total_tokens == 4
        assert texts[0].model == "m"  # echoes the model asked for, as vLLM does
        assert len(server.requests) == 3 and server.requests[0]["temperature"] == 0.0
        assert server.headers[0]["authorization"] == "Bearer k"
        client.close()


def test_callable_script_sees_each_body():
    with ScriptedOpenAIServer(lambda body: Reply(f"echo {body['messages'][-1]['content']}")) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "ping"}])
        assert reply.choices[0].message.content == "echo ping"
        client.close()


def test_error_statuses_raw_bodies_and_bad_requests():
    replies = [Reply(status=503, headers={"retry-after": "7"}), Reply("slow down", status=429),
               Reply(raw_body="{not json", status=200), Reply(raw_body="<html>Bad gateway</html>", status=502)]
    with ScriptedOpenAIServer(replies) as server:
        url = server.base_url + "/chat/completions"
        body = json.dumps({"model": "m", "messages": MESSAGES}).encode()
        status, text = _post(url, body)
        assert status == 503 and json.loads(text)["error"]["message"] == "Service Unavailable"
        status, text = _post(url, body)
        assert status == 429 and json.loads(text)["error"] == {
            "message": "slow down", "type": "rate_limit_exceeded", "param": None, "code": 429}
        assert _post(url, body) == (200, "{not json")
        assert _post(url, body) == (502, "<html>Bad gateway</html>")
        # A malformed request is refused by the server itself and not recorded as a scripted request.
        assert _post(url, b"{oops")[0] == 400
        assert _post(url, json.dumps({"model": "m"}).encode())[0] == 400
        assert len(server.requests) == 4


def test_retry_after_header_reaches_the_client():
    with ScriptedOpenAIServer([Reply(status=503, headers={"retry-after": "7"})]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        with pytest.raises(openai.InternalServerError) as caught:
            client.chat.completions.create(model="m", messages=MESSAGES)
        assert caught.value.status_code == 503 and caught.value.response.headers["retry-after"] == "7"
        client.close()


def test_stream_true_sends_sse_chunks_with_usage():
    with ScriptedOpenAIServer([Reply("a red  car\nturns left", prompt_tokens=12, completion_tokens=6)]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True,
                                                stream_options={"include_usage": True})
        pieces, finish, usage = [], None, None
        for chunk in stream:
            if chunk.choices:
                pieces.append(chunk.choices[0].delta.content or "")
                finish = chunk.choices[0].finish_reason or finish
            if chunk.usage:
                usage = chunk.usage
        assert "".join(pieces) == "a red  car\nturns left"
        assert [p for p in pieces if p] == ["a ", "red  ", "car\n", "turns ", "left"]  # word by word
        assert finish == "stop" and usage.prompt_tokens == 12 and usage.completion_tokens == 6
        client.close()


def test_capacity_and_latency_give_capacity_over_latency_throughput():
    latency, capacity, count = 0.25, 4, 24

    async def run(base_url: str) -> float:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0)
        await client.chat.completions.create(model="m", messages=MESSAGES)  # warm the connection pool
        began = time.perf_counter()
        await asyncio.gather(*(client.chat.completions.create(model="m", messages=MESSAGES)
                               for _ in range(count)))
        took = time.perf_counter() - began
        await client.close()
        return took

    with ScriptedOpenAIServer(latency=latency, capacity=capacity) as server:
        took = asyncio.run(run(server.base_url))
        assert server.peak_in_flight == capacity
        holds = server.holds[1:]  # the warm-up request aside
    ideal = count / capacity * latency  # 6 rounds of 0.25 s
    # The server side is exact: each request holds a slot for the latency, never more than C at once, and a
    # freed slot is taken again at once while requests wait.
    assert len(holds) == count
    assert all(latency <= end - start <= latency + 0.1 for start, end in holds)
    events = sorted([(start, 1) for start, _ in holds] + [(end, -1) for _, end in holds])
    assert max(np.cumsum([step for _, step in events])) == capacity
    busy = max(end for _, end in holds) - min(start for start, _ in holds)
    # The time bounds are loose on purpose (the server shares 2 cores with the client and whatever else runs): the
    # exact properties are the concurrency and the holds above; these only catch requests served one after another
    # (C times the ideal) or faster than C / L.
    assert ideal <= busy <= ideal * 1.5, (busy, ideal)
    assert ideal * 0.97 <= took <= ideal * 2.0, (took, ideal)


def test_reply_delay_and_prompt_stop_with_requests_pending():
    with ScriptedOpenAIServer([Reply("fast"), Reply("slow", delay=30)]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=60)
        assert client.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content == "fast"
        outcome: list[object] = []

        def slow_call() -> None:
            try:
                outcome.append(client.chat.completions.create(model="m", messages=MESSAGES))
            except openai.OpenAIError as err:
                outcome.append(err)

        thread = threading.Thread(target=slow_call)
        thread.start()
        deadline = time.monotonic() + 5
        while server.in_flight == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.in_flight == 1
        began = time.monotonic()
        server.stop()
        assert time.monotonic() - began < 5  # does not wait out the 30 s reply
        thread.join(10)
        assert len(outcome) == 1 and isinstance(outcome[0], openai.OpenAIError)
        client.close()


def test_refuses_impossible_settings():
    with pytest.raises(ValueError):
        ScriptedOpenAIServer([])
    with pytest.raises(ValueError):
        ScriptedOpenAIServer(capacity=0)
    with pytest.raises(ValueError):
        ScriptedOpenAIServer(latency=-1)

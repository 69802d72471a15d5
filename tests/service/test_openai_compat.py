"""``/v1/chat/completions`` and ``/v1/models`` with the official ``openai`` package, as any client would use them."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from lucy.query.trace import progress_line
from tests.service.conftest import LucyServer


@pytest.fixture(scope="module")
def yard(shared_server: LucyServer, videos: dict[str, Path]) -> dict:
    with shared_server.client() as c:
        r = c.post("/v1/streams", json={"name": "yard", "source": str(videos["b"])})
        assert r.status_code == 201, r.text
    return shared_server.wait_captioned("yard")


def _client(server: LucyServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token or "unused", timeout=180, max_retries=0)


def test_models_list_streams(shared_server: LucyServer, yard: dict) -> None:
    ids = [m.id for m in _client(shared_server).models.list()]
    assert "yard" in ids


def test_chat_completion(shared_server: LucyServer, yard: dict) -> None:
    client = _client(shared_server)
    reply = client.chat.completions.create(model="yard", messages=[
        {"role": "system", "content": "You answer about the camera."},
        {"role": "user", "content": "What platform does the train depart from?"}])
    assert reply.object == "chat.completion" and reply.model == "yard"
    choice = reply.choices[0]
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    lucy = reply.model_extra["lucy"]  # the full answer object rides along
    assert choice.message.content.startswith(lucy["answer"])
    assert lucy["horizon"] == pytest.approx(150.0, abs=1.0) and lucy["trace"]
    # The embedded reasoner counts no tokens: usage is estimated from the text, and says so.
    assert reply.usage is not None and reply.usage.model_extra["estimated"] is True
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    history = [q["question"] for q in shared_server_questions(shared_server, "yard")]
    assert "What platform does the train depart from?" in history


def shared_server_questions(server: LucyServer, stream: str) -> list[dict]:
    with server.client() as c:
        return c.get(f"/v1/streams/{stream}/questions").json()["questions"]


def test_chat_completion_streamed(shared_server: LucyServer, yard: dict) -> None:
    """Progress comes first, a line as each step begins, as ``reasoning_content`` (which the client keeps); then the
    answer as content; then, asked for with ``stream_options``, OpenAI's usage chunk."""
    client = _client(shared_server)
    stream = client.chat.completions.create(
        model="yard", stream=True, messages=[{"role": "user", "content": "What time does platform 7 depart?"}],
        stream_options={"include_usage": True})
    reasoning, content, finish, final, usage = [], [], [], None, []
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk" and chunk.model == "yard"
        if chunk.usage is not None:
            usage.append(chunk.usage)
        if not chunk.choices:
            assert chunk.usage is not None, "the only chunk without choices is the usage chunk"
            continue
        delta = chunk.choices[0].delta
        extra = delta.model_extra or {}
        if extra.get("reasoning_content"):
            assert not content, "the trace comes before the answer"
            reasoning.append(extra["reasoning_content"])
        if delta.content:
            content.append(delta.content)
        if chunk.choices[0].finish_reason:
            finish.append(chunk.choices[0].finish_reason)
            final = chunk.model_extra.get("lucy")
    assert finish == ["stop"] and final is not None
    # One line per trace step, sent as it began: what it was about to do, in words.
    lines = [r for r in reasoning if not r.startswith("  ")]  # the steps' own (captions made, a failure: indented)
    assert lines[0] == "opening the memory of yard …\n" and all(r.endswith("…\n") for r in lines)
    assert [r.rstrip("\n") for r in lines[1:]] == [progress_line(s) for s in final["trace"]]
    assert "".join(content).startswith(final["answer"])
    assert len(usage) == 1 and usage[0].prompt_tokens > 0 and usage[0].completion_tokens > 0
    assert usage[0].model_extra["estimated"] is True


def test_chat_multiple_choice(shared_server: LucyServer, yard: dict) -> None:
    options = ["platform 3", "platform 7", "platform 9", "platform 12"]
    reply = _client(shared_server).chat.completions.create(
        model="yard", messages=[{"role": "user", "content": "Which platform was announced?"}],
        extra_body={"options": options})
    lucy = reply.model_extra["lucy"]
    assert lucy["options"] == options and lucy["option_index"] in range(4)
    assert lucy["answer"] == options[lucy["option_index"]] or lucy["answer"]


def test_chat_errors(shared_server: LucyServer, yard: dict) -> None:
    client = _client(shared_server)
    with pytest.raises(openai.NotFoundError) as err:
        client.chat.completions.create(model="no-such-stream", messages=[{"role": "user", "content": "hi?"}])
    assert "models are stream names" in str(err.value)
    with pytest.raises(openai.UnprocessableEntityError):
        client.chat.completions.create(model="yard", messages=[{"role": "user", "content": "   "}])
    with pytest.raises(openai.UnprocessableEntityError):
        client.chat.completions.create(model="yard", messages=[{"role": "system", "content": "no question"}])
    with pytest.raises(openai.UnprocessableEntityError):
        client.chat.completions.create(model="yard", messages=[{"role": "user", "content": "x" * 501}])

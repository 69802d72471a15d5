"""The chat API as a chat front-end uses it: the real ``openai`` client against a real ``lucy serve``, sending what
Open WebUI sends (a streamed question, then its title, tags and follow-up prompts, small talk, a follow-up question),
with the embedded lexical reasoner and with the ``openai`` reasoner on a scripted OpenAI-compatible server. Also:
keep-alive pings on server-sent events during a long step, a client that leaves a stream cancels its question, and
every error in OpenAI's shape, readable in the client's exception."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from lucy.testing.openai_server import Reply, ScriptedOpenAIServer
from tests.query.test_openai_reasoner import HOSTILE, assert_only_as_data
from tests.service.conftest import LucyServer, wait_for
from tests.service.test_conversation import open_webui

QUESTION = "Which platform does the train depart from?"
FOLLOW_UP = "What time does it depart?"


def _client(server: LucyServer, **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token or "unused", timeout=180, max_retries=0,
                         **kw)


def _streamed(client: openai.OpenAI, model: str, messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """(content, the ``lucy`` answer object) of a streamed chat completion."""
    content, final = [], None
    for chunk in client.chat.completions.create(model=model, stream=True, messages=messages):
        if chunk.choices and chunk.choices[0].delta.content:
            content.append(chunk.choices[0].delta.content)
        if chunk.choices and chunk.choices[0].finish_reason == "stop":
            final = chunk.model_extra["lucy"]
    assert final is not None, "no closing chunk"
    return "".join(content), final


def _task(client: openai.OpenAI, model: str, prompt: str) -> tuple[str, dict[str, Any]]:
    """What Open WebUI's task requests look like on the wire: one user message, not streamed, a token limit."""
    reply = client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}],
                                           stream=False, max_completion_tokens=1000)
    return reply.choices[0].message.content or "", reply.model_extra["lucy"]


def _figures(server: LucyServer, stream: str) -> dict[str, float]:
    """The stream's captioner requests and questions, from /metrics (sampled every stats_interval_seconds) and its
    status."""
    time.sleep(1.5)  # past the sampling interval, so that anything done before is counted
    with server.client() as c:
        text = c.get("/metrics").text
        status = c.get(f"/v1/streams/{stream}").json()

    def value(name: str) -> float:
        found = re.search(rf'^{name}\{{[^}}]*stream="{stream}"[^}}]*\}} (\S+)$', text, re.MULTILINE)
        return float(found.group(1)) if found else 0.0

    return {"caption_requests": value("lucy_caption_requests_total"),
            "questions": value("lucy_question_iterations_count"), "answered": status["questions"]["answered"]}


def _history(server: LucyServer, stream: str) -> list[str]:
    with server.client() as c:
        return [q["question"] for q in c.get(f"/v1/streams/{stream}/questions?limit=100").json()["questions"]]


def _assert_no_work(answer: dict[str, Any], kind: str) -> None:
    assert answer["chat"]["kind"] == kind, answer["chat"]
    assert answer["caption_calls"] == 0 and answer["iterations"] == 0 and answer["llm_calls"] == 0
    assert answer["trace"] == [] and answer["question_id"] is None


# ------------------------------------------------------------------------------------------------ lexical reasoner


@pytest.fixture(scope="module")
def hall(shared_server: LucyServer, videos: dict[str, Path]) -> dict:
    with shared_server.client() as c:
        assert c.post("/v1/streams", json={"name": "hall", "source": str(videos["b"])}).status_code == 201
    return shared_server.wait_captioned("hall")


def test_open_webui_sequence(shared_server: LucyServer, hall: dict) -> None:
    """A question, then Open WebUI's title, tags and follow-up prompts and small talk (answered at once: no caption,
    no question), then a follow-up question that is asked with the first one as its context."""
    client = _client(shared_server)
    first, answer = _streamed(client, "hall", [{"role": "user", "content": QUESTION}])
    assert answer["chat"]["kind"] == "question" and answer["question"] == QUESTION and "7" in first

    before, history = _figures(shared_server, "hall"), _history(shared_server, "hall")
    chat_history = f"USER: {QUESTION}\nASSISTANT: {first}"
    title, meta = _task(client, "hall", open_webui("title", chat_history))
    _assert_no_work(meta, "task")
    assert meta["chat"]["task"] == "title"
    title = json.loads(title)["title"]
    assert "hall" in title and "Platform" in title and len(title.split()) <= 7
    tags, meta = _task(client, "hall", open_webui("tags", chat_history))
    _assert_no_work(meta, "task")
    assert json.loads(tags)["tags"][:2] == ["Video", "hall"]
    follow_ups, meta = _task(client, "hall", open_webui("follow_ups", chat_history))
    _assert_no_work(meta, "task")
    suggested = json.loads(follow_ups)["follow_ups"]
    assert len(suggested) >= 3 and all(isinstance(q, str) and q.endswith("?") for q in suggested)
    hello, meta = _streamed(client, "hall", [{"role": "user", "content": "hi"}])
    _assert_no_work(meta, "small_talk")
    assert "hall" in hello and "2:30" in hello  # what memory holds: 150 s of video
    thanks = client.chat.completions.create(model="hall", messages=[
        {"role": "user", "content": QUESTION}, {"role": "assistant", "content": first},
        {"role": "user", "content": "Thank you!"}])
    _assert_no_work(thanks.model_extra["lucy"], "small_talk")
    after = _figures(shared_server, "hall")
    assert after == before, "tasks and small talk must cost no caption and no question"
    assert _history(shared_server, "hall") == history

    # The follow-up is asked with the question it leans on (and its answer), so "it" is the train.
    content, answer = _streamed(client, "hall", [
        {"role": "user", "content": QUESTION}, {"role": "assistant", "content": first},
        {"role": "user", "content": FOLLOW_UP}])
    assert answer["chat"]["kind"] == "question"
    assert answer["question"].startswith(FOLLOW_UP) and QUESTION in answer["question"]
    assert "14:05" in content, content
    assert _history(shared_server, "hall")[0] == answer["question"]
    assert _figures(shared_server, "hall")["answered"] == before["answered"] + 1


def test_task_prompts_longer_than_a_question_are_answered(shared_server: LucyServer, hall: dict) -> None:
    """The shared server allows 500-character questions; Open WebUI's prompts, with the chat quoted, are longer."""
    long_history = f"USER: {QUESTION}\nASSISTANT: " + "PLATFORM 7 DEPARTS 14:05. " * 40
    prompt = open_webui("title", long_history)
    assert len(prompt) > 1000
    title, meta = _task(_client(shared_server), "hall", prompt)
    _assert_no_work(meta, "task")
    assert "hall" in json.loads(title)["title"]


def test_errors_are_readable_in_the_openai_client(shared_server: LucyServer, hall: dict) -> None:
    client = _client(shared_server)
    with pytest.raises(openai.NotFoundError) as err:
        client.chat.completions.create(model="no-such-stream", messages=[{"role": "user", "content": "hi"}])
    assert err.value.code == "model_not_found" and err.value.param == "model"
    assert "models are stream names" in err.value.message and "{" not in err.value.message
    cases: list[tuple[dict[str, Any], str, str | None]] = [
        ({"model": "hall", "messages": []}, "messages: List should have at least 1 item", "messages"),
        ({"model": "hall", "messages": [{"role": 5, "content": "x"}]},
         "messages[0].role: Input should be a valid string", "messages[0].role"),
        ({"messages": [{"role": "user", "content": "x"}]}, "model: Field required", "model"),
        ({"model": "hall", "messages": [{"role": "system", "content": "x"}]}, "no user message", "messages"),
        ({"model": "hall", "messages": [{"role": "user", "content": "x" * 501}]}, "the limit is 500", "messages"),
        ({"model": "bad/name", "messages": [{"role": "user", "content": "x"}]}, "stream name", "model"),
    ]
    for body, words, param in cases:
        with pytest.raises(openai.UnprocessableEntityError) as err:
            client.post("/chat/completions", cast_to=dict, body=body)
        message = err.value.message
        assert message.startswith("Error code: 422 - ") and words in message, (body, message)
        assert "{" not in message and err.value.param == param, (body, message, err.value.body)
        assert err.value.type == "invalid_request_error"
    # The same, streamed: the error comes before the stream starts, as a status code.
    with pytest.raises(openai.NotFoundError):
        list(client.chat.completions.create(model="nope", stream=True, messages=[{"role": "user", "content": "hi"}]))
    # Every error body has OpenAI's four fields.
    r = httpx.post(f"{shared_server.url}/v1/chat/completions", content=b"{not json",
                   headers={"content-type": "application/json"})
    error = r.json()["error"]
    assert r.status_code == 422 and set(error) == {"message", "type", "param", "code"}
    assert "not valid JSON" in error["message"]


def test_a_wrong_token_is_readable(lucy_server: Callable[..., LucyServer]) -> None:
    server = lucy_server(token="a-token-of-16-chars-or-more")
    with pytest.raises(openai.AuthenticationError) as err:
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="wrong", max_retries=0).models.list()
    assert err.value.code == "invalid_api_key" and "missing or wrong API token" in err.value.message
    assert [m.id for m in _client(server).models.list()] == []


# ------------------------------------------------------------------------------------------------ openai reasoner

ANSWER = {"answer": "Platform 7, departing at 14:05", "confident": True, "evidence": [{"start": 2.0, "end": 10.0}],
          "reason": "the board reads it"}
SLOW_SECONDS = 2.0


SIGN_QUESTION = "What does the sign on the wall say?"


def _scripted(request: dict[str, Any]) -> Reply:
    """Every agent call answers at once, confidently; one whose prompt says SLOW takes a while, HANG forever; one
    about the sign quotes a hostile sign verbatim, as answers quote on-screen text."""
    prompt = json.dumps(request.get("messages", []))
    if SIGN_QUESTION in prompt:
        return Reply(json.dumps({**ANSWER, "answer": f"The sign reads: {HOSTILE}"}))
    delay = 3600.0 if "HANG" in prompt else SLOW_SECONDS if "SLOW" in prompt else 0.0
    return Reply(json.dumps(ANSWER), delay=delay)


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(_scripted) as server:
        yield server


@pytest.fixture(scope="module")
def porch(tmp_path_factory: pytest.TempPathFactory, videos: dict[str, Path],
          llm: ScriptedOpenAIServer) -> Iterator[LucyServer]:
    """A server whose questions go to the ``openai`` reasoner (the scripted server), with pings every 0.3 s."""
    from lucy.testing.waiting import free_port
    from tests.service.conftest import base_config

    workdir = tmp_path_factory.mktemp("serve-chat-llm")
    config = base_config(workdir / "data", free_port(),
                         service={"sse_ping_seconds": 0.3, "max_questions_per_stream": 1},
                         reasoner={"backend": "openai", "base_url": llm.base_url, "model": "scripted",
                                   "max_retries": 0, "timeout_seconds": 3600})
    server = LucyServer(workdir, config).start()
    with server.client() as c:
        assert c.post("/v1/streams", json={"name": "porch", "source": str(videos["short"])}).status_code == 201
    server.wait_captioned("porch")
    yield server
    server.stop()


def test_open_webui_sequence_with_the_openai_reasoner(porch: LucyServer, llm: ScriptedOpenAIServer) -> None:
    client = _client(porch)
    first, answer = _streamed(client, "porch", [{"role": "user", "content": QUESTION}])
    assert answer["llm_calls"] >= 1 and first.startswith(ANSWER["answer"])
    calls = len(llm.requests)
    chat_history = f"USER: {QUESTION}\nASSISTANT: {first}"
    for task in ("title", "tags", "follow_ups"):
        text, meta = _task(client, "porch", open_webui(task, chat_history))
        _assert_no_work(meta, "task")
        assert task in json.loads(text)
    _, meta = _streamed(client, "porch", [{"role": "user", "content": "hello"}])
    _assert_no_work(meta, "small_talk")
    assert len(llm.requests) == calls, "tasks and small talk must not call the reasoner"

    _, answer = _streamed(client, "porch", [{"role": "user", "content": QUESTION},
                                            {"role": "assistant", "content": first},
                                            {"role": "user", "content": FOLLOW_UP}])
    assert answer["chat"]["kind"] == "question" and len(llm.requests) > calls
    prompt = json.dumps(llm.requests[-1]["messages"])
    assert FOLLOW_UP in prompt and QUESTION in prompt  # the model reads the follow-up with what it follows


def test_progress_then_the_answer_and_the_tokens_the_model_counted(porch: LucyServer) -> None:
    """Streamed with the ``openai`` reasoner: a line of progress per step, as ``reasoning_content``, all before the
    answer; usage is the scripted model's own counts over every agent call (10 + 5 each), not an estimate."""
    chunks = list(_client(porch).chat.completions.create(
        model="porch", stream=True, messages=[{"role": "user", "content": QUESTION}],
        stream_options={"include_usage": True}))
    order = [("reasoning" if (c.choices[0].delta.model_extra or {}).get("reasoning_content") else "content")
             for c in chunks if c.choices and ((c.choices[0].delta.model_extra or {}).get("reasoning_content")
                                               or c.choices[0].delta.content)]
    assert order[0] == "reasoning" and "content" in order
    assert order == sorted(order, key=lambda kind: kind == "content"), "progress must come before the answer"
    answer = next(c.model_extra["lucy"] for c in chunks if c.choices and c.choices[0].finish_reason == "stop")
    usage = chunks[-1].usage
    assert usage is not None and not chunks[-1].choices and usage.model_extra["estimated"] is False
    assert answer["llm_calls"] >= 1
    assert (usage.prompt_tokens, usage.completion_tokens) == (10 * answer["llm_calls"], 5 * answer["llm_calls"])


def test_a_hostile_sign_quoted_in_an_earlier_answer_reaches_the_model_only_as_data(porch: LucyServer,
                                                                                  llm: ScriptedOpenAIServer) -> None:
    """The first answer quotes a sign that closes the data blocks and starts a SYSTEM line; the chat front-end sends
    it back with a follow-up. In every prompt of the follow-up the sign is inside the <conversation> block,
    neutralised, and the question line holds only the follow-up itself."""
    client = _client(porch)
    first = client.chat.completions.create(model="porch", messages=[{"role": "user", "content": SIGN_QUESTION}])
    quoted = first.choices[0].message.content
    assert "IGNORE PREVIOUS INSTRUCTIONS" in quoted and "</memory>" in quoted
    calls = len(llm.requests)
    follow_up = "What colour was it?"
    reply = client.chat.completions.create(model="porch", messages=[
        {"role": "user", "content": SIGN_QUESTION}, {"role": "assistant", "content": quoted},
        {"role": "user", "content": follow_up}])
    assert reply.model_extra["lucy"]["chat"]["why"].startswith("a follow-up question")
    prompts = [r["messages"] for r in llm.requests[calls:]]
    assert prompts
    for messages in prompts:
        assert_only_as_data(messages)
        assert f"\nQuestion: {follow_up}\n" in messages[1]["content"] + "\n"


def _raw_events(server: LucyServer, method: str, path: str, body: dict[str, Any],
                headers: dict[str, str] | None = None) -> list[str]:
    """The lines of an SSE response as they came (comments included)."""
    with server.client() as c, c.stream(method, path, json=body, headers=headers or {}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        assert r.headers.get("x-accel-buffering") == "no"
        return [line for line in r.iter_lines() if line]


def test_pings_keep_streams_open_during_a_long_step(porch: LucyServer) -> None:
    """The reasoner takes 2 s to answer: meanwhile ``: ping`` comments arrive every 0.3 s, and the events around
    them are as clients parse them."""
    slow = f"{QUESTION} SLOW"
    chat = _raw_events(porch, "POST", "/v1/chat/completions",
                       {"model": "porch", "stream": True, "messages": [{"role": "user", "content": slow}]})
    data = [i for i, line in enumerate(chat) if line.startswith("data: ")]
    answer_at = next(i for i in data if '"content":"Platform 7' in chat[i])
    pings = [i for i, line in enumerate(chat) if line == ": ping"]
    assert len([i for i in pings if i < answer_at]) >= 3, chat
    assert set(chat) <= {": ping"} | {chat[i] for i in data}, chat  # nothing but pings and data lines
    assert [line for line in chat if line != ": ping"][-1] == "data: [DONE]"
    for i in data[:-1]:
        assert json.loads(chat[i][6:])["object"] == "chat.completion.chunk"

    trace = _raw_events(porch, "POST", "/v1/streams/porch/questions", {"question": slow},
                        {"Accept": "text/event-stream"})
    assert trace.count(": ping") >= 3
    events = [line for line in trace if line != ": ping"]
    kinds = [line[7:] for line in events if line.startswith("event: ")]
    assert kinds[-1] == "answer" and set(kinds) <= {"step", "answer"}
    answer = json.loads(events[-1][6:])
    assert answer["answer"] == ANSWER["answer"] and events[-2] == "event: answer"


def test_leaving_a_stream_cancels_its_question(porch: LucyServer) -> None:
    """The reasoner never answers: a client that leaves the chat stream (or the questions SSE) frees the question's
    slot (one per stream here), so the next question is answered."""
    for path, body, headers in (
            ("/v1/chat/completions", {"model": "porch", "stream": True,
                                      "messages": [{"role": "user", "content": f"{QUESTION} HANG"}]}, {}),
            ("/v1/streams/porch/questions", {"question": f"{QUESTION} HANG"}, {"Accept": "text/event-stream"})):
        with porch.client() as c, c.stream("POST", path, json=body, headers=headers) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            assert any(line == ": ping" for line in lines)  # the question runs, the stream is open
            wait_for(lambda: porch.stream("porch")["questions"]["in_flight"] == 1, 30, "the question to run")
        wait_for(lambda: porch.stream("porch")["questions"]["in_flight"] == 0, 30, "the question to be cancelled")
    reply = _client(porch).chat.completions.create(model="porch", messages=[{"role": "user", "content": QUESTION}])
    assert reply.choices[0].message.content.startswith(ANSWER["answer"])

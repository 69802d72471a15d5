"""A server that runs for months: nothing grows with the questions answered, and one stream's dead captioner
takes nothing from another stream's questions."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai

from lucy.testing.openai_server import ScriptedOpenAIServer
from tests.service.conftest import LucyServer, wait_for

QUESTIONS = ["What text was shown on screen?", "What colours were shown?", "How many orange boxes were there?"]


def _resources(pid: int) -> tuple[int, int]:
    """(open file descriptors, threads) of a process: the least of a few looks, so that a file the server's
    background tasks (figures, retention) hold open for a moment does not count."""
    looks = []
    for _ in range(6):
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        status = Path(f"/proc/{pid}/status").read_text()
        threads = int(next(line.split()[1] for line in status.splitlines() if line.startswith("Threads:")))
        looks.append((fds, threads))
        time.sleep(0.25)
    return min(f for f, _ in looks), min(t for _, t in looks)


def _ask_every_way(server: LucyServer, stream: str, i: int) -> None:
    question = QUESTIONS[i % len(QUESTIONS)]
    with server.client(timeout=120) as c:
        if i % 3 == 1:
            with c.stream("POST", f"/v1/streams/{stream}/questions", json={"question": question},
                          headers={"Accept": "text/event-stream"}) as r:
                assert r.status_code == 200 and any(line.startswith("event: answer") for line in r.iter_lines())
        elif i % 3 == 2:
            with openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", timeout=120, max_retries=0) as client:
                reply = client.chat.completions.create(model=stream, messages=[{"role": "user", "content": question}])
            assert reply.choices[0].message.content
        else:
            r = c.post(f"/v1/streams/{stream}/questions", json={"question": question})
            assert r.status_code == 200, r.text


def test_questions_leak_no_descriptors_or_threads(lucy_server: Callable[..., LucyServer],
                                                  videos: dict[str, Path]) -> None:
    """Each question used to leave its SQLite connection (and ~1 MB) behind: 67 questions exhausted
    ``ulimit -n 256``. Descriptors and threads now stay flat however many questions are answered."""
    server = lucy_server()
    with server.client() as c:
        assert c.post("/v1/streams", json={"name": "cam", "source": str(videos["a"])}).status_code == 201
    server.wait_captioned("cam")
    assert server.proc is not None
    pid = server.proc.pid
    seen = []
    with ThreadPoolExecutor(max_workers=3) as pool:
        for _ in range(3):  # the first round warms up: lazy imports, thread pools growing to their fixed size
            list(pool.map(lambda i: _ask_every_way(server, "cam", i), range(60)))
            seen.append(_resources(pid))
    (_, _), (fds, threads), (fds_end, threads_end) = seen
    # A leak of the old kind would add ~200 descriptors per round. The slack covers a pool thread still starting
    # (3: its database, WAL and shared-memory files) and client connections the server has not yet seen close.
    assert fds_end <= fds + 8, f"descriptors grew from {fds} to {fds_end} over 60 questions ({seen})"
    assert threads_end <= threads + 1, f"threads grew from {threads} to {threads_end} over 60 questions ({seen})"


def test_a_hung_captioner_takes_nothing_from_other_streams(lucy_server: Callable[..., LucyServer],
                                                           videos: dict[str, Path]) -> None:
    """A stream whose captioner never replies: its questions answer from memory within seconds, saying the
    captioner is unavailable, and questions about a healthy stream are answered meanwhile."""
    with ScriptedOpenAIServer(latency=3600) as hung:
        server = lucy_server(captioner={"openai": {"base_url": hung.base_url, "max_retries": 0}},
                             query={"caption_timeout_seconds": 2.0},
                             service={"max_concurrent_questions": 3, "max_questions_per_stream": 2})
        with server.client() as c:
            assert c.post("/v1/streams", json={"name": "ok", "source": str(videos["a"])}).status_code == 201
            assert c.post("/v1/streams", json={"name": "stuck", "source": str(videos["b"]),
                                               "captioner": "openai"}).status_code == 201
        server.wait_captioned("ok")
        wait_for(lambda: server.stream("stuck")["ingested_until"] > 100, 120, "the stuck stream to have frames")

        def stuck(i: int) -> dict:
            with server.client(timeout=120) as c:
                r = c.post("/v1/streams/stuck/questions", json={"question": QUESTIONS[i % 3]})
            assert r.status_code == 200, r.text
            return r.json()

        healthy: list[int] = []

        def ask_healthy() -> None:
            for i in range(4):
                with server.client(timeout=120) as c:
                    healthy.append(c.post("/v1/streams/ok/questions", json={"question": QUESTIONS[i % 3]}).status_code)

        other = threading.Thread(target=ask_healthy)
        other.start()
        with ThreadPoolExecutor(max_workers=6) as pool:
            answers = list(pool.map(stuck, range(6)))
        other.join(120)
        assert healthy == [200, 200, 200, 200]
        for answer in answers:
            assert not answer["confident"]
            assert any("unavailable" in e or "no caption within" in e for e in answer["errors"]), answer["errors"]
            assert answer["caption_calls"] <= 1  # one try at most, then no more waiting on it
        # Only the first questions waited on the captioner: the rest were told at once it is unavailable.
        assert sum(a["caption_calls"] for a in answers) <= 3


def test_a_question_whose_client_went_away_frees_its_slot(lucy_server: Callable[..., LucyServer],
                                                          videos: dict[str, Path]) -> None:
    with ScriptedOpenAIServer(latency=3600) as hung:
        server = lucy_server(captioner={"openai": {"base_url": hung.base_url, "max_retries": 0}},
                             query={"caption_timeout_seconds": 600.0},
                             service={"max_questions_per_stream": 1})
        with server.client() as c:
            assert c.post("/v1/streams", json={"name": "stuck", "source": str(videos["b"]),
                                               "captioner": "openai"}).status_code == 201
        wait_for(lambda: server.stream("stuck")["ingested_until"] > 100, 120, "the stream to have frames")
        for _ in range(2):  # the second question would wait forever for the slot if the first kept it
            try:
                with server.client(timeout=3) as c:
                    c.post("/v1/streams/stuck/questions", json={"question": "What text was shown?"})
                raise AssertionError("the question should still be waiting on the hung captioner")
            except httpx.ReadTimeout:
                pass  # the client gives up and closes the connection
            wait_for(lambda: server.stream("stuck")["questions"]["in_flight"] == 0, 30,
                     "the abandoned question to be cancelled")

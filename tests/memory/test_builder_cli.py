"""`lucy ingest` with background captioning and `lucy memory`, as users run them: real child processes, the
openai captioner against a scripted OpenAI-compatible server the test starts, and `kill -9` in the middle."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lucy.errors import StoreError
from lucy.ingest import ZarrFrameStore
from lucy.memory.sqlite_store import DB_NAME, SQLiteMemoryStore
from lucy.testing import child_env
from lucy.testing.openai_server import Reply, ScriptedOpenAIServer
from lucy.testing.waiting import free_port

SPANS = [[0.0, 60.0], [60.0, 120.0], [120.0, 180.0], [180.0, 240.0], [240.0, 270.0]]


def lucy_env(base_url: str, **extra: str) -> dict[str, str]:
    return {"LUCY_CAPTIONER__OPENAI__BASE_URL": base_url, "LUCY_CAPTIONER__OPENAI__MAX_RETRIES": "0",
            "LUCY_CAPTIONER__OPENAI__TIMEOUT_SECONDS": "10", "LUCY_CAPTIONER__OPENAI__MAX_FRAMES": "4",
            "LUCY_MEMORY__RETRY_INITIAL_SECONDS": "0.05", "LUCY_MEMORY__RETRY_MAX_SECONDS": "0.2",
            "LUCY_MEMORY__DRAIN_GIVE_UP_SECONDS": "1", **extra}


def popen_lucy(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    full = child_env()
    full.update(env)
    return subprocess.Popen([sys.executable, "-m", "lucy", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=full)


def coarse_spans(data: Path) -> list[list[float]]:
    store = SQLiteMemoryStore(data / DB_NAME)
    try:
        return [[n.start, n.end] for n in store.nodes("cam", level="coarse", origin="ingest")]
    finally:
        store.close()




def test_ingest_captions_the_file_and_memory_prints_it(tmp_path, five_span_video, run_lucy):
    data = tmp_path / "data"
    with ScriptedOpenAIServer(lambda body: Reply("A grey yard; a delivery van arrives.")) as server:
        done = run_lucy("ingest", str(five_span_video), "--stream", "cam", "--data", str(data), "--json",
                        "--captioner", "openai", env=lucy_env(server.base_url))
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["coarse_nodes"] == 5 and summary["captioned_until"] == 270.0
        assert summary["coarse_pending"] == 0 and summary["complete"]
        assert len(server.requests) == 5
        assert server.requests[0]["model"] == "Qwen/Qwen2.5-VL-7B-Instruct"

    shown = run_lucy("memory", "--stream", "cam", "--data", str(data), "--json")
    assert shown.returncode == 0, shown.stderr
    timeline = json.loads(shown.stdout)
    assert timeline["captioned_until"] == 270.0
    assert [[n["start"], n["end"]] for n in timeline["nodes"]] == SPANS
    assert all(n["text"] == "A grey yard; a delivery van arrives." and n["origin"] == "ingest"
               for n in timeline["nodes"])

    window = json.loads(run_lucy("memory", "--stream", "cam", "--data", str(data), "--json", "--level", "coarse",
                                 "--from", "100", "--to", "130").stdout)
    assert [[n["start"], n["end"]] for n in window["nodes"]] == SPANS[1:3]

    text = run_lucy("memory", "--stream", "cam", "--data", str(data), "--from", "250")
    assert text.returncode == 0
    assert "[0:04:00.0 - 0:04:30.0] coarse (ingest, Qwen/Qwen2.5-VL-7B-Instruct)" in text.stdout
    assert "    A grey yard; a delivery van arrives." in text.stdout and "0:03:00.0" not in text.stdout

    # Input errors are one line, non-zero.
    for args, message in [(["--stream", "nope"], "no stream named 'nope'"),
                          (["--stream", "cam", "--level", "medium"], "unknown level 'medium'"),
                          (["--stream", "cam", "--from", "50", "--to", "10"], "--to (10) must be after --from (50)"),
                          (["--stream", "../x"], "bad stream name")]:
        bad = run_lucy("memory", "--data", str(data), *args)
        assert bad.returncode != 0 and message in bad.stderr, (args, bad.stderr)
        assert "Traceback" not in bad.stderr


def test_dead_captioner_fails_the_run_and_next_run_catches_up(tmp_path, five_span_video, run_lucy):
    data = tmp_path / "data"
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    began = time.monotonic()
    first = run_lucy("ingest", str(five_span_video), "--stream", "cam", "--data", str(data), "--json",
                     "--captioner", "openai", env=lucy_env(dead))
    assert first.returncode == 1
    assert time.monotonic() - began < 60
    assert "captioner unavailable" in first.stderr and "5 coarse spans left uncaptioned" in first.stderr
    assert "next run" in first.stderr
    summary = json.loads(first.stdout)
    assert summary["frames"] == 540 and summary["complete"]  # ingest itself was not held up
    assert summary["coarse_nodes"] == 0 and summary["coarse_pending"] == 5 and summary["captioned_until"] == 0.0

    with ScriptedOpenAIServer() as server:
        second = run_lucy("ingest", str(five_span_video), "--stream", "cam", "--data", str(data), "--json",
                          "--captioner", "openai", env=lucy_env(server.base_url))
        assert second.returncode == 0, second.stderr
        summary = json.loads(second.stdout)
        assert summary["new_frames"] == 0  # nothing to decode again: the backlog came from the frame store
        assert summary["coarse_nodes"] == 5 and summary["captioned_until"] == 270.0
        assert len(server.requests) == 5
    assert coarse_spans(data) == SPANS


def test_captioner_none_stores_frames_only(tmp_path, five_span_video, run_lucy):
    data = tmp_path / "data"
    done = run_lucy("ingest", str(five_span_video), "--stream", "cam", "--data", str(data), "--json",
                    "--captioner", "none")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["frames"] == 540 and summary["coarse_nodes"] == 0 and summary["coarse_pending"] is None
    empty = run_lucy("memory", "--stream", "cam", "--data", str(data))
    assert empty.returncode == 0 and "0 memory nodes" in empty.stdout


@pytest.mark.parametrize("when", ["while captioning the backlog", "while ingesting"])
def test_kill_9_then_rerun_captions_every_span_exactly_once(tmp_path, five_span_video, when):
    data = tmp_path / "data"
    args = ("ingest", str(five_span_video), "--stream", "cam", "--data", str(data), "--json",
            "--captioner", "openai")
    slow = when == "while captioning the backlog"
    # Slow captions (one at a time) leave a backlog after the file is stored; fast ones caption spans as they close.
    with ScriptedOpenAIServer(latency=1.5 if slow else 0.0) as server:
        child = popen_lucy(*args, env=lucy_env(server.base_url, LUCY_CAPTIONER__MAX_IN_FLIGHT="1"))
        deadline = time.monotonic() + 90
        frames = nodes = 0
        memory = None
        while time.monotonic() < deadline and child.poll() is None:
            if frames < 540:
                try:
                    frames = ZarrFrameStore.open(data, "cam").committed()
                except StoreError:
                    pass  # not created yet
            if memory is None and (data / DB_NAME).is_file():
                memory = SQLiteMemoryStore(data / DB_NAME)  # a second process reading while ingest writes
            nodes = 0 if memory is None else memory.count("cam", level="coarse")
            if (slow and frames == 540 and nodes >= 1) or (not slow and frames >= 100):
                child.send_signal(signal.SIGKILL)
                break
            time.sleep(0.005)
        child.communicate(timeout=30)
        assert child.returncode == -signal.SIGKILL, "the child ended before it could be killed"
        if slow:
            assert frames == 540 and 1 <= nodes < 5
        else:
            assert 100 <= frames < 540
        if memory is not None:
            memory.close()

    survivors = coarse_spans(data)
    assert nodes <= len(survivors) < 5
    with ScriptedOpenAIServer() as server:
        rerun = popen_lucy(*args, env=lucy_env(server.base_url))
        out, err = rerun.communicate(timeout=120)
        assert rerun.returncode == 0, err
        summary = json.loads(out)
        assert summary["frames"] == 540 and summary["coarse_nodes"] == 5 and summary["captioned_until"] == 270.0
        # Only the spans the killed run had not stored are captioned again.
        assert len(server.requests) == 5 - len(survivors)
    assert coarse_spans(data) == SPANS  # every span once: none missing, none twice
    store = SQLiteMemoryStore(data / DB_NAME)
    assert store.count("cam") == 5
    store.close()

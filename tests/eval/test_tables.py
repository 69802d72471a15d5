"""The papers' aggregations over hand-made predictions (where the usual mistakes would show)."""

from __future__ import annotations

from lucy.eval.runner import Prediction
from lucy.eval.tables import accuracy_tables, confidence_rows


def pred(qid: str, correct: bool | None, *, confident: bool = True, **groups: object) -> Prediction:
    return Prediction(key=qid, qid=qid, video="v", kind="choice", groups=dict(groups), asked_at="end",
                      letter="A", truth=None if correct is None else "A" if correct else "B", correct=correct,
                      confident=confident, evidence=[], llm_calls=1, prompt_tokens=0, completion_tokens=0,
                      caption_calls=0, seconds=0.1, horizon=60)


def test_mlvu_m_avg_is_the_mean_of_task_accuracies_not_of_questions() -> None:
    preds = [pred(f"n{i}", True, task="needle") for i in range(9)] + [pred("n9", False, task="needle")]
    preds += [pred("c0", False, task="count"), pred("c1", True, task="count")]
    rows = {r["name"]: r for r in accuracy_tables("mlvu", preds)["task"]}
    assert rows["needle"]["accuracy"] == 90.0 and rows["count"]["accuracy"] == 50.0
    assert rows["M-Avg"]["accuracy"] == 70.0  # questions alike would give 10/12 = 83.3


def test_lvbench_counts_a_question_in_each_of_its_types_and_once_overall() -> None:
    preds = [pred("1", True, type=["key information retrieval", "reasoning"]),
             pred("2", False, type=["reasoning"]), pred("3", False, type=["temporal grounding"])]
    rows = {r["name"]: (r["accuracy"], r["n"]) for r in accuracy_tables("lvbench", preds)["type"]}
    assert rows == {"KIR": (100.0, 1), "Rea": (50.0, 2), "TG": (0.0, 1), "Overall": (33.33, 3)}


def test_videomme_orders_durations_and_domains_as_the_paper() -> None:
    preds = [pred("1", True, duration="long", domain="Multilingual", task_type="OCR Problems"),
             pred("2", False, duration="short", domain="Knowledge", task_type="OCR Problems"),
             pred("3", True, duration="short", domain="Knowledge", task_type="Counting Problem")]
    tables = accuracy_tables("videomme", preds)
    assert [(r["name"], r["accuracy"]) for r in tables["duration"]] == [("short", 50.0), ("long", 100.0),
                                                                        ("Overall", 66.67)]
    assert [r["name"] for r in tables["domain"]] == ["Knowledge", "Multilingual"]


def test_ovobench_averages_are_means_of_task_accuracies() -> None:
    preds = [pred("e1", True, task="EPM"), pred("h1", False, task="HLD"), pred("h2", False, task="HLD"),
             pred("o1", True, task="OCR"), pred("c1", True, task="CRR"), pred("c2", False, task="CRR")]
    tables = accuracy_tables("ovobench", preds)
    averages = {r["name"]: r["accuracy"] for r in tables["average"]}
    assert averages == {"Backward Avg": 50.0, "Real-time Avg": 100.0, "Forward Avg": 50.0, "Total Avg": 62.5,
                        "RT+BT Avg": 66.67}


def test_confidence_split_and_unlabelled_answers() -> None:
    preds = [pred("1", True), pred("2", False, confident=False), pred("3", True, confident=False), pred("4", None)]
    rows = {r["name"]: (r["accuracy"], r["n"]) for r in confidence_rows(preds)}
    assert rows == {"confident": (100.0, 1), "forced": (50.0, 2)}

"""The tables of a run, as the benchmarks' papers and scorers print them, with what each answer cost.

- Video-MME: accuracy by duration (short, medium, long) and overall, per domain and per task type (lmms-eval's
  ``videomme_aggregate_results``).
- LVBench: per type (ER, EU, KIR, TG, Rea, Sum; a question counts in each of its types) and overall (each
  question once), as ``lvbench/metrics/compute_accuracy.py``.
- MLVU: per task and M-Avg, the mean of the per-task accuracies.
- EgoMem: Detail, Event and overall.
- OVO-Bench: per task, and the backward, real-time and forward averages as ``OVOBenchOfflineScore`` computes them
  (each the mean of its tasks' accuracies; forward tasks score each probe), their total, and RT+BT (the mean of
  the real-time and backward tasks).

Every run adds the cost (LLM calls, tokens and captions per question, wall time per hour of video), the
confidence split (accuracy of confident and of forced answers) and, asked while ingesting, accuracy at the
video's midpoint and at its end. Predictions without a ground truth (MLVU test) are counted, never scored.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from lucy.eval.formats import BACKWARD_TASKS, FORWARD_TASKS, REALTIME_TASKS
from lucy.eval.runner import END, MID, Prediction, RunState

LVBENCH_TYPES = {"entity recognition": "ER", "event understanding": "EU", "key information retrieval": "KIR",
                 "temporal grounding": "TG", "reasoning": "Rea", "summarization": "Sum"}
VIDEOMME_DOMAINS = ["Knowledge", "Film & Television", "Sports Competition", "Artistic Performance", "Life Record",
                    "Multilingual"]

Row = dict[str, Any]  # {"name", "accuracy" (percent or None), "n", ...}


def _acc(preds: Iterable[Prediction]) -> Row:
    scored = [p for p in preds if p.correct is not None]
    return {"accuracy": round(100 * sum(p.correct for p in scored) / len(scored), 2) if scored else None,
            "n": len(scored)}


def _mean_row(name: str, rows: Sequence[Row]) -> Row:
    values = [r["accuracy"] for r in rows if r["accuracy"] is not None]
    return {"name": name, "accuracy": round(statistics.mean(values), 2) if values else None,
            "n": sum(r["n"] for r in rows), "mean_of": len(values)}


def _group(preds: Sequence[Prediction], key: str, order: Sequence[str] = ()) -> list[Row]:
    names: dict[str, None] = dict.fromkeys(order)
    for p in preds:
        value = p.groups.get(key)
        for v in value if isinstance(value, list) else [value]:
            if v is not None and v != "":
                names.setdefault(str(v))
    rows = []
    for name in names:
        members = [p for p in preds if name in (p.groups.get(key) if isinstance(p.groups.get(key), list)
                                                 else [p.groups.get(key)])]
        if members:
            rows.append({"name": name, **_acc(members)})
    return rows


def accuracy_tables(benchmark: str, preds: Sequence[Prediction]) -> dict[str, list[Row]]:
    """The benchmark's own tables over ``preds``."""
    overall = {"name": "Overall", **_acc(preds)}
    if benchmark == "videomme":
        return {"duration": [*_group(preds, "duration", ("short", "medium", "long")), overall],
                "domain": _group(preds, "domain", VIDEOMME_DOMAINS), "task type": _group(preds, "task_type")}
    if benchmark == "lvbench":
        rows = _group(preds, "type", list(LVBENCH_TYPES))
        return {"type": [{**r, "name": LVBENCH_TYPES.get(r["name"], r["name"])} for r in rows] + [overall]}
    if benchmark == "mlvu":
        tasks = _group(preds, "task")
        return {"task": [*tasks, _mean_row("M-Avg", tasks)]}
    if benchmark == "egomem":
        return {"type": [*_group(preds, "type", ("Detail", "Event")), overall]}
    if benchmark == "ovobench":
        tasks = _group(preds, "task", (*BACKWARD_TASKS, *REALTIME_TASKS, *FORWARD_TASKS))
        of = {mode: [r for r in tasks if r["name"] in names] for mode, names in
              (("backward", BACKWARD_TASKS), ("realtime", REALTIME_TASKS), ("forward", FORWARD_TASKS))}
        return {"task": tasks, "average": [
            _mean_row("Backward Avg", of["backward"]), _mean_row("Real-time Avg", of["realtime"]),
            _mean_row("Forward Avg", of["forward"]), _mean_row("Total Avg", tasks),
            _mean_row("RT+BT Avg", of["realtime"] + of["backward"])]}
    return {"overall": [overall]}


def cost_row(state: RunState, preds: Sequence[Prediction]) -> Row:
    """What the answers cost, per question, and the run's wall time per hour of video."""
    n = len(preds) or 1
    hours = sum(v.seconds or 0.0 for v in state.videos.values() if v.asked) / 3600
    asked_now = sum(v.asked for v in state.videos.values())
    harness = state.wall_seconds - state.ask_seconds - state.ingest_seconds
    return {
        "questions": len(preds),
        "llm_calls_per_question": round(sum(p.llm_calls for p in preds) / n, 2),
        "tokens_per_question": round(sum(p.tokens for p in preds) / n, 1),
        "captions_per_question": round(sum(p.caption_calls for p in preds) / n, 2),
        "seconds_per_question": round(sum(p.seconds for p in preds) / n, 2),
        "video_hours": round(hours, 4),
        "wall_seconds": round(state.wall_seconds, 2),
        "ingest_seconds": round(state.ingest_seconds, 2),
        "ask_seconds": round(state.ask_seconds, 2),
        "wall_seconds_per_video_hour": round(state.wall_seconds / hours, 1) if hours else None,
        "asked_this_run": asked_now,
        # What the harness itself adds: the run's wall time less the time inside ingest and engine.ask. Asking
        # while ingesting overlaps the two, so it is only given for a run that asked after ingest.
        "harness_seconds_per_question": (round(harness / asked_now, 4)
                                         if asked_now and not state.while_ingesting else None),
    }


def confidence_rows(preds: Sequence[Prediction]) -> list[Row]:
    return [{"name": "confident", **_acc([p for p in preds if p.confident])},
            {"name": "forced", **_acc([p for p in preds if not p.confident])}]


def online_rows(preds: Sequence[Prediction]) -> list[Row]:
    rows = []
    for name, at in (("midpoint", MID), ("end", END)):
        members = [p for p in preds if p.asked_at == at]
        if members:
            rows.append({"name": name, **_acc(members),
                         "confident_share": round(100 * sum(p.confident for p in members) / len(members), 1),
                         "llm_calls_per_question": round(statistics.mean(p.llm_calls for p in members), 2),
                         "captions_per_question": round(statistics.mean(p.caption_calls for p in members), 2)})
    return rows


def build_report(state: RunState) -> dict[str, Any]:
    """The run's report: tables, costs, what was unscorable or skipped, and where its files are."""
    preds = state.predictions
    scored_at_end = [p for p in preds if p.asked_at != MID]  # the benchmark's tables: the whole video (or realtime)
    asked = {p.qid for p in preds}
    skipped = [{"video": v.video, "reason": v.skipped,
                "questions": sum(1 for q in state.questions if q.video == v.video and q.qid not in asked)}
               for v in state.videos.values() if v.skipped]
    report: dict[str, Any] = {
        "benchmark": state.benchmark,
        "annotations": state.annotations.source,
        "predictions": str(state.predictions_path),
        "while_ingesting": state.while_ingesting,
        "subtitles": str(state.subtitles) if state.subtitles else None,
        "questions": len(state.questions),
        "answered": len(asked),
        "unlabelled": sum(1 for p in preds if p.correct is None),
        "unscorable": [u.__dict__ for u in state.annotations.unscorable],
        "skipped": skipped,
        "tables": accuracy_tables(state.benchmark, scored_at_end) if any(p.correct is not None for p in preds) else {},
        "confidence": confidence_rows(scored_at_end),
        "cost": cost_row(state, preds),
        "videos": [dict(video.__dict__) for video in state.videos.values()],
    }
    if state.while_ingesting and state.benchmark != "ovobench":
        report["while_ingesting_table"] = online_rows(preds)
    return report


# --------------------------------------------------------------------------------------------- submission


def write_submission(state: RunState, out: Path) -> Path | None:
    """The benchmark's official submission file, where it has one (None otherwise): MLVU test's rows, LVBench's
    ``{uid: letter}``, Video-MME's results layout, OVO-Bench's results layout (what its scorer reads)."""
    preds = [p for p in state.predictions if p.asked_at != MID]
    if not preds:
        return None
    b = state.benchmark
    data: Any
    if b == "mlvu" and any(p.extra.get("question_id") for p in preds):  # MLVU test: the online evaluation's rows
        data = [{"question_id": p.extra["question_id"], "question_type": p.extra.get("question_type"),
                 "option": p.letter or ""} for p in preds if p.extra.get("question_id")]
        name = "mlvu-test-submission"
    elif b == "lvbench":  # {uid: letter}, what compute_accuracy.py reads
        data = {p.qid: p.letter or "" for p in preds}
        name = "lvbench-answers"
    elif b == "videomme":  # the layout of Video-MME's output_test_template.json, with each "response"
        videos: dict[str, dict[str, Any]] = {}
        for p in preds:
            v = videos.setdefault(p.video, {"video_id": p.extra.get("video_id"), "videoID": p.video,
                                            "duration": p.groups.get("duration"), "domain": p.groups.get("domain"),
                                            "sub_category": p.groups.get("sub_category"), "questions": []})
            v["questions"].append({"question_id": p.qid, "task_type": p.groups.get("task_type"), "answer": p.truth,
                                   "response": p.letter or ""})
        data, name = list(videos.values()), "videomme-results"
    elif b == "ovobench":  # the results layout OVO-Bench's score.py reads back
        data = {"backward": [], "realtime": [], "forward": []}
        forward: dict[str, dict[str, Any]] = {}
        for p in preds:
            mode = p.groups.get("mode")
            if mode in ("backward", "realtime"):
                data[mode].append({"id": p.qid, "video": p.video, "task": p.groups.get("task"),
                                   "response": p.letter, "ground_truth": p.truth})
            else:
                ident, _, _j = p.qid.partition("#")
                item = forward.setdefault(ident, {"id": ident, "video": p.video, "task": p.groups.get("task"),
                                                  "test_info": []})
                probe: dict[str, Any] = {"realtime": float(p.asked_at), "response": p.letter}
                probe.update({"count": p.truth} if p.kind == "count" else {"type": int(p.truth == "Yes")})
                item["test_info"].append(probe)
        data["forward"] = list(forward.values())
        name = "ovobench-results"
    else:
        return None
    # One file per run (its predictions' name), so runs with other reasoners or settings keep theirs.
    path = out / state.predictions_path.name.replace(".predictions.jsonl", f".{name}.json")
    path.write_text(json.dumps(data, indent=1))
    return path


# --------------------------------------------------------------------------------------------- text


def _pct(value: float | None) -> str:
    return "   -  " if value is None else f"{value:6.1f}"


def _table(title: str, rows: Sequence[Row]) -> list[str]:
    if not rows:
        return []
    width = max(12, *(len(str(r["name"])) for r in rows))
    lines = [title, f"  {'':<{width}} {'acc %':>6} {'n':>5}"]
    lines += [f"  {r['name']!s:<{width}} {_pct(r['accuracy'])} {r['n']:>5}" for r in rows]
    return lines


def render(report: dict[str, Any]) -> str:
    """The report as text, tables first."""
    head = (f"{report['benchmark']}: {report['answered']} of {report['questions']} questions answered"
            f"{' (asked while ingesting)' if report['while_ingesting'] else ''}"
            f"{' (with subtitles)' if report.get('subtitles') else ''}; predictions in "
            f"{report['predictions']}")
    lines = [head]
    for name, rows in report["tables"].items():
        lines += _table(f"accuracy by {name}", rows)
    lines += _table("confidence split", report["confidence"])
    for row in report.get("while_ingesting_table", []):
        if row is report["while_ingesting_table"][0]:
            lines.append("asked while ingesting")
        lines.append(f"  {row['name']:<12} {_pct(row['accuracy'])} {row['n']:>5}  confident {row['confident_share']}%"
                     f", {row['llm_calls_per_question']} LLM calls, {row['captions_per_question']} captions per q")
    c = report["cost"]
    lines.append(f"cost: {c['llm_calls_per_question']} LLM calls, {c['tokens_per_question']} tokens, "
                 f"{c['captions_per_question']} captions, {c['seconds_per_question']} s per question; "
                 f"{c['wall_seconds']} s wall for {c['video_hours'] * 60:.1f} min of video"
                 + (f" ({c['wall_seconds_per_video_hour']} s per video hour)" if c["wall_seconds_per_video_hour"]
                    else "")
                 + (f"; harness overhead {c['harness_seconds_per_question'] * 1000:.1f} ms per question"
                    if c["harness_seconds_per_question"] is not None else ""))
    if report["unlabelled"]:
        lines.append(f"{report['unlabelled']} answers have no ground truth here (submission only)")
    if report["unscorable"]:
        lines.append(f"{len(report['unscorable'])} records cannot be scored and were not asked:")
        lines += [f"  {u['qid']} ({u['video']}): {u['reason']}" for u in report["unscorable"]]
    if report["skipped"]:
        lines.append("skipped videos:")
        lines += [f"  {s['video']}: {s['reason']} ({s['questions']} questions)" for s in report["skipped"]]
    if report.get("submission"):
        lines.append(f"submission file: {report['submission']}")
    return "\n".join(lines)

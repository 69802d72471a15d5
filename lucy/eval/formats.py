"""Readers of the benchmarks' own annotation files, each into one shape: :class:`EvalQuestion`.

Each reader takes the file (or folder) as the benchmark publishes it and changes nothing in it:

- **Video-MME** (lmms-lab/Video-MME on the Hugging Face hub): rows ``video_id, duration (short|medium|long),
  domain, sub_category, videoID, question_id, task_type, question, options ["A. ...", ...], answer "C"``, as
  parquet (needs ``pyarrow``), a JSON list or JSON lines. The video file is ``<videoID>.mp4``.
- **LVBench** (``video_info.meta.jsonl``): one video per line, ``{"key", "type", "qa": [{"uid", "question"
  (options inside it as "(A) ..."), "answer": "D", "question_type": [...], "time_reference"}]}``. A question
  counts towards each of its types, as the official ``compute_accuracy`` does.
- **MLVU**: dev, one JSON file per task of ``{"video", "duration", "question", "candidates", "answer" (the
  candidate's text), "question_type"}``; test, records with ``question_id`` and six candidates but no answer
  (they are asked and written to the submission file, never scored).
- **EgoMem** (``EgoMem.json``): ``{"videoID", "question_id", "type": Detail|Event, "question", "options":
  ["A. ...", ...], "answer": "B"}``. Event questions name times of day, so each video's wall-clock start matters:
  from a record's ``start_time`` (``HH:MM:SS``) or a ``start_times.json`` (``{videoID: "HH:MM:SS"}``) beside the
  annotations; the question then says at which second of the video each time of day it names falls.
- **OVO-Bench** (``ovo_bench_new.json``): ``{"backward": [...], "realtime": [...], "forward": [...]}``. Backward
  and real-time items ``{"id", "video", "task", "question", "options", "realtime", "gt"}`` are asked at their
  ``realtime`` second; forward items carry ``test_info`` probes, each asked at its own ``realtime``: REC (count,
  ``count``), SSR (is this ``step`` being done now? ``type`` 1 = yes) and CRR (can the question be answered yet?
  ``type`` 1 = yes), scored as OVO-Bench's ``OVOBenchOfflineScore`` scores them.

Records that cannot be scored (no answer, an answer letter with no such option, an answer that is none of the
candidates) are returned as :class:`Unscorable` with the reason, never dropped silently.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lucy.config.names import BENCHMARKS
from lucy.errors import LucyError

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
YES_NO = ("No", "Yes")  # OVO-Bench's SSR / CRR probes, asked as a two-option question (type 1 = "Yes")

# "A. text", "(A) text", "A) text", "A: text": the letter a published option starts with.
_LETTERED = re.compile(r"^\s*\(?([A-Z])\s*[.):]\s*(.*)$", re.DOTALL)
_LVBENCH_OPTION = re.compile(r"\n\s*\(([A-Z])\)\s*")
_CLOCK = re.compile(r"\b([01]?\d|2[0-3])[:.]([0-5]\d)(?::([0-5]\d))?\s*(am|pm|AM|PM)?\b")


class FormatError(LucyError):
    """An annotation file that is not in the benchmark's format."""


@dataclass(frozen=True)
class EvalQuestion:
    """One question of a benchmark, ready to be asked about one video.

    ``kind``: ``choice`` (``truth`` is the index of the right option; None when the split has no answers),
    ``count`` (OVO-Bench REC: ``truth_text`` is the count) or ``yesno`` (OVO-Bench SSR / CRR, options
    :data:`YES_NO`). ``groups``: the table dimensions this question counts in (e.g. ``{"duration": "short",
    "task_type": "OCR Problems"}``; a list value counts it in each). ``ask_at``: the media second it is asked at
    (OVO-Bench), None for after the whole video.
    """

    qid: str
    video: str
    question: str
    options: tuple[str, ...] = ()
    truth: int | None = None
    truth_text: str | None = None
    kind: str = "choice"
    groups: dict[str, str | list[str]] = field(default_factory=dict)
    ask_at: float | None = None
    duration: float | None = None  # seconds, when the annotations say
    extra: dict[str, Any] = field(default_factory=dict)  # what a submission file needs back

    @property
    def labelled(self) -> bool:
        return self.truth is not None or self.truth_text is not None


@dataclass(frozen=True)
class Unscorable:
    """A record that cannot be scored, and why."""

    qid: str
    video: str
    reason: str


@dataclass
class Annotations:
    """What a reader found: the questions in file order and the records it could not use."""

    benchmark: str
    questions: list[EvalQuestion]
    unscorable: list[Unscorable] = field(default_factory=list)
    source: str = ""


# ----------------------------------------------------------------------------------------------- helpers


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise FormatError(f"{path}: not JSON ({err.msg}, line {err.lineno})") from None


def _load_rows(path: Path) -> list[Any]:
    """A JSON list, or JSON lines (one object per line)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl" or (text.lstrip()[:1] == "{" and "\n{" in text.strip()):
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise FormatError(f"{path}:{n}: not a JSON line ({err.msg})") from None
        return rows
    data = _load_json(path)
    return data if isinstance(data, list) else [data]


def _parquet_rows(path: Path) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq  # optional: only Video-MME's parquet needs it
    except ImportError:
        raise FormatError(f"{path} is parquet, which needs pyarrow: pip install pyarrow (or give the annotations "
                          "as JSON)") from None
    return pq.read_table(path).to_pylist()


def split_lettered(options: Iterable[str]) -> tuple[list[str], list[str]]:
    """``["A. red", "B. blue"]`` -> (letters, texts). An option without a letter gets its position's letter."""
    letters, texts = [], []
    for i, option in enumerate(options):
        match = _LETTERED.match(str(option))
        if match and match.group(1) == LETTERS[i]:
            letters.append(match.group(1))
            texts.append(match.group(2).strip())
        else:
            letters.append(LETTERS[i])
            texts.append(str(option).strip())
    return letters, texts


def _letter_truth(answer: Any, letters: list[str]) -> tuple[int | None, str | None]:
    """The index of an answer letter among ``letters``, or why it cannot be scored."""
    text = "" if answer is None else str(answer).strip()
    if not text:
        return None, "empty answer"
    match = _LETTERED.match(text)
    letter = match.group(1) if match else text.upper()
    if letter not in letters:
        return None, f"answer {text!r} names no option (options {', '.join(letters)})"
    return letters.index(letter), None


def _num(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


# ----------------------------------------------------------------------------------------------- readers


def read_videomme(path: Path) -> Annotations:
    rows = _parquet_rows(path) if path.suffix == ".parquet" else _load_rows(path)
    if rows and isinstance(rows[0], dict) and "questions" in rows[0]:  # the grouped results-template layout
        rows = [{**{k: v for k, v in video.items() if k != "questions"}, **q} for video in rows
                for q in video["questions"]]
    out = Annotations("videomme", [], source=str(path))
    for n, row in enumerate(rows):
        if not isinstance(row, dict) or "question" not in row or "options" not in row:
            raise FormatError(f"{path}: row {n + 1} is not a Video-MME row (question, options, answer, videoID...)")
        video = str(row.get("videoID") or row.get("video_id") or "")
        qid = str(row.get("question_id") or f"{video}-{n}")
        letters, texts = split_lettered(row["options"])
        truth, problem = _letter_truth(row.get("answer"), letters)
        if problem:
            out.unscorable.append(Unscorable(qid, video, problem))
            continue
        groups = {k: str(row[k]) for k in ("duration", "domain", "sub_category", "task_type") if row.get(k)}
        out.questions.append(EvalQuestion(
            qid=qid, video=video, question=str(row["question"]).strip(), options=tuple(texts), truth=truth,
            groups=groups, extra={"video_id": row.get("video_id"), "videoID": video, "letters": letters}))
    return out


def read_lvbench(path: Path) -> Annotations:
    out = Annotations("lvbench", [], source=str(path))
    for n, video in enumerate(_load_rows(path)):
        if not isinstance(video, dict) or "qa" not in video or "key" not in video:
            raise FormatError(f"{path}: line {n + 1} is not an LVBench video ({{\"key\", \"type\", \"qa\": [...]}})")
        key = str(video["key"])
        for qa in video["qa"]:
            uid = str(qa.get("uid"))
            parts = _LVBENCH_OPTION.split("\n" + str(qa.get("question", "")).strip())
            stem, pairs = parts[0].strip(), parts[1:]
            letters, texts = pairs[0::2], [t.strip() for t in pairs[1::2]]
            if not letters:
                out.unscorable.append(Unscorable(uid, key, "no options \"(A) ...\" in the question"))
                continue
            truth, problem = _letter_truth(qa.get("answer"), letters)
            if problem:
                out.unscorable.append(Unscorable(uid, key, problem))
                continue
            types = [str(t) for t in (qa.get("question_type") or [])]
            out.questions.append(EvalQuestion(
                qid=uid, video=key, question=stem, options=tuple(texts), truth=truth,
                groups={"type": types, "video_type": str(video.get("type", ""))},
                extra={"time_reference": qa.get("time_reference"), "letters": letters}))
    return out


def _mlvu_task(path: Path) -> str:
    return re.sub(r"^\d+_", "", path.stem)


def read_mlvu(path: Path) -> Annotations:
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not files:
        raise FormatError(f"{path}: no MLVU task files (*.json)")
    out = Annotations("mlvu", [], source=str(path))
    for file in files:
        rows = _load_rows(file)
        for n, row in enumerate(rows):
            if not isinstance(row, dict) or "candidates" not in row or "question" not in row:
                raise FormatError(f"{file}: record {n + 1} is not an MLVU record (video, question, candidates...)")
            task = str(row.get("question_type") or _mlvu_task(file))
            video = str(row.get("video", ""))
            qid = str(row.get("question_id") or f"{_mlvu_task(file)}/{n}")
            candidates = [str(c) for c in row["candidates"]]
            truth = None
            if "answer" in row:  # dev: the answer is a candidate's text
                answer = str(row.get("answer") or "").strip()
                if not answer:
                    out.unscorable.append(Unscorable(qid, video, "empty answer"))
                    continue
                if answer not in [c.strip() for c in candidates]:
                    out.unscorable.append(Unscorable(qid, video, f"answer {answer!r} is none of the candidates"))
                    continue
                truth = [c.strip() for c in candidates].index(answer)
            out.questions.append(EvalQuestion(
                qid=qid, video=video, question=str(row["question"]).strip(), options=tuple(candidates), truth=truth,
                groups={"task": task}, duration=_num(row.get("duration")),
                extra={"question_type": task, "question_id": row.get("question_id"), "folder": file.stem}))
    return out


def clock_seconds(text: str) -> list[tuple[str, float]]:
    """Times of day in ``text``, as (what was written, seconds after midnight)."""
    found = []
    for match in _CLOCK.finditer(text):
        hour, minute, second = int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)
        half = (match.group(4) or "").lower()
        if half == "pm" and hour < 12:
            hour += 12
        elif half == "am" and hour == 12:
            hour = 0
        found.append((match.group(0).strip(), hour * 3600.0 + minute * 60.0 + second))
    return found


def _parse_clock(value: Any) -> float | None:
    if value is None:
        return None
    times = clock_seconds(str(value).replace("T", " "))
    return times[0][1] if times else None


def with_start_time(question: str, start: float | None) -> str:
    """An EgoMem question with, for each time of day it names, the second of the video it falls at."""
    if start is None:
        return question
    notes = []
    for written, seconds in clock_seconds(question):
        offset = seconds - start
        if offset >= 0:
            notes.append(f"{written} is {offset:.0f} s into the video")
    start_text = f"{int(start // 3600):02d}:{int(start % 3600 // 60):02d}:{int(start % 60):02d}"
    if not notes:
        return question
    return f"{question} (The recording started at {start_text}; {'; '.join(notes)}.)"


def read_egomem(path: Path) -> Annotations:
    rows = _load_rows(path)
    starts_file = path.parent / "start_times.json"
    starts = {str(k): _parse_clock(v) for k, v in _load_json(starts_file).items()} if starts_file.is_file() else {}
    out = Annotations("egomem", [], source=str(path))
    for n, row in enumerate(rows):
        if not isinstance(row, dict) or "options" not in row or "question" not in row:
            raise FormatError(f"{path}: record {n + 1} is not an EgoMem record (videoID, question, options...)")
        video = str(row.get("videoID", ""))
        qid = str(row.get("question_id", n))
        qid = f"{video}/{qid}" if video else qid  # question ids restart at 0 for each video
        letters, texts = split_lettered(row["options"])
        truth, problem = _letter_truth(row.get("answer"), letters)
        if problem:
            out.unscorable.append(Unscorable(qid, video, problem))
            continue
        start = _parse_clock(row.get("start_time")) if row.get("start_time") else starts.get(video)
        kind = str(row.get("type", ""))
        question = str(row["question"]).strip()
        out.questions.append(EvalQuestion(
            qid=qid, video=video, question=with_start_time(question, start) if kind == "Event" else question,
            options=tuple(texts), truth=truth, groups={"type": kind},
            extra={"start_time": start, "letters": letters}))
    return out


BACKWARD_TASKS = ("EPM", "ASI", "HLD")
REALTIME_TASKS = ("STU", "OJR", "ATR", "ACR", "OCR", "FPD")
FORWARD_TASKS = ("REC", "SSR", "CRR")


def _ovo_forward(item: dict[str, Any]) -> Iterator[EvalQuestion | Unscorable]:
    task, video, ident = str(item.get("task")), str(item.get("video", "")), str(item.get("id"))
    for j, probe in enumerate(item.get("test_info") or []):
        qid = f"{ident}#{j}"
        at = _num(probe.get("realtime"))
        if at is None:
            yield Unscorable(qid, video, "probe without a realtime")
            continue
        groups: dict[str, str | list[str]] = {"task": task, "mode": "forward"}
        if task == "REC":
            if probe.get("count") is None:
                yield Unscorable(qid, video, "REC probe without a count")
                continue
            yield EvalQuestion(qid=qid, video=video, question=f"How many times did they {item.get('activity', '')}? "
                               "Count every complete motion, by anyone, so far. Answer with a number.",
                               kind="count", truth_text=str(probe["count"]), groups=groups, ask_at=at)
            continue
        if probe.get("type") not in (0, 1):
            yield Unscorable(qid, video, f"{task} probe type {probe.get('type')!r} is neither 0 nor 1")
            continue
        if task == "SSR":
            text = f"Is the person in the video performing this step right now: {probe.get('step', '')}?"
        else:  # CRR
            text = (f"Do the latest moments of the video give enough information to answer this question: "
                    f"{item.get('question', '')}")
        yield EvalQuestion(qid=qid, video=video, question=text, options=YES_NO, truth=int(probe["type"]),
                           kind="yesno", groups=groups, ask_at=at)


def read_ovobench(path: Path) -> Annotations:
    data = _load_json(path)
    if not isinstance(data, dict) or not any(k in data for k in ("backward", "realtime", "forward")):
        raise FormatError(f"{path}: not OVO-Bench annotations ({{\"backward\", \"realtime\", \"forward\"}})")
    out = Annotations("ovobench", [], source=str(path))
    for mode in ("backward", "realtime"):
        for item in data.get(mode) or []:
            ident, video = str(item.get("id")), str(item.get("video", ""))
            options = [str(o) for o in item.get("options") or []]
            gt, at = item.get("gt"), _num(item.get("realtime"))
            if not isinstance(gt, int) or not 0 <= gt < len(options):
                out.unscorable.append(Unscorable(ident, video, f"gt {gt!r} names no option of {len(options)}"))
                continue
            if at is None:
                out.unscorable.append(Unscorable(ident, video, "no realtime"))
                continue
            out.questions.append(EvalQuestion(
                qid=ident, video=video, question=str(item.get("question", "")).strip(), options=tuple(options),
                truth=gt, groups={"task": str(item.get("task")), "mode": mode}, ask_at=at))
    for item in data.get("forward") or []:
        for entry in _ovo_forward(item):
            (out.unscorable if isinstance(entry, Unscorable) else out.questions).append(entry)  # type: ignore[arg-type]
    return out


READERS = {"videomme": read_videomme, "lvbench": read_lvbench, "mlvu": read_mlvu, "egomem": read_egomem,
           "ovobench": read_ovobench}


def read_annotations(benchmark: str, path: str | Path) -> Annotations:
    """The questions of ``benchmark``'s annotation file (or MLVU's folder of task files)."""
    if benchmark not in READERS:
        raise FormatError(f"unknown benchmark {benchmark!r}; choose one of: {', '.join(BENCHMARKS)}")
    path = Path(path)
    if not path.exists():
        raise FormatError(f"annotations {path} do not exist")
    annotations = READERS[benchmark](path)
    seen: set[str] = set()
    for q in annotations.questions:
        if q.qid in seen:
            raise FormatError(f"{path}: question id {q.qid!r} appears twice")
        seen.add(q.qid)
    return annotations

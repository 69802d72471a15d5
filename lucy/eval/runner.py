"""The evaluation run: each video ingested once, its questions asked, every answer written as it comes.

For each video of the annotations (``parallel`` at once), in one process and one event loop:

1. the video is found in the videos folder (by its relative path, else by its file name's stem anywhere below);
   a video that is missing or cannot be decoded is reported and skipped, never a crash of the whole run, and so
   is one the annotations name outside the folder (an absolute path, ``..``, a link that leads out), never ingested;
2. it is ingested into the run's data directory (``OUT/data``) with the benchmark's preset, as a stream whose name
   says which video and which captioner and frame settings made its memory (not which reasoner): a rerun with
   another reasoner finds the memory ready and asks at once, and what earlier questions captioned is reused;
3. its questions are asked through the query engine; each prediction is appended to ``OUT/<run>.predictions.jsonl``
   (and flushed) as soon as it is answered, so ``resume`` after a kill asks only what is not in the file yet.

``while_ingesting`` (always, for OVO-Bench): the video is ingested paced (``pace`` x real time) into a fresh
stream, and each question is asked when ingest reaches its moment (OVO-Bench: its ``realtime``; the others: the
video's midpoint and its end), about what has been ingested by then. Ingest holds at that moment until the question
has fixed its horizon, so a question never sees a frame past its moment.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lucy.backends import Backends, builder_captioner, builder_embedder, builder_transcriber
from lucy.config import LucySettings, load_settings
from lucy.eval.formats import LETTERS, Annotations, EvalQuestion, FormatError, read_annotations
from lucy.eval.letters import eval_reasoner, extract_count, extract_letter
from lucy.eval.subtitles import find_subtitles, read_srt, store_subtitles
from lucy.memory.store import MemoryStore
from lucy.metrics.progress import StreamProgress
from lucy.query.engine import QueryEngine
from lucy.query.reasoners import Reasoner
from lucy.query.trace import QueryResult
from lucy.recorder import Backlog, Outcome, RecorderObserver, StreamRecorder
from lucy.wiring.engine import open_engine

VIDEO_SUFFIXES = (".mp4", ".mkv", ".webm", ".avi", ".mov", ".MP4", ".MKV")
END = "end"
MID = "mid"


# --------------------------------------------------------------------------------------------- presets


def preset_for(benchmark: str, question: EvalQuestion, seconds: float | None) -> str:
    """The paper's preset for a video of ``benchmark`` (by its duration class, or its length in seconds)."""
    length = question.duration or seconds or 0.0
    if benchmark == "egomem":
        return "egomem"
    if benchmark == "videomme":
        label = str(question.groups.get("duration", ""))
        if label in ("short", "medium", "long"):
            return f"videomme-{label}"
        return "videomme-short" if length <= 240 else "videomme-medium" if length <= 1200 else "videomme-long"
    if benchmark == "lvbench":
        return "lvbench-short" if length <= 2400 else "lvbench-medium" if length <= 4800 else "lvbench-long"
    # MLVU, and OVO-Bench (whose videos are minutes long; no paper table of its own): MLVU's duration classes
    if length <= 600:
        return "mlvu-short"
    return "mlvu-medium" if length <= 1800 else "mlvu-long" if length <= 3600 else "mlvu-extra-long"


def video_seconds(path: Path) -> float | None:
    """The length of a video file (None if it cannot be opened)."""
    import av

    try:
        with av.open(str(path)) as container:
            if container.duration:
                return container.duration / 1_000_000
            stream = container.streams.video[0]
            return float(stream.duration * stream.time_base) if stream.duration else None
    except (av.FFmpegError, IndexError, OSError):
        return None


# --------------------------------------------------------------------------------------------- records


@dataclass
class Prediction:
    """One answer, as written to the predictions file (one JSON line)."""

    key: str  # question id, with "@mid" / "@end" when asked while ingesting
    qid: str
    video: str
    kind: str
    groups: dict[str, Any]
    asked_at: str  # "end" (after the whole video), "mid", or the media second (OVO-Bench)
    letter: str | None  # the chosen option's letter; REC: the count; None: no answer
    truth: str | None
    correct: bool | None  # None: no answer to compare with (a test split)
    confident: bool
    evidence: list[dict[str, float]]
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    caption_calls: int
    seconds: float
    horizon: float
    answer: str = ""
    errors: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["tokens"] = self.tokens
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Prediction:
        data = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**data)


def truth_of(q: EvalQuestion) -> str | None:
    if q.kind == "count":
        return q.truth_text
    if q.truth is None:
        return None
    return q.options[q.truth] if q.kind == "yesno" else LETTERS[q.truth]


def predict(q: EvalQuestion, result: QueryResult, asked_at: str, key: str) -> Prediction:
    """The prediction a query result makes for ``q`` (its letter read from prose when there is no option index)."""
    if q.kind == "count":
        letter = extract_count(result.answer)
    elif result.option_index is not None and 0 <= result.option_index < len(q.options):
        letter = LETTERS[result.option_index]
    else:
        letter = extract_letter(result.answer, q.options)
    if q.kind == "yesno" and letter is not None:
        letter = q.options[ord(letter) - ord("A")]
    truth = truth_of(q)
    return Prediction(
        key=key, qid=q.qid, video=q.video, kind=q.kind, groups=q.groups, asked_at=asked_at, letter=letter,
        truth=truth, correct=None if truth is None else letter == truth, confident=result.confident,
        evidence=[{"start": round(e.start, 3), "end": round(e.end, 3)} for e in result.evidence],
        llm_calls=result.llm_calls, prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
        caption_calls=result.caption_calls, seconds=round(result.wall_seconds, 3), horizon=round(result.horizon, 3),
        answer=result.answer, errors=list(result.errors), extra=q.extra)


class PredictionsFile:
    """The run's predictions, one JSON line each, appended and flushed as they come (safe to kill)."""

    def __init__(self, path: Path, *, resume: bool) -> None:
        self.path = path
        self.done: dict[str, Prediction] = {}
        path.parent.mkdir(parents=True, exist_ok=True)
        if resume and path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    p = Prediction.from_json(json.loads(line))
                except (json.JSONDecodeError, TypeError):
                    continue  # a line cut short by a kill
                self.done[p.key] = p
            # Rewrite without a torn last line, so appends start on a line of their own.
            path.write_text("".join(json.dumps(p.to_json()) + "\n" for p in self.done.values()), encoding="utf-8")
        else:
            path.write_text("", encoding="utf-8")
        self._file = path.open("a", encoding="utf-8")

    def add(self, p: Prediction) -> None:
        self.done[p.key] = p
        self._file.write(json.dumps(p.to_json()) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


# --------------------------------------------------------------------------------------------- the run


@dataclass
class VideoOutcome:
    video: str
    path: str | None
    stream: str | None = None
    seconds: float | None = None  # media length
    preset: str | None = None
    ingest_seconds: float = 0.0  # wall time spent ingesting (0: memory was ready)
    reused: bool = False  # memory was ready from an earlier run
    skipped: str | None = None  # why the video was skipped
    asked: int = 0
    subtitles: str | None = None  # the subtitle file stored as its speech memory


@dataclass
class RunState:
    """What a run did, for the report."""

    benchmark: str
    annotations: Annotations
    questions: list[EvalQuestion]
    out: Path
    predictions_path: Path
    while_ingesting: bool
    videos: dict[str, VideoOutcome] = field(default_factory=dict)
    wall_seconds: float = 0.0
    ask_seconds: float = 0.0  # inside engine.ask (the engine's own wall time per question)
    ingest_seconds: float = 0.0
    predictions: list[Prediction] = field(default_factory=list)
    settings: LucySettings | None = None
    subtitles: Path | None = None  # Video-MME: the folder of <videoID>.srt files, stored as speech memory


Progress = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _slug(text: str, n: int) -> str:
    return (re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(text).stem).strip("._-") or "video")[:n]


def memory_fingerprint(settings: LucySettings) -> str:
    """What makes a stream's memory: captioner, frames, preset, speech (never the reasoner)."""
    parts = {"captioner": settings.captioner.model_dump(mode="json"), "preset": settings.preset,
             "ingest": settings.ingest.model_dump(mode="json", include={"frame_width", "frame_height", "codec",
                                                                         "jpeg_quality"}),
             "transcriber": settings.transcriber.model_dump(mode="json"),
             "embedder": settings.embedder.model_dump(mode="json")}
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:8]


def run_name(settings: LucySettings, benchmark: str, annotations: Path, while_ingesting: bool) -> str:
    """The predictions' name: benchmark, annotation file (when its name says more), reasoner (and its model),
    online or not. Another reasoner or split gets files of its own; the memory is shared."""
    r = settings.reasoner
    who = r.backend if r.backend != "openai" else f"openai-{_slug(r.model.split('/')[-1], 40)}"
    split = _slug(annotations.name.split(".")[0], 40)
    split = "" if split.lower() in (benchmark, "json", "ovo_bench_new", "video_info") else f"{split}-"
    return f"{benchmark}-{split}{who}{'-online' if while_ingesting else ''}"


class VideoIndex:
    """Finds a benchmark's video file under the videos folder, and only there: annotations are data from elsewhere,
    and a video name (or folder) that is absolute or climbs out with ``..`` is refused (:meth:`refusal`), as is a
    file whose real path (symbolic links followed) lies outside the folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._real_root = root.resolve()
        self._stems: dict[str, Path] | None = None

    @staticmethod
    def refusal(name: str, hints: Sequence[str] = ()) -> str | None:
        """Why the annotations' ``name`` (in one of the folders ``hints``) may not be looked up; None if it may."""
        for rel in (name, *hints):
            path = Path(rel)
            if path.is_absolute() or path.drive or ".." in path.parts:
                return f"video {rel!r} refused: it names a file outside the videos folder"
        return None

    def inside(self, path: Path) -> bool:
        """Whether ``path``'s real location is in the videos folder."""
        return path.resolve().is_relative_to(self._real_root)

    def candidates(self, name: str, hints: Sequence[str] = ()) -> Iterator[Path]:
        for rel in (name, *[f"{h}/{name}" for h in hints]):
            for candidate in (self.root / rel, *[self.root / f"{rel}{s}" for s in VIDEO_SUFFIXES]):
                if candidate.is_file():
                    yield candidate

    def missing(self, name: str, hints: Sequence[str] = ()) -> str:
        """Why :meth:`find` found nothing for ``name``."""
        refused = self.refusal(name, hints)
        if refused is not None:
            return refused
        if any(not self.inside(c) for c in self.candidates(name, hints)):
            return f"video {name!r} refused: its file links to a place outside the videos folder"
        return f"video {name!r} not found under {self.root}"

    def find(self, name: str, hints: Sequence[str] = ()) -> Path | None:
        if self.refusal(name, hints) is not None:
            return None
        for candidate in self.candidates(name, hints):
            if self.inside(candidate):
                return candidate
        if self._stems is None:
            self._stems = {}
            for path in sorted(self.root.rglob("*")):
                if path.suffix in VIDEO_SUFFIXES and path.is_file() and self.inside(path):
                    self._stems.setdefault(path.stem, path)
        return self._stems.get(Path(name).stem)


def _ready_marker(settings: LucySettings, stream: str) -> Path:
    return Path(settings.data) / "eval-ready" / f"{stream}.json"


def _ingest(settings: LucySettings, path: Path, stream: str, memory: MemoryStore, active: set[StreamRecorder],
            observer: RecorderObserver | None = None) -> float:
    """Record ``path`` into ``stream`` with its coarse captions; the wall seconds it took. Raises when the video
    cannot be read or its captions cannot be made. The recorder is in ``active`` while it runs (to be stopped
    when the run is interrupted)."""
    from lucy.wiring import open_frames

    began = time.perf_counter()
    recorder = StreamRecorder(settings, str(path), stream, memory, builder_captioner(settings), observer=observer,
                              transcriber=builder_transcriber(settings), embedder=builder_embedder(settings),
                              frames=open_frames(settings))
    active.add(recorder)
    try:
        recording = recorder.run()
    finally:
        active.discard(recorder)
    if recording.outcome is not Outcome.FINISHED or recording.ingest.frames == 0:
        raise RuntimeError(f"ingest ended {recording.outcome.value} with {recording.ingest.frames} frames"
                           + (f" ({recording.ingest.lost})" if recording.ingest.lost else ""))
    if recording.backlog not in (None, Backlog.CAUGHT_UP):
        raise RuntimeError(f"coarse captions did not finish ({recording.backlog.value if recording.backlog else ''}: "
                           f"{recording.last_caption_error or 'no error given'})")
    return time.perf_counter() - began


class PacedGate(RecorderObserver):
    """Paces a recording (``pace`` x real time) and holds it at each question moment until released.

    Runs on the recording's thread; the event loop waits on ``events[moment]``, then calls :meth:`release` once
    the questions of that moment have fixed their horizon.
    """

    def __init__(self, moments: Sequence[float], pace: float, loop: asyncio.AbstractEventLoop) -> None:
        self.pending = sorted(set(moments))
        self.pace = pace
        self.loop = loop
        self.events = {m: asyncio.Event() for m in self.pending}
        self._released = threading.Event()
        self._closed = False
        self._clock: tuple[float, float] | None = None  # (wall, media) the pacing counts from

    def _signal(self, moment: float) -> None:
        self.loop.call_soon_threadsafe(self.events[moment].set)

    def on_commit(self, progress: StreamProgress) -> None:
        until = progress.ingest.ingested_until
        if self._clock is None:
            self._clock = (time.monotonic(), progress.ingest.media_start or 0.0)
        if self.pace > 0 and not self._closed:
            delay = self._clock[0] + (until - self._clock[1]) / self.pace - time.monotonic()
            if delay > 0:
                time.sleep(min(delay, 5.0))
        while self.pending and self.pending[0] <= until + 1e-6 and not self._closed:
            moment = self.pending.pop(0)
            self._released.clear()
            held = time.monotonic()
            self._signal(moment)
            self._released.wait(timeout=900)
            wall, media = self._clock
            self._clock = (wall + time.monotonic() - held, media)  # the pause does not count as pacing

    def on_ingest_end(self, progress: StreamProgress) -> None:
        self.close()  # moments past the video's end are asked now, about all of it

    def close(self) -> None:
        self._closed = True
        while self.pending:
            self._signal(self.pending.pop(0))
        self._released.set()

    def release(self) -> None:
        self._released.set()


class Runner:
    """One evaluation run (see the module's docstring)."""

    def __init__(self, state: RunState, settings: LucySettings, videos: Path, *, parallel: int, pace: float,
                 progress: Progress) -> None:
        self.state = state
        self.settings = settings
        self.index = VideoIndex(videos)
        self.parallel = max(1, parallel)
        self.pace = pace
        self.progress = progress
        self.total = 0
        self.answered = 0
        self.began = time.perf_counter()
        self.file: PredictionsFile | None = None
        self.recording: set[StreamRecorder] = set()  # recorders running now (stopped if the run is interrupted)

    def _tick(self, p: Prediction) -> None:
        assert self.file is not None
        self.file.add(p)
        self.answered += 1
        elapsed = time.perf_counter() - self.began
        eta = elapsed / self.answered * (self.total - self.answered)
        mark = {True: "ok ", False: "BAD", None: "-- "}[p.correct]
        self.progress(f"[{self.answered}/{self.total}] {mark} {p.key} -> {p.letter} (truth {p.truth}) "
                      f"{'confident' if p.confident else 'forced'} {p.seconds:.1f}s | elapsed {elapsed:.0f}s, "
                      f"ETA {eta:.0f}s")

    async def run(self, resume: bool) -> None:
        from lucy.wiring import open_memory

        state = self.state
        self.file = PredictionsFile(state.predictions_path, resume=resume)
        by_video: dict[str, list[EvalQuestion]] = {}
        for q in state.questions:
            by_video.setdefault(q.video, []).append(q)
        keys = {q.qid: self._keys(q) for q in state.questions}
        self.total = sum(1 for q in state.questions for k in keys[q.qid] if k[0] not in self.file.done)
        memory = open_memory(self.settings)
        backends = Backends()
        reasoner = eval_reasoner(self.settings)
        slots = asyncio.Semaphore(self.parallel)

        async def one(video: str, questions: list[EvalQuestion]) -> None:
            async with slots:
                await self._video(video, questions, keys, memory, backends, reasoner)

        try:
            await asyncio.gather(*(one(v, qs) for v, qs in by_video.items()))
        finally:
            for recorder in list(self.recording):  # interrupted (Ctrl-C): ingest threads end with what they stored
                recorder.stop()
            for _ in range(600):  # ... before the memory store they write to is closed
                if not self.recording:
                    break
                await asyncio.sleep(0.1)
            if reasoner is not None:
                await reasoner.aclose()
            await backends.aclose()
            memory.close()
            self.file.close()
        state.predictions = [self.file.done[k] for q in state.questions for k, _ in keys[q.qid]
                             if k in self.file.done]

    def _keys(self, q: EvalQuestion) -> list[tuple[str, str]]:
        """(prediction key, when it is asked) for each time ``q`` is asked."""
        if q.ask_at is not None:
            return [(q.qid, f"{q.ask_at:g}")]
        if self.state.while_ingesting:
            return [(f"{q.qid}@{MID}", MID), (f"{q.qid}@{END}", END)]
        return [(q.qid, END)]

    async def _video(self, video: str, questions: list[EvalQuestion], keys: dict[str, list[tuple[str, str]]],
                     memory: MemoryStore, backends: Backends, reasoner: Reasoner | None) -> None:
        state = self.state
        assert self.file is not None
        todo = [q for q in questions if any(k not in self.file.done for k, _ in keys[q.qid])]
        hints = sorted({str(q.extra.get("folder", "")) for q in questions if q.extra.get("folder")})
        path = self.index.find(video, hints + [re.sub(r"^\d+_", "", h) for h in hints])
        outcome = state.videos[video] = VideoOutcome(video, str(path) if path else None)
        if not todo:
            return
        if path is None:
            outcome.skipped = self.index.missing(video, hints)
            self.progress(f"skipping {len(todo)} questions: {outcome.skipped}")
            return
        outcome.seconds = await asyncio.to_thread(video_seconds, path)
        if outcome.seconds is None:
            outcome.skipped = f"{path} cannot be read as a video"
            self.progress(f"skipping {len(todo)} questions: {outcome.skipped}")
            return
        outcome.preset = preset_for(state.benchmark, questions[0], outcome.seconds)
        settings = self.settings.model_copy(update={"preset": outcome.preset})
        subtitles = find_subtitles(state.subtitles, video) if state.subtitles is not None else None
        if subtitles is not None:  # the subtitles are the transcript
            settings = settings.model_copy(update={"transcriber": settings.transcriber.model_copy(
                update={"backend": "none"})})
        base = f"{state.benchmark[:8]}-{_slug(video, 32)}-{memory_fingerprint(settings)}{'-sub' if subtitles else ''}"
        outcome.subtitles = str(subtitles) if subtitles else None
        try:
            if state.while_ingesting:
                await self._online(settings, base, path, outcome, todo, keys, memory, backends, reasoner)
            else:
                await self._offline(settings, base, path, outcome, todo, keys, memory, backends, reasoner)
        except Exception as err:  # noqa: BLE001  (one video's failure is reported; the run goes on)
            outcome.skipped = f"{type(err).__name__}: {err}"
            self.progress(f"video {video}: {outcome.skipped}; its remaining questions are skipped")

    async def _ask(self, engine: QueryEngine, q: EvalQuestion, asked_at: str, key: str) -> None:
        assert self.file is not None
        result = await engine.ask(q.question, q.options)
        self.state.ask_seconds += result.wall_seconds
        self.state.videos[q.video].asked += 1
        self._tick(predict(q, result, asked_at, key))

    async def _offline(self, settings: LucySettings, stream: str, path: Path, outcome: VideoOutcome,
                       todo: list[EvalQuestion], keys: dict[str, list[tuple[str, str]]], memory: MemoryStore,
                       backends: Backends, reasoner: Reasoner | None) -> None:
        assert self.file is not None
        outcome.stream = stream
        marker = _ready_marker(settings, stream)
        if marker.is_file():
            outcome.reused = True
        else:
            self.progress(f"ingesting {path.name} ({outcome.seconds:.0f} s, preset {outcome.preset}) as {stream}")
            outcome.ingest_seconds = await asyncio.to_thread(_ingest, settings, path, stream, memory, self.recording)
            self.state.ingest_seconds += outcome.ingest_seconds
            if outcome.subtitles:
                await asyncio.to_thread(self._subtitles, settings, stream, Path(outcome.subtitles), outcome, memory)
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(json.dumps({"video": str(path), "preset": outcome.preset,
                                          "ingest_seconds": outcome.ingest_seconds}))
        async with open_engine(settings, stream, memory=memory, backends=backends, reasoner=reasoner) as engine:
            for q in todo:
                for key, asked_at in keys[q.qid]:
                    if key not in self.file.done:
                        await self._ask(engine, q, asked_at, key)

    @staticmethod
    def _subtitles(settings: LucySettings, stream: str, path: Path, outcome: VideoOutcome, memory: MemoryStore) -> None:
        from lucy.wiring import open_frames

        info = open_frames(settings).open(stream).info()
        store_subtitles(memory, stream, read_srt(path), span_seconds=settings.levels.coarse.span_seconds,
                        media_seconds=info.media_seconds)

    async def _online(self, settings: LucySettings, base: str, path: Path, outcome: VideoOutcome,
                      todo: list[EvalQuestion], keys: dict[str, list[tuple[str, str]]], memory: MemoryStore,
                      backends: Backends, reasoner: Reasoner | None) -> None:
        from lucy.wiring import open_frames

        assert self.file is not None and outcome.seconds is not None
        # Every question is asked again in a fresh stream: what was ingested before must not be seen.
        frames = open_frames(settings)
        n = 1
        while frames.exists(f"{base}-on{n}") or memory.count(f"{base}-on{n}"):
            n += 1
        stream = outcome.stream = f"{base}-on{n}"
        # One commit per frame: a question's moment falls between two frames, never inside a batch.
        settings = settings.model_copy(update={"ingest": settings.ingest.model_copy(update={"commit_every_frames": 1})})
        moments: dict[float, list[tuple[EvalQuestion, str, str]]] = {}
        for q in todo:
            for key, asked_at in keys[q.qid]:
                if key in self.file.done:
                    continue
                at = q.ask_at if q.ask_at is not None else (
                    outcome.seconds / 2 if asked_at == MID else max(0.0, outcome.seconds - 1.0))
                moments.setdefault(round(at, 3), []).append((q, asked_at, key))
        loop = asyncio.get_running_loop()
        gate = PacedGate(list(moments), self.pace, loop)
        self.progress(f"ingesting {path.name} paced at {self.pace:g}x as {stream}; questions at "
                      f"{', '.join(f'{m:g}' for m in sorted(moments))} s")
        began = time.perf_counter()
        recording = asyncio.ensure_future(
            asyncio.to_thread(_ingest, settings, path, stream, memory, self.recording, gate))
        asked: list[asyncio.Task[None]] = []
        try:
            async with AsyncExitStack() as stack:
                engine = None
                for moment in sorted(moments):
                    waiting = asyncio.ensure_future(gate.events[moment].wait())
                    await asyncio.wait([waiting, recording], return_when=asyncio.FIRST_COMPLETED)
                    if not waiting.done():
                        waiting.cancel()
                        recording.result()  # raises the ingest's error
                        gate.close()
                    if engine is None:  # the stream exists once its first frames are committed
                        engine = await stack.enter_async_context(open_engine(
                            settings, stream, memory=memory, backends=backends, reasoner=reasoner))
                    opened = [asyncio.Event() for _ in moments[moment]]
                    for (q, asked_at, key), event in zip(moments[moment], opened, strict=True):
                        asked.append(asyncio.ensure_future(self._ask_online(engine, q, asked_at, key, event)))
                    await asyncio.gather(*(e.wait() for e in opened))
                    gate.release()
                await asyncio.gather(*asked)
        finally:
            gate.close()
            for task in asked:
                task.cancel()
            await asyncio.gather(recording, return_exceptions=True)
        outcome.ingest_seconds = time.perf_counter() - began
        recording.result()

    async def _ask_online(self, engine: QueryEngine, q: EvalQuestion, asked_at: str, key: str,
                          opened: asyncio.Event) -> None:
        """Ask ``q``; ``opened`` is set once it has fixed its horizon (its first step), or when it fails."""
        try:
            run = engine.run(q.question, q.options)
            async for _ in run:
                opened.set()
        finally:
            opened.set()
        result = run.result
        assert result is not None
        self.state.ask_seconds += result.wall_seconds
        self.state.videos[q.video].asked += 1
        self._tick(predict(q, result, asked_at, key))


def eval_settings(settings: LucySettings | None, out: Path) -> LucySettings:
    """The user's settings (default: the usual lucy.toml / LUCY_* / defaults), with the run's data directory."""
    base = settings if settings is not None else load_settings()
    return base.model_copy(update={"data": out / "data"})


def execute(benchmark: str, annotations: str | Path, videos: str | Path, out: str | Path | None = None, *,
            limit: int | None = None, parallel: int = 1, resume: bool = False, while_ingesting: bool = False,
            settings: LucySettings | None = None, pace: float = 1.0, subtitles: str | Path | None = None,
            progress: Progress | None = None) -> RunState:
    """Read the annotations, ask every question (see the module's docstring) and return what the run did."""
    found = read_annotations(benchmark, annotations)
    if subtitles is not None and (benchmark != "videomme" or while_ingesting):
        raise FormatError("subtitles are Video-MME's, for a run that asks after ingest")
    if subtitles is not None and not Path(subtitles).is_dir():
        raise FormatError(f"subtitles folder {subtitles} does not exist")
    out = Path(out) if out is not None else Path("lucy-eval") / benchmark
    out.mkdir(parents=True, exist_ok=True)
    settings = eval_settings(settings, out)
    online = while_ingesting or benchmark == "ovobench"
    questions = found.questions[:limit] if limit is not None else found.questions
    name = run_name(settings, benchmark, Path(annotations), online) + ("-subtitles" if subtitles else "")
    state = RunState(benchmark, found, questions, out, out / f"{name}.predictions.jsonl", online, settings=settings,
                     subtitles=Path(subtitles) if subtitles else None)
    runner = Runner(state, settings, Path(videos), parallel=parallel, pace=pace, progress=progress or _stderr)
    began = time.perf_counter()
    asyncio.run(runner.run(resume))
    state.wall_seconds = time.perf_counter() - began
    return state

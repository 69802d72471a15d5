"""A question's result: the answer, its evidence in media (and wall-clock) time, and the trace that led to it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lucy.query.reasoners.base import AnswerReply
from lucy.query.trace import Evidence, QueryResult, TraceRecorder, TraceStep, wall_clock
from lucy.text import clip_words

if TYPE_CHECKING:
    from lucy.query.lanes import Lanes


def evidence_of(reply: AnswerReply | None, *, horizon: float, wall_start: float | None,
                lanes: Lanes | None = None) -> list[Evidence]:
    """The reply's supporting spans, clipped to ``[0, horizon]``; spans left empty are dropped. Across streams
    (``lanes``) each is turned from view time into its stream's media time (and wall-clock time), naming it."""
    evidence: list[Evidence] = []
    if reply is None:
        return evidence
    if lanes is not None and not lanes.single:
        for span in reply.evidence:
            lane, start, end = lanes.local(span.start, span.end)
            wall = lane.info.wall_start
            evidence.append(Evidence(start, end, wall_clock(wall, start), wall_clock(wall, end), stream=lane.stream))
        return evidence
    for span in reply.evidence:
        start, end = max(0.0, min(span.start, horizon)), max(0.0, min(span.end, horizon))
        if end < start:
            continue
        evidence.append(Evidence(start, end, wall_clock(wall_start, start), wall_clock(wall_start, end)))
    return evidence


def make_result(reply: AnswerReply | None, *, confident: bool, question_id: int, stream: str, question: str,
                options: tuple[str, ...], horizon: float, wall_start: float | None, wall_seconds: float,
                trace: TraceRecorder, lanes: Lanes | None = None) -> QueryResult:
    """The result of a question answered with ``reply`` (None: no agent reply could be used). It is confident
    only if the loop ended on a confident answer (``confident``) and the reply says so. The result keeps the
    trace's lists: errors recorded later still reach it. Across streams (``lanes``), ``horizon`` is the longest
    stream's and the result names the streams."""
    return QueryResult(
        question_id=question_id, stream=stream, question=question, options=list(options),
        answer=reply.answer if reply is not None else "",
        option_index=reply.option_index if reply is not None and options else None,
        confident=bool(confident and reply is not None and reply.confident),
        evidence=evidence_of(reply, horizon=horizon, wall_start=wall_start, lanes=lanes),
        reason=reply.reason if reply is not None else "no agent reply could be used",
        iterations=trace.iteration, horizon=horizon, wall_seconds=wall_seconds, trace=trace.steps,
        errors=trace.errors, streams=[] if lanes is None or lanes.single else lanes.streams)


def done_step(result: QueryResult, trace: TraceRecorder) -> TraceStep:
    """The last step streamed: the answer in a line. It is not part of the result's trace."""
    return TraceStep(index=len(trace.steps) + 1, agent="done", iteration=trace.iteration,
                     detail=f"{clip_words(result.answer, 120)!r} confident={result.confident}",
                     latency_seconds=result.wall_seconds)

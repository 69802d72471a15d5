"""What the SQL memory stores (:mod:`lucy.memory.sqlite_store`, :mod:`lucy.memory.postgres_store`) share: the
columns they read, in order, and the records made from a row of them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lucy.memory.nodes import MemoryNode
from lucy.memory.watches import Alert, Watch
from lucy.untrusted import normalise_line

NODE_COLUMNS = 'id, stream, level, start, "end", text, instruction, origin, parent, model, created'
WATCH_COLUMNS = "id, stream, question, cooldown_seconds, webhook_url, created, active"
ALERT_COLUMNS = ('id, watch_id, stream, question, start, "end", reason, frame_time, level, created, event_end, '
                 'llm_calls, caption_calls')


QUESTION_COLUMNS = "id, question, options, horizon, asked, answer, answered"
# Seconds of rounding allowed for in ``"end" - start`` where the longest node bounds how long before a time a node
# overlapping it may start (the stores' time-range reads).
SPAN_SLACK = 1e-3


def question_of(stream: str, row: Sequence[Any]) -> dict[str, object]:
    """A question of ``stream`` as :meth:`MemoryStore.questions` gives it, from a row of :data:`QUESTION_COLUMNS`."""
    id_, question, options, horizon, asked, answer, answered = row
    return {"id": id_, "stream": stream, "question": question, "options": json.loads(options), "horizon": horizon,
            "asked": asked, "answer": None if answer is None else json.loads(answer), "answered": answered}


def check_watch(question: str, cooldown_seconds: float) -> None:
    """Refuse a watch with no question or a negative cooldown (ValueError), before any write."""
    if not question.strip():
        raise ValueError("a watch needs a question")
    if cooldown_seconds < 0:
        raise ValueError(f"cooldown_seconds must be 0 or more, not {cooldown_seconds}")


def watch_key(question: str) -> str:
    """What makes two watch questions one: the question normalised (invisible characters out, spaces as one) and
    case-folded, so that "Tell me when X" registered twice, or once as "tell me when  x", is the same watch."""
    return normalise_line(question).casefold()


def same_watch(rows: Sequence[Sequence[Any]], question: str) -> Watch | None:
    """The first watch among ``rows`` (of :data:`WATCH_COLUMNS`; one stream's active watches with one sink) whose
    question is ``question``'s (:func:`watch_key`); None when there is none."""
    key = watch_key(question)
    return next((watch_of(r) for r in rows if watch_key(r[2]) == key), None)


def node_of(row: Sequence[Any]) -> MemoryNode:
    """A node from a row of :data:`NODE_COLUMNS`."""
    id_, stream, level, start, end, text, instruction, origin, parent, model, created = row[:11]
    return MemoryNode(stream=stream, level=level, start=start, end=end, text=text, instruction=instruction,
                      origin=origin, parent=parent, model=model, created=created, id=id_)


def watch_of(r: Sequence[Any]) -> Watch:
    """A watch from a row of :data:`WATCH_COLUMNS`."""
    return Watch(id=r[0], stream=r[1], question=r[2], cooldown_seconds=r[3], webhook_url=r[4], created=r[5],
                 active=bool(r[6]))


def alert_of(r: Sequence[Any]) -> Alert:
    """An alert from a row of :data:`ALERT_COLUMNS`."""
    return Alert(id=r[0], watch_id=r[1], stream=r[2], question=r[3], start=r[4], end=r[5], reason=r[6],
                 frame_time=r[7], level=r[8], created=r[9], event_end=r[10], llm_calls=r[11], caption_calls=r[12])


def alert_filter(stream: str | None, watch_id: int | None, placeholder: str, *, start: float | None = None,
                 end: float | None = None) -> tuple[str, list[object]]:
    """The WHERE condition (and its parameters) of alerts of ``stream`` / ``watch_id`` when given, and whose span
    overlaps ``[start, end)`` of media time when those are given; ``placeholder`` is the driver's parameter mark
    (``?`` for sqlite3, ``%s`` for psycopg)."""
    clauses, params = ["1 = 1"], []
    if stream is not None:
        clauses.append(f"stream = {placeholder}")
        params.append(stream)
    if watch_id is not None:
        clauses.append(f"watch_id = {placeholder}")
        params.append(int(watch_id))
    if start is not None:
        clauses.append(f'"end" > {placeholder}')
        params.append(float(start))
    if end is not None:
        clauses.append(f"start < {placeholder}")
        params.append(float(end))
    return " AND ".join(clauses), params

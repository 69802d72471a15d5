"""One question's view of a stream's memory: the items it may show the agents, laid on each level's time grid.

What was said in the stream (the builder's speech nodes, :mod:`lucy.memory.speech`) is not an item of its own:
each caption (or placeholder) of every depth carries the transcript lines heard within its span, so an agent reads
what was said beside what was seen, and a question about speech finds the span the words were said in.

Items are the stored nodes inside the question's horizon, placeholders for coarse spans nobody has captioned yet,
and the nodes the question makes as it goes. Each has a ``ref``: the number prompts show and agents' replies cite.
The view also holds the two sets Algorithm 1 keeps: the *current memory* (what the answering agent is shown in
the rounds) and the spans already *searched*.

A span is identified by its level and its times in whole milliseconds (:func:`span_key`), so that the same span
reached by different arithmetic (a grid, a stored float, a sub-span loop) is one span.

Times are the question's *view time* (:mod:`lucy.query.lanes`): a stream's own media time for a question about one
stream; for a question across streams, each stream's media time shifted to its lane. Each item keeps its lane's
stream and offset, and agents are shown it in its stream's media time (:meth:`ViewItem.as_memory_item`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lucy.config import Level, Preset, summary_depth
from lucy.memory.nodes import INGEST_ORIGIN, MemoryNode
from lucy.memory.transcribers import SPEECH_LEVEL, TranscriptLine, parse_transcript, sure_words
from lucy.query.lanes import Lanes
from lucy.query.lanes import coarse_grid as coarse_grid  # where it was first; the view's grid is the lanes'
from lucy.query.reasoners.base import MemoryItem
from lucy.text import hms

TIME_TOLERANCE = 1e-3  # seconds: media times closer than this are the same time
PLACEHOLDER_TEXT = "(not captioned yet)"
HEARD_PREFIX = "Speech heard"
MEMORY_LEVELS = frozenset(level.value for level in Level)

SpanKey = tuple[str, int, int]


def span_key(level: str, start: float, end: float) -> SpanKey:
    """The identity of a span of a level: its level and its times in whole milliseconds."""
    return level, round(start * 1000), round(end * 1000)


def memory_depth(level: str) -> int:
    """0 for coarse, 1 for fine, 2 for ultra_fine; -1 for the summary levels above coarse."""
    return Level(level).depth if level in MEMORY_LEVELS else -1


def same_instruction(a: str, b: str) -> bool:
    """Whether two captioning instructions are the same, ignoring case and spacing."""
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


@dataclass
class Span:
    """A span of one memory level, ``[start, end)`` media seconds."""

    level: str
    start: float
    end: float

    @property
    def key(self) -> SpanKey:
        return span_key(self.level, self.start, self.end)


@dataclass
class ViewItem:
    """A memory in this question's view: a stored node, or a placeholder for a coarse span not captioned yet."""

    ref: int
    level: str
    start: float
    end: float
    text: str
    instruction: str = ""  # what the caption was made to look for ("" for a plain caption)
    node: MemoryNode | None = None  # None for a placeholder
    plain: bool = True  # a span's question-independent caption (not one made with a question's instruction)
    heard: str = ""  # the transcript lines said within the span ("" when none)
    similarity: float | None = None  # to the question (:mod:`lucy.query.semantic`); None when unknown
    stream: str = ""  # its stream, for a question across streams ("" for one stream: it is the only one)
    offset: float = 0.0  # view time of its stream's media time 0 (:mod:`lucy.query.lanes`)

    @property
    def shown_text(self) -> str:
        """The caption, then what was heard in the span."""
        return f"{self.text}\n{self.heard}" if self.heard else self.text

    def as_memory_item(self) -> MemoryItem:
        """The item as prompts show it to an agent: in its stream's media time, naming the stream when the question
        is about several."""
        return MemoryItem(self.ref, self.level, self.start - self.offset, self.end - self.offset, self.shown_text,
                          self.instruction, self.similarity, stream=self.stream)


def heard_text(lines: Sequence[TranscriptLine], offset: float = 0.0) -> str:
    """Transcript lines as an item shows them (one per line, with their media times: view time less ``offset``, and
    how sure the transcriber was of an unsure one: 'Speech heard 3.0-4.5 s (46% sure): "..."')."""
    return "\n".join(f'{HEARD_PREFIX} {line.start - offset:.1f}-{line.end - offset:.1f} s'
                     f'{sure_words(line.confidence, " ({}% sure)")}: "{line.text}"' for line in lines)



# One line of heard_text, read back: its times (a, b), how sure (the "NN" of "NN% sure", absent: sure) and its text.
HEARD_LINE = re.compile(rf'{HEARD_PREFIX} (?P<a>\d+(?:\.\d+)?)-(?P<b>\d+(?:\.\d+)?) s'
                        r'(?: \((?P<sure>\d{1,3})% sure\))?: "(?P<text>[^"\n]*)"')

class MemoryView:
    """The memories one question can see, indexed by ref and by span, with the coarse span that each stands for.

    Build it with :meth:`of_nodes`. ``coarse_items[k]`` is the plain caption that stands for coarse span
    ``coarse_grid[k]`` (None until there is one; :meth:`coarse_item` makes a placeholder on demand).
    """

    def __init__(self, *, preset: Preset, horizon: float, grid: list[tuple[float, float]],
                 coarse_instruction: str, lanes: Lanes | None = None) -> None:
        self.preset = preset
        self.horizon = horizon
        self.coarse_grid = grid
        self.lanes = lanes  # the streams of a question across several (None, or one lane: one stream)
        self._lane_ranges = lanes.grid_ranges() if lanes is not None else [range(len(grid))]
        self.coarse_instruction = coarse_instruction  # nodes captioned with it are plain captions
        self.coarse_seconds = self.span_seconds(Level.COARSE.value)
        self.items: dict[int, ViewItem] = {}
        self.coarse_items: list[ViewItem | None] = [None] * len(grid)
        self.speech: list[TranscriptLine] = []  # what was heard up to the horizon, in time order
        self.current: set[int] = set()  # refs of the current memory (Algorithm 1, from sparse initialisation on)
        self.searched: set[SpanKey] = set()  # spans a round has searched already
        self._refs_by_span: dict[SpanKey, list[int]] = {}
        self._next_ref = 1

    @classmethod
    def of_nodes(cls, nodes: Iterable[MemoryNode], *, preset: Preset, horizon: float,
                 grid: list[tuple[float, float]], coarse_instruction: str, lanes: Lanes | None = None) -> MemoryView:
        """The view of the stored ``nodes`` (in view time) that lie inside the horizon."""
        view = cls(preset=preset, horizon=horizon, grid=grid, coarse_instruction=coarse_instruction, lanes=lanes)
        nodes = list(nodes)
        for node in nodes:
            if node.level == SPEECH_LEVEL and node.end <= horizon + TIME_TOLERANCE:
                view.speech.extend(parse_transcript(node.text))
        view.speech.sort(key=lambda line: (line.start, line.end))
        for node in nodes:
            if node.level != SPEECH_LEVEL and node.end <= horizon + TIME_TOLERANCE and node.end > node.start:
                view.add_node(node)
        view.coarse_items = [view._longest_plain_coarse(start, end) for start, end in grid]
        return view

    def _longest_plain_coarse(self, start: float, end: float) -> ViewItem | None:
        """The plain coarse caption of the span that reaches furthest. It may be partial (a tail captioned by an
        earlier question with a smaller horizon): it stands for the span until a whole caption exists."""
        best: ViewItem | None = None
        for item in self.items.values():
            if item.level == Level.COARSE.value and item.plain and abs(item.start - start) < TIME_TOLERANCE and \
                    item.end <= end + TIME_TOLERANCE and (best is None or item.end > best.end):
                best = item
        return best

    # --------------------------------------------------------------------------------------- adding

    def add(self, level: str, start: float, end: float, text: str, *, instruction: str = "",
            node: MemoryNode | None = None, plain: bool = True) -> ViewItem:
        """Put a memory in view under the next ref."""
        stream, offset = "", 0.0
        if self.lanes is not None and not self.lanes.single:
            lane = self.lanes.at(start)
            stream, offset = lane.stream, lane.offset
        heard = heard_text(self.heard_in(start, end), offset) if level in MEMORY_LEVELS else ""
        item = ViewItem(self._next_ref, level, start, end, text, instruction, node, plain, heard, stream=stream,
                        offset=offset)
        self._next_ref += 1
        self.items[item.ref] = item
        self._refs_by_span.setdefault(span_key(level, start, end), []).append(item.ref)
        return item

    def add_node(self, node: MemoryNode) -> ViewItem:
        """Put a stored node in view. Ingest captions, captions made with the coarse instruction and summaries
        are plain (question-independent); the others show the instruction they were made with."""
        plain = node.origin == INGEST_ORIGIN or same_instruction(node.instruction, self.coarse_instruction) \
            or node.level not in MEMORY_LEVELS
        return self.add(node.level, node.start, node.end, node.text, instruction="" if plain else node.instruction,
                        node=node, plain=plain)

    # --------------------------------------------------------------------------------------- looking up

    def heard_in(self, start: float, end: float) -> list[TranscriptLine]:
        """Transcript lines said (at least in part) within ``[start, end)``."""
        return [line for line in self.speech if line.start < end - TIME_TOLERANCE and line.end > start + TIME_TOLERANCE]

    def span_seconds(self, level: str) -> float:
        """The span length of a memory level (its grid step)."""
        return self.preset.level(Level(level)).span_seconds

    def fps(self, level: str) -> float:
        """The rate a memory level's captions are made at."""
        return self.preset.level(Level(level)).fps

    def coarse_index(self, start: float) -> int:
        """The index in ``coarse_grid`` of the coarse span that starts at ``start`` (nearest it; one past the last of
        its stream's spans at most, so that a stream's media end is the end of a range of them)."""
        if self.lanes is None or self.lanes.single:
            return round(start / self.coarse_seconds)
        lane = self.lanes.at(start)
        indices = self._lane_ranges[self.lanes.lanes.index(lane)]
        return min(indices.start + max(0, round((start - lane.offset) / self.coarse_seconds)), indices.stop)

    def end_at(self, start: float) -> float:
        """Where the media of the span starting at ``start`` ends: the horizon, or its lane's end."""
        return self.horizon if self.lanes is None or self.lanes.single else self.lanes.at(start).end

    def node_in_view(self, node: MemoryNode) -> MemoryNode:
        """A node the store returned (in its stream's media time) in view time."""
        return node if self.lanes is None else self.lanes.from_store(node)

    def node_to_store(self, node: MemoryNode) -> MemoryNode:
        """A node made in view time as its stream stores it."""
        return node if self.lanes is None else self.lanes.to_store(node)

    def stream_at(self, start: float) -> str | None:
        """The stream of a question across several that a view time lies on (None for one stream)."""
        return None if self.lanes is None or self.lanes.single else self.lanes.at(start).stream

    def clock(self, start: float, end: float) -> str:
        """A span as a progress line shows it: ``1:10–1:20``, or ``front 1:10–1:20`` across streams."""
        on = ""
        if self.lanes is not None and not self.lanes.single:
            lane, start, end = self.lanes.local(start, end)
            on = f"{lane.stream} "
        return f"{on}{hms(start)}–{hms(end)}"

    def label(self, level: str, start: float, end: float) -> str:
        """A span as a trace shows it: ``coarse 60-120s``, or ``coarse front 60-120s`` across streams."""
        return f"{level} {start:g}-{end:g}s" if self.lanes is None else f"{level} {self.lanes.label(start, end)}"

    def coarse_item(self, k: int) -> ViewItem:
        """The item that stands for coarse span ``k``; a placeholder if it has no caption, so that the span can
        still be chosen, and captioned when it is searched."""
        item = self.coarse_items[k]
        if item is None:
            start, end = self.coarse_grid[k]
            item = self.add(Level.COARSE.value, start, end, PLACEHOLDER_TEXT)
            self.coarse_items[k] = item
        return item

    def item_for_span(self, level: str, start: float, end: float) -> ViewItem | None:
        """The item that stands for a span: its plain caption, else any caption of it, else None."""
        refs = self._refs_by_span.get(span_key(level, start, end), [])
        plain = [r for r in refs if self.items[r].plain]
        pick = plain or refs
        return self.items[pick[-1]] if pick else None

    def items_of_span(self, key: SpanKey) -> list[ViewItem]:
        """Every item of exactly this span, oldest first."""
        return [self.items[r] for r in self._refs_by_span.get(key, [])]

    def stored_caption(self, level: str, start: float, end: float, *, instruction: str | None) -> ViewItem | None:
        """A stored caption of exactly this span: made with this instruction (``instruction`` given), or any
        (None: sub-spans are reused whatever they were captioned for). The newest wins."""
        for item in reversed(self.items_of_span(span_key(level, start, end))):
            if item.node is None:
                continue
            if instruction is None or (not item.plain and same_instruction(item.node.instruction, instruction)):
                return item
        return None

    def grid_span(self, level: str, start: float) -> tuple[float, float]:
        """The span of ``level``'s grid that starts at or before ``start`` (cut at the horizon). A caption of part
        of a span (made under an earlier horizon) stands for this whole span."""
        t = self.span_seconds(level)
        k = math.floor(start / t + 1e-9)
        return k * t, min((k + 1) * t, self.end_at(start))

    def parent_id(self, level: str, start: float, end: float) -> int | None:
        """Id of the stored plain node of the span one level up that encloses ``[start, end)`` (None at coarse)."""
        if level == Level.COARSE.value:
            return None
        up = list(Level)[Level(level).depth - 1].value
        t = self.span_seconds(up)
        k = math.floor(start / t + 1e-9)
        item = self.item_for_span(up, k * t, min((k + 1) * t, self.end_at(start)))
        if item is None and up == Level.COARSE.value:
            index = self.coarse_index(k * t)
            if index < len(self.coarse_items) and abs(self.coarse_grid[index][0] - k * t) < TIME_TOLERANCE:
                item = self.coarse_items[index]
        return item.node.id if item is not None and item.node is not None else None

    def below_summaries(self) -> list[int]:
        """Refs of every memory-level item (coarse and deeper), in ref order: what the first answer is given."""
        return [ref for ref, item in self.items.items() if not summary_depth(item.level)]

    def ordered(self, refs: Sequence[int]) -> list[ViewItem]:
        """Items in time order; at one start, coarsest (summaries first) to finest."""
        return sorted((self.items[r] for r in refs),
                      key=lambda i: (i.start, -summary_depth(i.level), memory_depth(i.level), i.ref))

    # --------------------------------------------------------------------------------------- current memory

    def add_known_inside(self, start: float, end: float) -> None:
        """Everything already known inside a span joins the current memory (earlier questions' findings)."""
        for ref, item in self.items.items():
            if item.level in MEMORY_LEVELS and start - TIME_TOLERANCE <= item.start and \
                    item.end <= end + TIME_TOLERANCE:
                self.current.add(ref)

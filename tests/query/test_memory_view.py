"""The pieces of the loop on their own: a question's view of memory, and the ranking that packs it into prompts."""

from __future__ import annotations

import pytest

from lucy.config import PRESETS
from lucy.memory.nodes import INGEST_ORIGIN, TAIL_ORIGIN, MemoryNode
from lucy.query import prompts
from lucy.query.memory_view import PLACEHOLDER_TEXT, MemoryView, coarse_grid
from lucy.query.packing import PromptPacker
from lucy.query.reasoners.base import Question

COARSE_INSTRUCTION = "describe everything"


def node(level: str, start: float, end: float, text: str = "", *, origin: str = INGEST_ORIGIN,
         instruction: str = COARSE_INSTRUCTION, id_: int | None = None) -> MemoryNode:
    return MemoryNode(stream="cam", level=level, start=start, end=end, text=text or f"{level} {start:g}",
                      instruction=instruction, origin=origin, id=id_)


def view_of(nodes: list[MemoryNode], horizon: float = 180.0) -> MemoryView:
    grid = coarse_grid(horizon, 60.0, last_frame=horizon - 0.5, finished=True)
    return MemoryView.of_nodes(nodes, preset=PRESETS["live"], horizon=horizon, grid=grid,
                               coarse_instruction=COARSE_INSTRUCTION)


def test_what_stands_for_each_coarse_span():
    view = view_of([
        node("coarse", 0, 60, id_=1),
        node("coarse", 60, 90, origin=TAIL_ORIGIN, id_=2),  # partial: captioned when the horizon was 90 s
        node("coarse", 60, 120, "looked for the van", origin="question:1", instruction="find the van", id_=3),
        node("coarse", 120, 200, "past the horizon"),  # ends after the horizon: not in view
    ])
    assert [item.node.id if item else None for item in view.coarse_items] == [1, 2, None]
    placeholder = view.coarse_item(2)
    assert placeholder.text == PLACEHOLDER_TEXT and placeholder.node is None and view.coarse_item(2) is placeholder
    # A caption made with a question's instruction is not plain, and shows its instruction; the coarse
    # instruction counts as none (case and spacing aside).
    looked = view.item_for_span("coarse", 60, 120)
    assert looked is not None and not looked.plain and looked.instruction == "find the van"
    assert view.add_node(node("fine", 0, 10, instruction=" Describe  EVERYTHING", origin="question:2")).plain


def test_stored_captions_are_reused_by_instruction_and_parents_found_one_level_up():
    view = view_of([node("coarse", 0, 60, id_=1),
                    node("fine", 10, 20, "a van", origin="question:1", instruction="Find the van", id_=2)])
    assert view.stored_caption("fine", 10, 20, instruction="find  the van").node.id == 2
    assert view.stored_caption("fine", 10, 20, instruction="count the cars") is None
    assert view.stored_caption("fine", 10, 20, instruction=None).node.id == 2  # sub-spans: any caption
    assert view.parent_id("fine", 10, 20) == 1  # the coarse caption that stands for 0-60 s
    assert view.parent_id("ultra_fine", 12, 14) == 2
    assert view.parent_id("coarse", 0, 60) is None
    assert view.grid_span("fine", 13) == (10, 20) and view.grid_span("coarse", 150) == (120, 180)


def test_ranking_prefers_matches_then_depth_and_instructions():
    view = view_of([node("coarse", 0, 60, "a street"), node("coarse", 60, 120, "a red van at the gate"),
                    node("fine", 60, 70, "a street", origin="question:1", instruction="find the van")])
    packer = PromptPacker(view, Question("Where is the red van?"), budget=4000)
    street, van, fine_street = (view.items[ref] for ref in (1, 2, 3))
    score = dict(zip(("street", "van", "fine"), packer.relevance([street, van, fine_street]), strict=True))
    assert score["van"] > score["fine"] > score["street"]
    assert score["fine"] - score["street"] == pytest.approx(0.15 + 0.1)  # a level deeper, made with an instruction


def test_the_same_caption_of_a_span_is_shown_once():
    """A question that looked again at a span and saw what ingest saw stored the same text: packed once, with the
    boost either copy had."""
    view = view_of([node("coarse", 0, 60, "a street"), node("coarse", 60, 120, "a red van at the gate"),
                    node("coarse", 60, 120, "a red van at the gate", origin="question:1", instruction="find the van")])
    packer = PromptPacker(view, Question("Where is the red van?"), budget=4000)
    shown = packer.pack(lambda items: prompts.answer_prompt(Question("Where is the red van?"), items, final=False),
                        [1, 2, 3], boost={3})
    assert [(m.start, m.text) for m in shown] == [(0, "a street"), (60, "a red van at the gate")]

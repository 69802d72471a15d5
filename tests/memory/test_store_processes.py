"""Several processes on one memory database at once: they create it together, write and read concurrently."""

from __future__ import annotations

import multiprocessing as mp
import traceback
from pathlib import Path

from lucy.memory.nodes import MemoryNode, question_origin
from lucy.memory.sqlite_store import SQLiteMemoryStore

WRITERS = 4
ROUNDS = 60


def _writer(path: str, i: int, barrier, results) -> None:
    try:
        barrier.wait(timeout=30)
        store = SQLiteMemoryStore(Path(path))  # all processes open (and migrate) a new database at once
        for j in range(ROUNDS):
            if j % 4 == 0:  # a batch: one transaction
                store.add_many([MemoryNode("cam", "fine", j, j + 1, f"writer{i} batch{j} part{p}",
                                           origin=question_origin(i)) for p in range(3)])
            else:
                store.add(MemoryNode("cam", "fine", j, j + 1, f"writer{i} single{j}", origin=question_origin(i)))
            # Ingest spans: each writer owns its own stream, one node per span.
            store.add(MemoryNode(f"s{i}", "coarse", j * 60.0, (j + 1) * 60.0, f"span {j} of writer{i}"))
            if j % 10 == 0:
                qid = store.add_question("cam", f"question {j} from writer{i}")
                store.set_answer(qid, {"answer": f"{i}-{j}"})
        store.close()
        results.put((i, "ok"))
    except BaseException:  # noqa: BLE001  (reported to the parent, which fails the test)
        results.put((i, traceback.format_exc()))


def _reader(path: str, barrier, stop, results) -> None:
    try:
        barrier.wait(timeout=30)
        store = SQLiteMemoryStore(Path(path))
        last = 0
        reads = 0
        while not stop.is_set() or reads < 5:
            n = store.count("cam")
            assert n >= last, "a committed node disappeared"
            last = n
            for node, _ in store.search("cam", "writer0 batch", limit=50):
                assert node.text.startswith("writer"), node.text
            nodes = store.nodes("cam", start=10, end=20)
            assert all(node.start < 20 and node.end > 10 for node in nodes)
            assert len([x for x in nodes if "batch" in x.text]) % 3 == 0  # a batch is seen whole or not at all
            reads += 1
        store.close()
        results.put(("reader", f"ok {reads}"))
    except BaseException:  # noqa: BLE001
        results.put(("reader", traceback.format_exc()))


def test_processes_create_write_and_read_concurrently(tmp_path: Path):
    ctx = mp.get_context("fork")
    path = str(tmp_path / "memory.sqlite")
    barrier = ctx.Barrier(WRITERS + 1)
    stop = ctx.Event()
    results = ctx.Queue()
    writers = [ctx.Process(target=_writer, args=(path, i, barrier, results)) for i in range(WRITERS)]
    reader = ctx.Process(target=_reader, args=(path, barrier, stop, results))
    for p in [*writers, reader]:
        p.start()
    outcomes = {}
    for _ in range(WRITERS):
        key, outcome = results.get(timeout=120)
        outcomes[key] = outcome
    stop.set()
    key, outcome = results.get(timeout=60)
    outcomes[key] = outcome
    for p in [*writers, reader]:
        p.join(timeout=30)
    assert all(v == "ok" for k, v in outcomes.items() if k != "reader"), outcomes
    assert outcomes["reader"].startswith("ok"), outcomes["reader"]

    store = SQLiteMemoryStore(Path(path))
    per_writer = ROUNDS // 4 * 3 + (ROUNDS - ROUNDS // 4)
    assert store.count("cam") == WRITERS * per_writer
    for i in range(WRITERS):
        assert len(store.search("cam", f"writer{i}", limit=10_000)) == per_writer
        assert store.count(f"s{i}") == ROUNDS
        assert store.captioned_until(f"s{i}") == ROUNDS * 60.0
    questions = store.questions("cam", limit=1000)
    assert len(questions) == WRITERS * (ROUNDS // 10) and all(q["answer"] for q in questions)
    store.close()

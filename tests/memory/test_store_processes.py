"""Several processes on one memory database at once: they create it together, write and read concurrently."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from lucy.memory.sqlite_store import SQLiteMemoryStore

WRITERS = 4
ROUNDS = 60

# Each child waits for the "go" file, so that all of them open (and migrate) a new database at the same moment.
_PRELUDE = """
import sys, time
from pathlib import Path
from lucy.memory.nodes import MemoryNode, question_origin
from lucy.memory.sqlite_store import SQLiteMemoryStore
path, go = Path(sys.argv[1]), Path(sys.argv[2])
deadline = time.monotonic() + 60
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.001)
store = SQLiteMemoryStore(path)
"""

_WRITER = _PRELUDE + """
i, rounds = int(sys.argv[3]), int(sys.argv[4])
for j in range(rounds):
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
print("ok")
"""

_READER = _PRELUDE + """
stop = Path(sys.argv[3])
last = reads = 0
while not stop.exists() or reads < 5:
    n = store.count("cam")
    assert n >= last, "a committed node disappeared"
    last = n
    for node, _ in store.search("cam", "writer0 batch", limit=50):
        assert node.text.startswith("writer"), node.text
    nodes = store.nodes("cam", start=10, end=20)
    assert all(node.start < 20 and node.end > 10 for node in nodes)
    for i in range(4):  # a batch is seen whole or not at all
        batch = [x for x in nodes if x.text.startswith(f"writer{i} batch")]
        assert len(batch) % 3 == 0, batch
    reads += 1
store.close()
print("ok", reads)
"""


def test_processes_create_write_and_read_concurrently(tmp_path: Path):
    path, go, stop = tmp_path / "memory.sqlite", tmp_path / "go", tmp_path / "stop"
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(go), str(i), str(ROUNDS)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(WRITERS)]
    reader = subprocess.Popen([sys.executable, "-c", _READER, str(path), str(go), str(stop)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # let every child import Lucy and wait at the start line
    go.touch()
    outcomes = [w.communicate(timeout=120) for w in writers]
    stop.touch()
    read_out, read_err = reader.communicate(timeout=60)
    for w, (out, err) in zip(writers, outcomes, strict=True):
        assert w.returncode == 0 and out.strip() == "ok", err
    assert reader.returncode == 0 and read_out.startswith("ok"), read_err

    store = SQLiteMemoryStore(path)
    per_writer = ROUNDS // 4 * 3 + (ROUNDS - ROUNDS // 4)
    assert store.count("cam") == WRITERS * per_writer
    for i in range(WRITERS):
        assert len(store.search("cam", f"writer{i}", limit=10_000)) == per_writer
        assert store.count(f"s{i}") == ROUNDS
        assert store.captioned_until(f"s{i}") == ROUNDS * 60.0
    questions = store.questions("cam", limit=1000)
    assert len(questions) == WRITERS * (ROUNDS // 10) and all(q["answer"] for q in questions)
    store.close()

"""The package's layers, read from its imports: a lower module never imports one above it.

Cycles between modules grew unseen before (ingest knew the cluster, memory knew the query package); the edges
listed here were removed on purpose, and this test keeps them removed. It reads the source with :mod:`ast`, so
imports inside functions (the lazy ones) count as much as those at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import lucy

PACKAGE = Path(lucy.__file__).parent

# (importer, imported): a module named by the first (or inside it) imports nothing named by the second.
FORBIDDEN = [
    ("lucy.ingest.roots", "lucy.ingest.source"),
    ("lucy.memory", "lucy.query"),
    ("lucy.memory.store", "lucy.watch"),
    ("lucy.memory.sqlite_store", "lucy.watch"),
    ("lucy.memory.postgres_store", "lucy.watch"),
    ("lucy.memory.rows", "lucy.watch"),
    # Stores are opened by the composition root and handed down: storage knows neither it nor the cluster.
    ("lucy.ingest", "lucy.cluster"),
    ("lucy.ingest", "lucy.wiring"),
    ("lucy.ingest", "lucy.memory"),
    ("lucy.memory", "lucy.wiring"),
    ("lucy.recorder", "lucy.wiring"),
    # A query engine is assembled in wiring: the query package knows neither the backends nor the stores' factory.
    ("lucy.query", "lucy.backends"),
    ("lucy.query", "lucy.wiring"),
    # Entry points on top depend downwards only: the demo does not import the CLI that starts it.
    ("lucy.demo", "lucy.cli"),
    ("lucy.eval", "lucy.cli"),
    # The stream runtime is handed its stores' opener (lucy.wiring.open_worker_stores): it never picks a backend.
    ("lucy.runtime", "lucy.wiring"),
    ("lucy.runtime", "lucy.service"),
    ("lucy.runtime", "lucy.cluster"),
    # Stats are plain records at the bottom: the watch package fills them, metrics does not import it.
    ("lucy.metrics", "lucy.watch"),
    ("lucy.metrics", "lucy.memory"),
    ("lucy.metrics", "lucy.ingest"),
]

# Names that moved to a lower module: nothing imports them from their old home (no forwarding shims left).
MOVED = [
    "lucy.ingest.redact_url",
    "lucy.ingest.source.redact_url",
    "lucy.ingest.source.redact_source",
    "lucy.ingest.source.redacting_handler",
    "lucy.ingest.source.RedactingFilter",
    "lucy.query.text",
    "lucy.watch.model",
    "lucy.watch.Alert",
    "lucy.watch.Watch",
    "lucy.memory.stores",
    "lucy.ingest.open_frames",
    "lucy.ingest.zarr_store.open_frames",
    "lucy.memory.sqlite_store.open_memory",
    "lucy.memory.sqlite_store.open_existing_memory",
    "lucy.query.factory",
    "lucy.cli.common.lucy_command",
    "lucy.watch.delivery.DeliveryStats",
    "lucy.metrics.captioning",
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every name this file imports, as dotted paths (``from a.b import c`` gives ``a.b`` and ``a.b.c``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _inside(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


GRAPH = {_module_name(p): _imports(p) for p in PACKAGE.rglob("*.py")}


@pytest.mark.parametrize(("importer", "imported"), FORBIDDEN)
def test_lower_module_does_not_import_upper(importer: str, imported: str) -> None:
    offenders = sorted(
        f"{module} -> {name}"
        for module, names in GRAPH.items()
        if _inside(module, importer)
        for name in names
        if _inside(name, imported)
    )
    assert offenders == []


@pytest.mark.parametrize("old", MOVED)
def test_moved_name_is_imported_from_its_new_home(old: str) -> None:
    assert sorted(module for module, names in GRAPH.items() if old in names) == []

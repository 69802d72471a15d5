"""The streams a cluster records: rows of ``cluster_streams`` in PostgreSQL, shared by every API replica and owner.

Replicas read it to know which streams are wanted (:mod:`lucy.cluster.manager`); an owner writes how its run ended
there (:mod:`lucy.cluster.owner`), so a replica that missed the owner's last reports still learns it.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from lucy.memory.postgres_store import PostgresMemoryStore
from lucy.runtime.messages import RunEnd, StreamState
from lucy.runtime.registry import StreamSpec


class ClusterRegistry:
    """The streams the cluster records, in ``cluster_streams`` (the interface of
    :class:`lucy.runtime.registry.StreamRegistry`). The spec keeps the source as given (a camera URL's credentials
    are needed by its owner): it is shown only through :func:`lucy.redaction.redact_url`."""

    def __init__(self, db: PostgresMemoryStore) -> None:
        self.db = db

    def load(self) -> list[StreamSpec]:
        rows = self.db.run(lambda c: c.execute("SELECT spec FROM cluster_streams ORDER BY created, name").fetchall())
        return [StreamSpec(**row[0]) for row in rows]

    def put(self, spec: StreamSpec) -> None:
        """Add a stream, or start a stream again (its recorded end is cleared)."""
        self.db.run(lambda c: c.execute(
            "INSERT INTO cluster_streams (name, spec, created) VALUES (%s, %s, %s) "
            "ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, ended = NULL",
            (spec.name, json.dumps(asdict(spec)), spec.created)), write=True)

    def recording(self) -> set[str]:
        """Names of the streams whose recording has not ended."""
        rows = self.db.run(lambda c: c.execute("SELECT name FROM cluster_streams WHERE ended IS NULL").fetchall())
        return {row[0] for row in rows}

    def set_ended(self, name: str, end: RunEnd) -> None:
        """Record how the stream's recording ended (its owner then goes, freeing its ingest capacity)."""
        self.db.run(lambda c: c.execute(
            "UPDATE cluster_streams SET ended = %s WHERE name = %s",
            (json.dumps({"state": end.state.value, "error": end.error, "lost": end.lost}), name)), write=True)

    def ended(self, name: str) -> RunEnd | None:
        """How the stream's recording ended, if it has."""
        row = self.db.run(lambda c: c.execute("SELECT ended FROM cluster_streams WHERE name = %s",
                                              (name,)).fetchone())
        if row is None or row[0] is None:
            return None
        return RunEnd(StreamState(row[0]["state"]), error=row[0]["error"], lost=row[0]["lost"])

    def remove(self, name: str) -> None:
        self.db.run(lambda c: c.execute("DELETE FROM cluster_streams WHERE name = %s", (name,)), write=True)

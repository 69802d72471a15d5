"""Lucy on a cluster: the same interfaces, on shared engines (operator notes: ``deploy/cluster.md``).

- :mod:`lucy.cluster.leases`: exactly one writer per stream — a lease row per stream in PostgreSQL, renewed by its
  owner, and a fencing epoch that every write of the owner checks in its own transaction.
- :mod:`lucy.cluster.frames`: frames in an S3 bucket as immutable per-epoch segments, visible only once their row in
  PostgreSQL commits (a superseded owner's late frames land where nobody reads).
- :mod:`lucy.cluster.owner`: the Ray actor that owns one stream (``owner:<stream>``) on a node offering ``ingest``.
- :mod:`lucy.cluster.registry`: the wanted streams, a table shared by every replica and owner.
- :mod:`lucy.cluster.manager`: the cluster's stream runtime (:class:`lucy.runtime.protocol.StreamRuntime`): the
  wanted streams reconciled with the running owners, for any number of stateless API replicas
  (``lucy serve --cluster ADDRESS``).
- :mod:`lucy.cluster.listener`: every replica hears of each new memory node from PostgreSQL (``LISTEN``).
- :mod:`lucy.cluster.duties`: what runs once per cluster (the MQTT bridge, alert delivery), on the replica holding
  its lease.
"""

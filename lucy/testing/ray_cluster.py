"""A Ray cluster of simulated nodes on this machine, for tests and benchmarks (``ray.cluster_utils.Cluster``).

Each node is a real raylet with its own processes; killing one (:meth:`LocalCluster.kill_node`) is what a machine
dying looks like to Ray. Health checks are shortened so that a dead node is noticed within about two seconds (Ray's
default takes half a minute). The head offers no ``ingest`` resource: stream owners go to the worker nodes, each of
which has room for more owners than it starts with, so an owner whose node dies has somewhere to go.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

HEALTH_CHECK = {"health_check_period_ms": 500, "health_check_timeout_ms": 1000,
                "health_check_failure_threshold": 3, "health_check_initial_delay_ms": 0}


@dataclass
class LocalCluster:
    """A head and ``ingest_nodes`` nodes offering ``ingest`` (``per_node`` owners each)."""

    ingest_nodes: int = 2
    per_node: int = 8
    cpus_per_node: int = 1
    cluster: Any = None
    nodes: list[Any] = field(default_factory=list)

    def start(self) -> LocalCluster:
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": self.cpus_per_node, "include_dashboard": False, "_system_config": HEALTH_CHECK})
        for _ in range(self.ingest_nodes):
            self.add_node()
        self.cluster.wait_for_nodes()
        return self

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def add_node(self) -> Any:
        node = self.cluster.add_node(num_cpus=self.cpus_per_node, resources={"ingest": self.per_node})
        self.nodes.append(node)
        return node

    def node_of(self, node_id: str) -> Any:
        """The simulated node whose Ray node id is ``node_id`` (None if it is gone)."""
        return next((n for n in self.nodes if n.node_id == node_id), None)

    def kill_node(self, node: Any) -> float:
        """Kill a node's processes at once (no graceful shutdown); the time it was killed (monotonic)."""
        killed = time.monotonic()
        self.cluster.remove_node(node, allow_graceful=False)
        self.nodes.remove(node)
        return killed

    def shutdown(self) -> None:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        if self.cluster is not None:
            self.cluster.shutdown()
            self.cluster = None

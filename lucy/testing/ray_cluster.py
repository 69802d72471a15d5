"""A Ray cluster of simulated nodes on this machine, for tests and benchmarks (``ray.cluster_utils.Cluster``).

Each node is a real raylet with its own processes; killing one (:meth:`LocalCluster.kill_node`) is what a machine
dying looks like to Ray. Health checks are shortened so that a dead node is noticed within about two seconds (Ray's
default takes half a minute). The head offers no ``ingest`` resource: stream owners go to the worker nodes, each of
which has room for more owners than it starts with, so an owner whose node dies has somewhere to go.

Anyone who reaches a Ray node can run code on it, so the harness keeps to loopback and authenticates: every node
listens on 127.0.0.1 only, and Ray's token authentication is on with a token of the harness's own
(:attr:`LocalCluster.token`). Ray reads both from the environment when it is first imported (the token, and
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, which keeps its idea of "this node's address" on loopback), so
:meth:`LocalCluster.start` must run before anything in the process imports ``ray``; the processes it starts, and
any ``lucy serve`` started afterwards from this environment, inherit them.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from dataclasses import dataclass, field
from typing import Any

HEALTH_CHECK = {"health_check_period_ms": 500, "health_check_timeout_ms": 1000,
                "health_check_failure_threshold": 3, "health_check_initial_delay_ms": 0}

LOOPBACK = "127.0.0.1"
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}  # Ray's "single machine" switch: its node address is loopback


@dataclass
class LocalCluster:
    """A head and ``ingest_nodes`` nodes offering ``ingest`` (``per_node`` owners each)."""

    ingest_nodes: int = 2
    per_node: int = 8
    cpus_per_node: int = 1
    token: str = field(default_factory=lambda: secrets.token_hex(32))  # Ray's token authentication
    cluster: Any = None
    nodes: list[Any] = field(default_factory=list)

    def start(self) -> LocalCluster:
        self._prepare_environment()
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": self.cpus_per_node, "include_dashboard": False, "node_ip_address": LOOPBACK,
            "_system_config": HEALTH_CHECK})
        for _ in range(self.ingest_nodes):
            self.add_node()
        self.cluster.wait_for_nodes()
        return self

    def _prepare_environment(self) -> None:
        if os.environ.get("RAY_AUTH_MODE") == "token" and os.environ.get("RAY_AUTH_TOKEN"):
            self.token = os.environ["RAY_AUTH_TOKEN"]  # an earlier harness of this process: Ray holds its token
        wanted = {**LOOPBACK_ENV, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token}
        if "ray" in sys.modules and any(os.environ.get(k) != v for k, v in wanted.items()):
            raise RuntimeError("start the Ray harness before anything imports ray: Ray reads its node address and "
                               "authentication settings from the environment when it is imported")
        os.environ.update(wanted)
        os.environ.pop("RAY_AUTH_TOKEN_PATH", None)

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def add_node(self) -> Any:
        node = self.cluster.add_node(num_cpus=self.cpus_per_node, resources={"ingest": self.per_node},
                                     node_ip_address=LOOPBACK)
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

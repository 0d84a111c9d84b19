"""The HyperPod HTTP API across nodes (issue 41 item 5): a step the reference client
(amzn-sagemaker-checkpointing 1.1.3, unchanged) posts to one node's agent is replicated to its
ring successor, and is read back through the HTTP API of another node's agent after the first
node is lost, with nothing durable to fall back on.

Three agents, one per "node" (n1 → n2 → n3 → n1, R = 2), each with its own tmpfs root, peer port
and HTTP port, one hostfile and one cluster secret, as in test_multinode.py.
"""
from __future__ import annotations

import os
import time

import pytest

from agent_harness import free_port
from sagemaker_ref import ref_site
from test_multinode import Cluster


class HttpCluster(Cluster):
    """Cluster whose agents each serve the HTTP API on a port of their own (the same one again when
    a node is replaced)."""

    def start(self, node):
        if not hasattr(self, "http"):
            self.http = {}
        self.http.setdefault(node, free_port())
        self.extra_for = ["--http-listen", f"127.0.0.1:{self.http[node]}"]
        saved, self.extra = self.extra, [*self.extra, *self.extra_for]
        try:
            return super().start(node)
        finally:
            self.extra = saved


@pytest.fixture
def http_cluster(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ref_site()))
    c = HttpCluster(tmp_path)
    yield c
    c.close()


def _client(c: HttpCluster, node: str, namespace: str, rank: int, world: int):
    from amzn_sagemaker_checkpointing.config.in_memory_client import InMemoryClientConfig
    from amzn_sagemaker_checkpointing.storage.clients.inmemory.inmemory_client import InMemoryCheckpointClient

    return InMemoryCheckpointClient(namespace, str(rank), str(world),
                                    config=InMemoryClientConfig(base_url=f"http://127.0.0.1:{c.http[node]}"))


def _wait_replicated(c: HttpCluster, node: str, ns: str, step: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        log = c.nodes[node].log_text()
        if any("event=replicated" in line and f"ns={ns}" in line and f"step={step} " in line
               for line in log.splitlines()):
            return
        assert time.monotonic() < deadline, f"step {step} of {ns} never replicated from {node}:\n{log[-3000:]}"
        time.sleep(0.1)


def test_a_step_posted_to_one_node_is_read_through_another_after_the_node_is_lost(http_cluster):
    c = http_cluster
    ranks = [_client(c, "n1", "httprep", r, 2) for r in range(2)]
    ranks[0].get_or_create_namespace()
    shards = {r: os.urandom(1 << 20) + bytes([r]) for r in range(2)}
    for r, client in enumerate(ranks):
        client.put_checkpoint(step=10, data=shards[r])
    ranks[0].put_checkpoint(step=10, data=b"metadata 10", metadata_index=0)
    assert ranks[0].get_latest_checkpoints()[0] == 10
    _wait_replicated(c, "n1", "httprep", 10)
    assert not (c.durable / "httprep").exists()  # memory and replicas only

    # n1 is lost and replaced by a fresh agent (empty root, same id, same ports); the job's ranks
    # come back on it and read through its HTTP API: the step comes from n2, n1's replica holder.
    c.replace("n1")
    back = [_client(c, "n1", "httprep", r, 2) for r in range(2)]
    assert back[1].get_latest_checkpoints() == [10]  # listed from n2, its replica holder
    for r, client in enumerate(back):
        assert client.get_checkpoint(step=10) == shards[r]  # the client checks its checksum too
    assert back[0].get_checkpoint(step=10, metadata_index=0) == b"metadata 10"
    log = c.nodes["n1"].log_text()
    assert "restored_from_peer" in log and "peer=n2" in log, log[-3000:]

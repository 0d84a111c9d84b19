"""Agents on loopback joined as peers (one hostfile, one cluster secret), for the multi-node
tests (test_replication.py, test_parity.py), and the polling wait they share."""
from __future__ import annotations

import time

from agent_harness import write_hostfile  # tests/harness, on the path from conftest.py


def wait_for(pred, timeout=20.0, what="condition", poll=0.01):
    """Returns once pred() is true; AssertionError naming what after timeout seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(poll)
    raise AssertionError(f"timed out waiting for {what}")


class PeerCluster:
    """n agents n1..n<n> from the `agents` fixture, each with --peers and --peer-secret-file and
    extra; started one after another, or all at once then waited for (together=True: agents that
    check their peers at start, e.g. --redundancy, need the others up); durable: one durable
    directory for all (each its own by default)."""

    def __init__(self, agents, tmp_path, n, extra, together=False, durable=None):
        self.tmp = tmp_path
        self.secret = tmp_path / "secret"
        self.secret.write_bytes(b"0123456789abcdef-cluster-secret\n")
        self.secret.chmod(0o600)
        self.hostfile = tmp_path / "hosts"
        write_hostfile(self.hostfile, n)
        self.nodes = {}
        for i in range(n):
            node = f"n{i + 1}"
            self.nodes[node] = agents("--memory-budget", "256MiB", "--node-id", node, "--peers", self.hostfile,
                                      "--peer-secret-file", self.secret, *extra, start=not together)
        if durable is not None:  # one durable directory for every agent (a step spanning nodes persists there)
            assert together, "a shared durable directory needs the agents started together"
            for a in self.nodes.values():
                a.durable = durable
        if together:
            for a in self.nodes.values():
                a.start(wait=False)
            for a in self.nodes.values():
                a.wait_ready()

    def __getitem__(self, node):
        return self.nodes[node]

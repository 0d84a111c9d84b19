"""A commit spanning nodes goes down a tree (issue 21 item 2, decision 102), with real agents over
TCP: five agents n1..n5 with --commit-fan-out 2, so that n1 (the coordinator) asks n2 and n3, and
n2 asks n4 and n5. Every node's writer seals its part; n5's agent is SIGKILLed before the commit:
the commit fails naming n5 and the node that asked it (n2), and n1 commits nothing, so no reader
sees the step. With all five alive the same step commits, and n1's answer sums every part.

A request down the tree names the members as runs of places in the agents' common ring, not as a
list (decision 108): every interior node receives a request of the same size, and an agent whose
peer list differs (n4 with a sixth agent in its hostfile) refuses it, naming both nodes and both
rings, rather than read the places as other nodes."""
import json
import re
import shutil
import signal
import subprocess
import uuid
from pathlib import Path

from conftest import AGENT_BIN, CLI_BIN, WRITER_BIN
from agent_harness import SHM, AgentProcess, free_ports, write_hostfile

N = 5
NS = "tree"


class Five:
    def __init__(self, work: Path, other_ring: str | None = None):
        """other_ring: a node whose hostfile has a sixth agent (n6) the others' lacks."""
        secret = work / "secret"
        secret.write_bytes(b"commit-tree-test-cluster-secret-0123456789\n")
        secret.chmod(0o600)
        hosts = work / "hosts"
        write_hostfile(hosts, N)
        bigger = work / "hosts6"
        bigger.write_text(hosts.read_text() + f"n6 127.0.0.1:{free_ports(1)[0]}\n")
        self.work = work
        self.nodes = [f"n{i + 1}" for i in range(N)]
        self.agents: dict[str, AgentProcess] = {}
        self.roots: list[Path] = []
        for node in self.nodes:
            root = SHM / f"tierckpt-tree-{uuid.uuid4().hex[:10]}"
            self.roots.append(root)
            a = AgentProcess(work / f"{node}.sock", cli=CLI_BIN, output=work / f"{node}.log")
            a.error = AssertionError
            a.name = f"tierckptd {node}"
            a.launch([AGENT_BIN, "--socket", a.socket, "--root", root, "--memory-budget", "64MiB", "--node-id",
                      node, "--peers", bigger if node == other_ring else hosts, "--peer-secret-file", secret, "--replicas", "2",
                      "--commit-fan-out", "2", "--peer-timeout-ms", "3000", "--log-level", "info"], wait=False)
            self.agents[node] = a
        for a in self.agents.values():
            a.wait_ready()

    def close(self):
        for a in self.agents.values():
            a.kill()
        for r in self.roots:
            shutil.rmtree(r, ignore_errors=True)

    def seal_parts(self, step):
        """Every node but n1 writes and seals its part and holds it (the writers stay connected)."""
        holders = []
        for i, node in enumerate(self.nodes[1:], start=2):
            p = subprocess.Popen([WRITER_BIN, "--socket", self.agents[node].socket, "--ns", NS, "--step", str(step),
                                  "--objects", "2", "--size", "4096", "--prefix", f"{node}_", "--seed", str(i),
                                  "--ref-dir", self.work / f"ref{step}", "--no-commit", "--hold"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            holders.append(p)
        for p in holders:
            line = p.stdout.readline()
            assert line.startswith("SEALED"), f"a part's writer did not seal: {line!r} {p.stderr.read()}"
        return holders

    def commit(self, step):
        return subprocess.run([WRITER_BIN, "--socket", self.agents["n1"].socket, "--ns", NS, "--step", str(step),
                               "--objects", "2", "--size", "4096", "--prefix", "n1_", "--seed", "1", "--ref-dir",
                               self.work / f"ref{step}", "--members", ",".join(self.nodes)],
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)

    def committed_on(self, node, step) -> bool:
        r = subprocess.run([CLI_BIN, "--socket", self.agents[node].socket, "ls", NS, "--json"],
                           capture_output=True, text=True, timeout=30, check=True)
        return any(s["step"] == step and s["memory"] == "committed" for s in json.loads(r.stdout)["steps"])


def release(holders):
    for p in holders:
        if p.poll() is None:
            p.stdin.close()
            p.wait(timeout=30)


def test_a_member_gone_below_an_interior_node_fails_the_commit_naming_both_and_nothing_is_visible(tmp_path):
    c = Five(tmp_path)
    try:
        holders = c.seal_parts(1)
        c.agents["n5"].kill(signal.SIGKILL)
        r = c.commit(1)
        release(holders)
        assert r.returncode != 0, r.stdout
        assert "node n5 (asked by n2) did not answer" in r.stderr, r.stderr
        assert not c.committed_on("n1", 1), "the coordinator committed its part of a failed step"
        assert "event=commit_parts_failed" in c.agents["n1"].log_text()
        # n2 forwarded to its children (n4, n5) and answered its parent with the failure.
        assert "by=n2" in c.agents["n4"].log_text()
    finally:
        c.close()


def test_the_same_commit_goes_down_the_tree_and_sums_every_part(tmp_path):
    c = Five(tmp_path)
    try:
        holders = c.seal_parts(2)
        r = c.commit(2)
        release(holders)
        assert r.returncode == 0, r.stderr
        # n1's answer: its own part (2 objects of 4 KiB) plus the sums of the five parts.
        assert r.stdout.startswith("COMMITTED tree 2 8192"), r.stdout
        n1 = c.agents["n1"].log_text()
        assert "event=commit_across_nodes" in n1 and "objects=10" in n1 and "depth=2" in n1, n1[-2000:]
        # Each interior node asked its children and logged its subtree: n2 the parts of n2, n4, n5.
        assert "event=subtree_committed" in c.agents["n2"].log_text()
        assert "parts=3" in c.agents["n2"].log_text()
        # The request carries one member run, not five ids: n2's request (from n1) and n4's (from
        # n2) are the same bytes, and as short as a request naming no member but the ring.
        sizes = {node: re.findall(r"event=subtree_committed .*request_bytes=(\d+)", c.agents[node].log_text())
                 for node in ("n2", "n4")}
        assert sizes["n2"] and sizes["n2"] == sizes["n4"], sizes
        assert int(sizes["n2"][0]) < 120, sizes
        for node in c.nodes:
            assert c.committed_on(node, 2), node
    finally:
        c.close()


def test_an_agent_whose_peer_list_differs_refuses_the_request_naming_both_rings(tmp_path):
    c = Five(tmp_path, other_ring="n4")
    try:
        holders = c.seal_parts(3)
        r = c.commit(3)
        release(holders)
        assert r.returncode != 0, r.stdout
        assert "node n2 asked node n4 to commit its subtree of tree/3" in r.stderr, r.stderr
        assert "(5 agents, digest" in r.stderr and "node n4's ring (its --peers) is 6 agents" in r.stderr, r.stderr
        assert "the same --peers" in r.stderr, r.stderr
        assert not c.committed_on("n4", 3), "n4 committed its part of a ring it does not share"
        assert not c.committed_on("n1", 3), "the coordinator committed its part of a failed step"
        assert c.committed_on("n5", 3)  # n4's sibling under n2: its own part only, which no reader sees whole
    finally:
        c.close()

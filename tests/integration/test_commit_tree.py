"""A commit spanning nodes goes down a tree (issue 21 item 2, decision 102), with real agents over
TCP: five agents n1..n5 with --commit-fan-out 2, so that n1 (the coordinator) asks n2 and n3, and
n2 asks n4 and n5. Every node's writer seals its part; n5's agent is SIGKILLed before the commit:
the commit fails naming n5 and the node that asked it (n2), and n1 commits nothing, so no reader
sees the step. With all five alive the same step commits, and n1's answer sums every part."""
import json
import shutil
import signal
import subprocess
import uuid
from pathlib import Path

from conftest import AGENT_BIN, CLI_BIN, WRITER_BIN
from agent_harness import SHM, AgentProcess, write_hostfile

N = 5
NS = "tree"


class Five:
    def __init__(self, work: Path):
        secret = work / "secret"
        secret.write_bytes(b"commit-tree-test-cluster-secret-0123456789\n")
        secret.chmod(0o600)
        hosts = work / "hosts"
        write_hostfile(hosts, N)
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
                      node, "--peers", hosts, "--peer-secret-file", secret, "--replicas", "2",
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
        for node in c.nodes:
            assert c.committed_on(node, 2), node
    finally:
        c.close()

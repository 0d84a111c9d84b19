"""Decision 152: a part of a step spanning nodes whose coordinator failed the step (an "orphan":
committed on its member, never on the coordinator) must not hold up the persistence of anything
else on its node.

Found by the netns+DCP fault campaign (docs/reliability.md, run L, `writer_stuck`): a DCP step
spanning n1's and n2's agents was committed on n2 down the commit tree, n2's replication of it
failed (its holder had just been SIGKILLed), so n1 failed the step and never committed its own part.
n2's persister uploaded n2's part and waited for n1's, holding a persist thread for `--parts-wait`
(an hour); two such steps held both threads, and every step written on n2 after them waited for
its durable copy behind them.

Here, with real agents: three agents with `--replicas 3 --replica-ack all --persist-threads 1`; n3
SIGKILLed; n1 commits a step across n1 and n2, which fails because n2 cannot replicate its part to
n3; n3 restarted; then a step of n2 alone, written with `--persist --wait-durable`, must become
durable at once while the orphan waits, which `agent status` reports (`persist_awaiting_parts`).
Before decision 152 the second writer waited out `--parts-wait` (600 s here).
"""
import json
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import AGENT_BIN, CLI_BIN, WRITER_BIN
from agent_harness import SHM, AgentProcess, write_hostfile

NODES = ["n1", "n2", "n3"]
NS = "span"


class Cluster:
    def __init__(self, work: Path):
        self.work = work
        self.durable = work / "durable"
        self.durable.mkdir()
        self.secret = work / "secret"
        self.secret.write_bytes(b"orphan-part-test-cluster-secret-0123456789\n")
        self.secret.chmod(0o600)
        self.hosts = work / "hosts"
        write_hostfile(self.hosts, len(NODES))
        self.roots = {n: SHM / f"tierckpt-orphan-{uuid.uuid4().hex[:10]}" for n in NODES}
        self.agents: dict[str, AgentProcess] = {}
        for n in NODES:
            self.start(n, wait=False)
        for a in self.agents.values():
            a.wait_ready()

    def start(self, node, wait=True):
        a = AgentProcess(self.work / f"{node}.sock", cli=CLI_BIN, output=self.work / f"{node}.log")
        a.error = AssertionError
        a.name = f"tierckptd {node}"
        a.launch([AGENT_BIN, "--socket", a.socket, "--root", self.roots[node], "--durable", self.durable,
                  "--memory-budget", "128MiB", "--node-id", node, "--peers", self.hosts, "--peer-secret-file",
                  self.secret, "--replicas", "3", "--replica-ack", "all", "--persist-threads", "1",
                  "--parts-wait", "600", "--takeover-after", "600", "--peer-timeout-ms", "2000",
                  "--log-level", "info"], wait=False)
        self.agents[node] = a
        if wait:
            a.wait_ready()

    def close(self):
        for a in self.agents.values():
            if a.alive():
                a.kill()
        for r in self.roots.values():
            shutil.rmtree(r, ignore_errors=True)

    def writer(self, node, step, *args, timeout=60):
        return subprocess.run([WRITER_BIN, "--socket", self.agents[node].socket, "--ns", NS, "--step", str(step),
                               "--objects", "2", "--size", "65536", "--prefix", f"{node}_", "--seed", str(step),
                               *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def status(self, node) -> dict:
        r = subprocess.run([CLI_BIN, "--socket", self.agents[node].socket, "--json", "agent", "status"],
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def logs(self) -> str:
        return "\n".join(f"--- {n} ---\n{a.log_text()[-2500:]}" for n, a in self.agents.items())


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    yield c
    c.close()


def test_an_orphan_part_of_a_failed_spanning_step_holds_up_no_other_persist(cluster):
    c = cluster
    # A first step of n2 alone: the cluster replicates and persists.
    r = c.writer("n2", 1, "--persist", "--wait-durable")
    assert r.returncode == 0, f"{r.stderr}\n{c.logs()}"

    # n3 gone: n2 can commit its part but not replicate it, so the coordinator n1 fails the step.
    c.agents["n3"].kill()  # SIGKILL, waited for
    part = subprocess.Popen([WRITER_BIN, "--socket", c.agents["n2"].socket, "--ns", NS, "--step", "2",
                             "--objects", "2", "--size", "65536", "--prefix", "n2_", "--seed", "22",
                             "--no-commit", "--hold"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = part.stdout.readline()
        assert line.startswith("SEALED"), f"n2's part did not seal: {line!r} {part.stderr.read()}"
        r = c.writer("n1", 2, "--members", "n1,n2", "--persist")
        assert r.returncode != 0, f"the spanning commit succeeded with n3 gone:\n{r.stdout}\n{c.logs()}"
    finally:
        part.stdin.close()
        part.wait(timeout=30)
    log2 = c.agents["n2"].log_text()
    assert "event=commit ns=span step=2 " in log2, f"n2 did not commit its part of step 2:\n{c.logs()}"
    assert "event=commit ns=span step=2 " not in c.agents["n1"].log_text(), "n1 committed its part of a failed step"

    # n2 uploads its part of the orphan, then waits for n1's, which never comes.
    record = c.durable / NS / "step_0000000002" / "_tierckpt_part.n2.json"
    deadline = time.monotonic() + 30
    while not record.exists():
        assert time.monotonic() < deadline, f"n2 did not upload its part of step 2\n{c.logs()}"
        time.sleep(0.05)

    # With n3 back, a step of n2 alone is replicated and becomes durable at once, beside the orphan.
    c.start("n3")
    t0 = time.monotonic()
    r = c.writer("n2", 3, "--persist", "--wait-durable", timeout=60)
    took = time.monotonic() - t0
    assert r.returncode == 0, f"{r.stderr}\n{c.logs()}"
    assert took < 30, f"n2's step 3 took {took:.1f} s to become durable beside the orphan"
    assert (c.durable / NS / "step_0000000003" / "_tierckpt_manifest.json").exists()
    # The orphan is parked, holding no persist thread, and `agent status` says so (between two of its
    # looks at the durable tier, each a store read or two, once a second).
    deadline = time.monotonic() + 10
    while True:
        st = c.status("n2")
        if st.get("persist_awaiting_parts") == 1 and st["persist_running"] == 0:
            break
        assert time.monotonic() < deadline, f"n2 does not report the orphan parked: {st}"
        time.sleep(0.05)
    # The orphan's step never becomes durable: its coordinator's part does not exist.
    assert not (c.durable / NS / "step_0000000002" / "_tierckpt_manifest.json").exists()

    # Deleted by hand, the orphan leaves n2's memory at once instead of after --parts-wait.
    r = subprocess.run([CLI_BIN, "--socket", c.agents["n2"].socket, "rm", NS, "2"], capture_output=True, text=True,
                       timeout=30, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"rm of the orphan failed: {r.stdout}{r.stderr}"
    st = c.status("n2")
    assert st["persist_awaiting_parts"] == 0, st
    assert "event=persist_wait_cancelled ns=span step=2 " in c.agents["n2"].log_text()
    ls = subprocess.run([CLI_BIN, "--socket", c.agents["n2"].socket, "--json", "ls", NS], capture_output=True,
                        text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert ls.returncode == 0, ls.stderr
    assert [(e["step"], e["memory"]) for e in json.loads(ls.stdout)["steps"] if e["step"] == 2] in ([], [(2, "")]), ls.stdout

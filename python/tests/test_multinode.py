"""Steps spanning nodes (docs/multinode.md): real torch ranks in one gloo group
save through several real agents, one per "node", each with its own tmpfs
root, port and socket, listed in one hostfile with one cluster secret and
sharing one durable directory.

Ranks 0-1 talk to node n1's agent and ranks 2-3 to n2's; n3 runs an agent
with no ranks that holds n2's replicas (R = 2, ring n1 → n2 → n3 → n1).
"""
from __future__ import annotations

import json
import signal
import time
import uuid

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader

from agent_harness import write_hostfile
from conftest import Agent, run_ranks
from tierckpt import agent as tc_agent
from tierckpt.torch import TieredReader, TieredWriter

ROWS, COLS = 12, 5


def _full(name: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(sum(map(ord, name)))
    return torch.randn(ROWS, COLS, generator=g)


def _state(world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (world,))
    return {
        "w": distribute_tensor(_full("w"), mesh, [Shard(0)]),
        "cols": distribute_tensor(_full("cols"), mesh, [Shard(1)]),
        "replicated": _full("replicated"),  # written once (deduplicated), read by every rank
        "meta": {"step": 10, "note": "multinode"},
    }


def _save(rank, world, cfgs, step, persist):
    dcp.save(_state(world), storage_writer=TieredWriter(cfgs[rank], step, persist=persist))


def _load_and_check(rank, world, cfgs, step):
    from torch.distributed.tensor import DTensor

    target = _state(world)
    for v in target.values():
        if isinstance(v, DTensor):
            v.to_local().zero_()
    target["replicated"].zero_()
    target["meta"] = {"step": 0, "note": ""}
    dcp.load(target, storage_reader=TieredReader(cfgs[rank], step))
    for name in ("w", "cols"):
        assert torch.equal(target[name].full_tensor(), _full(name)), f"{name} differs on rank {rank}"
    assert torch.equal(target["replicated"], _full("replicated")), f"replicated differs on rank {rank}"
    assert target["meta"] == {"step": 10, "note": "multinode"}


class Cluster:
    def __init__(self, tmp_path, n=3, extra=()):
        self.tmp_path = tmp_path
        self.durable = tmp_path / "durable"
        self.secret = tmp_path / "secret"
        self.secret.write_bytes(b"multinode-test-cluster-secret\n")
        self.secret.chmod(0o600)
        self.hostfile = tmp_path / "hosts"
        write_hostfile(self.hostfile, n)
        self.extra = list(extra)
        self.nodes: dict[str, Agent] = {}
        self.all: list[Agent] = []
        for i in range(n):
            self.start(f"n{i + 1}")

    def start(self, node) -> Agent:
        workdir = self.tmp_path / f"{node}-{uuid.uuid4().hex[:6]}"
        workdir.mkdir()
        a = Agent(workdir, ["--memory-budget", "256MiB", "--node-id", node, "--peers", str(self.hostfile),
                            "--peer-secret-file", str(self.secret), *self.extra])
        a.durable = self.durable  # one durable base for the whole job
        self.nodes[node] = a
        self.all.append(a)
        return a.start()

    def replace(self, node) -> Agent:
        """SIGKILLs node's agent and starts a fresh one (empty root) with the same id and port."""
        self.nodes[node].kill()
        return self.start(node)

    def configs(self, ns, ranks_per_node=2, nodes=("n1", "n2")):
        return [self.nodes[n].config(ns) for n in nodes for _ in range(ranks_per_node)]

    def close(self):
        for a in self.all:
            if a.proc and a.proc.poll() is None:
                a.proc.send_signal(signal.SIGCONT)
            a.kill()
            import shutil
            shutil.rmtree(a.root, ignore_errors=True)
        tc_agent._clients.clear()


@pytest.fixture
def cluster(tmp_path):
    made = []

    def make(*extra):
        c = Cluster(tmp_path, extra=extra)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def _wait_durable(c: Cluster, ns, step, timeout=60):
    """Until the step's merged manifest is in the durable directory (every part uploaded)."""
    deadline = time.time() + timeout
    while not (c.durable / ns / f"step_{step:010d}" / "_tierckpt_manifest.json").exists():
        assert time.time() < deadline, c.nodes["n1"].log_text()[-3000:]
        time.sleep(0.1)


def _durable_manifest(c: Cluster, ns, step):
    return json.loads((c.durable / ns / f"step_{step:010d}" / "_tierckpt_manifest.json").read_text())


def _stock_load(c: Cluster, ns, step):
    target = {"w": torch.zeros(ROWS, COLS), "cols": torch.zeros(ROWS, COLS), "replicated": torch.zeros(ROWS, COLS),
              "meta": {"step": 0, "note": ""}}
    dcp.load(target, storage_reader=FileSystemReader(str(c.durable / ns / f"step_{step:010d}")), no_dist=True)
    for name in ("w", "cols", "replicated"):
        assert torch.equal(target[name], _full(name)), name
    assert target["meta"] == {"step": 10, "note": "multinode"}


def test_a_step_saved_through_two_nodes_loads_everywhere_and_persists_as_one_stock_dcp_step(cluster, tmp_path):
    c = cluster()
    cfgs = c.configs("span")
    run_ranks(tmp_path, 4, _save, cfgs, 10, True)
    # Each node holds its own part in memory; the coordinator's answer listed both.
    for node in ("n1", "n2"):
        assert c.nodes[node].steps("span")[10]["memory"] == "committed", node
    _wait_durable(c, "span", 10)
    m = _durable_manifest(c, "span", 10)
    assert m["members"] == ["n1", "n2"]
    assert {o["node"] for o in m["objects"]} == {"n1", "n2"}
    assert (c.durable / "span" / "step_0000000010" / "_tierckpt_part.n2.json").exists()
    _stock_load(c, "span", 10)
    # Every rank loads, including the deduplicated tensors the other node wrote.
    run_ranks(tmp_path, 4, _load_and_check, cfgs, 10)
    # Swapped: every rank now reads what ranks of the other node wrote. n2 holds n1's replica already;
    # n1 fetches n2's part from n2.
    run_ranks(tmp_path, 4, _load_and_check, c.configs("span", nodes=("n2", "n1")), 10)
    log = c.nodes["n1"].log_text()
    assert "part_fetched" in log and "origin=n2" in log, log[-3000:]


def test_a_replaced_node_loads_its_part_from_its_replica_holder(cluster, tmp_path):
    c = cluster()
    cfgs = c.configs("replace")
    run_ranks(tmp_path, 4, _save, cfgs, 10, False)  # memory only: nothing durable to fall back on
    assert not (c.durable / "replace").exists()
    c.replace("n2")
    cfgs = c.configs("replace")
    run_ranks(tmp_path, 4, _load_and_check, cfgs, 10)
    log = c.nodes["n2"].log_text()
    assert "restored_from_peer" in log and "peer=n3" in log, log[-3000:]


def test_a_part_whose_member_and_holder_are_gone_is_read_from_the_durable_tier(cluster, tmp_path):
    """n2 and n3 (n2's replica holder) are SIGKILLed after the step became durable: ranks reading
    through n1, whose own part is still in memory, get n2's objects from the durable copy
    (decision 120), which n1 keeps as its copy of n2's part."""
    c = cluster("--peer-timeout-ms", "1500")
    run_ranks(tmp_path, 4, _save, c.configs("gone"), 10, True)
    _wait_durable(c, "gone", 10)
    for node in ("n2", "n3"):
        c.nodes[node].kill()
    run_ranks(tmp_path, 2, _load_and_check, c.configs("gone", nodes=("n1",)), 10)
    log = c.nodes["n1"].log_text()
    assert "part_from_durable" in log and "origin=n2" in log, log[-3000:]


def test_a_member_cut_off_during_persistence_is_taken_over_by_its_replica_holder(cluster, tmp_path):
    c = cluster("--takeover-after", "1", "--peer-timeout-ms", "1500")
    cfgs = c.configs("takeover")
    run_ranks(tmp_path, 4, _save, cfgs, 10, False)
    n2 = c.nodes["n2"]
    n2.proc.send_signal(signal.SIGSTOP)  # n2 is cut off: alive, silent
    try:
        r = c.nodes["n1"].cli("persist", "takeover", "10", "--wait", "--timeout", "90")
        assert r.returncode == 0
        m = _durable_manifest(c, "takeover", 10)
        assert m["members"] == ["n1", "n2"]
        _stock_load(c, "takeover", 10)
        log = c.nodes["n3"].log_text()
        assert "part_taken_over" in log and "origin=n2" in log, log[-3000:]
        assert "part_takeover" in c.nodes["n1"].log_text()
    finally:
        n2.proc.send_signal(signal.SIGCONT)


def _load_agreed(rank, world, cfgs, want):
    from tierckpt.torch import agreed_step, latest_step

    mine = latest_step(cfgs[rank])
    step = agreed_step(cfgs[rank])
    assert step == want, f"rank {rank}: agreed on {step}, its own newest is {mine}"
    _load_and_check(rank, world, cfgs, step)


def test_ranks_agree_on_the_newest_step_every_node_can_load(cluster, tmp_path):
    c = cluster()
    cfgs = c.configs("agree")
    run_ranks(tmp_path, 4, _save, cfgs, 10, True)
    c.nodes["n1"].cli("persist", "agree", "10", "--wait", "--timeout", "60")
    run_ranks(tmp_path, 4, _save, cfgs, 11, False)  # memory only
    # n2 and the holder of its replicas (n3) are both lost: n2's part of step 11 is gone,
    # step 10 is whole in the durable tier.
    c.replace("n3")
    c.replace("n2")
    cfgs = c.configs("agree")
    assert tc_agent.client(cfgs[0]).latest_step("agree") == 11  # n1 alone would pick 11
    run_ranks(tmp_path, 4, _load_agreed, cfgs, 10)
    log = c.nodes["n2"].log_text()
    assert "peer_restore_failed" in log and "next=durable" in log, log[-3000:]


def test_a_corrupt_memory_copy_is_dropped_on_its_node_only_and_comes_back_from_its_replica(cluster, tmp_path):
    c = cluster()
    cfgs = c.configs("heal")
    run_ranks(tmp_path, 4, _save, cfgs, 10, True)
    _wait_durable(c, "heal", 10)
    held = c.nodes["n3"].root / "replicas" / "n2" / "ns" / "heal" / "step_0000000010"
    assert held.is_dir()
    # Damage rank 2's file in n2's memory, in place (the inode its readers map).
    path = c.nodes["n2"].root / "ns" / "heal" / "step_0000000010" / "__2_0.distcp"
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(size - 16)
        b = f.read(1)
        f.seek(size - 16)
        f.write(bytes([b[0] ^ 0xFF]))
    # The reader sees the damage and asks n2's agent to repair its copy: the agent re-hashes it,
    # drops n2's memory copy only, and restores it from n3's verified replica before the durable tier.
    run_ranks(tmp_path, 4, _load_and_check, cfgs, 10)
    log = c.nodes["n2"].log_text()
    assert "event=restored_from_peer ns=heal step=10 peer=n3" in log, log[-3000:]
    assert held.is_dir(), "the holder's replica was deleted with the corrupt copy"
    assert "replica_deleted" not in c.nodes["n3"].log_text()

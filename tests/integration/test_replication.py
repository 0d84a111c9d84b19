"""Multi-node: peer replication between real agents on one machine (issue 5).

Every test starts a cluster of real tierckptd processes, each with its own
tmpfs root, socket, durable directory, node id (n1..nN) and peer port, all
listed in one hostfile and sharing one cluster secret; failures are real
SIGKILLs. With R = 2 and spacing 1, node n<i>'s replica holder is its ring
successor n<i+1> (docs/placement.md), and its replicas live under
<holder root>/replicas/n<i>/ns/<ns>/step_<n>.
"""
import json
import shutil
import signal

import pytest

from conftest import assert_dirs_equal
from agent_harness import write_hostfile  # tests/harness, on the path from conftest.py
from peer_cluster import PeerCluster, wait_for

MiB = 1 << 20


class Cluster(PeerCluster):
    def replica_dir(self, holder, origin, ns, step):
        return self.nodes[holder].root / "replicas" / origin / "ns" / ns / f"step_{step:010d}"

    def replace(self, node):
        """SIGKILL the node's agent and start a fresh one with an empty tmpfs root (a new machine)."""
        a = self.nodes[node]
        a.kill(signal.SIGKILL)
        shutil.rmtree(a.root, ignore_errors=True)
        a.start()
        return a


@pytest.fixture
def cluster(agents, tmp_path):
    def make(n=4, *extra):
        return Cluster(agents, tmp_path, n, extra)
    return make


def test_commit_waits_for_the_replica_and_a_replacement_node_loads_from_its_peer(cluster, tmp_path):
    c = cluster(4)
    ref = tmp_path / "ref"
    c["n1"].writer("--ns", "j", "--step", 3, "--objects", 3, "--size", 2 * MiB, "--ref-dir", ref)
    # --replica-ack all (the default): the commit returned, so n2 holds a verified, committed replica.
    held = c.replica_dir("n2", "n1", "j", 3)
    assert (held / "_tierckpt_manifest.json").exists()
    assert_dirs_equal(ref, held)
    for other in ("n3", "n4"):
        assert not (c[other].root / "replicas" / "n1").exists(), f"{other} holds n1's data"
    peers = json.loads(c["n2"].cli("agent", "status", "--json").stdout)["peers"]
    assert peers["holders"] == ["n3"] and peers["replicas"] == 2 and peers["replica_ack"] == "all"
    assert peers["holding"] == [{"origin": "n1", "steps": 1, "bytes": 6 * MiB}], peers
    assert "holding        1 step(s), 6.0 MiB, of node n1" in c["n2"].cli("agent", "status").stdout

    c.replace("n1")
    steps = c["n1"].steps("j")
    assert steps[3]["memory"] == "peer", steps
    out = tmp_path / "out"
    c["n1"].cli("restore", "j", 3, "--to", out)
    assert_dirs_equal(ref, out)
    log = c["n1"].log_text()
    assert "event=restored_from_peer ns=j step=3 peer=n2" in log
    assert c["n1"].steps("j")[3]["memory"] == "committed"  # back in the replacement's memory


def test_losing_every_holder_falls_back_to_durable_with_a_log_line(cluster, tmp_path):
    c = cluster(4)
    ref = tmp_path / "ref"
    c["n1"].writer("--ns", "d", "--step", 5, "--objects", 2, "--size", MiB, "--ref-dir", ref,
                   "--persist", "--wait-durable")
    c["n2"].kill(signal.SIGKILL)  # the only other holder with R = 2
    c.replace("n1")
    out = tmp_path / "out"
    c["n1"].cli("restore", "d", 5, "--to", out)
    assert_dirs_equal(ref, out)
    log = c["n1"].log_text()
    assert "event=peer_restore_failed ns=d step=5 next=durable" in log, log[-3000:]
    assert "restored_from_peer" not in log


def test_a_step_in_no_tier_names_the_peers_it_asked(cluster):
    c = cluster(3)
    r = c["n1"].cli("restore", "none", 1, "--to", "/tmp/unused-restore", check=False)
    assert r.returncode != 0
    assert "step none/1 is in no tier" in r.stderr, r.stderr
    assert "no replica holder of node n1 has none step 1 (n2: not found" in r.stderr, r.stderr


def test_holder_killed_mid_replication_leaves_no_committed_replica(cluster, tmp_path):
    c = cluster(4)
    partial = c["n2"].root / "replicas" / "n1" / "ns" / "k" / "step_0000000001.partial"
    w = c["n1"].writer_popen("--ns", "k", "--step", 1, "--objects", 16, "--size", 8 * MiB)
    wait_for(partial.exists, what="n2 to start pulling the replica")
    c["n2"].kill(signal.SIGKILL)
    out, err = w.communicate(timeout=120)
    # ack=all: the writer learns the replica is missing; the step stays committed on n1.
    assert w.returncode != 0, out
    assert "replicating k step 1 of node n1 failed on n2" in err, err
    assert c["n1"].steps("k")[1]["memory"] == "committed"
    c["n2"].start()
    assert not partial.exists()
    assert not (c.replica_dir("n2", "n1", "k", 1) / "_tierckpt_manifest.json").exists()
    # n1 lost now: nobody claims step 1, so the replacement finds it nowhere.
    c.replace("n1")
    assert 1 not in c["n1"].steps("k")


def test_replica_ack_none_returns_before_replication_and_replicates_after(cluster, tmp_path):
    c = cluster(2, "--replica-ack", "none")
    ref = tmp_path / "ref"
    c["n1"].writer("--ns", "a", "--step", 2, "--objects", 2, "--size", MiB, "--ref-dir", ref)
    held = c.replica_dir("n2", "n1", "a", 2)
    wait_for(lambda: (held / "_tierckpt_manifest.json").exists(), what="the replica after commit")
    assert_dirs_equal(ref, held)


def test_an_agent_with_the_wrong_secret_gets_no_replica(agents, tmp_path):
    hosts = tmp_path / "hosts"
    write_hostfile(hosts, 2)
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_bytes(b"the-right-cluster-secret")
    bad.write_bytes(b"a-different-cluster-secret")
    good.chmod(0o600)  # a secret file others can read is refused (decision 83)
    bad.chmod(0o600)
    n1 = agents("--memory-budget", "128MiB", "--node-id", "n1", "--peers", hosts, "--peer-secret-file", bad)
    n2 = agents("--memory-budget", "128MiB", "--node-id", "n2", "--peers", hosts, "--peer-secret-file", good)
    r = n1.writer("--ns", "s", "--step", 1, "--objects", 1, "--size", MiB, check=False)
    assert r.returncode != 0
    assert "permission denied" in r.stderr, r.stderr
    assert "event=peer_rejected" in n2.log_text()
    assert not (n2.root / "replicas" / "n1").exists()


def test_replicas_survive_a_holder_restart(cluster, tmp_path):
    c = cluster(2)
    ref = tmp_path / "ref"
    c["n1"].writer("--ns", "r", "--step", 7, "--objects", 2, "--size", MiB, "--ref-dir", ref)
    c["n2"].kill(signal.SIGKILL)
    c["n2"].start()  # same tmpfs root: its replica tier is recovered
    c.replace("n1")
    out = tmp_path / "out"
    c["n1"].cli("restore", "r", 7, "--to", out)
    assert_dirs_equal(ref, out)


def test_bad_peer_configuration_is_refused_at_start(agents, tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("n1 127.0.0.1:1\n")
    secret = tmp_path / "secret"
    secret.write_bytes(b"0123456789abcdef")
    secret.chmod(0o600)
    a = agents("--node-id", "zz", "--peers", hosts, "--peer-secret-file", secret, start=False)
    a.start(wait=False)
    assert a.proc.wait(timeout=30) != 0
    assert "--node-id zz is not in --peers" in a.log_text()
    b = agents("--node-id", "n1", "--peers", hosts, start=False)
    b.start(wait=False)
    assert b.proc.wait(timeout=30) != 0
    assert "needs --peer-secret-file" in b.log_text()
    short = tmp_path / "short"
    short.write_bytes(b"tiny")
    short.chmod(0o600)
    d = agents("--node-id", "n1", "--peers", hosts, "--peer-secret-file", short, start=False)
    d.start(wait=False)
    assert d.proc.wait(timeout=30) != 0
    assert "--peer-secret-file" in d.log_text()


def test_a_delete_on_the_origin_reaches_its_holder_and_an_unreachable_holder_fails_it(cluster, tmp_path):
    c = cluster(3, "--peer-timeout-ms", "2000")  # a stopped holder is given up on quickly
    for step in (1, 2):
        c["n1"].writer("--ns", "del", "--step", step, "--objects", 2, "--size", MiB)
    assert c.replica_dir("n2", "n1", "del", 1).exists()
    c["n1"].cli("rm", "del", 1)
    assert not c.replica_dir("n2", "n1", "del", 1).exists()
    assert c.replica_dir("n2", "n1", "del", 2).exists()
    assert "event=replica_deleted origin=n1 ns=del step=1 held=true" in c["n2"].log_text()
    # A replacement node finds step 1 nowhere: the delete is not undone by a replica.
    c.replace("n1")
    assert sorted(c["n1"].steps("del")) == [2]
    # A holder that cannot be reached: the delete fails naming it, and a rerun completes it.
    c["n1"].cli("restore", "del", 2, "--to", tmp_path / "back")
    c["n2"].proc.send_signal(signal.SIGSTOP)
    try:
        r = c["n1"].cli("rm", "del", 2, check=False, timeout=120)
    finally:
        c["n2"].proc.send_signal(signal.SIGCONT)
    assert r.returncode != 0
    assert "could not all be deleted (n2:" in r.stderr and "run the delete again" in r.stderr, r.stderr
    assert c.replica_dir("n2", "n1", "del", 2).exists()
    c["n1"].cli("rm", "del", 2)
    assert not c.replica_dir("n2", "n1", "del", 2).exists()


def test_agents_in_a_slurm_job_find_their_peers_in_its_node_list(agents, tmp_path, monkeypatch):
    """`--peers slurm:PORT` (issue 21 item 3): no hostfile; each agent expands SLURM_JOB_NODELIST as
    `scontrol show hostnames` would. The job's two "nodes" are 127.0.0.1 and 127.0.0.2, both this
    machine's loopback, so both agents listen on the same port as on two machines."""
    from agent_harness import free_port
    port = free_port()
    monkeypatch.setenv("SLURM_JOB_NODELIST", "127.0.0.[1-2]")
    secret = tmp_path / "secret"
    secret.write_bytes(b"0123456789abcdef-cluster-secret\n")
    secret.chmod(0o600)
    nodes = {node: agents("--memory-budget", "256MiB", "--node-id", node, "--peers", f"slurm:{port}",
                          "--peer-secret-file", secret) for node in ("127.0.0.1", "127.0.0.2")}
    ref = tmp_path / "ref"
    nodes["127.0.0.1"].writer("--ns", "j", "--step", 3, "--objects", 2, "--size", MiB, "--ref-dir", ref)
    held = nodes["127.0.0.2"].root / "replicas" / "127.0.0.1" / "ns" / "j" / "step_0000000003"
    assert (held / "_tierckpt_manifest.json").exists()
    assert_dirs_equal(ref, held)
    peers = json.loads(nodes["127.0.0.1"].cli("agent", "status", "--json").stdout)["peers"]
    assert peers["holders"] == ["127.0.0.2"], peers


def test_slurm_peers_outside_a_slurm_job_stop_the_agent_with_the_reason(agents, tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    monkeypatch.delenv("SLURM_NODELIST", raising=False)
    secret = tmp_path / "secret"
    secret.write_bytes(b"0123456789abcdef-cluster-secret\n")
    secret.chmod(0o600)
    a = agents("--memory-budget", "64MiB", "--node-id", "n1", "--peers", "slurm:7100", "--peer-secret-file", secret,
               start=False)
    a.start(wait=False)
    assert a.proc.wait(timeout=30) != 0
    log = a.log_text()
    assert "--peers slurm:7100: neither SLURM_JOB_NODELIST nor SLURM_NODELIST is set" in log, log
    assert "srun" in log, log

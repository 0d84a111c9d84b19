"""Replication between agents in separate network namespaces: two hosts joined by a veth link.

The test creates two network namespaces (as root, with iproute2) joined by
a veth pair, 10.<x>.<y>.1 and .2, and runs one real tierckptd in each, so the
agents reach each other only over that link, as two hosts would. Their local
sockets and tmpfs roots are files, shared with the test in the root
namespace. Without root or network namespaces the tests skip, saying why.
"""
import os
import random
import shutil
import signal
import subprocess
import uuid

import pytest

from conftest import assert_dirs_equal

MiB = 1 << 20


def sh(*args, check=True):
    return subprocess.run(list(args), capture_output=True, text=True, check=check, stdin=subprocess.DEVNULL)


def netns_unavailable():
    if os.geteuid() != 0:
        return "network namespaces need root (the test creates them with `ip netns add`)"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed (scripts/setup.sh installs it)"
    probe = f"tc-probe-{uuid.uuid4().hex[:6]}"
    r = sh("ip", "netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"cannot create a network namespace here: {r.stderr.strip()}"
    sh("ip", "netns", "del", probe, check=False)
    return None


class TwoHosts:
    """Namespaces a and b, linked by a veth pair; `link(up)` cuts or restores the link."""

    def __init__(self):
        tag = uuid.uuid4().hex[:6]
        self.ns = {"a": f"tc-a-{tag}", "b": f"tc-b-{tag}"}
        self.veth = {"a": f"tca{tag}", "b": f"tcb{tag}"}
        net = f"10.{random.randint(64, 127)}.{random.randint(1, 254)}"
        self.ip = {"a": f"{net}.1", "b": f"{net}.2"}
        for side in "ab":
            sh("ip", "netns", "add", self.ns[side])
        sh("ip", "link", "add", self.veth["a"], "type", "veth", "peer", "name", self.veth["b"])
        for side in "ab":
            ns, dev = self.ns[side], self.veth[side]
            sh("ip", "link", "set", dev, "netns", ns)
            sh("ip", "-n", ns, "addr", "add", f"{self.ip[side]}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "link", "set", dev, "up")

    def prefix(self, side):
        return ["ip", "netns", "exec", self.ns[side]]

    def link(self, up):
        sh("ip", "-n", self.ns["a"], "link", "set", self.veth["a"], "up" if up else "down")

    def close(self):
        for side in "ab":
            sh("ip", "netns", "del", self.ns[side], check=False)


@pytest.fixture
def hosts():
    why = netns_unavailable()
    if why:
        pytest.skip(why)
    h = TwoHosts()
    yield h
    h.close()


def start_pair(agents, hosts, tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"netns-cluster-secret-0123456789")
    secret.chmod(0o600)  # a secret file others can read is refused (decision 83)
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"n1 {hosts.ip['a']}:7100\nn2 {hosts.ip['b']}:7100\n")
    made = {}
    for node, side in (("n1", "a"), ("n2", "b")):
        a = agents("--memory-budget", "128MiB", "--node-id", node, "--peers", hostfile,
                   "--peer-secret-file", secret, start=False)
        a.prefix = hosts.prefix(side)
        a.start()
        made[node] = a
    return made


def test_agents_on_two_hosts_replicate_over_the_link_and_a_replacement_restores_across_it(agents, hosts, tmp_path):
    n = start_pair(agents, hosts, tmp_path)
    ref = tmp_path / "ref"
    n["n1"].writer("--ns", "x", "--step", 1, "--objects", 3, "--size", 2 * MiB, "--ref-dir", ref)
    held = n["n2"].root / "replicas" / "n1" / "ns" / "x" / "step_0000000001"
    assert_dirs_equal(ref, held)
    assert f"peers={hosts.ip['a']}:7100" in n["n1"].log_text()

    n["n1"].kill(signal.SIGKILL)
    shutil.rmtree(n["n1"].root, ignore_errors=True)
    n["n1"].start()
    out = tmp_path / "out"
    n["n1"].cli("restore", "x", 1, "--to", out)
    assert_dirs_equal(ref, out)
    assert "event=restored_from_peer ns=x step=1 peer=n2" in n["n1"].log_text()


def test_a_cut_link_fails_the_replica_not_the_local_commit_and_healing_it_resumes(agents, hosts, tmp_path):
    n = start_pair(agents, hosts, tmp_path)
    hosts.link(False)
    r = n["n1"].writer("--ns", "c", "--step", 1, "--objects", 1, "--size", MiB, check=False)
    assert r.returncode != 0
    assert "replicating c step 1 of node n1 failed on n2" in r.stderr, r.stderr
    assert n["n1"].steps("c")[1]["memory"] == "committed"
    assert not (n["n2"].root / "replicas" / "n1" / "ns" / "c").exists()
    hosts.link(True)
    n["n1"].writer("--ns", "c", "--step", 2, "--objects", 1, "--size", MiB)
    assert (n["n2"].root / "replicas" / "n1" / "ns" / "c" / "step_0000000002" / "_tierckpt_manifest.json").exists()

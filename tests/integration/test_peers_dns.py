"""`--peers dns:NAME:PORT`: agents that find each other through a real DNS server, as the pods of a
Kubernetes DaemonSet do through a headless Service, and a replaced node that rejoins at another
address under its node id (decision 95, docs/placement.md).

Nothing of the machine's /etc is touched. The test makes one network and mount namespace
(`unshare --net --mount`, root) with only a loopback, bind-mounts its own resolv.conf over
/etc/resolv.conf there, and runs dnsmasq (Debian's dnsmasq-base; scripts/setup.sh installs it) on
127.0.0.1:53 inside it, answering the Service's name with one A record per agent (127.0.0.1x). The
agents run in that namespace (nsenter); their sockets and roots are files the test reads as usual.
A machine without root, unshare, nsenter or dnsmasq fails these tests, saying what to install;
nothing skips.
"""
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import assert_dirs_equal

MiB = 1 << 20
NAME = "tierckpt-peers.tierckpt.test"
PORT = 7100


def need(tool):
    path = shutil.which(tool) or (f"/usr/sbin/{tool}" if os.path.exists(f"/usr/sbin/{tool}") else None)
    if path is None:
        pytest.fail(f"{tool} is not installed; scripts/setup.sh installs it (dnsmasq-base, util-linux, iproute2)",
                    pytrace=False)
    return path


class DnsNamespace:
    """A network + mount namespace whose resolver is a dnsmasq of the test's own."""

    def __init__(self, tmp: Path):
        if os.geteuid() != 0:
            pytest.fail("the dns: tests need root: they make a network and mount namespace "
                        "(`unshare --net --mount`) with a resolv.conf of their own", pytrace=False)
        self.tmp = tmp
        self.dnsmasq_bin = need("dnsmasq")
        need("unshare"), need("nsenter"), need("ip")
        resolv = tmp / "resolv.conf"
        resolv.write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:2\n")
        script = ('ip link set lo up && mount --bind "$1" /etc/resolv.conf && echo ready && exec sleep 3600')
        self.holder = subprocess.Popen(["unshare", "--net", "--mount", "sh", "-c", script, "sh", str(resolv)],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       stdin=subprocess.DEVNULL)
        line = self.holder.stdout.readline().strip()
        if line != "ready":
            self.holder.kill()
            pytest.fail(f"could not make the namespace (`unshare --net --mount` + `mount --bind`): "
                        f"{self.holder.stderr.read().strip()}", pytrace=False)
        self.prefix = ["nsenter", "-t", str(self.holder.pid), "--net", "--mount"]
        self.dnsmasq = None

    def run(self, *args, **kw):
        return subprocess.run([*self.prefix, *map(str, args)], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, **kw)

    def serve(self, records):
        """(Re)starts dnsmasq answering NAME with the addresses in records; waits until it does."""
        self.stop_dns()
        args = [self.dnsmasq_bin, "--no-daemon", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
                "--listen-address=127.0.0.1", "--bind-interfaces", "--port=53", "--user=root", "--pid-file=",
                "--log-queries", "--local-ttl=0",
                # Answer the rest of .test here (no AAAA: NODATA) rather than REFUSED for want of upstreams.
                "--local=/test/"]
        args += [f"--host-record={NAME},{ip}" for ip in records]
        log = open(self.tmp / "dnsmasq.log", "ab")
        self.dnsmasq = subprocess.Popen([*self.prefix, *args], stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            r = self.run("getent", "ahosts", NAME)
            got = {ln.split()[0] for ln in r.stdout.splitlines() if ln.strip()}
            if got == set(records):
                return
            time.sleep(0.05)
        raise AssertionError(f"dnsmasq did not answer {NAME} with {records}: "
                             f"{(self.tmp / 'dnsmasq.log').read_text()[-2000:]}")

    def stop_dns(self):
        if self.dnsmasq is not None:
            self.dnsmasq.kill()
            self.dnsmasq.wait()
            self.dnsmasq = None

    def close(self):
        self.stop_dns()
        self.holder.kill()
        self.holder.wait()


@pytest.fixture
def dnsns(tmp_path):
    ns = DnsNamespace(tmp_path)
    yield ns
    ns.close()


def secret_file(tmp_path):
    s = tmp_path / "secret"
    s.write_bytes(b"dns-cluster-secret-0123456789abcdef")
    s.chmod(0o600)  # a secret others can read is refused (decision 83)
    return s


def dns_agent(agents, dnsns, secret, node, ip, *extra, start=True):
    a = agents("--memory-budget", "128MiB", "--node-id", node, "--peers", f"dns:{NAME}:{PORT}",
               "--peer-listen", f"{ip}:{PORT}", "--peer-secret-file", secret, "--peers-refresh", "1",
               *extra, start=False)
    a.prefix = dnsns.prefix
    if start:
        a.start(wait=False)
    return a


def wait_for(what, check, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_agents_find_each_other_through_dns_replicate_and_a_replacement_at_another_address_rejoins(
        agents, dnsns, tmp_path):
    secret = secret_file(tmp_path)
    ips = {"n0": "127.0.0.11", "n1": "127.0.0.12", "n2": "127.0.0.13"}
    dnsns.serve(list(ips.values()))
    # Started together; each waits for the 3 (--peers-count) before it is ready.
    n = {node: dns_agent(agents, dnsns, secret, node, ip, "--peers-count", 3) for node, ip in ips.items()}
    for a in n.values():
        a.wait_ready(timeout=30)
    for node, a in n.items():
        log = a.log_text()
        assert "event=peers_found" in log, log[-3000:]
        assert "members=n0@127.0.0.11:7100,n1@127.0.0.12:7100,n2@127.0.0.13:7100" in log, log[-3000:]
    # The ring is n0 n1 n2 (node ids): n0's replicas go to n1.
    ref = tmp_path / "ref"
    n["n0"].writer("--ns", "x", "--step", 1, "--objects", 3, "--size", 2 * MiB, "--ref-dir", ref)
    assert_dirs_equal(ref, n["n1"].root / "replicas" / "n0" / "ns" / "x" / "step_0000000001")

    # n0's machine is lost; its replacement has another address (127.0.0.14), a fresh memory tier,
    # the same node id, and no file is edited: the Service's record changes.
    n["n0"].kill(signal.SIGKILL)
    shutil.rmtree(n["n0"].root, ignore_errors=True)
    dnsns.serve(["127.0.0.14", ips["n1"], ips["n2"]])
    new = dns_agent(agents, dnsns, secret, "n0", "127.0.0.14", "--peers-count", 3)
    new.wait_ready(timeout=30)
    assert "members=n0@127.0.0.14:7100,n1@127.0.0.12:7100,n2@127.0.0.13:7100" in new.log_text()
    assert "replica_holders=n1" in new.log_text()
    # It finds its replica holder and restores its step from that holder's memory.
    out = tmp_path / "out"
    new.cli("restore", "x", 1, "--to", out)
    assert_dirs_equal(ref, out)
    assert "event=restored_from_peer ns=x step=1 peer=n1" in new.log_text()
    # The survivors find n0 at its new address by its node id (--peers-refresh 1)...
    for node in ("n1", "n2"):
        wait_for(f"{node} to log n0's move",
                 lambda node=node: "event=peer_moved node=n0 from=127.0.0.11:7100 to=127.0.0.14:7100"
                 in n[node].log_text())
    # ...so the holder pulls the replacement's next step from the new address.
    ref2 = tmp_path / "ref2"
    new.writer("--ns", "x", "--step", 2, "--objects", 2, "--size", MiB, "--ref-dir", ref2)
    assert_dirs_equal(ref2, n["n1"].root / "replicas" / "n0" / "ns" / "x" / "step_0000000002")


def test_a_name_that_does_not_resolve_stops_the_start_naming_it_and_what_to_check(agents, dnsns, tmp_path):
    secret = secret_file(tmp_path)
    dnsns.serve(["127.0.0.11"])
    a = agents("--memory-budget", "64MiB", "--node-id", "n0", "--peers", f"dns:no-such-svc.tierckpt.test:{PORT}",
               "--peer-listen", f"127.0.0.11:{PORT}", "--peer-secret-file", secret, "--peers-wait", "2",
               start=False)
    r = dnsns.run(*a.args(), timeout=60)
    assert r.returncode != 0
    err = r.stdout + r.stderr
    assert "--peers dns:no-such-svc.tierckpt.test:7100: resolving no-such-svc.tierckpt.test:" in err, err
    assert "after 2 s (--peers-wait)" in err, err
    assert "check that the headless Service no-such-svc.tierckpt.test exists" in err, err


def test_an_agent_waits_for_the_count_and_fails_naming_who_answered(agents, dnsns, tmp_path):
    secret = secret_file(tmp_path)
    dnsns.serve(["127.0.0.11", "127.0.0.12"])  # the second address has no agent
    a = agents("--memory-budget", "64MiB", "--node-id", "n0", "--peers", f"dns:{NAME}:{PORT}",
               "--peer-listen", f"127.0.0.11:{PORT}", "--peer-secret-file", secret, "--peers-wait", "2",
               "--peers-count", "2", start=False)
    r = dnsns.run(*a.args(), timeout=60)
    assert r.returncode != 0
    err = r.stdout + r.stderr
    assert "the agents known are n0 at 127.0.0.11:7100" in err, err
    assert "waiting for 2 (--peers-count)" in err, err
    assert "127.0.0.12:7100 does not answer" in err, err

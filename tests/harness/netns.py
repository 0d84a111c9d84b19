"""N hosts on one switch, each in a network namespace of its own, with link faults (issue 42).

    hosts = Hosts(4)                      # namespaces and links, made here (root, iproute2)
    prefix = hosts.prefix(1)              # ["ip", "netns", "exec", NS]: run an agent on host 1
    hosts.ip[1]                           # its address, 10.A.B.1
    hosts.partition([[1], [2, 3, 4]])     # packets between the groups vanish (both ways)
    hosts.impair(2, loss_pct=5, rate_mbit=20)   # host 2's link drops 5 % and runs at 20 Mbit/s
    hosts.heal()                          # every route and qdisc back as made
    hosts.close()                         # every namespace and link removed

Topology: a switch namespace holding a Linux bridge; each host's namespace joined to it by a veth
pair (10.A.B.i/24 on the host's end, A and B drawn at random so that two runs never share a
subnet); and one more veth pair from the test machine's own namespace to the switch (10.A.B.254),
so that the test itself reaches every host (e.g. a hostile client on a peer port). Nothing else of
the machine's network is touched, and close() removes all of it.

A partition is an nftables rule in each host's namespace that drops what arrives from the hosts on
the other side: packets vanish silently, as on a cut cable or a failed switch port, so connections
stall until their timeouts rather than failing at once (a blackhole route would fail a local
sender's connect() at once with EINVAL). impair() makes a
host's link lossy (an nftables rule in its namespace drops that share of the packets it sends and
receives, at random) and slow (a token-bucket qdisc, `tbf`, caps what it sends). Not `tc netem`:
the kernels this runs on (the development VM's, 6.18 without modules) are built without
sch_netem, so a fixed added delay is not available; a capped rate delays bulk transfers instead.
"""
from __future__ import annotations

import os
import random
import shutil
import subprocess
import uuid


def sh(*args, check=True) -> subprocess.CompletedProcess:
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise RuntimeError(f"`{' '.join(map(str, args))}` failed ({r.returncode}): {r.stderr.strip()}")
    return r


def unavailable() -> str | None:
    """Why network namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root (the test creates them with `ip netns add`)"
    for tool, pkg in (("ip", "iproute2"), ("tc", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (Debian package {pkg}; scripts/setup.sh installs it)"
    probe = f"tc-probe-{uuid.uuid4().hex[:6]}"
    r = sh("ip", "netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"cannot create a network namespace here: {r.stderr.strip()}"
    try:
        r = sh("ip", "-n", probe, "link", "add", "br0", "type", "bridge", check=False)
        if r.returncode != 0:
            return f"cannot create a Linux bridge in a network namespace here: {r.stderr.strip()}"
    finally:
        sh("ip", "netns", "del", probe, check=False)
    return None


class Hosts:
    def __init__(self, n: int):
        if not 1 <= n <= 250:
            raise ValueError(f"Hosts(n={n}): 1 to 250 hosts on one /24")
        self.n = n
        self.tag = uuid.uuid4().hex[:6]
        net = f"10.{random.randint(64, 127)}.{random.randint(1, 254)}"
        self.switch = f"tc-sw-{self.tag}"
        self.ns = {i: f"tc-h{i}-{self.tag}" for i in range(1, n + 1)}
        self.ip = {i: f"{net}.{i}" for i in range(1, n + 1)}
        self.dev = {i: f"tch{i}{self.tag}"[:15] for i in range(1, n + 1)}  # the host's end of its link
        self.own_ip = f"{net}.254"
        self.own_dev = f"tcm{self.tag}"
        self._blocked: dict[int, set[int]] = {}  # host -> the hosts whose packets it drops
        self._loss: dict[int, float] = {}  # host -> % of its packets dropped
        self._shaped: set[int] = set()  # hosts with a rate cap
        self._made: list[str] = []
        try:
            sh("ip", "netns", "add", self.switch)
            self._made.append(self.switch)
            sh("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
            sh("ip", "-n", self.switch, "link", "set", "br0", "up")
            for i in range(1, n + 1):
                sh("ip", "netns", "add", self.ns[i])
                self._made.append(self.ns[i])
                self._join(self.dev[i], f"tcs{i}{self.tag}"[:15], self.ns[i])
                sh("ip", "-n", self.ns[i], "addr", "add", f"{self.ip[i]}/24", "dev", self.dev[i])
                sh("ip", "-n", self.ns[i], "link", "set", "lo", "up")
                sh("ip", "-n", self.ns[i], "link", "set", self.dev[i], "up")
            self._join(self.own_dev, f"tcsm{self.tag}", None)
            sh("ip", "addr", "add", f"{self.own_ip}/24", "dev", self.own_dev)
            sh("ip", "link", "set", self.own_dev, "up")
        except BaseException:
            self.close()
            raise

    def _join(self, host_end: str, switch_end: str, ns: str | None) -> None:
        """A veth pair: host_end in ns (None: this namespace), switch_end on the bridge."""
        sh("ip", "link", "add", host_end, "type", "veth", "peer", "name", switch_end)
        if ns is not None:
            sh("ip", "link", "set", host_end, "netns", ns)
        sh("ip", "link", "set", switch_end, "netns", self.switch)
        sh("ip", "-n", self.switch, "link", "set", switch_end, "master", "br0")
        sh("ip", "-n", self.switch, "link", "set", switch_end, "up")

    def prefix(self, i: int) -> list[str]:
        return ["ip", "netns", "exec", self.ns[i]]

    def partition(self, groups) -> None:
        """Cuts every path between hosts of different groups (lists of host numbers); hosts in no
        group keep every path. Adds to a partition already in place."""
        side = {h: g for g, hosts in enumerate(groups) for h in hosts}
        for a in side:
            self._blocked.setdefault(a, set()).update(b for b in side if side[b] != side[a])
            self._apply(a)

    def impair(self, i: int, loss_pct: float = 0.0, rate_mbit: float | None = None) -> None:
        """Host i's link drops loss_pct % of the packets it sends and of those it receives, at
        random, and (rate_mbit) sends at most that rate. Replaces an impairment already there."""
        if not 0 <= loss_pct <= 100:
            raise ValueError(f"impair: loss_pct {loss_pct} is not a percentage")
        self._loss[i] = loss_pct
        self._apply(i)
        sh(*self.prefix(i), "tc", "qdisc", "del", "dev", self.dev[i], "root", check=False)
        if rate_mbit:
            burst = max(16, int(rate_mbit * 1000 / 8 / 100))  # ~10 ms at the rate, in KiB
            sh(*self.prefix(i), "tc", "qdisc", "add", "dev", self.dev[i], "root", "tbf", "rate",
               f"{rate_mbit}mbit", "burst", f"{burst}kb", "latency", "200ms")
            self._shaped.add(i)

    def _apply(self, i: int) -> None:
        """Host i's nftables table, made again from what is cut and lost there. A cut drops what
        arrives from the other side (input), so that the sender sees silence, not an error."""
        sh(*self.prefix(i), "nft", "delete", "table", "inet", "tcfault", check=False)
        blocked = sorted(self._blocked.get(i, ()))
        loss = int(round(self._loss.get(i, 0.0) * 100))  # per 10,000
        if not blocked and not loss:
            return
        rin, rout = [], []
        if blocked:
            rin.append(f"ip saddr {{ {', '.join(self.ip[b] for b in blocked)} }} drop;")
        if loss:
            rin.append(f"numgen random mod 10000 < {loss} drop;")
            rout.append(f"numgen random mod 10000 < {loss} drop;")
        rules = ("table inet tcfault {\n"
                 f"  chain in {{ type filter hook input priority 0; {' '.join(rin)} }}\n"
                 f"  chain out {{ type filter hook output priority 0; {' '.join(rout)} }}\n"
                 "}\n")
        r = subprocess.run([*self.prefix(i), "nft", "-f", "-"], input=rules, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"nft in {self.ns[i]} failed ({r.returncode}): {r.stderr.strip()}\n{rules}")

    def heal(self) -> None:
        touched = set(self._blocked) | set(self._loss)
        self._blocked.clear()
        self._loss.clear()
        for i in sorted(touched):
            self._apply(i)
        for i in sorted(self._shaped):
            sh(*self.prefix(i), "tc", "qdisc", "del", "dev", self.dev[i], "root", check=False)
        self._shaped.clear()

    def leftovers(self) -> list[str]:
        """The namespaces of these hosts that still exist (none after close())."""
        names = {self.switch, *self.ns.values()}
        listed = sh("ip", "netns", "list", check=False).stdout.split("\n")
        return sorted(line.split()[0] for line in listed if line.strip() and line.split()[0] in names)

    def close(self) -> None:
        # Deleting a namespace deletes the veth ends in it, and with them their peers.
        sh("ip", "link", "del", self.own_dev, check=False)
        for ns in reversed(self._made):
            sh("ip", "netns", "del", ns, check=False)
        self._made.clear()

"""A cluster of real tierckptd agents on one machine, for the stress campaign.

Node n<i> (i = 1..N) has its own tmpfs root under /dev/shm, socket, log and
peer port; all share one hostfile, one cluster secret (R = 2, spacing 1, so
n<i>'s replica holder is its ring successor n<i+1>) and one filesystem
durable tier. Binaries come from $TIERCKPT_BIN_DIR (default build/release/tools).
Every process is started here and stopped here; nothing else is touched.

With `hosts` (tests/harness/netns.py), node n<i> runs in host i's network namespace and its peers
reach it at that host's address only, over a switch the campaign can cut, split or degrade
(issue 42); the Unix sockets, roots and the durable directory stay files the campaign shares.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from agent_harness import SHM, AgentProcess, Binaries, bin_dir_from_env, write_hostfile  # noqa: E402  (tests/harness)

AGENT_BIN, CLI_BIN, WRITER_BIN = Binaries.under(bin_dir_from_env())


class Agent(AgentProcess):
    """One tierckptd: `down` is set while the schedule holds it killed or stopped."""

    ready_timeout_s = 20

    def __init__(self, node, workdir: Path, root: Path, args, socket_dir: Path):
        socket = socket_dir / f"{node}.sock"  # short: Unix socket paths are < 108 bytes
        super().__init__(socket, cli=CLI_BIN, output=workdir / "agent.log",
                         env=dict(os.environ, TIERCKPT_SOCKET=str(socket)))
        self.name = f"tierckptd {node}"
        self.node = node
        self.workdir = workdir
        self.root = root
        self.args = args
        self.down = None  # None, "killed" or "stopped": set by the schedule only
        self.port = None
        self.host = "127.0.0.1"  # where its peer port answers

    def start(self):
        with open(self.log, "ab") as logf:
            logf.write(f"--- stress: start {self.node} at {time.time():.3f}\n".encode())
        self.launch([AGENT_BIN, "--socket", self.socket, "--root", self.root, *self.args])
        self.down = None

    def kill(self):
        if self.down == "stopped":
            self.signal(signal.SIGCONT)
        super().kill()
        self.down = "killed"

    def wipe_root(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, n=40):
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])

    def log_around(self, t, before=3.0, after=1.0):
        """The log lines whose ts= lies within [t - before, t + after] (UTC epoch seconds)."""
        out = []
        if not self.log.exists():
            return out
        for line in self.log.read_text(errors="replace").splitlines():
            m = re.match(r"ts=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z", line)
            if not m:
                continue
            ts = time.mktime(time.strptime(m.group(1)[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
            ts += float("0." + m.group(1).split(".")[1])
            if t - before <= ts <= t + after:
                out.append(line)
        return out

    def cli(self, *args, check=True, timeout=60):
        r = subprocess.run([str(CLI_BIN), "--socket", str(self.socket), *map(str, args)], env=self.env,
                           capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise RuntimeError(f"tierckpt {' '.join(map(str, args))} on {self.node} -> {r.returncode}: "
                               f"{r.stderr.strip()}")
        return r

    def ls(self, ns=None):
        """{(ns, step): entry} from `tierckpt ls --json`; the durable tier's errors are kept."""
        args = ["ls", "--json"] + ([ns] if ns else [])
        r = self.cli(*args, check=False)
        try:
            doc = json.loads(r.stdout)
        except ValueError:
            raise RuntimeError(f"tierckpt ls on {self.node} -> {r.returncode}: {r.stderr.strip()}")
        return {(s["namespace"], s["step"]): s for s in doc.get("steps", [])}

    def writer(self, *args):
        return subprocess.Popen([str(WRITER_BIN), "--socket", str(self.socket), *map(str, args)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)


class Cluster:
    def __init__(self, workdir: Path, n=4, budget="64MiB", keep_last=3, extra=(), private_tmpfs=None,
                 durable_url=None, env=None, hosts=None):
        """durable_url: the agents' --durable (default: a directory under workdir, self.durable);
        env: variables added to every agent's and CLI's environment (e.g. AWS keys for S3);
        hosts: a netns.Hosts of at least n hosts, one per node (None: every agent on loopback)."""
        self.workdir = workdir
        self.n = n
        self.keep_last = keep_last
        self.budget_bytes = int(budget[:-3]) << 20 if budget.endswith("MiB") else int(budget)
        workdir.mkdir(parents=True, exist_ok=True)
        self.secret = workdir / "secret"
        self.secret.write_bytes(os.urandom(32).hex().encode())
        self.secret.chmod(0o600)
        self.hostfile = workdir / "hosts"
        self.hosts = hosts
        if hosts is not None:
            if hosts.n < n:
                raise ValueError(f"Cluster: {n} nodes need {n} hosts, the network has {hosts.n}")
            ports = [7100] * n  # each host has its own port space
            self.hostfile.write_text("".join(f"n{i} {hosts.ip[i]}:{ports[i - 1]}\n" for i in range(1, n + 1)))
        else:
            ports = write_hostfile(self.hostfile, n)
        self.durable = workdir / "durable"
        self.durable.mkdir(exist_ok=True)
        tag = uuid.uuid4().hex[:10]
        self.socket_dir = Path(tempfile.mkdtemp(prefix="tcs-", dir="/tmp"))
        # As root, the agents' roots share a private tmpfs sized for them (own tier + one origin's
        # replicas each, plus slack), so that a "second tenant" can fill it without touching /dev/shm.
        if private_tmpfs is None:
            private_tmpfs = os.geteuid() == 0
        self.shm = SHM
        self.mounted = False
        if private_tmpfs:
            mnt = workdir / "shm"
            mnt.mkdir(exist_ok=True)
            size = n * 2 * self.budget_bytes + (64 << 20)
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=700", "tmpfs", str(mnt)],
                               capture_output=True, text=True)
            if r.returncode == 0:
                self.shm, self.mounted = mnt, True
        self.agents = {}
        for i in range(n):
            node = f"n{i + 1}"
            wd = workdir / node
            wd.mkdir(exist_ok=True)
            args = ["--memory-budget", budget, "--keep-last", str(keep_last), "--durable",
                    durable_url or str(self.durable),
                    "--node-id", node, "--peers", str(self.hostfile), "--peer-secret-file", str(self.secret),
                    "--replicas", "2", "--replica-ack", "all", "--peer-timeout-ms", "3000",
                    "--log-level", "info", *extra]
            a = Agent(node, wd, self.shm / f"tierckpt-stress-{tag}-{node}", args, self.socket_dir)
            a.port = ports[i]
            if hosts is not None:
                a.prefix = hosts.prefix(i + 1)
                a.host = hosts.ip[i + 1]
            if env:
                a.env.update(env)
            self.agents[node] = a

    def nodes(self):
        return list(self.agents)

    def holder(self, node):
        """The ring successor: the replica holder of `node` with R = 2, spacing 1."""
        i = int(node[1:])
        return f"n{i % self.n + 1}"

    def origin_of_replicas_on(self, node):
        i = int(node[1:])
        return f"n{(i - 2) % self.n + 1}"

    def start(self):
        for a in self.agents.values():
            a.start()

    def stop(self):
        for a in self.agents.values():
            a.kill()
            a.wipe_root()
        shutil.rmtree(self.socket_dir, ignore_errors=True)
        if self.mounted:
            subprocess.run(["umount", str(self.shm)], capture_output=True)
            self.mounted = False

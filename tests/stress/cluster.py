"""A cluster of real tierckptd agents on one machine, for the stress campaign.

Node n<i> (i = 1..N) has its own tmpfs root under /dev/shm, socket, log and
peer port; all share one hostfile, one cluster secret (R = 2, spacing 1, so
n<i>'s replica holder is its ring successor n<i+1>) and one filesystem
durable tier. Binaries come from $TIERCKPT_BIN_DIR (default build/release/tools).
Every process is started here and stopped here; nothing else is touched.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("TIERCKPT_BIN_DIR", REPO / "build" / "release" / "tools"))
AGENT_BIN = BIN_DIR / "tierckptd" / "tierckptd"
CLI_BIN = BIN_DIR / "cli" / "tierckpt"
WRITER_BIN = BIN_DIR / "testing" / "tc_test_writer"
SHM = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path("/tmp")


def free_ports(n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Agent:
    """One tierckptd: `down` is set while the schedule holds it killed or stopped."""

    def __init__(self, node, workdir: Path, root: Path, args, socket_dir: Path):
        self.node = node
        self.workdir = workdir
        self.root = root
        self.socket = socket_dir / f"{node}.sock"  # short: Unix socket paths are < 108 bytes
        self.log = workdir / "agent.log"
        self.args = args
        self.proc = None
        self.down = None  # None, "killed" or "stopped": set by the schedule only
        self.port = None
        self.env = dict(os.environ, TIERCKPT_SOCKET=str(self.socket))

    def start(self, timeout=20):
        with open(self.log, "ab") as logf:
            logf.write(f"--- stress: start {self.node} at {time.time():.3f}\n".encode())
            logf.flush()
            self.proc = subprocess.Popen(
                [str(AGENT_BIN), "--socket", str(self.socket), "--root", str(self.root), *self.args],
                stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tierckptd {self.node} exited with {self.proc.returncode} at start; "
                                   f"log {self.log}:\n{self.log_tail()}")
            if self.cli("agent", "status", "--json", check=False).returncode == 0:
                self.down = None
                return
            time.sleep(0.05)
        raise RuntimeError(f"tierckptd {self.node} not ready after {timeout}s; log {self.log}")

    def signal(self, sig):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            if self.down == "stopped":
                self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.down = "killed"

    def wipe_root(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

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
                 durable_url=None, env=None):
        """durable_url: the agents' --durable (default: a directory under workdir, self.durable);
        env: variables added to every agent's and CLI's environment (e.g. AWS keys for S3)."""
        self.workdir = workdir
        self.n = n
        self.keep_last = keep_last
        self.budget_bytes = int(budget[:-3]) << 20 if budget.endswith("MiB") else int(budget)
        workdir.mkdir(parents=True, exist_ok=True)
        self.secret = workdir / "secret"
        self.secret.write_bytes(os.urandom(32).hex().encode())
        self.secret.chmod(0o600)
        self.hostfile = workdir / "hosts"
        ports = free_ports(n)
        self.hostfile.write_text("".join(f"n{i + 1} 127.0.0.1:{p}\n" for i, p in enumerate(ports)))
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

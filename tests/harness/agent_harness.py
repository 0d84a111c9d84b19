"""How tests and benchmarks start a tierckptd, know it is ready, and end it; free loopback
ports for the agents' peer ports; the commit a benchmark report was measured at.

Every harness in the tree uses this module (decision 79): tests/integration/conftest.py,
python/tests/conftest.py, tests/stress/cluster.py and the bench/ drivers (run.py, dcp_bench.py,
replication_bench.py and redundancy_bench.py through it, peers.py, interference.py, s3_bench.py).
Each keeps its own Agent class
with its own flags, paths and helpers (cli, steps, log_around, ...), built on AgentProcess; how a
process is started, when it counts as ready, what is said when it is not, and how it is stopped
live here once.

    a = AgentProcess(sock, cli=binaries.cli, output=workdir / "agent.log")
    a.launch([binaries.agent, "--socket", sock, "--root", root, ...])   # returns once it answers
    ...
    a.stop()                                                         # SIGTERM, SIGKILL after 30 s

Not shipped with the package: it lives under tests/harness/, and each user puts that directory on
sys.path (the conftest.py files and the top of each bench script). It needs nothing beyond the
standard library, so a bench can import it without torch or the tierckpt package.

Thread safety: none; one AgentProcess belongs to one thread of control.
"""
from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from signal import SIGKILL, SIGTERM
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[2]
SHM = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path("/tmp")


def bin_dir_from_env() -> Path:
    """The tools directory the tests take binaries from: $TIERCKPT_BIN_DIR, by default this
    checkout's build/release/tools."""
    return Path(os.environ.get("TIERCKPT_BIN_DIR", REPO / "build" / "release" / "tools"))


class Binaries(NamedTuple):
    """The executables of one build's tools/ directory."""

    agent: Path   # tierckptd
    cli: Path     # tierckpt
    writer: Path  # tc_test_writer

    @classmethod
    def under(cls, tools_dir) -> "Binaries":
        """The binaries of a build's tools directory (e.g. build/release/tools)."""
        t = Path(tools_dir)
        return cls(t / "tierckptd" / "tierckptd", t / "cli" / "tierckpt", t / "testing" / "tc_test_writer")

    def missing(self) -> list[Path]:
        return [b for b in self if not b.exists()]


class AgentProcess:
    """One tierckptd child process: started with the argv its owner builds, ready once it
    answers, ended by a signal.

    Set before launch() (by the constructor, a subclass's class attributes, or the owner):
      socket          the agent's Unix socket (what readiness asks)
      cli_bin         the tierckpt CLI: ready = `tierckpt --socket S agent status` exits 0;
                      None: ready = the socket accepts a connection
      output          file that receives the process's stdout and stderr (appended); None: /dev/null
      log             the agent's log, shown when it fails to start (default: output; set it to
                      the agent's --log-file when it has one)
      env             the process's (and the readiness CLI's) environment; None: this process's
      prefix          argv words run before the agent's (e.g. ["ip", "netns", "exec", NS])
      new_session     start it in a session of its own; signals then go to its process group
      ready_timeout_s how long launch()/wait_ready() wait for the agent to answer
      poll_s          pause between two readiness checks
      stop_timeout_s  how long kill() and stop() wait for the process to end
      error           the exception class raised when it does not start (AssertionError in tests)
      name            how messages call it ("tierckptd", "tierckptd n2")
    Owned by this object: proc (the subprocess.Popen, None before the first launch).
    """

    ready_timeout_s = 30.0
    poll_s = 0.05
    stop_timeout_s = 30.0
    error: type[Exception] = RuntimeError
    name = "tierckptd"

    def __init__(self, socket_path, *, cli=None, output=None, log=None, env=None, new_session=False):
        self.socket = socket_path
        self.cli_bin = cli
        self.output = output
        self.log = log if log is not None else output
        self.env = env
        self.prefix: list = []
        self.new_session = new_session
        self.proc: subprocess.Popen | None = None

    # ---- start ----

    def launch(self, argv, *, wait=True) -> "AgentProcess":
        """Starts prefix + argv; with wait, returns once the agent answers (wait_ready).

        Raises self.error when the process exits first or does not answer in ready_timeout_s.
        """
        out = open(self.output, "ab") if self.output is not None else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen([*map(str, self.prefix), *map(str, argv)], stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                         start_new_session=self.new_session)
        finally:
            if out is not subprocess.DEVNULL:
                out.close()
        if wait:
            self.wait_ready()
        return self

    def answers(self) -> bool:
        """One readiness check: the agent answers `agent status` (or, without a CLI, accepts a
        connection on its socket)."""
        if self.cli_bin is None:
            if not os.path.exists(self.socket):
                return False
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                try:
                    s.connect(os.fspath(self.socket))
                    return True
                except OSError:
                    return False
        try:
            r = subprocess.run([str(self.cli_bin), "--socket", str(self.socket), "agent", "status"],
                               env=self.env, capture_output=True, stdin=subprocess.DEVNULL, timeout=10)
        except subprocess.TimeoutExpired:
            return False
        return r.returncode == 0

    def wait_ready(self, timeout: float | None = None) -> None:
        """Returns once the agent answers; raises self.error, with the log's tail, when the
        process exits first or timeout (default ready_timeout_s) seconds pass."""
        timeout = self.ready_timeout_s if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise self.error(f"{self.name} exited with {self.proc.returncode} at start; "
                                 f"its log {self.log}:\n{self.log_text()[-4000:]}")
            if self.answers():
                return
            time.sleep(self.poll_s)
        raise self.error(f"{self.name} did not answer on {self.socket} within {timeout:g} s; "
                         f"its log {self.log}:\n{self.log_text()[-4000:]}")

    # ---- state ----

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        """The agent's log, then its output when that is another file; "" for what is not written."""
        text = []
        for path in dict.fromkeys(p for p in (self.log, self.output) if p is not None):
            try:
                text.append(Path(path).read_text(errors="replace"))
            except OSError:
                pass
        return "\n".join(t for t in text if t)

    # ---- end ----

    def signal(self, sig) -> None:
        """Sends sig to the agent (its process group with new_session) when it is running."""
        if self.alive():
            if self.new_session:
                os.killpg(self.proc.pid, sig)
            else:
                self.proc.send_signal(sig)

    def kill(self, sig=SIGKILL) -> None:
        """Sends sig (SIGKILL by default) and waits stop_timeout_s for the process to end."""
        if self.alive():
            self.signal(sig)
            self.proc.wait(timeout=self.stop_timeout_s)

    def stop(self) -> None:
        """SIGTERM; SIGKILL when it has not ended after stop_timeout_s. Idempotent."""
        self.signal(SIGTERM)
        self.reap()

    def reap(self) -> None:
        """Waits stop_timeout_s for a process already signalled, then SIGKILLs it (stop_all's
        second half)."""
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            self.signal(SIGKILL)
            self.proc.wait()


def flip_byte(path, offset: int) -> None:
    """Inverts the byte at offset of the file at path in place (damage at rest, behind the agent)."""
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def stop_all(agents) -> None:
    """Stops several agents at once: SIGTERM to each, then waits for each (SIGKILL after its
    stop_timeout_s), so that none outlives another by a whole timeout."""
    for a in agents:
        a.signal(SIGTERM)
    for a in agents:
        a.reap()


def free_ports(n: int) -> list[int]:
    """n distinct TCP ports free on 127.0.0.1 (all bound at once, then released) for the peer
    ports of the agents a harness starts. Another process may take one before the agent binds it."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    """One TCP port free on 127.0.0.1 (see free_ports)."""
    return free_ports(1)[0]


def write_hostfile(path, n: int) -> list[int]:
    """Writes a hostfile of nodes n1..n<n> on 127.0.0.1, each with a free peer port; returns the
    ports (n<i>'s is ports[i - 1])."""
    ports = free_ports(n)
    Path(path).write_text("".join(f"n{i + 1} 127.0.0.1:{p}\n" for i, p in enumerate(ports)))
    return ports


def git_info(repo=REPO) -> dict:
    """The commit a report was measured at, and whether the tree had changes: {"commit", "dirty"}
    ("" and False when git or the repository is not there)."""
    def git(*args):
        try:
            return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}

"""Fixtures for integration tests: real tierckptd processes, the real CLI,
real SIGKILLs. Binaries come from $TIERCKPT_BIN_DIR (default build/release/tools).

Each agent gets its own tmpfs root under /dev/shm (the production medium),
its own socket and its own durable directory, all removed afterwards.
"""
import contextlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
from agent_harness import SHM, AgentProcess, Binaries, bin_dir_from_env  # noqa: E402  (tests/harness)
from strict import pytest_runtest_makereport  # noqa: E402,F401  (a skip fails in strict runs)

BIN_DIR = bin_dir_from_env()
BINARIES = Binaries.under(BIN_DIR)
AGENT_BIN, CLI_BIN, WRITER_BIN = BINARIES


def pytest_configure(config):
    for b in BINARIES.missing():
        raise pytest.UsageError(f"{b} is missing: build first with scripts/setup.sh release")
    config.addinivalue_line("markers", "ceph: runs against the session's Ceph RGW (the `rgw` fixture)")
    config.addinivalue_line("markers", "long: takes 15 s or more; started before the others (issue 38)")


def pytest_collection_modifyitems(config, items):
    """The tests marked `long` first, in their order, then the rest in theirs. xdist hands tests out
    in this order, so the long ones start early on both workers instead of one worker running the
    longest (the stress campaign, ~90 s) alone at the end of the phase while the other idles."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


# ---- Ceph RGW: one throwaway cluster per pytest process ----------------------------------------
# Started on first use, kept for the session (with -n 2, once in each worker that runs a Ceph test:
# ~1-4 s each, in parallel), stopped at its end. Each start is reported in the terminal summary
# (workers send theirs to the controller through workeroutput).
_CEPH_STARTS: list[dict] = []


@pytest.fixture(scope="session")
def rgw(tmp_path_factory):
    """A started ceph_rgw.RgwCluster; a missing Ceph or a failed start fails the test (never skips)."""
    from ceph_rgw import CephMissing, CephStartError, RgwCluster  # noqa: PLC0415

    error = None
    for _ in range(2):  # a second try: another process may take a port between its pick and the bind
        cluster = RgwCluster(log_dir=tmp_path_factory.mktemp("ceph-log"))
        try:
            cluster.start()
            error = None
            break
        except CephMissing as e:
            error = str(e)
            break
        except CephStartError as e:
            error = f"cannot start the test Ceph cluster: {e}"
    if error:
        pytest.fail(error, pytrace=False)
    _CEPH_STARTS.append({"version": cluster.version, "seconds": round(cluster.start_seconds, 2),
                         "steps": {k: round(v, 2) for k, v in cluster.steps.items()},
                         "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")})
    yield cluster
    cluster.stop()


def pytest_sessionfinish(session):
    if hasattr(session.config, "workeroutput"):  # an xdist worker: hand the starts to the controller
        session.config.workeroutput["ceph_starts"] = json.dumps(_CEPH_STARTS)


def pytest_testnodedown(node, error):
    out = getattr(node, "workeroutput", None) or {}
    _CEPH_STARTS.extend(json.loads(out.get("ceph_starts", "[]")))


def pytest_terminal_summary(terminalreporter):
    for s in _CEPH_STARTS:
        steps = ", ".join(f"{k} {v:.2f}" for k, v in s["steps"].items())
        terminalreporter.write_line(f"Ceph RGW {s['version']} started in {s['seconds']:.2f} s "
                                    f"on {s['worker']} ({steps} s)")


class Agent(AgentProcess):
    """One tierckptd process with its own root, socket and durable dir."""

    ready_timeout_s = 15
    error = AssertionError

    def __init__(self, workdir: Path, root: Path, extra_args, socket_path=None):
        socket = Path(socket_path) if socket_path else workdir / "agent.sock"
        super().__init__(socket, cli=CLI_BIN, output=workdir / "agent.log",
                         env=dict(os.environ, TIERCKPT_SOCKET=str(socket)))
        self.workdir = workdir
        self.root = root
        self.durable = workdir / "durable"
        self.extra_args = list(extra_args)
        # self.prefix, e.g. ["ip", "netns", "exec", NS]: run the agent in another network namespace

    def args(self):
        return [str(AGENT_BIN), "--socket", str(self.socket), "--root", str(self.root),
                "--durable", str(self.durable), "--log-level", "debug", *self.extra_args]

    def start(self, wait=True):
        return self.launch(self.args(), wait=wait)

    def restart(self):
        self.kill()
        return self.start()

    def cli(self, *args, check=True, timeout=120):
        r = subprocess.run([str(CLI_BIN), *map(str, args)], env=self.env, capture_output=True,
                           text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise AssertionError(f"tierckpt {' '.join(map(str, args))} -> {r.returncode}\n"
                                 f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}\nagent log:\n{self.log_text()[-4000:]}")
        return r

    def cli_json(self, *args):
        return json.loads(self.cli(*args, "--json").stdout)

    def writer(self, *args, check=True, timeout=120):
        r = subprocess.run([str(WRITER_BIN), "--socket", str(self.socket), *map(str, args)],
                           capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise AssertionError(f"tc_test_writer {' '.join(map(str, args))} -> {r.returncode}\n"
                                 f"{r.stdout}\n{r.stderr}\nagent log:\n{self.log_text()[-4000:]}")
        return r

    def writer_popen(self, *args):
        return subprocess.Popen([str(WRITER_BIN), "--socket", str(self.socket), *map(str, args)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)

    def writer_held(self, *args):
        """A writer that writes and seals a step without committing it and holds it (`--no-commit
        --hold`) until its standard input is closed: a part of a step another agent commits across
        nodes. Returns once the part is sealed."""
        p = subprocess.Popen([str(WRITER_BIN), "--socket", str(self.socket), *map(str, args), "--no-commit", "--hold"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = p.stdout.readline()
        if not line.startswith("SEALED"):
            p.kill()
            raise AssertionError(f"tc_test_writer {' '.join(map(str, args))} did not seal its part: {line!r} "
                                 f"{p.stderr.read()}\nagent log:\n{self.log_text()[-4000:]}")
        return p

    def steps(self, ns):
        return {s["step"]: s for s in self.cli_json("ls", ns)["steps"] if s["namespace"] == ns}


@pytest.fixture
def agents(tmp_path):
    """Factory: agents(extra_args...) starts a fresh agent; all are killed at the end."""
    made = []

    def make(*extra_args, root=None, start=True, socket_path=None):
        n = len(made)
        workdir = tmp_path / f"agent{n}"
        workdir.mkdir()
        r = Path(root) if root else SHM / f"tierckpt-test-{uuid.uuid4().hex[:12]}"
        a = Agent(workdir, r, extra_args, socket_path)
        made.append(a)
        if start:
            a.start()
        return a

    yield make
    for a in made:
        a.kill()
        if str(a.root).startswith(str(SHM / "tierckpt-test-")):
            shutil.rmtree(a.root, ignore_errors=True)


@pytest.fixture
def agent(agents):
    return agents("--memory-budget", "512MiB")


@contextlib.contextmanager
def mounted_tmpfs(path: Path, options: str):
    """A tmpfs of the test's own at path (mount(2): root only; the caller skips otherwise), lazily
    unmounted at the end."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def same_bytes(a: Path, b: Path) -> bool:
    return a.read_bytes() == b.read_bytes()


def assert_dirs_equal(expected: Path, actual: Path):
    exp = sorted(p.relative_to(expected) for p in expected.rglob("*") if p.is_file())
    act = sorted(p.relative_to(actual) for p in actual.rglob("*") if p.is_file()
                 and p.name != "_tierckpt_manifest.json")
    assert exp == act, f"file lists differ: {exp} vs {act}"
    for rel in exp:
        assert same_bytes(expected / rel, actual / rel), f"{rel} differs"

"""Fixtures for the tierckpt Python tests: real tierckptd processes from the
installed package, real multi-process gloo groups.

Each agent gets its own tmpfs root under /dev/shm, its own socket and its own
durable directory, all removed afterwards. Multi-rank tests start ranks from a
forkserver that has torch imported (a rank starts in milliseconds, and is
forked from a single-threaded process, never from this one with its thread
pools) and rendezvous through a file store in the test's tmp dir.
"""
from __future__ import annotations

import datetime
import json
import shutil
import subprocess
import sys
import time
import traceback
import uuid
import warnings
from pathlib import Path

import pytest

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from tierckpt import agent as tc_agent  # noqa: E402
from tierckpt.torch import CheckpointConfig  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "harness"))
from agent_harness import SHM, AgentProcess  # noqa: E402  (tests/harness)
from strict import pytest_runtest_makereport  # noqa: E402,F401  (a skip fails in strict runs)


def pytest_configure(config):
    # DCP warns on every single-process (no_dist) save and load.
    config.addinivalue_line("filterwarnings", "ignore:torch.distributed is disabled:UserWarning")


class Agent(AgentProcess):
    """One tierckptd with its own root, socket and durable dir."""

    ready_timeout_s = 20
    stop_timeout_s = 60
    error = AssertionError

    def __init__(self, workdir: Path, extra_args: list[str], durable: str | None = None, env: dict | None = None):
        # env: the agent's whole environment; None = this process's
        super().__init__(str(workdir / "agent.sock"), cli=tc_agent.find_binary("tierckpt"),
                         output=workdir / "agent.log", env=env)
        self.workdir = workdir
        self.root = SHM / f"tierckpt-pytest-{uuid.uuid4().hex[:12]}"
        self.durable = durable if durable is not None else workdir / "durable"  # e.g. an s3:// URL
        self.extra_args = extra_args

    def start(self) -> "Agent":
        return self.launch([tc_agent.find_binary("tierckptd"), "--socket", self.socket, "--root", str(self.root),
                            "--durable", str(self.durable), "--log-level", "debug", *self.extra_args])

    def restart(self) -> "Agent":
        self.kill()
        return self.start()

    def config(self, ns: str, **kwargs) -> CheckpointConfig:
        kwargs.setdefault("auto_start", False)
        return CheckpointConfig(ns, socket=self.socket, durable=str(self.durable), **kwargs)

    def cli(self, *args, check=True, timeout=120) -> subprocess.CompletedProcess:
        r = subprocess.run([tc_agent.find_binary("tierckpt"), "--socket", self.socket, *map(str, args)],
                           capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise AssertionError(f"tierckpt {' '.join(map(str, args))} -> {r.returncode}\n{r.stdout}\n{r.stderr}\n"
                                 f"agent log:\n{self.log_text()[-4000:]}")
        return r

    def steps(self, ns: str) -> dict[int, dict]:
        out = json.loads(self.cli("--json", "ls", ns).stdout)
        return {s["step"]: s for s in out["steps"] if s["namespace"] == ns}

    def wait_hashed(self, ns: str, step: int, timeout: float = 60) -> None:
        """Until the agent's hash of every object of the step is in its manifest. The Python writers
        seal without a checksum and the agent commits before it hashes (decision 68): bytes flipped
        before the hash lands are hashed as they are, which is what decision 68 says goes undetected,
        so a test that damages a step on purpose waits for this first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            manifest = json.loads(self.cli("--json", "show", ns, step).stdout)["manifest"]
            if all(o.get("checksum") for o in manifest["objects"]):
                return
            time.sleep(0.05)
        raise AssertionError(f"the agent did not hash step {ns}/{step} within {timeout} s:\n{self.log_text()[-3000:]}")

    def object_path(self, ns: str, step: int, name: str) -> Path:
        return next(self.root.rglob(f"{ns}/step_{step:010d}/{name}"))


@pytest.fixture
def agents(tmp_path):
    """Factory: agents(*extra_args, durable=None, env=None) starts a fresh agent (durable: its
    --durable base, default a directory of its own; env: its environment); all are killed and
    cleaned up at the end."""
    made: list[Agent] = []

    def make(*extra_args: str, durable: str | None = None, env: dict | None = None) -> Agent:
        workdir = tmp_path / f"agent{len(made)}"
        workdir.mkdir()
        a = Agent(workdir, list(extra_args) or ["--memory-budget", "512MiB"], durable=durable, env=env)
        made.append(a)
        return a.start()

    yield make
    for a in made:
        a.kill()
        shutil.rmtree(a.root, ignore_errors=True)
    tc_agent._clients.clear()


@pytest.fixture
def agent(agents):
    return agents()


# ---- multi-process gloo groups ----

_FORKSERVER_PRELOAD = ["torch", "torch.distributed.checkpoint", "tierckpt.torch", "states"]


def _rank_main(rank: int, fn, world_size: int, store_path: str, args: tuple) -> None:
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)  # ranks share two cores
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=60))
    try:
        try:
            fn(rank, world_size, *args)
        except BaseException as e:  # CheckpointException is a BaseException: report it as an error
            if isinstance(e, Exception):
                raise
            raise RuntimeError(f"{type(e).__name__}: {e}") from None
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_ranks(tmp_path: Path, world_size: int, fn, *args, timeout: float = 120) -> None:
    """Runs fn(rank, world_size, *args) in world_size processes joined in one gloo group.

    fn must be a module-level function (it is pickled by reference).

    Raises AssertionError with the failing rank's traceback.
    """
    store = tmp_path / f"store-{uuid.uuid4().hex[:8]}"
    mp.get_context("forkserver").set_forkserver_preload(_FORKSERVER_PRELOAD)
    ctx = mp.start_processes(_rank_main, args=(fn, world_size, str(store), args), nprocs=world_size,
                             join=False, start_method="forkserver")
    deadline = time.time() + timeout
    try:
        while not ctx.join(timeout=max(0.1, deadline - time.time())):
            if time.time() > deadline:
                raise AssertionError(f"ranks did not finish within {timeout} s")
    except (mp.ProcessRaisedException, mp.ProcessExitedException) as e:
        raise AssertionError(f"a rank failed:\n{e}") from None
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()


def format_exc() -> str:
    return traceback.format_exc()

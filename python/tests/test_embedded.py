"""The embedded default: with no agent on the socket, the client starts a
detached tierckptd through `tierckpt agent start`, reuses it afterwards, and
`tierckpt agent stop` ends it. Ranks starting at once share one agent."""
from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp

from conftest import SHM
from tierckpt import CheckpointConfig
from tierckpt import agent as tc_agent
from tierckpt.torch import TieredReader, TieredWriter


def _agent_pids(marker: str) -> list[int]:
    """Live tierckptd processes whose command line mentions marker."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().split(") ")[-1][0]
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"tierckptd") and marker.encode() in b" ".join(cmd) and state != "Z":
            pids.append(int(proc.name))
    return pids


@pytest.fixture
def embedded(tmp_path):
    """A config for an embedded agent on a private socket and root; kills what it started."""
    root = SHM / f"tierckpt-pytest-emb-{uuid.uuid4().hex[:12]}"
    cfg = CheckpointConfig("emb", socket=str(tmp_path / "run" / "agent.sock"), root=str(root),
                           memory_budget="128MiB", durable=str(tmp_path / "durable"), auto_start=True,
                           agent_log=str(tmp_path / "agent.log"))
    yield cfg
    tc_agent._clients.clear()
    for pid in _agent_pids(str(root)):
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(root, ignore_errors=True)


def _agent_pid(cfg) -> int:
    return json.loads(tc_agent.client(cfg).stats())["pid"]


def _wait_gone(pid: int, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0]
        except OSError:
            return
        if state == "Z":
            return
        time.sleep(0.05)
    raise AssertionError(f"tierckptd {pid} still runs {timeout} s after `agent stop`")


def test_starts_a_detached_agent_reuses_it_and_stop_ends_it(embedded, tmp_path):
    pid = _agent_pid(embedded)  # no agent yet: this starts one
    assert _agent_pids(str(embedded.root)) == [pid]
    assert os.getsid(pid) == pid, "the embedded agent is not in its own session (it would die with the trainer)"
    dcp.save({"t": torch.arange(10.0)}, storage_writer=TieredWriter(embedded, 1), no_dist=True)
    # Another process (a restarted trainer) finds and reuses the same agent.
    code = ("import json, torch, torch.distributed.checkpoint as dcp;"
            "from tierckpt import CheckpointConfig, agent;"
            "from tierckpt.torch import TieredReader;"
            f"cfg = CheckpointConfig(**{{k: v for k, v in {_fields(embedded)!r}.items()}});"
            "t = {'t': torch.zeros(10)}; dcp.load(t, storage_reader=TieredReader(cfg), no_dist=True);"
            "print(json.dumps([json.loads(agent.client(cfg).stats())['pid'], t['t'].tolist()]))")
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    other_pid, values = json.loads(out.stdout.strip().splitlines()[-1])
    assert other_pid == pid and values == list(map(float, range(10)))
    assert tc_agent.stop_agent(embedded) is True
    _wait_gone(pid)
    assert tc_agent.stop_agent(embedded) is False  # nothing left to stop
    # Committed steps outlive the agent: the next start recovers them.
    target = {"t": torch.zeros(10)}
    dcp.load(target, storage_reader=TieredReader(embedded), no_dist=True)
    assert torch.equal(target["t"], torch.arange(10.0)) and _agent_pid(embedded) != pid


def _fields(cfg) -> dict:
    return {k: getattr(cfg, k) for k in ("namespace", "socket", "root", "memory_budget", "durable", "auto_start",
                                         "agent_log")}


def test_without_auto_start_no_agent_is_a_clear_error(embedded):
    cfg = CheckpointConfig(**{**_fields(embedded), "auto_start": False})
    with pytest.raises(ConnectionError, match="auto_start is off"):
        tc_agent.client(cfg)
    assert _agent_pids(str(embedded.root)) == []


def test_durable_defaults_to_checkpoints_in_the_working_directory(embedded, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = CheckpointConfig(**{**_fields(embedded), "durable": None})
    assert tc_agent.client(cfg).durable_base.rstrip("/").endswith(str(tmp_path / "checkpoints"))


def test_an_explicit_durable_base_the_running_agent_does_not_allow_is_refused(embedded, tmp_path):
    tc_agent.client(embedded)
    tc_agent._clients.clear()
    other = CheckpointConfig(**{**_fields(embedded), "durable": str(tmp_path / "elsewhere")})
    with pytest.raises(PermissionError, match="--durable-allow"):
        tc_agent.client(other)
    assert not (tmp_path / "elsewhere").exists()


def _connect_at_once(barrier, fields, queue, use_lock):
    import warnings

    warnings.filterwarnings("ignore")
    cfg = CheckpointConfig(**fields)
    barrier.wait()
    if use_lock:
        queue.put(json.loads(tc_agent.client(cfg).stats())["pid"])
        return
    tc_agent.start_agent(cfg)  # bypass the per-node start lock: only the agent's root lock arbitrates
    deadline = time.time() + 30
    while True:
        try:
            queue.put(json.loads(tc_agent._connect(tc_agent.socket_path(cfg)).stats())["pid"])
            return
        except ConnectionError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)


@pytest.mark.parametrize("use_lock", [True, False], ids=["client", "raw-agent-start"])
def test_ranks_starting_at_once_share_one_agent(embedded, use_lock):
    ctx = multiprocessing.get_context("fork")
    n = 3
    barrier, queue = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_connect_at_once, args=(barrier, _fields(embedded), queue, use_lock))
             for _ in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=90)
        assert p.exitcode == 0, f"a starter failed with exit code {p.exitcode}"
    pids = {queue.get(timeout=5) for _ in range(n)}
    assert len(pids) == 1, f"ranks reached different agents: {pids}"
    time.sleep(0.5)  # a losing agent would still be exiting
    assert _agent_pids(str(embedded.root)) == list(pids)


# ---- issue 42 item 6: bad inputs an embedded start must name ---------------------------------

def test_a_bad_memory_budget_in_the_environment_is_named_at_once_not_an_agent_that_never_answered(
        embedded, monkeypatch):
    monkeypatch.setenv("TIERCKPT_MEMORY_BUDGET", "lots")
    cfg = dataclasses.replace(embedded, memory_budget=None, start_timeout_s=20)
    start = time.monotonic()
    with pytest.raises(RuntimeError) as e:
        tc_agent.client(cfg)
    took = time.monotonic() - start
    msg = str(e.value)
    assert "did not answer" not in msg, msg
    assert "memory_budget='lots' from environment variable TIERCKPT_MEMORY_BUDGET" in msg, msg
    assert '--memory-budget "lots" does not start with a number' in msg, msg  # the agent's own words
    assert took < 10, f"the start failure took {took:.1f} s to surface (start_timeout_s is 20)"
    assert _agent_pids(str(embedded.root)) == []


def test_a_regular_file_at_the_socket_path_is_named_not_taken_for_a_missing_agent(embedded):
    sock = Path(embedded.socket)
    sock.parent.mkdir(mode=0o700)
    sock.write_text("not a socket")
    cfg = dataclasses.replace(embedded, start_timeout_s=20)
    start = time.monotonic()
    with pytest.raises(RuntimeError) as e:  # TierckptError (failed precondition), not ConnectionError
        tc_agent.client(cfg)
    assert not isinstance(e.value, ConnectionError)
    msg = str(e.value)
    assert f"cannot connect to tierckptd at {sock}: it is a regular file, not a socket" in msg, msg
    assert "TIERCKPT_SOCKET" in msg, msg
    assert time.monotonic() - start < 10
    assert not Path(embedded.agent_log).exists(), "an agent start was tried"
    assert sock.read_text() == "not a socket"

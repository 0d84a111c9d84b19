"""torch-checkpointing 0.1.1's CheckpointManager (the released package from PyPI, pinned in
requirements-nodeps.txt) on tierckpt's storage backend (tierckpt.torch_checkpointing): a real agent,
real processes, a real SIGKILL."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch_checkpointing
from torch_checkpointing import CheckpointManager, CheckpointWriterConfig, SyncCheckpointSaverConfig

from conftest import run_ranks
from tierckpt.torch import wait_durable
from tierckpt.torch_checkpointing import TieredStorageConfig

WORKER = Path(__file__).with_name("torch_checkpointing_worker.py")


def test_the_pinned_release_is_the_one_tested():
    assert torch_checkpointing.__version__ == "0.1.1", torch_checkpointing.__version__


def _env(agent, **extra) -> dict:
    env = {**os.environ, "TIERCKPT_SOCKET": agent.socket, "TIERCKPT_AUTO_START": "0",
           "PYTHONPATH": os.pathsep.join([str(WORKER.parent), os.environ.get("PYTHONPATH", "")])}
    env.pop("TIERCKPT_WRITER_ID", None)
    env.update(extra)
    return env


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def _load(agent, ns: str, step: int, tmp_path: Path) -> str:
    r = subprocess.run([sys.executable, str(WORKER), "load", "--ns", ns, "--step", str(step)], env=_env(agent),
                       capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"the loader failed:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    (loaded,) = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    return loaded["digest"]


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def test_a_killed_trainers_committed_save_loads_byte_identical_and_its_staged_save_never_shows(agent, tmp_path):
    """The async saver (staging copy, writer process) saves step 10 (committed, persisted: persist_every
    10) and stages step 20, whose writer stops after its files, before the rename; the trainer is
    SIGKILLed there. Step 20 was never visible and goes with the trainer; step 10 loads in a new process
    byte-identical, from memory, and again from the durable tier once the agent lost its memory."""
    ns, marker, out = "tcp", tmp_path / "staged", tmp_path / "trainer.out"
    with open(out, "w") as stdout, open(tmp_path / "trainer.err", "w") as stderr:
        # SIGINT at its default: torch ends the writer processes of a dead trainer with SIGINT
        # (PR_SET_PDEATHSIG), which a trainer started as a background job of a non-interactive shell
        # (`nohup ... &`, or this suite started so) inherits ignored: its writers then outlive it
        # (docs/frameworks.md, "torch-checkpointing").
        trainer = subprocess.Popen([sys.executable, str(WORKER), "save", "--ns", ns],
                                   env=_env(agent, TIERCKPT_PERSIST_EVERY="10", TC_TEST_MARKER=str(marker)),
                                   stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    writers: list[int] = []
    try:
        deadline = time.monotonic() + 240
        while not marker.exists():
            assert trainer.poll() is None, f"the trainer exited {trainer.returncode}:\n" \
                                           f"{(tmp_path / 'trainer.err').read_text()[-5000:]}"
            assert time.monotonic() < deadline, f"step 20 was not staged within 240 s:\n{out.read_text()}\n" \
                                                f"{(tmp_path / 'trainer.err').read_text()[-5000:]}"
            time.sleep(0.1)
        (committed,) = [e for e in _events(out) if e["event"] == "committed"]
        steps = agent.steps(ns)
        assert steps[10]["memory"] == "committed", steps
        assert steps[20]["memory"] == "writing", steps  # its files are in the agent, uncommitted
        storage = TieredStorageConfig(socket=agent.socket).create_storage()
        assert storage.ls(Path(f"tierckpt://{ns}")) == ["step-10"]
        assert storage.exists(Path(f"tierckpt://{ns}/step-10/model_0.pt"))
        assert not storage.exists(Path(f"tierckpt://{ns}/step-20"))
        with pytest.raises(FileNotFoundError, match="not committed"):
            storage.read(Path(f"tierckpt://{ns}/step-20/model_0.pt"))
        writers = _children(trainer.pid)
        trainer.send_signal(signal.SIGKILL)
        trainer.wait(timeout=30)
        deadline = time.monotonic() + 60
        while 20 in agent.steps(ns):  # dropped when the save's connections close (the writer process dies too)
            assert time.monotonic() < deadline, (f"step 20 still in the agent 60 s after the kill: "
                                                 f"{agent.steps(ns)}; writer processes {writers} alive: "
                                                 f"{[p for p in writers if Path(f'/proc/{p}').exists()]}")
            time.sleep(0.1)
    finally:
        for pid in [trainer.pid, *writers]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        trainer.wait(timeout=30)

    assert _load(agent, ns, 10, tmp_path) == committed["digest"]
    assert "event=restore" not in agent.log_text()  # served from memory
    wait_durable(agent.config(ns), 10, 60)
    assert agent.steps(ns)[10]["durable"] == "committed", agent.steps(ns)
    # A new node: the agent's memory is gone; step 10 comes back from the durable tier, verified.
    agent.kill()
    shutil.rmtree(agent.root, ignore_errors=True)
    agent.start()
    assert _load(agent, ns, 10, tmp_path) == committed["digest"]
    assert "event=restore" in agent.log_text()
    assert sorted(agent.steps(ns)) == [10]


def _sync_manager(socket: str, **writer) -> CheckpointManager:
    cfg = CheckpointManager.Config(save=SyncCheckpointSaverConfig(writer_config=CheckpointWriterConfig(**writer)),
                                   storage_config=TieredStorageConfig(socket=socket))
    return cfg.build()


def _rank_state(rank: int) -> dict:
    return {"model": {"w": torch.randn(256, 33, generator=torch.Generator().manual_seed(rank))}, "rank": rank}


def _two_ranks_save_and_load(rank, world, socket):
    mgr = _sync_manager(socket)
    mgr.save("tierckpt://tcp2/step-5", _rank_state(rank))
    dist.barrier()
    into = {"model": {"w": torch.zeros(256, 33)}, "rank": -1}
    loaded = mgr.load("tierckpt://tcp2/step-5", into=into)
    assert torch.equal(into["model"]["w"], _rank_state(rank)["model"]["w"])  # in place
    assert loaded["rank"] == rank
    mgr.close()


def test_two_ranks_save_one_step_that_rank_0s_rename_commits(agent, tmp_path):
    """Each rank stores its own files over its own connection; torch-checkpointing's barrier, then
    rank 0's rename commits the step with both ranks' files; each rank loads its own back."""
    run_ranks(tmp_path, 2, _two_ranks_save_and_load, agent.socket)
    steps = agent.steps("tcp2")
    assert list(steps) == [5] and steps[5]["memory"] == "committed", steps
    manifest = json.loads(agent.cli("--json", "show", "tcp2", 5).stdout)["manifest"]
    names = sorted(o["name"] for o in manifest["objects"])
    assert names == ["model_0.pt", "model_1.pt", "rank_0.pt", "rank_1.pt"], names


def test_bad_input_gets_clear_errors(agent, tmp_path):
    storage = TieredStorageConfig(socket=agent.socket).create_storage()
    mgr = _sync_manager(agent.socket)
    state = {"model": {"w": torch.arange(10.0)}}
    mgr.save("tierckpt://bad/step-3", state)
    assert list(agent.steps("bad")) == [3]

    with pytest.raises(ValueError, match="is not a step directory.*tierckpt://<namespace>/<step dir>"):
        storage.write(Path("tierckpt://bad/loose.pt"), b"x")
    with pytest.raises(ValueError, match="outside a step"):
        storage.mkdir(Path("tierckpt://bad"))
    with pytest.raises(PermissionError, match="not a staged directory.*write_to_temp_dir=True"):
        storage.write(Path("tierckpt://bad/step-4/a.pt"), b"x")
    with pytest.raises(PermissionError, match="not a staged directory"):
        _sync_manager(agent.socket, write_to_temp_dir=False).save("tierckpt://bad/step-4", state)
    with pytest.raises(FileExistsError, match="A step is written once"):
        mgr.save("tierckpt://bad/step-3", state)  # a committed step's id
    with pytest.raises(FileExistsError, match="occupied destination") as e:
        storage.rename(Path("tierckpt://bad/tmp_step-3"), Path("tierckpt://bad/step-3"), is_directory=True)
    assert isinstance(e.value, OSError)
    with pytest.raises(NotImplementedError, match="the only rename is a staged step directory onto its own"):
        storage.rename(Path("tierckpt://bad/tmp_step-4"), Path("tierckpt://bad/step-5"), is_directory=True)
    with pytest.raises(FileNotFoundError, match="nothing was staged"):
        storage.rename(Path("tierckpt://bad/tmp_step-9"), Path("tierckpt://bad/step-9"), is_directory=True)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        mgr.load("tierckpt://bad/step-8", into={"model": {"w": torch.zeros(10)}})
    with pytest.raises(PermissionError, match="removed with their step"):
        storage.delete(Path("tierckpt://bad/step-3/model_0.pt"))
    # What a failed attempt staged is readable by no one and goes with an abort (rmdir of the staged dir).
    storage.write(Path("tierckpt://bad/tmp_step-6/a.pt"), b"staged")
    assert storage.exists(Path("tierckpt://bad/tmp_step-6")) and not storage.exists(Path("tierckpt://bad/step-6"))
    with pytest.raises(FileNotFoundError, match="staged step is not readable"):
        storage.read(Path("tierckpt://bad/tmp_step-6/a.pt"))
    storage.rmdir(Path("tierckpt://bad/tmp_step-6"))
    assert 6 not in agent.steps("bad")
    # rmdir of a committed step deletes it; the id can be saved again.
    loaded = mgr.load("tierckpt://bad/step-3", into={"model": {"w": torch.zeros(10)}})
    assert torch.equal(loaded["model"]["w"], torch.arange(10.0))
    storage.rmdir(Path("tierckpt://bad/step-3"))
    assert agent.steps("bad") == {}
    mgr.save("tierckpt://bad/step-3", {"model": {"w": torch.ones(10)}})
    assert storage.ls(Path("tierckpt://bad/step-3")) == ["model_0.pt"]
    mgr.close()
